"""The one place where dpcount chooses a counting mechanism for a horizon and budget.

``dpcount count --mechanism auto`` and ``dpcount.frame.private_counts(...,
mechanism="auto")`` both call :func:`recommend_mechanism`: the mechanism that
:func:`dpcount.analysis.compare.compare` (``dpcount plan``) ranks first by exact,
data-independent MSE, restricted to the noise that will actually be used.

The choice reads only public parameters (horizon, ε, δ, the step sensitivity,
whether the data are whole numbers, the requested noise), never the data's
values, so it costs no privacy. Each candidate's error is its exact closed form
(see :func:`~dpcount.analysis.compare.compare` for the candidates and their
calibrations, e.g. Laplace noise with δ by Theorem 3 of Andersson, Pagh, Steiner
and Torkamani, "Count on Your Elders: Laplace vs Gaussian Noise", FORC 2025,
https://arxiv.org/abs/2408.07021).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpcount._validate import check_bool, check_choice
from dpcount.analysis.compare import Candidate, compare
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.privacy.budget import Participation

__all__ = ["NOISE_KINDS", "Recommendation", "recommend_mechanism"]

#: the noise kinds a recommendation can be restricted to
NOISE_KINDS = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")

#: calibrations that are the default rule of their noise (not passed on)
_DEFAULT_RULES = ("pure", "theorem3", "analytic")


@dataclass(frozen=True)
class Recommendation:
    """A mechanism chosen by :func:`recommend_mechanism`.

    Attributes:
        mechanism: registry name (``dpcount count --mechanism``).
        noise: the noise to build it with (integer noise when the data allow it).
        k, subtract: tree options (None for other mechanisms).
        bands: the Toeplitz factorization's band count (None: full, or not Toeplitz).
        calibration: a non-default calibration rule of the ranked row (``fhu``,
            ``classic``), else None.
        candidate: the :class:`~dpcount.analysis.compare.Candidate` row it came from
            (its exact MSE is the continuous-noise figure of that family).
    """

    mechanism: str
    noise: str
    k: int | None
    subtract: bool | None
    calibration: str | None
    candidate: Candidate
    bands: int | None = None

    def options(self) -> dict[str, Any]:
        """Keywords of :func:`~dpcount.counting.registry.build_mechanism` (besides the
        name, horizon and budget) that build this choice."""
        kw: dict[str, Any] = {"noise": self.noise}
        if self.k is not None:
            kw["k"], kw["subtract"] = self.k, self.subtract
        if self.bands is not None:
            kw["bands"] = self.bands
        if self.calibration is not None:
            kw["calibration"] = self.calibration
        return kw


def recommend_mechanism(
    horizon: int,
    *,
    epsilon: float,
    delta: float | None = None,
    noise: str | None = None,
    whole: bool = True,
    step_sensitivity: float = 1.0,
    participation: Participation | None = None,
) -> Recommendation:
    """The mechanism ranked first by exact MSE among those that take the noise used.

    * ``noise=None`` (the safe default): when ``whole`` (the data are whole numbers)
      and the sensitivity is a whole number, the mechanism with the smallest exact
      MSE among those that take integer noise, each built with the integer noise of
      its row's family (discrete Laplace; with ``delta`` also discrete Gaussian, and
      discrete Laplace then certifies (ε, δ)-DP by count-on-your-elders Theorem 3
      when that needs less noise); when none does, or the data are fractional, the
      best row of all, with its own continuous noise and calibration.
    * ``noise`` given: the best row of that noise family (Laplace or Gaussian); for
      ``discrete-*`` among the mechanisms that take integer noise.

    Args:
        horizon: T ≥ 1.
        epsilon: ε > 0.
        delta: δ ∈ (0, 1), or None for pure ε-DP.
        noise: one of :data:`NOISE_KINDS`, or None.
        whole: whether every data value is a whole number (public: the choice of
            noise kind, not the values, is what it changes).
        step_sensitivity: Δ of the neighbouring relation.
        participation: a (k, b)-participation schema: every candidate is calibrated
            to it (:func:`compare`), so the ranking is for that neighbouring relation.

    Raises:
        ValueError: a bad parameter (from :func:`compare`), or a Gaussian ``noise``
            without ``delta``.
    """
    if noise is not None:
        check_choice("noise", noise, NOISE_KINDS)
    whole = check_bool("whole", whole)
    rows = compare(
        horizon,
        epsilon,
        delta,
        "mse",
        step_sensitivity=step_sensitivity,
        participation=participation,
    )
    if noise is not None:
        family = "gaussian" if noise.endswith("gaussian") else "laplace"
        rows = tuple(
            r
            for r in rows
            if r.noise == family
            and (not noise.startswith("discrete") or r.mechanism in DISCRETE_CAPABLE)
        )
        if not rows:
            raise ValueError(f"delta must be given for noise {noise!r}")
        return _recommendation(rows[0], noise)
    if whole and float(step_sensitivity).is_integer():
        # Integer noise of either family (with delta, discrete Laplace by Theorem 3 can
        # beat the discrete Gaussian by 2x in RMSE), ranked by the exact MSE of each
        # candidate built with its integer noise (the rows' figures are for the
        # continuous noise of the same scale).
        safe = [r for r in rows if r.mechanism in DISCRETE_CAPABLE and r.calibration
                in _DEFAULT_RULES]  # fmt: skip
        if safe:
            mse = [
                _discrete_mse(r, horizon, epsilon, delta, step_sensitivity, participation)
                for r in safe
            ]
            best = min(range(len(safe)), key=lambda i: (mse[i], i))
            return _recommendation(safe[best], "discrete-" + safe[best].noise)
    return _recommendation(rows[0], rows[0].noise)


def _discrete_mse(
    row: Candidate,
    horizon: int,
    epsilon: float,
    delta: float | None,
    step: float,
    participation: Participation | None,
) -> float:
    """The exact MSE of ``row``'s mechanism with the integer noise of its family."""
    options: dict[str, Any] = {}
    if row.k is not None:
        options = {"k": row.k, "subtract": row.subtract}
    mech = build_mechanism(
        row.mechanism,
        horizon=horizon,
        epsilon=epsilon,
        delta=delta,
        noise="discrete-" + row.noise,
        rng=0,
        step_sensitivity=step,
        participation=participation,
        **options,
    )
    return float(mech.mse())


def _recommendation(row: Candidate, noise: str) -> Recommendation:
    rule = row.calibration
    return Recommendation(
        mechanism=row.mechanism,
        noise=noise,
        k=row.k,
        subtract=row.subtract,
        calibration=None if rule in _DEFAULT_RULES or noise.startswith("discrete") else rule,
        candidate=row,
        bands=row.bands,
    )
