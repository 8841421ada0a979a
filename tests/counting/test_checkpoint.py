"""Durable streams: save / load_stream continue exactly, and bad files are refused."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from randomgen import AESCounter, ChaCha, Xoshiro256

from dpcount.counting import (
    BinaryTree,
    CountingStream,
    FactorizationMechanism,
    Honaker,
    KaryTree,
    SqrtFactorization,
    load_stream,
    save_stream,
)
from dpcount.counting import checkpoint as ckmod
from dpcount.durable import format as fmt
from dpcount.privacy import ZeroNoise
from tests.mechanisms import FACTORIES
from tests.scratch import scratch

NAMES = sorted(FACTORIES)


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """This module's checkpoints go to :func:`scratch` (pytest's tmp_path if no tmpfs)."""
    with scratch(tmp_path) as folder:
        yield folder


T = 120
# (vector length or None, seed or None for the secure default generator)
VARIANTS = {"scalar": (None, 7), "vector": (3, 7), "scalar-secure": (None, None)}
# Chunk sizes: 1 means update(), more means update_many().
BEFORE = [1, 5, 1, 1, 17, 2, 1, 40, 3, 1]
AFTER = [2, 1, 1, 9, 1, 30, 1, 1, 4]


def data(dim: int | None, n: int = T, seed: int = 11) -> np.ndarray:
    """Whole numbers (valid for the discrete-noise mechanisms too)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-2, 4, size=(n,) if dim is None else (n, dim)).astype(np.float64)


def advance(stream: CountingStream, x: np.ndarray, start: int, stop: int, pattern: list[int]):
    """Feed x[start:stop] mixing update (chunk 1) and update_many; returns each release."""
    out: list[Any] = []
    t, i = start, 0
    while t < stop:
        n = min(pattern[i % len(pattern)], stop - t)
        i += 1
        if n == 1:
            out.append(stream.update(x[t] if x.ndim == 2 else float(x[t])))
        else:
            out.extend(stream.update_many(x[t : t + n]))
        t += n
    return out


def assert_identical(a: list[Any], b: list[Any]) -> None:
    """Same length, same types, same bits."""
    assert len(a) == len(b)
    for i, (u, v) in enumerate(zip(a, b, strict=True)):
        assert type(u) is type(v), (i, type(u), type(v))
        assert np.asarray(u).dtype == np.asarray(v).dtype, i
        assert np.asarray(u).tobytes() == np.asarray(v).tobytes(), (i, u, v)


