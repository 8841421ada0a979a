"""The Budget value, its Enums, and dp_event() composition with dp_accounting."""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

from dpcount.counting import BinaryTree, Honaker, KaryTree, SqrtFactorization
from dpcount.privacy import Budget, CalibrationRule, Neighbouring, NoiseKind, ZeroNoise
from dpcount.privacy.budget import refuses_loose_budget
from dpcount.privacy.calibration import analytic_gaussian_delta

dp_accounting = pytest.importorskip("dp_accounting")


# -- the value ---------------------------------------------------------------------------
def test_budget_is_frozen_validated_and_coerces_strings() -> None:
    b = Budget(epsilon=1, delta=1e-6, noise="gaussian", calibration="fhu")
    assert b.noise is NoiseKind.GAUSSIAN and b.calibration is CalibrationRule.FHU
    assert b.epsilon == 1.0 and isinstance(b.epsilon, float)
    assert b.noise == "gaussian" and f"{b.noise}" == "gaussian"
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.epsilon = 2.0  # type: ignore[misc]
    assert b == Budget(epsilon=1.0, delta=1e-6, noise=NoiseKind.GAUSSIAN, calibration="fhu")
    assert hash(b) == hash(Budget(epsilon=1.0, delta=1e-6, noise="gaussian", calibration="fhu"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 0.0}, ValueError, r"epsilon must be > 0"),
        ({"epsilon": "1"}, TypeError, r"epsilon must be a real number"),
        ({"epsilon": 1.0, "delta": 1.0}, ValueError, r"delta must be in \(0, 1\)"),
        ({"epsilon": 1.0, "noise": "gauss"}, ValueError, r"noise must be one of"),
        ({"epsilon": 1.0, "noise": 3}, TypeError, r"noise must be one of"),
        ({"epsilon": 1.0, "calibration": "magic"}, ValueError, r"calibration must be one of"),
        ({"epsilon": 1.0, "noise": "gaussian"}, ValueError, r"delta must be given"),
        ({"epsilon": 1.0, "step_sensitivity": -1}, ValueError, r"step_sensitivity must be > 0"),
        ({"epsilon": 1.0, "step_l2_sensitivity": math.inf}, ValueError, r"step_l2_sensitivity"),
    ],
)
def test_budget_refuses_bad_fields(kwargs: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_enums_have_one_definition_each() -> None:
    assert NoiseKind.choices() == ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")
    assert {k for k in NoiseKind if k.is_discrete} == {
        NoiseKind.DISCRETE_LAPLACE,
        NoiseKind.DISCRETE_GAUSSIAN,
    }
    assert "event-level" in Neighbouring.EVENT_LEVEL.description


# -- mechanisms take and expose it -------------------------------------------------------
def test_short_calls_and_budget_object_build_the_same_mechanism() -> None:
    a = KaryTree(100, epsilon=1.0)
    b = KaryTree(100, budget=Budget(epsilon=1.0))
    assert a.budget == b.budget == Budget(epsilon=1.0, noise="laplace")
    assert a.noise_scale == b.noise_scale
    s = SqrtFactorization(64, epsilon=1, delta=1e-6)
    assert s.budget.noise is NoiseKind.GAUSSIAN  # the class default
    assert "budget=Budget(epsilon=1.0, delta=1e-06, noise=gaussian)" in repr(s)


def test_everything_after_the_horizon_is_keyword_only() -> None:
    with pytest.raises(TypeError, match="positional"):
        KaryTree(100, 1.0)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        SqrtFactorization(100, 1.0, 1e-6)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        Honaker(100, 1.0, 1e-6, "gaussian", 0)  # type: ignore[misc]


def test_budget_and_fields_are_exclusive_and_typos_are_named() -> None:
    with pytest.raises(TypeError, match="either budget= or its fields"):
        KaryTree(10, budget=Budget(epsilon=1.0), epsilon=2.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'epsiloon'"):
        KaryTree(10, epsiloon=1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs epsilon="):
        KaryTree(10)
    with pytest.raises(TypeError, match=r"budget must be a dpcount\.privacy\.Budget"):
        KaryTree(10, budget={"epsilon": 1.0})  # type: ignore[arg-type]


def test_the_loose_spelling_refusal_keeps_the_signature_and_names_the_replacement() -> None:
    """:func:`refuses_loose_budget` (0.5 removed what 0.4 deprecated): the loose fields
    and the listed positional ones are a TypeError naming them and ``budget=Budget(...)``;
    anything else reaches the callable (or Python's own error) unchanged."""

    @refuses_loose_budget("epsilon", "delta")
    def plan(horizon: int, *, budget: Budget, k: int = 2) -> tuple[int, Budget, int]:
        """A plan."""
        return horizon, Budget.check(budget, owner="plan"), k

    assert plan.__name__ == "plan" and plan.__doc__ == "A plan."
    assert list(inspect.signature(plan).parameters) == ["horizon", "budget", "k"]
    one = Budget(epsilon=1.0)
    assert plan(8, budget=one, k=3) == (8, one, 3)
    tail = r"were removed in dpcount 0\.5 \(deprecated in 0\.4\); pass budget=Budget\({}\) instead"
    with pytest.raises(
        TypeError,
        match=r"plan\(\) got an unexpected keyword argument 'delta': "
        r"the budget's fields outside budget= " + tail.format(r"delta=1e-06"),
    ):
        plan(8, budget=one, delta=1e-6)  # type: ignore[call-arg]
    with pytest.raises(
        TypeError,
        match=r"plan\(\) got the budget's fields epsilon, delta by "
        r"position: .* " + tail.format(r"epsilon=1\.0, delta=1e-06"),
    ):
        plan(8, 1.0, 1e-6)  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"plan\(\) takes 1 positional argument but 4 were given"):
        plan(8, 1.0, 1e-6, "laplace")  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"plan\(\) got an unexpected keyword argument 'kk'$"):
        plan(8, budget=one, kk=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"budget must be a dpcount\.privacy\.Budget, got dict"):
        plan(8, budget={"epsilon": 1.0})  # type: ignore[arg-type]
    schema = Budget(epsilon=1.0, participation={"max_participations": 2, "min_separation": 3})
    with pytest.raises(ValueError, match=r"plan\(\) does not calibrate to a participation"):
        plan(8, budget=schema)


# -- dp_event composes with dp_accounting --------------------------------------------------
def _pld_epsilon(events: list[object], delta: float) -> float:
    acc = dp_accounting.pld.PLDAccountant()
    for e in events:
        acc.compose(e)
    return float(acc.get_epsilon(delta))


def test_gaussian_event_reproduces_the_calibration() -> None:
    m = SqrtFactorization(256, epsilon=1.0, delta=1e-6, rng=0)
    event = m.dp_event()
    assert isinstance(event, dp_accounting.GaussianDpEvent)
    # Independent: the analytic Gaussian δ at the event's noise multiplier equals 1e-6.
    assert analytic_gaussian_delta(event.noise_multiplier, 1.0, 1.0) == pytest.approx(
        1e-6, rel=1e-6
    )
    assert _pld_epsilon([event], 1e-6) == pytest.approx(1.0, abs=2e-3)


def test_two_gaussian_releases_compose_as_dpcount_predicts() -> None:
    a = SqrtFactorization(512, epsilon=1.0, delta=1e-6, rng=0)
    b = BinaryTree(100, epsilon=0.5, delta=1e-6, noise="gaussian", rng=0)
    # Two Gaussian mechanisms compose to one with 1/μ² summed (Dong, Roth, Su 2019, Cor. 3.3).
    mu = math.hypot(1 / a.dp_event().noise_multiplier, 1 / b.dp_event().noise_multiplier)
    eps = _pld_epsilon([a.dp_event(), b.dp_event()], 1e-5)
    # dpcount's own analytic Gaussian δ at the accountant's ε is 1e-5 (to grid accuracy).
    assert analytic_gaussian_delta(1 / mu, 1.0, eps) == pytest.approx(1e-5, rel=2e-2)
    assert analytic_gaussian_delta(1 / mu, 1.0, eps * 0.99) > 1e-5  # and ε is not loose


def test_laplace_tree_event_is_the_composition_over_its_levels() -> None:
    m = KaryTree(1000, epsilon=1.0, k=4, rng=0)
    # Pure ε-DP: the composed PLD at δ → 0 gives back ε = hΔ/λ (pessimistic grid: ≤ 1e-3 above).
    eps = _pld_epsilon([m.dp_event()], 1e-12)
    assert eps <= 1.0 + 1e-3
    assert eps == pytest.approx(1.0, abs=0.05)
    # With a delta the composition is tighter than dpcount's Theorem 3 epsilon.
    d = KaryTree(10**6, epsilon=1.0, k=2, delta=1e-6, rng=0)
    assert d.privacy is not None
    assert _pld_epsilon([d.dp_event()], 1e-6) <= d.privacy.epsilon


def test_discrete_events() -> None:
    m = KaryTree(100, epsilon=1.0, noise="discrete-laplace", rng=0)
    event = m.dp_event()
    assert _pld_epsilon([event], 1e-12) == pytest.approx(1.0, abs=1e-3)
    g = BinaryTree(100, epsilon=1.0, delta=1e-6, noise="discrete-gaussian", rng=0)
    z = g.dp_event()
    assert isinstance(z, dp_accounting.ZCDpEvent)
    assert g.privacy is not None and z.rho == pytest.approx(g.privacy.rho)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(z)
    assert rdp.get_epsilon(1e-6) <= 1.0 + 1e-6


def test_no_event_without_a_guarantee() -> None:
    with pytest.raises(ValueError, match="no privacy guarantee"):
        KaryTree(10, epsilon=1.0).with_sampler(ZeroNoise()).dp_event()


def test_event_scale_is_the_sampler_scale() -> None:
    m = Honaker(50, epsilon=2.0, rng=0)
    event = m.dp_event()
    lam = m.noise_scale
    # h levels, each changing by 1: one Laplace event per level at λ/1.
    assert event.count == m.height
    assert event.event.noise_multiplier == pytest.approx(lam)
    assert np.isclose(m.height / lam, 2.0)
