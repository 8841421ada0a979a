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
from dataclasses import dataclass, replace
from typing import Any

from dpcount._validate import check_bool
from dpcount.analysis._floor import (
    DISCRETE_VARIANCE_FACTOR,
    analytic_sigma_ceiling,
    analytic_sigma_floor,
    gaussian_mse_floor,
    normalized_sqrt_dense_losses,
)
from dpcount.analysis.advisor import tree_structure
from dpcount.analysis.compare import K_VALUES, Candidate, compare, rank_key
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.privacy.budget import (
    Budget,
    MissingDeltaError,
    NoiseKind,
    accept_participation,
    refuses_loose_budget,
)

__all__ = ["NOISE_KINDS", "GaussianBounds", "Recommendation", "recommend_mechanism"]

#: the noise kinds a recommendation can be restricted to
NOISE_KINDS = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")

accept_participation("recommend_mechanism")  # every candidate is calibrated to the schema

#: the Laplace figures must lie below this times the Gaussian floor for
#: :func:`_laplace_first` to skip the Gaussian rows (far above the floor's rounding)
_FLOOR_MARGIN = 0.99

#: calibrations that are the default rule of their noise (not passed on)
_DEFAULT_RULES = ("pure", "theorem3", "analytic")

#: relative margin on the bounds of :func:`_gaussian_ceiling` and
#: :func:`_discrete_gaussian_floor` for the float error of the exact structure figures
#: they scale (sums of a few thousand terms: ~1e-13 at most)
_STRUCTURE_MARGIN = 1e-9

#: the branching factors ``compare`` searches for the trees (its default ``k_values``)
_TREE_KS = range(2, 65)

#: the mechanisms taking integer noise that :func:`_discrete_gaussian_floor` bounds
_INTEGER_TREES = frozenset({"binary", "honaker", "kary"})


@dataclass(frozen=True)
class GaussianBounds:
    """Where plan's first row lies when it needs Gaussian noise and
    :func:`recommend_mechanism` proved that without building the Gaussian rows (the
    optimized factorizations and the analytic calibration import scipy and run
    optimizations, several times the cost of the rest of a small ``dpcount count``).

    Attributes:
        floor: a lower bound on the exact MSE of every mechanism with continuous
            Gaussian noise, so of every Gaussian row of ``compare``
            (:func:`~dpcount.analysis._floor.gaussian_mse_floor`).
        ceiling: an upper bound on the exact MSE of the row ``label``, so on plan's
            first row; below every Laplace row.
        label: the row whose MSE ``ceiling`` bounds (``"blt"``: its shipped parameters
            and closed-form losses, with the analytic σ bounded above by
            :func:`~dpcount.analysis._floor.analytic_sigma_ceiling`; ``"normalized-sqrt"``
            where the BLT's bound does not lie below every Laplace row: its dense
            matrices' loss, :func:`_normalized_sqrt_ceiling`; or the label of an
            integer-noise mechanism's Gaussian row, ``ceiling`` its exact MSE).
    """

    floor: float
    ceiling: float
    label: str


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
            what a choice restricted to integer noise gives up; None with ``gaussian``.
        gaussian: when plan's first row needs Gaussian noise and its rows were not
            built, the bounds on its MSE (:class:`GaussianBounds`); else None.
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
    gaussian: GaussianBounds | None = None

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

    With δ and integer noise (one participation), the Gaussian rows are not built
    when bounds settle the answer without them (:func:`_without_gaussian_rows`): the
    integer-noise choice is then the same, and so is plan's first row when it is a
    Laplace row; when it needs Gaussian noise, :attr:`Recommendation.gaussian` bounds
    its MSE instead of naming it (:attr:`Recommendation.best` is None). No scipy.

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
        fast = _without_gaussian_rows(horizon, ranking)
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
    rows: tuple[Candidate, ...],
    horizon: int,
    budget: Budget,
    known: dict[tuple[Any, ...], float] | None = None,
) -> tuple[Candidate, float] | None:
    """The row whose mechanism built with the integer noise of its family has the lowest
    exact MSE (ties: the earlier row), with that MSE; None when no row takes integer
    noise. ``known``: the MSEs already computed for this horizon and budget, by
    (mechanism, noise, k, subtract); filled in."""
    safe = [r for r in rows if r.mechanism in DISCRETE_CAPABLE and r.calibration
            in _DEFAULT_RULES]  # fmt: skip
    if not safe:
        return None
    known = {} if known is None else known
    for r in safe:
        key = (r.mechanism, r.noise, r.k, r.subtract)
        if key not in known:
            known[key] = _discrete_mse(r, horizon, budget)
    mses = [known[(r.mechanism, r.noise, r.k, r.subtract)] for r in safe]
    i = min(range(len(safe)), key=lambda j: (mses[j], j))
    return safe[i], mses[i]


