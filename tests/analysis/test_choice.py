"""``dpcount.analysis.choice.choose``: the one policy — mechanism, options, noise and
why — that the CLI, ``dpcount.frame`` and keyed print (issue 19; issue 22 item 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcount.analysis import compare
from dpcount.analysis.choice import DEFAULT_K, UNBOUNDED_PROBE, NoiseNote, choose
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.counting.unbounded import HORIZON_FREE_BLT, UnboundedCounter
from dpcount.privacy import Budget, MissingDeltaError, NoiseKind

ONE = Budget(epsilon=1.0)
WITH_DELTA = Budget(epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize(
    ("mechanism", "budget", "whole", "noise", "reason"),
    [
        ("kary", ONE, True, "discrete-laplace", None),
        ("honaker", WITH_DELTA, None, "discrete-gaussian", None),  # live: not known yet
        ("kary", ONE, False, "laplace", "data"),
        ("binary", Budget(epsilon=1.0, step_sensitivity=0.5), True, "laplace", "sensitivity"),
        ("sqrt", WITH_DELTA, True, "gaussian", "mechanism"),
        ("blt", WITH_DELTA, True, "gaussian", "mechanism"),
        ("kary", Budget(epsilon=0.5, delta=1e-6, calibration="fhu"), True, "gaussian",
         "calibration"),
        ("kary", Budget(epsilon=1.0, delta=1e-6, calibration="zcdp"), True,
         "discrete-gaussian", None),
        ("kary", Budget(epsilon=1.0, noise="laplace"), True, "laplace", None),  # asked for
    ],
)  # fmt: skip
def test_a_named_mechanism_gets_integer_noise_unless_a_reason_says_why_not(
    mechanism: str, budget: Budget, whole: bool | None, noise: str, reason: str | None
) -> None:
    choice = choose(64, budget=budget, mechanism=mechanism, whole=whole)
    assert choice.mechanism == mechanism and choice.budget.noise == noise
    assert choice.auto is None
    if reason is None:
        assert choice.note is None
    else:
        assert choice.note == NoiseNote(reason, NoiseKind(noise), mechanism,  # type: ignore[arg-type]
                                        budget.step_sensitivity)  # fmt: skip
        assert choice.note.text().endswith(f"using continuous {noise} noise")
    built = choice.build(rng=0)
    assert built.budget.noise == noise and built.horizon == 64


def test_notes_speak_the_front_ends_language() -> None:
    choice = choose(8, budget=Budget(epsilon=1.0, step_sensitivity=0.5), mechanism="binary")
    assert choice.note is not None
    assert choice.note.text() == (
        "step_sensitivity=0.5 is not a whole number: using continuous laplace noise"
    )
    spelled = choice.note.text({"step_sensitivity": "--sensitivity"})
    assert spelled == "--sensitivity 0.5 is not a whole number: using continuous laplace noise"


def test_a_gaussian_only_mechanism_without_delta_is_a_typed_error() -> None:
    with pytest.raises(MissingDeltaError, match="mechanism 'toeplitz' uses Gaussian noise") as err:
        choose(16, budget=ONE, mechanism="toeplitz")
    assert err.value.parameter == "delta"
    with pytest.raises(MissingDeltaError, match="delta must be given for noise='gaussian'"):
        Budget(epsilon=1.0, noise="gaussian")


@pytest.mark.slow  # builds every integer-noise row at T = 1000 (~1 s); the CLI test is quick
def test_auto_with_delta_says_it_took_the_best_integer_mechanism_and_what_the_best_costs() -> None:
    """Issue 22 item 4: at T = 1000 plan's first row needs floating-point noise."""
    T = 1000
    choice = choose(T, budget=WITH_DELTA)
    rows = compare(T, budget=WITH_DELTA, certificates=False)  # auto ranks without them
    assert choice.auto is not None and choice.auto.rule == "best-integer"
    assert choice.budget.noise is not None and choice.budget.noise.is_discrete
    assert choice.mechanism in DISCRETE_CAPABLE and rows[0].mechanism not in DISCRETE_CAPABLE
    # plan's first row needs Gaussian noise: auto proved it without building the
    # Gaussian rows and bounds its MSE instead of naming it (issue 33)
    assert choice.auto.best is None and choice.auto.gaussian is not None
    bounds = choice.auto.gaussian
    assert rows[0].noise == "gaussian" and bounds.floor <= rows[0].mse <= bounds.ceiling
    built = choice.build(rng=0)
    assert choice.auto.mse == built.mse()
    # true: the best overall is better, and the text gives both figures
    assert rows[0].mse < built.mse()
    text = choice.auto.text()
    assert "the best by exact MSE among the mechanisms that take integer noise" in text
    assert f"RMSE {math.sqrt(built.mse()):.4g}" in text
    assert "dpcount plan ranks a mechanism with gaussian noise first, with RMSE between" in text
    # and it is the best integer mechanism: no registry tree beats it with integer noise
    for r in rows:
        if r.mechanism in DISCRETE_CAPABLE and r.calibration in ("pure", "theorem3", "analytic"):
            options = {} if r.k is None else {"k": r.k, "subtract": r.subtract}
            integer = WITH_DELTA.replace(noise="discrete-" + r.noise)
            other = build_mechanism(r.mechanism, horizon=T, budget=integer, rng=0, **options)
            assert built.mse() <= other.mse() * (1 + 1e-12)


