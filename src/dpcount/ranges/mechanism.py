"""The interface every range-query mechanism shares (correlated and baselines).

A mechanism is built from a shape and a budget (ε, δ). It computes the ℓ₂
sensitivity of what it perturbs from its own structure, calibrates Gaussian noise
once (:func:`dpcount.privacy.calibrate`), and keeps a
:class:`~dpcount.privacy.noise.NoiseSampler` and a Generator. ``release(x)`` draws
noise only through that sampler; ``with_sampler`` swaps it (zero or constant noise
to test the structure; the copy has ``privacy=None``).

Neighbouring relation: histograms that differ by at most 1 in one cell (one record
added or removed), ‖x − x'‖₁ ≤ 1.

Noise (``noise=``):

* ``"gaussian"`` (default): continuous Gaussian noise in float64, calibrated with
  ``calibration="analytic"`` (default), ``"paper"`` or ``"classic"``. Like every
  floating-point sampler it is not hardened against attacks on the low-order bits of
  the released values (Mironov 2012, "On significance of the least significant bits
  for differential privacy"): e.g. x + z for integer x and a float z has a set of
  possible bit patterns that depends on x.
* ``"discrete-gaussian"``: exact integer noise (Canonne, Kamath, Steinke 2020,
  "The Discrete Gaussian for Differential Privacy", Alg. 3) added in int64 to an
  *integer* vector of the data (the cells, node sums, sums and differences of
  children, or the answers of a strategy snapped to a grid 2^-g), calibrated by
  zCDP (CKS Thm 14: i.i.d. N_Z(0, σ_j²) on integer coordinates whose neighbours
  differ by integer shifts μ_j is ρ-zCDP with
  ρ = Σ_j μ_j²/(2σ_j²); Cor. 13 converts to (ε, δ)); ``calibration="zcdp"``. The data
  must be whole numbers. Everything released is computed from the noisy integer vector
  only (post-processing), so no floating-point value depends on the data except
  through that vector. Mechanisms opt in with ``supports_discrete_noise``.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    check_choice,
    check_data_array,
    check_instance,
    check_shape,
)
from dpcount.privacy.budget import Budget, Neighbouring, NoiseKind
from dpcount.privacy.calibration import discrete_gaussian_sigma, zcdp_delta
from dpcount.privacy.discrete import DiscreteGaussianNoise
from dpcount.privacy.guarantee import PrivacyGuarantee, calibrate
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._exact import check_exact_sums, check_whole_numbers
from dpcount.ranges._models import KroneckerModel, NoiseModel
from dpcount.ranges.release import RangeAnswers, check_weights, range_bounds

__all__ = ["NEIGHBOURING", "RANGE_NOISE_KINDS", "RangeMechanism"]

#: Noise kinds of the range mechanisms (named as in :data:`dpcount.privacy.NOISE_KINDS`).
RANGE_NOISE_KINDS: tuple[str, ...] = ("gaussian", "discrete-gaussian")

NEIGHBOURING = Neighbouring.ADD_REMOVE_RECORD.description

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
    #: the perturbed vector is an integer linear function of the cells, perturbed by
    #: i.i.d. samples, and the release is post-processing of it (``noise="discrete-gaussian"``)
    supports_discrete_noise: ClassVar[bool] = False
    shape: tuple[int, ...]

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        budget: Budget,
        rng: RNGLike,
        l2_sensitivity: float,
        l1_sensitivity: float,
    ) -> None:
        """Calibrate from the :class:`~dpcount.privacy.Budget` and the structure's sensitivities.

        The budget needs a delta (Gaussian noise); its noise kind defaults to
        ``"gaussian"``; ``step_sensitivity`` must be 1 (the neighbouring relation is
        one record added or removed).
        """
        budget = budget.with_default_noise(NoiseKind.GAUSSIAN)
        if budget.delta is None:
            raise ValueError(
                f"delta must be given for {type(self).__name__} (range mechanisms add Gaussian "
                "noise, which cannot give pure DP)"
            )
        if budget.step_sensitivity != 1.0 or budget.step_l2_sensitivity is not None:
            raise ValueError(
                f"step_sensitivity must be 1 for {type(self).__name__}: the guarantee is for "
                "one record added or removed (scale the data instead)"
            )
        self.budget: Budget = budget
        self.epsilon = budget.epsilon
        self.delta: float = budget.delta
        self.noise = check_choice("noise", str(budget.noise), RANGE_NOISE_KINDS)
        self.l2_sensitivity = float(l2_sensitivity)
        self._rng = as_generator(rng)
        self._model: NoiseModel | KroneckerModel | None = None
        calibration = None if budget.calibration is None else budget.calibration.value
        if self.noise == "discrete-gaussian":
            self._init_discrete(calibration, float(l1_sensitivity))
            return
        if calibration in ("zcdp", "pure", "theorem3", "pld"):
            raise ValueError(
                f"calibration={calibration!r} is not a Gaussian calibration; for "
                "noise='gaussian' use 'analytic' (default), 'paper', 'classic' or 'fhu'"
            )
        calibrated = calibrate(
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            l1_sensitivity=max(float(l1_sensitivity), self.l2_sensitivity),
            l2_sensitivity=self.l2_sensitivity,
            calibration=calibration,
            neighbouring=NEIGHBOURING,
        )
        self.calibration = calibrated.privacy.calibration
        self.sigma = calibrated.scale
        self._sampler: NoiseSampler = calibrated.sampler
        self.privacy: PrivacyGuarantee | None = calibrated.privacy

    def _init_discrete(self, calibration: str | None, l1_sensitivity: float) -> None:
        """Discrete Gaussian noise calibrated by zCDP (CKS 2020 Thm 14 + Cor. 13)."""
        if not self.supports_discrete_noise:
            raise ValueError(
                f"noise='discrete-gaussian' is not available for {type(self).__name__}: "
                "the vector it perturbs is not an integer function of the cells; use "
                "noise='gaussian'"
            )
        if calibration is not None and not isinstance(calibration, str):
            raise TypeError(
                "calibration must be None or 'zcdp' for noise='discrete-gaussian', got "
                f"{calibration!r}"
            )
        if calibration not in (None, "zcdp"):
            raise ValueError(
                "calibration must be None or 'zcdp' for noise='discrete-gaussian' "
                f"(CKS 2020 Thm 14 + Cor. 13), got {calibration!r}"
            )
        self.calibration = "zcdp"
        sigma = discrete_gaussian_sigma(self.l2_sensitivity, self.epsilon, self.delta)
        for _ in range(8):  # raise σ until the exact ρ meets the budget (float rounding)
            samplers = self._discrete_samplers(sigma)
            rho = _float_at_least(self._discrete_rho(samplers))
            achieved = zcdp_delta(rho, self.epsilon)
            if achieved <= self.delta:
                break
            sigma *= 1.0 + 1e-9
        else:  # pragma: no cover - the calibration margin (1e-10) exceeds float rounding
            raise RuntimeError(f"discrete Gaussian calibration of {type(self).__name__} failed")
        self._sampler = samplers[0]
        self.sigma = samplers[0].sigma
        self.privacy = PrivacyGuarantee(
            epsilon=self.epsilon,
            delta=achieved,
            noise="discrete-gaussian",
            calibration="zcdp",
            l1_sensitivity=l1_sensitivity,
            l2_sensitivity=self.l2_sensitivity,
            neighbouring=NEIGHBOURING,
            rho=rho,
        )

    def _discrete_samplers(self, sigma: float) -> tuple[DiscreteGaussianNoise, ...]:
        """The samplers of the perturbed coordinates (i.i.d.: one, N_Z(0, σ²))."""
        return (DiscreteGaussianNoise(sigma),)

    def _discrete_rho(self, samplers: tuple[DiscreteGaussianNoise, ...]) -> Fraction:
        """Exact ρ of the worst neighbour: ‖shift‖₂²/(2σ²) for i.i.d. noise (CKS Thm 14).

        Uses :meth:`_l2_squared`, the exact squared ℓ₂ norm of the integer shift, and the
        sampler's exact (rounded-up) σ².
        """
        return self._l2_squared() / (2 * samplers[0].sigma2)

    def _l2_squared(self) -> Fraction:
        """Exact squared ℓ₂ sensitivity of the integer vector (subclasses opting in)."""
        raise NotImplementedError(f"{type(self).__name__} does not support discrete noise")

    @property
    def discrete(self) -> bool:
        """True for ``noise="discrete-gaussian"``."""
        return self.noise == "discrete-gaussian"

    def _noisy(
        self, exact: FloatArray, rng: np.random.Generator, sampler: NoiseSampler | None = None
    ) -> NDArray[Any]:
        """``exact`` (data, already checked exact) plus one draw per coordinate.

        Draws from ``sampler`` (default: the mechanism's). With integer noise the sum is
        formed in int64 (``exact`` holds whole numbers of magnitude ≤ 2^53), so the noisy
        integer vector is exact; callers convert it to float64 only as post-processing.
        """
        noise = (self._sampler if sampler is None else sampler).sample(rng, exact.shape)
        if noise.dtype.kind == "i":
            return np.asarray(exact.astype(np.int64) + noise)
        return np.asarray(exact + noise)

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
        return self._release(self.check_data(x), self._rng)

    def check_data(self, x: Any, name: str = "x") -> FloatArray:
        """``x`` validated for this mechanism, as a new float64 array.

        Shape and finiteness (:func:`dpcount._validate.check_data_array`), exact float64
        sums (:func:`dpcount.ranges._exact.check_exact_sums`) and, for discrete noise,
        whole numbers. Everything that hands data to ``_release`` goes through here.
        """
        data = check_data_array(name, x, self.shape)
        check_exact_sums(name, data)
        if self.discrete:
            check_whole_numbers(name, data)
        return data

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

    def dp_event(self) -> Any:
        """This release's privacy as a dp_accounting ``DpEvent`` (one release).

        Compose several releases with dp_accounting's accountants, e.g.
        ``PLDAccountant().compose(a.dp_event()).compose(b.dp_event())``. The event
        matches the calibration (see :func:`dpcount.privacy.accounting.dp_event`):

        * ``"gaussian"``: ``GaussianDpEvent(σ/Δ₂)`` with Δ₂ the sensitivity the
          calibration used (for correlated noise N(0, σ²C) the Mahalanobis
          sensitivity √(max diag C⁻¹): the whitened vector C^{-1/2}x carries i.i.d.
          N(0, σ²) noise and the release is post-processing of it).
        * ``"discrete-gaussian"``: ``ZCDpEvent(ρ)`` with the exact ρ of the worst
          neighbour (CKS 2020 Thm 14), which only the RDP accountant accepts.

        Needs the ``accounting`` extra.

        Raises:
            ValueError: the mechanism carries no guarantee (:meth:`with_sampler`).
        """
        from dpcount.privacy.accounting import dp_event

        if self.privacy is None:
            raise ValueError("this copy carries no privacy guarantee (with_sampler), no DpEvent")
        return dp_event(
            noise=self.noise,
            scale=self.sigma,
            l1_sensitivity=self.privacy.l1_sensitivity,
            l2_sensitivity=self.l2_sensitivity,
            rho=self.privacy.rho,
        )

    def describe(self) -> str:
        privacy = (
            self.privacy.describe() if self.privacy is not None else "no privacy (test sampler)"
        )
        return f"{self!r}: sigma={self.sigma:.6g}; {privacy}"

    def __repr__(self) -> str:
        shape = self.shape[0] if len(self.shape) == 1 else self.shape
        return f"{type(self).__name__}(shape={shape}, budget={self.budget!r})"

    @abstractmethod
    def _release(self, x: FloatArray, rng: np.random.Generator) -> RangeAnswers:
        """Release validated data ``x`` drawing from ``rng`` through ``self._sampler``."""

    @abstractmethod
    def _build_model(self) -> NoiseModel | KroneckerModel:
        """The exact noise model for the current sampler's variance."""


def _float_at_least(value: Fraction) -> float:
    """The smallest float ≥ ``value`` (privacy parameters are never rounded down)."""
    out = float(value)
    return math.nextafter(out, math.inf) if Fraction(out) < value else out
