"""Sampling-free Rényi accounting of balls-in-bins sampling (random allocation) for a
Toeplitz encoder: a deterministic (ε, δ) statement, no confidence level.

The pair. As in :mod:`dpcount.training.balls_in_bins` (Choquette-Choo et al., ICLR 2025,
arXiv:2410.06266): a lower-triangular Toeplitz encoder C with non-negative entries,
k epochs of b bins (T = k·b steps), clipped gradients and add/remove-one neighbouring
are dominated by P = (1/b)·Σ_j N(v_j, σ²I_T) and Q = N(0, σ²I_T), v_j = C·x_j (x_j
the indicator of bin j's steps), with Gram matrix G = VᵀV (G ≥ 0 entrywise).

Rényi divergence of the mixture (Schuchardt & Kalinin, arXiv:2601.21636, Lemma 3.2).
For an integer order α ≥ 2,

    E_Q[(P/Q)^α] = b^{−α} · Σ_{r ∈ [b]^α} exp( Σ_{i<i'} G_{r_i r_i'} / σ² )
                 = b^{−α} · Σ_{c ∈ ℕ^b, Σc = α} (α; c) · exp( (cᵀGc − Σ_j c_j G_jj) / (2σ²) ),

(α; c) the multinomial coefficient, and D_α(P‖Q) = ln E_Q[(P/Q)^α] / (α − 1). (This
is the Gaussian moment generating function: the product of α likelihood ratios of
components r_1 … r_α is exp(⟨y, Σ v_{r_i}⟩/σ² − Σ‖v_{r_i}‖²/(2σ²)), whose Q-mean is
exp(‖Σ v_{r_i}‖²/(2σ²) − Σ‖v_{r_i}‖²/(2σ²)). Derived here as well; the sign of the
α·ln b term is the derived one, ``−``, which the b = 1 case — the Gaussian's
α‖v‖²/(2σ²) — confirms.) Evaluating the sum is hard for a general G; the paper's
dynamic program (its Algorithm 3, Lemma 3.3) is exact for a banded C, at a cost
exponential in the band. This module evaluates it through an entrywise upper bound
of the exponent (every weight is increasing in G, as c ≥ 0): keep the diagonal and,
with ``band=1``, the neighbouring-bin entries G_{j,j+1} exactly; for every other pair
i ≠ j and a truncation level τ ≥ 0 use G_ij ≤ τ + (G_ij − τ)₊ and the AM–GM
inequality 2·c_i·c_j ≤ c_i² + c_j². With s_j = Σ_{i not kept} (G_ji − τ)₊,

    cᵀGc − Σ_j c_j G_jj ≤ τ·α(α − 1) + Σ_j [c_j(c_j − 1)(G_jj − τ) + c_j²·s_j]
                          + 2·Σ_{kept j} c_j·c_{j+1}·(G_{j,j+1} − τ),

so ln E_Q[(P/Q)^α] ≤ α(α − 1)τ/(2σ²) − α·ln b + ln α! + ln Z_α, where Z_α is the
coefficient of x^α of Σ_c Π_j f_j(c_j)·x^{c_j}·exp(c_j·c_{j+1}·(G_{j,j+1} − τ)/σ²),
f_j(c) = exp((c(c − 1)(G_jj − τ) + c²·s_j)/(2σ²))/c!. With ``band=0`` Z is a product
of power series (one log-space polynomial product, equal bins by squaring); with
``band=1`` a dynamic program over the bins carrying (c_j, Σc) (Algorithm 3 with one
kept neighbour; cost b·A³). The bound is the smallest over a few τ (the largest entry
not kept, 0, and with band 0 three quantiles). It is the exact Rényi divergence when
nothing is left out: one band (C = c₀·I, the independent mechanism ``"input"``, i.e.
DP-SGD; G diagonal), or two bands with one epoch (band 1). With two bands and k > 1
epochs only the wrap-around pair (bin b − 1 with bin 0 of the next epoch) goes through
AM–GM. For a non-banded C (BLT) most of G is left out and the bound is as loose as
those entries are large (docs/tutorials/training.md: where it is tighter than the
Monte Carlo and where not). One pass up to degree A gives every order 2 … A at once.

The other direction (removal; Q‖P). By the AM–GM inequality P/Q ≥ exp(⟨y, v̄⟩/σ² −
Σ_j G_jj/(2bσ²)), v̄ = (1/b)Σ_j v_j, and the Gaussian moment generating function,

    D_α(Q‖P) ≤ Σ_j G_jj/(2bσ²) + (α − 1)·Σ_{i,j} G_ij/(2b²σ²)       (any α > 1)

(the closed form stated with the paper's Rényi accountant; derived here the same way).

From Rényi to (ε, δ). Canonne, Kamath & Steinke, "The Discrete Gaussian for
Differential Privacy", NeurIPS 2020 (arXiv:2004.00010 v4, Proposition 12; the same
conversion as Balle et al., AISTATS 2020, Theorem 21, and dp_accounting's RDP
accountant): if D_α(P‖Q) ≤ R then H_{e^ε}(P‖Q) ≤ δ with

    ln δ = (α − 1)·(R − ε + ln(1 − 1/α)) − ln α,

minimised over the orders of each direction separately (2 … A for P‖Q; for Q‖P
also a geometric grid up to 10⁶); the run's δ is the
larger of the two directions'. Rounding: the Gram matrix is moved up by its float error
bound (T + 2)·2u relative, G_jj − τ and G_{j,j+1} − τ up by 4u, s_j by (b + 8)·u,
and every log-moment up by
(stages + 4)·2⁻⁴⁶·(1 + its magnitude) (log-sum-exp in float64, ``stages`` products):
the bound is only ever moved outward. It needs no samples and no confidence level:
the statement is deterministic.

References:
    * J. Schuchardt, N. Kalinin. "Sampling-Free Privacy Accounting for Matrix Mechanisms
      under Random Allocation". arXiv:2601.21636, 2026.
      https://arxiv.org/abs/2601.21636
    * C. A. Choquette-Choo, A. Ganesh, S. Haque, T. Steinke, A. Thakurta. "Near exact
      privacy amplification for matrix mechanisms". ICLR 2025.
      https://arxiv.org/abs/2410.06266
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for Differential
      Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato. "Hypothesis testing
      interpretations and Renyi differential privacy". AISTATS 2020.
      https://arxiv.org/abs/1905.09982
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln, logsumexp

from dpcount._validate import check_integer, check_real
from dpcount.privacy.budget import _Choice
from dpcount.privacy.calibration import gaussian_sigma
from dpcount.training.balls_in_bins import BallsInBinsAccountant, check_allocation

__all__ = [
    "AllocationAccounting",
    "RenyiAllocationAccountant",
    "RenyiCertificate",
]

#: the unit roundoff of float64
_U = 2.0**-53
#: per-stage relative slack on a log-moment (log-sum-exp in float64)
_STAGE_SLACK = 2.0**-46
#: relative width at which the σ bisection stops (the upper, passing end is kept)
_BISECTION_TOLERANCE = 1e-4


class AllocationAccounting(_Choice):
    """Which accounting calibrates balls-in-bins sampling.

    ``"auto"`` (the default) runs both and keeps the smaller σ: each is a valid
    statement at its own σ (the Rényi one deterministic, the Monte Carlo one with
    probability ≥ 1 − α over the accountant's draws), so the smaller is. ``"renyi"``:
    the deterministic Rényi bound only (no confidence level, no samples: the choice
    when a guarantee must not depend on the accountant's randomness).
    ``"monte-carlo"``: the Monte Carlo certificate only.
    """

    AUTO = "auto"
    RENYI = "renyi"
    MONTE_CARLO = "monte-carlo"


@dataclass(frozen=True)
class RenyiCertificate:
    """A deterministic (ε, δ) statement of balls-in-bins sampling (module docstring).

    Attributes:
        noise_multiplier: σ per unit of the step sensitivity (clip norm).
        epsilon: ε.
        delta: the larger of the two directions' δ bounds (an upper bound, rounded up).
        order_add: the order α of the P‖Q direction's conversion.
        order_remove: the order α of the Q‖P direction's.
        truncation: the largest Gram entry not kept exactly (0: the bound is the exact
            Rényi divergence of the pair, Lemma 3.2).
        amplified: False when this is the unamplified fallback (the analytic Gaussian
            σ, whose δ is exact).
    """

    noise_multiplier: float
    epsilon: float
    delta: float
    order_add: float
    order_remove: float
    truncation: float
    amplified: bool = True


def _up(x: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """x moved up by 4u relative (and a tiny absolute), elementwise."""
    a = np.asarray(x, dtype=np.float64)
    return np.asarray(a + np.abs(a) * (4 * _U) + 1e-300, dtype=np.float64)


def _log_convolve(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """ln of the coefficients 0 … n−1 of the product of two power series given by the
    ln of their coefficients (−inf for 0)."""
    n = a.size
    idx = np.arange(n)
    lag = idx[:, None] - idx[None, :]
    terms = np.where(lag >= 0, a[np.clip(lag, 0, None)] + b[None, :], -np.inf)
    return np.asarray(logsumexp(terms, axis=1), dtype=np.float64)


@dataclass(frozen=True)
class _Split:
    """One entrywise bound on the exponent (module docstring): truncation level τ, the
    diagonal residuals G_jj − τ, the spreads Σ_{i not kept}(G_ji − τ)₊ (moved to the
    diagonal by AM–GM), and the kept neighbour couplings G_{j,j+1} − τ (band 1)."""

    tau: float
    diagonal: NDArray[np.float64]
    spread: NDArray[np.float64]
    chain: NDArray[np.float64] | None


def _log_product(weights: list[NDArray[np.float64]]) -> tuple[NDArray[np.float64], int]:
    """ln of the coefficients 0 … A of Π_j f_j (f_j given by ln coefficients), equal
    factors raised by squaring; and the number of products."""
    table = np.array(weights)
    values, counts = np.unique(table, axis=0, return_counts=True)
    total = np.full(table.shape[1], -np.inf)
    total[0] = 0.0
    stages = 0
    for factor, m in zip(values, counts, strict=True):
        power = int(m)
        while power:
            if power & 1:
                total = _log_convolve(total, factor)
                stages += 1
            power >>= 1
            if power:
                factor = _log_convolve(factor, factor)
                stages += 1
    return total, stages


def _log_chain(
    weights: list[NDArray[np.float64]], coupling: NDArray[np.float64]
) -> tuple[NDArray[np.float64], int, float]:
    """ln Σ over counts with Σc = s (s = 0 … A) of Π_j f_j(c_j) ·
    exp(Σ_j coupling_j·c_j·c_{j+1}): a dynamic program over the bins carrying (c_j, s)
    (the paper's Algorithm 3 for one kept neighbour); and the number of stages and the
    largest |exponent| met."""
    n = weights[0].size
    c = np.arange(n, dtype=np.float64)
    rows, cols = np.indices((n, n))
    source = cols - rows  # the total before a bin of count `rows` reaches `cols`
    valid = source >= 0
    source = np.where(valid, source, 0)
    state = np.where(rows == cols, weights[0][:, None], -np.inf)  # [c_0, s]
    scale = 0.0
    with np.errstate(invalid="ignore"):
        for j in range(1, len(weights)):
            pair = coupling[j - 1] * np.outer(c, c)  # [c_{j-1}, c_j]
            scale = max(scale, float(np.max(np.abs(pair))))
            terms = state[:, None, :] + pair[:, :, None]  # [c_{j-1}, c_j, s]
            top = np.max(terms, axis=0)
            top = np.where(np.isfinite(top), top, 0.0)
            merged = np.log(np.sum(np.exp(terms - top[None]), axis=0)) + top  # [c_j, s]
            state = np.where(valid, merged[rows, source], -np.inf) + weights[j][:, None]
    return np.asarray(logsumexp(state, axis=0), dtype=np.float64), len(weights) * n, scale


class RenyiAllocationAccountant:
    """The sampling-free Rényi accountant of balls-in-bins sampling (module docstring).

    Args:
        encoder: c_0, c_1, …: the first column of the lower-triangular Toeplitz encoder
            (non-negative, c_0 > 0; shorter than T means banded, zeros after).
        epochs: k.
        batches_per_epoch: b (T = k·b).
        max_order: A ≥ 2, the largest Rényi order of the P‖Q direction (orders 2 … A;
            None: 64 with band 0, 32 with band 1).
        band: the Gram band kept exactly: 0 (each bin's count alone) or 1 (neighbouring
            bins coupled exactly by the dynamic program; cost ≈ b·A³). None: 1 for a
            2-banded encoder with b ≥ 3, else 0.

    Raises:
        ValueError: a negative or non-finite coefficient, c_0 ≤ 0 (naming ``encoder``).
    """

    def __init__(
        self,
        encoder: object,
        *,
        epochs: int,
        batches_per_epoch: int,
        max_order: int | None = None,
        band: Literal[0, 1] | None = None,
    ) -> None:
        c, self.epochs, self.bins = check_allocation(
            encoder, epochs=epochs, batches_per_epoch=batches_per_epoch
        )
        T = self.epochs * self.bins
        nonzero = int(np.flatnonzero(c)[-1]) + 1  # the encoder's bands p
        if band is None:
            band = 1 if nonzero == 2 and self.bins >= 3 else 0
        self.band = check_integer("band", band, ge=0, le=1)
        order = (64 if self.band == 0 else 32) if max_order is None else max_order
        self.max_order = check_integer("max_order", order, ge=2)
        modes = BallsInBinsAccountant._modes(c, self.epochs, self.bins)
        gram = modes.T @ modes
        self.gram = gram * (1.0 + (T + 2) * 2 * _U)  # entries ≥ 0: moved up
        b = self.bins
        self.splits = self._splits()
        self.truncation = max(split.tau for split in self.splits)
        self._remove_terms = (
            float(_up(np.trace(self.gram) / b)),
            float(_up(self.gram.sum() / (b * b))),
        )

    def _splits(self) -> list[_Split]:
        """The bounds G ≤ (module docstring) for a few truncation levels τ: the largest
        entry not kept, 0, and (band 0) three quantiles of the entries not kept."""
        b = self.bins
        kept = np.eye(b, dtype=bool)
        if self.band == 1:
            kept |= np.eye(b, k=1, dtype=bool) | np.eye(b, k=-1, dtype=bool)
        rest = self.gram[~kept]
        if rest.size == 0:
            levels = [0.0]
        else:
            top = float(_up(rest.max()))
            quantiles = np.quantile(rest, [0.5, 0.9, 0.99]) if self.band == 0 else []
            levels = sorted({top, 0.0, *map(float, quantiles)})
        diag = np.diag(self.gram)
        out = []
        for tau in levels:
            excess = np.where(kept, 0.0, np.maximum(self.gram - tau, 0.0))
            spread = excess.sum(axis=1) * (1.0 + (b + 4) * _U)
            chain = _up(np.diag(self.gram, k=1) - tau) if self.band == 1 else None
            out.append(_Split(tau, _up(diag - tau), _up(spread), chain))
        return out

    @property
    def orders(self) -> NDArray[np.int64]:
        """The Rényi orders 2 … A."""
        return np.arange(2, self.max_order + 1)

    @property
    def unsampled_sensitivity(self) -> float:
        """max_j ‖v_j‖: the ℓ₂ sensitivity without amplification (per unit clip)."""
        return float(math.sqrt(float(np.max(np.diag(self.gram)))))

    def unsampled_noise_multiplier(self, epsilon: float, delta: float) -> float:
        """σ of the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) for that
        sensitivity: (ε, δ)-DP without amplification, and so with it."""
        return float(gaussian_sigma(self.unsampled_sensitivity, epsilon, delta))

    def log_moments(self, sigma: float) -> NDArray[np.float64]:
        """Upper bounds on ln E_Q[(P/Q)^α] for α = 2 … A (module docstring): the
        smallest over the truncation levels, each rounded up."""
        s = check_real("sigma", sigma, gt=0)
        bounds = [self._split_log_moments(split, s) for split in self.splits]
        return np.asarray(np.min(bounds, axis=0), dtype=np.float64)

    def _split_log_moments(self, split: _Split, sigma: float) -> NDArray[np.float64]:
        two_s2 = 2.0 * sigma * sigma
        A = self.max_order
        c = np.arange(A + 1, dtype=np.float64)
        base = -gammaln(c + 1.0)
        weights = [
            base + (c * (c - 1.0) * d + c * c * sp) / two_s2
            for d, sp in zip(split.diagonal, split.spread, strict=True)
        ]
        scale = max(float(np.max(np.abs(w))) for w in weights)
        if split.chain is None:
            total, stages = _log_product(weights)
        else:
            total, stages, more = _log_chain(weights, split.chain / two_s2 * 2.0)
            scale = max(scale, more)
        a = c[2:]
        out = (
            a * (a - 1.0) * split.tau / two_s2
            - a * math.log(self.bins)
            + gammaln(a + 1.0)
            + total[2:]
        )
        magnitude = 1.0 + np.abs(out) + scale + np.abs(total[2:])
        return np.asarray(out + (stages + 4) * _STAGE_SLACK * magnitude, dtype=np.float64)

    @property
    def remove_orders(self) -> NDArray[np.float64]:
        """The orders of the Q‖P direction (its bound is a closed form at any α > 1):
        2 … A and 200 geometric steps from A to 10⁶."""
        grid = np.concatenate([self.orders, np.geomspace(self.max_order, 1e6, 200)])
        return np.asarray(np.unique(grid), dtype=np.float64)

    def renyi(self, sigma: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Upper bounds on D_α(P‖Q) at :attr:`orders` and on D_α(Q‖P) at
        :attr:`remove_orders`."""
        s = check_real("sigma", sigma, gt=0)
        add = self.log_moments(s) / (self.orders - 1.0)
        a = self.remove_orders
        diag, full = self._remove_terms
        return add, _up((diag + (a - 1.0) * full) / (2.0 * s * s))

    def _log_deltas(
        self, sigma: float, epsilon: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """ln δ of each order (Canonne–Kamath–Steinke Prop. 12), per direction."""
        add, remove = self.renyi(sigma)
        out = []
        for a, r in ((self.orders.astype(np.float64), add), (self.remove_orders, remove)):
            out.append(_up((a - 1.0) * (r - epsilon + np.log1p(-1.0 / a)) - np.log(a)))
        return out[0], out[1]

    def delta(self, sigma: float, epsilon: float) -> float:
        """The deterministic δ bound at ε: the larger of the two directions' (each the
        best order's conversion, Canonne–Kamath–Steinke Prop. 12), at most 1."""
        e = check_real("epsilon", epsilon, ge=0)
        worst = max(float(np.min(x)) for x in self._log_deltas(sigma, e))
        return 1.0 if worst >= 0.0 else min(1.0, float(_up(math.exp(worst))))

    def certify(self, sigma: float, epsilon: float) -> RenyiCertificate:
        """The (ε, δ) statement at noise multiplier σ."""
        e = check_real("epsilon", epsilon, ge=0)
        add, remove = self._log_deltas(sigma, e)
        return RenyiCertificate(
            float(sigma),
            e,
            self.delta(sigma, e),
            float(self.orders[int(np.argmin(add))]),
            float(self.remove_orders[int(np.argmin(remove))]),
            self.truncation,
        )

    def calibrate(self, epsilon: float, delta: float) -> RenyiCertificate:
        """The smallest σ (to a relative 10⁻⁴, the passing end kept) whose δ bound at ε is
        ≤ ``delta``; the unamplified σ (``amplified=False``) where that is smaller.

        The bound is non-increasing in σ (every exponent above is ≥ 0 over σ²), so the
        bisection is sound; the returned σ's δ is re-evaluated, never extrapolated."""
        e = check_real("epsilon", epsilon, gt=0)
        d = check_real("delta", delta, gt=0, lt=1)
        fallback = self.unsampled_noise_multiplier(e, d)
        unamplified = RenyiCertificate(fallback, e, d, 0.0, 0.0, self.truncation, amplified=False)
        if self.bins == 1 or self.delta(fallback, e) > d:
            return unamplified
        lo, hi = fallback / 64.0, fallback
        if self.delta(lo, e) <= d:  # pragma: no cover - amplification by 64× is not reached
            return self.certify(lo, e)
        while hi - lo > _BISECTION_TOLERANCE * hi:
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if self.delta(mid, e) <= d else (mid, hi)
        cert = self.certify(hi, e)
        if not cert.delta <= d:  # pragma: no cover - hi always passed
            raise ArithmeticError("Rényi calibration: the chosen sigma does not pass")
        return cert