def same_state(a: Any, b: Any) -> bool:
    """Equality of nested generator states (dicts of ints, strings and arrays)."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
        )
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def gen_state(stream: CountingStream) -> Any:
    return stream.mechanism._rng.bit_generator.state


# -- exact continuation -----------------------------------------------------------------
def _cases(points: dict[str, list[int]], vector_names: list[str] | None = None) -> list[Any]:
    """(name, variant, step) cases. Vector streams pre-draw 2^20 noise values (8 MiB,
    all saved); with exact discrete noise that takes a second, so those cases, and
    vector cases for names not in ``vector_names`` (if given), are marked slow."""
    cases = []
    for name in NAMES:
        for variant, steps in points.items():
            slow = variant == "vector" and (
                "discrete" in name or (vector_names is not None and name not in vector_names)
            )
            marks = [pytest.mark.slow] if slow else []
            cases += [pytest.param(name, variant, at, marks=marks) for at in steps]
    return cases


@pytest.mark.parametrize(
    ("name", "variant", "at"),
    _cases({"scalar": [0, 1, 37, T - 1, T], "vector": [37], "scalar-secure": [37, T]}),
)
def test_restored_stream_continues_bit_for_bit(
    name: str, variant: str, at: int, tmp_path: Path
) -> None:
    dim, seed = VARIANTS[variant]
    m = FACTORIES[name](T, seed)  # type: ignore[arg-type]
    x = data(dim)
    s = m.stream()
    advance(s, x, 0, at, BEFORE)
    path = tmp_path / "s.ckpt"
    save_stream(s, path)
    saved_state = gen_state(s)
    r = load_stream(path, expect=m)
    assert r.step == at and r.dim == (dim if at else None) and r.horizon == T
    # Nothing was drawn while rebuilding (the dense process draws z when made).
    assert same_state(gen_state(r), saved_state)
    assert_identical(advance(r, x, at, T, AFTER), advance(s, x, at, T, AFTER))
    assert same_state(gen_state(r), gen_state(s))
    assert r.mechanism.describe() == m.describe()


@pytest.mark.parametrize("at", [1024, 1030, 2049, 3001])
@pytest.mark.parametrize("dim", [None, 2])
def test_sqrt_restores_drawn_z_and_computed_noise(at: int, dim: int | None, tmp_path: Path) -> None:
    """Past the first block: z drawn ahead and noise computed ahead are both restored."""
    n = 5000
    m = SqrtFactorization(n, epsilon=1.0, delta=1e-6, rng=3)
    x = data(dim, n)
    s = m.stream()
    advance(s, x, 0, 1024, [1024])  # hands the whole first block over
    advance(s, x, 1024, at, [1, 7, 300])
    save_stream(s, tmp_path / "s.ckpt")
    r = load_stream(tmp_path / "s.ckpt", expect=m)
    assert r.live_count() == s.live_count()
    assert_identical(advance(r, x, at, n, [1, 900, 3]), advance(s, x, at, n, [1, 900, 3]))


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.random.Generator(AESCounter(key=2**100 + 5)),
        lambda: np.random.Generator(ChaCha(key=2**200 + 9, rounds=20)),
        lambda: np.random.Generator(np.random.Philox(4)),
        lambda: np.random.Generator(np.random.MT19937(4)),
        lambda: np.random.Generator(np.random.SFC64(4)),
    ],
    ids=["aes", "chacha", "philox", "mt19937", "sfc64"],
)
def test_generator_classes_round_trip(
    make: Callable[[], np.random.Generator], tmp_path: Path
) -> None:
    m = KaryTree(T, epsilon=1.0, k=5, noise="gaussian", delta=1e-6, rng=make())
    s = m.stream()
    advance(s, data(None), 0, 50, BEFORE)
    save_stream(s, tmp_path / "s.ckpt")
    r = load_stream(tmp_path / "s.ckpt")
    assert type(r.mechanism._rng.bit_generator) is type(m._rng.bit_generator)
    assert_identical(advance(r, data(None), 50, T, AFTER), advance(s, data(None), 50, T, AFTER))


def test_pending_samples_are_restored_not_redrawn(tmp_path: Path) -> None:
    m = BinaryTree(3000, epsilon=1.0, rng=5)
    s = m.stream()
    advance(s, data(None, 3000), 0, 30, BEFORE)
    pending = s._process._buffer.pending()  # type: ignore[union-attr]
    assert 0 < len(pending) < 1024
    save_stream(s, tmp_path / "s.ckpt")
    r = load_stream(tmp_path / "s.ckpt")
    assert r._process._buffer.pending() == pending  # type: ignore[union-attr]
    before = gen_state(r)
    r.update(1.0)  # served from the restored buffer: the generator does not move
    assert same_state(gen_state(r), before)
    s.update(1.0)
    # Past the buffer both draw the same new block.
    xs = np.ones(2000)
    np.testing.assert_array_equal(r.update_many(xs), s.update_many(xs))
    assert not same_state(gen_state(r), before)
    assert same_state(gen_state(r), gen_state(s))


@pytest.mark.parametrize(
    ("name", "variant", "at"),
    _cases(
        {"scalar": [41], "vector": [41], "scalar-secure": [41]},
        vector_names=["binary", "dense-sqrt", "honaker-gauss", "input-gauss", "sqrt-gauss"],
    ),
)
def test_saving_is_deterministic_and_a_fixed_point(
    name: str, variant: str, at: int, tmp_path: Path
) -> None:
    """Saving twice writes the same bytes; so does saving the loaded stream."""
    dim, seed = VARIANTS[variant]
    s = FACTORIES[name](T, seed).stream()  # type: ignore[arg-type]
    advance(s, data(dim), 0, at, BEFORE)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    save_stream(s, a)
    save_stream(s, b)
    save_stream(load_stream(a), c)
    assert a.read_bytes() == b.read_bytes() == c.read_bytes()


def test_extra_round_trip_and_validation(tmp_path: Path) -> None:
    s = KaryTree(T, epsilon=1.0, rng=1).stream()
    s.update(1.0)
    extra = {"pending": ["1,2.5,3.0\n"], "n": 3, "nested": {"ok": [1, 2.5, None, True]}}
    save_stream(s, tmp_path / "s", extra=extra)
    assert load_stream(tmp_path / "s").extra == extra
    save_stream(s, tmp_path / "s")
    assert load_stream(tmp_path / "s").extra is None
    with pytest.raises(ValueError, match=r"extra must be JSON-able"):
        save_stream(s, tmp_path / "s", extra={"a": {1, 2}})
    with pytest.raises(ValueError, match=r"extra must be JSON-able"):
        save_stream(s, tmp_path / "s", extra={"a": float("nan")})
    with pytest.raises(TypeError, match=r"extra must be a dict or None, got list"):
        save_stream(s, tmp_path / "s", extra=[1])  # type: ignore[arg-type]
    # What loading would refuse is refused when saving (and nothing is written).
    deep: Any = 0
    for _ in range(40):
        deep = [deep]
    cases = [
        ({"deep": deep}, r"header.extra.deep\[0\].*nested deeper than 32 levels"),
        ({"big": 2**200}, r"header.extra.big: integer of 201 bits is out of range"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=r"^cannot save: " + message):
            save_stream(s, tmp_path / "t", extra=bad)
        assert not (tmp_path / "t").exists()
    fine: Any = 0  # 29 nested lists (31 levels with the header and extra) are fine
    for _ in range(29):
        fine = [fine]
    save_stream(s, tmp_path / "t", extra={"fine": fine})
    assert load_stream(tmp_path / "t").extra == {"fine": fine}


def test_stream_at_its_horizon_stays_there(tmp_path: Path) -> None:
    s = Honaker(10, epsilon=1.0, rng=2).stream()
    s.update_many(np.ones(10))
    save_stream(s, tmp_path / "s")
    r = load_stream(tmp_path / "s")
    with pytest.raises(ValueError, match=r"stream is at its horizon \(10 steps released\)"):
        r.update(1.0)


# -- what cannot be saved ---------------------------------------------------------------
def test_with_sampler_copies_and_unknown_generators_are_not_saved(tmp_path: Path) -> None:
    s = KaryTree(T, epsilon=1.0, rng=1).with_sampler(ZeroNoise()).stream()
    with pytest.raises(ValueError, match=r"without a privacy guarantee \(with_sampler"):
        save_stream(s, tmp_path / "s")
    s = KaryTree(T, epsilon=1.0, rng=np.random.Generator(Xoshiro256(1))).stream()
    with pytest.raises(ValueError, match=r"generator runs on randomgen\.xoshiro256\.Xoshiro256"):
        save_stream(s, tmp_path / "s")
    assert not (tmp_path / "s").exists()


# -- the file ---------------------------------------------------------------------------
@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_file_is_private_and_written_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = KaryTree(T, epsilon=1.0, rng=1).stream()
    s.update(1.0)
    path = tmp_path / "s.ckpt"
    tmp = tmp_path / ".s.ckpt.k3x9q_2a.tmp"  # the atomic writer's temporary names
    tmp.write_bytes(b"leftover of a crash mid-write")
    os.chmod(tmp, 0o644)
    save_stream(s, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not tmp.exists()
    old = path.read_bytes()

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    s.update(2.0)
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match=r"disk full"):
        save_stream(s, path)
    assert path.read_bytes() == old  # the previous checkpoint is intact
    assert not list(tmp_path.glob(".s.ckpt.*.tmp"))


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, KaryTree]:
    m = KaryTree(100, epsilon=1.0, k=5, rng=4)
    s = m.stream()
    advance(s, data(None, 100), 0, 10, BEFORE)
    path = tmp_path / "s.ckpt"
    save_stream(s, path)
    return path, m


def forge(path: Path, mutate: Callable[[dict[str, Any], list[np.ndarray]], None]) -> Path:
    """Rewrite a checkpoint's header/arrays with a *valid* checksum (a hand-made file)."""
    header, arrays = fmt.parse(path.read_bytes())
    mutate(header, arrays)
    header["arrays"] = [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]
    text = json.dumps(header, sort_keys=True).encode()
    body = fmt.MAGIC + fmt.PREFIX.pack(fmt.FORMAT_VERSION, len(text)) + text
    body += b"".join(a.tobytes() for a in arrays)
    out = path.with_name("forged")
    out.write_bytes(body + hashlib.sha256(body).digest())
    return out


