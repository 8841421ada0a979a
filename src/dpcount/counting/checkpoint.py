"""Durable streams: save a :class:`~dpcount.counting.CountingStream` and restore it.

``stream.save(path)`` writes a checkpoint; :func:`load_stream` rebuilds the stream,
which then continues exactly as the uninterrupted one would: the same outputs,
bit for bit, for the same inputs, and no noise value is ever drawn twice (the
generator's state and the samples it drew but the stream has not used yet are
both saved).

What a checkpoint holds:

* the mechanism's configuration (:meth:`CountingMechanism.config`: class name and
  constructor arguments; a :class:`~dpcount.counting.FactorizationMechanism`'s
  ``L`` and ``R``), from which it is rebuilt on load. The rebuilt sampler and
  privacy guarantee must equal the saved ones, or the checkpoint is refused (for
  example, a dpcount version that calibrates differently);
* the step, the vector length, the running sum (exact: ints stay ints);
* the noise process's state (``state_dict()``: the live noise values and the
  noise buffer's drawn-but-unused samples);
* the generator's class and full state, **including its key**;
* a small JSON ``extra`` dict of the caller's (the CLI keeps its unconfirmed
  output lines there).

**A checkpoint is as sensitive as the raw data.** The generator's key lets anyone
recompute every noise value the stream has drawn or will draw; with the released
outputs that gives back the exact data, and with future outputs the future data.
Files are created with mode 0600; store and delete them like the data itself.
A checkpoint must also be resumed at most once: two streams restored from one
file would add the *same* noise to whatever data each is given, and releasing
both reveals the difference of the data.

File format (version 1), no pickle — loading never executes code::

    magic       17 bytes: 0x89 "DPCOUNT-CKPT" CR LF 0x1A LF (as PNG: catches text-mode
                mangling and is not valid UTF-8)
    version     uint32, big-endian (1)
    header_len  uint64, big-endian
    header      header_len bytes of UTF-8 JSON (sorted keys): format, dpcount_version,
                mechanism, sampler, privacy, horizon, step, dim, stream (sum,
                integer), rng (class, state), process, extra, arrays
    arrays      the raw little-endian C-order bytes of each array listed in
                header["arrays"] (dtype, shape), one after the other
    sha256      32 bytes: SHA-256 of everything above

Inside the header, an array is ``{"$array": index}``, a numpy scalar
``{"$scalar": dtype, "value": v}`` and a fraction ``{"$fraction": [num, den]}``;
floats are written with Python's shortest round-trip repr, so they are exact.
The file is written to ``<path>.tmp`` in the same folder, flushed and fsynced,
renamed over ``path`` (:func:`os.replace`), and the folder is fsynced: a crash
leaves either the old or the new checkpoint, never a mix.

Loading refuses, with a :class:`ValueError` naming the file and the problem:
wrong magic bytes, an unknown format version, a truncated file, trailing bytes, a
checksum mismatch, an unknown mechanism or generator class, a state that does not
check out (e.g. step > horizon, digits that do not spell the step), a
recalibration that differs, and (with ``expect=``) a different mechanism or
horizon than the caller's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import struct
import sys
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount import __version__
from dpcount._state import state_array, state_value
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.blt import BLT
from dpcount.counting.dense import FactorizationMechanism
from dpcount.counting.honaker import Honaker
from dpcount.counting.input_perturbation import InputPerturbation
from dpcount.counting.smooth_binary import SmoothBinary
from dpcount.counting.sqrt import SqrtFactorization
from dpcount.counting.tree import BinaryTree, KaryTree

__all__ = ["FORMAT_VERSION", "MAGIC", "load_stream", "save_stream"]

MAGIC = b"\x89DPCOUNT-CKPT\r\n\x1a\n"
FORMAT_VERSION = 1
_PREFIX = struct.Struct(">IQ")  # format version, header length
_DIGEST = hashlib.sha256().digest_size

#: mechanism classes a checkpoint may name (rebuilt with their constructor)
_MECHANISMS: dict[str, type[CountingMechanism]] = {
    cls.__name__: cls
    for cls in (
        BinaryTree,
        KaryTree,
        Honaker,
        SmoothBinary,
        SqrtFactorization,
        InputPerturbation,
        FactorizationMechanism,
        BLT,
    )
}

#: array dtypes a checkpoint may hold (little-endian), nothing else is read
_DTYPES = frozenset({"<f8", "<i8", "<u8", "<i4", "<u4", "|u1", "|b1"})
_HEADER_KEYS = frozenset(
    {
        "arrays",
        "dim",
        "dpcount_version",
        "extra",
        "format",
        "horizon",
        "mechanism",
        "privacy",
        "process",
        "rng",
        "sampler",
        "step",
        "stream",
    }
)


# -- bit generators ---------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _bit_generators() -> dict[str, Callable[[], np.random.BitGenerator]]:
    """Bit generator classes whose state a checkpoint may restore, by qualified name."""
    npr = np.random
    out: dict[str, Callable[[], np.random.BitGenerator]] = {
        f"numpy.{cls.__name__}": cls
        for cls in (npr.PCG64, npr.PCG64DXSM, npr.Philox, npr.SFC64, npr.MT19937)
    }
    with contextlib.suppress(ImportError):
        from randomgen import AESCounter, ChaCha

        out["randomgen.AESCounter"] = AESCounter
        out["randomgen.ChaCha"] = ChaCha
    return out


def _bit_generator_name(bit_generator: np.random.BitGenerator) -> str:
    cls = type(bit_generator)
    name = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
    if _bit_generators().get(name) is not cls:
        raise ValueError(
            f"cannot checkpoint a stream whose generator runs on {cls.__module__}.{cls.__name__}; "
            f"supported: {', '.join(sorted(_bit_generators()))}"
        )
    return name


# -- the value codec --------------------------------------------------------------------
class _Encoder:
    """Turns a state tree into JSON-able values, collecting its arrays."""

    def __init__(self) -> None:
        self.arrays: list[NDArray[Any]] = []

    def encode(self, value: Any, where: str) -> Any:
        if isinstance(value, np.generic):  # first: np.float64 is a float subclass
            return self._scalar(value, where)
        if value is None or isinstance(value, (bool, str, int)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"cannot save {where}: non-finite float {value!r}")
            return value
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            if arr.dtype.byteorder == ">" or (
                arr.dtype.byteorder == "=" and sys.byteorder == "big"
            ):
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if arr.dtype.str not in _DTYPES:
                raise ValueError(f"cannot save {where}: array of dtype {arr.dtype}")
            self.arrays.append(arr)
            return {"$array": len(self.arrays) - 1}
        if isinstance(value, Fraction):
            return {"$fraction": [value.numerator, value.denominator]}
        if isinstance(value, (list, tuple)):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, Mapping):
            out = {}
            for key, v in value.items():
                if not isinstance(key, str) or key.startswith("$"):
                    raise ValueError(f"cannot save {where}: key {key!r}")
                out[key] = self.encode(v, f"{where}.{key}")
            return out
        raise ValueError(f"cannot save {where}: value of type {type(value).__name__}")

    def _scalar(self, value: np.generic, where: str) -> Any:
        dtype = value.dtype.newbyteorder("<").str
        if dtype not in _DTYPES:
            raise ValueError(f"cannot save {where}: numpy scalar of dtype {value.dtype}")
        return {"$scalar": dtype, "value": self.encode(value.item(), where)}


def _decode(node: Any, arrays: list[NDArray[Any]], where: str) -> Any:
    """Inverse of :class:`_Encoder` (after JSON); raises ValueError on anything unexpected."""
    if node is None or isinstance(node, (bool, str, int, float)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, f"{where}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise ValueError(f"{where}: unexpected {type(node).__name__}")
    if "$array" in node:
        index = node["$array"]
        if set(node) != {"$array"} or type(index) is not int or not 0 <= index < len(arrays):
            raise ValueError(f"{where}: bad array reference {node!r}")
        return arrays[index].copy()
    if "$scalar" in node:
        dtype, value = node.get("$scalar"), node.get("value")
        if set(node) != {"$scalar", "value"} or dtype not in _DTYPES:
            raise ValueError(f"{where}: bad numpy scalar {node!r}")
        kind = np.dtype(str(dtype)).kind
        ok = {"f": (float,), "i": (int,), "u": (int,), "b": (bool,)}[kind]
        if type(value) not in ok:
            raise ValueError(f"{where}: bad numpy scalar {node!r}")
        try:
            return np.dtype(str(dtype)).newbyteorder("=").type(value)
        except OverflowError:
            raise ValueError(f"{where}: bad numpy scalar {node!r}") from None
    if "$fraction" in node:
        pair = node["$fraction"]
        if (
            set(node) != {"$fraction"}
            or not isinstance(pair, list)
            or len(pair) != 2
            or any(type(v) is not int for v in pair)
            or pair[1] <= 0
        ):
            raise ValueError(f"{where}: bad fraction {node!r}")
        return Fraction(pair[0], pair[1])
    out = {}
    for key, value in node.items():
        if key.startswith("$"):
            raise ValueError(f"{where}: unknown marker {key!r}")
        out[key] = _decode(value, arrays, f"{where}.{key}")
    return out


def _fields(obj: Any) -> dict[str, Any]:
    """The compared fields of a dataclass instance (shallow, unlike dataclasses.asdict)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.compare}


