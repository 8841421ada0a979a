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
    "check_integral_array",
    "check_integral_step",
    "check_iterable",
    "check_probability",
    "check_real",
    "check_real_array",
    "check_real_dtype",
    "check_real_sequence",
    "check_running_sums",
    "check_scale_in_range",
    "check_shape",
    "check_size",
    "check_stream_array",
    "check_stream_step",
    "check_whole_number",
    "vector_length",
]


def _is_real(value: object) -> bool:
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
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
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


def check_stream_array(
    name: str, x: Any, *, max_steps: int, dim: int | None = None, already: int = 0
) -> NDArray[np.float64]:
    """Validate a block of stream steps and return it as a float64 array.

    Args:
        name: parameter name for messages.
        x: array-like of shape ``(n,)`` (scalar steps) or ``(n, d)`` (vector steps).
        max_steps: the horizon.
        dim: if given, the required step dimension (``None`` = scalar steps); if
            ``-1``, either shape is accepted.
        already: steps already consumed (streams); ``already + n`` may not exceed
            ``max_steps``.

    Raises:
        TypeError: non-numeric data (strings, objects, complex).
        ValueError: wrong shape, empty, NaN/inf, or more steps than the horizon allows.
    """
    arr = as_array(name, x, already=already)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    if dim == -1:
        if arr.ndim not in (1, 2):
            raise ValueError(
                f"{name} must have shape (steps,) or (steps, d), got shape {arr.shape}"
            )
    elif dim is None:
        if arr.ndim != 1:
            raise ValueError(f"{name} must have shape (steps,), got shape {arr.shape}")
    elif arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{name} must have shape (steps, {dim}), got shape {arr.shape}")
    n = arr.shape[0]
    if n == 0:
        raise ValueError(f"{name} must contain at least one step, got 0")
    if arr.ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} steps must have dimension >= 1, got shape {arr.shape}")
    if already + n > max_steps:
        if already:
            raise ValueError(
                f"{name} has {n} steps but only {max_steps - already} remain before the "
                f"horizon {max_steps} ({already} already released)"
            )
        raise ValueError(f"{name} has {n} steps, more than the horizon {max_steps}")
    check_exact_integers(name, arr, already=already)
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = np.argwhere(~np.isfinite(out))[0]
        step = int(bad[0]) + already + 1
        raise ValueError(f"{name} must be finite; step {step} holds {float(out[tuple(bad)])!r}")
    return out


