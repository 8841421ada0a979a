"""Bit generators a checkpoint may save, and the exact check of a saved state.

numpy's and randomgen's ``state`` setters are written for trusted input: they
copy arrays by the length they expect (an empty ``ChaCha`` block or
``AESCounter`` buffer reads out of bounds and crashes the interpreter), and
accept positions past their buffers (``Philox.buffer_pos``, ``MT19937.pos``,
``AESCounter.offset``), which read memory beyond them. So a state read from a
file is checked *before* it is handed to a setter: it must have exactly the
structure of the class's own ``state`` (the same keys, the same Python types,
arrays of the same dtype and shape), and every integer must lie in the range the
generator's C state can hold (:data:`_INT_RANGES`; an integer field without a
listed range is refused). Ranges from the state structs of numpy 2
(``numpy/random/src/{pcg64,philox,sfc64,mt19937}``) and randomgen 2
(``randomgen/src/aesctr/aesctr.h``: ``offset`` is a byte index into a 64-byte
buffer, read 8 bytes at a time; ``randomgen/src/chacha/chacha.h``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["bit_generator_name", "bit_generators", "check_generator_state"]

_U32 = (0, (1 << 32) - 1)
_FLAG = (0, 1)
_U128 = (0, (1 << 128) - 1)

#: (class name, path of the field) -> inclusive range (lo, hi) and the step it moves by
_INT_RANGES: dict[tuple[str, str], tuple[int, int, int]] = {
    **{
        (name, path): (*rng, 1)
        for name in ("numpy.PCG64", "numpy.PCG64DXSM")
        for path, rng in (
            ("state.state", _U128),
            ("state.inc", _U128),
            ("has_uint32", _FLAG),
            ("uinteger", _U32),
        )
    },
    ("numpy.Philox", "buffer_pos"): (0, 4, 1),
    ("numpy.Philox", "has_uint32"): (*_FLAG, 1),
    ("numpy.Philox", "uinteger"): (*_U32, 1),
    ("numpy.SFC64", "has_uint32"): (*_FLAG, 1),
    ("numpy.SFC64", "uinteger"): (*_U32, 1),
    ("numpy.MT19937", "state.pos"): (0, 624, 1),
    ("randomgen.AESCounter", "s.offset"): (0, 64, 8),
    ("randomgen.AESCounter", "has_uint32"): (*_FLAG, 1),
    ("randomgen.AESCounter", "uinteger"): (*_U32, 1),
    # randomgen's constructor takes any even number of rounds; 8, 12, 20 are the
    # standard ChaCha variants (and the bound keeps a forged file from making each
    # block take 2^30 rounds).
    ("randomgen.ChaCha", "state.rounds"): (2, 64, 2),
}


@functools.lru_cache(maxsize=1)
def bit_generators() -> dict[str, Callable[..., np.random.BitGenerator]]:
    """Bit generator classes whose state a checkpoint may restore, by qualified name."""
    npr = np.random
    out: dict[str, Callable[..., np.random.BitGenerator]] = {
        f"numpy.{cls.__name__}": cls
        for cls in (npr.PCG64, npr.PCG64DXSM, npr.Philox, npr.SFC64, npr.MT19937)
    }
    with contextlib.suppress(ImportError):
        from randomgen import AESCounter, ChaCha

        out["randomgen.AESCounter"] = AESCounter
        out["randomgen.ChaCha"] = ChaCha
    return out


def bit_generator_name(bit_generator: np.random.BitGenerator) -> str:
    """The checkpoint name of a bit generator's class; ValueError if it is not supported."""
    cls = type(bit_generator)
    name = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
    if bit_generators().get(name) is not cls:
        raise ValueError(
            f"cannot checkpoint a stream whose generator runs on {cls.__module__}.{cls.__name__}; "
            f"supported: {', '.join(sorted(bit_generators()))}"
        )
    return name


@functools.cache
def _template(name: str) -> Any:
    """The state of a fresh generator of class ``name`` (its exact structure)."""
    return bit_generators()[name](0).state


def check_generator_state(name: str, state: Any) -> None:
    """Check that ``state`` has exactly the structure of a ``name`` generator's state and
    every integer is in range; ValueError naming the field otherwise."""
    if name not in bit_generators():
        raise ValueError(
            f"unknown generator class {name!r:.60} "
            f"(supported: {', '.join(sorted(bit_generators()))})"
        )
    _check_node(name, "", _template(name), state)


def _check_node(name: str, path: str, want: Any, got: Any) -> None:
    where = f"rng.state.{path}" if path else "rng.state"
    if isinstance(want, dict):
        _check_dict(name, path, where, want, got)
    elif isinstance(want, np.ndarray):
        _check_array(where, want, got)
    elif isinstance(want, str):
        if got != want:
            raise ValueError(f"{where} must be {want!r}, got {got!r:.80}")
    elif isinstance(want, (int, np.integer)) and not isinstance(want, bool):
        _check_int(name, path, where, got)
    else:  # pragma: no cover - no supported generator has other field types
        raise ValueError(f"{where}: unsupported field type {type(want).__name__}")


def _check_dict(name: str, path: str, where: str, want: dict[str, Any], got: Any) -> None:
    """``got`` has exactly ``want``'s keys, and each value checks against ``want``'s."""
    if not isinstance(got, dict) or set(got) != set(want):
        keys = sorted(want)
        raise ValueError(f"{where} must be a dict with keys {keys}, got {got!r:.80}")
    for key in sorted(want):
        _check_node(name, f"{path}.{key}" if path else key, want[key], got[key])


def _check_array(where: str, want: np.ndarray[Any, Any], got: Any) -> None:
    """``got`` is an array of ``want``'s dtype and shape."""
    if not isinstance(got, np.ndarray) or got.dtype != want.dtype or got.shape != want.shape:
        what = f"{type(got).__name__}" + (
            f" {got.dtype}{got.shape}" if isinstance(got, np.ndarray) else ""
        )
        raise ValueError(f"{where} must be a {want.dtype} array of shape {want.shape}, got {what}")


def _check_int(name: str, path: str, where: str, got: Any) -> None:
    """``got`` is an int (not a bool) in the listed range of field ``path`` of ``name``."""
    if isinstance(got, bool) or not isinstance(got, int):
        raise ValueError(f"{where} must be an int, got {got!r:.80}")
    bounds = _INT_RANGES.get((name, path))
    if bounds is None:
        raise ValueError(f"{where}: no known range for this field of {name}")
    lo, hi, step = bounds
    if not lo <= got <= hi or (got - lo) % step:
        every = f" in steps of {step}" if step > 1 else ""
        raise ValueError(f"{where} must be in [{lo}, {hi}]{every}, got {got}")
