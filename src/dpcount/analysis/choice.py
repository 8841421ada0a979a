"""The one answer to "which mechanism, which noise, why", for every front end.

:func:`choose` takes what is public — the horizon (None: a stream of unknown
length, run by the doubling :class:`~dpcount.counting.UnboundedCounter`), the
:class:`~dpcount.privacy.Budget`, whether the data are whole numbers, the
participation schema in the budget — and returns a :class:`Choice`: the registry
mechanism, its structure options, the budget with its noise resolved, why the noise
stays continuous when it does (:class:`NoiseNote`, as data) and, for
``mechanism="auto"``, how the mechanism was chosen (:class:`AutoReason`).
``dpcount count``, :func:`dpcount.frame.private_counts` and ``dpcount keyed``
call it and print it; none of them decides on its own.

The policy (docs/safe-noise.md):

* **Integer noise by default.** Without a noise kind in the budget, a mechanism
  that takes integer noise (the trees, Honaker) gets discrete Laplace (discrete
  Gaussian with δ) when the step sensitivity and the data are whole numbers: its
  release is computed from a noisy integer vector, so floating-point rounding
  cannot leak the data (Mironov 2012). Otherwise the mechanism's own continuous
  noise is used and the note says why.
* **auto** is the mechanism :func:`~dpcount.analysis.compare.compare` (``dpcount
  plan``) ranks first by exact MSE among those taking the noise used
  (:func:`~dpcount.analysis.recommend.recommend_mechanism`); when that is not plan's
  first row overall, the reason says so and gives the best row's cost. Without a
  horizon, the inner mechanism of the doubling counter with the lowest exact
  variance at t = 2^16.
* **Integer noise, integer output.** With integer noise the trees release
  integers; Honaker's estimator is an exact weighted average of integer-noised
  sums, a fraction, so :meth:`Choice.finish` rounds it to whole numbers (ties to
  even) before release (:attr:`Choice.rounds`). Rounding is post-processing, so the
  guarantee is unchanged (Dwork & Roth 2014, Prop. 2.1); the exact variances stay
  those of the unrounded estimate, and rounding moves each value by at most 1/2
  (:data:`ROUNDING_NOTE`).

The choice reads public parameters only, never the data's values (whether they are
whole numbers is the caller's public statement about their type), so it costs no
privacy.

References:
    * I. Mironov. "On significance of the least significant bits for differential
      privacy". ACM CCS 2012. https://doi.org/10.1145/2382196.2382264
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
      2014, Proposition 2.1 (post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dpcount._validate import check_bool, check_choice, check_integer
from dpcount.analysis.compare import Candidate
from dpcount.analysis.recommend import GaussianBounds, recommend_mechanism
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import (
    DISCRETE_CAPABLE,
    GAUSSIAN_ONLY,
    MECHANISMS,
    build_mechanism,
    class_noise,
    default_noise,
    max_horizon,
    objectives,
)
from dpcount.counting.unbounded import HORIZON_FREE_BLT, UnboundedCounter
from dpcount.privacy.budget import Budget, CalibrationRule, MissingDeltaError, NoiseKind
from dpcount.privacy.rng import RNGLike

__all__ = [
    "DEFAULT_K",
    "ROUNDED_ESTIMATORS",
    "ROUNDING_NOTE",
    "UNBOUNDED_PROBE",
    "AutoReason",
    "Choice",
    "NoiseNote",
    "choose",
]

#: the k-ary tree's branching factor when a named ``kary`` gets no ``k``
#: (count-on-your-elders Cor. 15)
DEFAULT_K = 19

#: the step at which ``auto`` compares the doubling counter's inner mechanisms
UNBOUNDED_PROBE = 2**16

#: the noise family each calibration rule belongs to (a rule given without a noise kind)
_RULE_FAMILY = {
    CalibrationRule.PURE: NoiseKind.LAPLACE,
    CalibrationRule.THEOREM3: NoiseKind.LAPLACE,
    CalibrationRule.PLD: NoiseKind.LAPLACE,
    CalibrationRule.ANALYTIC: NoiseKind.GAUSSIAN,
    CalibrationRule.CLASSIC: NoiseKind.GAUSSIAN,
    CalibrationRule.FHU: NoiseKind.GAUSSIAN,
    CalibrationRule.PAPER: NoiseKind.GAUSSIAN,
    CalibrationRule.ZCDP: NoiseKind.DISCRETE_GAUSSIAN,
}

_STRUCTURE = ("k", "subtract", "bands", "objective")

#: the mechanisms whose estimate under integer noise is a fraction (Honaker's exact
#: weighted average of integer-noised sums): :meth:`Choice.finish` rounds it
ROUNDED_ESTIMATORS = frozenset({"honaker"})

#: what a front end says when :attr:`Choice.rounds` (``{std}``: the name of the
#: column of the exact standard deviation, ``std`` or with post-processing ``raw_std``)
ROUNDING_NOTE = (
    "{mechanism}'s estimate (an exact weighted average of integer-noised sums) is rounded "
    "to whole numbers, ties to even (post-processing: the guarantee is unchanged); the "
    "{std} column is the exact error of the unrounded estimate, and rounding moves each "
    "value by at most 0.5"
)

ContinuousReason = Literal["calibration", "sensitivity", "data", "mechanism"]


def _spell(spelling: Mapping[str, str] | None, name: str) -> str:
    return name if spelling is None else spelling.get(name, name)


@dataclass(frozen=True)
class NoiseNote:
    """Why the noise stays continuous (floating-point samplers: released float-safe,
    snapped to a power-of-two grid at a small cost in δ, Mironov 2012;
    :mod:`dpcount.privacy.float_safe`, docs/safe-noise.md).

    Attributes:
        reason: ``"calibration"`` (a rule was given without a noise kind),
            ``"sensitivity"`` (the step sensitivity is not a whole number),
            ``"data"`` (the data are not all whole numbers) or ``"mechanism"``
            (the mechanism takes no integer noise).
        noise: the continuous noise used.
        mechanism: the registry name.
        step_sensitivity: the budget's step sensitivity.
    """

    reason: ContinuousReason
    noise: NoiseKind
    mechanism: str
    step_sensitivity: float

    def text(self, spelling: Mapping[str, str] | None = None) -> str:
        """One line; ``spelling`` maps parameter names to a front end's (the CLI:
        ``{"step_sensitivity": "--sensitivity", ...}``)."""
        if self.reason == "calibration":
            why = f"{_spell(spelling, 'calibration')} given without {_spell(spelling, 'noise')}"
        elif self.reason == "sensitivity":
            name = _spell(spelling, "step_sensitivity")
            sep = " " if name.startswith("-") else "="
            why = f"{name}{sep}{self.step_sensitivity!r} is not a whole number"
        elif self.reason == "data":
            why = "the data are not all whole numbers"
        else:
            why = f"mechanism {self.mechanism!r} does not take integer noise"
        return f"{why}: using continuous {self.noise} noise"


@dataclass(frozen=True)
class AutoReason:
    """How ``mechanism="auto"`` chose.

    Attributes:
        rule: ``"ranked-first"`` (plan's first row by exact MSE, built with the noise
            used), ``"best-integer"`` (the best by exact MSE among the mechanisms that
            take integer noise; plan's first row needs floating-point noise) or
            ``"unbounded"`` (no horizon: the doubling counter's inner mechanism with the
            lowest exact variance at t = 2^16).
        candidate: plan's row of the chosen mechanism (its figures are for the
            continuous noise of its family); None for ``"unbounded"``.
        mse: the exact MSE of the mechanism as built (with integer noise where it is
            used); for ``"unbounded"`` the exact variance at t = 2^16.
        best: plan's first row when it is not the chosen mechanism, else None (also
            with ``gaussian``).
        gaussian: with ``"best-integer"``, when plan's first row needs Gaussian noise
            and ``auto`` proved it without building the Gaussian rows: bounds on that
            row's MSE (:class:`~dpcount.analysis.recommend.GaussianBounds`; ``dpcount
            plan`` names it); else None.
    """

    rule: Literal["ranked-first", "best-integer", "unbounded"]
    candidate: Candidate | None
    mse: float
    best: Candidate | None = None
    gaussian: GaussianBounds | None = None

    def text(self) -> str:
        """One line for a summary (``chosen by auto: ...``)."""
        if self.rule == "unbounded":
            return "lowest exact variance at t = 2^16 among the inner mechanisms"
        if self.rule == "ranked-first" or (self.best is None and self.gaussian is None):
            return "ranked first by exact MSE by dpcount plan"
        head = (
            "the best by exact MSE among the mechanisms that take integer noise (RMSE "
            f"{math.sqrt(self.mse):.4g}); "
        )
        tail = "with floating-point noise, released float-safe at a small cost in delta"
        if self.best is None:
            assert self.gaussian is not None
            g = self.gaussian
            return (
                f"{head}dpcount plan ranks a mechanism with gaussian noise first, with RMSE "
                f"between {_digits(math.sqrt(g.floor), down=True)} (a lower bound for every "
                f"mechanism with gaussian noise) and {_digits(math.sqrt(g.ceiling), down=False)}"
                f" ({g.label}'s), {tail} (docs/safe-noise.md)"
            )
        return (
            f"{head}the best overall, {self.best.label} with {self.best.noise} noise, would "
            f"have RMSE {math.sqrt(self.best.mse):.4g} {tail} (docs/safe-noise.md)"
        )


def _digits(x: float, *, down: bool) -> str:
    """``x`` to 4 significant digits, rounded down (a lower bound) or up (an upper
    bound), so the printed bound still holds."""
    if not (math.isfinite(x) and x > 0):
        return f"{x:.4g}"
    scale = 10.0 ** (3 - math.floor(math.log10(x)))
    digits = math.floor(x * scale) if down else math.ceil(x * scale)
    return f"{digits / scale:.4g}"


@dataclass(frozen=True)
class Choice:
    """The fully resolved choice of :func:`choose`.

    Attributes:
        mechanism: the registry name.
        horizon: T, or None for the doubling counter (:meth:`build_unbounded`).
        budget: the budget with its noise kind (and a ranked row's calibration rule)
            filled in: what the mechanism is built with.
        options: the mechanism's structure options (``k``, ``subtract``, ``bands``);
            only those the mechanism has.
        ignored: structure options the caller gave that this mechanism does not
            have (a front end warns about them).
        note: why the noise is continuous, or None (integer noise, or a noise kind
            named by the caller).
        auto: how ``auto`` chose, or None for a named mechanism.
    """

    mechanism: str
    horizon: int | None
    budget: Budget
    options: Mapping[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()
    note: NoiseNote | None = None
    auto: AutoReason | None = None

    def build(self, rng: RNGLike = None) -> CountingMechanism:
        """The calibrated mechanism (``rng`` as for every mechanism)."""
        if self.horizon is None:
            raise ValueError("this choice has no horizon: use build_unbounded()")
        return build_mechanism(
            self.mechanism, horizon=self.horizon, budget=self.budget, rng=rng, **self.options
        )

    def build_unbounded(self, rng: RNGLike = None) -> UnboundedCounter:
        """The doubling counter with this choice as its inner mechanism."""
        return UnboundedCounter(
            inner=self.mechanism,
            k=int(self.options.get("k", DEFAULT_K)),
            subtract=bool(self.options.get("subtract", True)),
            budget=self.budget,
            rng=rng,
        )

    @property
    def rounds(self) -> bool:
        """Whether :meth:`finish` rounds the release to whole numbers: integer noise
        (so whole-number data) with a mechanism whose estimate is a fraction
        (:data:`ROUNDED_ESTIMATORS`)."""
        noise = self.budget.noise
        return noise is not None and noise.is_discrete and self.mechanism in ROUNDED_ESTIMATORS

    def finish(self, release: Any) -> Any:
        """The release as published: with :attr:`rounds`, rounded to the nearest whole
        numbers, ties to even (an int64 array, or an int for a stream's scalar step;
        :func:`dpcount.postprocess.round_half_even`); else ``release`` unchanged.

        Post-processing of the release only, so the mechanism's guarantee holds. Its
        exact variances describe the unrounded estimate; each published value is
        within 1/2 of it, so its error is at most the unrounded error plus 1/2.
        """
        if not self.rounds:
            return release
        from dpcount.postprocess import round_half_even

        values = np.asarray(release, dtype=np.float64)
        whole = round_half_even(values.reshape(-1)).reshape(values.shape)
        return int(whole) if whole.ndim == 0 else whole

    def rounding_note(self, std: str = "std") -> str | None:
        """:data:`ROUNDING_NOTE` for this choice when it :attr:`rounds`, else None
        (``std``: the name of the std column)."""
        return ROUNDING_NOTE.format(mechanism=self.mechanism, std=std) if self.rounds else None


def choose(
    horizon: int | None,
    *,
    budget: Budget,
    mechanism: str = "auto",
    whole: bool | None = True,
    options: Mapping[str, Any] | None = None,
    dim: int | None = None,
    memory: int | None = None,
) -> Choice:
    """The mechanism, its options, its noise and why, for a horizon and a budget.

    Args:
        horizon: T ≥ 1, or None for a stream of unknown length (the doubling
            counter's inner mechanism is chosen).
        budget: the :class:`~dpcount.privacy.Budget` (ε, δ, an optional noise kind
            and calibration rule, the step sensitivity, the participation schema).
        mechanism: ``"auto"`` or a registry name.
        whole: whether the data are whole numbers (True), not (False), or not known
            yet (None: a live stream; integer noise is chosen and a fractional row is
            then refused by the mechanism).
        options: structure options for a named mechanism (``k``, ``subtract``,
            ``bands``); ``auto`` chooses them itself.
        dim, memory: the vector dimension and a memory limit in bytes, passed to
            :func:`~dpcount.analysis.compare.compare` for ``auto`` when given (hooks
            for per-mechanism memory estimates).

    Returns:
        A :class:`Choice`.

    Raises:
        MissingDeltaError: Gaussian noise (asked for, or the only noise of the
            mechanism) without δ; ``parameter`` names ``delta``.
        ValueError: an unknown mechanism, options with ``auto``, ``bands`` without a
            horizon, or a budget no mechanism takes.
        TypeError: ``budget`` not a Budget, or an unknown option.
    """
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a dpcount.privacy.Budget, got {type(budget).__name__}")
    if horizon is not None:
        horizon = check_integer("horizon", horizon, ge=1)
    if whole is not None:
        whole = check_bool("whole", whole)
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(_STRUCTURE))
    if unknown:
        raise TypeError(
            f"options has an unknown option {unknown[0]!r} (expected k, subtract, bands, objective)"
        )
    hooks = {k: v for k, v in (("dim", dim), ("memory", memory)) if v is not None}
    if mechanism == "auto":
        return _choose_auto(horizon, budget, whole, opts, hooks)
    check_choice("mechanism", mechanism, MECHANISMS)
    if hooks:
        raise ValueError(f"{sorted(hooks)} inform mechanism='auto' only")
    return _choose_named(mechanism, horizon, budget, whole, opts)


def _choose_auto(
    horizon: int | None,
    budget: Budget,
    whole: bool | None,
    opts: dict[str, Any],
    hooks: dict[str, Any],
) -> Choice:
    """``choose(mechanism="auto")``: no options; without a horizon, no hooks."""
    if opts:
        raise ValueError(
            f"mechanism='auto' chooses the mechanism's options itself: name a mechanism to "
            f"pass {sorted(opts)}"
        )
    if horizon is not None:
        return _auto(horizon, budget, whole, hooks)
    if hooks:
        raise ValueError(f"{sorted(hooks)} need a horizon")
    return _auto_unbounded(budget, whole)


def _choose_named(
    mechanism: str, horizon: int | None, budget: Budget, whole: bool | None, opts: dict[str, Any]
) -> Choice:
    """``choose`` of a registry name: its noise, and the options it takes (the others
    listed as ignored)."""
    if horizon is None and opts.get("bands") is not None:
        raise ValueError("bands needs a horizon (the doubling counter's blocks use the full band)")
    if horizon is None and opts.get("objective") is not None:
        raise ValueError(
            "objective needs a horizon (the doubling counter's blocks use the mean-loss presets)"
        )
    noise, note = _named_noise(mechanism, budget, whole)
    kept = {k: v for k, v in opts.items() if _has_option(mechanism, k) and v is not None}
    ignored = tuple(k for k in _STRUCTURE if k in opts and k not in kept and opts[k] is not None)
    return Choice(mechanism, horizon, budget.replace(noise=noise), kept, ignored=ignored, note=note)


def _has_option(mechanism: str, option: str) -> bool:
    if option == "objective":
        return bool(objectives(mechanism))
    return mechanism == "kary" if option in ("k", "subtract") else mechanism == "toeplitz"


def _whole_sensitivity(budget: Budget) -> bool:
    return float(budget.step_sensitivity).is_integer()


def _named_noise(
    mechanism: str, budget: Budget, whole: bool | None
) -> tuple[NoiseKind, NoiseNote | None]:
    """The noise of a named mechanism: the budget's, else the safe default (integer
    noise where the mechanism, the sensitivity and the data allow it), else the
    mechanism's continuous default with a note saying why."""
    if budget.noise is not None:
        return budget.noise, None
    delta, step = budget.delta, budget.step_sensitivity

    def note(reason: ContinuousReason, noise: NoiseKind) -> NoiseNote:
        return NoiseNote(reason, noise, mechanism, step)

    if budget.calibration is not None:
        family = _RULE_FAMILY[budget.calibration]
        return family, None if family.is_discrete else note("calibration", family)
    if mechanism in GAUSSIAN_ONLY and delta is None:
        raise MissingDeltaError(
            f"mechanism {mechanism!r} uses Gaussian noise (the only noise it is calibrated "
            "for), which needs delta (Gaussian noise cannot give pure ε-DP)"
        )
    cont = NoiseKind(class_noise(mechanism, delta))
    if default_noise(mechanism, delta, step) is None:
        if mechanism in DISCRETE_CAPABLE or not _whole_sensitivity(budget):
            return cont, note("sensitivity", cont)
        if whole is False:
            return cont, note("data", cont)
        return cont, note("mechanism", cont)
    if whole is False:
        return cont, note("data", cont)
    return NoiseKind.DISCRETE_LAPLACE if delta is None else NoiseKind.DISCRETE_GAUSSIAN, None


def _auto(horizon: int, budget: Budget, whole: bool | None, hooks: dict[str, Any]) -> Choice:
    """``auto`` for a horizon: :func:`recommend_mechanism` with the noise used."""
    ranked = budget
    if budget.noise is None and budget.calibration is not None:
        ranked = budget.replace(noise=_RULE_FAMILY[budget.calibration])
    rec = recommend_mechanism(
        horizon, budget=ranked.replace(calibration=None), whole=whole is not False, **hooks
    )
    noise = NoiseKind(rec.noise)
    note = None
    if budget.noise is None and not noise.is_discrete:
        reason: ContinuousReason = (
            "calibration"
            if budget.calibration is not None
            else "sensitivity"
            if not _whole_sensitivity(budget)
            else "data"
            if whole is False
            else "mechanism"
        )
        note = NoiseNote(reason, noise, rec.mechanism, budget.step_sensitivity)
    rule = budget.calibration if budget.calibration is not None else rec.calibration
    options: dict[str, Any] = {}
    if rec.k is not None:
        options = {"k": rec.k, "subtract": rec.subtract}
    if rec.bands is not None:
        options["bands"] = rec.bands
    first = rec.gaussian is None and (rec.best is None or rec.best == rec.candidate)
    how = AutoReason(
        "ranked-first" if first else "best-integer",
        rec.candidate,
        rec.mse,
        None if first else rec.best,
        gaussian=rec.gaussian,
    )
    return Choice(
        rec.mechanism,
        horizon,
        budget.replace(noise=noise, calibration=None if rule is None else rule),
        options,
        note=note,
        auto=how,
    )


def _auto_unbounded(budget: Budget, whole: bool | None) -> Choice:
    """``auto`` without a horizon: the inner mechanism of the doubling counter with the
    lowest exact variance at t = 2^16 (:meth:`UnboundedCounter.variance_at`).

    Among the mechanisms that take integer noise when it applies (no noise kind or
    rule in the budget, a whole step sensitivity), else among all that accept the
    noise and run every block (no largest horizon; input perturbation excluded: its
    error grows linearly in the block
    length). One step is compared because no horizon is known; 2^16 is a typical
    live stream, and the ranking is the same at 2^10 and 2^20 for the budgets we
    tried. With continuous Gaussian noise (δ given, and Gaussian noise named or
    integer noise not applicable) the horizon-free BLT
    (:data:`~dpcount.counting.unbounded.HORIZON_FREE_BLT`, one factorization calibrated
    for the infinite stream, steps 1 … 2^25 − 1 (its float model's measured limit), then
    doubling Honaker blocks; bounded state) is
    a candidate too and wins: its variance is below the doubling counters' at every
    t ≥ 4 checked (docs/unbounded.md); otherwise Honaker inside
    the doubling counter (its last-step release, the carried block total, has the
    lowest variance).
    """
    best: tuple[float, Choice] | None = None
    first_error: ValueError | None = None
    for name in _unbounded_candidates(budget, whole):
        try:
            trial = _unbounded_trial(name, budget, whole)
            var = trial.build_unbounded(rng=0).variance_at(UNBOUNDED_PROBE)
        except ValueError as err:  # this inner refuses the budget or the noise
            first_error = first_error or err
            continue
        if best is None or var < best[0]:
            best = (var, trial)
    if best is None:
        assert first_error is not None
        raise first_error
    var, trial = best
    return Choice(
        trial.mechanism,
        None,
        trial.budget,
        note=trial.note,
        auto=AutoReason("unbounded", None, var),
    )


def _unbounded_candidates(budget: Budget, whole: bool | None) -> list[str]:
    """The inner mechanisms :func:`_auto_unbounded` compares (see there)."""
    safe = budget.noise is None and budget.calibration is None and _whole_sensitivity(budget)
    # inner mechanisms with a largest horizon cannot run every doubling block
    endless = {name for name in MECHANISMS if max_horizon(name) is None} - {"input"}
    names = sorted(DISCRETE_CAPABLE if safe else endless)
    gaussian = budget.delta is not None and budget.noise in (None, NoiseKind.GAUSSIAN)
    rule = budget.calibration
    continuous = not safe or whole is False
    if continuous and gaussian and (rule is None or _RULE_FAMILY[rule] == NoiseKind.GAUSSIAN):
        names.append(HORIZON_FREE_BLT)
    return names


def _unbounded_trial(name: str, budget: Budget, whole: bool | None) -> Choice:
    """The choice of inner mechanism ``name`` with its noise (and the note why)."""
    if name != HORIZON_FREE_BLT:
        noise, note = _named_noise(name, budget, whole)
        return Choice(name, None, budget.replace(noise=noise), note=note)
    noise, note = NoiseKind.GAUSSIAN, None
    if budget.noise is None:  # continuous because of the data or the step
        reason: ContinuousReason = "data" if whole is False else "sensitivity"
        note = NoiseNote(reason, noise, name, budget.step_sensitivity)
    return Choice(name, None, budget.replace(noise=noise), note=note)
