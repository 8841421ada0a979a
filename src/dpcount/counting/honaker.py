"""The binary tree with Honaker's online estimator ("Honaker Online", Kairouz et al. 2021).

The binary tree mechanism releases every dyadic interval sum (node) with i.i.d.
noise of variance σ². Honaker (TPDP 2015) improves each node's estimate by
combining it with its children's estimates by inverse variance; the online
variant (Kairouz, McMahan, Song, Thakkar, Thakurta, Xu, ICML 2021, as
"Honaker Online" in count-on-your-elders §1) uses only *completed* subtrees, so the
release at step t depends on x_1..x_t only.

Notation (paper → code):

==============  ================================================================
node (j, m)     level j, covering steps m·2^j + 1 .. (m+1)·2^j; complete at (m+1)·2^j
ζ               the node's own noise (variance σ², drawn once)
e_j             error of the node's combined estimate
V_j             Var(e_j)/σ² = 2^j/(2^{j+1} − 1)  (:func:`honaker_level_variance`)
a_j, c_j        e_j = a_j·ζ + c_j·(e_left + e_right), a_j = V_j,
                c_j = V_j/(2V_{j−1}) = (2^j − 1)/(2^{j+1} − 1)
==============  ================================================================

Derivation: the children's estimates are independent and unbiased for the two
halves, so their sum has variance 2V_{j−1}; the inverse-variance combination with
the node's own noisy sum (variance 1) has variance 1/(1 + 1/(2V_{j−1})) =
2^j/(2^{j+1} − 1) (V_0 = 1, V_1 = 2/3, V_2 = 4/7, V_3 = 8/15). The release at t
sums the estimates of the dyadic decomposition of [1, t] (one node per 1-bit of
t), which use disjoint noise, so Var_t = σ²·Σ_{j: bit j of t} V_j — e.g. t = 7:
(4/7 + 2/3 + 1)σ².

Privacy: each step lies in one complete node per level j with 2^j ≤ T, so the
released node vector has ℓ₁ sensitivity h·Δ and ℓ₂ sensitivity √h·Δ with
h = ⌊log₂ T⌋ + 1 — the same as the binary tree mechanism; the estimator is
post-processing.

References:
    * J. Honaker. "Efficient use of differentially private binary trees".
      Theory and Practice of Differential Privacy (TPDP) 2015. (no link)
    * P. Kairouz, B. McMahan, S. Song, O. Thakkar, A. Thakurta, Z. Xu.
      "Practical and private (deep) learning without sampling or shuffling".
      ICML 2021. https://arxiv.org/abs/2103.00039
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_values
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting._steps import grid_table_bytes
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    buffered_stream_memory,
)
from dpcount.counting.digits import DigitSystem
from dpcount.counting.participation import Sensitivity, complete_blocks, tree_sensitivities
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource

__all__ = [
    "Honaker",
    "HonakerBatchNoise",
    "HonakerExactNoiseProcess",
    "HonakerNoiseProcess",
    "honaker_level_variance",
    "honaker_max_variance_units",
    "honaker_mean_variance_units",
    "honaker_step_variance_units",
]


def honaker_level_variance(level: int) -> float:
    """V_j = 2^j/(2^{j+1} − 1): variance of a level-j node's online Honaker estimate / σ²."""
    j = check_integer("level", level, ge=0)
    return 2.0**j / (2.0 ** (j + 1) - 1.0)


def _combine_coefficient(level: int) -> float:
    """c_j = V_j/(2V_{j−1}) = (2^j − 1)/(2^{j+1} − 1), the weight of the children's sum."""
    return (2.0**level - 1.0) / (2.0 ** (level + 1) - 1.0)


def honaker_step_variance_units(t: int) -> float:
    """Var_t/σ² = Σ_{j: bit j of t} V_j (e.g. t = 7 → 4/7 + 2/3 + 1)."""
    t = check_integer("t", t, ge=1)
    return sum(honaker_level_variance(j) for j in range(t.bit_length()) if (t >> j) & 1)


