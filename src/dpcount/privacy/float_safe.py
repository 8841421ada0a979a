"""Float-safe release of continuous noise: every released value is snapped to a
power-of-two grid chosen from its own standard deviation, and the guarantee pays for the
floating-point computation with a δ term proved by coupling it with the exact-real
mechanism.

Why. A release ``fl(S_t + N̂_t)`` of a float running sum and float noise is a data-dependent
rounding: which floats it can take depends on S_t, so its low-order bits can tell a count
of 0 from a count of 1 with certainty (Mironov 2012). Snapping the value to a grid g_t·ℤ
far above the rounding error of the computation, while keeping the running sum's part on
the grid out of every rounding, makes the released bits those of a post-processing of the
exact-real mechanism, except on a rare event whose probability η this module bounds.

Notation (all quantities public, none read off the data):

====================  =====================================================================
u                     2^-53, the unit roundoff of float64
S_t                   the running sum as computed (float64; exact for whole numbers < 2^53)
z_j                   exact i.i.d. draws of the calibrated law (Laplace or Gaussian), σ₁ = sd
N_t = Σ_j L_tj z_j    the exact-real noise of release t; σ_t its (exact, public) std
N̂_t                   the noise the float computation produces (sampler + noise process)
m                     :data:`GRID_BITS` = 2
g_t                   2^(⌊log₂ σ̂_t⌋ − m) (σ̂_t: σ_t as computed), so σ_t/2^(m+1) < g_t ≤ σ_t/2^m
                      up to the rounding of σ̂_t (a relative 2^-40 is allowed for it below)
R_g                   round to the nearest multiple of g, ties to even
RN                    IEEE round to nearest float64
====================  =====================================================================

**Release.** With ``lo_t = fmod(S_t, g_t)`` and ``hi_t = S_t − lo_t`` (both exact: hi_t is a
multiple of g_t no larger than |S_t|), the released value is

    V_t = RN(hi_t + R_{g_t}(fl(lo_t + N̂_t)))      (:func:`snap_release`).

``/g``, ``rint`` and ``·g`` are exact for a power of two, so the only roundings are the
addition ``lo_t + N̂_t`` (on values of the noise's size, never of the sum's) and the final
RN, a fixed function of the exact value hi_t + R_g(·).

**Float model (F)** — an assumption on the noise computation, not on the data: there is a
coupling of the float draws with exact draws z_j such that, for every release t,

    |N̂_t − N_t| + u·|N̂_t| ≤ κ·u·σ_t·(1 + Z*/σ₁),     Z* = max_j |z_j|,

with κ = :data:`MODEL_KAPPA` = 2^8. This covers the sampler (numpy's ziggurat draws, or
the keyed PRF sampler, within a few ulps of an exact draw, as every floating-point analysis
of DP noise assumes: Mironov 2012 assumes a correctly rounded logarithm) and the noise
process's sums, products and recursions. Measured (benchmarks/float_model_long.py;
tests/privacy/test_float_model_long.py; tests/privacy/test_float_safe.py at T = 512) for
every registered mechanism and noise path (one ``next_many``, ``next_many`` in blocks,
scalar ``next``, vector ``next`` and ``next_many`` of dim 2–4), seeds 1–3, from the very
draws a release used, against the mechanism's exact noise (exact by splitting the draws
for the trees, smooth binary and input perturbation, whose noise only adds draws; long
double otherwise: Honaker's recursion, the FFT convolutions, the BLT buffers with the
accurate decays, dense L·z), the largest ratio of the left side to u·σ_t·(1 + Z*/σ₁) is
≤ 2.4 for the binary and k-ary trees and Honaker up to T = 2^20 (1.4 at 2^22), ≤ 3.1 for
smooth binary, ≤ 5.4 for sqrt, the horizon-free sqrt and the blocked column-normalized
sqrt up to 2^20 (≤ 4.6 at 2^22), ≤ 5 for dense (2^11), ≤ 5.1 for toeplitz's scalar paths
up to 2^16, ≤ 20 for the BLT up to 2^16 (vector steps too) and ≤ 53 up to 2^24, ≤ 49 for
the horizon-free BLT's blocks up to 2^22 (58 at 2^26, scalar, seed 1; vector blocks 67
at 2^24, refused there) and ≤ 24 for its vector steps up to 2^17 (both with its
compensated decays), ≤ 16 for the column-normalized and row-scaled BLT's blocks and
scalar steps up to 2^20 and ≤ 53 at 2^22 (their long forms beyond 2^16 / 2^17; 60 at
2^17 before them),
and ≤ 62 at each remaining path's limit: toeplitz's filter (its
vector paths) up to 2^16, input perturbation (a running sum, ≈ √t growth) up to 2^20,
the column-normalized sqrt with one weight per column up to 2^13, the row-scaled sqrt up
to 2^14 and banded Toeplitz up to 2^13, and the column-normalized / row-scaled BLT's
vector steps up to 2^12. Beyond those limits the ratio passes κ/4
where measured (72 to 564), so each limit is enforced: the mechanism's largest horizon
(registry), the blocked default of the column-normalized sqrt beyond 2^13, and
``counting.factorization.blt.FLOAT_MODEL_HORIZONS`` for the BLT paths (the horizon-free
BLT's by the step reached); κ = 256 leaves a margin ≥ 4 everywhere. Not measured: the
horizon-free BLT's vector blocks beyond 2^22 (refused; scalar blocks to 2^26).

**Theorem.** Let V be the released vector (n values) and V* = (RN(R_{g_t}(S_t + N_t)))_t,
a post-processing of the exact-real mechanism S + N. Under (F), TV(V, V*) ≤ n·η with the
per-value constant (:func:`eta`)

    η = u·[κ(1+K)·(4 + 2^(m+2)·r·c) + 8·2^-m·r + 4c] + D·p(K),
    r = 1 + 2^-40,  c = 1 + 2^-30,

where K = :func:`tail_multiple` (the smallest integer with D·p(K) ≤ u), p(K) = P[|z| > Kσ₁]
(erfc(K/√2) for Gaussian noise, e^{−√2·K} for Laplace noise) and D = :data:`DRAWS_PER_VALUE`
bounds the draws per released value. Hence if the exact-real mechanism is (ε, δ)-DP, the
float release is (ε, δ + (1 + e^ε)·n·η)-DP; pure ε-DP (Laplace) becomes (ε, (1+e^ε)·n·η)-DP.

*Proof.* Couple as in (F) and let A be the event Z* ≤ Kσ₁; P[not A] ≤ (draws)·p(K) ≤ n·D·p(K)
(union bound). On A, write c_t = fl(lo_t + N̂_t); then
|c_t − (lo_t + N_t)| ≤ |N̂_t − N_t| + u·|lo_t + N̂_t| ≤ e_t := κu(1+K)σ_t + 2ug_t, since
|lo_t| < g_t. Because hi_t ∈ g_tℤ, R_g(S_t + N_t) = hi_t + R_g(lo_t + N_t) (ties have
probability 0), so V_t ≠ V*_t only if R_g(c_t) ≠ R_g(lo_t + N_t), which needs lo_t + N_t
within e_t of a rounding boundary (k + ½)·g_t. N_t is a linear combination of independent
log-concave variables, hence log-concave (Prékopa 1973), so unimodal with maximal density
f_max ≤ 1/σ_t (Bobkov & Chistyakov 2015: Var·f_max² ≤ 1 for log-concave laws). For a
unimodal density and the periodic band set B = ∪_k (b_k − e, b_k + e), b_k = (k+½)g, 2e < g:
on each side of the mode, the band whose centre is nearest the mode has mass ≤ 2e·f_max, and
every further band k has mass ≤ 2e·f(b_k − e) ≤ (2e/(g − 2e))·(mass of the gap
[b_{k−1} + e, b_k − e] before it), f being monotone there (the gap lies beyond the previous
centre, on the mode's far side) and the gaps disjoint; so P[N_t + lo_t ∈ B] ≤
4e·f_max + 2e/(g − 2e), for any shift lo_t. Here 2e_t/g_t < 2^-31, so 2e/(g − 2e) ≤
c·2e/g; with σ_t/g_t < 2^(m+1)·r and g_t/σ_t ≤ 2^-m·r, 4e_t/σ_t + c·2e_t/g_t ≤ u times the
bracket of η. Union over the n values and adding P[not A] gives TV ≤ n·η. For neighbours
x, x' and any set E: P[V(x) ∈ E] ≤ P[V*(x) ∈ E] + nη ≤ e^ε·P[V*(x') ∈ E] + δ + nη ≤
e^ε·P[V(x') ∈ E] + δ + (1 + e^ε)·nη. ∎

What it does not cover: for fractional data the float running sums S_t are themselves a
rounding of the data; the theorem is about the mechanism applied to those sums (as before).
The bound is a union over every released value, so it grows with n (about 5.7·10⁻¹²
per value for Gaussian noise, 1.7·10⁻¹¹ for Laplace: 10⁶ values add ≈ 2·10⁻⁵ and
6·10⁻⁵ to δ at ε = 1); integer noise (``noise="discrete-laplace"`` /
``"discrete-gaussian"``) stays exact and needs no such term.

Utility: |V_t − (S_t + N̂_t)| ≤ g_t/2 ≤ σ_t/2^(m+1) = σ_t/8 for every draw (plus one final
rounding), so the RMSE grows by at most σ_t/8 (Minkowski) and, N_t being continuous, the
variance by about g_t²/12 ≤ σ_t²/192. The std a front end prints stays the exact std of
S_t + N_t.

References:
    * I. Mironov. "On significance of the least significant bits for differential
      privacy". ACM CCS 2012. https://doi.org/10.1145/2382196.2382264
    * A. Prékopa. "On logarithmic concave measures and functions". Acta Sci. Math.
      (Szeged) 34, 1973, 335–343. (no link)
    * S. G. Bobkov, G. P. Chistyakov. "On concentration functions of random variables".
      J. Theoretical Probability 28, 2015, 976–988. https://arxiv.org/abs/1302.6380
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_integer, check_real

__all__ = [
    "DRAWS_PER_VALUE",
    "GRID_BITS",
    "MODEL_KAPPA",
    "SCALAR_ROUNDER",
    "SCALAR_ROUNDER_RANGE",
    "FloatSafety",
    "GridTable",
    "StepGrids",
    "eta",
    "float_delta",
    "float_safety",
    "release_grids",
    "snap_in_blocks",
    "snap_release",
    "snap_scalar",
    "tail_multiple",
    "tail_probability",
]

#: m: step t's grid is the largest power of two ≤ σ_t·2^-m
GRID_BITS = 2
#: κ of the float model (F): the float noise is within κ·u·σ_t·(1 + Z*/σ₁) of the exact one
MODEL_KAPPA = 256
#: D: a bound on the i.i.d. draws a mechanism makes per released value (trees ≤ h ≤ 53)
DRAWS_PER_VALUE = 64
_U = Fraction(1, 2**53)
#: the smallest std with a grid: g and every |noise|/g ≥ 2^-1003 stay normal (exact) floats
_SMALLEST_SIGMA = 2.0**-1000


def tail_probability(noise: str, k: int) -> float:
    """p(K) = P[|z| > K·sd] for one draw, rounded up: erfc(K/√2) (Gaussian) or
    exp(−√2·K) (Laplace, sd = √2·scale)."""
    k = check_integer("k", k, ge=1)
    if noise == "gaussian":
        p = math.erfc(k / math.sqrt(2.0))
    elif noise == "laplace":
        p = math.exp(-math.sqrt(2.0) * k)
    else:
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    return p * (1.0 + 1e-12)  # libm's erfc/exp are within a few ulps: round outward


def tail_multiple(noise: str) -> int:
    """K: the smallest integer with D·p(K) ≤ u (so the tail event costs at most u)."""
    k = 1
    while DRAWS_PER_VALUE * tail_probability(noise, k) > 2.0**-53:
        k += 1
    return k


def eta(noise: str) -> float:
    """η: the per-value bound of the theorem for ``"laplace"`` or ``"gaussian"`` noise,
    computed exactly in rationals and rounded up."""
    k = tail_multiple(noise)
    r, c = 1 + Fraction(1, 2**40), 1 + Fraction(1, 2**30)
    m = GRID_BITS
    # e_t/g_t < κu(1+K)·2^(m+1)·r + 2u keeps 2e/(g − 2e) below c·2e/g (the proof)
    if not 2 * _U * (MODEL_KAPPA * (1 + k) * 2 ** (m + 1) * r + 2) < Fraction(1, 2**31):
        raise AssertionError("the float model's band is not below 2^-31 of the grid")
    kappa = MODEL_KAPPA * (1 + k)
    bracket = kappa * (4 + 2 ** (m + 2) * r * c) + 8 * Fraction(1, 2**m) * r + 4 * c
    exact = _U * bracket + DRAWS_PER_VALUE * Fraction(tail_probability(noise, k))
    return _round_up(exact)


def release_grids(sigmas: Any) -> Any:
    """g = the largest power of two ≤ σ·2^-m (m = :data:`GRID_BITS`), exactly, for each
    standard deviation σ ≥ 2^-1000 (a float, or an array of them).

    Raises:
        ValueError: a σ below 2^-1000 (a subnormal grid would make snapping inexact),
            infinite or NaN.
    """
    if type(sigmas) is float and _SMALLEST_SIGMA <= sigmas < math.inf:  # the stream's path
        return math.ldexp(1.0, math.frexp(sigmas)[1] - 1 - GRID_BITS)
    if np.ndim(sigmas) == 0:
        s = check_real("sigma", sigmas, ge=_SMALLEST_SIGMA)
        _, exponent = math.frexp(s)  # s = mantissa·2^exponent, 0.5 ≤ mantissa < 1
        return math.ldexp(1.0, exponent - 1 - GRID_BITS)
    arr = np.asarray(sigmas, dtype=np.float64)
    if not (np.isfinite(arr).all() and (arr >= _SMALLEST_SIGMA).all()):
        raise ValueError(
            "every standard deviation must be finite and >= 2^-1000 (its grid and the "
            "noise divided by it must stay normal floats)"
        )
    _, exponents = np.frexp(arr)
    return np.ldexp(1.0, exponents - 1 - GRID_BITS)


#: a table keeps its grids run-length encoded when it has at most one run per this many steps
_RUN_STEPS = 16
#: else as float64 grids up to this many steps (8 bytes a step), int16 exponents beyond
_DENSE_FLOATS = 1 << 22


class GridTable:
    """The grids of steps 1..T (:func:`release_grids` of √V_t), kept once per mechanism in
    O(runs) memory when the grid changes rarely (the BLTs, the square roots: V_t grows
    slowly), else one float64 grid per step up to 2^22 steps and one int16 exponent
    per step beyond (the trees), plus 1/g of every step once a batch release asks for it
    (:meth:`step_inverses`); a mechanism keeps its table, and its ``memory_estimate``
    counts it as structure (:meth:`kept_bytes`).

    Args:
        variances: V_1, …, V_T (float64), each ≥ 2^-2000.
    """

    def __init__(self, variances: NDArray[np.float64]) -> None:
        grids = release_grids(np.sqrt(np.asarray(variances, dtype=np.float64)))
        self.horizon = int(grids.shape[0])
        _, exponents = np.frexp(grids)  # grid = 2^(exponent − 1)
        changes = np.flatnonzero(exponents[1:] != exponents[:-1]) + 1
        self._runs = _RUN_STEPS * (len(changes) + 1) <= self.horizon
        self._inverses: tuple[NDArray[np.float64], float] | None = None  # step_inverses
        self._inverses_built = False
        if self._runs:
            #: first step (0-based) of each run, and its grid
            self._starts = np.concatenate(([0], changes)).astype(np.int64)
            self._grids = grids[self._starts]
        elif self.horizon <= _DENSE_FLOATS:
            self._grids = grids  # read by slicing: no arithmetic per release
        else:
            self._exponents = (exponents - 1).astype(np.int16)

    def grids(self, first: int, n: int) -> NDArray[np.float64] | float:
        """The grids of steps first … first + n − 1 (1-based): a float when they are all
        one grid, else a float64 array of n."""
        lo, hi = first - 1, first - 1 + n
        if not (lo >= 0 and n >= 1 and hi <= self.horizon):
            raise ValueError(f"steps {first}..{hi} are outside 1..{self.horizon}")
        if not self._runs:
            if self.horizon <= _DENSE_FLOATS:
                return self._grids[lo:hi]  # type: ignore[no-any-return]
            return np.ldexp(1.0, self._exponents[lo:hi])  # type: ignore[no-any-return]
        i0 = int(np.searchsorted(self._starts, lo, side="right")) - 1
        i1 = int(np.searchsorted(self._starts, hi, side="left"))
        if i1 - i0 == 1:
            return float(self._grids[i0])
        bounds = np.clip(np.append(self._starts[i0:i1], hi), lo, hi)
        return np.repeat(self._grids[i0:i1], np.diff(bounds))

    def runs(self, first: int, n: int, most: int) -> list[tuple[int, int, float]] | None:
        """The grids of steps first … first + n − 1 as runs (lo, hi, grid): steps
        first + lo … first + hi − 1 share one grid; None when the table is not
        run-length encoded or the steps span more than ``most`` runs."""
        if not self._runs:
            return None
        lo, hi = first - 1, first - 1 + n
        if not (lo >= 0 and n >= 1 and hi <= self.horizon):
            raise ValueError(f"steps {first}..{hi} are outside 1..{self.horizon}")
        i0 = int(np.searchsorted(self._starts, lo, side="right")) - 1
        i1 = int(np.searchsorted(self._starts, hi, side="left"))
        if i1 - i0 > most:
            return None
        bounds = [lo, *self._starts[i0 + 1 : i1].tolist(), hi]
        grids = self._grids[i0:i1].tolist()
        return [(a - lo, b - lo, g) for a, b, g in zip(bounds[:-1], bounds[1:], grids, strict=True)]

    def run_of(self, step: int) -> tuple[float, int, int] | None:
        """The grid of step ``step`` + 1 and the run of steps sharing it, (grid, lo, hi):
        steps lo + 1 … hi (0-based lo ≤ step < hi); None when the table is not
        run-length encoded."""
        if not self._runs:
            return None
        if not 0 <= step < self.horizon:
            raise ValueError(f"step {step + 1} is outside 1..{self.horizon}")
        i = int(np.searchsorted(self._starts, step, side="right")) - 1
        hi = int(self._starts[i + 1]) if i + 1 < len(self._starts) else self.horizon
        return float(self._grids[i]), int(self._starts[i]), hi

    def array(self, first: int, n: int) -> NDArray[np.float64]:
        """:meth:`grids` as a float64 array of n."""
        g = self.grids(first, n)
        return np.full(n, g) if isinstance(g, float) else g

    @staticmethod
    def kept_bytes(horizon: int, runs: int | None = None, *, run: int = 1) -> int:
        """The most a table of ``horizon`` steps keeps, in bytes, when its grid takes at
        most ``runs`` runs of one grid (None: any number, up to one per step) and a
        batch release asks for :meth:`step_inverses` ``(run)``: the grids (16 bytes a
        run when run-length encoded, else 8 bytes a step up to 2^22 steps and 2 beyond)
        and 1/g of every step (8 bytes a step, up to :data:`_INVERSE_STEPS` steps);
        with ``runs`` None the larger of the two encodings. From the horizon alone:
        nothing is built (a mechanism's ``memory_estimate``)."""
        T = check_integer("horizon", horizon, ge=1)
        counts = [T] if runs is None else [min(check_integer("runs", runs, ge=1), T)]
        if runs is None:
            counts.append(T // _RUN_STEPS)  # the most runs a run-length encoded table has
        most = 0
        for r in counts:
            encoded = _RUN_STEPS * r <= T
            grids = 16 * r if encoded else (8 * T if T <= _DENSE_FLOATS else 2 * T)
            short = not (encoded and r * run <= T)  # step_inverses builds them
            inverses = 8 * T if short and T <= _INVERSE_STEPS else 0
            most = max(most, grids + inverses)
        return most

    def step_inverses(self, run: int) -> tuple[NDArray[np.float64], float] | None:
        """1/g of every step (float64, exact: each g a power of two; built once, kept: 8
        bytes a step) and the largest grid, or None when the table's runs of one grid
        average at least ``run`` steps (a run at a time is faster then), it has more than
        :data:`_INVERSE_STEPS` steps, or a grid lies outside [2^-950, 2^960]."""
        if self._runs and len(self._starts) * run <= self.horizon:
            return None
        if not self._inverses_built:
            self._inverses_built = True
            if self.horizon <= _INVERSE_STEPS:
                grids = self.array(1, self.horizon)
                if float(grids.min()) >= 2.0**-950 and float(grids.max()) <= 2.0**960:
                    self._inverses = (1.0 / grids, float(grids.max()))
        return self._inverses


#: a :class:`GridTable` keeps :meth:`~GridTable.step_inverses` up to this many steps
_INVERSE_STEPS = 1 << 22


class StepGrids:
    """The grids of consecutive steps, read from an iterator of blocks of their
    variances (a stream's per-step grid: no square root or ``frexp`` per step; the
    same floats as :func:`release_grids` of each √V_t).

    A block's grids are kept as runs (one grid, how many consecutive steps share it):
    a stream's per-step path takes a whole run with :meth:`run` and compares its step
    with the run's end, and gives back what it did not use (:meth:`give_back`) before
    anything else reads the grids.

    Args:
        variances: float64 arrays V_t…, then the next steps' … (e.g.
            ``mechanism.iter_variance_blocks(t)``), of any lengths.
    """

    _FIRST_BLOCK = 64
    _LARGEST_BLOCK = 4096

    def __init__(self, variances: Iterator[NDArray[np.float64]]) -> None:
        self._variances = variances
        self._rest: NDArray[np.float64] = np.empty(0)  # read, not yet turned into grids
        self._block = self._FIRST_BLOCK
        #: the read grids not yet handed out, as runs (grid, steps), the next one last
        #: (one list for the object's life: a stream's per-step path pops whole runs)
        self.runs: list[tuple[float, int]] = []

    def run(self) -> tuple[float, int]:
        """The next step's grid and the number of steps (≥ 1, from that one) sharing
        it, all handed out."""
        if not self.runs:
            self._add_runs()
        g, n = self.runs.pop()
        return g, n

    def give_back(self, grid: float, n: int) -> None:
        """Return the last ``n`` steps of a run taken with :meth:`run` (unused): they
        are the next ones handed out."""
        if n > 0:
            self.runs.append((grid, n))

    def next(self) -> float:
        """The next step's grid."""
        runs = self.runs
        if not runs:
            self._add_runs()
        g, n = runs[-1]
        if n == 1:
            runs.pop()
        else:
            runs[-1] = (g, n - 1)
        return g

    def take(self, n: int) -> NDArray[np.float64]:
        """The next ``n`` steps' grids."""
        parts, got, runs = [], 0, self.runs
        while runs and got < n:
            g, m = runs[-1]
            k = min(n - got, m)
            parts.append(np.full(k, g))
            got += k
            if k == m:
                runs.pop()
            else:
                runs[-1] = (g, m - k)
        if got < n:
            parts.append(self._read(n - got))
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0)

    def _add_runs(self) -> None:
        """Read the next block of grids into runs."""
        grids = self._read(self._block)
        self._block = min(2 * self._block, self._LARGEST_BLOCK)
        starts = np.flatnonzero(np.concatenate(([True], grids[1:] != grids[:-1])))
        steps = np.diff(np.append(starts, len(grids)))
        self.runs.extend(zip(grids[starts[::-1]].tolist(), steps[::-1].tolist(), strict=True))

    def _read(self, n: int) -> NDArray[np.float64]:
        """The grids of the next ``n`` variances (fewer at the end of the iterator)."""
        parts, got = [], 0
        while got < n:
            if not len(self._rest):
                block = next(self._variances, None)
                if block is None:
                    break
                self._rest = block
            part, self._rest = self._rest[: n - got], self._rest[n - got :]
            parts.append(part)
            got += len(part)
        if not got:
            raise ValueError("no variances left: the steps are past the horizon")
        v = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return release_grids(np.sqrt(v))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class FloatSafety:
    """A continuous-noise release snapped to the grids g_t (:func:`release_grids` of each
    step's std) with the per-value TV bound η of the module's theorem: n released values
    add (1 + e^ε)·n·η to δ."""

    noise: str
    eta: float

    def delta(self, epsilon: float, values: int) -> float:
        """(1 + e^ε)·values·η, rounded up (:func:`float_delta`)."""
        return float_delta(self.eta, epsilon, values)


@functools.lru_cache(maxsize=4)
def float_safety(noise: str) -> FloatSafety:
    """The :class:`FloatSafety` of ``"laplace"`` or ``"gaussian"`` noise."""
    if noise not in ("laplace", "gaussian"):
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    return FloatSafety(noise, eta(noise))


def float_delta(eta: float, epsilon: float, values: int) -> float:
    """(1 + e^ε)·values·η rounded up: the δ that ``values`` float-safe releases add to the
    exact-real mechanism's (ε, δ) (the theorem's last step); at most 1."""
    eta = check_real("eta", eta, ge=0)
    eps = check_real("epsilon", epsilon, gt=0)
    values = check_integer("values", values, ge=0)
    e_up = Fraction(math.exp(eps)) * (1 + Fraction(1, 2**40))  # exp within an ulp: outward
    return min(1.0, _round_up((1 + e_up) * values * Fraction(eta)))


def _round_up(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def snap_release(
    sums: Any,
    noise: Any,
    grid: Any,
    *,
    work: Any = None,
    out: Any = None,
    known: tuple[Any, Any] = (None, None),
) -> Any:
    """The float-safe release ``RN(hi + R_g(fl(lo + noise)))`` (module docstring).

    Args:
        sums: running sums (float64 or int64 array, or a scalar), or an array of shape
            (1,): one sum for every value (u and q computed once and broadcast: each
            value takes the same operations on the same operands as with the sum
            repeated, so the same floats, in fewer passes).
        noise: the float noise, same shape (an array is overwritten with the result).
        grid: g, a power of two (:func:`release_grids`), or an array of them that
            broadcasts against ``noise`` (one per step: shape (n,) or (n, 1)).
        work: optional float64 scratch of shape ``(2, *noise.shape)`` (or larger along
            the first axis of each) reused across calls: fresh arrays cost a page fault
            per 4 KiB, more than the arithmetic.
        out: optional float64 array of the noise's shape for the result (``noise`` is
            then left as it is); default: ``noise`` itself.
        known: what the caller knows of the sums, ``(low, bound)``, either None: the
            least sum (spares the pass that finds it), and B with every |sum| < B
            (e.g. 2^53 after :func:`~dpcount.counting._steps.check_running_sums`:
            spares the two passes that find the largest sum).

    Returns:
        float64 values, multiples of their grid (a float for scalar inputs).

    Arrays are computed in the scaled form (every step exact for a power of two g while
    s/g stays finite, so the same floats as ``fmod``, ``/g``, ``rint``, ``·g`` and the
    sum): u = s/g, q = trunc(u) (hi = q·g), lo/g = u − q with the sign of ``fmod``'s
    zero, V = fl(rint(fl(lo/g + noise/g)) − (0 − q))·g, where (0 − q)·g = lo − s
    exactly (+0 for hi = 0, as ``fmod(s, g) − s``); scaling by a power of two commutes
    with every rounding here (no result is subnormal: g ≥ 2^-1003). When every sum is
    at least its grid, every q ≥ 1 and R − (0 − q) is R + q, one pass. Sums too large
    for s/g to stay finite take ``fmod``.
    """
    if type(noise) is not np.ndarray or noise.ndim == 0:
        return snap_scalar(float(sums), float(noise), float(grid))
    low, bound = known
    s_arr: NDArray[Any] = np.asarray(sums)
    if out is None:
        out = noise
    if s_arr.dtype.kind not in "iu":
        s_arr = np.asarray(s_arr, dtype=np.float64)
    if not _scaled_form_is_exact(s_arr, grid, bound):
        np.copyto(out, noise)
        return _snap_fmod(s_arr, out, grid)
    shape = out.shape
    if s_arr.shape == (1,) and shape != (1,):  # one sum for every value (broadcast)
        u, q = np.empty(1), np.empty(1)
    elif work is None:
        u, q = np.empty(shape), np.empty(shape)
    elif len(shape) == 1:
        u, q = work[0, : shape[0]], work[1, : shape[0]]
    else:
        u = work[0][tuple(slice(0, k) for k in shape)]
        q = work[1][tuple(slice(0, k) for k in shape)]
    inverse = _inverse(grid)  # ·(1/g) is /g, to the bit, and faster
    # fmod's zero has the sign of s: only a sum ≤ −0 can need it (a search for the least
    # sum costs a third of numpy's copysign)
    if low is None and (s_arr.dtype.kind == "f" or inverse is not None):
        low = s_arr.min()
    sign = s_arr.dtype.kind == "f" and not float(low) > 0.0
    plus = low is not None and float(low) >= (grid if inverse is not None else float(np.max(grid)))
    _snap_scaled(s_arr, noise, out, grid, inverse, u, q, sign, plus)
    return out


def _snap_scaled(
    s: NDArray[Any] | None,
    noise: NDArray[np.float64],
    out: NDArray[np.float64],
    grid: Any,
    inverse: float | None,
    u: NDArray[np.float64],
    q: NDArray[np.float64],
    sign: bool,
    plus: bool,
) -> None:
    """:func:`snap_release`'s scaled form into ``out`` (u, q: scratch of its shape;
    ``sign``: copy the sums' signs onto lo/g, needed only when a float sum is ≤ −0;
    ``plus``: every q ≥ 1, so R − (0 − q) is R + q; both chosen by the caller, each a
    pure saving: either choice gives the same floats where it is allowed). ``s`` None:
    ``u`` already holds s/g, exactly (:func:`snap_offset_sums`; no sign copy then)."""
    if s is not None:
        # integer sums: converted in a pass of their own (the float64 the mixed-type
        # ufunc would convert them to), then float arithmetic: 2-5x faster than
        # int64·float64
        s_f = s
        if s.dtype.kind in "iu":
            np.copyto(u, s)
            s_f = u
        if inverse is None:
            np.divide(s_f, grid, out=u)  # s/g, exact (or below 1 in magnitude: q is 0 anyway)
        else:
            np.multiply(s_f, inverse, out=u)
    if inverse is None:
        np.divide(noise, grid, out=out)
    else:
        np.multiply(noise, inverse, out=out)
    np.trunc(u, out=q)
    u -= q  # lo/g, exact (the bits of s below g)
    if sign and s is not None:
        np.copysign(u, s, out=u)
    out += u
    np.rint(out, out=out)
    if plus:
        out += q  # every sum at least its grid, so every q ≥ 1: R − (0 − q) = R + q
    elif q.shape == (1,) and q[0] == 0.0:
        pass  # one sum for every value with q = ±0: 0 − q is +0, and R − (+0) is R (-0 too)
    else:
        np.subtract(0.0, q, out=q)  # (lo − s)/g, +0 when hi = 0
        out -= q
    out *= grid


def snap_in_blocks(
    sums: NDArray[Any], grid: Any, work: NDArray[np.float64], *, known: tuple[Any, Any]
) -> Callable[[int, NDArray[np.float64]], None]:
    """``finish(start, block)``: :func:`snap_release` of ``sums[start:start + len(block)]``
    and the noise ``block``, in place, to the bit, for consecutive blocks of one array of
    noise — a noise process calls it on each block right after computing it, while the
    block is in cache (a vector stream's step: the snap's ~8 elementwise passes then run
    on cached blocks instead of on the whole vector once it has left the cache).
    ``grid``: one power of two, or one per value (an array of the sums' length, sliced
    like them).

    The choices :func:`snap_release` makes per call (the scaled form, 1/g, the sign copy,
    R + q) are made once here from the whole array and ``known`` = (low, bound) (each
    only a saving: every block gets the floats the whole-array call gives). ``work``:
    float64 scratch of shape ``(2, m)`` with m at least the largest block.
    """
    low, bound = known
    grid_is_one = not isinstance(grid, np.ndarray)
    inverse = _inverse(grid) if grid_is_one else None
    if low is None and sums.size:
        low = sums.min()
    if (
        inverse is None
        or low is None
        or sums.dtype != np.float64
        or not _scaled_form_is_exact(sums, grid, bound)
    ):

        def general(start: int, block: NDArray[np.float64]) -> None:
            stop = start + len(block)
            g = grid[start:stop] if isinstance(grid, np.ndarray) else grid
            snap_release(sums[start:stop], block, g, work=work, known=(low, bound))

        return general
    sign = not float(low) > 0.0
    plus = float(low) >= grid
    g = float(grid)

    def scaled(start: int, block: NDArray[np.float64]) -> None:
        n = len(block)
        _snap_scaled(
            sums[start : start + n], block, block, g, inverse, work[0, :n], work[1, :n], sign, plus
        )

    return scaled


#: |S| below this for :func:`sum_offset`'s sums (the binade of C holds C + S/g for |S| < 2^51)
OFFSET_SUMS_LIMIT = 2**50


def sum_offset(grid: Any) -> int | None:
    """The bit pattern (as an int64 value) of C = 1.5·2^52/g for one power-of-two grid g
    with 2^-960 ≤ 1/g ≤ 2^960, else None: integer running sums S accumulated onto it in
    int64 are the bit patterns of the floats C + S/g (:func:`snap_offset_sums`).

    Why: with g = 2^k, C = 1.5·2^e (e = 52 − k) lies in the binade [2^e, 2^(e+1)), whose
    floats are 2^e + j·2^-k (0 ≤ j < 2^52) with consecutive bit patterns bits(2^e) + j;
    bits(C) = bits(2^e) + 2^51. So for an integer |S| < 2^51, the int64 bits(C) + S is
    the pattern of 2^e + (2^51 + S)·2^-k = C + S/g, exactly (0 < 2^51 + S < 2^52).
    """
    inverse = _inverse(grid)
    if inverse is None or not 2.0**-960 <= inverse <= 2.0**960:
        return None
    return int(np.float64(SCALAR_ROUNDER * inverse).view(np.int64))


def snap_offset_sums(
    w: NDArray[np.int64],
    noise: NDArray[np.float64],
    grid: float,
    *,
    scratch: NDArray[np.float64],
    low: int,
) -> None:
    """:func:`snap_release` ``(S, noise, grid)`` into ``noise``, to the bit, for integer
    running sums given as w = :func:`sum_offset` ``(grid)`` + S (int64, every |S| <
    :data:`OFFSET_SUMS_LIMIT`, the least S being ``low``): the int64 to float64
    conversion and the multiplication by 1/g become one float subtraction, and ``w`` is
    consumed (its memory holds q = trunc(S/g) afterwards: one array less in cache).

    Exact: w viewed as float64 is C + S/g exactly (:func:`sum_offset`), and
    fl((C + S/g) − C) = S/g because S/g (a multiple of 2^-k below 2^(50−k) in magnitude)
    is a float: a difference that is a float is computed exactly; S = 0 gives
    C − C = +0, as fl(0·(1/g)). snap_release computes u = fl(float(S)·(1/g)) = S/g
    exactly too (|S| < 2^53: float(S) is exact; 1/g scales by a power of two with
    neither overflow nor underflow, |S/g| ∈ [2^-960, 2^1011] for S ≠ 0), and integer
    sums take no sign copy; from u on the two are the same operations (``_snap_scaled``).

    Args:
        w: int64 of the noise's shape (C-contiguous), bits(C) + S; overwritten.
        noise: the float noise, overwritten with the release.
        grid: g, a power of two with :func:`sum_offset` not None.
        scratch: float64 of the noise's shape (u), not ``w`` or ``noise``.
        low: the least S (``plus`` when it is at least g).
    """
    inverse = _inverse(grid)
    if inverse is None:
        raise ValueError(f"grid must be a power of two, got {grid!r}")
    floats = w.view(np.float64)
    np.subtract(floats, SCALAR_ROUNDER * inverse, out=scratch)  # S/g, exactly
    # q = trunc(u) into w's memory: w is not read again
    _snap_scaled(None, noise, noise, grid, inverse, scratch, floats, False, low >= grid)


def snap_quotients(
    u: NDArray[np.float64],
    noise: NDArray[np.float64],
    inverse: NDArray[np.float64],
    *,
    q: NDArray[np.float64],
    plus: bool,
) -> None:
    """:func:`snap_release` ``(S, noise, 1/inverse)`` into ``noise``, to the bit, for
    integer running sums S (|S| < 2^53) given as float64 S (exact), one grid per value
    given by its inverse 1/g (exact: g a power of two in [2^-950, 2^960]).

    Exact: u·(1/g) is S/g, the u snap_release computes as fl(float(S)/g) (one real
    number, a float: no overflow or underflow for |S| < 2^53), and noise·(1/g) and
    x/(1/g) are the correctly rounded noise/g and x·g, the same real numbers as
    snap_release's noise/g and ·g; integer sums take no sign copy, and the rest are
    the scaled form's operations (``_snap_scaled``). ``u`` is overwritten (S/g, then
    lo/g); ``q``: float64 scratch of the noise's shape; ``plus``: every S is at least
    its grid (a saving only).
    """
    np.multiply(u, inverse, out=u)
    np.multiply(noise, inverse, out=noise)
    np.trunc(u, out=q)
    u -= q  # lo/g, exact
    noise += u
    np.rint(noise, out=noise)
    if plus:
        noise += q
    else:
        np.subtract(0.0, q, out=q)  # (lo − s)/g, +0 when hi = 0
        noise -= q
    noise /= inverse  # ·g, exactly


def _inverse(grid: Any) -> float | None:
    """1/g for one grid when it is exact — g a power of two up to 2^1022 — so x·(1/g)
    and x/g are the same rounding of one real number; else None (divide; also for an
    array of grids, where computing 1/g costs what it saves)."""
    if isinstance(grid, np.ndarray):
        return None
    g = float(grid)
    mantissa, exponent = math.frexp(g)  # g = 2^(exponent − 1) for a power of two
    return math.ldexp(1.0, 1 - exponent) if mantissa == 0.5 and g <= 2.0**1022 else None


#: 1.5·2^52: for |q| < 2^51, fl(q + M) − M is q rounded to an integer, ties to even
SCALAR_ROUNDER = 6755399441055744.0
#: 2^51: the range of q where :data:`SCALAR_ROUNDER` rounds it
SCALAR_ROUNDER_RANGE = 2251799813685248.0


def snap_scalar(s: float, noise: float, g: float) -> float:
    """:func:`snap_release` of one float sum, one float noise value and one grid (the
    streams' per-step path): ``(s − lo) + R_g(fl(lo + noise))``, lo = fmod(s, g).

    The rounding of q = fl(lo + noise)/g to an integer (ties to even, as ``round``) is
    fl(q + 1.5·2^52) − 1.5·2^52 for |q| < 2^51: the sum lies in [2^52, 2^53), where
    the floats are the integers, and 1.5·2^52 is even, so its rounding is q's; two
    float additions instead of ``round``'s int.
    """
    lo = math.fmod(s, g)
    q = (lo + noise) / g
    if -SCALAR_ROUNDER_RANGE < q < SCALAR_ROUNDER_RANGE:
        return (s - lo) + ((q + SCALAR_ROUNDER) - SCALAR_ROUNDER) * g
    return (s - lo) + round(q) * g  # round: ties to even


#: |s|/g stays below 2^1023 (finite) when |s| < this·g
_SCALED_LIMIT = 2.0**1020


def _scaled_form_is_exact(s: NDArray[Any], grid: Any, bound: Any = None) -> bool:
    """Whether s/g is finite (and g a normal float) for every sum and grid (int64 sums:
    for every grid ≥ 2^-950; any sums below a known ``bound`` B: for every grid above
    B·2^-1020)."""
    if not s.size:
        return True
    gmin = float(np.min(grid)) if isinstance(grid, np.ndarray) else float(grid)
    if not 2.0**-1003 <= gmin < math.inf:
        return False
    if s.dtype.kind in "iu":
        return gmin >= 2.0**-950
    if bound is not None and float(bound) < _SCALED_LIMIT * gmin:
        return True
    big = max(float(s.max()), -float(s.min()))
    return big < _SCALED_LIMIT * gmin  # False for NaN


def _snap_fmod(s: NDArray[Any], out: NDArray[np.float64], grid: Any) -> NDArray[np.float64]:
    """:func:`snap_release` with ``fmod`` (any finite sums)."""
    s_arr = np.asarray(s, dtype=np.float64)
    lo_arr = np.fmod(s_arr, grid)
    out += lo_arr
    out /= grid
    np.rint(out, out=out)
    out *= grid
    lo_arr -= s_arr  # -hi, exact
    out -= lo_arr
    return out
