"""Hand-edited checkpoints never crash the loader (audit finding 3).

The SHA-256 of a checkpoint stops accidents, not an edited file (the checksum is
recomputed). These tests forge files with a valid checksum and load them in a
*subprocess*: a crash of the interpreter (a segfault in a bit generator's state
setter) shows as a negative return code instead of killing pytest. Every load
must either succeed (the mutation happened to be valid) or raise ValueError /
TypeError — never OverflowError, RecursionError, MemoryError or a signal.

The file format is read and written here with ``struct``/``json``/``hashlib``
from its documentation (docs/durable-streams.md §4), independently of
``dpcount.durable.format``; only the public ``save_stream`` / ``load_stream``
are used, so the same tests run against older dpcount versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from randomgen import AESCounter, ChaCha

from dpcount.counting import (
    FactorizationMechanism,
    KaryTree,
    SqrtFactorization,
    load_stream,
    save_stream,
)
from tests.scratch import scratch

MAGIC = b"\x89DPCOUNT-CKPT\r\n\x1a\n"
PREFIX = struct.Struct(">IQ")
VERSION = 2  # the format version this independent reader and writer expect
RAW = "@@RAW@@"  # a string replaced by raw JSON text (tokens json.dumps cannot write)

GENERATORS = {
    "PCG64": lambda: np.random.PCG64(1),
    "PCG64DXSM": lambda: np.random.PCG64DXSM(1),
    "Philox": lambda: np.random.Philox(1),
    "SFC64": lambda: np.random.SFC64(1),
    "MT19937": lambda: np.random.MT19937(1),
    "AESCounter": lambda: AESCounter(seed=1),
    "ChaCha": lambda: ChaCha(seed=1),
}


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """This module's checkpoints go to tmpfs when available (see
    :func:`tests.scratch.scratch`)."""
    with scratch(tmp_path) as folder:
        yield folder


# -- the file format, independently -------------------------------------------------------
def read_file(data: bytes) -> tuple[dict[str, Any], list[np.ndarray]]:
    version, size = PREFIX.unpack_from(data, len(MAGIC))
    assert data.startswith(MAGIC) and version == VERSION
    at = len(MAGIC) + PREFIX.size
    header = json.loads(data[at : at + size])
    at += size
    arrays = []
    for spec in header["arrays"]:
        dtype = np.dtype(spec["dtype"])
        count = int(np.prod(spec["shape"]))
        arr = np.frombuffer(data, dtype=dtype, count=count, offset=at)
        arrays.append(arr.reshape(spec["shape"]).copy())
        at += count * dtype.itemsize
    assert at + 32 == len(data)
    return header, arrays


def write_file(header: dict[str, Any], arrays: list[np.ndarray], raw: str = "null") -> bytes:
    """A file with a valid checksum; the string RAW in the header becomes ``raw``."""
    header = {**header, "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]}
    text = json.dumps(header, sort_keys=True).replace(json.dumps(RAW), raw).encode()
    body = MAGIC + PREFIX.pack(VERSION, len(text)) + text + b"".join(a.tobytes() for a in arrays)
    return body + hashlib.sha256(body).digest()


def base_file(tmp: Path, generator: str = "PCG64", kind: str = "tree", steps: int = 10) -> bytes:
    rng = np.random.Generator(GENERATORS[generator]())
    if kind == "dense":
        L, R = SqrtFactorization(16, epsilon=1.0, delta=1e-6).dense_factorization()
        m: Any = FactorizationMechanism(L, R, epsilon=1.0, delta=1e-6, noise="gaussian", rng=rng)
    else:
        m = KaryTree(100, epsilon=1.0, k=5, rng=rng)
    s = m.stream()
    for t in range(steps):
        s.update(np.ones(3) if kind == "vector" else float(t % 3))
    path = tmp / f"base-{generator}-{kind}-{steps}.ckpt"
    save_stream(s, path)
    return path.read_bytes()


# -- loading in a subprocess ---------------------------------------------------------------
LOADER = r"""
import json, sys
from pathlib import Path
import numpy as np
from dpcount.counting import load_stream

