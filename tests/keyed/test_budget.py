"""keyed_counts takes ``budget=Budget(...)`` (the loose ε/δ/noise/calibration spelling
warns and means the same), and ``mechanism="auto"`` is the library's one choice,
:func:`dpcount.analysis.choice.choose`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.analysis import choice as choice_module
from dpcount.keyed import run
from dpcount.keyed.engine import choose_mechanism
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.privacy import Budget, Participation, ParticipationUnsupportedError

SECRET = unsafe_testing_secret(b"b" * 32)


def _events() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame({"t": rng.integers(1, 13, 80), "key": rng.choice(["a", "b"], 80)})


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=["a", "b"], time_column="t", key_column="key", step=1, start=1, horizon=12,
        secret=SECRET,
    )  # fmt: skip
    kw.update(extra)
    return kw


def test_the_loose_spelling_warns_and_releases_the_same() -> None:
    budget = Budget(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic")
    new = run.keyed_counts(_events(), **_kw(budget=budget, mechanism="sqrt"))
    with pytest.warns(DeprecationWarning, match=r"keyed_counts\(epsilon=, delta=, noise="):
        old = run.keyed_counts(
            _events(), **_kw(epsilon=0.5, delta=1e-6, noise="gaussian", calibration="classic",
                             mechanism="sqrt"),
        )  # fmt: skip
    assert new.frame is not None and old.frame is not None
    assert new.frame.equals(old.frame)
    assert new.mechanism == old.mechanism and new.mechanism.calibration == "classic"


def test_what_a_keyed_budget_cannot_mean_is_refused() -> None:
    with pytest.raises(TypeError, match=r"keyed_counts\(\) takes either budget= or its fields"):
        run.keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0), epsilon=1.0))
    with pytest.raises(TypeError, match=r"keyed_counts\(\) needs epsilon="):
        run.keyed_counts(_events(), **_kw())
    with pytest.raises(ValueError, match=r"budget.step_sensitivity must be 1 .* max_weight"):
        run.keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0, step_sensitivity=2.0)))
    schema = Participation(max_participations=2, min_separation=3)
    with pytest.raises(ParticipationUnsupportedError, match=r"keyed_counts\(\) does not"):
        run.keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0, participation=schema)))


def test_auto_is_the_librarys_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Budget, choice_module.Choice]] = []
    real = choice_module.choose

    def spy(horizon: Any, *, budget: Budget, **kw: Any) -> choice_module.Choice:
        calls.append((horizon, budget, real(horizon, budget=budget, **kw)))
        return calls[-1][2]

    monkeypatch.setattr(choice_module, "choose", spy)
    res = run.keyed_counts(_events(), **_kw(budget=Budget(epsilon=1.0), max_weight=3))
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
        16, epsilon=1.0, delta=1e-6, noise="gaussian", l1_step=2.0, l2_step=2**0.5
    )
    assert calls[1][1] == Budget(epsilon=1.0, delta=1e-6, noise="gaussian", step_sensitivity=2**0.5)
    gauss = calls[1][2]
    assert (name, options) == (gauss.mechanism, dict(gauss.options))
    assert rule == (None if gauss.budget.calibration is None else str(gauss.budget.calibration))
