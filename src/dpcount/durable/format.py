"""The checkpoint file codec: framing, checksum, values and arrays. No DP here.

File format (version 1), no pickle — decoding never executes code::

    magic       17 bytes: 0x89 "DPCOUNT-CKPT" CR LF 0x1A LF (as PNG: catches text-mode
                mangling and is not valid UTF-8)
    version     uint32, big-endian (1)
    header_len  uint64, big-endian
    header      header_len bytes of UTF-8 JSON (sorted keys)
    arrays      the raw little-endian C-order bytes of each array listed in
                header["arrays"] (dtype, shape), one after the other
    sha256      32 bytes: SHA-256 of everything above

Inside the header, an array is ``{"$array": index}``, a numpy scalar
``{"$scalar": dtype, "value": v}`` and a fraction ``{"$fraction": [num, den]}``;
floats are written with Python's shortest round-trip repr, so they are exact.

**Trust model.** The SHA-256 detects accidents (a torn write, a flipped bit), not
tampering: whoever can write the file recomputes it. :func:`parse` and
:func:`decode` therefore treat the content as hostile and bound everything
before any of it reaches numpy or a constructor: nesting depth
(:data:`MAX_DEPTH`), integer magnitude (below 2**128, the largest value a
supported generator state holds), finite floats only (no ``NaN``/``Infinity``
tokens, no overflow to infinity), a fixed set of array dtypes and at most 3
dimensions, sizes that match the file's length. Every refusal is a
:class:`ValueError` naming the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DTYPES",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_DEPTH",
    "MAX_INT",
    "PREFIX",
    "Encoder",
    "decode",
    "encode_file",
    "parse",
]

MAGIC = b"\x89DPCOUNT-CKPT\r\n\x1a\n"
#: 2: seeded batch noise of the column-normalized and row-scaled BLT changed (0.5, chunked)
FORMAT_VERSION = 2
PREFIX = struct.Struct(">IQ")  # format version, header length
_DIGEST = hashlib.sha256().digest_size

#: array dtypes a checkpoint may hold (little-endian), nothing else is read
DTYPES = frozenset({"<f8", "<i8", "<u8", "<i4", "<u4", "|u1", "|b1"})
#: deepest nesting of lists/dicts a header may have (the deepest legitimate one is ~6)
MAX_DEPTH = 32
#: integers in a header are below this in magnitude (PCG64's 128-bit state is the largest)
MAX_INT = 1 << 128


# -- encoding ---------------------------------------------------------------------------
class Encoder:
    """Turns a value tree into JSON-able values, collecting its arrays."""

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
            if arr.dtype.str not in DTYPES:
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
        if dtype not in DTYPES:
            raise ValueError(f"cannot save {where}: numpy scalar of dtype {value.dtype}")
        return {"$scalar": dtype, "value": self.encode(value.item(), where)}


def encode_file(header: dict[str, Any], arrays: list[NDArray[Any]]) -> list[bytes]:
    """The file's bytes, in pieces, ending with the SHA-256 digest. ``header`` is
    JSON-able (from :class:`Encoder`); its ``arrays`` entry is filled in here."""
    header = {**header, "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]}
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False)
    head = text.encode("utf-8")
    pieces = [MAGIC, PREFIX.pack(FORMAT_VERSION, len(head)), head]
    pieces.extend(a.tobytes() for a in arrays)
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    pieces.append(digest.digest())
    return pieces


# -- decoding ---------------------------------------------------------------------------
class _HeaderError(ValueError):
    """A header that parses as JSON but breaks a bound (depth, number range)."""


def _no_constant(token: str) -> Any:
    raise _HeaderError(f"non-finite number {token} in the header")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _HeaderError(f"number {text[:40]} in the header overflows a float")
    return value


def _load_header(text: bytes) -> Any:
    """JSON without NaN/Infinity/overflowing floats; nesting depth at most MAX_DEPTH."""
    header = json.loads(
        text.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float
    )
    check_depth(header, "header")
    return header


def check_depth(value: Any, where: str) -> None:
    """Refuse lists/dicts nested deeper than :data:`MAX_DEPTH` and ints of magnitude
    :data:`MAX_INT` or more, naming the field (iterative: never recurses on hostile input)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, where)]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, (list, dict)):
            if depth >= MAX_DEPTH:
                raise _HeaderError(f"{path[:120]}: nested deeper than {MAX_DEPTH} levels")
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(
                (
                    child,
                    depth + 1,
                    f"{path}.{key[:40]}" if isinstance(key, str) else f"{path}[{key}]",
                )
                for key, child in items
            )
        elif isinstance(node, int) and not -MAX_INT < node < MAX_INT:
            raise _HeaderError(f"{path}: integer of {node.bit_length()} bits is out of range")


