"""Crafted checkpoints of every registry mechanism and of the unbounded counter (issue 18
item 7): loading, then three updates, either works or raises ValueError / TypeError.

The quick tests are the reported reproducers (a subnormal BLT ``output_scale`` raised
ZeroDivisionError at load; forged noise values raised OverflowError, or summed to
infinity, on the first update) and a small crafted-field pass over every mechanism;
the slow ones fuzz every field, every array, random byte flips (checksum recomputed)
and truncations, in a subprocess (a crash shows as a return code). Generator states
are fuzzed by tests/counting/test_checkpoint_fuzz.py.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcount.counting import BLT, KaryTree, UnboundedCounter, load_stream, save_stream
from dpcount.counting.registry import MECHANISMS, build_mechanism
from dpcount.counting.unbounded import load_unbounded, save_unbounded
from dpcount.privacy.budget import Budget
from tests.counting.test_checkpoint_fuzz import (
    MAGIC,
    PREFIX,
    RAW,
    _set,
    load_here,
    paths,
    read_file,
    run_loader,
    write_file,
)
from tests.scratch import scratch

#: (noise, delta) a mechanism's quick checkpoint uses (the first its class accepts)
NOISES = [("discrete-gaussian", 1e-6), ("gaussian", 1e-6), ("laplace", None)]
#: crafted values for a header field
CRAFTED: list[Any] = [5e-324, 1e-310, -1.0, 0.0, 1e308, 2**62, "x", None, [], ("raw", "NaN")]
#: crafted values written into an array (its first entry, its first three, all)
CRAFTED_ARRAY: list[Any] = [5e-324, 1e308, -1e308, np.inf, np.nan, 2**62, -(2**63)]


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """This module's checkpoints go to tmpfs when available (see
    :func:`tests.scratch.scratch`)."""
    with scratch(tmp_path) as folder:
        yield folder


def _generator() -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(1))


def mechanism_file(
    tmp: Path, name: str, noise: str, delta: float | None, dim: int | None, steps: int = 5
) -> bytes:
    m = build_mechanism(
        name,
        horizon=8,
        budget=Budget(epsilon=1.0, delta=delta, noise=noise),
        rng=_generator(),
        bands=3,
    )
    s = m.stream()
    for _ in range(steps):
        s.update(np.ones(dim, dtype=np.int64) if dim else 1)
    path = tmp / f"{name}.ckpt"
    save_stream(s, path)
    return path.read_bytes()


def short_buffer(data: bytes, rows: int = 16) -> bytes:
    """The checkpoint with every noise buffer's pending samples cut to their first
    ``rows`` (a valid state: samples drawn ahead, fewer of them). A vector stream's
    buffer holds about 2^20 values (8 MiB), which made each of the thousands of fuzzed
    copies cost a write, a checksum and a load of 8 MiB; the fields and arrays fuzzed
    are the same."""
    header, arrays = read_file(data)
    for path in paths(header):
        node: Any = header
        for key in path:
            node = node[key]
        if path[-1] == "pending" and isinstance(node, dict) and "$array" in node:
            index = node["$array"]
            arrays[index] = arrays[index][:rows].copy()
    return write_file(header, arrays)


def any_mechanism_file(tmp: Path, name: str, dim: int | None = None) -> bytes:
    """A checkpoint of ``name`` with the first noise its class takes."""
    for noise, delta in NOISES:
        try:
            return mechanism_file(tmp, name, noise, delta, dim)
        except ValueError:
            continue
    raise AssertionError(f"no noise kind builds {name}")  # pragma: no cover


def unbounded_file(tmp: Path, inner: str, dim: int | None = None, steps: int = 6) -> bytes:
    c = UnboundedCounter(inner=inner, epsilon=1.0, delta=1e-6, noise="gaussian", rng=_generator())
    s = c.stream()
    for _ in range(steps):
        s.update(np.ones(dim) if dim else 1.0)
    path = tmp / f"unbounded-{inner}.ckpt"
    save_unbounded(s, path)
    return path.read_bytes()


def crafted(data: bytes, values: list[Any], array_values: list[Any]) -> Iterator[bytes]:
    """Every header field but the generator state replaced by each value; each array's
    first entry, first three entries and all entries set to each array value."""
    header, arrays = read_file(data)
    for path in paths(header):
        if path[0] == "rng" or any(isinstance(k, int) and k >= 2 for k in path):
            continue
        for value in values:
            forged = json.loads(json.dumps(header))
            if isinstance(value, tuple):
                _set(forged, path, RAW)
                yield write_file(forged, arrays, raw=value[1])
            else:
                _set(forged, path, value)
                yield write_file(forged, arrays)
    for i, arr in enumerate(arrays):
        for value in array_values:
            for stop in (1, 3, arr.size):
                flat = arr.copy().reshape(-1)
                if flat.size == 0:
                    continue
                try:
                    with np.errstate(all="ignore"):
                        flat[:stop] = value
                except (OverflowError, ValueError):
                    continue  # not representable in this dtype
                yield write_file(header, [*arrays[:i], flat.reshape(arr.shape), *arrays[i + 1 :]])


def flipped(data: bytes, count: int, seed: int) -> Iterator[bytes]:
    """Random byte flips in the header and arrays (the checksum recomputed), and
    truncations at random lengths."""
    rnd = random.Random(seed)
    body_end = len(data) - 32
    start = len(MAGIC) + PREFIX.size
    for _ in range(count):
        body = bytearray(data[:body_end])
        for _ in range(rnd.randint(1, 4)):
            at = rnd.randrange(start, body_end)
            body[at] ^= 1 << rnd.randrange(8)
        yield bytes(body) + hashlib.sha256(bytes(body)).digest()
        yield data[: rnd.randrange(len(data))]


def load_and_step(path: Path, unbounded: bool) -> str:
    """'loaded' or the exception's class name (after three updates on success)."""
    try:
        stream: Any = load_unbounded(path) if unbounded else load_stream(path)
        for _ in range(3):
            if unbounded or stream.step < stream.horizon:
                step = np.ones(stream.dim) if isinstance(stream.dim, int) else 1.0
                out = stream.update(step)
                assert np.all(np.isfinite(np.asarray(out, dtype=np.float64))), out
    except (ValueError, TypeError) as err:
        return type(err).__name__
    return "loaded"


