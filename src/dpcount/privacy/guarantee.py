"""From (noise kind, budget, sensitivities) to a calibrated sampler and its guarantee.

Every mechanism in dpcount computes the ℓ₁/ℓ₂ sensitivity of the vector it
perturbs (from its own structure) and calls :func:`calibrate` once. The returned
:class:`PrivacyGuarantee` says what is promised, under which theorem.

Noise kinds: ``"laplace"`` and ``"gaussian"`` (continuous, floating-point
samplers: a counting release of them is float-safe at the cost of a δ term,
:attr:`PrivacyGuarantee.float_delta`, :mod:`dpcount.privacy.float_safe`) and
``"discrete-laplace"`` and ``"discrete-gaussian"`` (exact integer samplers of
Canonne, Kamath, Steinke 2020: recommended for production on integer data).

References:
    * C. Dwork, F. McSherry, K. Nissim, A. Smith. "Calibrating noise to
      sensitivity in private data analysis". TCC 2006, LNCS 3876. (no link)
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
    * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
      privacy: analytical calibration and optimal denoising". ICML 2018.
      https://arxiv.org/abs/1805.06530
    * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
      Foundations and Trends in Theoretical Computer Science 9(3–4), 2014.
      https://doi.org/10.1561/0400000042
    * H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters:
      Fine-grained Error Bound on Differentially Private Continual Observation".
      ICML 2023. https://arxiv.org/abs/2202.11205
    * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
      Queries with Correlated Input Perturbation". 2024.
      https://arxiv.org/abs/2402.07066
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * A. Ghosh, T. Roughgarden, M. Sundararajan. "Universally
      utility-maximizing privacy mechanisms". STOC 2009.
      https://arxiv.org/abs/0811.2841
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_choice, check_probability, check_real
from dpcount.privacy.budget import CalibrationRule, MissingDeltaError, NoiseKind
from dpcount.privacy.calibration import (
    discrete_gaussian_sigma,
    discrete_laplace_scale,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
    zcdp_delta,
)
from dpcount.privacy.discrete import DiscreteGaussianNoise, DiscreteLaplaceNoise
from dpcount.privacy.float_safe import float_delta
from dpcount.privacy.noise import GaussianNoise, LaplaceNoise, NoiseSampler
from dpcount.privacy.notes import delta_warning

__all__ = [
    "CALIBRATIONS",
    "DISCRETE_NOISE_KINDS",
    "NOISE_KINDS",
    "Calibrated",
    "CalibrationEntry",
    "NoiseKind",
    "PrivacyGuarantee",
    "calibrate",
]

#: the noise kinds as strings (their one definition is :class:`~dpcount.privacy.NoiseKind`)
NOISE_KINDS: tuple[str, ...] = NoiseKind.choices()
DISCRETE_NOISE_KINDS: tuple[str, ...] = tuple(k.value for k in NoiseKind if k.is_discrete)


def add_delta(delta: float, extra: float) -> float:
    """δ + ``extra`` rounded up, at most 1 (either 0: the other, exactly): the δ of a
    float-safe release (:attr:`PrivacyGuarantee.total_delta`, the planner's rows)."""
    if extra == 0.0 or delta == 0.0:
        return extra if extra else delta
    return min(1.0, math.nextafter(delta + extra, math.inf))


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a calibrated mechanism promises.

    Attributes:
        epsilon: the ε of the guarantee (for Laplace with a delta, the ε that
            count-on-your-elders Theorem 3 or the PLD certifies, which is ≤ the
            requested ε; for discrete Laplace Δ₁/t exactly).
        delta: the δ (0.0 for pure ε-DP; for the discrete Gaussian the δ that
            the zCDP conversion certifies, ≤ the requested δ).
        noise: one of :data:`NOISE_KINDS`.
        calibration: which rule set the scale (``"pure"``, ``"theorem3"``,
            ``"pld"``, ``"analytic"``, ``"classic"``, ``"fhu"``, ``"zcdp"``); for
            Laplace noise with a delta, the valid rule with the smallest scale,
            which may differ from the requested one.
        l1_sensitivity, l2_sensitivity: sensitivities of the perturbed vector.
        neighbouring: the neighbouring relation the guarantee is stated for.
        rho: for the discrete Gaussian, the ρ of its ρ-zCDP guarantee
            (composes additively); None otherwise.
        float_eta: for continuous noise released float-safe
            (:mod:`dpcount.privacy.float_safe`), the per-value total-variation bound η
            between the float release and the exact-real mechanism; 0.0 otherwise.
        float_values: the number n of released values the stated guarantee covers
            (the front end's release size; a mechanism states its horizon; 0 with a
            ``float_eta``: an open-ended stream, stated per value).

    ``epsilon``/``delta`` are the exact-real mechanism's; the float release adds
    :attr:`float_delta` = (1 + e^ε)·n·η, and :attr:`total_delta` is the δ it is
    (ε, δ)-DP for (what :meth:`describe` states).
    """

    epsilon: float
    delta: float
    noise: str
    calibration: str
    l1_sensitivity: float
    l2_sensitivity: float
    neighbouring: str
    rho: float | None = None
    float_eta: float = 0.0
    float_values: int = 0

    @property
    def float_delta(self) -> float:
        """(1 + e^ε)·n·η, rounded up: what the floating-point release adds to δ."""
        if self.float_eta == 0.0:
            return 0.0
        return float_delta(self.float_eta, self.epsilon, self.float_values)

    @property
    def total_delta(self) -> float:
        """δ + :attr:`float_delta`, rounded up: the δ of the release as computed."""
        return add_delta(self.delta, self.float_delta)

    def with_float_safety(self, eta: float, values: int) -> PrivacyGuarantee:
        """This guarantee for a float-safe release of ``values`` values with per-value
        bound ``eta`` (:mod:`dpcount.privacy.float_safe`)."""
        return replace(self, float_eta=eta, float_values=values)

    @property
    def citation(self) -> str:
        """The theorem of this (noise, rule) (:data:`CALIBRATIONS`)."""
        return _citation(self.noise, self.calibration)

    @property
    def warning(self) -> str | None:
        """Why this guarantee is weaker than it looks (a δ above 1e-3:
        :func:`dpcount.privacy.notes.delta_warning`), or None."""
        return delta_warning(self.total_delta)

    def describe(self) -> str:
        """One line, e.g. ``(epsilon=1, delta=1e-06)-DP, event-level; Laplace ...``;
        ending in ``WARNING: ...`` when δ is above 1e-3 (:attr:`warning`). A float-safe
        release states its total δ and how it is made up."""
        delta = self.total_delta
        budget = (
            f"epsilon={self.epsilon:.6g}-DP"
            if delta == 0.0
            else f"(epsilon={self.epsilon:.6g}, delta={delta:.3g})-DP"
        )
        if self.rho is not None:
            budget += f" and rho={self.rho:.6g}-zCDP"
        text = f"{budget}, {self.neighbouring}; {self.citation}"
        if self.float_eta > 0.0 and self.float_values == 0:  # an open-ended release
            text += (
                f"; float-safe release: plus (1 + e^epsilon)·n·{self.float_eta:.3g} in delta "
                "for its first n values, each snapped to a power-of-two grid of 1/8 to 1/4 of "
                "its std (Mironov 2012 coupling; dpcount.privacy.float_safe)"
            )
        elif self.float_eta > 0.0:
            exact = (
                f"epsilon={self.epsilon:.6g}-DP"
                if self.delta == 0.0
                else f"(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})-DP"
            )
            text += (
                f"; float-safe release: {exact} for the exact-real mechanism, plus "
                f"delta {self.float_delta:.3g} = (1 + e^epsilon)·{self.float_values}·"
                f"{self.float_eta:.3g} for {self.float_values} values, each snapped to a "
                "power-of-two grid of 1/8 to 1/4 of its std (Mironov 2012 coupling; "
                "dpcount.privacy.float_safe)"
            )
        return text if self.warning is None else f"{text}. WARNING: {self.warning}"


@dataclass(frozen=True)
class Calibrated:
    """A noise sampler together with the guarantee it was calibrated for."""

    sampler: NoiseSampler
    privacy: PrivacyGuarantee

    @property
    def scale(self) -> float:
        """The sampler's scale parameter (Laplace λ or t, Gaussian σ)."""
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
    profile: Sequence[float] | NDArray[np.float64] | None = None,
) -> Calibrated:
    """Calibrate i.i.d. noise on a vector with the given sensitivities.

    Args:
        noise: ``"laplace"``, ``"gaussian"``, ``"discrete-laplace"`` or
            ``"discrete-gaussian"``. The discrete kinds assume an *integer*
            perturbed vector whose neighbours differ by an integer vector.
        epsilon: ε > 0.
        delta: ``None`` for pure ε-DP (Laplace kinds only) or δ ∈ (0, 1).
        l1_sensitivity, l2_sensitivity: Δ₁ ≥ Δ₂ > 0 of the perturbed vector.
        calibration:
            * ``"gaussian"``: ``"analytic"`` (default), ``"classic"``, ``"fhu"``;
            * ``"laplace"`` / ``"discrete-laplace"`` without delta: ``"pure"``
              (default; None accepted);
            * ``"laplace"`` with delta: ``"theorem3"`` (default) or ``"pld"``
              (needs ``profile`` and the ``accounting`` extra);
            * ``"discrete-laplace"`` with delta: ``"theorem3"`` (Theorem 3's
              composition argument holds for any ε_j-DP coordinates).

            With a delta, Laplace noise uses the *smallest* scale among the rules
            that certify (ε, δ): pure ε-DP, Theorem 3 and, if requested, the PLD
            (a weaker request never adds noise). The guarantee's ``calibration``
            names the rule that won (``"pure"`` then reports δ = 0);
            * ``"discrete-gaussian"``: ``"zcdp"`` (default; CKS Thm 14 + Cor. 13).
        neighbouring: text of the neighbouring relation, echoed in the guarantee.
        profile: absolute per-coordinate changes of the perturbed vector between
            the worst-case neighbours (e.g. h ones times Δ for a tree); used only
            by ``calibration="pld"``. Its ℓ₁/ℓ₂ norms may not exceed
            ``l1_sensitivity``/``l2_sensitivity``.

    Raises:
        ValueError: Gaussian noise without a delta, an unknown noise kind or
            calibration, ``"pld"`` without a profile, or invalid numbers.
        ImportError: ``calibration="pld"`` without the dp-accounting package.
    """
    check_choice("noise", noise, NOISE_KINDS)
    kind = NoiseKind(noise)
    eps = check_real("epsilon", epsilon, gt=0)
    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    if kind.is_gaussian and delta is None:
        raise MissingDeltaError(
            f"delta must be given for noise={noise!r} (Gaussian noise cannot give pure DP)"
        )
    dlt = None if delta is None else check_probability("delta", delta)
    rule = _rule(kind, dlt is not None, calibration)
    request = _Request(kind, eps, dlt, d1, d2, rule, neighbouring, profile)
    return CALIBRATIONS[kind, rule].calibrate(request)


