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
    check_integer,
)
from dpcount.privacy.float_safe import (
    OFFSET_SUMS_LIMIT,
    GridTable,
    snap_offset_sums,
    snap_quotients,
    snap_release,
    sum_offset,
)

__all__ = [
    "NotWholeNumberError",
    "add_running_sums",
    "check_integral_array",
    "check_integral_step",
    "check_running_sums",
    "check_stream_array",
    "check_stream_step",
    "check_whole_number",
    "grid_table_bytes",
    "stream_array_and_bounds",
    "vector_length",
]


def check_stream_array(
    name: str, x: Any, *, max_steps: int, dim: int | None = None, already: int = 0
) -> NDArray[np.float64]:
    """Validate a block of stream steps and return it as a float64 array
    (:func:`stream_array_and_bounds` without the bounds)."""
    return stream_array_and_bounds(name, x, max_steps=max_steps, dim=dim, already=already)[0]


def stream_array_and_bounds(
    name: str, x: Any, *, max_steps: int, dim: int | None = None, already: int = 0
) -> tuple[NDArray[np.float64], tuple[float, float]]:
    """Validate a block of stream steps; return it as a float64 array with its least and
    largest value (finite: two reductions prove it, as NaN and ±inf reach them; the
    first bad step is searched only then).

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
    low, high = float(out.min()), float(out.max())  # NaN if any is (numpy's min and max)
    if not (math.isfinite(low) and math.isfinite(high)):
        bad = np.argwhere(~np.isfinite(out))[0]
        step = int(bad[0]) + already + 1
        raise ValueError(f"{name} must be finite; step {step} holds {float(out[tuple(bad)])!r}")
    return out, (low, high)


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


#: Values the batch release sums per block (1 MiB a buffer, kept in cache, so the data
#: and the noise each cross memory once and the sums never do). At T = 10^7, 2^15 to 2^18
#: measured alike; 2^14 was slower (Python overhead per block). At T = 10^6 (BLT, 0/1
#: steps, 40 interleaved releases, 2026-12-07) add_running_sums took 3.58 / 3.36 / 3.20 /
#: 3.55 ms (least) with blocks of 2^15 / 2^16 / 2^17 / 2^18: ~17 µs of calls a block.
_BLOCK_VALUES = 2**17


#: at most this many grid runs in a block are snapped run by run (one grid each)
_RUNS_PER_BLOCK = 8
#: the longest horizon whose grid table any batch release may build (``_grids_of``:
#: counting.base._GRID_TABLE_HORIZON; beyond it only a release of ≥ T/8 steps does)
_KEPT_HORIZON = 1 << 22


def grid_table_bytes(horizon: int, runs: int | None = None) -> int:
    """The most the float-safe :class:`~dpcount.privacy.float_safe.GridTable` a mechanism
    of ``horizon`` steps keeps takes (built by its first batch release, kept on the
    mechanism: part of its structure), for a grid of at most ``runs`` runs (None: any,
    up to one per step), with the 1/g of every step a scalar batch release keeps when
    the runs are short (:meth:`_BlockSums` asks ``step_inverses`` for runs of a block's
    rows / :data:`_RUNS_PER_BLOCK`); see
    :meth:`~dpcount.privacy.float_safe.GridTable.kept_bytes`. 0 beyond
    :data:`_KEPT_HORIZON` steps: a mechanism builds the table there only for a release
    of at least an eighth of the horizon, and then it takes 2 bytes a step of the
    horizon (no 1/g), at most 16 a released step: a cost of that release (which holds
    its data and noise, 16 bytes a step and more), not of the mechanism (a stream or a
    short release at a long horizon never builds it; a tree at 2^40 steps stays O(log T)).
    """
    T = check_integer("horizon", horizon, ge=1)
    if T > _KEPT_HORIZON:
        return 0
    rows = min(T, _BLOCK_VALUES)
    return GridTable.kept_bytes(horizon, runs, run=max(1, rows // _RUNS_PER_BLOCK))


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
    steps) under one grid, or under each run of grids, are snapped as one sum for every
    value (:func:`snap_release`
    with sums of shape (1,): the same floats, five passes instead of ten)."""
    if grid is None:
        noise += sums
    elif low is not None and low == high and isinstance(grid, list):
        one = sums.reshape(-1)[:1]  # equal sums under runs of grids: one broadcast a run
        for lo, hi, g in grid:
            snap_release(one, noise[lo:hi], g, work=work, known=(low, MAX_EXACT_SUM))
    elif low is not None and low == high and not isinstance(grid, np.ndarray):
        one = sums.reshape(-1)[:1]
        snap_release(one, noise, grid, work=work, known=(low, MAX_EXACT_SUM))
    elif isinstance(grid, list):  # runs (lo, hi, g): a float grid each (1/g multiplies)
        for lo, hi, g in grid:
            snap_release(sums[lo:hi], noise[lo:hi], g, work=work, known=(low, MAX_EXACT_SUM))
    else:  # every sum was checked below 2^53
        snap_release(sums, noise, grid, work=work, known=(low, MAX_EXACT_SUM))


