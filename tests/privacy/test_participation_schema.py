"""The (k, b)-participation schema as a value, and as part of the Budget."""

from __future__ import annotations

import json

import pytest

from dpcount.privacy import Budget, Participation


def test_schema_validates_its_fields() -> None:
    assert Participation() == Participation(max_participations=1, min_separation=1)
    with pytest.raises(ValueError, match=r"max_participations must be >= 1, got 0"):
        Participation(max_participations=0)
    with pytest.raises(ValueError, match=r"min_separation must be >= 1, got 0"):
        Participation(max_participations=2, min_separation=0)
    with pytest.raises(TypeError, match=r"min_separation must be an integer"):
        Participation(max_participations=2, min_separation=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"participation has an unknown field 'k'"):
        Budget(epsilon=1.0, participation={"k": 2})  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match=r"participation must be a dpcount.privacy.Participation"):
        Budget(epsilon=1.0, participation=4)  # type: ignore[arg-type]


def test_schema_fits_a_horizon() -> None:
    schema = Participation(max_participations=4, min_separation=512)
    assert schema.fits(1537) == 4 and schema.fits(1536) == 3
    schema.check_horizon(1537)
    with pytest.raises(ValueError, match=r"do not fit in horizon=1536 steps \(at most 3 do\)"):
        schema.check_horizon(1536)


def test_budget_normalises_and_round_trips_the_schema() -> None:
    raw = {"max_participations": 4, "min_separation": 512}
    budget = Budget(epsilon=1.0, delta=1e-6, noise="gaussian", participation=raw)
    assert budget.participation == Participation(max_participations=4, min_separation=512)
    kwargs = json.loads(json.dumps(budget.as_kwargs()))
    assert kwargs["participation"] == raw
    assert Budget(**kwargs) == budget
    assert "participation=Participation(max_participations=4, min_separation=512)" in repr(budget)
    assert "user-level (4, 512)-participation" in budget.neighbouring
    assert "any two at least 512 steps apart" in budget.neighbouring
    # k = 1 is single participation: the same budget as none, and the same config.
    single = Budget(
        epsilon=1.0, participation=Participation(max_participations=1, min_separation=7)
    )
    assert single.participation is None and single == Budget(epsilon=1.0)
    assert "participation" not in single.as_kwargs()
    assert single.neighbouring.startswith("event-level")


def test_callables_without_schema_support_refuse_a_schema() -> None:
    from dpcount.counting import BinaryTree
    from dpcount.ranges import IdentityMechanism

    schema = Participation(max_participations=2, min_separation=1)
    with pytest.raises(ValueError, match=r"IdentityMechanism\(\) does not calibrate to a part"):
        IdentityMechanism(10, epsilon=1.0, participation=schema)
    with pytest.raises(ValueError, match=r"IdentityMechanism\(\) does not calibrate to a part"):
        IdentityMechanism(10, budget=Budget(epsilon=1.0, participation=schema))
    tree = BinaryTree(10, epsilon=1.0, participation=schema)
    assert tree.budget.participation == schema
    # Single participation is accepted everywhere.
    IdentityMechanism(10, epsilon=1.0, delta=1e-6, participation=Participation())