def _rule(kind: NoiseKind, with_delta: bool, calibration: str | None) -> CalibrationRule:
    """The requested rule of :data:`CALIBRATIONS` for this noise kind and δ (None: its
    default, the first listed), refused (naming ``calibration``) when it has no entry."""
    allowed = tuple(
        r.value for (k, r), e in CALIBRATIONS.items() if k is kind and e.with_delta is with_delta
    )
    if calibration is None:
        return CalibrationRule(allowed[0])
    if len(allowed) == 1 and (kind is NoiseKind.DISCRETE_GAUSSIAN or not with_delta):
        if calibration != allowed[0]:
            where = "" if with_delta else " without delta"
            raise ValueError(
                f"calibration must be None or {allowed[0]!r} for noise={kind.value!r}{where}, "
                f"got {calibration!r}"
            )
    else:
        check_choice("calibration", calibration, allowed)
    return CalibrationRule(calibration)


@dataclass(frozen=True)
class _Request:
    """What :func:`calibrate` was asked, validated (δ None: pure ε-DP)."""

    noise: NoiseKind
    epsilon: float
    delta: float | None
    l1: float
    l2: float
    rule: CalibrationRule
    neighbouring: str
    profile: Sequence[float] | NDArray[np.float64] | None


def _delta(q: _Request) -> float:
    assert q.delta is not None  # the rules with_delta are only asked with one
    return q.delta


