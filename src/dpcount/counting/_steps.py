"""The rules for a stream's steps, next to the stream (used by :mod:`dpcount.counting.base`).

A step is a finite real (or a vector of them); the running sums must stay exactly
representable (float64 below 2^53 for continuous noise; int64 with headroom for
integer noise), and integer noise needs whole-number steps. Each check names the
parameter and the step.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    _MAX_EXACT_INT,
    _MAX_INT_SUM,
    MAX_EXACT_SUM,
    _is_real,
    as_array,
    check_exact_integers,
)
from dpcount.privacy.float_safe import GridTable, snap_release

__all__ = [
    "NotWholeNumberError",
    "add_running_sums",
    "check_integral_array",
    "check_integral_step",
    "check_running_sums",
    "check_stream_array",
    "check_stream_step",
    "check_whole_number",
    "vector_length",
]


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


def check_stream_step(
    name: str, value: Any, dim: int | None, *, finite: bool = True
) -> float | NDArray[np.float64]:
    """Validate one stream step: a finite real (scalar streams) or a length-``dim`` vector
    (float64: the input's own array when it is one, never kept by the streams; with
    ``finite=False`` its finiteness is left to the caller, who must check it)."""
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
    return _check_vector_step(name, value, dim, finite)


def _check_vector_step(name: str, value: Any, dim: int, finite: bool) -> NDArray[np.float64]:
    """:func:`check_stream_step` of a vector step."""
    if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == (dim,):
        # the vector stream's usual step, which the checks below pass unchanged
        if finite and not np.isfinite(value).all():
            raise ValueError(f"{name} must be finite, got {value!r}")
        return value
    arr = as_array(name, value)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},), got shape {arr.shape}")
    check_exact_integers(name, arr, steps=False)
    out = np.asarray(arr, dtype=np.float64)
    if finite and not np.isfinite(out).all():
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


class NotWholeNumberError(ValueError):
    """Data with a fractional part (or beyond ±2^53) given to integer noise, which
    would reveal the fraction: a front end can suggest continuous noise.

    Attributes:
        parameter: the name of the refused argument (``"x"``, ``"value"``).
    """

    def __init__(self, message: str, *, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter


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
    if arr.size:  # one pass when all is well: bounds, then the int64 copy compared back
        low, high = float(arr.min()), float(arr.max())
        if low >= -_MAX_EXACT_INT and high <= _MAX_EXACT_INT:
            ints = arr.astype(np.int64)  # exact for whole numbers below 2^53
            if np.array_equal(ints, arr):
                # n·max|x| + |offset| bounds every running sum; its float sums (what
                # _check_int64_sums tests against 2^61) stay within twice it for n < 2^53
                most = max(-low, high) * arr.shape[0] + float(np.max(np.abs(offset)))
                if most > _MAX_INT_SUM / 4.0:
                    _check_int64_sums(name, arr, already, offset)
                return ints
    bad = (arr != np.floor(arr)) | (np.abs(arr) > _MAX_EXACT_INT)
    if bad.any():
        where = np.argwhere(bad)[0]
        step = int(where[0]) + already + 1
        raise NotWholeNumberError(
            f"{name} must hold whole numbers of magnitude <= 2^53 for discrete noise "
            f"(integer noise on fractional data reveals the fraction); "
            f"step {step} holds {float(arr[tuple(where)])!r}",
            parameter=name,
        )
    _check_int64_sums(name, arr, already, offset)
    return arr.astype(np.int64)


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
        raise NotWholeNumberError(
            f"{name} must be a whole number of magnitude <= 2^53 for discrete noise "
            f"(integer noise on fractional data reveals the fraction), got {value!r}",
            parameter=name,
        )
    _check_int64_sums(name, np.array([v]), already, offset)
    return int(v)


def vector_length(name: str, value: Any) -> int | None:
    """The length of a 1-D sequence/array step (a vector step), or None for anything else.

    Ragged nested sequences raise ValueError naming ``name`` (numpy's own message does not).
    """
    if not isinstance(value, (list, tuple, np.ndarray)):
        return None
    arr = as_array(name, value)
    return int(arr.shape[0]) if arr.ndim == 1 else None


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


#: Values the batch release sums per block (512 KiB a buffer, kept in cache, so the data
#: and the noise each cross memory once and the sums never do). At T = 10^7, 2^15 to 2^18
#: measured alike; 2^14 was slower (Python overhead per block).
_BLOCK_VALUES = 2**16


#: at most this many grid runs in a block are snapped run by run (one grid each)
_RUNS_PER_BLOCK = 8


def _rows(grid: Any, start: int, stop: int, ndim: int) -> Any:
    """The grids of rows start..stop − 1 (one grid a step, a column for vector steps),
    from an array or a :class:`~dpcount.privacy.float_safe.GridTable` (a float when the
    rows share one grid, a list of runs (lo, hi, grid) when a few do), or the one
    grid / None."""
    if isinstance(grid, GridTable):
        runs = grid.runs(start + 1, stop - start, _RUNS_PER_BLOCK)
        if runs is not None:
            return runs[0][2] if len(runs) == 1 else runs
        grid = grid.grids(start + 1, stop - start)
    elif isinstance(grid, np.ndarray):
        grid = grid[start:stop]
    if isinstance(grid, np.ndarray) and grid.ndim == 1 and ndim == 2:
        return grid[:, None]
    return grid


def _combine(
    noise: NDArray[np.float64],
    sums: NDArray[Any],
    grid: Any,
    work: Any = None,
    low: Any = None,
    high: Any = None,
) -> None:
    """``noise += sums`` in place, or its float-safe snapped form when ``grid`` (a power of
    two, or one per row) is set (``work``: the snap's reused scratch; ``low``, ``high``:
    the least and the largest sum, if known). Sums that are all equal (a block of zero
    steps) under one grid are snapped as one sum for every value (:func:`snap_release`
    with sums of shape (1,): the same floats, five passes instead of ten)."""
    if grid is None:
        noise += sums
    elif low is not None and low == high and not isinstance(grid, (list, np.ndarray)):
        one = sums.reshape(-1)[:1]
        snap_release(one, noise, grid, work=work, known=(low, MAX_EXACT_SUM))
    elif isinstance(grid, list):  # runs (lo, hi, g): a float grid each (1/g multiplies)
        for lo, hi, g in grid:
            snap_release(sums[lo:hi], noise[lo:hi], g, work=work, known=(low, MAX_EXACT_SUM))
    else:  # every sum was checked below 2^53
        snap_release(sums, noise, grid, work=work, known=(low, MAX_EXACT_SUM))


def _zero_steps(x: NDArray[np.float64]) -> bool:
    """Whether every step of the block is ±0.0 (two probes first: a block with data
    rarely passes them, so it pays for one comparison, not a pass)."""
    flat = x.reshape(-1)
    return bool(flat[0] == 0.0 and flat[-1] == 0.0 and not flat.any())


def add_running_sums(
    name: str, noise: NDArray[np.float64], arr: NDArray[np.float64], *, grid: Any = None
) -> None:
    """``noise += np.cumsum(arr, axis=0)`` in place, checking every running sum (with a
    ``grid``: the float-safe release :func:`~dpcount.privacy.float_safe.snap_release` of
    the sums and the noise instead of their float sum).

    The same floats, the same errors as ``sums = np.cumsum(arr, axis=0)``;
    :func:`check_running_sums` ``(name, sums)``; ``noise += sums``, without the sums
    array: the steps are summed in blocks of about ``_BLOCK_VALUES`` values, each block
    continuing numpy's sequential summation from the last sum before it (so each sum is
    ``fl(S_{t-1} + x_t)`` exactly as cumsum computes it). A block of whole numbers that
    continues an integer sum is summed in int64, which is faster and gives the same
    floats: every running sum it accepts is below 2^53, where the float sums of whole
    numbers are exact (see :func:`check_running_sums`); a block whose int64 sums fail
    the check (or would overflow) is summed again in float64 for the message. Signed
    zeros are kept: a run of -0.0 steps (float sum -0.0) is summed in float64. A block
    of zero steps (±0.0) after a whole sum c other than -0.0 (or at the start, x_0 not
    -0.0) has every sum equal to c (+0 at the start): nothing is summed or checked
    again, and, under one grid, its noise is snapped with c broadcast (the same floats
    as c repeated; equal int64 sums in a block take that snap too).

    Args:
        name: parameter name for messages.
        noise: float64, shape ``(n,)`` or ``(n, d)``; receives the sums.
        arr: finite float64 steps, the shape of ``noise``.

    Raises:
        ValueError: a running sum of magnitude >= 2^53, as :func:`check_running_sums`.
    """
    n = arr.shape[0]
    rows = max(1, _BLOCK_VALUES // max(1, arr[0].size))
    if n <= rows and grid is None:
        # one block, not snapped: the sums array is small, and three passes beat the
        # int64 ones (snapped, the int64 path's sums feed the snap: numpy's float64
        # cumsum, a sequential loop, costs ~3 ns a value, the int64 one ~0.4 ns)
        with np.errstate(over="ignore", invalid="ignore"):  # refused by the check
            sums = np.cumsum(arr, axis=0)
        check_running_sums(name, sums)
        noise += sums
        return
    tail = arr.shape[1:]
    ints = np.empty((min(n, rows), *tail), dtype=np.int64)
    floats = np.empty((min(n, rows) + 1, *tail))  # row 0: the sum before the block
    work = None if grid is None else np.empty((2, min(n, rows), *tail))  # the snap's scratch
    carry: NDArray[Any] | None = None  # the float sum before the block (None: none yet)
    with np.errstate(over="ignore", invalid="ignore"):  # refused by the check (or unused)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            x = arr[start:stop]
            block = ints[: stop - start]
            grids = _rows(grid, start, stop, arr.ndim)
            # int64 only where the float sum is a whole number other than -0.0
            first = x[0] if carry is None else carry
            whole = not bool(np.any((first == 0.0) & np.signbit(first)))
            if whole and carry is not None:
                whole = bool(np.all(np.floor(carry) == carry))
            # one grid for the block (per-step grids: no probe, no pass)
            if whole and not isinstance(grids, (list, np.ndarray)) and _zero_steps(x):
                # every sum is the one before (or +0): fl(c + ±0) = c for c ≠ -0.0
                one = ints[:1]
                one[:] = 0 if carry is None else carry.astype(np.int64)
                low, high = int(one.min()), int(one.max())
                if low == high:
                    _combine(noise[start:stop], one.reshape(-1)[:1], grids, work, low, high)
                    carry = one[0].astype(np.float64)
                    continue
            if whole:
                np.copyto(block, x, casting="unsafe")  # whole numbers convert exactly
                whole = bool(np.all(block == x))
            if whole:
                if carry is not None:
                    block[0] += carry.astype(np.int64)
                np.cumsum(block, axis=0, out=block)
                low, high = int(block.min()), int(block.max())
                whole = high < MAX_EXACT_SUM and low > -MAX_EXACT_SUM
            if whole:
                _combine(noise[start:stop], block, grids, work, low, high)
                carry = block[-1].astype(np.float64)
                continue
            sums = floats[1 : stop - start + 1]
            if carry is None:
                np.cumsum(x, axis=0, out=sums)
            else:
                part = floats[: stop - start + 1]
                part[0] = carry
                part[1:] = x
                np.cumsum(part, axis=0, out=part)
            check_running_sums(name, sums, already=start)
            _combine(noise[start:stop], sums, grids, work)
            carry = sums[-1].copy()
