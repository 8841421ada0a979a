"""The interface every range-query mechanism shares (correlated and baselines).

A mechanism is built from a shape and a budget (ε, δ). It computes the ℓ₂
sensitivity of what it perturbs from its own structure, calibrates Gaussian noise
once (:func:`dpcount.ranges.calibration.calibrated_sigma`), and keeps a
:class:`~dpcount.privacy.noise.NoiseSampler` and a Generator. ``release(x)`` draws
noise only through that sampler; ``with_sampler`` swaps it (zero or constant noise
to test the structure; the copy has ``privacy=None``).

Neighbouring relation: histograms that differ by at most 1 in one cell (one record
added or removed), ‖x − x'‖₁ ≤ 1.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    check_data_array,
    check_instance,
    check_probability,
    check_real,
    check_shape,
)
from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.privacy.noise import GaussianNoise, NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._exact import check_exact_sums
from dpcount.ranges._models import KroneckerModel, NoiseModel
from dpcount.ranges.calibration import calibrated_sigma
from dpcount.ranges.release import RangeAnswers, check_weights, range_bounds

__all__ = ["NEIGHBOURING", "RangeMechanism"]

NEIGHBOURING = "add/remove one record (histograms differ by at most 1 in one cell)"

FloatArray = NDArray[np.float64]


class RangeMechanism(ABC):
    """Base class: calibration, the sampler, validation and exact-variance queries.

    Subclasses set their structure, then call ``super().__init__`` with the ℓ₁/ℓ₂
    sensitivities of the vector they perturb (for correlated noise: the Mahalanobis
    sensitivity √(max diag C⁻¹)), and implement ``_release(x, rng)`` and
    ``_build_model()``.
    """

    name: ClassVar[str]
    max_dims: ClassVar[int] = 1
    shape: tuple[int, ...]

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        epsilon: float,
        delta: float,
        calibration: str,
        rng: RNGLike,
        l2_sensitivity: float,
        l1_sensitivity: float,
    ) -> None:
        self.epsilon = check_real("epsilon", epsilon, gt=0)
        self.delta = check_probability("delta", delta)
        self.calibration = calibration
        self.sigma = calibrated_sigma(l2_sensitivity, self.epsilon, self.delta, calibration)
        self.l2_sensitivity = float(l2_sensitivity)
        self._sampler: NoiseSampler = GaussianNoise(self.sigma)
        self._rng = as_generator(rng)
        self.privacy: PrivacyGuarantee | None = PrivacyGuarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            noise="gaussian",
            calibration=_calibration_label(calibration),
            l1_sensitivity=float(l1_sensitivity),
            l2_sensitivity=float(l2_sensitivity),
            neighbouring=NEIGHBOURING,
        )
        self._model: NoiseModel | KroneckerModel | None = None

    @staticmethod
    def _check_shape(shape: object, max_dims: int) -> tuple[int, ...]:
        return check_shape("shape", shape, max_dims=max_dims)

    @property
    def n(self) -> int:
        """Number of cells (product of the shape)."""
        return math.prod(self.shape)

    @property
    def sampler(self) -> NoiseSampler:
        return self._sampler

    @property
    def noise_model(self) -> NoiseModel | KroneckerModel:
        """Exact functionals of the release's noise law (variances, sums, maxima)."""
        if self._model is None:
            self._model = self._build_model()
        return self._model

    def release(self, x: Any) -> RangeAnswers:
        """Release the histogram ``x`` (shape ``self.shape``) with this mechanism's noise.

        Raises:
            ValueError: a wrong shape, non-finite cells, or data whose sums float64
                cannot hold exactly (Σ|x| > 2^53 for whole numbers; see
                :func:`dpcount.ranges._exact.check_exact_sums`), which would void the
                calibrated sensitivity.
        """
        data = check_data_array("x", x, self.shape)
        check_exact_sums("x", data)
        return self._release(data, self._rng)

    def range_variance(self, lo: Any, hi: Any) -> Any:
        """Exact variance of the answer to the inclusive range/rectangle [lo, hi].

        Data independent: the same for every release of this mechanism.
        """
        cuts = range_bounds(lo, hi, self.shape)
        model = self.noise_model
        out = (
            model.rectangle_variance(*cuts)
            if isinstance(model, KroneckerModel)
            else model.range_variance(*cuts)
        )
        return float(out) if np.ndim(out) == 0 else out

    def query_variance(self, weights: Any) -> FloatArray:
        """Exact variance of the answer to each row of a dense 1-D workload."""
        model = self.noise_model
        if isinstance(model, KroneckerModel):
            raise ValueError("dense workloads are supported for 1-D mechanisms only")
        w = check_weights(weights, self.shape)
        return model.query_variance(w)

    def with_sampler(self, sampler: NoiseSampler) -> RangeMechanism:
        """A copy drawing its inputs from ``sampler`` (testing hook; ``privacy`` is None)."""
        check_instance("sampler", sampler, NoiseSampler, "a NoiseSampler (e.g. ZeroNoise())")
        other = copy.copy(self)
        other._sampler = sampler
        other.privacy = None
        other._model = None
        return other

    def with_rng(self, rng: RNGLike) -> RangeMechanism:
        """A copy that draws from ``rng`` (for independent Monte Carlo runs)."""
        other = copy.copy(self)
        other._rng = as_generator(rng)
        return other

    def describe(self) -> str:
        privacy = (
            self.privacy.describe() if self.privacy is not None else "no privacy (test sampler)"
        )
        return f"{self!r}: sigma={self.sigma:.6g}; {privacy}"

    def __repr__(self) -> str:
        shape = self.shape[0] if len(self.shape) == 1 else self.shape
        return (
            f"{type(self).__name__}(shape={shape}, epsilon={self.epsilon:g}, delta={self.delta:g})"
        )

    @abstractmethod
    def _release(self, x: FloatArray, rng: np.random.Generator) -> RangeAnswers:
        """Release validated data ``x`` drawing from ``rng`` through ``self._sampler``."""

    @abstractmethod
    def _build_model(self) -> NoiseModel | KroneckerModel:
        """The exact noise model for the current sampler's variance."""


def _calibration_label(calibration: str) -> str:
    if calibration == "paper":
        return "Thm 3.7 tail bound of correlated-input-perturbation (epsilon <= 1)"
    return calibration
