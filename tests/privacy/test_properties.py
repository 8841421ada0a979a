"""Bad input to dpcount.privacy: calibration functions, samplers, calibrate, rng.

Every bad value is refused with the contract of tests/properties_support.py; every
valid value nearby gives a finite, correct answer.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.privacy import (
    NOISE_KINDS,
    Budget,
    CalibrationRule,
    ConstantNoise,
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    GaussianNoise,
    LaplaceNoise,
    NoiseBuffer,
    NoiseKind,
    Participation,
    ZeroNoise,
    analytic_gaussian_delta,
    as_generator,
    calibrate,
    discrete_gaussian_sigma,
    discrete_laplace_scale,
    fhu_constant,
    fhu_delta,
    gaussian_sigma,
    gaussian_two_sided_quantile,
    is_secure,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
    paper_gaussian_sigma,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)
from dpcount.privacy import discrete as D
from dpcount.privacy.source import NoiseSource
from tests.properties_support import (
    ScalarCase,
    assert_rejects,
    bad_choice,
    bad_integer,
    bad_nonnegative_real,
    bad_positive_real,
    bad_probability,
    bad_rng,
    case_params,
)

#: public names of dpcount.privacy (and dpcount.privacy.discrete) this file covers
COVERED = {
    "dpcount.privacy": {
        "Budget",
        "Participation",
        "gaussian_two_sided_quantile",
        "paper_gaussian_sigma",
        "ConstantNoise",
        "DiscreteGaussianNoise",
        "DiscreteLaplaceNoise",
        "GaussianNoise",
        "LaplaceNoise",
        "NoiseBuffer",
        "ZeroNoise",
        "analytic_gaussian_delta",
        "as_generator",
        "calibrate",
        "discrete_gaussian_sigma",
        "discrete_laplace_scale",
        "fhu_constant",
        "fhu_delta",
        "gaussian_sigma",
        "is_secure",
        "laplace_epsilon",
        "laplace_scale",
        "laplace_scale_approximate",
        "zcdp_delta",
        "zcdp_epsilon",
        "zcdp_rho",
    },
    "dpcount.privacy.discrete": {
        "DiscreteGaussianNoise",
        "DiscreteLaplaceNoise",
        "bernoulli_exp",
        "discrete_gaussian_pmf",
        "discrete_gaussian_variance",
        "discrete_laplace_pmf",
        "discrete_laplace_variance",
        "rational_at_least",
        "sample_discrete_gaussian",
        "sample_discrete_laplace",
    },
}

POS = bad_positive_real
PROB = bad_probability

CASES = [
    ScalarCase(
        "Budget",
        Budget,
        {"epsilon": 1.0, "delta": 1e-6},
        {
            "epsilon": POS(),
            "delta": PROB(allow_none=True),
            "noise": bad_choice(NoiseKind.choices()).filter(lambda b: b[0] is not None),
            "calibration": bad_choice(CalibrationRule.choices()).filter(lambda b: b[0] is not None),
            "step_sensitivity": POS(),
            "step_l2_sensitivity": POS(),
        },
    ),
    ScalarCase(
        "Participation",
        Participation,
        {"max_participations": 2, "min_separation": 3},
        {"max_participations": bad_integer(1), "min_separation": bad_integer(1)},
    ),
    ScalarCase(
        "gaussian_two_sided_quantile",
        gaussian_two_sided_quantile,
        {"log_beta": -3.0},
        {
            "log_beta": st.one_of(
                st.floats(min_value=0.0).map(lambda v: (v, ValueError)),
                st.sampled_from([math.nan, math.inf]).map(lambda v: (v, ValueError)),
                st.sampled_from(["-1", None, [-1.0]]).map(lambda v: (v, TypeError)),
            )
        },
    ),
    ScalarCase(
        "paper_gaussian_sigma",
        paper_gaussian_sigma,
        {"l2_sensitivity": 1.0, "epsilon": 0.5, "delta": 1e-6},
        {"l2_sensitivity": POS(), "epsilon": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "laplace_scale",
        laplace_scale,
        {"l1_sensitivity": 1.0, "epsilon": 1.0},
        {"l1_sensitivity": POS(), "epsilon": POS()},
    ),
    ScalarCase(
        "gaussian_sigma",
        gaussian_sigma,
        {"l2_sensitivity": 1.0, "epsilon": 0.5, "delta": 1e-6},
        {
            "l2_sensitivity": POS(),
            "epsilon": POS(),
            "delta": PROB(),
            "method": bad_choice(("analytic", "classic", "fhu", "paper")),
        },
    ),
    ScalarCase(
        "analytic_gaussian_delta",
        analytic_gaussian_delta,
        {"sigma": 1.0, "l2_sensitivity": 1.0, "epsilon": 1.0},
        {"sigma": POS(), "l2_sensitivity": POS(), "epsilon": POS()},
    ),
    ScalarCase(
        "laplace_epsilon",
        laplace_epsilon,
        {"l1_sensitivity": 2.0, "l2_sensitivity": 1.0, "scale": 1.0, "delta": 1e-6},
        {"l1_sensitivity": POS(), "l2_sensitivity": POS(), "scale": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "laplace_scale_approximate",
        laplace_scale_approximate,
        {"l1_sensitivity": 2.0, "l2_sensitivity": 1.0, "epsilon": 1.0, "delta": 1e-6},
        {"l1_sensitivity": POS(), "l2_sensitivity": POS(), "epsilon": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "fhu_constant",
        fhu_constant,
        {"epsilon": 0.5, "delta": 1e-6},
        {"epsilon": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "fhu_delta",
        fhu_delta,
        {"epsilon": 0.5, "constant": 12.0},
        {"epsilon": POS(), "constant": POS()},
    ),
    ScalarCase(
        "discrete_laplace_scale",
        discrete_laplace_scale,
        {"l1_sensitivity": 1.0, "epsilon": 1.0},
        {"l1_sensitivity": POS(), "epsilon": POS()},
    ),
    ScalarCase(
        "discrete_gaussian_sigma",
        discrete_gaussian_sigma,
        {"l2_sensitivity": 1.0, "epsilon": 1.0, "delta": 1e-6},
        {"l2_sensitivity": POS(), "epsilon": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "zcdp_delta",
        zcdp_delta,
        {"rho": 0.1, "epsilon": 1.0},
        {"rho": POS(), "epsilon": bad_nonnegative_real()},
    ),
    ScalarCase(
        "zcdp_epsilon",
        zcdp_epsilon,
        {"rho": 0.1, "delta": 1e-6},
        {"rho": POS(), "delta": PROB()},
    ),
    ScalarCase(
        "zcdp_rho", zcdp_rho, {"epsilon": 1.0, "delta": 1e-6}, {"epsilon": POS(), "delta": PROB()}
    ),
    ScalarCase("LaplaceNoise", LaplaceNoise, {"scale": 1.0}, {"scale": POS()}),
    ScalarCase("GaussianNoise", GaussianNoise, {"sigma": 1.0}, {"sigma": POS()}),
    ScalarCase("DiscreteLaplaceNoise", DiscreteLaplaceNoise, {"scale": 1.0}, {"scale": POS()}),
    ScalarCase("DiscreteGaussianNoise", DiscreteGaussianNoise, {"sigma": 1.0}, {"sigma": POS()}),
    ScalarCase(
        "ConstantNoise",
        ConstantNoise,
        {"value": 1.0},
        {
            "value": st.one_of(
                st.sampled_from([math.nan, math.inf, -math.inf]).map(lambda v: (v, ValueError)),
                st.sampled_from(["1", None, True, 1j, [1.0]]).map(lambda v: (v, TypeError)),
            )
        },
    ),
    ScalarCase(
        "discrete_laplace_variance",
        D.discrete_laplace_variance,
        {"scale": 1.0},
        {"scale": POS()},
    ),
    ScalarCase(
        "discrete_gaussian_variance",
        D.discrete_gaussian_variance,
        {"sigma2": 1.0},
        {"sigma2": POS()},
    ),
    ScalarCase(
        "discrete_laplace_pmf", D.discrete_laplace_pmf, {"y": 0, "scale": 1.0}, {"scale": POS()}
    ),
    ScalarCase(
        "discrete_gaussian_pmf",
        D.discrete_gaussian_pmf,
        {"y": 0, "sigma2": 1.0},
        {"sigma2": POS()},
    ),
    ScalarCase(
        "rational_at_least",
        D.rational_at_least,
        {"value": 1.5, "max_numerator": 100},
        {"value": POS(), "max_numerator": bad_integer(1)},
    ),
    ScalarCase(
        "sample_discrete_laplace",
        lambda **kw: D.sample_discrete_laplace(np.random.default_rng(0), **kw),
        {"scale": 2, "size": 3},
        {"scale": POS(), "size": bad_integer(0)},
    ),
    ScalarCase(
        "sample_discrete_gaussian",
        lambda **kw: D.sample_discrete_gaussian(np.random.default_rng(0), **kw),
        {"sigma2": 2, "size": 3},
        {"sigma2": POS(), "size": bad_integer(0)},
    ),
    ScalarCase("as_generator", as_generator, {"rng": 0}, {"rng": bad_rng()}, names={"rng": "rng"}),
    ScalarCase(
        "NoiseBuffer",
        lambda **kw: NoiseBuffer(
            NoiseSource.generator(LaplaceNoise(1.0), np.random.default_rng(0)), **kw
        ),
        {"dim": None, "block": 4},
        # None is the documented default of both (scalar samples; the default block size)
        {
            "dim": bad_integer(1).filter(lambda b: b[0] is not None),
            "block": bad_integer(1).filter(lambda b: b[0] is not None),
        },
    ),
]

_NEIGHBOURS = "test relation"


def _calibrate(noise: str) -> ScalarCase:
    pure = noise in ("laplace", "discrete-laplace")
    return ScalarCase(
        f"calibrate[{noise}]",
        lambda **kw: calibrate(noise, neighbouring=_NEIGHBOURS, **kw),
        {"epsilon": 1.0, "delta": 1e-6, "l1_sensitivity": 2.0, "l2_sensitivity": 1.0},
        {
            "epsilon": POS(),
            "delta": PROB(allow_none=pure, none_exc=ValueError),
            "l1_sensitivity": POS(),
            "l2_sensitivity": POS(),
        },
    )


CASES += [_calibrate(noise) for noise in NOISE_KINDS]
CASES.append(
    ScalarCase(
        "calibrate[noise]",
        calibrate,
        {
            "noise": "laplace",
            "epsilon": 1.0,
            "delta": None,
            "l1_sensitivity": 1.0,
            "l2_sensitivity": 1.0,
            "neighbouring": _NEIGHBOURS,
        },
        {"noise": bad_choice(NOISE_KINDS)},
    )
)


@pytest.mark.parametrize(("case", "param"), case_params(CASES))
@settings(max_examples=15)
@given(data=st.data())
def test_bad_scalar_is_refused(case: ScalarCase, param: str, data: st.DataObject) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


# -- valid values nearby ----------------------------------------------------------------

REASONABLE = st.floats(min_value=1e-3, max_value=1e3)
DELTAS = st.floats(min_value=1e-12, max_value=0.5)


@settings(max_examples=30)
@given(d1=REASONABLE, eps=REASONABLE)
def test_valid_laplace_scale_is_the_exact_ratio(d1: float, eps: float) -> None:
    assert laplace_scale(d1, eps) == d1 / eps


@settings(max_examples=30)
@given(d2=REASONABLE, eps=REASONABLE, delta=DELTAS)
def test_valid_gaussian_sigma_is_finite_and_achieves_delta(
    d2: float, eps: float, delta: float
) -> None:
    sigma = gaussian_sigma(d2, eps, delta)
    assert math.isfinite(sigma) and sigma > 0
    # The analytic calibration is exact: δ(σ) ≤ δ, and 1% less noise breaks it.
    assert analytic_gaussian_delta(sigma, d2, eps) <= delta
    assert analytic_gaussian_delta(0.99 * sigma, d2, eps) > delta


@settings(max_examples=20)
@given(noise=st.sampled_from(NOISE_KINDS), eps=REASONABLE, delta=DELTAS)
def test_valid_calibrate_gives_a_finite_sampler(noise: str, eps: float, delta: float) -> None:
    cal = calibrate(
        noise,
        epsilon=eps,
        delta=delta,
        l1_sensitivity=2.0,
        l2_sensitivity=1.0,
        neighbouring=_NEIGHBOURS,
    )
    assert math.isfinite(cal.scale) and cal.scale > 0
    assert cal.privacy.epsilon <= eps * (1 + 1e-12) and cal.privacy.delta <= delta
    x = cal.sampler.sample(np.random.default_rng(0), 5)
    assert x.shape == (5,) and np.isfinite(x).all()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: laplace_scale(1.0, 1e-320),
            r"l1_sensitivity=1.0 and epsilon=1e-320 give a Laplace",
        ),
        (lambda: laplace_scale(1e-320, 1e10), r"epsilon=10000000000.0 give a Laplace scale of 0.0"),
        (lambda: gaussian_sigma(1.0, 1e-320, 1e-6), r"epsilon=1e-320 and delta=1e-06 give a Gaus"),
        (lambda: gaussian_sigma(1e308, 1.0, 1e-6), r"l2_sensitivity=1e\+308"),
        (lambda: gaussian_sigma(1.0, 1.0, 1e-320), r"delta=1e-320 give a Gaussian sigma of inf"),
        (lambda: fhu_constant(1e-320, 1e-6), r"epsilon=1e-320 and delta=1e-06 give a C_"),
        (lambda: laplace_scale_approximate(2.0, 1.0, 1e-320, 1e-6), r"epsilon=1e-320"),
        (lambda: discrete_laplace_scale(1.0, 1e-300), r"l1_sensitivity/epsilon = 1.0/1e-300"),
        (lambda: discrete_laplace_scale(1.0, 1e300), r"must be >= 2\^-22"),
        (lambda: discrete_gaussian_sigma(1e300, 1.0, 1e-6), r"l2_sensitivity=1e\+300"),
        (
            lambda: calibrate(
                "discrete-laplace",
                epsilon=1.0,
                delta=1e-6,
                l1_sensitivity=1e300,
                l2_sensitivity=1e300,
                neighbouring=_NEIGHBOURS,
            ),
            r"l1_sensitivity=1e\+300.*discrete Laplace scale must be <= 2\^40",
        ),
    ],
)
def test_a_noise_scale_outside_the_float_range_is_refused(call: Any, message: str) -> None:
    """Before: inf/0 scales were returned, or ZeroDivisionError/OverflowError escaped."""
    assert_rejects(call, ValueError, message)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: DiscreteLaplaceNoise(1e15), r"scale must be <= 2\^40"),
        (lambda: DiscreteLaplaceNoise(1e-12), r"scale must be >= 2\^-22"),
        (lambda: DiscreteLaplaceNoise(Fraction(-1)), r"scale must be > 0, got Fraction\(-1, 1\)"),
        (lambda: DiscreteGaussianNoise(1e13), r"sigma must be <= 1\.09951e\+12"),
        (lambda: DiscreteGaussianNoise(Fraction(2**41)), r"sigma must be <= 2\^40 - 1"),
        (lambda: D.sample_discrete_laplace(np.random.default_rng(0), math.nan, 3), r"scale"),
        (lambda: D.sample_discrete_laplace(np.random.default_rng(0), "a", 3), r"scale"),
        (lambda: D.sample_discrete_gaussian(np.random.default_rng(0), 2**90, 3), r"sigma2"),
    ],
)
def test_discrete_samplers_refuse_scales_their_integer_arithmetic_cannot_hold(
    call: Any, message: str
) -> None:
    """Before: accepted, then OverflowError/MemoryError (or a wrong message) when sampling."""
    assert_rejects(call, (ValueError, TypeError), message)


@pytest.mark.parametrize("sigma", [1e9, 1e12])
def test_discrete_gaussian_with_a_huge_sigma_samples_without_huge_memory(sigma: float) -> None:
    """Before: the batch-size estimate allocated ~80σ floats (MemoryError at σ = 1e9)."""
    x = DiscreteGaussianNoise(sigma).sample(np.random.default_rng(0), 4)
    assert x.dtype == np.int64 and x.shape == (4,)
    assert np.all(np.abs(x) < 20 * sigma)


# -- samplers: sample(rng, size) --------------------------------------------------------

SAMPLERS = [
    LaplaceNoise(1.0),
    GaussianNoise(1.0),
    DiscreteLaplaceNoise(2.0),
    DiscreteGaussianNoise(2.0),
    ZeroNoise(),
    ConstantNoise(1.5),
]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
@settings(max_examples=10)
@given(
    bad=st.one_of(
        st.sampled_from([-1, (2, -1)]).map(lambda v: (v, ValueError)),
        st.sampled_from([1.5, "3", None, math.nan, True, [2]]).map(lambda v: (v, TypeError)),
    )
)
def test_sample_refuses_a_bad_size(sampler: Any, bad: tuple[Any, type[Exception]]) -> None:
    size, exc = bad
    assert_rejects(lambda: sampler.sample(np.random.default_rng(0), size), exc, r"size")


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("rng", [0, None, "x", np.random.RandomState(0)])
def test_sample_refuses_an_rng_that_is_not_a_generator(sampler: Any, rng: Any) -> None:
    """A seed must go through as_generator first (a mechanism never re-seeds)."""
    assert_rejects(lambda: sampler.sample(rng, 3), TypeError, r"rng must be a numpy.random")


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
@settings(max_examples=5)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=2).map(tuple))
def test_valid_sizes_give_that_shape(sampler: Any, shape: tuple[int, ...]) -> None:
    x = sampler.sample(np.random.default_rng(0), shape)
    assert x.shape == shape and np.isfinite(x).all()


@pytest.mark.parametrize(
    ("call", "exc", "name"),
    [
        (
            lambda: NoiseSource.generator("laplace", np.random.default_rng(0)),  # type: ignore[arg-type]
            TypeError,
            "sampler",
        ),
        (lambda: NoiseSource.generator(LaplaceNoise(1.0), 0), TypeError, "rng"),  # type: ignore[arg-type]
        (lambda: NoiseBuffer(LaplaceNoise(1.0)), TypeError, "source"),  # type: ignore[arg-type]
        (
            lambda: NoiseBuffer(
                NoiseSource.generator(LaplaceNoise(1.0), np.random.default_rng(0))
            ).take(-1),
            ValueError,
            "n",
        ),
        (
            lambda: NoiseBuffer(
                NoiseSource.generator(LaplaceNoise(1.0), np.random.default_rng(0))
            ).take(1.5),
            TypeError,
            "n",
        ),  # type: ignore[arg-type]
        (lambda: is_secure(None), TypeError, "rng"),  # type: ignore[arg-type]
        (lambda: is_secure(0), TypeError, "rng"),  # type: ignore[arg-type]
    ],
)
def test_noise_buffer_and_is_secure_refuse_bad_objects(call: Any, exc: Any, name: str) -> None:
    """Before: NoiseBuffer accepted anything, failing later (AttributeError, ZeroDivisionError)."""
    assert_rejects(call, exc, name)


# -- discrete helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "exc", "name"),
    [
        (lambda: D.bernoulli_exp(np.random.default_rng(0), 1, 1.5, 3), TypeError, "gamma_den"),
        (lambda: D.bernoulli_exp(np.random.default_rng(0), 1.5, 3, 3), TypeError, "gamma_num"),
        (lambda: D.bernoulli_exp(np.random.default_rng(0), [[1, "a"]], 3), TypeError, "gamma_num"),
        (lambda: D.bernoulli_exp(np.random.default_rng(0), -1, 3, 3), ValueError, "gamma_num"),
        (lambda: D.bernoulli_exp(0, 1, 3, 3), TypeError, "rng"),
        (lambda: D.bernoulli_exp(np.random.default_rng(0), 1, 3, -2), ValueError, "size"),
        (lambda: D.discrete_laplace_pmf(np.array(["a"]), 1.0), TypeError, "y"),
        (lambda: D.discrete_gaussian_pmf(np.array([1j]), 1.0), TypeError, "y"),
        (lambda: D.discrete_gaussian_pmf([[1], [1, 2]], 1.0), ValueError, "y"),
        (lambda: D.rational_at_least(math.nan, 10), ValueError, "value"),
        (lambda: D.rational_at_least("a", 10), TypeError, "value"),
    ],
)
def test_discrete_helpers_refuse_bad_input(call: Any, exc: Any, name: str) -> None:
    """Before: a float gamma was truncated silently; strings/NaN failed inside fractions/numpy."""
    assert_rejects(call, exc, name)


@settings(max_examples=20)
@given(scale=st.floats(min_value=2.0**-20, max_value=2.0**39))
def test_valid_discrete_laplace_scale_is_rounded_up_and_samples(scale: float) -> None:
    s = DiscreteLaplaceNoise(scale)
    assert s.scale >= Fraction(scale)
    x = s.sample(np.random.default_rng(0), 3)
    assert x.dtype == np.int64 and x.shape == (3,)


def test_calibrate_delta_none_for_gaussian_names_delta() -> None:
    for noise in ("gaussian", "discrete-gaussian"):
        assert_rejects(
            lambda noise=noise: calibrate(
                noise,
                epsilon=1.0,
                delta=None,
                l1_sensitivity=1.0,
                l2_sensitivity=1.0,
                neighbouring=_NEIGHBOURS,
            ),
            ValueError,
            r"delta must be given",
        )


@pytest.mark.parametrize("noise", NOISE_KINDS)
@pytest.mark.parametrize("calibration", ["", "bogus", "ANALYTIC"])
def test_calibrate_refuses_an_unknown_calibration(noise: str, calibration: str) -> None:
    assert_rejects(
        lambda: calibrate(
            noise,
            epsilon=1.0,
            delta=1e-6,
            l1_sensitivity=1.0,
            l2_sensitivity=1.0,
            calibration=calibration,
            neighbouring=_NEIGHBOURS,
        ),
        ValueError,
        r"calibration",
        value=calibration,
        echo=True,
    )


@pytest.mark.parametrize(
    ("profile", "exc"),
    [
        ([math.nan], ValueError),
        ([], ValueError),
        ([[1.0]], ValueError),
        ("abc", TypeError),
        ([0.0], ValueError),
        ([1.0, "a"], TypeError),
        ([3.0], ValueError),
    ],
)
def test_calibrate_pld_refuses_a_bad_profile(profile: Any, exc: Any) -> None:
    pytest.importorskip("dp_accounting")
    assert_rejects(
        lambda: calibrate(
            "laplace",
            epsilon=1.0,
            delta=1e-6,
            l1_sensitivity=2.0,
            l2_sensitivity=1.5,
            calibration="pld",
            profile=profile,
            neighbouring=_NEIGHBOURS,
        ),
        exc,
        r"profile",
    )