def _gaussian(q: _Request) -> Calibrated:
    """σ from :func:`~dpcount.privacy.calibration.gaussian_sigma` for the rule."""
    dlt = _delta(q)
    sigma = gaussian_sigma(q.l2, q.epsilon, dlt, method=q.rule.value)  # type: ignore[arg-type]
    guarantee = PrivacyGuarantee(
        q.epsilon, dlt, "gaussian", q.rule.value, q.l1, q.l2, q.neighbouring
    )
    return Calibrated(GaussianNoise(sigma), guarantee)


def _discrete_gaussian(q: _Request) -> Calibrated:
    """σ² rational from the zCDP bound; ρ = Δ₂²/(2σ²) exactly in rationals from the float
    Δ₂ and the sampler's rational σ², then rounded up by two ulps: one for the rounding
    to float, one for Δ₂ itself (a rounded square root, at most half an ulp below √·)."""
    dlt = _delta(q)
    sampler = DiscreteGaussianNoise(discrete_gaussian_sigma(q.l2, q.epsilon, dlt))
    exact_rho = Fraction(q.l2) ** 2 / (2 * Fraction(sampler.sigma2))
    rho = math.nextafter(math.nextafter(float(exact_rho), math.inf), math.inf)
    achieved = zcdp_delta(rho, q.epsilon)
    guarantee = PrivacyGuarantee(
        q.epsilon, achieved, q.noise.value, "zcdp", q.l1, q.l2, q.neighbouring, rho=rho
    )
    return Calibrated(sampler, guarantee)