def assert_clean(tmp: Path, files: Iterator[bytes], unbounded: bool = False) -> int:
    path = tmp / "case.ckpt"
    n = 0
    for data in files:
        path.unlink(missing_ok=True)  # a new file: truncating one is several times slower
        path.write_bytes(data)
        load_and_step(path, unbounded)  # anything but ValueError/TypeError propagates
        n += 1
    return n


# -- the reproducers --------------------------------------------------------------------------
def test_subnormal_blt_output_scale_is_refused_at_load(tmp_path: Path) -> None:
    """Reproducer: a subnormal ``output_scale`` raised ZeroDivisionError at load."""
    header, arrays = read_file(any_mechanism_file(tmp_path, "blt"))
    for value in (5e-324, 1e-310, 1e-300):
        header["mechanism"]["kwargs"]["output_scale"][0] = value
        result = load_here(tmp_path, write_file(header, arrays))
        assert result["outcome"] == "ValueError", result
        assert (
            "cannot rebuild the BLT: output_scale must be positive and finite, at least 1e-100"
            in (result["message"])
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"output_scale": [5e-324, 0.1]},
            "output_scale must be positive and finite, at least 1e-100",
        ),
        ({"buffer_decay": [5e-324, 0.5]}, r"buffer_decay must lie in \(0, 1\), at least 1e-100"),
        ({"buffer_decay": [0.3, 0.30000000000000004]}, "buffer_decay must be distinct"),
    ],
)
def test_blt_constructor_refuses_degenerate_parameters(kwargs: dict[str, Any], match: str) -> None:
    params = {"buffer_decay": [0.3, 0.5], "output_scale": [0.1, 0.1], **kwargs}
    with pytest.raises(ValueError, match=match):
        BLT(8, epsilon=1.0, delta=1e-6, **params)


@pytest.mark.parametrize("name", ["epsilon", "delta", "step_sensitivity"])
def test_budget_refuses_subnormal_values(name: str) -> None:
    """Reproducer: a subnormal epsilon raised ZeroDivisionError in the calibration."""
    fields: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-6, name: 5e-324}
    with pytest.raises(ValueError, match=f"{name} must be at least 2.2250738585072014e-308"):
        Budget(**fields)


@pytest.mark.parametrize("noise", ["laplace", "discrete-laplace"])
def test_three_forged_noise_values_are_refused_at_load(noise: str, tmp_path: Path) -> None:
    """Reproducer: three huge buffered samples in a tree's state summed to infinity
    (float noise) or raised OverflowError on the first update (integer noise)."""
    m = KaryTree(100, k=2, subtract=False, epsilon=1.0, noise=noise, rng=_generator())
    s = m.stream()
    for _ in range(5):
        s.update(1)
    save_stream(s, tmp_path / "tree.ckpt")
    header, arrays = read_file((tmp_path / "tree.ckpt").read_bytes())
    index = header["process"]["buffer"]["pending"]["$array"]
    arrays[index][:3] = 1e308 if noise == "laplace" else 2**62
    result = load_here(tmp_path, write_file(header, arrays))
    assert result["outcome"] == "ValueError", result
    expected = (
        "values of magnitude <= 2^500" if noise == "laplace" else "integers of magnitude < 2^62"
    )
    assert f"corrupt NoiseBuffer state: pending must hold {expected}" in result["message"]
    arrays[index][:3] = 2**61  # within int64 headroom, beyond this tree's sample bound
    if noise == "discrete-laplace":
        result = load_here(tmp_path, write_file(header, arrays))
        assert result["outcome"] == "ValueError", result
        assert "corrupt TreeNoiseProcess state: a buffered sample exceeds" in result["message"]