def honaker_mean_variance_units(horizon: int) -> float:
    """(1/T)·Σ_{t=1}^{T} Var_t/σ², O(log T).

    Σ_t Σ_{j∈bits(t)} V_j = Σ_j V_j·#{t ≤ T : bit j of t is 1}, and that count is
    ⌊(T+1)/2^{j+1}⌋·2^j + max(0, (T+1) mod 2^{j+1} − 2^j).
    """
    T = check_integer("horizon", horizon, ge=1)
    total = 0.0
    for j in range(T.bit_length()):
        period = 1 << (j + 1)
        count = ((T + 1) // period) * (1 << j) + max(0, (T + 1) % period - (1 << j))
        total += honaker_level_variance(j) * count
    return total / T


def honaker_max_variance_units(horizon: int) -> float:
    """max_{t≤T} Var_t/σ², O(log² T).

    V_j > 0, so the maximum is at T itself or at a t that keeps T's bits above a
    1-bit i of T, clears bit i and sets every bit below it.
    """
    T = check_integer("horizon", horizon, ge=1)
    best = honaker_step_variance_units(T)
    for i in range(1, T.bit_length()):
        if (T >> i) & 1:
            t = ((T >> (i + 1)) << (i + 1)) | ((1 << i) - 1)
            best = max(best, honaker_step_variance_units(t))
    return best


def _children_sums(below: NDArray[Any] | None, first: int, count: int) -> NDArray[Any]:
    """For ``count`` consecutive nodes m of a level, the sums of their children's values:
    children 2m, 2m + 1 sit at slots 2m − lo_{j−1} + 1 = ``first``, … of ``below``, the
    level under it (``next_many``'s bottom-up pass)."""
    assert below is not None
    kids = below[first : first + 2 * count]
    return kids[0::2] + kids[1::2]  # type: ignore[no-any-return]


class _DyadicNoiseProcess(SourcedNoiseProcess):
    """What the two Honaker processes share: the levels 0..⌊log₂ T⌋ + 1, and per level j
    the node of t's dyadic decomposition (``_left[j]``, where bit j of t is 1) with the
    partial sums over the levels ≥ j (``_partial[j]``), all ``zero`` at the start."""

    def __init__(self, horizon: int, source: NoiseBuffer, zero: Any) -> None:
        super().__init__(horizon, source)
        self.levels = horizon.bit_length()
        self._zero = zero
        self._left: list[Any] = [zero] * (self.levels + 1)
        self._partial: list[Any] = [zero] * (self.levels + 2)

    def live_count(self) -> int:
        return bin(self._t).count("1")


class HonakerNoiseProcess(_DyadicNoiseProcess):
    """Noise of the Honaker Online estimator for one stream.

    * ``next`` (O(1) amortized, O(log T) worst case): at step t the leaf and every
      node completing at t (levels 0..v, v = trailing zeros of t) get their own
      sample; e is combined bottom-up from the stored left sibling. The state is
      ``_left[j]``: the estimate error of the level-j node of t's dyadic
      decomposition (valid where bit j of t is 1), and ``_partial[j]``, the sum of
      those at levels ≥ j (so no running sum drifts).
    * ``next_many`` (O(n + log T)): bottom-up over the nodes completing in the
      chunk (arrays per level), then a top-down pass over the ancestors
      q = t >> j: D_j(q) = D_{j+1}(q >> 1) + [q odd]·e_j(node q − 1).

    Memory: at most ⌊log₂ T⌋ + 1 node values (×dim).
    """

    def __init__(self, horizon: int, source: NoiseBuffer) -> None:
        super().__init__(horizon, source, 0.0 if source.dim is None else np.zeros(source.dim))
        self._a = [honaker_level_variance(j) for j in range(self.levels + 1)]
        self._c = [_combine_coefficient(j) for j in range(self.levels + 1)]

    def next(self) -> Any:
        t = self._t + 1
        if t > self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        take, left, a, c = self._buffer.take_one, self._left, self._a, self._c
        e = take()
        j = 0
        while not (t >> j) & 1:  # bit j of t is 0: the level-(j+1) node completes now
            j += 1
            e = a[j] * take() + c[j] * (left[j - 1] + e)
        left[j] = e
        partial = self._partial
        value = partial[j + 1] + e
        for i in range(j, -1, -1):  # levels below j have bit 0 at t
            partial[i] = value
        self._t = t
        return value

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        t0, t1 = self._t, self._t + n
        if t1 > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {t1}")
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        H = self.levels
        # Bottom-up: e of the nodes completing in (t0, t1], per level, as "ext" arrays
        # whose slot 0 holds the level's node of t0's decomposition (or 0).
        ext: list[NDArray[np.float64]] = []
        lows: list[int] = []
        below: NDArray[np.float64] | None = None
        for j in range(H + 1):
            lo, hi = t0 >> j, (t1 >> j) - 1  # nodes m = lo..hi complete in the chunk
            count = hi - lo + 1
            cur = np.empty((count + 1, *tail))
            cur[0] = self._left[j] if (t0 >> j) & 1 else 0.0
            if count > 0:
                own = self._buffer.take(count)
                if j == 0:
                    cur[1:] = own
                else:
                    kids = _children_sums(below, 2 * lo - lows[j - 1] + 1, count)
                    cur[1:] = self._a[j] * own + self._c[j] * kids
            ext.append(cur)
            lows.append(lo)
            below = cur
        # Top-down over ancestors q = t >> j of the chunk's steps.
        D: NDArray[np.float64] = np.zeros((1, *tail))  # level H: q = 0 for every t ≤ T
        q_lo_parent = 0
        for j in range(H - 1, -1, -1):
            q_lo, q_hi = (t0 + 1) >> j, t1 >> j
            q = np.arange(q_lo, q_hi + 1)
            vals = ext[j][q_lo - lows[j] : q_hi - lows[j] + 1].copy()
            vals[(q & 1) == 0] = 0.0  # node q − 1 is used only when bit j of t is 1
            D = D[(q >> 1) - q_lo_parent] + vals
            q_lo_parent = q_lo
        # State at t1: the decomposition nodes of t1 and the partial sums.
        for j in range(H + 1):
            if (t1 >> j) & 1:
                value = ext[j][(t1 >> j) - lows[j]]
                self._left[j] = float(value) if self.dim is None else value.copy()
        acc: Any = self._zero
        self._partial[H + 1] = acc
        for j in range(H, -1, -1):
            if (t1 >> j) & 1:
                acc = acc + self._left[j]
            self._partial[j] = acc
        self._t = t1
        return D

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step, the estimate errors
        of the decomposition nodes, their partial sums and the noise buffer."""
        return self._state(
            left=list(self._left), partial=list(self._partial), buffer=self._buffer.state_dict()
        )

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same horizon,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("left", "partial", "buffer"))
        left = state_values(self._owner, "left", st["left"], self.dim, self.levels + 1)
        partial = state_values(self._owner, "partial", st["partial"], self.dim, self.levels + 2)
        self._buffer.load_state_dict(st["buffer"])
        self._t, self._left, self._partial = t, left, partial


def _as_exact(values: Any) -> Any:
    """Integer samples (int, numpy int or int64 array) as Python ints (object arrays)."""
    if isinstance(values, np.ndarray):
        return values.astype(object)
    return int(values)


def _two_sum(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[Any, Any]:
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: NDArray[np.float64]) -> tuple[Any, Any]:
    """Veltkamp's split of a float64 into two halves of ≤ 26 significant bits."""
    c = 134217729.0 * a  # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _two_product(a: NDArray[np.float64], b: float) -> tuple[Any, Any]:
    """(p, e) with p = fl(a·b) and a·b = p + e exactly (Dekker's TwoProduct; no FMA)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(np.float64(b))
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


#: node values W below this in magnitude (checked) are computed in int64
_INT64_BOUND = 2**62

#: bound on |F − (Fh + Fl)| in :meth:`HonakerBatchNoise.add_and_round` (derived there)
_SUM_ERROR = 2.0**-80


class HonakerBatchNoise:
    """The exact noise of steps t0 + 1 .. t1 of :class:`HonakerExactNoiseProcess` with
    int64 node values: step t's noise is the rational Σ_{j: bit j of t} W_j / D_j,
    D_j = 2^{j+1} − 1 (W from ``ext``, see ``HonakerExactNoiseProcess._levels``).

    :meth:`add_and_round` returns RN(S_t + noise_t), the same bits as the quotient of
    the Python-int numerator by the common denominator, without forming those large
    integers. Error-free transformations (Knuth's TwoSum, Dekker's TwoProduct with
    Veltkamp's split) and the bound γ_{n−1}·Σ|x_i| on the error of any order of
    summing n numbers, γ_k = k·u/(1 − k·u) (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., SIAM 2002, chapters 3–4,
    https://doi.org/10.1137/1.9780898718027); u = 2^−53, L ≤ 64 levels:

    1. per level, floor division in int64: W_j = q_j·D_j + r_j with 0 ≤ r_j < D_j <
       2^53, so the value is I + F with the integer I = S + Σ q_j and F = Σ r_j / D_j;
    2. each τ_j = r_j / D_j as hi_j + lo_j: hi_j = fl(τ_j); r_j − hi_j·D_j is exact
       (TwoProduct, then Sterbenz) up to one rounding of a number below u·r_j, so
       |τ_j − hi_j − lo_j| ≤ 3u²;
    3. Fh = Σ hi_j by TwoSum (the exact errors go to Fl), Fl = Σ (errors + lo_j) in
       float64: 2L terms each below L·u, so F = Fh + Fl + δ with
       |δ| ≤ 3L·u² + 1.01·2L·(2L²u)·u < 2^−80 = :data:`_SUM_ERROR` (e);
    4. with |I| < 2^52 (an exact float): (s, ρ) = TwoSum(I, Fh) and (g, γ) = TwoSum(ρ,
       Fl), so I + F = s + g + γ + δ exactly with |δ| ≤ e; when g is at or beyond
       half the gap to a neighbouring float, s moves to that neighbour and g drops by
       the gap (both exact: adjacent floats, Sterbenz). RN(I + F) = s when the
       value lies strictly inside s's rounding interval (s − down, s + up) (up, down:
       half the gaps to the neighbouring floats): g < up and fl(up − g) > 2·fl(|γ| +
       e), and symmetrically below (the factor 2 absorbs the two roundings);
       |s| ≥ 2^−900 keeps the half gaps exact (no subnormals). When every r_j = 0
       the value is the integer I itself;
    5. every other step (within about 2^−80 of a rounding boundary, or outside the
       bounds) is computed exactly: the Python-int numerator over the common
       denominator, divided once (CPython rounds int / int correctly).
    """

    def __init__(
        self,
        ext: list[NDArray[np.int64]],
        lows: list[int],
        t0: int,
        t1: int,
        mult: list[int],
        denominator: int,
    ) -> None:
        self._ext, self._lows, self._t0, self._t1 = ext, lows, t0, t1
        self._mult, self.denominator = mult, denominator

    def _terms(self, t: NDArray[np.int64], j: int) -> NDArray[np.int64]:
        """W_j of each step of ``t`` whose bit j is set, else 0."""
        q = t >> j
        w = self._ext[j][q - self._lows[j]]
        bit = ((q & 1) == 1).reshape(q.shape + (1,) * (w.ndim - 1))
        return np.where(bit, w, 0)

    def numerators(self, index: NDArray[np.intp]) -> NDArray[Any]:
        """Exact Python-int numerators over ``denominator`` of the steps ``index``."""
        t = np.arange(self._t0 + 1, self._t1 + 1, dtype=np.int64)[index]
        total: NDArray[Any] = np.zeros(self._terms(t, 0).shape, dtype=object)
        for j in range(len(self._ext)):
            total = total + self._terms(t, j).astype(object) * self._mult[j]
        return total

    def add_and_round(self, sums: NDArray[np.int64]) -> NDArray[np.float64]:
        """RN(sums + noise) per step (``sums``: int64, the shape of the noise)."""
        n = self._t1 - self._t0
        sums = np.asarray(sums, dtype=np.int64)
        whole = sums.copy()
        ok = np.abs(whole) < 2**52
        f_hi = np.zeros(whole.shape, dtype=np.float64)
        f_lo = np.zeros(whole.shape, dtype=np.float64)
        for j, node in enumerate(self._ext):
            if self._t1 >> j == 0:
                break  # no step up to t1 has bit j (or higher) set
            # Per node (each serves 2^j consecutive steps), zero where bit j of the
            # node's steps is 0 (even q), then repeated over the steps t0 + 1 .. t1.
            d = (1 << (j + 1)) - 1
            q_first = self._lows[j]
            odd = ((np.arange(q_first, q_first + len(node)) & 1) == 1).reshape(
                (-1,) + (1,) * (node.ndim - 1)
            )
            w = np.where(odd, node, 0)
            q = w // d
            rf = (w - q * d).astype(np.float64)  # exact: 0 ≤ r < d < 2^53
            hi = rf / d
            p, p_err = _two_product(hi, float(d))
            lo = ((rf - p) - p_err) / d
            start = self._t0 + 1 - (q_first << j)
            span = slice(start, start + n)
            whole += np.repeat(q, 1 << j, axis=0)[span]  # |Σ q_j| ≤ Σ |W_j| < 2^62
            f_hi, err = _two_sum(f_hi, np.repeat(hi, 1 << j, axis=0)[span])
            f_lo += err + np.repeat(lo, 1 << j, axis=0)[span]
        # every r_j = 0 exactly when f_hi = 0 (a sum of non-negative hi_j, each > 0
        # when r_j > 0): the value is then the integer I itself
        inexact = f_hi != 0
        ok &= np.abs(whole) < 2**52
        a = np.where(ok, whole, 0).astype(np.float64)
        s, rho = _two_sum(a, f_hi)
        g, gamma = _two_sum(rho, f_lo)
        # Fl may carry the value past s's rounding interval: move s to the neighbour
        # (the gap is exact, and g ∓ gap is exact by Sterbenz: |g| ≤ one gap + tiny).
        up = (np.nextafter(s, np.inf) - s) / 2
        down = (s - np.nextafter(s, -np.inf)) / 2
        above, below = g >= up, g <= -down
        g = np.where(above, g - 2 * up, np.where(below, g + 2 * down, g))
        s = np.where(above, s + 2 * up, np.where(below, s - 2 * down, s))
        tol = 2 * (np.abs(gamma) + _SUM_ERROR)
        up = (np.nextafter(s, np.inf) - s) / 2
        down = (s - np.nextafter(s, -np.inf)) / 2
        inside = (g < up) & (up - g > tol) & (g > -down) & (g + down > tol)
        ok &= ~inexact | (inside & (np.abs(s) >= 2.0**-900))
        out = np.where(ok, s, 0.0)
        bad = np.flatnonzero(~ok.reshape(n, -1).all(axis=1))
        if bad.size:
            exact = sums[bad].astype(object) * self.denominator + self.numerators(bad)
            flat = exact.ravel()
            vals = np.fromiter((v / self.denominator for v in flat), np.float64, flat.size)
            out[bad] = vals.reshape(exact.shape)
        return out


class HonakerExactNoiseProcess(_DyadicNoiseProcess):
    """Exact Honaker Online noise for integer node noise (``noise="discrete-*"``).

    With the float process, ``S_t + fl(Σ a_j ζ_j)`` rounds the noise term on its
    own, so the bits of a release depend on ``(S_t, ζ)`` and not only on the noisy
    node values ``y = S_node + ζ``: the rounding of the noise term would leak the
    data (Mironov 2012). Here everything is exact:
    unrolling e_j = a_j ζ + c_j (e_left + e_right) (the products c_j ⋯ c_{i+1}
    telescope to (2^{i+1} − 1)/(2^{j+1} − 1)) gives, for a level-j node,

        e_j = W_j / D_j,   D_j = 2^{j+1} − 1,   W_j = 2^j ζ + W_{j−1}(left) + W_{j−1}(right),

    an integer recursion (W_0 = ζ). The noise of step t is the rational
    Σ_{j: bit j of t} W_j / D_j, returned as the integer numerator over the
    common denominator ``denominator`` = lcm(D_0, …, D_H). The mechanism adds
    ``S_t·denominator`` and rounds the quotient once
    (:func:`dpcount.counting.base.exact_quotients`): by linearity the value equals
    the estimator applied to the noisy node values y exactly (the true node sums go through the same
    weights, which sum to 1), so the released bits are a function of y alone:
    post-processing. ``next`` works on Python ints; ``next_many`` keeps the node
    values W in int64 when a bound checked on the batch's samples keeps every |W|
    below 2^62 (and rounds through :class:`HonakerBatchNoise`, to the same bits),
    else on Python ints (object arrays), so nothing can overflow at any horizon.
    """

    def __init__(self, horizon: int, source: NoiseBuffer) -> None:
        # _left[j]: W of the level-j node of t's decomposition (where bit j of t is 1);
        # _partial[j]: Σ_{i ≥ j, bit i of t} mult_i·W_i (numerators over denominator).
        dim = source.dim
        super().__init__(horizon, source, 0 if dim is None else np.zeros(dim, dtype=object))
        dens = [(1 << (j + 1)) - 1 for j in range(self.levels + 1)]
        #: every step's noise is (returned numerator) / denominator
        self.denominator: int = math.lcm(*dens)
        self._mult = [self.denominator // d for d in dens]

    def next(self) -> Any:
        t = self._t + 1
        if t > self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        take, left = self._buffer.take_one, self._left
        w = _as_exact(take())
        j = 0
        while not (t >> j) & 1:  # bit j of t is 0: the level-(j+1) node completes now
            j += 1
            w = (1 << j) * _as_exact(take()) + left[j - 1] + w
        left[j] = w
        partial = self._partial
        value = partial[j + 1] + self._mult[j] * w
        for i in range(j, -1, -1):  # levels below j have bit 0 at t
            partial[i] = value
        self._t = t
        return value

    def next_many(self, n: int) -> Any:
        """The noise of the next ``n`` steps: a :class:`HonakerBatchNoise` (node values
        W in int64, when a checked bound keeps every intermediate below 2^62), else an
        object array of Python-int numerators over :attr:`denominator`. Either way
        the mechanism rounds each release once, to the same bits."""
        n = check_integer("n", n, ge=1)
        t0, t1 = self._t, self._t + n
        if t1 > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {t1}")
        H = self.levels
        # The draws, level by level in the order of the recursion below (so both
        # paths consume the same samples in the same order).
        owns = [self._buffer.take(max(0, (t1 >> j) - (t0 >> j))) for j in range(H + 1)]
        # |W_j| ≤ 2^j·A + 2·max|W_{j−1}| with A the largest |sample| or carried |W|,
        # hence |W_j| ≤ (j + 1)·2^j·A ≤ (H + 1)·2^H·A: int64 is exact below 2^62.
        A = max(
            [max(int(o.max()), -int(o.min())) for o in owns if o.size]
            + [int(np.max(np.abs(np.asarray(w, dtype=object)))) for w in self._left]
        )
        if (H + 1) * (1 << H) * A < _INT64_BOUND and H < 52:  # and every D_j < 2^53
            ext, lows = self._levels(owns, t0, t1, np.int64)
            noise: Any = HonakerBatchNoise(ext, lows, t0, t1, self._mult, self.denominator)
        else:
            ext, lows = self._levels(owns, t0, t1, object)
            noise = self._numerators(ext, lows, t0, t1)
        for j in range(H + 1):
            if (t1 >> j) & 1:
                value = ext[j][(t1 >> j) - lows[j]]
                self._left[j] = _as_exact(value) if self.dim is None else _as_exact(value.copy())
        self._refresh_partial(t1)
        self._t = t1
        return noise

    def _levels(
        self, owns: list[NDArray[Any]], t0: int, t1: int, dtype: Any
    ) -> tuple[list[NDArray[Any]], list[int]]:
        """Bottom-up, as HonakerNoiseProcess.next_many, with the integer recursion for
        W: ``ext[j][q - lows[j]]`` is W of the level-j node q, for q from t0 >> j (the
        carried node, 0 if bit j of t0 is 0) to t1 >> j."""
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        ext: list[NDArray[Any]] = []
        lows: list[int] = []
        below: NDArray[Any] | None = None
        for j, own in enumerate(owns):
            lo, hi = t0 >> j, (t1 >> j) - 1
            count = hi - lo + 1
            cur = np.zeros((count + 1, *tail), dtype=dtype)
            if (t0 >> j) & 1:
                cur[0] = self._left[j]
            if count > 0:
                own = own.astype(dtype)
                if j == 0:
                    cur[1:] = own
                else:
                    cur[1:] = (1 << j) * own + _children_sums(
                        below, 2 * lo - lows[j - 1] + 1, count
                    )
            ext.append(cur)
            lows.append(lo)
            below = cur
        return ext, lows

    def _numerators(
        self, ext: list[NDArray[Any]], lows: list[int], t0: int, t1: int
    ) -> NDArray[Any]:
        """Top-down over ancestors q = t >> j: each step's noise as a Python-int
        numerator over the common denominator (object array)."""
        tail: tuple[int, ...] = () if self.dim is None else (self.dim,)
        D: NDArray[Any] = np.zeros((1, *tail), dtype=object)
        q_lo_parent = 0
        for j in range(self.levels - 1, -1, -1):
            q_lo, q_hi = (t0 + 1) >> j, t1 >> j
            q = np.arange(q_lo, q_hi + 1)
            vals = ext[j][q_lo - lows[j] : q_hi - lows[j] + 1] * self._mult[j]
            vals[(q & 1) == 0] = 0
            D = D[(q >> 1) - q_lo_parent] + vals
            q_lo_parent = q_lo
        return D

    def _refresh_partial(self, t: int) -> None:
        acc: Any = self._zero
        self._partial[self.levels + 1] = acc
        for j in range(self.levels, -1, -1):
            if (t >> j) & 1:
                acc = acc + self._mult[j] * self._left[j]
            self._partial[j] = acc

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The step, the integers W of the decomposition nodes (ints; int64 arrays for
        vector steps) and the noise buffer; the partial sums are recomputed on load."""
        left: list[Any] = []
        for j, w in enumerate(self._left):
            if self.dim is None:
                left.append(int(w))
                continue
            if any(abs(int(v)) >= 2**63 for v in w):
                raise ValueError(
                    f"cannot checkpoint this Honaker stream: node value W[{j}] does not fit "
                    "int64 (vector steps are saved as int64 arrays)"
                )
            left.append(np.asarray(w, dtype=np.int64))
        return self._state(left=left, buffer=self._buffer.state_dict())

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same horizon,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("left", "buffer"))
        owner = self._owner
        left = state_values(owner, "left", st["left"], self.dim, self.levels + 1)
        for j, w in enumerate(left):
            if isinstance(w, np.ndarray):
                if w.dtype != np.int64:
                    raise ValueError(f"corrupt {owner} state: left[{j}] must hold int64")
            elif isinstance(w, (float, np.floating)):
                raise ValueError(f"corrupt {owner} state: left[{j}] must be an int")
        self._buffer.load_state_dict(st["buffer"])
        self._t = t
        self._left = [_as_exact(w) for w in left]
        self._refresh_partial(t)


@noise_statements
class Honaker(CountingMechanism):
    """Binary tree mechanism with Honaker's online estimator (Kairouz et al. 2021).

    Every complete dyadic node gets i.i.d. noise (Laplace or Gaussian) calibrated
    to the tree's sensitivities (ℓ₁ = hΔ, ℓ₂ = √h·Δ, h = ⌊log₂ T⌋ + 1, as for
    :class:`~dpcount.counting.BinaryTree`); each node's estimate combines its own
    noisy value with its children's estimates by inverse variance, and the release
    at t sums the estimates of t's dyadic decomposition (only completed
    subtrees, so it is a continual-release mechanism).

    Formal guarantee:
        [neighbouring: event level]

        Every complete dyadic node gets i.i.d. noise; each step lies in one complete
        node per level j with 2^j ≤ T, so the node vector has ℓ₁ sensitivity Δ₁ = h·Δ and
        ℓ₂ sensitivity Δ₂ = √h·Δ with h = ⌊log₂ T⌋ + 1, as for the binary tree; the
        estimator is post-processing of the noisy node vector.

        [noise kinds: all]

        Exact variance: Var_t = v·Σ_{j: bit j of t} 2^j/(2^{j+1} − 1), v the
        variance of one node noise (2λ² for Laplace, σ² for Gaussian, the exact
        variance of the discrete sampler); t = 2, 4, 8 → (2/3)v, (4/7)v, (8/15)v.

    With the discrete kinds the node values are exact integers and the estimator is
    evaluated on them in exact rational arithmetic and rounded once to float64
    (:class:`HonakerExactNoiseProcess`), so every output's bits are a function of
    the noisy node vector: post-processing, no floating-point leak. That path is
    slower (Python-int arithmetic).

    References:
        * J. Honaker. "Efficient use of differentially private binary trees".
          Theory and Practice of Differential Privacy (TPDP) 2015. (no link)
        * P. Kairouz, B. McMahan, S. Song, O. Thakkar, A. Thakurta, Z. Xu.
          "Practical and private (deep) learning without sampling or shuffling".
          ICML 2021. https://arxiv.org/abs/2103.00039
        * C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum. "Differential privacy under
          continual observation". STOC 2010.
          https://doi.org/10.1145/1806689.1806787
        * T.-H. H. Chan, E. Shi, D. Song. "Private and continual release of
          statistics". ACM TISSEC 14(3), 2011. https://doi.org/10.1145/2043621.2043626
        [noise kinds references]

    Args are those of :class:`~dpcount.counting.BinaryTree`.
    """

    name = "honaker"
    #: largest |coefficient| of a node noise in a release (a leaf alone: 1)
    max_noise_coefficient = 1.0
    #: node sums are integer for integer steps, so integer noise on them is exactly
    #: private; the inverse-variance combination makes the release fractional
    supports_discrete_noise = True
    integer_release = False

    @property
    def height(self) -> int:
        """h = ⌊log₂ T⌋ + 1: the number of levels of the dyadic tree."""
        return self.horizon.bit_length()

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: the left nodes and partial sums of the log2(T) + 1 levels, the noise
        buffer and a step's arrays. Structure: the float-safe grid table a batch release
        with continuous noise keeps (the grid changes every few steps:
        :func:`~dpcount.counting._steps.grid_table_bytes`)."""
        levels = check_integer("horizon", horizon, ge=1).bit_length()
        stream = buffered_stream_memory(2 * levels + 3, dim).stream
        return MemoryEstimate(structure=grid_table_bytes(horizon), stream=stream)

    def _repr_fields(self) -> dict[str, object]:
        return {"height": self.height}

    def _unit_sensitivities(self) -> tuple[float, float]:
        return float(self.height), float(np.sqrt(self.height))

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: the node vector is the 0/1 incidence of every
        complete dyadic node within [1, T] (both children, unlike the binary tree's
        releases), Gram ≥ 0: exact for T ≤ 4096, certified bounds beyond
        (:func:`~dpcount.counting.participation.tree_sensitivities`; checked against
        :meth:`dense_factorization`'s R by brute force in the tests)."""
        T, h = self.horizon, self.height
        used = complete_blocks(T, 2, h)
        return tree_sensitivities(T, DigitSystem(2, 0), h, schema, used_blocks=used)

    def sensitivity_profile(self) -> NDArray[np.float64]:
        """A unit change at one step changes one complete node per level: h ones."""
        return np.ones(self.height)

    def noise_process(
        self, source: NoiseSource, width: int | None = None
    ) -> HonakerNoiseProcess | HonakerExactNoiseProcess:
        """Float process for the continuous samplers; for integer samplers the exact one,
        whose release is computed from the noisy node values alone (no float leak)."""
        if source.integer:
            return HonakerExactNoiseProcess(self.horizon, NoiseBuffer(source, width))
        return HonakerNoiseProcess(self.horizon, NoiseBuffer(source, width))

    def noise_coefficients(self) -> NDArray[np.float64]:
        """Σ_{j: bit j of t} V_j for t = 1..T, by a top-down pass over q = t >> j (O(T))."""
        T = self.horizon
        D = np.zeros(1)
        for j in range(self.height - 1, -1, -1):
            q = np.arange(0, (T >> j) + 1)
            D = D[q >> 1] + np.where(q & 1, honaker_level_variance(j), 0.0)
        return D[1:]

    def _noise_coefficient_at(self, t: int) -> float:
        # Summed from the top bit down, as in noise_coefficients (bit-identical).
        acc = 0.0
        for j in range(t.bit_length() - 1, -1, -1):
            if (t >> j) & 1:
                acc += honaker_level_variance(j)
        return acc

    def mse(self) -> float:
        """Exact MSE in O(log T) (:func:`honaker_mean_variance_units`)."""
        return self.sampler.variance * honaker_mean_variance_units(self.horizon)

    def max_variance(self) -> float:
        """Exact largest variance in O(log² T) (:func:`honaker_max_variance_units`)."""
        return self.sampler.variance * honaker_max_variance_units(self.horizon)

    def dense_factorization(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(L, R): R = membership of steps in complete nodes (nodes × T), L the estimator.

        Nodes are ordered by level, then position. For T ≤ 4096.
        """
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        index: dict[tuple[int, int], int] = {}
        for j in range(self.height):
            for m in range(T >> j):
                index[(j, m)] = len(index)
        R = np.zeros((len(index), T))
        for (j, m), row in index.items():
            R[row, m << j : (m + 1) << j] = 1.0
        # est[(j, m)] = coefficient vector over node noises of the node's estimate error.
        est: dict[tuple[int, int], NDArray[np.float64]] = {}
        for (j, m), row in index.items():
            vec = np.zeros(len(index))
            if j == 0:
                vec[row] = 1.0
            else:
                vec[row] = honaker_level_variance(j)
                vec += _combine_coefficient(j) * (est[(j - 1, 2 * m)] + est[(j - 1, 2 * m + 1)])
            est[(j, m)] = vec
        L = np.zeros((T, len(index)))
        for t in range(1, T + 1):
            for j in range(self.height):
                if (t >> j) & 1:
                    L[t - 1] += est[(j, (t >> (j + 1)) << 1)]
        return L, R
