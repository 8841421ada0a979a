"""From (noise kind, budget, sensitivities) to a calibrated sampler and its guarantee.

Every mechanism in dpcount computes the ℓ₁/ℓ₂ sensitivity of the vector it
perturbs (from its own structure) and calls :func:`calibrate` once. The returned
:class:`PrivacyGuarantee` says what is promised, under which theorem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpcount._validate import check_choice, check_probability, check_real
from dpcount.privacy.calibration import (
    GAUSSIAN_METHODS,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
)
from dpcount.privacy.noise import GaussianNoise, LaplaceNoise, NoiseSampler

__all__ = ["NOISE_KINDS", "Calibrated", "NoiseKind", "PrivacyGuarantee", "calibrate"]

NoiseKind = Literal["laplace", "gaussian"]
NOISE_KINDS: tuple[str, ...] = ("laplace", "gaussian")

_CITATIONS = {
    "pure": "Laplace mechanism, scale = l1/epsilon (Dwork et al. 2006)",
    "theorem3": "Laplace noise for (epsilon, delta)-DP, count-on-your-elders Thm 3",
    "analytic": "analytic Gaussian mechanism (Balle & Wang 2018, Thm 8)",
    "classic": "classic Gaussian mechanism (Dwork & Roth 2014, Thm A.1)",
    "fhu": "Gaussian with C_(eps,delta) of constant-matters eq. (2)",
}


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a calibrated mechanism promises.

    Attributes:
        epsilon: the ε of the guarantee (for Laplace with a delta, the ε that
            count-on-your-elders Theorem 3 certifies, which is ≤ the requested ε).
        delta: the δ (0.0 for pure ε-DP).
        noise: ``"laplace"`` or ``"gaussian"``.
        calibration: which rule set the scale (``"pure"``, ``"theorem3"``,
            ``"analytic"``, ``"classic"``, ``"fhu"``).
        l1_sensitivity, l2_sensitivity: sensitivities of the perturbed vector.
        neighbouring: the neighbouring relation the guarantee is stated for.
    """

    epsilon: float
    delta: float
    noise: str
    calibration: str
    l1_sensitivity: float
    l2_sensitivity: float
    neighbouring: str

    @property
    def citation(self) -> str:
        return _CITATIONS.get(self.calibration, self.calibration)

    def describe(self) -> str:
        """One line, e.g. ``(epsilon=1, delta=1e-06)-DP, event-level; Laplace ...``."""
        budget = (
            f"epsilon={self.epsilon:.6g}-DP"
            if self.delta == 0.0
            else f"(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})-DP"
        )
        return f"{budget}, {self.neighbouring}; {self.citation}"


@dataclass(frozen=True)
class Calibrated:
    """A noise sampler together with the guarantee it was calibrated for."""

    sampler: NoiseSampler
    privacy: PrivacyGuarantee

    @property
    def scale(self) -> float:
        """The sampler's scale parameter (Laplace λ or Gaussian σ)."""
        s = self.sampler
        return float(getattr(s, "scale", getattr(s, "sigma", float("nan"))))


def calibrate(
    noise: str,
    *,
    epsilon: float,
    delta: float | None,
    l1_sensitivity: float,
    l2_sensitivity: float,
    calibration: str | None = None,
    neighbouring: str,
) -> Calibrated:
    """Calibrate i.i.d. noise on a vector with the given sensitivities.

    Args:
        noise: ``"laplace"`` or ``"gaussian"``.
        epsilon: ε > 0.
        delta: ``None`` for pure ε-DP (Laplace only) or δ ∈ (0, 1).
        l1_sensitivity, l2_sensitivity: Δ₁ ≥ Δ₂ > 0 of the perturbed vector.
        calibration: for Gaussian noise one of ``"analytic"`` (default),
            ``"classic"``, ``"fhu"``; for Laplace noise with a delta
            ``"theorem3"`` (default); ignored-if-None for pure Laplace.
        neighbouring: text of the neighbouring relation, echoed in the guarantee.

    Raises:
        ValueError: Gaussian noise without a delta, an unknown noise kind or
            calibration, or invalid numbers.
    """
    check_choice("noise", noise, NOISE_KINDS)
    eps = check_real("epsilon", epsilon, gt=0)
    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    if noise == "gaussian":
        if delta is None:
            raise ValueError(
                "delta must be given for noise='gaussian' (Gaussian noise cannot give pure DP)"
            )
        dlt = check_probability("delta", delta)
        method = "analytic" if calibration is None else calibration
        check_choice("calibration", method, GAUSSIAN_METHODS)
        sigma = gaussian_sigma(d2, eps, dlt, method=method)  # type: ignore[arg-type]
        guarantee = PrivacyGuarantee(eps, dlt, "gaussian", method, d1, d2, neighbouring)
        return Calibrated(GaussianNoise(sigma), guarantee)
    if delta is None:
        if calibration not in (None, "pure"):
            raise ValueError(
                "calibration must be None or 'pure' for Laplace noise without delta, "
                f"got {calibration!r}"
            )
        scale = laplace_scale(d1, eps)
        return Calibrated(
            LaplaceNoise(scale), PrivacyGuarantee(eps, 0.0, "laplace", "pure", d1, d2, neighbouring)
        )
    dlt = check_probability("delta", delta)
    method = "theorem3" if calibration is None else calibration
    check_choice("calibration", method, ("theorem3",))
    scale = laplace_scale_approximate(d1, d2, eps, dlt)
    achieved = laplace_epsilon(d1, d2, scale, dlt)
    return Calibrated(
        LaplaceNoise(scale),
        PrivacyGuarantee(achieved, dlt, "laplace", method, d1, d2, neighbouring),
    )
