"""The planner lists every registered mechanism its declared plan reaches
(``Capabilities.plan``): discovered from the registry, not a hand list."""

from __future__ import annotations

import pytest

from dpcount.analysis import compare
from dpcount.counting.registry import REGISTRY, capabilities
from dpcount.counting.strategy import Plan, Planned
from dpcount.privacy import Budget, Participation


def _planned(*, schema: bool) -> set[str]:
    """The names whose plan lists them at T = 64 with δ (single participation or a
    schema with b < T), read from the declarations."""
    out = set()
    for entry in REGISTRY:
        plan = entry.capabilities.plan
        if entry.name is None or plan is None:
            continue
        if (plan.single and schema) or (plan.banded and not schema):
            continue
        out.add(entry.name)
    return out


def test_every_planned_mechanism_is_listed_without_a_schema() -> None:
    rows = compare(64, budget=Budget(epsilon=1.0, delta=1e-6), certificates=False)
    assert {r.mechanism for r in rows} == _planned(schema=False)
    # the max metric adds the max presets the plans declare (where they differ)
    by_max = compare(
        64, budget=Budget(epsilon=1.0, delta=1e-6), metric="max_variance", certificates=False
    )
    presets = {r.mechanism for r in by_max if r.objective == "max"}
    assert presets and presets <= {
        e.name for e in REGISTRY if e.capabilities.plan and e.capabilities.plan.max_preset
    }


def test_a_schema_lists_the_banded_plans_and_drops_the_single_participation_ones() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6, participation=Participation(2, 16))
    rows = compare(64, budget=budget, certificates=False)
    assert {r.mechanism for r in rows} == _planned(schema=True)
    labels = {r.label for r in rows}
    assert {"toeplitz-b16", "row-scaled-banded-b16"} <= labels
    assert not {"dense-optimum", "row-scaled-sqrt"} & labels


def test_pure_dp_lists_only_the_laplace_capable_built_plans() -> None:
    rows = compare(64, budget=Budget(epsilon=1.0), certificates=False)
    assert {r.noise for r in rows} == {"laplace"}
    want = {
        e.name
        for e in REGISTRY
        if e.name is not None
        and e.capabilities.plan is not None
        and e.capabilities.plan.planned is not Planned.LOSSES
        and not e.capabilities.gaussian_only
    }
    assert {r.mechanism for r in rows} == want


def test_a_plan_limit_drops_a_mechanism_past_it() -> None:
    plan = capabilities("row-scaled-sqrt").plan
    assert isinstance(plan, Plan) and plan.up_to == 4096
    budget = Budget(epsilon=1.0, delta=1e-6)
    # the certificates are not read by the listing; 4097 is past the declared limit
    names = {r.mechanism for r in compare(4097, budget=budget, certificates=False)}
    assert "row-scaled-sqrt" not in names and "toeplitz" in names


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_the_declared_calibrations_are_listed_below_epsilon_one(epsilon: float) -> None:
    rows = compare(16, budget=Budget(epsilon=epsilon, delta=1e-6), certificates=False)
    sqrt = sorted(r.label for r in rows if r.mechanism == "sqrt" and r.noise == "gaussian")
    calibrations = capabilities("sqrt").plan.calibrations  # type: ignore[union-attr]
    want = calibrations if epsilon < 1 else calibrations[:1]
    assert sqrt == sorted(f"sqrt ({m})" for m in want)


def test_mechanisms_lists_their_rows_of_the_full_list_in_order() -> None:
    """``mechanisms=`` keeps exactly the full list's rows of those mechanisms, in its
    order (recommend_mechanism merges them with the Laplace rows by that order); an
    unknown name is a ValueError naming the parameter, a bare string a TypeError."""
    budget = Budget(epsilon=1.0, delta=1e-6)
    full = compare(9, budget=budget, certificates=False)
    some = compare(9, budget=budget, certificates=False, mechanisms=["kary", "honaker"])
    assert some == tuple(r for r in full if r.mechanism in ("kary", "honaker"))
    assert {r.noise for r in some} == {"laplace", "gaussian"}
    with pytest.raises(ValueError, match="mechanisms"):
        compare(9, budget=budget, mechanisms=["kary", "no-such"])
    with pytest.raises(TypeError, match="mechanisms"):
        compare(9, budget=budget, mechanisms="kary")
