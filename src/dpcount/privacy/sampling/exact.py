"""Exact decisions on E = −ln V, V the uniform number 0.w₀w₁w₂… spelled by 64-bit words.

Two decisions make every exact sampler of :mod:`~dpcount.privacy.sampling.laws`:
⌊t·E⌋ (a geometric variable with P[G ≥ g] = e^{−g/t}) and [E > γ] (a
Bernoulli(e^{−γ})). Each is first tried from the word's top 53 bits with one
floating-point logarithm and a rigorous enclosure (relative margin 2⁻⁴⁰, far above
the few-ulp error of ``log``; :func:`_exp_enclosure`), or for small t read from a
table of buckets of V whose floor is constant (:func:`_floor_table`); when the
enclosure does not decide, more words of V are drawn (extension words) and the
comparison is redone with correctly rounded ``decimal`` logarithms at growing
precision (:func:`exact_floor_t_exp`, :func:`exact_exp_greater`). Every output is
therefore an exact function of an infinite-precision uniform V; how wide the float
enclosure is decides only which path computes a value, never the value.

References:
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * I. Mironov. "On significance of the least significant bits for
      differential privacy". ACM CCS 2012. (no link)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

__all__ = ["exact_exp_greater", "exact_floor_t_exp", "word_stream"]

U64 = NDArray[np.uint64]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

#: relative margin on floating-point logs/products (true error is a few ulp ≈ 1e-15)
_MARGIN = 2.0**-40
_TWO53 = float(2**53)


def _exp_enclosure(
    words: U64, top: I64 | None = None, scratch: tuple[F64, F64] | None = None
) -> tuple[F64, F64]:
    """Float bounds lo < −ln V < hi from V's top 53 bits (hi = inf when they are all 0).

    One logarithm: with V ∈ [a, a + 1)·2⁻⁵³, −ln V lies in [E₋, E₊] where
    E₋ = −ln((a + 1)·2⁻⁵³) and E₊ = −ln(a·2⁻⁵³) = E₋ + ln(1 + 1/a) ≤ E₋ + 1/a. With
    L = fl(−ln((a + 1)·2⁻⁵³)) (a + 1 ≤ 2⁵³ and the scaling are exact) and the
    log's relative error below :data:`_MARGIN`: lo = L·(1 − 2M) ≤ E₋ and
    hi = (L + 1/a)·(1 + 3M) ≥ E₊, the extra M's covering the few roundings
    (relative 2⁻⁵³ each) of the products and the sum.

    ``top``: where to put the 53-bit integers a (int64, same size; default: a new array).
    ``scratch``: two float arrays of the same size that become (lo, hi) (default: new).
    """
    a = np.right_shift(words, np.uint64(11), out=None if top is None else top.view(np.uint64))
    a_plus_1 = np.empty(a.shape) if scratch is None else scratch[0]
    np.copyto(a_plus_1, a.view(np.int64), casting="unsafe")  # exact (< 2^53); int64 is SIMD
    with np.errstate(divide="ignore"):  # inf at a = 0
        inv_a = np.divide(1.0, a_plus_1, out=None if scratch is None else scratch[1])
    a_plus_1 += 1.0
    a_plus_1 *= 1.0 / _TWO53
    log = np.log(a_plus_1, out=a_plus_1)  # = −L (≤ 0)
    hi = np.subtract(inv_a, log, out=inv_a)
    hi *= 1.0 + 3.0 * _MARGIN
    lo = np.multiply(log, -(1.0 - 2.0 * _MARGIN), out=log)
    return lo, hi


def _decimal_exp_bounds(big: int, n_words: int) -> tuple[Decimal, Decimal, int] | None:
    """Decimal bounds on −ln V for V ∈ [big, big + 1)·2^(−64n), and the precision used."""
    if big == 0:
        return None
    prec = 40 + 20 * n_words
    with localcontext() as ctx:
        ctx.prec = prec
        scale = Decimal(2) ** (64 * n_words)  # exact: fewer digits than prec
        e_lo = -((Decimal(big + 1) / scale).ln())
        e_hi = -((Decimal(big) / scale).ln())
        tol = Decimal(10) ** (-(prec - 8)) * (1 + e_hi)
        return e_lo - tol, e_hi + tol, prec


def _refined_exp_bounds(words: Iterator[int]) -> Iterator[tuple[Decimal, Decimal, int]]:
    """Enclosures (lo, hi, prec) of −ln V, V = 0.w₀w₁w₂… the concatenated 64-bit words,
    one per word drawn that gives one (:func:`_decimal_exp_bounds`), each tighter."""
    big, n = 0, 0
    while True:
        big = (big << 64) | next(words)
        n += 1
        bounds = _decimal_exp_bounds(big, n)
        if bounds is not None:
            yield bounds


def exact_floor_t_exp(t: Fraction, words: Iterator[int]) -> int:
    """⌊t·(−ln V)⌋ exactly, V = 0.w₀w₁w₂… the concatenated 64-bit words (drawn as needed)."""
    for e_lo, e_hi, prec in _refined_exp_bounds(words):
        with localcontext() as ctx:
            ctx.prec = prec
            tt = Decimal(t.numerator) / Decimal(t.denominator)
            slack = tt * Decimal(10) ** (-(prec - 8)) * (1 + e_hi)
            lo, hi = tt * e_lo - slack, tt * e_hi + slack
            if lo > 0 and math.floor(lo) == math.floor(hi):
                return math.floor(lo)
            if hi < 1:
                return 0
    raise AssertionError("unreachable: the word stream is infinite")


def exact_exp_greater(gamma: Fraction, words: Iterator[int]) -> bool:
    """[−ln V > γ] exactly (Bernoulli(e^{−γ})), V = 0.w₀w₁… drawn as needed."""
    for e_lo, e_hi, prec in _refined_exp_bounds(words):
        with localcontext() as ctx:
            ctx.prec = prec
            g = Decimal(gamma.numerator) / Decimal(gamma.denominator)
            slack = Decimal(10) ** (-(prec - 8)) * (1 + g)
            if e_lo > g + slack:
                return True
            if e_hi < g - slack:
                return False
    raise AssertionError("unreachable: the word stream is infinite")


def word_stream(first: int, ext: Callable[[int], int]) -> Iterator[int]:
    yield first
    r = 1
    while True:
        yield ext(r)
        r += 1


def _floor_t_exp_enclosed(words: U64, t: Fraction) -> tuple[I64, NDArray[np.bool_]]:
    """⌊t·(−ln V)⌋ where decided from 53 bits, and the mask of undecided entries.

    Exact where decided: t·(−ln V) lies in [lo, hi] (:func:`_exp_enclosure`, one
    logarithm, with t's rounding covered by one more margin M on each side), and the
    floor is returned only when ⌊lo⌋ + 1 > hi, i.e. when every value of the
    enclosure has the same floor — the floor of the true, infinite-precision value.
    Elsewhere (hi = inf at a zero word, or an integer inside the enclosure; about
    t·2⁻⁴⁰ of the entries) the entry is 0 and marked undecided, for
    :func:`exact_floor_t_exp`. So the result does not depend on the enclosure's
    width (a wider one only sends more entries to the exact path): exact sampling,
    not an approximation. Computed in place, :data:`_SLICE` words at a time, in two
    float scratch arrays that stay in the processor's cache (element by element the
    same operations: the same bits as on the whole array, at about half the time).
    """
    tf = float(t)  # relative error ≤ 2⁻⁵³, inside the extra margin below
    flat = words.reshape(-1)
    g = np.empty(flat.shape, dtype=np.int64)
    undecided = np.empty(flat.shape, dtype=bool)
    size = min(flat.size, _SLICE)
    scratch = np.empty(size), np.empty(size)
    for start in range(0, flat.size, _SLICE):
        end = min(start + _SLICE, flat.size)
        top, mask = g[start:end], undecided[start:end]
        room = (scratch[0][: end - start], scratch[1][: end - start])
        lo, hi = _exp_enclosure(flat[start:end], top=top, scratch=room)
        lo *= tf * (1.0 - _MARGIN)
        hi *= tf * (1.0 + _MARGIN)
        np.floor(lo, out=lo)  # lo ≥ 0: the floor is exact in float and fits int64
        hi -= lo
        np.greater_equal(hi, 1.0, out=mask)  # also catches hi = inf
        np.copyto(lo, 0.0, where=mask)
        np.copyto(top, lo, casting="unsafe")
    return g.reshape(words.shape), undecided.reshape(words.shape)


#: words per slice of :func:`_floor_t_exp_enclosed` and :func:`_floor_t_exp_fast`: two
#: float scratch arrays (2 × 256 KiB) fit a core's L2 cache; 2^15 took 0.5× the
#: whole-array time at 2·10^6 words
_SLICE = 1 << 15

#: M, the bits after the leading one of the 53-bit prefix a that index a bucket of
#: :func:`_floor_table` (54 × 2^M int32 entries: 864 KiB at M = 12)
_TABLE_BITS = 12
#: the largest t the table is used for: about t·1.6·10⁻⁴ of the entries fall in a bucket
#: whose floor is not constant (4% at 256), and they take the enclosure path
_TABLE_MAX_T = 256.0


@functools.lru_cache(maxsize=8)
def _floor_table(t: Fraction, margin: float) -> NDArray[np.int32]:
    """⌊t·(−ln V)⌋ for every V of a bucket of the 53-bit prefix a, or −1 where it is not
    the same for all of them.

    Bucket (e, j), for a ≥ 1, holds the a with ⌊log₂ a⌋ = e whose M = :data:`_TABLE_BITS`
    bits after the leading one are j (for e < M, a itself): a ∈ [L, U) with
    L = 2^e + j·2^(e−M) and U = L + max(2^(e−M), 1), so V ∈ [L, U)·2⁻⁵³ and
    −ln V ∈ (−ln(U·2⁻⁵³), −ln(L·2⁻⁵³)]. Both ends are exact floats (integers ≤ 2⁵³
    scaled by a power of two), so with the log's relative error below ``margin``
    (:data:`_MARGIN`, the bound :func:`_exp_enclosure` rests on):
    lo = fl(−ln(U·2⁻⁵³))·(1 − 2M)·t·(1 − M) ≤ t·(−ln V) ≤
    hi = fl(−ln(L·2⁻⁵³))·(1 + 2M)·t·(1 + M), the extra M's covering t's rounding and
    the few products' roundings (relative 2⁻⁵³ each). The entry is ⌊lo⌋ when
    ⌊lo⌋ + 1 > hi — then every V of the bucket has that floor, whatever its further
    bits — and −1 otherwise. Entry (e, j) is at index (e + 1)·2^M + j; the first 2^M
    entries (where a = 0 lands, clipped) are −1.
    """
    bits = _TABLE_BITS
    tf = float(t)
    j = np.arange(1 << bits, dtype=np.float64)
    grid = np.full((54, 1 << bits), -1, dtype=np.int32)
    # One exponent at a time (elementwise, so the same values as on the whole grid):
    # temporaries of 2^M floats, not 53·2^M (a count run traced 11 MB building it whole).
    for e in range(53):
        low = np.ldexp(1.0 + j / (1 << bits), e)  # L, exact
        high = low + max(math.ldexp(1.0, e - bits), 1.0)  # U, exact
        with np.errstate(divide="ignore"):
            lo = -np.log(np.ldexp(high, -53)) * (1.0 - 2.0 * margin) * (tf * (1.0 - margin))
            hi = -np.log(np.ldexp(low, -53)) * (1.0 + 2.0 * margin) * (tf * (1.0 + margin))
        floor = np.floor(lo)
        decided = (floor + 1.0 > hi) & (lo >= 0.0)
        grid[e + 1] = np.where(decided, floor, -1.0)
    table: NDArray[np.int32] = grid.reshape(-1)
    table.setflags(write=False)
    return table


def _floor_t_exp_fast(words: U64, t: Fraction) -> tuple[I64, NDArray[np.bool_]]:
    """⌊t·(−ln V)⌋ where decided from 53 bits, and the mask of undecided entries.

    First by table (:func:`_floor_table`, for t ≤ :data:`_TABLE_MAX_T`): the bucket of
    a = word >> 11 is read from the bits of float(a) (exact, a < 2⁵³): its exponent
    and the first M bits of its mantissa. A bucket whose floor is constant gives it
    exactly; the rest (about t·1.6·10⁻⁴ of the entries at M = 12) go to
    :func:`_floor_t_exp_enclosed`, whose undecided entries are this function's. Every
    decided entry is the exact floor, so the result is the same as the enclosure's
    alone wherever that decides: 4.6 ns instead of 11 ns per word at t = 10 (2·10⁶
    words, best of 7). Computed :data:`_SLICE` words at a time.
    """
    tf = float(t)
    if not tf <= _TABLE_MAX_T:
        return _floor_t_exp_enclosed(words, t)
    table = _floor_table(t, _MARGIN)
    bits = _TABLE_BITS
    flat = words.reshape(-1)
    g = np.empty(flat.shape, dtype=np.int64)
    size = min(flat.size, _SLICE)
    scratch, found = np.empty(size), np.empty(size, dtype=np.int32)
    base, shift = np.uint64(1022 << bits), np.uint64(52 - bits)
    for start in range(0, flat.size, _SLICE):
        end = min(start + _SLICE, flat.size)
        top, x, got = g[start:end], scratch[: end - start], found[: end - start]
        np.right_shift(flat[start:end], np.uint64(11), out=top.view(np.uint64))
        np.copyto(x, top, casting="unsafe")  # float(a): exact, a < 2^53
        index = x.view(np.uint64)
        np.right_shift(index, shift, out=index)  # exponent and M mantissa bits
        np.subtract(index, base, out=index)  # a = 0: negative as int64, clipped to -1
        np.take(table, index.view(np.int64), mode="clip", out=got)
        np.copyto(top, got)
    rest = np.flatnonzero(g < 0)
    undecided = np.zeros(flat.shape, dtype=bool)
    if rest.size:
        g_rest, u_rest = _floor_t_exp_enclosed(flat[rest], t)
        g[rest] = g_rest
        undecided[rest[u_rest]] = True
    return g.reshape(words.shape), undecided.reshape(words.shape)


def _uniform_open(words: U64) -> F64:
    """(a + 1/2)·2^-53 ∈ (0, 1) from the top 53 bits."""
    out: F64 = ((words >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO53
    return out


#: the words of one uniform V, drawn as needed
Words = Iterator[int]