def _laplace_pure(q: _Request) -> Calibrated:
    scale = laplace_scale(q.l1, q.epsilon)
    return Calibrated(
        LaplaceNoise(scale),
        PrivacyGuarantee(q.epsilon, 0.0, "laplace", "pure", q.l1, q.l2, q.neighbouring),
    )


def _discrete_laplace_pure(q: _Request) -> Calibrated:
    """ε = Δ₁/t exactly; the float is rounded to nearest, so it is capped at the (larger
    or equal) requested ε that the rational t was rounded up for."""
    d_sampler = DiscreteLaplaceNoise(discrete_laplace_scale(q.l1, q.epsilon))
    exact_eps = min(q.epsilon, float(Fraction(q.l1) / d_sampler.scale))
    return Calibrated(
        d_sampler,
        PrivacyGuarantee(exact_eps, 0.0, q.noise.value, "pure", q.l1, q.l2, q.neighbouring),
    )


def _laplace_delta(q: _Request) -> Calibrated:
    return _laplace_with_delta(
        q.l1, q.l2, q.epsilon, _delta(q), q.rule.value, q.neighbouring, q.profile
    )


def _discrete_laplace_delta(q: _Request) -> Calibrated:
    return _discrete_laplace_with_delta(q.l1, q.l2, q.epsilon, _delta(q), q.neighbouring)


@dataclass(frozen=True)
class CalibrationEntry:
    """One row of :data:`CALIBRATIONS`: a rule of a noise kind, what it guarantees and
    why.

    Attributes:
        with_delta: whether the rule is for (ε, δ)-DP (asked with a δ) or pure ε-DP.
        guarantee: the formal guarantee of the calibrated noise.
        citation: the theorem it rests on (:attr:`PrivacyGuarantee.citation`).
        calibrate: the sampler and guarantee for a validated request.
    """

    with_delta: bool
    guarantee: str
    citation: str
    calibrate: Callable[[_Request], Calibrated]


_N, _R = NoiseKind, CalibrationRule

#: how each (noise kind, δ or not) is calibrated: the rule then only names the guarantee
#: (every rule but the pure one is asked with a δ)
_CALIBRATORS: Mapping[tuple[NoiseKind, bool], Callable[[_Request], Calibrated]] = {
    (_N.LAPLACE, False): _laplace_pure,
    (_N.LAPLACE, True): _laplace_delta,
    (_N.GAUSSIAN, True): _gaussian,
    (_N.DISCRETE_LAPLACE, False): _discrete_laplace_pure,
    (_N.DISCRETE_LAPLACE, True): _discrete_laplace_delta,
    (_N.DISCRETE_GAUSSIAN, True): _discrete_gaussian,
}