def _without_gaussian_rows(horizon: int, budget: Budget) -> Recommendation | None:
    """The integer-noise recommendation without building the Gaussian rows of the
    factorizations, when bounds show what they would change; None: no such proof, rank
    them all.

    * The integer choice: from the Laplace rows alone when the best Laplace-family row
      with integer noise lies below :data:`_FLOOR_MARGIN` times the floor of every
      Gaussian mechanism (continuous or discrete) or below
      :func:`_discrete_gaussian_floor` (every tree and Honaker with discrete Gaussian
      noise, the only other integer-noise rows); else also from the Gaussian rows of
      the integer-noise mechanisms (:func:`_integer_gaussian_rows`, else
      ``compare(mechanisms=DISCRETE_CAPABLE)``: the analytic calibration, scipy's log Φ,
      but no factorization). Either way the rows used keep their order in the full
      ranking, so the integer choice is its.
    * Plan's first row: the first of the rows used when it lies below
      :data:`_FLOOR_MARGIN` times :func:`~dpcount.analysis._floor.gaussian_mse_floor`
      (no other row, all with continuous Gaussian noise, can beat it); a Gaussian row
      when an upper bound on one Gaussian row (:func:`_gaussian_ceiling`, the BLT's, or
      an integer-noise mechanism's Gaussian row; else :func:`_normalized_sqrt_ceiling`,
      the column-normalized square root's, T ≤ 1024) lies below every Laplace row: then
      :attr:`Recommendation.gaussian` holds the floor and that bound instead of the row.
    """
    assert budget.delta is not None
    floor = gaussian_mse_floor(
        horizon, budget.epsilon, budget.delta, budget.step_sensitivity, discrete=False
    )
    if floor is None:
        return None
    rows = compare(horizon, budget=budget, metric="mse", certificates=False, gaussian=False)
    laplace = rows[0]
    known: dict[tuple[Any, ...], float] = {}
    safe = _best_integer(rows, horizon, budget, known)
    if safe is None:
        return None
    rows, safe = _with_integer_gaussian_rows(horizon, budget, rows, safe, known)
    integer = _recommendation(safe[0], "discrete-" + safe[0].noise, safe[1], rows[0])
    if rows[0].mse < _FLOOR_MARGIN * floor:
        return integer
    bound = _first_row_ceiling(horizon, budget, rows, laplace.mse)
    if bound is None:
        return None
    return replace(integer, best=None, gaussian=GaussianBounds(floor, *bound))


def _with_integer_gaussian_rows(
    horizon: int,
    budget: Budget,
    rows: tuple[Candidate, ...],
    safe: tuple[Candidate, float],
    known: dict[tuple[Any, ...], float],
) -> tuple[tuple[Candidate, ...], tuple[Candidate, float]]:
    """``rows`` and the integer choice ``safe`` among them, with the integer-noise
    mechanisms' Gaussian rows added unless every one of them is above ``safe``'s MSE
    with discrete Gaussian noise: the floor times its discrete factor (the cheap test),
    else the trees' own figures (:func:`_discrete_gaussian_floor`)."""
    assert budget.delta is not None
    floors = gaussian_mse_floor(horizon, budget.epsilon, budget.delta, budget.step_sensitivity)
    if floors is not None and safe[1] < _FLOOR_MARGIN * floors:
        return rows, safe
    if safe[1] < _discrete_gaussian_floor(horizon, budget, safe[1], known):
        return rows, safe
    gaussian = _integer_gaussian_rows(horizon, budget)
    if gaussian is None:
        trees = compare(
            horizon, budget=budget, metric="mse", certificates=False, mechanisms=DISCRETE_CAPABLE
        )
        gaussian = [r for r in trees if r.noise == "gaussian"]
    rows = tuple(sorted([*rows, *gaussian], key=rank_key))
    found = _best_integer(rows, horizon, budget, known)
    assert found is not None
    return rows, found