# -- quick crafted-field pass over every mechanism ----------------------------------------------
def test_crafted_fields_of_every_registry_mechanism_are_refused_cleanly(tmp_path: Path) -> None:
    """Each registry mechanism's checkpoint (horizon 8, its first noise kind) with its
    process state's and constructor arguments' fields replaced by subnormal, huge,
    negative, non-finite and wrong-typed values: every load refuses with ValueError or
    TypeError or loads and steps with finite outputs."""
    total = 0
    for name in MECHANISMS:
        data = any_mechanism_file(tmp_path, name)
        header, arrays = read_file(data)
        kwargs_only = {k: header[k] for k in ("mechanism", "process")}
        for forged in crafted(write_file(kwargs_only, arrays), [5e-324], [1e308]):
            forged_header, forged_arrays = read_file(forged)
            total += assert_clean(
                tmp_path, iter([write_file({**header, **forged_header}, forged_arrays)])
            )
    assert total > 100


# -- the full fuzz ------------------------------------------------------------------------------
FUZZ_LOADER_CASES = [(name, dim) for name in sorted(MECHANISMS) for dim in (None, 2)]


#: header fields a vector checkpoint differs in (the rest: the scalar cases)
VECTOR_FIELDS = ("dim", "stream", "process")


def load_in_batches(tmp: Path, files: Iterator[bytes], batch: int = 50) -> int:
    """Write the files ``batch`` at a time (a vector tree's checkpoint holds its 8 MiB
    noise buffer, so they are never all in memory or on disk) and load each batch in a
    fresh subprocess; assert only loads and ValueError/TypeError refusals."""
    total = 0
    paths_: list[Path] = []

    def flush() -> None:
        (tmp / "listing.txt").write_text("\n".join(str(p) for p in paths_))
        results = run_loader([str(tmp / "listing.txt")], timeout=1800)
        assert len(results) == len(paths_)
        bad = [r for r in results if r["outcome"] not in ("loaded", "ValueError", "TypeError")]
        assert not bad, bad[:5]
        for p in paths_:
            p.unlink()
        paths_.clear()

    for data in files:
        path = tmp / f"case-{len(paths_):05d}.ckpt"
        path.write_bytes(data)
        paths_.append(path)
        total += 1
        if len(paths_) == batch:
            flush()
    if paths_:
        flush()
    return total


def _vector_only(data: bytes, values: list[Any], array_values: list[Any]) -> Iterator[bytes]:
    header = read_file(data)[0]
    for forged in crafted(data, values, array_values):
        forged_header, forged_arrays = read_file(forged)
        if any(forged_header[k] != header[k] for k in header if k not in VECTOR_FIELDS):
            continue  # the scalar case covers the other fields
        yield write_file(forged_header, forged_arrays)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "dim"), FUZZ_LOADER_CASES)
def test_fuzzed_checkpoints_of_every_registry_mechanism(
    name: str, dim: int | None, tmp_path: Path
) -> None:
    """Scalar steps: every noise kind the mechanism takes, every field and array crafted,
    100 random byte flips and truncations. Vector steps: the first noise kind, the
    vector fields, 20 flips, with the noise buffer's pending samples cut to 16 rows
    (:func:`short_buffer`)."""
    total = 0
    for noise, delta in [*NOISES, ("discrete-laplace", None)]:
        try:
            data = mechanism_file(tmp_path, name, noise, delta, dim)
        except ValueError:
            continue
        if dim is None:
            total += load_in_batches(tmp_path, crafted(data, CRAFTED, CRAFTED_ARRAY))
            total += load_in_batches(tmp_path, flipped(data, 100, seed=total))
        else:
            data = short_buffer(data)
            cases = _vector_only(data, CRAFTED[:6], CRAFTED_ARRAY[:3])
            total += load_in_batches(tmp_path, cases)
            total += load_in_batches(tmp_path, flipped(data, 20, seed=total))
            break
    assert total > 50


@pytest.mark.slow
@pytest.mark.parametrize("inner", ["binary", "blt", "sqrt", "toeplitz"])
def test_fuzzed_unbounded_checkpoints(inner: str, tmp_path: Path) -> None:
    """The unbounded counter's checkpoint (its doubling state in ``extra``) fuzzed like
    the mechanisms' (in this process: no generator state is touched)."""
    for dim in (None, 2):
        data = unbounded_file(tmp_path, inner, dim)
        n = assert_clean(tmp_path, crafted(data, CRAFTED, CRAFTED_ARRAY), unbounded=True)
        n += assert_clean(tmp_path, flipped(data, 100, seed=dim or 0), unbounded=True)
        assert n > 200
