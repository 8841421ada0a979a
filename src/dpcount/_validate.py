"""Input validation for every public entry point of dpcount.

One module, one message style: the message names the parameter and echoes the
value, e.g. ``ValueError: epsilon must be > 0, got -1.0``. A wrong *type* raises
``TypeError``; a wrong *value* raises ``ValueError``. Nothing here uses
``assert`` (it vanishes under ``python -O``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MAX_EXACT_INTEGER",
    "MAX_EXACT_SUM",
    "as_array",
    "check_array_in_range",
    "check_bool",
    "check_callable",
    "check_choice",
    "check_data_array",
    "check_exact_integers",
    "check_generator",
    "check_index_array",
    "check_instance",
    "check_integer",
    "check_iterable",
    "check_probability",
    "check_real",
    "check_real_array",
    "check_real_dtype",
    "check_real_sequence",
    "check_scale_in_range",
    "check_shape",
    "check_size",
]


def _is_real(value: object) -> bool:
    kind = type(value)
    if kind is float or kind is int:  # the common case, without the ABC check
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_real(
    name: str,
    value: object,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float after checking its type and bounds.

    Args:
        name: parameter name used in the error message.
        value: the user's value.
        gt, ge, lt, le: optional strict/non-strict bounds.
        allow_inf: accept +inf/-inf (NaN is never accepted).

    Raises:
        TypeError: ``value`` is not a real number (bools are rejected).
        ValueError: ``value`` is NaN, infinite (unless allowed) or out of bounds.
    """
    if not _is_real(value):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    x = float(value)  # type: ignore[arg-type]
    if math.isnan(x):
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    if math.isinf(x) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {value!r}")
    if gt is not None and not x > gt:
        raise ValueError(f"{name} must be > {gt:g}, got {value!r}")
    if ge is not None and not x >= ge:
        raise ValueError(f"{name} must be >= {ge:g}, got {value!r}")
    if lt is not None and not x < lt:
        raise ValueError(f"{name} must be < {lt:g}, got {value!r}")
    if le is not None and not x <= le:
        raise ValueError(f"{name} must be <= {le:g}, got {value!r}")
    return x


def check_probability(name: str, value: object) -> float:
    """A probability strictly inside (0, 1), such as ``delta``."""
    x = check_real(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return x


def check_integer(name: str, value: object, *, ge: int | None = None, le: int | None = None) -> int:
    """Return ``value`` as an int; accepts Python and numpy integers, not bools or floats."""
    if type(value) is not int and (
        isinstance(value, bool) or not isinstance(value, numbers.Integral)
    ):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    n = int(value)
    if ge is not None and n < ge:
        raise ValueError(f"{name} must be >= {ge}, got {n}")
    if le is not None and n > le:
        raise ValueError(f"{name} must be <= {le}, got {n}")
    return n


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """One of a closed set of strings."""
    options = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {options}, got {value!r}")
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


# -- helpers for dpcount.apps (appended) -----------------------------------------------


def check_bool(name: str, value: object) -> bool:
    """A real ``bool`` (not an int or a string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} of type {type(value).__name__}")
    return bool(value)


def check_array_in_range(
    name: str, value: Any, *, low: float, high: float, shape: tuple[int, ...] | None = None
) -> NDArray[np.float64]:
    """A finite real array with every entry in ``[low, high]``, as float64.

    Args:
        name: parameter name for messages.
        value: array-like.
        low, high: inclusive bounds.
        shape: if given, the required shape (``-1`` entries match any length).

    Raises:
        TypeError: non-numeric data.
        ValueError: wrong shape, NaN/inf, or an entry outside ``[low, high]``
            (the message gives its index and value).
    """
    arr = as_array(name, value)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if shape is not None and (
        arr.ndim != len(shape)
        or any(s not in (-1, a) for s, a in zip(shape, arr.shape, strict=True))
    ):
        want = "(" + ", ".join("n" if s == -1 else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got shape {arr.shape}")
    out = np.asarray(arr, dtype=np.float64)
    bad = ~np.isfinite(out) | (out < low) | (out > high)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = "" if not idx else f" at index {idx[0] if len(idx) == 1 else idx}"
        raise ValueError(
            f"{name} must be finite and in [{low:g}, {high:g}], got {float(out[idx])!r}{where}"
        )
    return out


_MAX_EXACT_INT = 2**53


#: Largest |running sum| of integer steps (int64 holds 2^63 − 1; the rest is room for noise).
_MAX_INT_SUM = 2**62


def check_shape(name: str, value: object, *, max_dims: int = 2) -> tuple[int, ...]:
    """A shape: a positive int or a tuple of 1..``max_dims`` positive ints."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims: tuple[object, ...] = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        raise TypeError(
            f"{name} must be an int or a tuple of ints, got {value!r} of type "
            f"{type(value).__name__}"
        )
    if not 1 <= len(dims) <= max_dims:
        raise ValueError(f"{name} must have 1 to {max_dims} dimensions, got {value!r}")
    return tuple(check_integer(f"{name}[{i}]", d, ge=1) for i, d in enumerate(dims))