#: the rules of each noise kind, each with (its guarantee, its citation); the default rule
#: of each (noise kind, δ or not) first
_RULES: Mapping[NoiseKind, Mapping[CalibrationRule, tuple[str, str]]] = {
    _N.LAPLACE: {
        _R.PURE: (
            "epsilon-DP: Laplace(l1/epsilon) noise on each coordinate",
            "Laplace mechanism, scale = l1/epsilon (Dwork et al. 2006)",
        ),
        _R.THEOREM3: (
            "(epsilon, delta)-DP: the smallest Laplace scale of the pure and Theorem 3 rules",
            "Laplace noise for (epsilon, delta)-DP, count-on-your-elders Thm 3",
        ),
        _R.PLD: (
            "(epsilon, delta)-DP: the smallest Laplace scale of the pure, Theorem 3 and PLD rules",
            "Laplace noise, privacy loss distribution of the sensitivity profile "
            "(dp-accounting, pessimistic)",
        ),
    },
    _N.GAUSSIAN: {
        _R.ANALYTIC: (
            "(epsilon, delta)-DP: the smallest sigma of the exact Gaussian privacy curve",
            "analytic Gaussian mechanism (Balle & Wang 2018, Thm 8)",
        ),
        _R.CLASSIC: (
            "(epsilon, delta)-DP for epsilon < 1: sigma = l2 sqrt(2 ln(1.25/delta))/epsilon",
            "classic Gaussian mechanism (Dwork & Roth 2014, Thm A.1)",
        ),
        _R.FHU: (
            "(epsilon, delta)-DP: sigma = C_(epsilon, delta) l2",
            "Gaussian with C_(eps,delta) of constant-matters eq. (2)",
        ),
        _R.PAPER: (
            "(epsilon, delta)-DP for epsilon <= 1: sigma = l2 sqrt(2 ln(2/delta))/epsilon",
            "Gaussian tail bound of correlated-input-perturbation Thm 3.7 (epsilon <= 1)",
        ),
    },
    _N.DISCRETE_LAPLACE: {
        _R.PURE: (
            "epsilon-DP with epsilon = l1/t for the rational scale t >= l1/epsilon",
            "discrete Laplace (geometric) mechanism, scale = l1/epsilon, "
            "exact sampler (a difference of two geometric variables, Inusah and Kozubowski 2006)",
        ),
        _R.THEOREM3: (
            "(epsilon, delta)-DP: the smaller rational scale of the pure and Theorem 3 rules",
            "discrete Laplace noise for (epsilon, delta)-DP, "
            "count-on-your-elders Thm 3; exact sampler (Inusah and Kozubowski 2006)",
        ),
    },
    _N.DISCRETE_GAUSSIAN: {
        _R.ZCDP: (
            "rho-zCDP, rho = l2^2/(2 sigma^2), hence (epsilon, delta)-DP with delta <= requested",
            "discrete Gaussian, rho-zCDP with rho = l2^2/(2 sigma^2) "
            "(Canonne, Kamath, Steinke 2020, Thm 14) converted by their Cor. 13; exact sampler "
            "(Alg. 3)",
        ),
    },
}


def _entry(kind: NoiseKind, rule: CalibrationRule) -> CalibrationEntry:
    """The row of :data:`CALIBRATIONS` for a rule of :data:`_RULES`."""
    with_delta = rule is not _R.PURE
    guarantee, citation = _RULES[kind][rule]
    return CalibrationEntry(with_delta, guarantee, citation, _CALIBRATORS[kind, with_delta])


#: every (noise kind, calibration rule) :func:`calibrate` takes, the default rule of each
#: (noise kind, δ or not) first
CALIBRATIONS: Mapping[tuple[NoiseKind, CalibrationRule], CalibrationEntry] = {
    (kind, rule): _entry(kind, rule) for kind, rules in _RULES.items() for rule in rules
}


def _citation(noise: str, calibration: str) -> str:
    """The citation of a guarantee's (noise, rule): its entry's, else the rule's for
    continuous noise, else the rule's name."""
    entries = {(k.value, r.value): e.citation for (k, r), e in CALIBRATIONS.items()}
    for key in ((noise, calibration), ("laplace", calibration), ("gaussian", calibration)):
        if key in entries:
            return entries[key]
    return calibration