def report(path, case):
    print(json.dumps({"start": case}), flush=True)
    try:
        stream = load_stream(path)
        for _ in range(3):  # use the restored generator: a bad state may crash only now
            if stream.step < stream.horizon:
                stream.update(np.ones(stream.dim) if stream.dim else 1.0)
        out = {"case": case, "outcome": "loaded"}
    except Exception as err:
        out = {"case": case, "outcome": type(err).__name__, "message": str(err)[:300]}
    print(json.dumps(out), flush=True)

if sys.argv[1] == "--generate":  # large files: made here one at a time, not stored
    from tests.counting import test_checkpoint_fuzz as fuzz
    tmp, generator, kind, steps, values, max_list = sys.argv[2:]
    tmp = Path(tmp)
    base = fuzz.base_file(tmp, generator, kind, int(steps))
    path = tmp / "case.ckpt"
    cases = fuzz.mutations(base, getattr(fuzz, values), int(max_list), fuzz.VECTOR_FIELDS)
    for n, data in enumerate(cases):
        path.write_bytes(data)
        report(path, f"{kind}-{generator}-{n}")
else:
    for line in open(sys.argv[1]).read().split("\n"):
        if line:
            report(line, line)
"""


def run_loader(args: list[str], timeout: float) -> list[dict[str, Any]]:
    """Run the loader in one fresh interpreter; assert it did not crash."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    last = lines[-1] if lines else None
    assert proc.returncode == 0, (
        f"the loader died with return code {proc.returncode} at {last}; "
        f"stderr: {proc.stderr[-2000:]}"
    )
    return [line for line in lines if "outcome" in line]


def load_in_subprocess(paths: list[Path], timeout: float = 300) -> list[dict[str, Any]]:
    """Load every file in one fresh interpreter; assert it did not crash."""
    listing = paths[0].with_name("listing.txt")
    listing.write_text("\n".join(str(p) for p in paths))
    results = run_loader([str(listing)], timeout)
    assert len(results) == len(paths)
    return results


def assert_refused_cleanly(results: list[dict[str, Any]]) -> dict[str, int]:
    """Only loads and ValueError/TypeError refusals that name the file; returns counts."""
    bad = [r for r in results if r["outcome"] not in ("loaded", "ValueError", "TypeError")]
    assert not bad, bad[:5]
    unnamed = [r for r in results if "message" in r and not r["message"].startswith("checkpoint ")]
    assert not unnamed, unnamed[:5]
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return counts


def load_one(tmp: Path, data: bytes) -> dict[str, Any]:
    """Load one forged file in a subprocess (a generator state may crash the loader)."""
    path = tmp / "forged.ckpt"
    path.write_bytes(data)
    (result,) = load_in_subprocess([path], timeout=120)
    return result


def load_here(tmp: Path, data: bytes) -> dict[str, Any]:
    """Load one forged file in this process (for cases that raised, not crashed)."""
    path = tmp / "forged.ckpt"
    path.write_bytes(data)
    try:
        load_stream(path)
    except Exception as err:
        return {"outcome": type(err).__name__, "message": str(err)}
    return {"outcome": "loaded"}


# -- regression tests: the reported reproducers ----------------------------------------------
def _set(node: Any, keys: tuple[Any, ...], value: Any) -> None:
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value


@pytest.mark.parametrize(
    ("generator", "keys", "field"),
    [
        ("ChaCha", ("state", "block"), "rng.state.state.block"),
        ("ChaCha", ("state", "keysetup"), "rng.state.state.keysetup"),
        ("AESCounter", ("s", "state"), "rng.state.s.state"),
    ],
)
def test_empty_generator_array_is_refused_not_a_segfault(
    generator: str, keys: tuple[str, ...], field: str, tmp_path: Path
) -> None:
    """Reproducer: the generator's state array replaced by an empty list made the
    state setter read out of bounds (exit -11)."""
    header, arrays = read_file(base_file(tmp_path, generator))
    _set(header["rng"]["state"], keys, [])
    result = load_one(tmp_path, write_file(header, arrays))
    assert result["outcome"] == "ValueError"
    assert (
        f"corrupt generator state for randomgen.{generator}: {field} must be" in (result["message"])
    )