def _first_row_ceiling(
    horizon: int, budget: Budget, rows: tuple[Candidate, ...], laplace: float
) -> tuple[float, str] | None:
    """(an upper bound on one Gaussian row's MSE below ``laplace``, the best Laplace
    row's, the row's label), or None: the least of the BLT's (:func:`_gaussian_ceiling`)
    and the first of ``rows`` when it is Gaussian; when that is not below ``laplace``
    (large ε), the column-normalized square root's (:func:`_normalized_sqrt_ceiling`)."""
    bounds = [b for b in (_gaussian_ceiling(horizon, budget),) if b is not None]
    bounds += [(r.mse, r.label) for r in rows[:1] if r.noise == "gaussian"]
    if bounds and min(bounds)[0] < laplace:
        return min(bounds)
    tighter = _normalized_sqrt_ceiling(horizon, budget)
    return tighter if tighter is not None and tighter[0] < laplace else None


def _tree_structures(horizon: int) -> list[tuple[int, float]]:
    """(height h, MSE per unit node variance Σ_t ‖digits(t)‖₁ / T) of every k-ary tree
    ``compare`` searches (k = 2 with subtraction is not one), without building them:
    :meth:`KaryTree.mse <dpcount.counting.KaryTree.mse>`'s figures."""
    return [(h, total / horizon) for _, _, h, total in _tree_totals(horizon)]


def _tree_totals(horizon: int) -> list[tuple[int, bool, int, int]]:
    """(k, subtract, height h, Σ_t ‖digits(t)‖₁) of every k-ary tree ``compare`` searches
    by default (k = 2 with subtraction is not one), in ``best_k``'s order of k (exact
    integers, :func:`~dpcount.analysis.advisor.tree_structure`, cached there)."""
    return [
        (k, sub, *tree_structure(horizon, k, sub, "mse"))
        for k in K_VALUES
        for sub in ((False, True) if k > 2 else (False,))
    ]


def _integer_gaussian_rows(horizon: int, budget: Budget) -> list[Candidate] | None:
    """The Gaussian rows that ``compare(mechanisms=DISCRETE_CAPABLE)`` lists (the binary
    tree, Honaker, the best k-ary tree with and without subtraction), without its
    search over k with Gaussian noise; None when :func:`_gaussian_best_k` cannot single
    out that search's k (then the caller runs it).

    The rows come from ``compare`` restricted to these mechanisms and to the two k its
    search picks (with and without subtraction): the same rows, built the same way, at
    a fraction of the cost.
    """
    assert budget.delta is not None
    if DISCRETE_CAPABLE != _INTEGER_TREES:
        return None  # a new integer-noise mechanism this function does not cover
    ks = []
    for sub in (False, True):
        k = _gaussian_best_k(horizon, budget, sub)
        if k is None:
            return None
        ks.append(k)
    # the full search's pick is in the pair and wins there too (ties: the smaller k, as
    # in the full ascending order), so the search over the pair lists the same rows
    found = compare(
        horizon,
        budget=budget,
        metric="mse",
        certificates=False,
        mechanisms=tuple(_INTEGER_TREES),
        k_values=sorted(set(ks)),
    )
    return [r for r in found if r.noise == "gaussian"]