def _laplace_with_delta(
    d1: float,
    d2: float,
    eps: float,
    dlt: float,
    method: str,
    neighbouring: str,
    profile: Sequence[float] | NDArray[np.float64] | None,
) -> Calibrated:
    """Continuous Laplace noise for (ε, δ): the smallest scale among the valid rules.

    Every candidate rule certifies (ε, δ)-DP on its own: the pure Laplace mechanism
    (λ = Δ₁/ε is ε-DP, hence (ε, δ)-DP for every δ), count-on-your-elders Theorem 3
    and, when requested, the PLD of the profile. Asking for *less* privacy must never
    add *more* noise, so the smallest of their scales is used (ties go to the simpler
    rule, in the order pure, theorem3, pld) and the guarantee names the rule that
    set it; a pure win is reported as pure ε-DP (δ = 0).
    """
    pure = laplace_scale(d1, eps)
    thm3 = laplace_scale_approximate(d1, d2, eps, dlt)
    pld_scale, prof = math.inf, None
    if method == "pld":
        from dpcount.privacy.accounting import check_profile, laplace_scale_pld

        if profile is None:
            raise ValueError(
                "calibration='pld' needs profile=, the absolute per-coordinate changes of the "
                "perturbed vector between neighbours (e.g. h values of step_sensitivity for a tree)"
            )
        prof = check_profile(profile)
        p1, p2 = float(prof.sum()), float(np.sqrt(np.dot(prof, prof)))
        if p1 > d1 * (1.0 + 1e-12) or p2 > d2 * (1.0 + 1e-12):
            raise ValueError(
                f"profile norms (l1={p1:.6g}, l2={p2:.6g}) exceed l1_sensitivity={d1!r} or "
                f"l2_sensitivity={d2!r}"
            )
        pld_scale = laplace_scale_pld(prof, eps, dlt)
    if pure <= thm3 and pure <= pld_scale:
        return Calibrated(
            LaplaceNoise(pure), PrivacyGuarantee(eps, 0.0, "laplace", "pure", d1, d2, neighbouring)
        )
    if thm3 <= pld_scale:
        achieved = laplace_epsilon(d1, d2, thm3, dlt)
        return Calibrated(
            LaplaceNoise(thm3),
            PrivacyGuarantee(achieved, dlt, "laplace", "theorem3", d1, d2, neighbouring),
        )
    from dpcount.privacy.accounting import laplace_pld_epsilon

    assert prof is not None  # pld_scale is finite only when the PLD was computed
    achieved = laplace_pld_epsilon(pld_scale, prof, dlt, grid=min(1e-4, 1e-4 * eps))
    return Calibrated(
        LaplaceNoise(pld_scale),
        PrivacyGuarantee(achieved, dlt, "laplace", "pld", d1, d2, neighbouring),
    )


def _discrete_laplace_with_delta(
    d1: float, d2: float, eps: float, dlt: float, neighbouring: str
) -> Calibrated:
    """Discrete Laplace noise for (ε, δ): the smaller of the pure and Theorem 3 scales.

    Both are rounded up to the sampler's rationals; the pure scale t ≥ Δ₁/ε is exactly
    (Δ₁/t)-DP, Theorem 3's holds for any ε_j-DP coordinates. Ties go to pure.
    """
    try:
        pure: DiscreteLaplaceNoise | None = DiscreteLaplaceNoise(discrete_laplace_scale(d1, eps))
    except ValueError:  # Δ₁/ε beyond the sampler's range: only Theorem 3 can apply
        pure = None
    scale = laplace_scale_approximate(d1, d2, eps, dlt)
    try:
        d_sampler = DiscreteLaplaceNoise(scale)  # rounds the scale up
    except ValueError as err:
        raise ValueError(
            f"l1_sensitivity={d1!r}, l2_sensitivity={d2!r}, epsilon={eps!r} and "
            f"delta={dlt!r} give a discrete Laplace {err}"
        ) from None
    if pure is not None and pure.scale <= d_sampler.scale:
        exact_eps = min(eps, float(Fraction(d1) / pure.scale))
        return Calibrated(
            pure, PrivacyGuarantee(exact_eps, 0.0, "discrete-laplace", "pure", d1, d2, neighbouring)
        )
    achieved = laplace_epsilon(d1, d2, float(d_sampler.scale), dlt)
    return Calibrated(
        d_sampler,
        PrivacyGuarantee(achieved, dlt, "discrete-laplace", "theorem3", d1, d2, neighbouring),
    )
