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

import math
from dataclasses import dataclass
from typing import Any

from dpcount._validate import check_bool
from dpcount.analysis._floor import gaussian_mse_floor
from dpcount.analysis.compare import Candidate, compare
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.privacy.budget import (
    Budget,
    MissingDeltaError,
    accept_participation,
    refuses_loose_budget,
)

__all__ = ["NOISE_KINDS", "Recommendation", "recommend_mechanism"]

#: the noise kinds a recommendation can be restricted to
NOISE_KINDS = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")

accept_participation("recommend_mechanism")  # every candidate is calibrated to the schema

#: the Laplace figures must lie below this times the Gaussian floor for
#: :func:`_laplace_first` to skip the Gaussian rows (far above the floor's rounding)
_FLOOR_MARGIN = 0.99

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
        mse: the exact MSE of the mechanism as recommended (with its integer noise
            where that is used).
        best: :func:`compare`'s first row over every noise (the best overall), to say
            what a choice restricted to integer noise gives up.
    """

    mechanism: str
    noise: str
    k: int | None
    subtract: bool | None
    calibration: str | None
    candidate: Candidate
    bands: int | None = None
    mse: float = math.nan
    best: Candidate | None = None

    def options(self) -> dict[str, Any]:
        """The structure keywords of :func:`~dpcount.counting.registry.build_mechanism`
        (``k``/``subtract``, ``bands``) that build this choice, with :meth:`budget`."""
        kw: dict[str, Any] = {}
        if self.k is not None:
            kw["k"], kw["subtract"] = self.k, self.subtract
        if self.bands is not None:
            kw["bands"] = self.bands
        return kw

    def budget(self, requested: Budget) -> Budget:
        """``requested`` with this choice's noise and (non-default) calibration rule."""
        return requested.replace(noise=self.noise, calibration=self.calibration)


@refuses_loose_budget()
def recommend_mechanism(
    horizon: int,
    *,
    budget: Budget,
    whole: bool = True,
    dim: int | None = None,
    memory: int | None = None,
) -> Recommendation:
    """The mechanism ranked first by exact MSE among those that take the noise used.

    * No noise kind in the budget (the safe default): when ``whole`` (the data are
      whole numbers) and the step sensitivity is a whole number, the mechanism with
      the smallest exact MSE among those that take integer noise, each built with
      the integer noise of its row's family (discrete Laplace; with δ also discrete
      Gaussian, and discrete Laplace then certifies (ε, δ)-DP by count-on-your-elders
      Theorem 3 when that needs less noise); when none does, or the data are
      fractional, the best row of all, with its own continuous noise and calibration.
    * A noise kind given: the best row of that noise family (Laplace or Gaussian);
      for ``discrete-*`` among the mechanisms that take integer noise.

    :func:`dpcount.analysis.choice.choose` builds on this for every front end.

    With δ and integer noise, when the Laplace rows lie clearly below a lower bound on
    every Gaussian row's MSE (:func:`~dpcount.analysis._floor.gaussian_mse_floor`),
    the Gaussian rows are not built: the answer is the same, without scipy.

    Args:
        horizon: T ≥ 1.
        budget: a :class:`~dpcount.privacy.Budget` (ε, δ, an optional noise kind,
            the step sensitivity, a participation schema: every candidate is
            calibrated to it, so the ranking is for that neighbouring relation). Its
            calibration must be None (each row has its own).
        whole: whether every data value is a whole number (public: the choice of
            noise kind, not the values, is what it changes).
        dim, memory: passed to :func:`compare` when given.

    Raises:
        MissingDeltaError: a Gaussian noise kind without δ.
        ValueError: a bad parameter (from :func:`compare`).
    """
    budget = Budget.check(budget, owner="recommend_mechanism")
    if budget.calibration is not None:
        raise ValueError(
            f"recommend_mechanism ranks each row with its own calibration rule, got "
            f"calibration={budget.calibration.value!r}: pass a budget without one"
        )
    whole = check_bool("whole", whole)
    noise = None if budget.noise is None else budget.noise.value
    hooks: dict[str, Any] = {k: v for k, v in (("dim", dim), ("memory", memory)) if v is not None}
    ranking = budget.replace(noise=None)
    safe_noise = noise is None and whole and float(budget.step_sensitivity).is_integer()
    if safe_noise and budget.delta is not None and budget.participation is None and not hooks:
        fast = _laplace_first(horizon, ranking)
        if fast is not None:
            return fast
    rows = compare(horizon, budget=ranking, metric="mse", certificates=False, **hooks)
    best = rows[0]
    if noise is not None:
        return _best_of_noise(rows, noise, horizon, ranking, best)
    if safe_noise:
        # Integer noise of either family (with delta, discrete Laplace by Theorem 3 can
        # beat the discrete Gaussian by 2x in RMSE), ranked by the exact MSE of each
        # candidate built with its integer noise (the rows' figures are for the
        # continuous noise of the same scale).
        safe = _best_integer(rows, horizon, ranking)
        if safe is not None:
            return _recommendation(safe[0], "discrete-" + safe[0].noise, safe[1], best)
    return _recommendation(rows[0], rows[0].noise, rows[0].mse, best)