def parse(data: bytes) -> tuple[dict[str, Any], list[NDArray[Any]]]:
    """Check the framing and the checksum; return the header and the arrays."""
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):
            raise ValueError(f"truncated: {len(data)} bytes, shorter than the file signature")
        raise ValueError("not a dpcount checkpoint (wrong magic bytes)")
    pos = len(MAGIC)
    if len(data) < pos + PREFIX.size:
        raise ValueError(f"truncated: {len(data)} bytes, shorter than the file prefix")
    version, header_len = PREFIX.unpack_from(data, pos)
    if version != FORMAT_VERSION:
        raise ValueError(
            f"unknown checkpoint format version {version} (this dpcount reads "
            f"version {FORMAT_VERSION})"
        )
    pos += PREFIX.size
    if len(data) < pos + header_len + _DIGEST:
        raise ValueError(
            f"truncated: {len(data)} bytes, but the header alone needs {pos + header_len + _DIGEST}"
        )
    header: Any = None
    specs: list[tuple[str, tuple[int, ...]]] | None = None
    problem = "unreadable header"
    try:
        header = _load_header(data[pos : pos + header_len])
        specs = _array_specs(header)
    except (ValueError, RecursionError) as err:  # judged after the checksum
        problem = str(err) if isinstance(err, _HeaderError) else problem
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
        raise ValueError(f"corrupt header (valid checksum, {problem})")
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
        if dtype not in DTYPES or not isinstance(shape, list) or len(shape) > 3:
            return None
        if any(type(n) is not int or not 0 <= n < 1 << 62 for n in shape):
            return None
        specs.append((str(dtype), tuple(shape)))
    return specs


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def decode(node: Any, arrays: list[NDArray[Any]], where: str) -> Any:
    """Inverse of :class:`Encoder` (after :func:`parse`, which bounds depth and numbers);
    raises ValueError naming ``where`` on anything unexpected."""
    if node is None or isinstance(node, (bool, str, int, float)):
        return node
    if isinstance(node, list):
        return [decode(v, arrays, f"{where}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise ValueError(f"{where}: unexpected {type(node).__name__}")
    if "$array" in node:
        index = node["$array"]
        if set(node) != {"$array"} or type(index) is not int or not 0 <= index < len(arrays):
            raise ValueError(f"{where}: bad array reference {node!r:.80}")
        return arrays[index].copy()
    if "$scalar" in node:
        return _decode_scalar(node, where)
    if "$fraction" in node:
        pair = node["$fraction"]
        if (
            set(node) != {"$fraction"}
            or not isinstance(pair, list)
            or len(pair) != 2
            or any(type(v) is not int for v in pair)
            or pair[1] <= 0
        ):
            raise ValueError(f"{where}: bad fraction {node!r:.80}")
        return Fraction(pair[0], pair[1])
    out = {}
    for key, value in node.items():
        if key.startswith("$"):
            raise ValueError(f"{where}: unknown marker {key[:40]!r}")
        out[key] = decode(value, arrays, f"{where}.{key[:40]}")
    return out


def _decode_scalar(node: dict[str, Any], where: str) -> Any:
    if set(node) != {"$scalar", "value"} or node["$scalar"] not in DTYPES:
        raise ValueError(f"{where}: bad numpy scalar {node!r:.80}")
    dtype: str = node["$scalar"]
    value: Any = node["value"]
    kind = np.dtype(str(dtype)).kind
    ok = {"f": (float,), "i": (int,), "u": (int,), "b": (bool,)}[kind]
    if type(value) not in ok:
        raise ValueError(f"{where}: bad numpy scalar {node!r:.80}")
    if kind in "iu":
        info = np.iinfo(np.dtype(str(dtype)))
        if not int(info.min) <= int(value) <= int(info.max):
            raise ValueError(f"{where}: numpy scalar {value} out of range for {dtype}")
    return np.dtype(str(dtype)).newbyteorder("=").type(value)
