"""keyed_counts, KeyedMechanism, make_job and the keyed choose_mechanism take
``budget=Budget(...)`` (the loose ε/δ/noise/calibration spelling, deprecated in 0.4, was
removed in 0.5: a TypeError names the field and ``budget=Budget(...)``), and
``mechanism="auto"`` is the library's one choice, :func:`dpcount.analysis.choice.choose`."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.analysis import choice as choice_module
from dpcount.counting.registry import MECHANISMS
from dpcount.keyed import run
from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import EventColumns
from dpcount.keyed.job import make_job
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.spec import choose_mechanism, from_keywords
from dpcount.privacy import Budget, Participation, ParticipationUnsupportedError

SECRET = unsafe_testing_secret(b"b" * 32)


def _events() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame({"t": rng.integers(1, 13, 80), "key": rng.choice(["a", "b"], 80)})


def _keyed_counts(events: Any, **kw: Any) -> run.KeyedResult:
    """keyed_counts in the 0.4 keyword spelling (where the loose budget fields live)."""
    return run.keyed_counts(events, **from_keywords(**kw))


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=["a", "b"], time_column="t", key_column="key", step=1, start=1, horizon=12,
        secret=SECRET,
    )  # fmt: skip
    kw.update(extra)
    return kw


#: the message's tail: the 0.4 spelling is gone, and what to write instead
REMOVED = r"removed in dpcount 0\.5 \(deprecated in 0\.4\); pass budget=Budget\({}\) instead"


def test_the_loose_spelling_is_a_type_error_naming_the_replacement() -> None:
    budget = Budget(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic")
    new = _keyed_counts(_events(), **_kw(budget=budget, mechanism="sqrt"))
    assert new.mechanism.calibration == "classic"
    spelled = "epsilon=0.5, delta=1e-06, noise='gaussian', calibration='classic'"
    with pytest.raises(
        TypeError,
        match=r"keyed_counts\(\) got an unexpected keyword argument 'epsilon': the budget's "
        r"fields outside budget= were " + REMOVED.format(spelled),
    ):
        _keyed_counts(
            _events(), **_kw(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic",
                             mechanism="sqrt"),
        )  # fmt: skip


def test_what_a_keyed_budget_cannot_mean_is_refused() -> None:
    with pytest.raises(TypeError, match=r"keyed_counts\(\) got an unexpected keyword argument"):
        _keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0), epsilon=1.0))
    with pytest.raises(TypeError, match=r"keyed_counts\(\) missing required keyword .*'budget'"):
        _keyed_counts(_events(), **_kw())
    with pytest.raises(ValueError, match=r"budget.step_sensitivity must be 1 .* max_weight"):
        _keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0, step_sensitivity=2.0)))
    schema = Participation(max_participations=2, min_separation=3)
    with pytest.raises(ParticipationUnsupportedError, match=r"keyed_counts\(\) does not"):
        _keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0, participation=schema)))


def test_auto_is_the_librarys_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Budget, choice_module.Choice]] = []
    real = choice_module.choose

    def spy(horizon: Any, *, budget: Budget, **kw: Any) -> choice_module.Choice:
        calls.append((horizon, budget, real(horizon, budget=budget, **kw)))
        return calls[-1][2]

    monkeypatch.setattr(choice_module, "choose", spy)
    res = _keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0), max_weight=3))
    # the keyed default noise, and the step sensitivity of max_weight
    assert [(h, b.noise, b.step_sensitivity) for h, b, _ in calls] == [
        (12, "discrete-laplace", 3.0)
    ]
    chosen, m = calls[0][2], res.mechanism
    assert (m.mechanism, m.k, m.subtract) == (
        chosen.mechanism, chosen.options.get("k"), chosen.options.get("subtract"),
    )  # fmt: skip
    # Gaussian: ranked with the ℓ2 bound; a unit bound of 2 keys gives Δ1 = 2, Δ2 = √2
    name, options, rule = choose_mechanism(
        16, budget=Budget(epsilon=1.0, delta=1e-6, noise="gaussian"), l1_step=2.0, l2_step=2**0.5
    )
    assert calls[1][1] == Budget(epsilon=1.0, delta=1e-6, noise="gaussian", step_sensitivity=2**0.5)
    gauss = calls[1][2]
    assert (name, options) == (gauss.mechanism, dict(gauss.options))
    assert rule == (None if gauss.budget.calibration is None else str(gauss.budget.calibration))


def test_the_keyed_building_blocks_take_the_budget_and_refuse_the_loose_spelling() -> None:
    schema = Participation(max_participations=2, min_separation=3)
    budget = Budget(epsilon=0.5, delta=1e-6, noise="gaussian", participation=schema)
    shape: dict[str, Any] = dict(
        l1_step=2.0, l2_step=2**0.5, neighbouring="unit", key_block=4, k=3, subtract=True
    )
    new = KeyedMechanism(3, 12, "kary", budget=budget, **shape)
    with pytest.raises(
        TypeError,
        match=r"KeyedMechanism\(\) got an unexpected keyword argument "
        r"'epsilon': .*" + REMOVED.format(r"epsilon=0\.5, .*" + re.escape(repr(schema))),
    ):
        KeyedMechanism(
            3, 12, "kary", epsilon=0.5, delta=1e-6, noise="gaussian", participation=schema,
            **shape,
        )  # fmt: skip
    assert repr(budget) in repr(new)
    # no noise kind: the keyed default, exact discrete Laplace (also in the fingerprint)
    plain = KeyedMechanism(3, 12, "binary", budget=Budget(epsilon=1.0), **{**shape, "k": None,
                           "subtract": None})  # fmt: skip
    assert plain.config()["noise"] == "discrete-laplace"
    with pytest.raises(TypeError, match=r"KeyedMechanism\(\) got an unexpected keyword arg"):
        KeyedMechanism(3, 12, "kary", budget=budget, epsilon=1.0, **shape)

    steps = dict(l1_step=2.0, l2_step=2**0.5)
    assert choose_mechanism(16, budget=budget, **steps)[0] in MECHANISMS
    with pytest.raises(
        TypeError,
        match=r"choose_mechanism\(\) got an unexpected keyword "
        r"argument 'epsilon': .*" + REMOVED.format(r"epsilon=0\.5, delta=1e-06, .*"),
    ):
        choose_mechanism(
            16, epsilon=0.5, delta=1e-6, noise="gaussian", participation=schema, **steps
        )

    job_kw: dict[str, Any] = dict(
        times=pd.Series([1]), keys=["a", "b"], columns=EventColumns("t", "key"), step=1,
        max_weight=1, max_keys=None, start=1, horizon=12,
    )  # fmt: skip
    job, _ = make_job(budget=Budget(epsilon=0.5, noise="discrete-gaussian", delta=1e-6), **job_kw)
    assert job.mechanism.budget.noise == "discrete-gaussian"
    with pytest.raises(
        TypeError,
        match=r"make_job\(\) got an unexpected keyword argument "
        r"'epsilon': .*" + REMOVED.format("epsilon=0.5, delta=1e-06, noise='discrete-gaussian'"),
    ):
        make_job(epsilon=0.5, delta=1e-6, noise="discrete-gaussian", **job_kw)
    with pytest.raises(ParticipationUnsupportedError, match=r"make_job\(\) does not"):
        make_job(budget=budget, **job_kw)
