"""Every app on the one budget value: ``budget=`` or its keyword fields, keyword-only.

Each app takes ``budget=Budget(...)`` or the short form ``epsilon=..., delta=...``
(identical results), refuses the budget's fields as positional arguments and a
budget that sets the step sensitivity (the app computes it from its bounds),
exposes ``app.budget`` (the user's budget with the noise kind resolved), shows
it in ``repr``, and delegates ``dp_event()`` to its counting mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    GraphStatistic,
    LocalMedianProtocol,
    RunningAverage,
    SubstringCounter,
    SyntheticGraph,
    degree_histogram_statistic,
    edge_count_statistic,
    local_median,
    local_risk_minimization,
    triangle_count_statistic,
)
from dpcount.apps._common import AppBase
from dpcount.apps.graphs import edge_count
from dpcount.privacy import Budget, ZeroNoise

T = 40

#: app name -> (builder taking the budget keywords, integer-valued stream?)
APPS: dict[str, tuple[Callable[..., AppBase], bool]] = {
    "ContinualHistogram": (
        lambda **b: ContinualHistogram(6, T, max_items_per_step=2, rng=0, **b),
        True,
    ),
    "RunningAverage": (lambda **b: RunningAverage(T, lower=0.0, upper=2.0, rng=0, **b), False),
    "SyntheticGraph": (lambda **b: SyntheticGraph(5, T, max_edges_per_step=2, rng=0, **b), False),
    "GraphStatistic": (
        lambda **b: GraphStatistic(edge_count, 1.0, n_vertices=5, horizon=T, rng=0, **b),
        False,
    ),
    "edge_count_statistic": (lambda **b: edge_count_statistic(5, T, rng=0, **b), True),
    "degree_histogram_statistic": (
        lambda **b: degree_histogram_statistic(5, 3, T, rng=0, **b),
        True,
    ),
    "triangle_count_statistic": (lambda **b: triangle_count_statistic(5, 3, T, rng=0, **b), True),
    "SubstringCounter": (lambda **b: SubstringCounter("ab", 2, T, rng=0, **b), True),
    "EpisodeCounter": (lambda **b: EpisodeCounter("abc", 2, T, rng=0, **b), True),
    "LocalMedianProtocol": (lambda **b: LocalMedianProtocol(100, rng=0, **b), True),
}

#: the old positional spellings (epsilon, delta after the structure arguments)
POSITIONAL: dict[str, Callable[[], object]] = {
    "ContinualHistogram": lambda: ContinualHistogram(6, T, 1.0),  # type: ignore[misc]
    "ContinualHistogram-b": lambda: ContinualHistogram(6, T, 1.0, None, 2),  # type: ignore[misc]
    "RunningAverage": lambda: RunningAverage(T, 1.0, lower=0.0, upper=1.0),  # type: ignore[misc]
    "SyntheticGraph": lambda: SyntheticGraph(5, T, 1.0),  # type: ignore[misc]
    "GraphStatistic": lambda: GraphStatistic(edge_count, 1.0, 5, T, 1.0),  # type: ignore[misc]
    "edge_count_statistic": lambda: edge_count_statistic(5, T, 1.0),  # type: ignore[misc]
    "degree_histogram_statistic": lambda: degree_histogram_statistic(5, 3, T, 1.0),  # type: ignore[misc]
    "triangle_count_statistic": lambda: triangle_count_statistic(5, 3, T, 1.0),  # type: ignore[misc]
    "SubstringCounter": lambda: SubstringCounter("ab", 2, T, 1.0),  # type: ignore[misc]
    "EpisodeCounter": lambda: EpisodeCounter("ab", 2, T, 1.0),  # type: ignore[misc]
    "LocalMedianProtocol": lambda: LocalMedianProtocol(100, 1.0),  # type: ignore[misc]
    "local_median": lambda: local_median(np.full(10, 0.5), 1.0),  # type: ignore[misc]
    "local_risk_minimization": lambda: local_risk_minimization(  # type: ignore[misc]
        np.full(10, 0.5), lambda t, d: t - d, 1.0
    ),
}


def expected_noise(integer: bool, delta: float | None) -> str:
    """The documented defaults (MechanismChoice): integer noise for integer-valued
    streams with a whole l1 sensitivity, continuous noise otherwise."""
    if integer:
        return "discrete-laplace" if delta is None else "discrete-gaussian"
    return "laplace" if delta is None else "gaussian"


@pytest.mark.parametrize("name", sorted(POSITIONAL))
def test_budget_fields_are_keyword_only(name: str) -> None:
    with pytest.raises(TypeError, match=r"positional argument"):
        POSITIONAL[name]()


@pytest.mark.parametrize("delta", [None, 1e-6])
@pytest.mark.parametrize("name", sorted(APPS))
def test_budget_and_short_form_are_identical(name: str, delta: float | None) -> None:
    build, integer = APPS[name]
    short = build(epsilon=0.5, delta=delta)
    full = build(budget=Budget(epsilon=0.5, delta=delta))
    assert short.mechanism.noise_scale == full.mechanism.noise_scale
    assert short.privacy == full.privacy and short.privacy is not None
    assert (
        short.budget
        == full.budget
        == Budget(epsilon=0.5, delta=delta, noise=expected_noise(integer, delta))
    )
    assert short.noise == expected_noise(integer, delta)
    assert repr(short) == repr(full)
    assert f"budget={short.budget!r}" in repr(short)
    # The mechanism's budget is the app's with the step sensitivity the app computed.
    mech = short.mechanism.budget
    assert (mech.epsilon, mech.delta, mech.noise) == (0.5, delta, short.budget.noise)
    gaussian = short.noise == "gaussian"
    sens = short.sensitivity  # type: ignore[attr-defined]
    assert mech.step_sensitivity == (sens.l2 if gaussian else sens.l1)
    # The released guarantee is within the budget asked for.
    assert short.privacy.epsilon <= 0.5 and short.privacy.delta <= (delta or 0.0)


@pytest.mark.parametrize("name", sorted(APPS))
def test_explicit_noise_and_calibration_pass_through_the_budget(name: str) -> None:
    build, _ = APPS[name]
    app = build(budget=Budget(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic"))
    assert app.budget == Budget(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic")
    assert app.mechanism.privacy is not None and app.mechanism.privacy.noise == "gaussian"
    sens = app.mechanism.privacy.l2_sensitivity
    # Dwork & Roth 2014, Thm A.1, computed independently.
    sigma = sens * math.sqrt(2 * math.log(1.25 / 1e-6)) / 0.5
    assert app.mechanism.noise_scale == pytest.approx(sigma, rel=1e-12)


@pytest.mark.parametrize("field", ["step_sensitivity", "step_l2_sensitivity"])
@pytest.mark.parametrize("name", sorted(APPS))
def test_a_budget_setting_the_step_sensitivity_is_refused(name: str, field: str) -> None:
    build, _ = APPS[name]
    with pytest.raises(ValueError, match=rf"{field}=2\.0 cannot be set for .*sensitivity from"):
        build(budget=Budget(epsilon=1.0, **{field: 2.0}))
    with pytest.raises(ValueError, match=rf"{field}=2\.0 cannot be set"):
        build(epsilon=1.0, **{field: 2.0})
    build(epsilon=1.0, step_sensitivity=1.0)  # the default value is not a setting


@pytest.mark.parametrize("name", sorted(APPS))
def test_budget_resolution_errors_name_the_app(name: str) -> None:
    build, _ = APPS[name]
    with pytest.raises(TypeError, match=r"not both"):
        build(budget=Budget(epsilon=1.0), epsilon=1.0)
    with pytest.raises(TypeError, match=r"needs epsilon="):
        build()
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'epsilom'"):
        build(epsilom=1.0)
    with pytest.raises(TypeError, match=r"budget must be a dpcount.privacy.Budget"):
        build(budget={"epsilon": 1.0})


def test_local_functions_take_the_budget() -> None:
    data = np.random.default_rng(0).beta(2, 5, size=2000)
    a = local_median(data, epsilon=1.0, rng=3)
    b = local_median(data, budget=Budget(epsilon=1.0), rng=3)
    np.testing.assert_array_equal(a.slopes, b.slopes)
    assert a.estimate == b.estimate and a.buckets == b.buckets == math.ceil(math.sqrt(2000))
    grad: Callable[[Any, Any], Any] = lambda t, d: t - d  # noqa: E731
    c = local_risk_minimization(data, grad, epsilon=1.0, delta=1e-6, rng=4)
    d = local_risk_minimization(data, grad, budget=Budget(epsilon=1.0, delta=1e-6), rng=4)
    np.testing.assert_array_equal(c.slopes, d.slopes)
    with pytest.raises(ValueError, match=r"step_sensitivity=4\.0 cannot be set"):
        local_median(data, epsilon=1.0, step_sensitivity=4.0)
    with pytest.raises(ValueError, match=r"step_l2_sensitivity=1\.0 cannot be set"):
        local_risk_minimization(data, grad, budget=Budget(epsilon=1.0, step_l2_sensitivity=1.0))


def _accountant_epsilons(event: Any, delta: float) -> tuple[float, float]:
    """ε of one and of two compositions of ``event`` at ``delta`` (dp_accounting)."""
    from dp_accounting import dp_event as events
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    out = []
    for n in (1, 2):
        if isinstance(event, events.ZCDpEvent):
            acc: Any = rdp_privacy_accountant.RdpAccountant()
        else:
            acc = pld_privacy_accountant.PLDAccountant()
        for _ in range(n):
            acc.compose(event)
        out.append(float(acc.get_epsilon(delta)))
    return out[0], out[1]


@pytest.mark.parametrize(
    ("delta", "noise"),
    [(None, None), (None, "laplace"), (1e-6, None), (1e-6, "gaussian")],
)
@pytest.mark.parametrize("name", sorted(APPS))
def test_dp_event_is_the_mechanisms_and_composes(
    name: str, delta: float | None, noise: str | None
) -> None:
    pytest.importorskip("dp_accounting", reason="dp-accounting not installed")
    build, _ = APPS[name]
    app = build(epsilon=0.5, delta=delta, noise=noise)
    event = app.dp_event()
    assert event == app.mechanism.dp_event()
    assert app.privacy is not None
    once, twice = _accountant_epsilons(event, delta or 1e-12)
    if app.noise == "discrete-gaussian":
        # zCDP: the event carries the guarantee's rho; RDP's conversion of rho-zCDP is
        # at most rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016, Prop. 1.3).
        assert app.privacy.rho is not None and event.rho == pytest.approx(app.privacy.rho)
        rho = app.privacy.rho
        assert once <= rho + 2 * math.sqrt(rho * math.log(1 / 1e-6)) + 1e-9
        assert twice > once
    else:
        # Laplace (pure, concentrated profile) and analytic Gaussian: tight calibrations,
        # so the accountant's epsilon is the budget's (up to the PLD grid).
        assert once == pytest.approx(0.5, abs=2e-3)
        assert twice > 1.3 * once
    with pytest.raises(ValueError, match=r"no privacy guarantee"):
        app.with_sampler(ZeroNoise()).dp_event()


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_mechanism_keywords_reach_the_mechanism_and_bad_ones_are_named(name: str) -> None:
    """``mechanism``, ``k`` and ``subtract`` (AppFields) build the tree asked for, and each
    bad one is refused naming it, as an unknown keyword is."""
    build, _ = APPS[name]
    app = build(epsilon=0.5, mechanism="kary", k=3, subtract=False)
    assert (type(app.mechanism).__name__, app.mechanism.k, app.mechanism.subtract) == (  # type: ignore[attr-defined]
        "KaryTree",
        3,
        False,
    )
    assert repr(app).endswith(f", budget={app.budget!r}, mechanism={app.mechanism!r})")
    with pytest.raises(ValueError, match=r"^k must be >= 2, got 1$"):
        build(epsilon=0.5, k=1)
    with pytest.raises(TypeError, match=r"^subtract must be a bool"):
        build(epsilon=0.5, subtract=1)
    with pytest.raises(ValueError, match=r"^mechanism must be one of .*, got 'nope'$"):
        build(epsilon=0.5, mechanism="nope")
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'bogus'"):
        build(epsilon=0.5, bogus=1)
