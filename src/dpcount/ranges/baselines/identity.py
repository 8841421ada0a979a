"""Identity Gaussian mechanism: independent noise on every cell (local-DP-style input
perturbation; the "Gaussian" baseline of correlated-input-perturbation §4.2).

Guarantee: (ε, δ)-DP for histograms differing by at most 1 in one cell (ℓ₂
sensitivity 1). Exact variance of a range or rectangle of m cells: v·m, v the variance
of one noise sample (σ² for Gaussian noise).

``noise="discrete-gaussian"``: whole-number cells plus i.i.d. N_Z(0, σ²) in int64; a
neighbour shifts one coordinate by ±1, so the release is ρ-zCDP with ρ = 1/(2σ²)
(Canonne, Kamath, Steinke 2020, Thm 14) and (ε, δ)-DP by their Cor. 13. The released
values are integers; v is the exact variance of N_Z(0, σ²) (below σ²).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.ranges._models import IdentityCovariance, KroneckerModel, NoiseModel
from dpcount.ranges.mechanism import FloatArray, RangeMechanism
from dpcount.ranges.release import HistogramRelease

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["IdentityMechanism"]


class IdentityMechanism(RangeMechanism):
    """x + N(0, σ²I); 1-D or 2-D. Arguments as :class:`~dpcount.ranges.CorrelatedPerturbation`.

    Formal guarantee:
        Neighbouring relation: histograms x, x' that differ by at most 1 in one
        cell, ‖x − x'‖₁ ≤ 1 (one record added or removed).

        The perturbed vector is x itself: a neighbour changes one coordinate by ±1,
        so the ℓ₂ (and ℓ₁) sensitivity is 1.

        * ``"gaussian"`` (default): (ε, δ)-DP, continuous N(0, σ²) noise with σ
          for ℓ₂ sensitivity 1 by the analytic Gaussian mechanism (Balle & Wang
          2018, Theorem 8; ``calibration="analytic"``, default, exact for every ε),
          the tail bound of correlated-input-perturbation Thm 3.7 (``"paper"``,
          ε ≤ 1) or the classic bound (``"classic"``, Dwork & Roth 2014, Thm A.1).
        * ``"discrete-gaussian"`` (whole-number cells): ρ-zCDP with
          ρ = 1/(2σ²) (Canonne, Kamath, Steinke 2020, Thm 14), reported as (ε, δ)-DP by
          their Corollary 13 (``calibration="zcdp"``).

        Exact variance: a range or rectangle of m cells has variance v·m, v the variance of
        one noise sample (σ² for Gaussian noise, the exact variance of N_Z(0, σ²),
        below σ², for the discrete Gaussian).

    References:
        * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
          Queries with Correlated Input Perturbation". 2024.
          https://arxiv.org/abs/2402.07066
        * C. Dwork, F. McSherry, K. Nissim, A. Smith. "Calibrating noise to
          sensitivity in private data analysis". TCC 2006, LNCS 3876. (no link)
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530
        * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
          Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
        * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
          Foundations and Trends in Theoretical Computer Science 9(3–4), 2014.
          https://doi.org/10.1561/0400000042
    """

    name = "identity"
    max_dims = 2
    supports_discrete_noise = True

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        budget = Budget.resolve(budget, fields, owner="IdentityMechanism")
        self.shape = self._check_shape(shape, self.max_dims)
        super().__init__(
            self.shape,
            budget=budget,
            rng=rng,
            l2_sensitivity=1.0,
            l1_sensitivity=1.0,
        )

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        values = np.asarray(self._noisy(x, rng), dtype=np.float64)
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _build_model(self) -> NoiseModel | KroneckerModel:
        variance = self._sampler.variance
        if len(self.shape) == 1:
            return IdentityCovariance(self.shape[0], variance)
        rows, cols = self.shape
        return KroneckerModel(
            IdentityCovariance(rows, 1.0), IdentityCovariance(cols, 1.0), variance
        )

    def _l2_squared(self) -> Fraction:
        """One coordinate shifted by ±1."""
        return Fraction(1)