def _best_of_noise(
    rows: tuple[Candidate, ...], noise: str, horizon: int, budget: Budget, best: Candidate
) -> Recommendation:
    """The best row of ``noise``'s family (for ``discrete-*``: among the mechanisms that
    take integer noise), with its exact MSE under ``noise``.

    Raises:
        MissingDeltaError: no row of that family (a Gaussian noise kind without δ).
    """
    family = "gaussian" if noise.endswith("gaussian") else "laplace"
    rows = tuple(
        r
        for r in rows
        if r.noise == family
        and (not noise.startswith("discrete") or r.mechanism in DISCRETE_CAPABLE)
    )
    if not rows:
        raise MissingDeltaError(f"delta must be given for noise {noise!r}")
    mse = rows[0].mse
    if noise.startswith("discrete"):
        mse = _discrete_mse(rows[0], horizon, budget)
    return _recommendation(rows[0], noise, mse, best)


def _best_integer(
    rows: tuple[Candidate, ...], horizon: int, budget: Budget
) -> tuple[Candidate, float] | None:
    """The row whose mechanism built with the integer noise of its family has the lowest
    exact MSE (ties: the earlier row), with that MSE; None when no row takes integer
    noise."""
    safe = [r for r in rows if r.mechanism in DISCRETE_CAPABLE and r.calibration
            in _DEFAULT_RULES]  # fmt: skip
    if not safe:
        return None
    mses = [_discrete_mse(r, horizon, budget) for r in safe]
    i = min(range(len(safe)), key=lambda j: (mses[j], j))
    return safe[i], mses[i]


def _laplace_first(horizon: int, budget: Budget) -> Recommendation | None:
    """The integer-noise recommendation from the Laplace rows alone, when
    :func:`~dpcount.analysis._floor.gaussian_mse_floor` shows that no Gaussian row
    (continuous or discrete) can beat them: both the best Laplace row and the best
    integer-noise choice lie below :data:`_FLOOR_MARGIN` times the floor. Then the full
    ranking has the same first row and the same integer-noise choice (the Laplace rows
    keep their order in it), and the Gaussian rows (optimized factorizations, the
    analytic calibration: scipy) are never built. None: no such proof, rank them all.
    """
    assert budget.delta is not None
    floor = gaussian_mse_floor(horizon, budget.epsilon, budget.delta, budget.step_sensitivity)
    if floor is None:
        return None
    rows = compare(horizon, budget=budget, metric="mse", certificates=False, gaussian=False)
    safe = _best_integer(rows, horizon, budget)
    if safe is None or not max(rows[0].mse, safe[1]) < _FLOOR_MARGIN * floor:
        return None
    return _recommendation(safe[0], "discrete-" + safe[0].noise, safe[1], rows[0])


def _discrete_mse(row: Candidate, horizon: int, budget: Budget) -> float:
    """The exact MSE of ``row``'s mechanism with the integer noise of its family."""
    options: dict[str, Any] = {}
    if row.k is not None:
        options = {"k": row.k, "subtract": row.subtract}
    mech = build_mechanism(
        row.mechanism,
        horizon=horizon,
        budget=budget.replace(noise="discrete-" + row.noise),
        rng=0,
        **options,
    )
    return float(mech.mse())


def _recommendation(row: Candidate, noise: str, mse: float, best: Candidate) -> Recommendation:
    rule = row.calibration
    return Recommendation(
        mechanism=row.mechanism,
        noise=noise,
        k=row.k,
        subtract=row.subtract,
        calibration=None if rule in _DEFAULT_RULES or noise.startswith("discrete") else rule,
        candidate=row,
        bands=row.bands,
        mse=mse,
        best=best,
    )
