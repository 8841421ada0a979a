"""Checked reading of the plain state a noise process saves in a checkpoint.

A process state (``state_dict()``) is a dict of Python ints and floats, numpy
scalars and arrays, lists and dicts: what :mod:`dpcount.counting.checkpoint`
writes without pickle. ``load_state_dict`` reads it back through these helpers,
which check every field (type, range, shape, finiteness) and raise a
:class:`ValueError` naming the process and the field, so a state from a corrupt
or hand-edited file is refused before any of it is applied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "state_array",
    "state_int",
    "state_keys",
    "state_value",
    "state_values",
]

_REAL_TYPES = (float, int, np.floating, np.integer)

#: Largest magnitude of a saved noise value. A stream's values are sums of samples of
#: variance <= 2^900 (``MAX_SAMPLE_VARIANCE``) with bounded coefficients, so no stream
#: reaches 2^500; a larger one is forged, and a few of them could sum to infinity.
MAX_STATE_MAGNITUDE = 2.0**500
#: Largest magnitude of a saved integer value: int64 sums of a few of them stay exact.
MAX_STATE_INT = 2**62


def _fail(owner: str, field: str, problem: str) -> ValueError:
    return ValueError(f"corrupt {owner} state: {field} {problem}")


def state_keys(owner: str, state: object, keys: Iterable[str]) -> Mapping[str, Any]:
    """``state`` as a mapping holding exactly ``keys``."""
    if not isinstance(state, Mapping):
        raise ValueError(f"corrupt {owner} state: expected a dict, got {type(state).__name__}")
    want = set(keys)
    have = set(state)
    if have != want:
        missing = ", ".join(sorted(want - have)) or "none"
        unknown = ", ".join(sorted(str(k) for k in have - want)) or "none"
        raise ValueError(
            f"corrupt {owner} state: fields differ (missing: {missing}; unknown: {unknown})"
        )
    return state


def state_int(owner: str, field: str, value: object, lo: int, hi: int) -> int:
    """An int (not a bool) with ``lo <= value <= hi``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _fail(owner, field, f"must be an int, got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise _fail(owner, field, f"must be in [{lo}, {hi}], got {v}")
    return v


def state_value(owner: str, field: str, value: object, dim: int | None) -> Any:
    """One noise value: a finite real (``dim`` None) or a finite vector of shape ``(dim,)``.

    Scalars keep their type (Python float/int or numpy scalar), so a restored
    process computes with the same types as the saved one; arrays are copied.
    """
    if dim is None:
        if isinstance(value, bool) or not isinstance(value, _REAL_TYPES):
            raise _fail(owner, field, f"must be a real number, got {type(value).__name__}")
        if isinstance(value, (int, np.integer)):
            if not -MAX_STATE_INT < int(value) < MAX_STATE_INT:
                raise _fail(owner, field, f"must have magnitude < 2^62, got {int(value)}")
        elif not math.isfinite(float(value)):
            raise _fail(owner, field, f"must be finite, got {value!r}")
        elif not abs(float(value)) <= MAX_STATE_MAGNITUDE:
            raise _fail(owner, field, f"must have magnitude <= 2^500, got {float(value)!r}")
        return value
    return state_array(owner, field, value, rows=None, dim=dim)


def state_values(
    owner: str, field: str, value: object, dim: int | None, length: int | None = None
) -> list[Any]:
    """A list of noise values (see :func:`state_value`), of ``length`` if given."""
    if not isinstance(value, list):
        raise _fail(owner, field, f"must be a list, got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise _fail(owner, field, f"must hold {length} values, got {len(value)}")
    return [state_value(owner, f"{field}[{i}]", v, dim) for i, v in enumerate(value)]


def state_array(
    owner: str,
    field: str,
    value: object,
    rows: int | None,
    dim: int | None,
    dtypes: tuple[type[np.generic], ...] = (np.float64, np.int64),
    allow_nan: bool = False,
) -> NDArray[Any]:
    """A finite array of one of ``dtypes``: shape ``(dim,)`` when ``rows`` is None, else
    ``(rows,)`` or ``(rows, dim)`` (``rows=-1``: any number of rows). Returns a copy."""
    if not isinstance(value, np.ndarray):
        raise _fail(owner, field, f"must be an array, got {type(value).__name__}")
    if not any(value.dtype == np.dtype(d) for d in dtypes):
        names = ", ".join(np.dtype(d).name for d in dtypes)
        raise _fail(owner, field, f"must have dtype {names}, got {value.dtype}")
    if rows is None:
        shape_ok = value.shape == (dim,)
        want = f"({dim},)"
    else:
        tail: tuple[int, ...] = () if dim is None else (dim,)
        shape_ok = value.ndim == 1 + len(tail) and value.shape[1:] == tail
        shape_ok = shape_ok and (rows < 0 or value.shape[0] == rows)
        want = str(("n" if rows < 0 else rows, *tail)).replace("'", "")
    if not shape_ok:
        raise _fail(owner, field, f"must have shape {want}, got {value.shape}")
    if value.dtype.kind == "f":
        bad = ~np.isfinite(value)
        if allow_nan:
            bad &= ~np.isnan(value)
        if bad.any():
            raise _fail(owner, field, "must be finite")
        with np.errstate(invalid="ignore"):
            if (np.abs(value) > MAX_STATE_MAGNITUDE).any():
                raise _fail(owner, field, "must hold values of magnitude <= 2^500")
    elif (
        value.dtype.kind in "iu"
        and value.size
        and not (int(np.min(value)) > -MAX_STATE_INT and int(np.max(value)) < MAX_STATE_INT)
    ):
        raise _fail(owner, field, "must hold integers of magnitude < 2^62")
    out: NDArray[Any] = value.copy()
    return out