RANGE_CASES = [
    # Positions past the buffer: the setters accepted them, and the next draw read
    # memory beyond the buffer (Philox, MT19937). Structures the setter broadcast or
    # stored unchecked (SFC64, PCG64). AESCounter and ChaCha: randomgen refused these
    # itself (other messages), but accepted up to 2^31 - 1 ChaCha rounds per block.
    ("Philox", ("buffer_pos",), 1000, r"buffer_pos must be in \[0, 4\], got 1000"),
    ("MT19937", ("state", "pos"), -1, r"state.pos must be in \[0, 624\], got -1"),
    ("SFC64", ("state", "state"), [1], r"state.state must be a uint64 array of shape"),
    ("PCG64", ("has_uint32",), 7, r"has_uint32 must be in \[0, 1\], got 7"),
    ("AESCounter", ("s", "offset"), 61, r"s.offset must be in \[0, 64\] in steps of 8"),
    ("ChaCha", ("state", "rounds"), 2**30, r"state.rounds must be in \[2, 64\]"),
]


def test_generator_state_fields_are_range_checked(tmp_path: Path) -> None:
    """Each field of a generator state is checked against the range its C state holds
    (one subprocess loads all the cases)."""
    files = []
    for n, (generator, keys, value, _) in enumerate(RANGE_CASES):
        header, arrays = read_file(base_file(tmp_path, generator))
        _set(header["rng"]["state"], keys, value)
        path = tmp_path / f"range-{n}.ckpt"
        path.write_bytes(write_file(header, arrays))
        files.append(path)
    results = load_in_subprocess(files, timeout=120)
    for (generator, _, _, message), result in zip(RANGE_CASES, results, strict=True):
        assert result["outcome"] == "ValueError", (generator, result)
        assert "corrupt generator state for " in result["message"]
        assert re.search(message, result["message"]), result["message"]


def test_huge_number_is_refused_not_an_overflow(tmp_path: Path) -> None:
    """Reproducer: a forged huge ``delta`` raised OverflowError in the constructor."""
    header, arrays = read_file(base_file(tmp_path))
    header["mechanism"]["kwargs"]["delta"] = 10**400
    result = load_here(tmp_path, write_file(header, arrays))
    assert result["outcome"] == "ValueError", result
    assert (
        "header.mechanism.kwargs.delta: integer of 1329 bits is out of range" in (result["message"])
    )
    header["mechanism"]["kwargs"]["delta"] = 2**100  # within the header bound, not a kwarg
    result = load_here(tmp_path, write_file(header, arrays))
    assert result["outcome"] == "ValueError", result
    assert "mechanism.kwargs.delta: integer" in result["message"]