def _sampler_description(sampler: Any) -> dict[str, Any]:
    """Class name and parameters of a sampler (its compared dataclass fields)."""
    if not dataclasses.is_dataclass(sampler) or isinstance(sampler, type):
        raise ValueError(
            f"cannot checkpoint a stream with sampler {sampler!r}: its parameters are unknown"
        )
    return {"class": type(sampler).__name__, "fields": _fields(sampler)}


def _canonical(value: Any) -> str:
    """A value without arrays as canonical JSON (for equality checks and messages)."""
    enc = _Encoder()
    text = json.dumps(enc.encode(value, "value"), sort_keys=True, allow_nan=False)
    if enc.arrays:
        raise ValueError("internal: arrays in a canonical value")
    return text


# -- save -------------------------------------------------------------------------------
def _check_extra(extra: Any) -> Any:
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict or None, got {type(extra).__name__}")
    try:
        text = json.dumps(extra, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"extra must be JSON-able (str keys, finite numbers): {err}") from None
    return json.loads(text)


def _pieces(stream: CountingStream, extra: Any) -> list[bytes]:
    """The checkpoint file's bytes, in pieces, ending with the SHA-256 digest."""
    m = stream.mechanism
    if m.privacy is None:
        raise ValueError(
            "cannot checkpoint a stream of a mechanism without a privacy guarantee "
            "(with_sampler is a testing hook)"
        )
    if _MECHANISMS.get(type(m).__name__) is not type(m):
        raise ValueError(
            f"cannot checkpoint a stream of {type(m).__name__}: a checkpoint rebuilds its "
            f"mechanism, which must be one of {', '.join(sorted(_MECHANISMS))}"
        )
    rng = m._rng
    enc = _Encoder()
    process = stream._process
    header = {
        "format": FORMAT_VERSION,
        "dpcount_version": __version__,
        "mechanism": enc.encode(m.config(), "mechanism config"),
        "sampler": enc.encode(_sampler_description(m.sampler), "sampler"),
        "privacy": enc.encode(_fields(m.privacy), "privacy guarantee"),
        "horizon": m.horizon,
        "step": stream.step,
        "dim": stream.dim,
        "stream": {"integer": stream._integer, "sum": enc.encode(stream._sum, "running sum")},
        "rng": {
            "class": _bit_generator_name(rng.bit_generator),
            "state": enc.encode(rng.bit_generator.state, "generator state"),
        },
        "process": None if process is None else enc.encode(process.state_dict(), "process state"),
        "extra": _check_extra(extra),
        "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in enc.arrays],
    }
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False)
    head = text.encode("utf-8")
    pieces = [MAGIC, _PREFIX.pack(FORMAT_VERSION, len(head)), head]
    pieces.extend(a.tobytes() for a in enc.arrays)
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    pieces.append(digest.digest())
    return pieces


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_path(path: object) -> str:
    """A checkpoint path: a str or os.PathLike naming a file (not bytes, not empty)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a str or os.PathLike, got {path!r} of type {type(path).__name__}"
        )
    name = os.fspath(path)
    if not isinstance(name, str) or not name:
        raise ValueError(f"path must name a file, got {path!r}")
    return name


def write_atomic(path: str | os.PathLike[str], pieces: list[bytes]) -> None:
    """Write ``pieces`` to ``path`` atomically: ``<path>.tmp`` (mode 0600) in the same
    folder, flush and fsync, :func:`os.replace`, fsync the folder."""
    target = os.path.abspath(os.fspath(path))
    tmp = target + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover from a crash mid-write
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(os.path.dirname(target))


def save_stream(
    stream: CountingStream, path: str | os.PathLike[str], extra: dict[str, Any] | None = None
) -> None:
    """Write a checkpoint of ``stream`` to ``path`` atomically (see the module docstring).

    Saving does not change the stream, and saving twice without steps in between
    writes identical bytes.

    Raises:
        ValueError: the mechanism has no privacy guarantee (a ``with_sampler``
            copy), its generator or sampler cannot be saved, or ``extra`` is not
            JSON-able.
        TypeError: ``extra`` is not a dict or None.
        OSError: the file cannot be written.
    """
    if not isinstance(stream, CountingStream):
        raise TypeError(f"stream must be a CountingStream, got {type(stream).__name__}")
    write_atomic(_check_path(path), _pieces(stream, extra))


# -- load -------------------------------------------------------------------------------
def _parse(data: bytes) -> tuple[dict[str, Any], list[NDArray[Any]]]:
    """Check the framing and the checksum; return the header and the arrays."""
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):
            raise ValueError(f"truncated: {len(data)} bytes, shorter than the file signature")
        raise ValueError("not a dpcount checkpoint (wrong magic bytes)")
    pos = len(MAGIC)
    if len(data) < pos + _PREFIX.size:
        raise ValueError(f"truncated: {len(data)} bytes, shorter than the file prefix")
    version, header_len = _PREFIX.unpack_from(data, pos)
    if version != FORMAT_VERSION:
        raise ValueError(
            f"unknown checkpoint format version {version} (this dpcount {__version__} reads "
            f"version {FORMAT_VERSION})"
        )
    pos += _PREFIX.size
    if len(data) < pos + header_len + _DIGEST:
        raise ValueError(
            f"truncated: {len(data)} bytes, but the header alone needs {pos + header_len + _DIGEST}"
        )
    header: Any = None
    specs: list[tuple[str, tuple[int, ...]]] | None = None
    with contextlib.suppress(ValueError, RecursionError):
        header = json.loads(data[pos : pos + header_len].decode("utf-8"))
        specs = _array_specs(header)
    if specs is not None:
        expected = pos + header_len + sum(_nbytes(d, s) for d, s in specs) + _DIGEST
        if len(data) < expected:
            raise ValueError(f"truncated: {len(data)} bytes, expected {expected}")
        if len(data) > expected:
            raise ValueError(f"corrupt: {len(data) - expected} unexpected bytes after the end")
    body = memoryview(data)[: len(data) - _DIGEST]
    if hashlib.sha256(body).digest() != data[len(data) - _DIGEST :]:
        raise ValueError("corrupt: SHA-256 checksum mismatch")
    if specs is None or not isinstance(header, dict):
        raise ValueError("corrupt header (valid checksum, unreadable header)")
    arrays: list[NDArray[Any]] = []
    at = pos + header_len
    for dtype_str, shape in specs:
        size = _nbytes(dtype_str, shape)
        dtype = np.dtype(dtype_str)
        arr = np.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=at)
        arrays.append(arr.reshape(shape).astype(dtype.newbyteorder("="), copy=True))
        at += size
    return header, arrays


def _array_specs(header: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    """The (dtype, shape) list of the header, or None if it is malformed."""
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        return None
    specs = []
    for spec in header["arrays"]:
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}:
            return None
        dtype, shape = spec["dtype"], spec["shape"]
        if dtype not in _DTYPES or not isinstance(shape, list) or len(shape) > 3:
            return None
        if any(type(n) is not int or n < 0 for n in shape):
            return None
        specs.append((str(dtype), tuple(shape)))
    return specs


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _field(header: Mapping[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    value = header[key]
    if isinstance(value, bool) and bool not in types:
        raise ValueError(f"corrupt header: {key} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise ValueError(f"corrupt header: {key} must be {what}, got {value!r}")
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and a.tobytes() == b.tobytes()
        )
    return bool(a == b) and (a is None) == (b is None)


def _describe_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return repr(value)


def _check_expected(config: Mapping[str, Any], expect: CountingMechanism) -> None:
    want = expect.config()
    if config["class"] != want["class"]:
        raise ValueError(
            f"it holds a {config['class']} stream, expected a {want['class']} "
            f"(refusing to continue a different mechanism)"
        )
    saved, wanted = config["kwargs"], want["kwargs"]
    diffs = [
        f"{key}: saved {_describe_value(saved.get(key))}, expected "
        f"{_describe_value(wanted.get(key))}"
        for key in sorted(set(saved) | set(wanted))
        if not _same(saved.get(key), wanted.get(key))
    ]
    if diffs:
        raise ValueError(
            f"it was saved for a different {config['class']} than expected ("
            + "; ".join(diffs)
            + ")"
        )


def _rebuild_generator(rng_header: Any, arrays: list[NDArray[Any]]) -> tuple[Any, Any]:
    """A new Generator of the saved class in the saved state; also the decoded state."""
    if not isinstance(rng_header, dict) or set(rng_header) != {"class", "state"}:
        raise ValueError("corrupt header: rng must hold class and state")
    name = rng_header["class"]
    classes = _bit_generators()
    if name not in classes:
        raise ValueError(
            f"unknown generator class {name!r} (supported: {', '.join(sorted(classes))})"
        )
    state = _decode(rng_header["state"], arrays, "rng.state")
    bit_generator = classes[name]()
    try:
        bit_generator.state = state
    except (ValueError, TypeError, KeyError, OverflowError) as err:
        raise ValueError(f"corrupt generator state for {name}: {err}") from None
    return np.random.Generator(bit_generator), state


def _restore(
    header: dict[str, Any], arrays: list[NDArray[Any]], expect: CountingMechanism | None
) -> CountingStream:
    if set(header) != _HEADER_KEYS:
        missing = ", ".join(sorted(_HEADER_KEYS - set(header))) or "none"
        unknown = ", ".join(sorted(set(header) - _HEADER_KEYS)) or "none"
        raise ValueError(f"corrupt header (missing: {missing}; unknown: {unknown})")
    if header["format"] != FORMAT_VERSION:
        raise ValueError(f"corrupt header: format {header['format']!r} != {FORMAT_VERSION}")
    saved_version = _field(header, "dpcount_version", (str,), "a string")
    config = _decode(header["mechanism"], arrays, "mechanism")
    if (
        not isinstance(config, dict)
        or set(config) != {"class", "kwargs"}
        or not isinstance(config["kwargs"], dict)
    ):
        raise ValueError("corrupt header: mechanism must hold class and kwargs")
    cls = _MECHANISMS.get(config["class"]) if isinstance(config["class"], str) else None
    if cls is None:
        raise ValueError(
            f"unknown mechanism class {config['class']!r} "
            f"(supported: {', '.join(sorted(_MECHANISMS))})"
        )
    if expect is not None:
        _check_expected(config, expect)
    generator, rng_state = _rebuild_generator(header["rng"], arrays)
    try:
        mechanism = cls(**config["kwargs"], rng=generator)
    except (TypeError, ValueError) as err:
        raise ValueError(f"cannot rebuild the {cls.__name__}: {err}") from None
    saved_sampler = _canonical(_decode(header["sampler"], arrays, "sampler"))
    saved_privacy = _canonical(_decode(header["privacy"], arrays, "privacy"))
    rebuilt_sampler = _canonical(_sampler_description(mechanism.sampler))
    rebuilt_privacy = _canonical(None if mechanism.privacy is None else _fields(mechanism.privacy))
    if saved_sampler != rebuilt_sampler or saved_privacy != rebuilt_privacy:
        raise ValueError(
            f"the rebuilt {cls.__name__} is calibrated differently from the saved one "
            f"(saved by dpcount {saved_version}, this is {__version__}): saved sampler "
            f"{saved_sampler}, guarantee {saved_privacy}; rebuilt sampler {rebuilt_sampler}, "
            f"guarantee {rebuilt_privacy}"
        )
    horizon = _field(header, "horizon", (int,), "an int")
    if horizon != mechanism.horizon:
        raise ValueError(
            f"corrupt header: horizon {horizon} != the mechanism's {mechanism.horizon}"
        )
    step = _field(header, "step", (int,), "an int")
    if not 0 <= step <= horizon:
        raise ValueError(f"corrupt header: step {step} is outside [0, horizon={horizon}]")
    dim = header["dim"]
    if dim is not None and (type(dim) is not int or dim < 1):
        raise ValueError(f"corrupt header: dim must be None or an int >= 1, got {dim!r}")
    stream = mechanism.stream()
    saved_stream = header["stream"]
    if not isinstance(saved_stream, dict) or set(saved_stream) != {"integer", "sum"}:
        raise ValueError("corrupt header: stream must hold integer and sum")
    if saved_stream["integer"] is not stream._integer:
        raise ValueError("corrupt header: stream.integer does not match the sampler")
    total = _decode(saved_stream["sum"], arrays, "stream.sum")
    process_state = header["process"]
    if (step == 0) != (process_state is None) or (step == 0 and dim is not None):
        raise ValueError(
            f"corrupt header: step {step} with dim {dim!r} and process {process_state!r:.40}"
        )
    if step > 0:
        total = _check_sum(total, dim, stream._integer)
        process = stream._start(dim)
        process.load_state_dict(_decode(process_state, arrays, "process"))
        if process.step != step:
            raise ValueError(f"corrupt state: the process is at step {process.step}, not {step}")
        stream._sum, stream._t = total, step
    elif not _same(total, stream._sum) or type(total) is not type(stream._sum):
        raise ValueError(f"corrupt header: running sum {total!r} at step 0")
    # Last: making a process may draw (the dense process draws z at once); the
    # generator must continue from the saved state.
    generator.bit_generator.state = rng_state
    extra = header["extra"]
    if extra is not None and not isinstance(extra, dict):
        raise ValueError("corrupt header: extra must be a dict or null")
    stream.extra = extra
    return stream


def _check_sum(total: Any, dim: int | None, integer: bool) -> Any:
    owner = "CountingStream"
    if dim is not None:
        dtype = np.int64 if integer else np.float64
        return state_array(owner, "sum", total, rows=None, dim=dim, dtypes=(dtype,))
    value = state_value(owner, "sum", total, None)
    want = (int, np.integer) if integer else (float, np.floating)
    if not isinstance(value, want):
        raise ValueError(
            f"corrupt {owner} state: sum must be {'an integer' if integer else 'a float'}, "
            f"got {value!r}"
        )
    return value


def load_stream(
    path: str | os.PathLike[str], expect: CountingMechanism | None = None
) -> CountingStream:
    """Restore a stream saved with :meth:`CountingStream.save`.

    The mechanism is rebuilt from the saved configuration with a generator in the
    saved state; the stream continues exactly where the saved one was (the same
    outputs for the same inputs, bit for bit). ``stream.extra`` is the saved
    ``extra`` dict (or None).

    Args:
        path: the checkpoint file.
        expect: if given, the mechanism the caller means to continue: the
            checkpoint must have been saved for the same class with the same
            constructor arguments (horizon, budget, noise, calibration,
            sensitivities, structure). Its own generator is not used.

    Raises:
        ValueError: naming the file and the problem (see the module docstring):
            not a checkpoint, unknown version, truncated, corrupt, inconsistent
            state, recalibrated differently, or not what ``expect`` describes.
        OSError: the file cannot be read.
    """
    name = _check_path(path)
    if expect is not None and not isinstance(expect, CountingMechanism):
        raise TypeError(f"expect must be a CountingMechanism or None, got {type(expect).__name__}")
    with open(name, "rb") as fh:
        data = fh.read()
    try:
        header, arrays = _parse(data)
        return _restore(header, arrays, expect)
    except ValueError as err:
        raise ValueError(f"checkpoint {name}: {err}") from None
    except (TypeError, KeyError, IndexError, AttributeError) as err:
        # The checksum only proves the file is as written; a hand-made file may
        # still hold values of unexpected types: refuse it like any corrupt one.
        raise ValueError(f"checkpoint {name}: corrupt ({type(err).__name__}: {err})") from None