def _gaussian_best_k(horizon: int, budget: Budget, subtract: bool) -> int | None:
    """The k that :func:`~dpcount.analysis.best_k` picks for Gaussian noise (by MSE,
    one participation, k from 2, or 3 with subtraction, to 64; ties: the smaller k),
    from bounds; None when they do not single it out.

    A tree of height h has ℓ₂ sensitivity step·√h, analytic σ(step·√h) =
    step·√h·σ₁ (Balle & Wang 2018, Theorem 8: σ is proportional to the sensitivity)
    and MSE σ²·L/T, L = Σ_t ‖digits(t)‖₁ (an integer). Trees of one height share σ,
    so their order is L's, exactly (distinct integers far apart in float): the least
    L of each height, its first k. Across heights h·L orders them up to σ₁'s bounds
    (:func:`~dpcount.analysis._floor.analytic_sigma_floor` and ``_ceiling``, 10⁻⁶
    apart): the least h·L wins when its upper bound lies below every other height's
    lower bound.
    """
    assert budget.delta is not None
    lo = analytic_sigma_floor(budget.epsilon, budget.delta)
    hi = analytic_sigma_ceiling(budget.epsilon, budget.delta)
    if lo is None or hi is None:
        return None
    best: dict[int, tuple[int, int]] = {}  # height -> (L, k)
    for k, sub, h, total in _tree_totals(horizon):
        if sub != subtract:
            continue
        if h not in best or total < best[h][0]:
            best[h] = (total, k)
    ranked = sorted((h * total, k) for h, (total, k) in best.items())
    if len(ranked) > 1:
        upper = ranked[0][0] * hi * hi * (1.0 + _STRUCTURE_MARGIN)
        if not upper < ranked[1][0] * lo * lo * (1.0 - _STRUCTURE_MARGIN):
            return None
    return ranked[0][1]


def _discrete_gaussian_floor(
    horizon: int,
    budget: Budget,
    target: float,
    known: dict[tuple[Any, ...], float] | None = None,
) -> float:
    """A lower bound on the exact MSE of every mechanism that takes integer noise (the
    k-ary trees for every k ``compare`` searches, with and without subtraction, the
    binary tree, Honaker) built with discrete Gaussian noise; 0 when this function
    does not cover :data:`~dpcount.counting.registry.DISCRETE_CAPABLE`.

    Each is linear in i.i.d. node noise: its MSE is the node variance times a structure
    figure V, the same for every noise. First a bound without calibrating: node noise
    of parameter s ≥ σ_a·Δ₂ (Δ₂ = √h times the step's ℓ₂ bound; the zCDP calibration
    gives a larger σ than the exact analytic one, Balle & Wang 2018) has variance ≥
    s²·:data:`~dpcount.analysis._floor.DISCRETE_VARIANCE_FACTOR` for s ≥ 1. When that
    does not exceed ``target``: the exact figures, one discrete Gaussian calibration per
    height (a tree's node noise depends on its height only) times each tree's V, and
    the binary tree and Honaker built; their least, lowered by
    :data:`_STRUCTURE_MARGIN`. ``known`` (as for :func:`_best_integer`) receives the
    exact MSEs of the mechanisms built here.
    """
    assert budget.delta is not None
    if DISCRETE_CAPABLE != _INTEGER_TREES:
        return 0.0  # a new integer-noise mechanism this bound does not cover
    trees = _tree_structures(horizon)
    cheap = _analytic_discrete_gaussian_floor(horizon, budget, trees)
    if cheap > target:
        return cheap
    noise = budget.replace(noise=NoiseKind.DISCRETE_GAUSSIAN)
    variance: dict[int, float] = {}
    for k, subtract, h, _ in _tree_totals(horizon):  # one tree per height: its node variance
        if h not in variance:
            mech = build_mechanism(
                "kary", horizon=horizon, budget=noise, rng=0, k=k, subtract=subtract
            )
            variance[h] = mech.sampler.variance
            if known is not None:
                known["kary", "gaussian", k, subtract] = float(mech.mse())
    mses = [variance[h] * v for h, v in trees]
    for name in ("binary", "honaker"):
        mses.append(float(build_mechanism(name, horizon=horizon, budget=noise, rng=0).mse()))
        if known is not None:
            known[name, "gaussian", None, None] = mses[-1]
    return min(mses) * (1.0 - _STRUCTURE_MARGIN)