def check_real_sequence(
    name: str, value: object, *, length: int | None = None, gt: float | None = None
) -> tuple[float, ...]:
    """A sequence of finite reals (each checked with :func:`check_real`), optionally of a length."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be a sequence of real numbers, got {value!r} of type "
            f"{type(value).__name__}"
        )
    items = list(np.asarray(value).tolist()) if isinstance(value, np.ndarray) else list(value)
    if length is not None and len(items) != length:
        raise ValueError(f"{name} must have {length} entries, got {len(items)}: {value!r}")
    return tuple(check_real(f"{name}[{i}]", v, gt=gt) for i, v in enumerate(items))


def check_data_array(name: str, x: Any, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """A finite real array of exactly ``shape``, returned as a new float64 array.

    Raises:
        TypeError: non-numeric data.
        ValueError: a different shape, integers beyond 2^53, or NaN/inf (the first bad
            index is echoed).
    """
    arr = check_real_dtype(name, as_array(name, x))
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got shape {arr.shape}")
    return _finite_float64(name, arr)


def check_index_array(
    name: str, value: Any, size: int, *, one_dimensional: bool = False
) -> NDArray[np.int64]:
    """Integer indices in ``[0, size)`` (a scalar or an array), returned as int64.

    Booleans and floats (even whole ones) are rejected, so an indicator vector is
    never mistaken for a list of indices.

    Args:
        one_dimensional: require a 1-D sequence (an empty one is allowed), as for a
            list of items.

    Raises:
        TypeError: strings, or non-integer entries.
        ValueError: wrong dimension, or an index outside ``[0, size)`` (the first one
            is echoed, with its position for 1-D input).
    """
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be integers, got {value!r}")
    arr = as_array(name, value)
    if one_dimensional:
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got {value!r} (dtype {arr.dtype})")
    out = arr.astype(np.int64)
    bad = (out < 0) | (out >= size)
    if bad.any():
        first = int(np.argmax(bad.ravel()))
        where = f" at position {first}" if out.ndim == 1 else ""
        raise ValueError(
            f"{name} must be integers in [0, {size}), got {int(out.ravel()[first])}{where}"
        )
    return out


# -- helpers for the bad-input contract (appended; see README "Errors") -------------------

#: Integers of larger magnitude are not all representable in float64: refused, never rounded.
MAX_EXACT_INTEGER = _MAX_EXACT_INT


def as_array(name: str, value: Any, *, already: int | None = None) -> NDArray[Any]:
    """``np.asarray(value)`` with numpy's conversion errors re-raised naming ``name``.

    Ragged nested sequences (which numpy refuses with an "inhomogeneous shape"
    message) raise ValueError; objects numpy cannot convert at all raise TypeError.
    A list mixing floats with ints beyond 2^53 (which numpy would round) raises
    ValueError naming the index, or the step when ``already`` (earlier steps) is given.
    """
    try:
        arr = np.asarray(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a rectangular array of numbers, got a ragged sequence {value!r:.80}"
        ) from None
    except TypeError as err:
        raise TypeError(
            f"{name} must be an array of real numbers, got {value!r:.80}: {err}"
        ) from None
    if isinstance(value, (list, tuple)) and arr.dtype.kind == "f":
        _check_list_integers(name, value, arr, already)
    return arr


def _check_list_integers(name: str, value: Any, arr: NDArray[Any], already: int | None) -> None:
    """A list mixing floats and ints becomes float64, rounding ints beyond 2^53 silently.

    Such an int converts to a float of magnitude ≥ 2^53 (rounding is monotone and 2^53
    is a float), so the list is scanned only when the array holds one (cheap otherwise).
    """
    if arr.size == 0 or float(np.max(np.abs(arr))) < _MAX_EXACT_INT:
        return
    big = np.argwhere(np.abs(arr) >= _MAX_EXACT_INT)
    for where in big:
        item: Any = value
        for i in where:
            item = item[int(i)]
        if isinstance(item, numbers.Integral) and abs(int(item)) > _MAX_EXACT_INT:
            at = int(where[0]) if len(where) == 1 else tuple(int(i) for i in where)
            place = f"index {at}" if already is None else f"step {int(where[0]) + already + 1}"
            raise ValueError(
                f"{name} must hold integers of magnitude <= 2^53 (exact in float64); "
                f"{place} holds {int(item)}"
            )


def check_real_dtype(name: str, arr: NDArray[Any]) -> NDArray[Any]:
    """Bools become float64; anything but integer/float dtypes raises TypeError."""
    if arr.dtype == np.bool_:
        return arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    return arr


def check_exact_integers(
    name: str, arr: NDArray[Any], *, already: int = 0, steps: bool = True
) -> None:
    """Integer data must convert to float64 exactly: magnitudes above 2^53 are refused.

    Every computation path of dpcount works in float64 (or int64 after a float64
    check), so an int64/uint64 value beyond 2^53 would be rounded silently.
    """
    if not np.issubdtype(arr.dtype, np.integer) or arr.size == 0:
        return
    info = np.iinfo(arr.dtype)
    if info.max <= _MAX_EXACT_INT and info.min >= -_MAX_EXACT_INT:
        return
    big = (arr > _MAX_EXACT_INT) | (arr < -_MAX_EXACT_INT)
    if big.any():
        where = tuple(int(i) for i in np.argwhere(big)[0])
        at = f"step {where[0] + already + 1}" if steps else f"index {where}"
        raise ValueError(
            f"{name} must hold integers of magnitude <= 2^53 (exact in float64); "
            f"{at} holds {int(arr[where])}"
        )


def check_real_array(
    name: str, value: Any, *, ndim: int | None = None, allow_empty: bool = False
) -> NDArray[np.float64]:
    """A finite real array (optionally of ``ndim`` dimensions), returned as a float64 copy.

    Raises:
        TypeError: non-numeric data.
        ValueError: ragged input, the wrong number of dimensions, an empty array
            (unless allowed), integers beyond 2^53, or NaN/inf (the first bad index is echoed).
    """
    arr = check_real_dtype(name, as_array(name, value))
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    return _finite_float64(name, arr)


def _finite_float64(name: str, arr: NDArray[Any]) -> NDArray[np.float64]:
    """A float64 copy of a real array: integers beyond 2^53 and NaN/inf refused (the
    first bad index echoed)."""
    check_exact_integers(name, arr, steps=False)
    out = np.array(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        raise ValueError(f"{name} must be finite; index {bad} holds {float(out[bad])!r}")
    return out


def check_callable(name: str, value: object) -> Any:
    """A callable (e.g. a user-supplied function)."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r} of type {type(value).__name__}")
    return value


