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

import numpy as np

from dpcount.ranges._models import IdentityCovariance, KroneckerModel, NoiseModel
from dpcount.ranges._statements import range_statements
from dpcount.ranges.baselines._perfect import ShapeMechanism
from dpcount.ranges.mechanism import FloatArray
from dpcount.ranges.release import HistogramRelease

__all__ = ["IdentityMechanism"]


@range_statements
class IdentityMechanism(ShapeMechanism):
    """x + N(0, σ²I); 1-D or 2-D. Arguments as :class:`~dpcount.ranges.CorrelatedPerturbation`.

    Formal guarantee:
        [range neighbouring relation]

        The perturbed vector is x itself: a neighbour changes one coordinate by ±1,
        so the ℓ₂ (and ℓ₁) sensitivity is 1.

        [range noise kinds: all; Δ₂ = 1]

        Exact variance: a range or rectangle of m cells has variance v·m, v the variance of
        one noise sample (σ² for Gaussian noise, the exact variance of N_Z(0, σ²),
        below σ², for the discrete Gaussian).

    References:
        * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
          Queries with Correlated Input Perturbation". 2024.
          https://arxiv.org/abs/2402.07066
        * C. Dwork, F. McSherry, K. Nissim, A. Smith. "Calibrating noise to
          sensitivity in private data analysis". TCC 2006, LNCS 3876. (no link)
        [noise kinds references]
    """

    name = "identity"
    max_dims = 2
    supports_discrete_noise = True

    def _sensitivities(self) -> tuple[float, float]:
        return 1.0, 1.0

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
