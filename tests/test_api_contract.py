"""The API contract of every public callable that takes a privacy budget.

In the style of scikit-learn's ``utils/estimator_checks.py``: the callables are
*discovered* by walking dpcount's public modules (no ``_`` in the dotted name), so a
new one is held to the contract or the test names what to add. For each callable
whose signature has a ``budget`` parameter:

* it accepts ``budget=Budget(...)`` (no warning: the suite runs with
  ``filterwarnings=error``);
* ``budget`` is keyword-only, and no parameter before it is a budget field or
  ``rng`` (only the structure can be passed by position; the positional spellings 0.4
  deprecated and 0.5 removed are listed in :data:`REMOVED_POSITIONAL` and must raise a
  TypeError naming the fields and ``budget=Budget(...)``);
* an object that holds the budget shows it in its ``repr``;
* a release's ``dp_event()`` composes in dp_accounting and the accountant's ε for one
  release is at most the guaranteed ε (and tight for exact calibrations).

A public callable that takes ``epsilon`` but no ``budget`` must be listed, with the
reason, in :data:`LOOSE_EPSILON`. The dp_events of the range and keyed mechanisms are
further checked against an independent computation of ε (the analytic Gaussian δ(ε)
of Balle & Wang 2018, Theorem 8, computed here with scipy, and the exact zCDP ρ).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

import dpcount
from dpcount.analysis import best_k, choose, compare, recommend_mechanism
from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    GraphStatistic,
    LocalMedianProtocol,
    RunningAverage,
    SubstringCounter,
    SyntheticGraph,
)
from dpcount.counting import (
    BLT,
    BinaryTree,
    CountingMechanism,
    FactorizationMechanism,
    Honaker,
    HorizonFreeBLT,
    HorizonFreeGrowingBLT,
    HorizonFreeSqrt,
    InputPerturbation,
    KaryTree,
    NormalizedBLT,
    NormalizedSqrtFactorization,
    RowScaledBLT,
    RowScaledSqrtFactorization,
    SmoothBinary,
    SqrtFactorization,
    ToeplitzFactorization,
    UnboundedCounter,
)
from dpcount.counting.factorization.row_scaled_banded import RowScaledBandedToeplitz
from dpcount.counting.registry import build_mechanism
from dpcount.frame import choose_mechanism, private_counts
from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import EventColumns
from dpcount.keyed.job import make_job
from dpcount.keyed.run import keyed_counts
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.spec import Counting, Keys, Steps
from dpcount.keyed.spec import choose_mechanism as keyed_choose_mechanism
from dpcount.privacy import Budget
from dpcount.ranges import (
    CorrelatedPerturbation,
    EigenDesignMechanism,
    HierarchicalMechanism,
    IdentityMechanism,
    RangeMechanism,
    TreeMechanism,
    WaveletMechanism,
)
from dpcount.training import amplified_noise_multiplier, gaussian_privatizer

accountant = pytest.importorskip("dp_accounting")
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402

T = 8  # small: this file runs in the quick suite
APPROX = Budget(epsilon=1.0, delta=1e-6)
BUDGET_FIELDS = frozenset(f.name for f in dataclasses.fields(Budget))

#: A spec says how to call a callable with only its structure and ``budget=``, and
#: what comes back: ``"release"`` (holds the budget, shows it, has ``dp_event()``),
#: ``"holder"`` (holds and shows the budget: a plan, not a release) or ``"data"``
#: (plain results: a frame, a dict, rows).
Spec = tuple[Callable[[Budget], Any], str]

_BLT = {"buffer_decay": [0.3, 0.9], "output_scale": [0.2, 0.1]}


def _graph_size(graph: Any) -> int:
    return int(graph.n_edges)


SPECS: dict[str, Spec] = {
    # counting mechanisms
    "dpcount.counting.tree.BinaryTree": (lambda b: BinaryTree(T, budget=b, rng=0), "release"),
    "dpcount.counting.tree.KaryTree": (lambda b: KaryTree(T, k=3, budget=b, rng=0), "release"),
    "dpcount.counting.honaker.Honaker": (lambda b: Honaker(T, budget=b, rng=0), "release"),
    "dpcount.counting.smooth_binary.SmoothBinary": (
        lambda b: SmoothBinary(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.input_perturbation.InputPerturbation": (
        lambda b: InputPerturbation(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.sqrt.SqrtFactorization": (
        lambda b: SqrtFactorization(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.normalized_sqrt.NormalizedSqrtFactorization": (
        lambda b: NormalizedSqrtFactorization(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.row_scaled_banded.RowScaledBandedToeplitz": (
        lambda b: RowScaledBandedToeplitz(T, coefficients=[1.0, 0.5, 0.25], budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.horizon_free.HorizonFreeSqrt": (
        lambda b: HorizonFreeSqrt(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.horizon_free_blt.HorizonFreeBLT": (
        lambda b: HorizonFreeBLT(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.horizon_free_growing.HorizonFreeGrowingBLT": (
        lambda b: HorizonFreeGrowingBLT(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.row_scaled_sqrt.RowScaledSqrtFactorization": (
        lambda b: RowScaledSqrtFactorization(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.blt.BLT": (
        lambda b: BLT(T, **_BLT, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.normalized_blt.NormalizedBLT": (
        lambda b: NormalizedBLT(T, **_BLT, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.row_scaled_blt.RowScaledBLT": (
        lambda b: RowScaledBLT(T, **_BLT, log_weights=[0.1], budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.scaled.Scaled": (  # abstract: checked through a preset
        lambda b: RowScaledBLT(T, **_BLT, log_weights=[0.1], budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.toeplitz.ToeplitzFactorization": (
        lambda b: ToeplitzFactorization(T, coefficients=[1.0, 0.4, 0.2], budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.factorization.dense.FactorizationMechanism": (
        lambda b: FactorizationMechanism(np.tril(np.ones((T, T))), np.eye(T), budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.unbounded.UnboundedCounter": (  # its dp_event needs Gaussian kinds
        lambda b: UnboundedCounter(budget=b.replace(noise="gaussian"), rng=0),
        "release",
    ),
    "dpcount.counting.base.CountingMechanism": (  # abstract: checked through a subclass
        lambda b: BinaryTree(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.counting.registry.build_mechanism": (
        lambda b: build_mechanism("honaker", horizon=T, budget=b, rng=0),
        "release",
    ),
    # range mechanisms
    "dpcount.ranges.correlated.CorrelatedPerturbation": (
        lambda b: CorrelatedPerturbation(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.baselines.identity.IdentityMechanism": (
        lambda b: IdentityMechanism(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.baselines.tree.TreeMechanism": (
        lambda b: TreeMechanism(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.baselines.hierarchical.HierarchicalMechanism": (
        lambda b: HierarchicalMechanism(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.baselines.wavelet.WaveletMechanism": (
        lambda b: WaveletMechanism(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.baselines.eigen.EigenDesignMechanism": (
        lambda b: EigenDesignMechanism(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.ranges.mechanism.RangeMechanism": (  # abstract: checked through a subclass
        lambda b: IdentityMechanism(T, budget=b, rng=0),
        "release",
    ),
    # apps
    "dpcount.apps.histogram.ContinualHistogram": (
        lambda b: ContinualHistogram(3, T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.strings.EpisodeCounter": (
        lambda b: EpisodeCounter("ab", 2, T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.strings.SubstringCounter": (
        lambda b: SubstringCounter("ab", 2, T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.graphs.GraphStatistic": (
        lambda b: GraphStatistic(_graph_size, 1.0, n_vertices=4, horizon=T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.graphs.SyntheticGraph": (
        lambda b: SyntheticGraph(4, T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.local.LocalMedianProtocol": (
        lambda b: LocalMedianProtocol(T, budget=b, rng=0),
        "release",
    ),
    "dpcount.apps.average.RunningAverage": (
        lambda b: RunningAverage(T, lower=0.0, upper=1.0, budget=b, rng=0),
        "release",
    ),
    # analysis and front ends
    "dpcount.analysis.choice.choose": (lambda b: choose(T, budget=b), "holder"),
    "dpcount.analysis.choice.Choice": (lambda b: choose(T, budget=b), "holder"),
    "dpcount.analysis.compare.compare": (
        lambda b: compare(T, budget=b, k_values=range(2, 4)),
        "data",
    ),
    "dpcount.analysis.advisor.best_k": (
        lambda b: best_k(T, budget=b, k_values=range(2, 4)),
        "data",
    ),
    "dpcount.analysis.recommend.recommend_mechanism": (
        lambda b: recommend_mechanism(T, budget=b),
        "data",
    ),
    "dpcount.frame.choose_mechanism": (lambda b: choose_mechanism(T, budget=b), "data"),
    "dpcount.training.sampling.amplified_noise_multiplier": (
        lambda b: amplified_noise_multiplier(sampling_probability=0.5, epochs=2, budget=b),
        "data",
    ),
    "dpcount.training.privatizer.gaussian_privatizer": (
        lambda b: gaussian_privatizer(
            "blt", epochs=2, batches_per_epoch=4, clip_norm=1.0, budget=b, rng=0
        ),
        "data",
    ),
    "dpcount.keyed.spec.Counting": (  # keyed_counts' budget, in its option group
        lambda b: _keyed_counts_with(Counting(budget=b)),
        "holder",
    ),
    "dpcount.keyed.engine.KeyedMechanism": (lambda b: _keyed_with(b), "release"),
    "dpcount.keyed.spec.choose_mechanism": (
        lambda b: keyed_choose_mechanism(T, budget=b, l1_step=2.0, l2_step=1.5),
        "data",
    ),
    "dpcount.keyed.job.make_job": (  # the job's mechanism holds the run's budget
        lambda b: (
            make_job(
                times=pd.Series([1]),
                keys=["a", "b"],
                columns=EventColumns("t", "key"),
                step=1,
                budget=b,
                max_weight=1,
                max_keys=None,
                start=1,
                horizon=T,
            )[0].mechanism
        ),
        "release",
    ),
    "dpcount.frame.private_counts": (
        lambda b: private_counts(pd.Series([1, 0, 1, 1]), budget=b, rng=0),
        "data",
    ),
}


#: Frozen records the library builds (a user reads them, never constructs them): their
#: fields stay positional like every dataclass's; they still show the budget.
def _keyed_counts_with(counting: Counting) -> Counting:
    """``counting`` after a keyed run with it (the run must accept its budget)."""
    frame = keyed_counts(
        pd.DataFrame({"t": [1, 2, 2], "key": ["a", "a", "b"]}),
        EventColumns("t", "key"),
        Keys(["a", "b"]),
        Steps(1, start=1, horizon=T),
        counting=counting,
        secret=unsafe_testing_secret(b"api contract test secret"),
    ).frame
    assert frame is not None and len(frame) == 2 * T
    return counting


RECORDS = frozenset({"dpcount.analysis.choice.Choice"})

#: Positional budget fields deprecated in 0.4 and removed in 0.5: passing one is a
#: TypeError naming them and the replacement.
REMOVED_POSITIONAL: dict[str, Callable[[], Any]] = {
    "dpcount.analysis.compare.compare": lambda: compare(T, 1.0, 1e-6, k_values=range(2, 4)),
    "dpcount.analysis.advisor.best_k": lambda: best_k(T, 1.0, 1e-6, k_values=range(2, 4)),
    "dpcount.frame.choose_mechanism": lambda: choose_mechanism(T, 1.0, 1e-6),
}

_FORMULA = "a closed form of ε (a number, not a budget)"
_RESULT = "a frozen result that records the ε it was computed for"

#: Public callables that take ``epsilon`` but no ``budget``, with the reason.
LOOSE_EPSILON: dict[str, str] = {
    **{
        f"dpcount.privacy.calibration.{name}": _FORMULA
        for name in (
            "analytic_gaussian_delta",
            "discrete_gaussian_sigma",
            "discrete_laplace_scale",
            "fhu_constant",
            "fhu_delta",
            "gaussian_sigma",
            "laplace_scale",
            "laplace_scale_approximate",
            "paper_gaussian_sigma",
            "zcdp_delta",
            "zcdp_rho",
        )
    },
    "dpcount.privacy.accounting.laplace_scale_pld": _FORMULA,
    "dpcount.privacy.float_safe.float_delta": _FORMULA,
    "dpcount.privacy.guarantee.calibrate": "the calibration primitive that Budget-taking "
    "constructors call with the budget's fields",
    "dpcount.privacy.budget.Budget": "the budget itself",
    "dpcount.privacy.guarantee.PrivacyGuarantee": _RESULT,
    "dpcount.counting.tree_formulas.lemma8_mse": _FORMULA,
    "dpcount.counting.tree_formulas.lemma14_mse": _FORMULA,
    "dpcount.counting.tree_formulas.tree_laplace_node_variance": _FORMULA,
    "dpcount.analysis.threshold.cor22_variance_ratio": _FORMULA,
    "dpcount.analysis.threshold.laplace_gaussian_variance_ratio": _FORMULA,
    "dpcount.analysis.threshold.laplace_vs_gaussian_delta": _FORMULA,
    "dpcount.analysis.threshold.DeltaThreshold": _RESULT,
    "dpcount.analysis.compare.Candidate": _RESULT,
    "dpcount.training.balls_in_bins.MonteCarloCertificate": _RESULT,
    "dpcount.training.renyi_allocation.RenyiCertificate": _RESULT,
    "dpcount.experiments.elders.huu_mse_bound": _FORMULA,
    "dpcount.experiments.fhu.FhuSnr": _RESULT,
    "dpcount.experiments.fhu.FhuTop1": _RESULT,
    "dpcount.demo.demo_rows": "the README's demo table, over a fixed set of mechanisms",
    "dpcount.keyed.selection.KeySelection": "the selection's own (ε_s, δ_s), added to the "
    "run's budget (keyed_counts(budget=..., selection=KeySelection(...)))",
    "dpcount.keyed.sparse_vector.calibrate": "the sparse vector's calibration for the "
    "selection's own ε_s (what KeySelection holds), a closed form of it",
}


def _public_callables() -> dict[str, Any]:
    """Every class and function of dpcount's public modules, by defining module."""
    out: dict[str, Any] = {}
    for info in pkgutil.walk_packages(dpcount.__path__, "dpcount."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            home = getattr(obj, "__module__", "")
            if not home.startswith("dpcount.") or any(p.startswith("_") for p in home.split(".")):
                continue
            out[f"{home}.{obj.__qualname__}"] = obj
    return out


def _parameters(obj: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(obj).parameters)
    except (TypeError, ValueError):  # builtins without a signature
        return {}


PUBLIC = _public_callables()
TAKES_BUDGET = sorted(name for name, obj in PUBLIC.items() if "budget" in _parameters(obj))


def test_discovery_finds_the_known_budget_takers() -> None:
    # Guards the parametrized tests against checking nothing.
    assert {"dpcount.counting.tree.KaryTree", "dpcount.frame.private_counts"} <= set(TAKES_BUDGET)
    assert len(TAKES_BUDGET) >= 30


def test_every_budget_taker_has_a_spec() -> None:
    missing = sorted(set(TAKES_BUDGET) - set(SPECS))
    assert not missing, f"add a spec to tests/test_api_contract.py SPECS for {missing}"
    stale = sorted(set(SPECS) - set(TAKES_BUDGET))
    assert not stale, f"SPECS names callables that take no budget: {stale}"


def test_every_loose_epsilon_callable_is_accounted_for() -> None:
    loose = {
        name
        for name, obj in PUBLIC.items()
        if "epsilon" in _parameters(obj) and "budget" not in _parameters(obj)
    }
    unlisted = sorted(loose - set(LOOSE_EPSILON))
    assert not unlisted, f"take budget=Budget(...) (or list with a reason): {unlisted}"


@pytest.mark.parametrize("name", TAKES_BUDGET)
def test_budget_is_keyword_only_after_the_structure(name: str) -> None:
    if name in RECORDS:
        assert dataclasses.is_dataclass(PUBLIC[name])
        return
    params = _parameters(PUBLIC[name])
    assert params["budget"].kind is inspect.Parameter.KEYWORD_ONLY
    positional = [
        p.name
        for p in params.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
    ]
    fields = [p for p in positional if p in BUDGET_FIELDS | {"rng"}]
    assert not fields, f"{name} takes {fields} by position"
    if name in REMOVED_POSITIONAL:
        with pytest.raises(
            TypeError,
            match=r"got the budget's fields epsilon, delta by position: .* removed in dpcount "
            r"0\.5 .*; pass budget=Budget\(epsilon=1\.0, delta=1e-06\) instead",
        ):
            REMOVED_POSITIONAL[name]()


def _holder_budget(result: Any) -> Budget:
    budget = result.budget
    assert isinstance(budget, Budget)
    return budget


@pytest.mark.parametrize("name", TAKES_BUDGET)
def test_accepts_budget_and_repr_shows_it(name: str) -> None:
    build, kind = SPECS[name]
    result = build(APPROX)
    if kind == "data":
        assert result is not None
        return
    budget = _holder_budget(result)
    assert (budget.epsilon, budget.delta) == (APPROX.epsilon, APPROX.delta)
    assert repr(budget) in repr(result)


def _accountant_epsilon(event: Any, delta: float) -> float:
    """ε of one release at ``delta`` (PLD, pessimistic discretization 1e-3; the RDP
    accountant for zCDP events, which the PLD accountant does not take)."""
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    if pld.supports(event):
        return float(pld.compose(event).get_epsilon(delta))
    return float(rdp_privacy_accountant.RdpAccountant().compose(event).get_epsilon(delta))


RELEASES = [name for name in TAKES_BUDGET if SPECS.get(name, (None, ""))[1] == "release"]


@pytest.mark.parametrize("name", RELEASES)
def test_dp_event_is_within_the_guarantee(name: str) -> None:
    release = SPECS[name][0](APPROX)
    guarantee = release.privacy
    # Pure ε-DP (δ = 0) is checked at a tiny δ: the PLD's ε at δ = 0 is infinite.
    delta = guarantee.delta if guarantee.delta > 0 else 1e-12
    # The accountants are pessimistic: the PLD's discretization adds up to 1e-3 per
    # composed event (a tree at T = 8 composes at most 8), RDP's grid of orders less.
    assert _accountant_epsilon(release.dp_event(), delta) <= guarantee.epsilon + 1e-2


def test_dp_events_of_counting_range_and_keyed_releases_compose() -> None:
    events = [
        BinaryTree(T, budget=APPROX.replace(noise="gaussian"), rng=0).dp_event(),
        IdentityMechanism(T, budget=APPROX, rng=0).dp_event(),
        _keyed("gaussian").dp_event(),
    ]
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    for event in events:
        pld.compose(event)
    total = pld.get_epsilon(3e-6)
    assert 1.0 < total <= 3.0  # more than one release, at most basic composition


def _analytic_gaussian_epsilon(sigma_over_sensitivity: float, delta: float) -> float:
    """ε at which the Gaussian mechanism with σ/Δ = s meets δ (Balle & Wang 2018,
    Theorem 8: δ(ε) = Φ(1/(2s) − εs) − e^ε Φ(−1/(2s) − εs)), by root finding."""
    s = sigma_over_sensitivity

    def excess(eps: float) -> float:
        tail = math.exp(eps) * stats.norm.cdf(-1 / (2 * s) - eps * s)
        return float(stats.norm.cdf(1 / (2 * s) - eps * s) - tail - delta)

    return float(optimize.brentq(excess, 1e-9, 50.0, xtol=1e-12))


def test_range_gaussian_event_matches_an_independent_epsilon() -> None:
    # Identity: the cells themselves are perturbed, Δ₂ = 1 (one record, one cell).
    mech = IdentityMechanism(T, budget=APPROX, rng=0)
    event = mech.dp_event()
    assert isinstance(event, accountant.GaussianDpEvent)
    assert event.noise_multiplier == pytest.approx(mech.sigma / 1.0, rel=1e-12)
    exact = _analytic_gaussian_epsilon(mech.sigma, APPROX.delta)
    assert exact == pytest.approx(APPROX.epsilon, rel=1e-6)  # analytic calibration is tight
    assert _accountant_epsilon(event, APPROX.delta) == pytest.approx(exact, abs=1e-3)
    # Twice the noise would be a different event (the check is not vacuous).
    assert _analytic_gaussian_epsilon(2 * mech.sigma, APPROX.delta) < 0.6 * APPROX.epsilon


def test_range_discrete_event_is_the_exact_zcdp_rho() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6, noise="discrete-gaussian")
    mech = IdentityMechanism(T, budget=budget, rng=0)
    event = mech.dp_event()
    assert isinstance(event, accountant.ZCDpEvent)
    sigma2 = float(mech.sampler.sigma2)  # type: ignore[attr-defined]
    assert event.rho == pytest.approx(1.0 / (2.0 * sigma2), rel=1e-12)  # CKS Thm 14, Δ₂ = 1
    assert _accountant_epsilon(event, 1e-6) <= budget.epsilon * (1 + 1e-3)