def check_stream_step(name: str, value: Any, dim: int | None) -> float | NDArray[np.float64]:
    """Validate one stream step: a finite real (scalar streams) or a length-``dim`` vector."""
    if dim is None:
        if not _is_real(value):
            if isinstance(value, np.ndarray) and value.shape == ():
                return check_stream_step(name, value.item(), dim)
            raise TypeError(
                f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
            )
        if isinstance(value, numbers.Integral) and abs(int(value)) > _MAX_EXACT_INT:
            raise ValueError(
                f"{name} must be an integer of magnitude <= 2^53 (exact in float64), got {value!r}"
            )
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v!r}")
        if abs(v) >= _MAX_EXACT_INT and not isinstance(value, float) and value != v:
            # e.g. Fraction(2**53 + 1): float() would round it silently
            raise ValueError(
                f"{name} must be exactly representable in float64 beyond 2^53, got {value!r}"
            )
        return v
    arr = as_array(name, value)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},), got shape {arr.shape}")
    check_exact_integers(name, arr, steps=False)
    out = arr.astype(np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


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


def check_whole_number(name: str, value: float, *, reason: str) -> float:
    """A real that must be a whole number (e.g. a sensitivity for integer-valued noise).

    Raises:
        ValueError: ``value`` has a fractional part; the message ends with ``reason``.
    """
    if not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number {reason}, got {value!r}")
    return float(value)


def check_integral_array(
    name: str, arr: NDArray[np.float64], *, already: int = 0, offset: Any = 0
) -> NDArray[np.int64]:
    """Steps for integer (discrete) noise: whole numbers with magnitude ≤ 2^53, as int64.

    Integer noise added to fractional data would reveal the fractional part, so
    fractional values are rejected, never rounded. The running sums are int64, so
    they must stay within ±2^62 (leaving room for the noise): ``offset`` is the
    running sum before these steps (an int, or an int64 vector for vector steps).

    Raises:
        ValueError: a value with a fractional part or beyond ±2^53, or a running sum
            beyond ±2^62 (message gives the step).
    """
    bad = (arr != np.floor(arr)) | (np.abs(arr) > _MAX_EXACT_INT)
    if bad.any():
        where = np.argwhere(bad)[0]
        step = int(where[0]) + already + 1
        raise ValueError(
            f"{name} must hold whole numbers of magnitude <= 2^53 for discrete noise "
            f"(integer noise on fractional data reveals the fraction); "
            f"step {step} holds {float(arr[tuple(where)])!r}"
        )
    _check_int64_sums(name, arr, already, offset)
    return arr.astype(np.int64)


#: Largest |running sum| of integer steps (int64 holds 2^63 − 1; the rest is room for noise).
_MAX_INT_SUM = 2**62


def _check_int64_sums(name: str, arr: NDArray[np.float64], already: int, offset: Any) -> None:
    # The running sums offset + x_1 + … + x_t (per coordinate) are never near 2^62 in
    # practice (it takes 256 steps of 2^53), but an int64 overflow would wrap silently.
    # The float64 sums are approximate; the factor-2 margin covers their rounding.
    if not arr.size:
        return
    sums = np.asarray(offset, dtype=np.float64) + np.cumsum(arr, axis=0)
    over = np.abs(sums) > _MAX_INT_SUM / 2.0
    if over.any():
        step = int(np.argwhere(over)[0][0]) + already + 1
        raise ValueError(
            f"{name}: the integer running sum may exceed 2^61 at step {step} "
            "(int64 range for discrete noise); rescale the data"
        )


def check_integral_step(name: str, value: Any, *, offset: Any = 0, already: int = 0) -> Any:
    """One step for integer noise: an int (scalar) or an int64 vector; see check_integral_array."""
    if isinstance(value, np.ndarray):
        return check_integral_array(name, value.reshape(1, -1), already=already, offset=offset)[0]
    v = float(value)
    if not v.is_integer() or abs(v) > _MAX_EXACT_INT:
        raise ValueError(
            f"{name} must be a whole number of magnitude <= 2^53 for discrete noise "
            f"(integer noise on fractional data reveals the fraction), got {value!r}"
        )
    _check_int64_sums(name, np.array([v]), already, offset)
    return int(v)


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
    arr = as_array(name, x)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got an array of dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got shape {arr.shape}")
    check_exact_integers(name, arr, steps=False)
    out = np.array(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        raise ValueError(f"{name} must be finite; index {bad} holds {float(out[bad])!r}")
    return out


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


def vector_length(name: str, value: Any) -> int | None:
    """The length of a 1-D sequence/array step (a vector step), or None for anything else.

    Ragged nested sequences raise ValueError naming ``name`` (numpy's own message does not).
    """
    if not isinstance(value, (list, tuple, np.ndarray)):
        return None
    arr = as_array(name, value)
    return int(arr.shape[0]) if arr.ndim == 1 else None


# -- exact running sums of the continuous counting paths (appended) ----------------------

#: Running sums of continuous-noise streams must stay strictly inside ±2^53.
MAX_EXACT_SUM = 2.0**53


def check_running_sums(name: str, sums: NDArray[np.float64], *, already: int = 0) -> None:
    """Every computed running sum (per coordinate) must lie strictly inside ±2^53.

    ``sums`` are the float64 running sums as computed (``offset + cumsum``, shape
    ``(n,)`` or ``(n, d)``); ``already`` is the number of earlier steps (for the
    message). Guarantee (sequential summation, as numpy's cumsum and the streams
    do): for *integer* steps every running sum is then exact, by induction — the
    exact sum of an exact partial sum and an integer step is an integer, exact in
    float64 below 2^53, and one of magnitude ≥ 2^53 rounds to magnitude ≥ 2^53
    (rounding is monotone and 2^53 is a float), so it is refused. The release
    ``fl(S_t + N_t)`` is then a rounding, i.e. post-processing, of ``S_t + N_t``.
    For *fractional* steps each addition rounds by at most half an ulp of a value
    below 2^53, so the running sum at step t is off by at most u·Σ_{i≤t}|S_i| ≤
    (t − 1)/2 (u = 2^-53; Higham 2002, §4.2); that rounding is not covered by the
    privacy guarantee (as for any floating-point implementation). O(n): two
    reductions, and the step is searched only on failure.

    Raises:
        ValueError: a running sum of magnitude ≥ 2^53 (or overflowing to ±inf),
            naming the first such step.
    """
    if sums.size == 0:
        return
    if float(sums.max()) < MAX_EXACT_SUM and float(sums.min()) > -MAX_EXACT_SUM:
        return
    over = np.abs(sums) >= MAX_EXACT_SUM
    where = tuple(int(i) for i in np.argwhere(over)[0])
    coord = "" if len(where) == 1 else f" (coordinate {where[1]})"
    raise ValueError(
        f"{name}: the running sum at step {where[0] + already + 1}{coord} reaches "
        f"{float(sums[where]):.17g}, beyond ±2^53 where float64 sums stop being exact "
        "(a change of 1 could move the release by 0, or by 2 or more); rescale the data"
    )