def _analytic_discrete_gaussian_floor(
    horizon: int, budget: Budget, trees: list[tuple[int, float]]
) -> float:
    """:func:`_discrete_gaussian_floor`'s bound without calibrating (see there): the
    analytic σ's floor times each unit ℓ₂ sensitivity, squared, times the discrete
    variance factor and V; 0 when some s could be below 1 or σ has no floor here."""
    assert budget.delta is not None
    sigma = analytic_sigma_floor(budget.epsilon, budget.delta)
    if sigma is None:
        return 0.0
    laplace = Budget(
        epsilon=budget.epsilon, noise=NoiseKind.LAPLACE, step_sensitivity=budget.step_sensitivity
    )
    structures: list[tuple[float, float]] = [(math.sqrt(h), v) for h, v in trees]
    for name in ("binary", "honaker"):
        mech = build_mechanism(name, horizon=horizon, budget=laplace, rng=0)
        structures.append((mech._unit_sensitivities()[1], mech.mse() / mech.sampler.variance))
    lowest = math.inf
    for unit_l2, structure in structures:
        scale = sigma * unit_l2 * budget.l2_step
        if scale < 1.0:
            return 0.0  # the discrete variance factor needs s >= 1
        lowest = min(lowest, scale * scale * structure * DISCRETE_VARIANCE_FACTOR)
    return lowest * (1.0 - _STRUCTURE_MARGIN)


def _gaussian_ceiling(horizon: int, budget: Budget) -> tuple[float, str] | None:
    """(an upper bound on the exact MSE of ``compare``'s ``blt`` row, ``"blt"``), or
    None when it has none here.

    The BLT with its shipped mean-loss parameters has the exact closed-form losses of
    :func:`~dpcount.counting.factorization.blt.blt_losses`; its Gaussian noise is
    calibrated for ℓ₂ sensitivity step·‖c‖·(1 + SENSITIVITY_MARGIN) by the analytic
    rule, whose σ is at most that times
    :func:`~dpcount.analysis._floor.analytic_sigma_ceiling` (σ is proportional to the
    sensitivity, Balle & Wang 2018, Theorem 8).
    """
    from dpcount.counting.factorization.blt import blt_losses, shipped_blt_parameters
    from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN

    assert budget.delta is not None
    sigma = analytic_sigma_ceiling(budget.epsilon, budget.delta)
    if sigma is None:
        return None
    try:
        losses = blt_losses(*shipped_blt_parameters(horizon), horizon)
    except ValueError:  # no shipped parameters or closed forms here
        return None
    l2 = budget.step_sensitivity * math.sqrt(losses.sensitivity_squared) * (1 + SENSITIVITY_MARGIN)
    mse = (sigma * l2) ** 2 * losses.mean_variance * (1.0 + _STRUCTURE_MARGIN)
    return (mse, "blt") if math.isfinite(mse) else None


def _normalized_sqrt_ceiling(horizon: int, budget: Budget) -> tuple[float, str] | None:
    """(an upper bound on the exact MSE of ``compare``'s ``normalized-sqrt`` row,
    ``"normalized-sqrt"``), or None when it has none here (T above
    :data:`~dpcount.analysis._floor.NORMALIZED_SQRT_DENSE_MAX_HORIZON`, or the row is
    not listed at this horizon).

    A feasible factorization (the column-normalized square root) bounds the dense
    optimum and sits below the BLT where ε is large. Its loss comes from its dense
    matrices (:func:`~dpcount.analysis._floor.normalized_sqrt_dense_losses`, no
    scipy); the row calibrates the analytic σ for ℓ₂ sensitivity step·√S(T)·(1 +
    10⁻¹²), at most that times
    :func:`~dpcount.analysis._floor.analytic_sigma_ceiling` (σ is proportional to the
    sensitivity, Balle & Wang 2018, Theorem 8); the sensitivity and the loss are raised
    by :data:`_STRUCTURE_MARGIN` for the float error of both computations.
    """
    from dpcount.counting.registry import REGISTRY

    assert budget.delta is not None
    entry = next(e for e in REGISTRY if e.name == "normalized-sqrt")
    plan = entry.capabilities.plan
    if plan is None or (plan.up_to is not None and plan.up_to < horizon):
        return None
    sigma = analytic_sigma_ceiling(budget.epsilon, budget.delta)
    losses = normalized_sqrt_dense_losses(horizon)
    if sigma is None or losses is None:
        return None
    sensitivity_squared, variance = losses
    l2_squared = budget.step_sensitivity**2 * sensitivity_squared * (1.0 + _STRUCTURE_MARGIN)
    mse = sigma * sigma * l2_squared * variance * (1.0 + _STRUCTURE_MARGIN)
    return (mse, "normalized-sqrt") if math.isfinite(mse) else None


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