def test_wrong_magic_version_truncation_and_trailing_bytes(saved: tuple[Path, KaryTree]) -> None:
    path, _ = saved
    good = path.read_bytes()
    bad = path.with_name("bad")
    cases = [
        (b"", r"truncated: 0 bytes"),
        (b"t,private_count,std\n1,2,3\n", r"not a dpcount checkpoint \(wrong magic bytes\)"),
        (b"\x00" + good[1:], r"wrong magic bytes"),
        (good[:5], r"truncated: 5 bytes, shorter than the file signature"),
        (good[:20], r"truncated: 20 bytes, shorter than the file prefix"),
        (good + b"\n", r"corrupt: 1 unexpected bytes after the end"),
    ]
    # Cuts inside the header, the arrays and the digest.
    cases += [
        (good[:n], r"^checkpoint .*: truncated")
        for n in (40, 300, len(good) // 2, len(good) - 33, len(good) - 1)
    ]
    for content, message in cases:
        bad.unlink(missing_ok=True)  # a new file: truncating one is several times slower
        bad.write_bytes(content)
        with pytest.raises(ValueError, match=message):
            load_stream(bad)
    version = good[: len(fmt.MAGIC)] + (7).to_bytes(4, "big") + good[len(fmt.MAGIC) + 4 :]
    bad.write_bytes(version)
    reads = f"reads version {fmt.FORMAT_VERSION}"
    with pytest.raises(ValueError, match=rf"unknown checkpoint format version 7 .*{reads}"):
        load_stream(bad)


def test_every_flipped_byte_is_refused(saved: tuple[Path, KaryTree]) -> None:
    path, _ = saved
    good = bytearray(path.read_bytes())
    bad = path.with_name("bad")
    start = len(fmt.MAGIC) + 4  # after the version field
    for pos in range(start, len(good), 29):
        flipped = bytearray(good)
        flipped[pos] ^= 0x10
        bad.unlink(missing_ok=True)  # a new file: truncating one is several times slower
        bad.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match=r"checksum mismatch|truncated|unexpected bytes"):
            load_stream(bad)