def check_iterable(name: str, value: object, *, allow_str: bool = False) -> list[Any]:
    """An iterable (not a string unless ``allow_str``), returned as a list."""
    if (isinstance(value, (str, bytes)) and not allow_str) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be an iterable (e.g. a list), got {value!r} of type "
            f"{type(value).__name__}"
        )
    return list(value)


def check_generator(name: str, value: object) -> np.random.Generator:
    """A :class:`numpy.random.Generator` (where ``rng`` was normalized by the caller)."""
    if not isinstance(value, np.random.Generator):
        raise TypeError(
            f"{name} must be a numpy.random.Generator, got {value!r} of type "
            f"{type(value).__name__} (normalize seeds with dpcount.privacy.as_generator)"
        )
    return value


def check_size(name: str, value: object) -> tuple[int, ...]:
    """A sample size: a non-negative int or a tuple of non-negative ints."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims: tuple[object, ...] = (value,)
    elif isinstance(value, tuple):
        dims = value
    else:
        raise TypeError(
            f"{name} must be an int or a tuple of ints, got {value!r} of type "
            f"{type(value).__name__}"
        )
    return tuple(check_integer(f"{name}[{i}]", d, ge=0) for i, d in enumerate(dims))


def check_instance(name: str, value: object, cls: type | tuple[type, ...], what: str) -> Any:
    """``isinstance(value, cls)``, else TypeError naming ``what`` is expected.

    A class is refused even when it structurally matches a Protocol (``ZeroNoise``
    instead of ``ZeroNoise()``).
    """
    if isinstance(value, type):
        raise TypeError(f"{name} must be {what}, got the class {value.__name__}: pass an instance")
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {what}, got {value!r} of type {type(value).__name__}")
    return value


def check_scale_in_range(name: str, value: float, *, inputs: str) -> float:
    """A computed noise scale must be a positive finite float (no overflow/underflow).

    Raises:
        ValueError: the scale computed from ``inputs`` (e.g. ``"l1_sensitivity=1,
            epsilon=1e-320"``) is 0 or infinite in float64.
    """
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(
            f"{inputs} give a {name} of {value!r}, outside the floating-point range; "
            "use a sensitivity and epsilon of reasonable magnitude"
        )
    return value


# -- exact running sums of the continuous counting paths (appended) ----------------------

#: Running sums of continuous-noise streams must stay strictly inside ±2^53.
MAX_EXACT_SUM = 2.0**53