def _keyed_with(budget: Budget, mechanism: str = "binary") -> KeyedMechanism:
    return KeyedMechanism(
        3,
        T,
        mechanism,
        budget=budget,
        l1_step=2.0,
        l2_step=1.5,
        neighbouring="one event",
        key_block=4,
    )


def _keyed(noise: str, mechanism: str = "binary") -> KeyedMechanism:
    return _keyed_with(Budget(epsilon=1.0, delta=1e-6, noise=noise), mechanism)


def test_keyed_gaussian_event_matches_an_independent_epsilon() -> None:
    keyed = _keyed("gaussian")
    event = keyed.dp_event()
    assert isinstance(event, accountant.GaussianDpEvent)
    # Binary tree over T = 8 steps: each step lies in log2(8) + 1 = 4 nodes, so the
    # vector step's ℓ₂ bound 1.5 becomes Δ₂ = 1.5 · √4 = 3.
    sigma = float(keyed.counting.noise_scale)
    assert event.noise_multiplier == pytest.approx(sigma / 3.0, rel=1e-12)
    exact = _analytic_gaussian_epsilon(sigma / 3.0, 1e-6)
    assert exact == pytest.approx(1.0, rel=1e-6)
    assert _accountant_epsilon(event, 1e-6) == pytest.approx(exact, abs=1e-3)


def test_keyed_laplace_event_is_pure_at_the_l1_scale() -> None:
    keyed = _keyed_with(Budget(epsilon=1.0, noise="laplace"))
    event = keyed.dp_event()
    scale = float(keyed.counting.noise_scale)
    # Pure ε-DP of the Laplace tree: ε = Δ₁/λ with Δ₁ = 2 · 4 nodes.
    assert 2.0 * 4 / scale == pytest.approx(1.0, rel=1e-12)
    pld = _accountant_epsilon(event, 1e-12)
    assert pld == pytest.approx(1.0, abs=2e-3)


def test_counting_and_range_classes_are_all_specced() -> None:
    # The mechanism base classes' concrete subclasses are all public and specced.
    concrete = {
        f"{cls.__module__}.{cls.__qualname__}"
        for base in (CountingMechanism, RangeMechanism)
        for cls in _subclasses(base)
        if not inspect.isabstract(cls) and not cls.__name__.startswith("_")
    }
    assert concrete <= set(SPECS)


def _subclasses(cls: type) -> set[type]:
    out = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out