def _set(*keys: Any, value: Any) -> Callable[[dict[str, Any], list[np.ndarray]], None]:
    def mutate(header: dict[str, Any], arrays: list[np.ndarray]) -> None:
        node = header
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


def _pending_array(header: dict[str, Any]) -> int:
    return int(header["process"]["buffer"]["pending"]["$array"])


def _replace_pending(array: np.ndarray) -> Callable[[dict[str, Any], list[np.ndarray]], None]:
    def mutate(header: dict[str, Any], arrays: list[np.ndarray]) -> None:
        arrays[_pending_array(header)] = array

    return mutate


def _drop(key: str) -> Callable[[dict[str, Any], list[np.ndarray]], None]:
    def mutate(header: dict[str, Any], arrays: list[np.ndarray]) -> None:
        del header[key]

    return mutate


FORGERIES = {
    "step-past-horizon": (_set("step", value=101), r"step 101 is outside \[0, horizon=100\]"),
    "step-not-process-step": (_set("step", value=11), r"process is at step 10, not 11"),
    "digits": (
        _set("process", "digits", value=[1, 2, 0, 0]),
        r"digits \[1, 2, 0, 0\] do not spell step 10",
    ),
    "digit-range": (
        _set("process", "digits", value=[9, 2, 0, 0]),
        r"digits\[0\] must be in \[-2, 2\], got 9",
    ),
    "sums-length": (
        _set("process", "sums", value=[[], [], [], []]),
        r"sums\[1\] must hold 2 values",
    ),
    "nan-sum": (_set("stream", "sum", value=None), r"sum must be a real number"),
    "int-sum": (_set("stream", "sum", value=3), r"sum must be a float"),
    "pending-dtype": (
        _replace_pending(np.zeros(5, dtype=np.int64)),
        r"pending must have dtype float64",
    ),
    "pending-nan": (_replace_pending(np.full(5, np.nan)), r"pending must be finite"),
    "pending-overfull": (
        _replace_pending(np.zeros(2000)),
        r"2000 pending samples, more than a block",
    ),
    "mechanism-class": (
        _set("mechanism", "class", value="os.system"),
        r"unknown mechanism class 'os.system'",
    ),
    "mechanism-kwargs": (
        _set("mechanism", "kwargs", "epsilon", value=-1.0),
        r"cannot rebuild the KaryTree: epsilon must be > 0",
    ),
    "mechanism-unknown-kwarg": (
        _set("mechanism", "kwargs", "evil", value=1),
        r"cannot rebuild the KaryTree: .*evil",
    ),
    "rng-class": (
        _set("rng", "class", value="numpy.RandomState"),
        r"unknown generator class 'numpy.RandomState'",
    ),
    "rng-state": (
        _set("rng", "state", "state", value="x"),
        r"corrupt generator state for numpy.PCG64",
    ),
    "sampler": (
        _set("sampler", "fields", "scale", value=0.5),
        r"calibrated differently.*saved sampler",
    ),
    "privacy": (_set("privacy", "epsilon", value=2.0), r"calibrated differently"),
    "missing-key": (_drop("step"), r"corrupt header \(missing: step; unknown: none\)"),
    "array-ref": (_set("stream", "sum", value={"$array": 99}), r"bad array reference"),
    "marker": (_set("stream", "sum", value={"$code": "import os"}), r"unknown marker '\$code'"),
    "extra": (_set("extra", value=[1]), r"extra must be a dict or null"),
    "process-keys": (
        _set("process", "evil", value=1),
        r"fields differ \(missing: none; unknown: evil\)",
    ),
}


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_hand_made_inconsistent_states_are_refused(case: str, saved: tuple[Path, KaryTree]) -> None:
    path, _ = saved
    mutate, message = FORGERIES[case]
    with pytest.raises(ValueError, match=r"^checkpoint .*forged: .*" + message):
        load_stream(forge(path, mutate))


