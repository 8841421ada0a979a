"""Exact float64 sums of the data: the precondition of every range mechanism's sensitivity.

The range mechanisms perturb node sums, sums and differences of children, or the cells
themselves, computed in float64. Their sensitivities (√(K+1), √‖diag C⁻¹‖_∞, ...) hold for
the *exact* sums. If a sum leaves the range where float64 is exact, a change of 1 in one
cell can move the computed value by 0 or by a whole ulp (256 at 2^60): the effective
sensitivity is then far above the calibrated one, and noise below an ulp is rounded away.

Rule (checked in O(n) before anything is released): let 2^-k (k ≥ 0) be the coarsest
power-of-two grid that holds every cell (k = 0 for whole numbers). If

    Σ_i |x_i| · 2^k ≤ 2^53,

then every partial sum of the cells — any subset, with any signs, in any order — is an
integer multiple m·2^-k with |m| ≤ 2^53, hence exactly representable in float64, so every
float addition and subtraction of data performed by a mechanism is exact. For whole
numbers this is Σ|x| ≤ 2^53. Fractional data are held to the same standard: exact means
exact, so e.g. 0.1 (a multiple of 2^-56 only) is accepted only in small totals.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_EXACT_SUM", "check_exact_sums", "check_whole_numbers", "grid_exponent"]

#: Largest magnitude of an integer partial sum that float64 holds exactly.
MAX_EXACT_SUM = 2**53

_HALF = 26  # split of 53-bit integers into two int64-summable halves


def grid_exponent(x: NDArray[np.float64]) -> int:
    """The smallest k ≥ 0 with x·2^k integral for every (finite) cell of ``x``."""
    nonzero = np.abs(x[x != 0])
    if nonzero.size == 0:
        return 0
    mantissa, exponent = np.frexp(nonzero)  # |x| = f·2^e, f ∈ [0.5, 1), 53-bit f
    m = np.ldexp(mantissa, 53).astype(np.int64)  # exact: an integer < 2^53
    lowest = m & -m  # lowest set bit of the mantissa, a power of two
    trailing = np.frexp(lowest.astype(np.float64))[1] - 1
    # |x| = m·2^(e−53): its lowest set bit is 2^(e − 53 + trailing).
    return max(0, -int(np.min(exponent.astype(np.int64) - 53 + trailing)))


def _all_whole(arr: NDArray[np.float64], block: int = 1 << 16) -> bool:
    """Whether every cell is a whole number, in cache-sized blocks (no full-size temporaries)."""
    for start in range(0, arr.size, block):
        part = arr[start : start + block]
        if not np.array_equal(np.floor(part), part):
            return False
    return True


def check_exact_sums(name: str, x: NDArray[np.float64]) -> None:
    """Refuse data whose partial sums float64 cannot hold exactly (see the module docstring).

    Raises:
        ValueError: Σ|x|·2^k > 2^53; the message names ``name``, the grid 2^-k and the
            first cell (index) at which the running sum of |x| passes the bound.
    """
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0:
        return
    top = max(float(arr.max()), -float(arr.min()))  # max |x| without a copy of |x|
    if top <= MAX_EXACT_SUM and int(top) * arr.size <= MAX_EXACT_SUM and _all_whole(arr):
        return  # fast path: whole numbers with Σ|x| ≤ n·max|x| ≤ 2^53
    flat = np.abs(arr)
    whole = top <= MAX_EXACT_SUM and _all_whole(flat)
    k = 0 if whole else grid_exponent(flat)
    with np.errstate(over="ignore"):
        scaled = np.ldexp(flat, min(k, 2000))  # exact (power-of-two scaling) or inf
    big = ~(scaled <= MAX_EXACT_SUM)
    if not big.any():
        ints = scaled.astype(np.int64)
        # Two 27-bit halves: their int64 sums cannot overflow below 2^36 cells.
        total = (int(np.sum(ints >> _HALF)) << _HALF) + int(np.sum(ints & ((1 << _HALF) - 1)))
        if total <= MAX_EXACT_SUM:
            return
        running = np.cumsum(ints.astype(object))  # error path only: exact Python ints
        first = int(np.argmax(running > MAX_EXACT_SUM))
    else:
        first = int(np.argmax(big))
    index = tuple(int(i) for i in np.unravel_index(first, np.shape(x)))
    grid = "whole numbers" if k == 0 else f"multiples of 2^-{k} (the finest fraction in {name})"
    bound = "2^53" if k == 0 else f"2^53·2^-{k} = 2^{53 - k}"
    raise ValueError(
        f"{name} is too large for exact float64 sums: its cells are {grid}, so the sum of "
        f"|{name}| must be <= {bound} for every node sum to be exact (otherwise a change of 1 "
        f"in one cell can move a computed sum by more than 1 and the calibrated sensitivity "
        f"no longer holds); the running sum of |{name}| passes {bound} at index {index}"
    )


def check_whole_numbers(name: str, x: NDArray[np.float64]) -> None:
    """Integer noise needs integer data: a fractional cell would be revealed by its fraction.

    Raises:
        ValueError: a cell that is not a whole number (the first index is named).
    """
    frac = x != np.floor(x)
    if frac.any():
        index = tuple(int(i) for i in np.argwhere(frac)[0])
        raise ValueError(
            f"{name} must hold whole numbers for noise='discrete-gaussian' (integer noise on "
            f"fractional data would reveal the fraction); index {index} holds {float(x[index])!r}"
        )