def test_auto_that_is_plans_first_row_says_so() -> None:
    choice = choose(40, budget=ONE)
    assert choice.auto is not None and choice.auto.rule == "ranked-first"
    assert choice.auto.text() == "ranked first by exact MSE by dpcount plan"
    assert choice.auto.candidate == compare(40, budget=ONE)[0]


def test_auto_on_fractional_data_is_plans_first_row_with_a_note() -> None:
    choice = choose(309, budget=ONE, whole=False)
    assert choice.auto is not None and choice.auto.candidate == compare(309, budget=ONE)[0]
    assert choice.note is not None and choice.note.reason == "data"


def test_auto_without_a_horizon_picks_the_doubling_counters_best_inner() -> None:
    choice = choose(None, budget=ONE)
    variances = {
        name: UnboundedCounter(inner=name, epsilon=1.0, noise="discrete-laplace").variance_at(
            UNBOUNDED_PROBE
        )
        for name in sorted(DISCRETE_CAPABLE)
    }
    assert choice.mechanism == min(variances, key=variances.__getitem__)
    assert choice.auto is not None and choice.auto.rule == "unbounded"
    assert choice.auto.mse == variances[choice.mechanism]
    counter = choice.build_unbounded(rng=0)
    assert counter.inner == choice.mechanism and counter.k == DEFAULT_K
    with pytest.raises(ValueError, match="this choice has no horizon"):
        choice.build(rng=0)


@pytest.mark.slow
def test_auto_without_a_horizon_takes_the_horizon_free_blt_with_gaussian_noise() -> None:
    gauss = Budget(epsilon=1.0, delta=1e-6, noise="gaussian")
    named = choose(None, budget=gauss)
    assert named.mechanism == HORIZON_FREE_BLT and named.note is None
    assert named.build_unbounded(rng=0).variance_at(UNBOUNDED_PROBE) == named.auto.mse  # type: ignore[union-attr]
    fractional = choose(None, budget=Budget(epsilon=1.0, delta=1e-6), whole=False)
    assert fractional.mechanism == HORIZON_FREE_BLT and fractional.budget.noise == "gaussian"
    assert fractional.note is not None and fractional.note.reason == "data"
    # whole numbers keep integer noise; pure ε-DP cannot take Gaussian noise
    safe = choose(None, budget=Budget(epsilon=1.0, delta=1e-6))
    assert safe.mechanism == "honaker" and safe.budget.noise == "discrete-gaussian"
    assert choose(None, budget=ONE, whole=False).mechanism != HORIZON_FREE_BLT


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"options": {"k": 4}}, ValueError, r"name a mechanism to pass \['k'\]"),
        ({"mechanism": "kary", "options": {"width": 4}}, TypeError, "unknown option 'width'"),
        ({"mechanism": "nope"}, ValueError, "mechanism must be one of"),
        ({"mechanism": "kary", "memory": 10**6}, ValueError, "inform mechanism='auto' only"),
    ],
)
def test_bad_requests(kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        choose(16, budget=ONE, **kwargs)  # type: ignore[arg-type]


def test_options_a_mechanism_does_not_have_are_reported_not_used() -> None:
    choice = choose(16, budget=ONE, mechanism="binary", options={"k": 4, "bands": 2})
    assert choice.options == {} and choice.ignored == ("k", "bands")
    tree = choose(16, budget=ONE, mechanism="kary", options={"k": 4, "subtract": False})
    assert tree.options == {"k": 4, "subtract": False} and tree.ignored == ()
    with pytest.raises(ValueError, match="bands needs a horizon"):
        choose(None, budget=WITH_DELTA, mechanism="toeplitz", options={"bands": 2})


def test_integer_noise_gives_integer_output_honaker_is_rounded() -> None:
    """Issue 22 item 3: Honaker's estimate under integer noise is a fraction; the
    choice rounds it (ties to even) and says so; other choices release as built."""
    honaker = choose(8, budget=ONE, mechanism="honaker")
    assert honaker.rounds and honaker.budget.noise == "discrete-laplace"
    release = honaker.build(rng=3).release(np.array([1, 0, 2, 1, 3, 0, 0, 1]))
    assert (release != np.round(release)).any()  # a fraction to round
    finished = honaker.finish(release)
    assert finished.dtype == np.int64
    np.testing.assert_array_equal(finished, np.rint(release))
    np.testing.assert_array_equal(honaker.finish(np.array([0.5, 1.5, -2.5, -1.0095])),
                                  [0, 2, -2, -1])  # fmt: skip
    assert honaker.finish(2.5) == 2 and isinstance(honaker.finish(2.5), int)
    note = honaker.rounding_note("raw_std")
    assert note is not None and "the raw_std column is the exact error of the unrounded" in note
    for kept in (
        choose(8, budget=Budget(epsilon=1.0, noise="laplace"), mechanism="honaker"),
        choose(8, budget=ONE, mechanism="honaker", whole=False),
        choose(8, budget=ONE, mechanism="kary"),
    ):
        assert not kept.rounds and kept.rounding_note() is None
        assert kept.finish(release) is release
    assert choose(None, budget=ONE).rounds  # the live default: Honaker blocks