@pytest.mark.parametrize("raw", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_non_finite_numbers_are_refused(raw: str, tmp_path: Path) -> None:
    header, arrays = read_file(base_file(tmp_path))
    header["mechanism"]["kwargs"]["epsilon"] = RAW
    result = load_here(tmp_path, write_file(header, arrays, raw=raw))
    assert result["outcome"] == "ValueError", result
    assert "corrupt header (valid checksum, " in result["message"]
    assert "overflows a float" in result["message"] or "non-finite number" in result["message"]


@pytest.mark.parametrize(
    "keys", [("mechanism", "kwargs", "epsilon"), ("process", "sums"), ("privacy", "epsilon")]
)
def test_deep_nesting_is_refused_not_a_recursion_error(
    keys: tuple[str, ...], tmp_path: Path
) -> None:
    """Reproducer: a value nested ~900 deep raised RecursionError while loading."""
    header, arrays = read_file(base_file(tmp_path))
    _set(header, keys, RAW)
    result = load_here(tmp_path, write_file(header, arrays, raw="[" * 900 + "]" * 900))
    assert result["outcome"] == "ValueError", result
    assert f"header.{'.'.join(keys)}[0]" in result["message"]
    assert "nested deeper than 32 levels" in result["message"]


# -- the fuzz test -----------------------------------------------------------------------------
NESTED = "[" * 200 + "]" * 200
BAD_VALUES: list[Any] = [
    None,
    True,
    -1,
    0,
    2**64,
    2**200,
    10**400,
    -1e308,
    "",
    "x" * 5000,
    [],
    {},
    [0, 0, 0],
    [[[[]]]],
    {"$array": 0},
    {"$array": 10**6},
    {"$scalar": "<u8", "value": 2**70},
    {"$fraction": [1, 0]},
    {"$code": "import os"},
    ("raw", NESTED),
    ("raw", "Infinity"),
    ("raw", "1e999"),
]
#: the header fields a vector stream's checkpoint differs in (the rest: scalar cases)
VECTOR_FIELDS = ("dim", "stream", "process")
SMALL_BAD = [None, -1, 2**64, 10**400, "x", [], {}, ("raw", NESTED), ("raw", "NaN")]


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every dict key and list index below ``node`` (inner nodes too)."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in items:
        if not prefix and key == "arrays":
            continue  # recomputed by write_file
        yield (*prefix, key)
        if isinstance(child, (dict, list)):
            yield from paths(child, (*prefix, key))


def mutations(
    data: bytes, values: list[Any], max_list: int = 3, only: tuple[str, ...] = ()
) -> Iterator[bytes]:
    """The file with each header field (under the top-level keys ``only``, if given)
    replaced by each value, and each array damaged."""
    header, arrays = read_file(data)
    for path in paths(header):
        if any(isinstance(k, int) and k >= max_list for k in path):
            continue  # long lists: the first entries stand for the rest
        if only and path[0] not in only:
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
        flat = arr.reshape(-1)
        big = np.iinfo(arr.dtype).max if arr.dtype.kind in "iu" else 1e308
        for damaged in (
            flat[:0],
            np.append(flat, flat[:1]),
            flat.astype(np.float64 if arr.dtype.kind != "f" else np.uint64),
            np.full_like(arr, big),
            np.zeros((2, 2, 2), dtype=arr.dtype),
        ):
            forged_arrays = [*arrays[:i], damaged, *arrays[i + 1 :]]
            yield write_file(header, forged_arrays)


def write_cases(tmp: Path, files: Iterator[bytes]) -> list[Path]:
    out = []
    for n, data in enumerate(files):
        path = tmp / f"case-{n:05d}.ckpt"
        path.write_bytes(data)
        out.append(path)
    return out


def test_fuzzed_headers_never_crash_the_loader(tmp_path: Path) -> None:
    """Every field of a tree checkpoint (PCG64) replaced by wrong types, empty, huge and
    nested values, and every array damaged; the generator state of every supported
    class likewise. One subprocess loads all of them (about 10 s)."""

    def cases() -> Iterator[bytes]:
        yield from mutations(base_file(tmp_path), BAD_VALUES)
        for generator in GENERATORS:
            header, arrays = read_file(base_file(tmp_path, generator))
            only_rng = {"rng": header["rng"]}
            for mutated in mutations(write_file(only_rng, arrays), SMALL_BAD):
                forged_header, forged_arrays = read_file(mutated)
                yield write_file({**header, **forged_header}, forged_arrays)

    files = write_cases(tmp_path, cases())
    assert len(files) > 1000
    counts = assert_refused_cleanly(load_in_subprocess(files))
    assert counts.get("ValueError", 0) > 0.9 * len(files), counts


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "steps"), [("tree", 0), ("dense", 5)])
def test_fuzzed_checkpoints_of_every_kind_never_crash_the_loader(
    kind: str, steps: int, tmp_path: Path
) -> None:
    """A stream at step 0 and a FactorizationMechanism stream: every field and array."""
    files = write_cases(tmp_path, mutations(base_file(tmp_path, "PCG64", kind, steps), BAD_VALUES))
    assert_refused_cleanly(load_in_subprocess(files))


@pytest.mark.slow
@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_fuzzed_generator_states_never_crash_the_loader(generator: str, tmp_path: Path) -> None:
    """Every field of every supported generator's state, with the full list of values."""
    header, arrays = read_file(base_file(tmp_path, generator))

    def cases() -> Iterator[bytes]:
        for mutated in mutations(write_file({"rng": header["rng"]}, arrays), BAD_VALUES):
            forged_header, forged_arrays = read_file(mutated)
            yield write_file({**header, **forged_header}, forged_arrays)

    assert_refused_cleanly(load_in_subprocess(write_cases(tmp_path, cases())))


@pytest.mark.slow
def test_fuzzed_vector_checkpoint_never_crashes_the_loader(tmp_path: Path) -> None:
    """A vector stream (its checkpoint holds ~2^20 buffered values, 8 MiB): its own
    fields and arrays; the files are made one at a time inside the subprocess."""
    args = ["--generate", str(tmp_path), "PCG64", "vector", "7", "SMALL_BAD", "1"]
    results = run_loader(args, timeout=900)
    assert len(results) > 100
    assert_refused_cleanly(results)