def test_forged_unreadable_header_with_valid_checksum(saved: tuple[Path, KaryTree]) -> None:
    path, _ = saved
    body = fmt.MAGIC + fmt.PREFIX.pack(fmt.FORMAT_VERSION, 5) + b"{nope"
    path.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(ValueError, match=r"corrupt header \(valid checksum, unreadable header\)"):
        load_stream(path)


def test_other_dpcount_version_with_the_same_calibration_loads(
    saved: tuple[Path, KaryTree],
) -> None:
    path, m = saved
    r = load_stream(forge(path, _set("dpcount_version", value="0.0.1")), expect=m)
    assert r.step == 10


def test_forge_helper_reproduces_a_valid_file(saved: tuple[Path, KaryTree]) -> None:
    """The forgeries above differ from a loadable file only by their mutation."""
    path, m = saved
    assert load_stream(forge(path, lambda h, a: None), expect=m).step == 10


# -- expectations -----------------------------------------------------------------------
def test_a_different_mechanism_or_horizon_is_refused(saved: tuple[Path, KaryTree]) -> None:
    path, _ = saved
    assert load_stream(path, expect=KaryTree(100, epsilon=1.0, k=5, rng=99)).step == 10
    cases = [
        (
            KaryTree(200, epsilon=1.0, k=5),
            r"different KaryTree than expected \(horizon: saved 100, expected 200\)",
        ),
        (KaryTree(100, epsilon=0.5, k=5), r"epsilon: saved 1.0, expected 0.5"),
        (KaryTree(100, epsilon=1.0, k=7), r"k: saved 5, expected 7"),
        (KaryTree(100, epsilon=1.0, k=5, subtract=False), r"subtract: saved True, expected False"),
        (
            KaryTree(100, epsilon=1.0, k=5, noise="gaussian", delta=1e-6),
            r"delta: saved None, expected 1e-06.*noise: saved 'laplace', expected 'gaussian'",
        ),
        (Honaker(100, epsilon=1.0), r"it holds a KaryTree stream, expected a Honaker"),
        (BinaryTree(100, epsilon=1.0), r"expected a BinaryTree"),
    ]
    for other, message in cases:
        with pytest.raises(ValueError, match=r"^checkpoint .*s\.ckpt: .*" + message):
            load_stream(path, expect=other)


def test_factorization_checkpoint_checks_its_matrices(tmp_path: Path) -> None:
    L, R = SqrtFactorization(16, epsilon=1.0, delta=1e-6).dense_factorization()
    m = FactorizationMechanism(L, R, epsilon=1.0, delta=1e-6, noise="gaussian", rng=1)
    s = m.stream()
    s.update_many(np.ones(5))
    save_stream(s, tmp_path / "f")
    assert load_stream(tmp_path / "f", expect=m).step == 5
    other = FactorizationMechanism(
        np.tril(np.ones((16, 16))), np.eye(16), epsilon=1.0, delta=1e-6, noise="gaussian"
    )
    with pytest.raises(
        ValueError, match=r"L: saved an array of shape \(16, 16\), expected an array"
    ):
        load_stream(tmp_path / "f", expect=other)


def test_subclasses_are_not_saved(tmp_path: Path) -> None:
    class MyTree(KaryTree):
        pass

    s = MyTree(T, epsilon=1.0, rng=1).stream()
    s.update(1.0)
    with pytest.raises(ValueError, match=r"cannot checkpoint a stream of MyTree: .*must be one of"):
        save_stream(s, tmp_path / "s")


@pytest.mark.parametrize("name", NAMES)
def test_config_rebuilds_the_same_calibration(name: str) -> None:
    """config() is the constructor call: the rebuilt mechanism has the same sampler,
    guarantee and exact variances (what load_stream checks before continuing)."""
    m = FACTORIES[name](T, 0)
    config = m.config()
    assert "rng" not in config["kwargs"]
    other = ckmod._MECHANISMS[config["class"]](**config["kwargs"], rng=1)
    assert type(other) is type(m)
    assert other.sampler == m.sampler and other.privacy == m.privacy
    np.testing.assert_array_equal(other.variances(), m.variances())
    json.dumps({k: v for k, v in config["kwargs"].items() if k not in ("L", "R")})