def _zero_steps(x: NDArray[np.float64], rising: bool = False) -> bool:
    """Whether every step of the block is ±0.0 (three probes first: a block with data
    rarely passes them, so it pays for a few comparisons, not a pass; ``rising``: no
    step is below 0, so the largest one decides, a reduction ~2x cheaper than ``any``)."""
    flat = x.reshape(-1)
    if not (flat[0] == 0.0 and flat[-1] == 0.0 and flat[flat.shape[0] // 2] == 0.0):
        return False
    return bool(flat.max() == 0.0) if rising else not flat.any()


#: M = 1.5·2^52 and its bit pattern: for |x| ≤ 2^51, fl(x + M) is M + rint(x), a float of
#: [2^52, 2^53] whose pattern is bits(M) + rint(x) (:func:`_whole_as_int64`)
_ROUNDER = 6755399441055744.0
_ROUNDER_BITS = int(np.float64(_ROUNDER).view(np.int64))
#: |x| up to this takes :func:`_whole_as_int64`
_ROUNDER_STEPS = 2.0**51


def _whole_as_int64(
    x: NDArray[np.float64], ints: NDArray[np.int64], y: NDArray[np.float64], same: NDArray[np.bool_]
) -> bool:
    """Whether every step of ``x`` (each |x| ≤ 2^51, known) is a whole number, with
    ``ints`` = x as int64 when so (``y``, ``same``: scratch of x's shape).

    Exact: for |x| ≤ 2^51, x + M lies in [2^52, 2^53], where the floats are the integers
    and their bit patterns are consecutive (bits(2^52 + j) = bits(2^52) + j, 0 ≤ j ≤
    2^52), so y = fl(x + M) = M + rint(x) and bits(y) − bits(M) = rint(x); y − M is
    exact (Sterbenz: M/2 ≤ y ≤ 2M) and equals x exactly when x is whole (−0.0 gives
    0, as the int64 cast does). Four float passes where ``copyto`` (float to int64, not
    vectorized) and a mixed int64 == float64 comparison made two at 2-3 times the cost.
    """
    np.add(x, _ROUNDER, out=y)
    np.subtract(y.view(np.int64), _ROUNDER_BITS, out=ints)
    np.subtract(y, _ROUNDER, out=y)
    np.equal(y, x, out=same)
    return bool(same.all())


def _binary_as_int64(
    x: NDArray[np.float64],
    ints: NDArray[np.int64],
    ones: NDArray[np.bool_],
    zeros: NDArray[np.bool_],
) -> bool:
    """:func:`_whole_as_int64` of steps known to lie in [0, 1] (−0.0 too: 0/1 data, the
    counting case): whether every step is a whole number, with ``ints`` = x as int64
    when so (``ones``, ``zeros``: bool scratch of x's shape).

    The same answer and the same int64 values: in [0, 1] the whole numbers are +0.0,
    −0.0 (both == 0.0) and 1.0, whose rint are 0, 0 and 1, so every step is whole iff
    it equals 0 or 1, and x as int64 is the mask x == 1. Two comparisons writing bytes,
    two counts of them and one bool to int64 copy: 0.60 ns a value where the four
    float passes took 0.88 (least of 60, 2^17 values, 2026-12-07).
    """
    np.equal(x, 1.0, out=ones)
    np.equal(x, 0.0, out=zeros)
    if np.count_nonzero(ones) + np.count_nonzero(zeros) != x.size:
        return False
    np.copyto(ints, ones)
    return True


def add_running_sums(
    name: str,
    noise: NDArray[np.float64],
    arr: NDArray[np.float64],
    *,
    grid: Any = None,
    bounds: tuple[float, float] | None = None,
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

    With ``bounds`` = (a, b), every step in [a, b] (:func:`stream_array_and_bounds`),
    a whole-number block of m steps after the sum c has every sum within
    |c| + m·max(|a|, |b|) (B): when B < 2^53 no sum needs checking, and when a ≥ 0 (−0.0
    too) the sums do not decrease, so the least and the largest are the block's first and
    last rows (no reduction); when max(|a|, |b|) ≤ 2^51 the steps are converted to int64
    by :func:`_whole_as_int64` (by :func:`_binary_as_int64` when 0 ≤ a and b ≤ 1: 0/1
    data); and under one power-of-two grid with B below
    :data:`~dpcount.privacy.float_safe.OFFSET_SUMS_LIMIT` the int64 sums start from
    :func:`~dpcount.privacy.float_safe.sum_offset` and are snapped by
    :func:`~dpcount.privacy.float_safe.snap_offset_sums` (no int64 to float64 pass).
    Each is a saving only: the same floats and errors as without ``bounds``.

    Args:
        name: parameter name for messages.
        noise: float64, shape ``(n,)`` or ``(n, d)``; receives the sums.
        arr: finite float64 steps, the shape of ``noise``.
        grid: None, one grid, one per step, or a :class:`GridTable` (see ``_rows``).
        bounds: None, or (a, b) with a ≤ every step ≤ b.

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
    _BlockSums(name, noise, arr, grid, bounds, min(n, rows)).run()


def _starts_whole(v: Any, carried: bool) -> bool:
    """Whether sums continuing from ``v`` (the first step row, or the carried float sum
    when ``carried``) can be summed in int64: no −0.0 (its float sums stay −0.0), and a
    carried sum a whole number."""
    if np.ndim(v) == 0:
        f = float(v)
        return not (f == 0.0 and math.copysign(1.0, f) < 0.0) and (not carried or f.is_integer())
    if bool(np.any((v == 0.0) & np.signbit(v))):
        return False
    return not carried or bool(np.all(np.floor(v) == v))


class _BlockSums:
    """:func:`add_running_sums` block by block (its scratch, the sum carried between
    blocks, and the grid run the last block fell in)."""

    def __init__(
        self,
        name: str,
        noise: NDArray[np.float64],
        arr: NDArray[np.float64],
        grid: Any,
        bounds: tuple[float, float] | None,
        rows: int,
    ) -> None:
        self.name, self.noise, self.arr, self.grid, self.rows = name, noise, arr, grid, rows
        tail = arr.shape[1:]
        self.ints = np.empty((rows, *tail), dtype=np.int64)
        self.floats = np.empty((rows + 1, *tail))  # row 0: the sum before the block
        self.snapped = grid is not None
        self._work: NDArray[np.float64] | None = None  # the snap's scratch (``work``)
        self.same: NDArray[np.bool_] | None = None  # _whole_as_int64's scratch
        self.zeros: NDArray[np.bool_] | None = None  # _binary_as_int64's second mask
        #: max(|a|, |b|) of the bounds (inf: none), and whether no step is below 0
        self.most = math.inf if bounds is None else max(-bounds[0], bounds[1], 0.0)
        self.rising = bounds is not None and bounds[0] >= 0.0
        self.carry: Any = None  # the float sum before the block (None: none yet)
        self.run_grid: float | None = None  # a run of one grid: steps run_lo + 1 … run_hi
        self.run_lo = self.run_hi = 0
        self.offsets: dict[float, int | None] = {}  # sum_offset of each grid met
        #: 1/g of every step (a GridTable whose grid changes every few steps, scalar
        #: steps of known bounds): whole blocks take _per_step_block
        self.inverses: NDArray[np.float64] | None = None
        self.largest = math.inf  # the table's largest grid
        if isinstance(grid, GridTable) and arr.ndim == 1 and self.most <= _ROUNDER_STEPS:
            run = max(1, rows // _RUNS_PER_BLOCK)  # shorter runs: a block spans too many
            kept = grid.step_inverses(run)
            if kept is not None:
                self.inverses, self.largest = kept

    @property
    def work(self) -> NDArray[np.float64] | None:
        """The snap's scratch (two rows of a block's shape), allocated when a block first
        needs it: the per-step and offset forms and the broadcast snaps of equal sums use
        the sums' own scratch (2 MiB less to allocate and fault per release)."""
        if self._work is None and self.snapped:
            self._work = np.empty((2, *self.ints.shape))
        return self._work

    def run(self) -> None:
        n, rows = self.arr.shape[0], self.rows
        with np.errstate(over="ignore", invalid="ignore"):  # refused by the check (or unused)
            for start in range(0, n, rows):
                stop = min(n, start + rows)
                if self.inverses is not None:
                    done = self._per_step_block(start, stop, self.inverses[start:stop])
                    if done is not None:
                        if not done:
                            self._float_block(start, stop, 1.0 / self.inverses[start:stop])
                        continue
                grids = self._grids(start, stop)
                if not self._whole_block(start, stop, grids):
                    self._float_block(start, stop, grids)

    def _grids(self, start: int, stop: int) -> Any:
        """``_rows`` of the block, the run of one grid it fell in kept for the next."""
        if self.run_lo <= start and stop <= self.run_hi:
            return self.run_grid
        grids = _rows(self.grid, start, stop, self.arr.ndim)
        if isinstance(self.grid, GridTable) and isinstance(grids, float):
            run = self.grid.run_of(start)
            if run is not None:
                self.run_grid, self.run_lo, self.run_hi = run
        return grids

    def _whole_block(self, start: int, stop: int, grids: Any) -> bool:
        """The block summed in int64 and added (snapped), or False (nothing changed but
        the scratch) when its sums are not all exact whole numbers."""
        x, carry = self.arr[start:stop], self.carry
        if not _starts_whole(x[0] if carry is None else carry, carry is not None):
            return False
        m = stop - start
        block, noise = self.ints[:m], self.noise[start:stop]
        one_grid = not isinstance(grids, (list, np.ndarray))
        # one grid or runs of grids for the block (per-step grids: no probe, no pass)
        if (
            not isinstance(grids, np.ndarray)
            and _zero_steps(x, self.rising)
            and self._zero_block(block, noise, grids)
        ):
            return True
        if not self._as_int64(x, block):
            return False
        sums = self._int_sums(block, grids if one_grid else None)
        if sums is None:
            return False
        low, high, offset = sums
        if offset is None:
            _combine(noise, block, grids, self.work, low, high)
        elif low != high:  # the steps' float copy is free scratch now
            snap_offset_sums(block, noise, grids, scratch=self.floats[1 : m + 1], low=low)
        else:  # equal sums: snapped as one, broadcast
            _combine(noise, block[:1] - offset, grids, None, low, high)
        return True

    def _per_step_block(self, start: int, stop: int, inverse: NDArray[np.float64]) -> bool | None:
        """The block summed in int64 and snapped under one grid a step, given as 1/g
        (True), or False when a step is not a whole number (nothing changed but the
        scratch), or None when this form does not apply (the sum before the block not
        whole or -0.0, or a sum that may reach 2^50).

        The same floats as :meth:`_whole_block` with the block's grids as an array: the
        steps are whole (:func:`_whole_as_int64`), so the running sums S_t are exact;
        summed in int64 from bits(M) + c (M = 1.5·2^52) they are bits(M) + S_t, the
        patterns of the floats M + S_t (:func:`~dpcount.privacy.float_safe.sum_offset`
        with g = 1: |S_t| < 2^50), so one float subtraction of M gives S_t exactly, the
        float64 snap_release converts them to; then
        :func:`~dpcount.privacy.float_safe.snap_quotients`. The last sum is carried; no
        sum needs the check (|S_t| < 2^50). When no step is below 0 the sums do not
        decrease, so the first is the least, and ``plus`` is taken when it is at least
        the largest grid of the table (else not: a pure saving either way).
        """
        x, carry = self.arr[start:stop], self.carry
        if not _starts_whole(x[0] if carry is None else carry, carry is not None):
            return None
        m = stop - start
        c = 0 if carry is None else int(carry)
        if abs(c) + m * math.ceil(self.most) >= OFFSET_SUMS_LIMIT:
            return None
        block, y = self.ints[:m], self.floats[1 : m + 1]
        if not self._as_int64(x, block):
            return False
        block[0] += c + _ROUNDER_BITS
        np.cumsum(block, out=block)
        np.subtract(block.view(np.float64), _ROUNDER, out=y)  # S, exactly
        last = float(y[-1])
        plus = self.rising and float(y[0]) >= self.largest
        self.carry = np.float64(last)
        q = block.view(np.float64)  # the sums are not read again
        snap_quotients(y, self.noise[start:stop], inverse, q=q, plus=plus)
        return True

    def _zero_block(self, block: NDArray[np.int64], noise: NDArray[np.float64], grids: Any) -> bool:
        """A block of zero steps after a whole sum c (every sum is c, or +0 at the start:
        fl(c + ±0) = c for c ≠ -0.0) snapped with c broadcast; False when c differs
        between coordinates (nothing added)."""
        one = block[:1]
        one[:] = 0 if self.carry is None else self.carry.astype(np.int64)
        low, high = int(one.min()), int(one.max())
        if low != high:
            return False
        _combine(noise, one.reshape(-1)[:1], grids, None, low, high)
        self.carry = one[0].astype(np.float64)
        return True

    def _int_sums(
        self, block: NDArray[np.int64], grid: float | None
    ) -> tuple[int, int, int | None] | None:
        """The running sums of the whole steps in ``block`` (int64, in place), continuing
        the carried sum: (least, largest, offset) — offset None, or the block holds
        :func:`~dpcount.privacy.float_safe.sum_offset` ``(grid)`` + the sums — or None
        when a sum reaches ±2^53."""
        carry, m, scalar = self.carry, block.shape[0], block.ndim == 1
        c: Any = 0 if carry is None else (int(carry) if scalar else carry.astype(np.int64))
        # every sum lies within |c| + m·max|x| (Python ints: exact)
        bound = math.inf
        if math.isfinite(self.most):
            bound = (abs(c) if scalar else int(np.max(np.abs(c)))) + m * math.ceil(self.most)
        offset = None
        if bound < OFFSET_SUMS_LIMIT and grid is not None and self.snapped:
            offset = self._offset(grid)
        shift = 0 if offset is None else offset
        block[0] += c + shift
        np.cumsum(block, axis=0, out=block)
        if self.rising and bound < MAX_EXACT_SUM:
            # sums that do not decrease, all inside ±2^53: the ends are the extremes
            ends = (block[0], block[-1]) if scalar else (block[0].min(), block[-1].max())
            low, high = int(ends[0]) - shift, int(ends[1]) - shift
        else:
            low, high = int(block.min()) - shift, int(block.max()) - shift
            if not (high < MAX_EXACT_SUM and low > -MAX_EXACT_SUM):
                return None
        self.carry = np.float64(int(block[-1]) - shift) if scalar else (block[-1] - shift) * 1.0
        return low, high, offset

    def _as_int64(self, x: NDArray[np.float64], block: NDArray[np.int64]) -> bool:
        """Whether the steps are whole numbers, converted into ``block`` when so."""
        m = x.shape[0]
        if self.same is None:
            self.same = np.empty(self.ints.shape, dtype=np.bool_)
        if self.rising and self.most <= 1.0:  # every step in [0, 1]
            if self.zeros is None:
                self.zeros = np.empty(self.ints.shape, dtype=np.bool_)
            return _binary_as_int64(x, block, self.same[:m], self.zeros[:m])
        if self.most <= _ROUNDER_STEPS:
            return _whole_as_int64(x, block, self.floats[1 : m + 1], self.same[:m])
        np.copyto(block, x, casting="unsafe")  # whole numbers convert exactly
        return bool(np.all(block == x))

    def _offset(self, grid: float) -> int | None:
        """:func:`~dpcount.privacy.float_safe.sum_offset` of ``grid``, computed once."""
        if grid not in self.offsets:
            self.offsets[grid] = sum_offset(grid)
        return self.offsets[grid]

    def _float_block(self, start: int, stop: int, grids: Any) -> None:
        """The block summed in float64, checked and added (snapped)."""
        x, floats = self.arr[start:stop], self.floats
        sums = floats[1 : stop - start + 1]
        if self.carry is None:
            np.cumsum(x, axis=0, out=sums)
        else:
            part = floats[: stop - start + 1]
            part[0] = self.carry
            part[1:] = x
            np.cumsum(part, axis=0, out=part)
        check_running_sums(self.name, sums, already=start)
        _combine(self.noise[start:stop], sums, grids, self.work)
        self.carry = sums[-1].copy()
