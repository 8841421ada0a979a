"""Bad input to dpcount.counting: constructors, release, streams, with_sampler, registry.

Run over every mechanism of the contract suite (tests/mechanisms.py) plus the
constructors' own parameters; valid input nearby must give the exact answer under
``with_sampler(ZeroNoise())``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.counting import (
    BLT,
    BinaryTree,
    CountingMechanism,
    DigitSystem,
    FactorizationMechanism,
    Honaker,
    HorizonFreeBLT,
    HorizonFreeGrowingBLT,
    HorizonFreeSqrt,
    InputPerturbation,
    KaryTree,
    NormalizedBLT,
    NormalizedSqrtFactorization,
    RowScaledBandedToeplitz,
    RowScaledBLT,
    RowScaledSqrtFactorization,
    Scaled,
    SmoothBinary,
    SqrtFactorization,
    ToeplitzFactorization,
)
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.registry import (
    CLASSES,
    GAUSSIAN_ONLY,
    MECHANISMS,
    build_mechanism,
    capabilities,
    class_capabilities,
    class_noise,
    default_noise,
    max_horizon,
    names,
    objectives,
)
from dpcount.counting.unbounded import UnboundedCounter
from dpcount.privacy import Budget, ZeroNoise
from tests.mechanisms import FACTORIES
from tests.properties_support import (
    ScalarCase,
    assert_rejects,
    bad_choice,
    bad_dtype_array,
    bad_integer,
    bad_positive_real,
    bad_probability,
    bad_rng,
    case_params,
    non_finite_array,
    ragged,
)

COVERED = {
    "dpcount.counting": {
        "BLT",
        "BinaryTree",
        "DigitSystem",
        "FactorizationMechanism",
        "Honaker",
        "InputPerturbation",
        "KaryTree",
        "SmoothBinary",
        "SqrtFactorization",
        "ToeplitzFactorization",
        "NormalizedSqrtFactorization",
        "NormalizedBLT",
        "RowScaledBLT",
        "RowScaledSqrtFactorization",
        "RowScaledBandedToeplitz",
        "HorizonFreeSqrt",
        "HorizonFreeBLT",
        "Scaled",  # Scaled.of below; its presets are the scaled mechanisms above
        "HorizonFreeGrowingBLT",
        # through every mechanism's release/stream/with_sampler below
        "CountingMechanism",
        "CountingStream",
        "load_stream",
        "save_stream",
        "UnboundedCounter",
        "UnboundedStream",  # through UnboundedCounter.stream() below
    },
    "dpcount.counting.registry": {
        "build_mechanism",
        "capabilities",
        "class_capabilities",
        "names",
        "check_memory",
        "class_noise",
        "default_noise",
        "max_horizon",
        "memory_estimate",
        "objectives",
    },
}

T = 12
#: constructor -> keyword arguments that build it (each parameter is then spoiled in turn)
CONSTRUCTORS: dict[str, tuple[Callable[..., CountingMechanism], dict[str, Any]]] = {
    "KaryTree": (KaryTree, {"horizon": T, "epsilon": 1.0, "k": 3, "rng": 0}),
    "BinaryTree": (BinaryTree, {"horizon": T, "epsilon": 1.0, "rng": 0}),
    "SqrtFactorization": (
        SqrtFactorization,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "Honaker": (Honaker, {"horizon": T, "epsilon": 1.0, "rng": 0}),
    "SmoothBinary": (SmoothBinary, {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0}),
    "InputPerturbation": (InputPerturbation, {"horizon": T, "epsilon": 1.0, "rng": 0}),
    "BLT": (
        BLT,
        {
            "horizon": T,
            "buffer_decay": [0.5, 0.9],
            "output_scale": [0.3, 0.2],
            "epsilon": 1.0,
            "delta": 1e-6,
            "rng": 0,
        },
    ),
    "NormalizedBLT": (
        NormalizedBLT,
        {
            "horizon": T,
            "buffer_decay": [0.5, 0.9],
            "output_scale": [0.3, 0.2],
            "epsilon": 1.0,
            "delta": 1e-6,
            "rng": 0,
        },
    ),
    "RowScaledBLT": (
        RowScaledBLT,
        {
            "horizon": T,
            "buffer_decay": [0.5, 0.9],
            "output_scale": [0.3, 0.2],
            "log_weights": [0.1],
            "epsilon": 1.0,
            "delta": 1e-6,
            "rng": 0,
        },
    ),
    "RowScaledSqrtFactorization": (
        RowScaledSqrtFactorization,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "HorizonFreeSqrt": (
        HorizonFreeSqrt,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "HorizonFreeBLT": (
        HorizonFreeBLT,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "HorizonFreeGrowingBLT": (
        HorizonFreeGrowingBLT,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "RowScaledBandedToeplitz": (
        RowScaledBandedToeplitz,
        {"horizon": T, "coefficients": [1.0, 0.5, 0.25], "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "NormalizedSqrtFactorization": (
        NormalizedSqrtFactorization,
        {"horizon": T, "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
    "ToeplitzFactorization": (
        ToeplitzFactorization,
        {"horizon": T, "coefficients": [1.0, 0.5, 0.25], "epsilon": 1.0, "delta": 1e-6, "rng": 0},
    ),
}

NOISES = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian")


def _case(name: str, cls: Callable[..., CountingMechanism], valid: dict[str, Any]) -> ScalarCase:
    needs_delta = "delta" in valid
    bad = {
        "horizon": bad_integer(1),
        "epsilon": bad_positive_real(),
        "delta": bad_probability(allow_none=not needs_delta, none_exc=ValueError),
        "step_sensitivity": bad_positive_real(),
        "step_l2_sensitivity": bad_positive_real(allow_none=True),
        "noise": bad_choice(NOISES),
        "rng": bad_rng(),
    }
    if name == "KaryTree":
        bad["k"] = bad_integer(2)
        bad["subtract"] = st.sampled_from([1, 0, "True", None, 1.0]).map(lambda v: (v, TypeError))
    return ScalarCase(name, cls, valid, bad, names={"rng": "rng", "delta": "delta"})


CASES = [_case(name, cls, valid) for name, (cls, valid) in CONSTRUCTORS.items()]


@pytest.mark.parametrize(("case", "param"), case_params(CASES))
@settings(max_examples=12)
@given(data=st.data())
def test_bad_constructor_scalar_is_refused(
    case: ScalarCase, param: str, data: st.DataObject
) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_a_horizon_beyond_2_to_53_is_refused_at_construction(name: str) -> None:
    """Before: accepted (then MemoryError, or a scipy TypeError deep in the sqrt norms)."""
    cls, valid = CONSTRUCTORS[name]
    assert_rejects(
        lambda: cls(**{**valid, "horizon": 10**30}),
        ValueError,
        r"horizon",
        value=10**30,
        echo=True,
    )


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@pytest.mark.parametrize("calibration", ["", "bogus", 1])
def test_an_unknown_calibration_is_refused(name: str, calibration: Any) -> None:
    cls, valid = CONSTRUCTORS[name]
    assert_rejects(
        lambda: cls(**{**valid, "calibration": calibration}), (ValueError, TypeError), "calibration"
    )


# -- release(x) ---------------------------------------------------------------------------

MECHS = sorted(FACTORIES)
_CACHE: dict[str, CountingMechanism] = {}


def mech(name: str) -> CountingMechanism:
    if name not in _CACHE:
        _CACHE[name] = FACTORIES[name](T, 0)
    return _CACHE[name]


def _bad_release_inputs() -> st.SearchStrategy[tuple[Any, type[Exception]]]:
    return st.one_of(
        bad_dtype_array(3),
        bad_dtype_array(3, extra_shape=(2,)),
        st.sampled_from(
            [
                np.zeros(T + 1),  # more steps than the horizon
                np.zeros((T + 5, 2)),
                np.zeros(0),
                np.zeros((0, 2)),
                np.zeros((3, 0)),
                np.zeros((2, 2, 2)),
                np.float64(1.0),
                3,
                ragged(3),
                np.array([2**53 + 1, 1], dtype=np.int64),  # not exact in float64
                np.array([2**64 - 1], dtype=np.uint64),
            ]
        ).map(lambda v: (v, ValueError)),
        st.sampled_from(["abc", None, [1, None, 2], [["1", "2"]]]).map(lambda v: (v, TypeError)),
    )


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=12)
@given(bad=_bad_release_inputs())
def test_release_refuses_bad_data(name: str, bad: tuple[Any, type[Exception]]) -> None:
    x, exc = bad
    assert_rejects(lambda: mech(name).release(x), exc, r"\bx\b")


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=8)
@given(data=st.data())
def test_release_refuses_a_non_finite_step_naming_it(name: str, data: st.DataObject) -> None:
    d = data.draw(st.sampled_from([(), (2,)]), label="vector")
    x, index, bad = data.draw(non_finite_array(T, extra_shape=d), label="x")
    err = assert_rejects(lambda: mech(name).release(x), ValueError, r"x must be finite")
    assert f"step {index[0] + 1} holds {bad!r}" in str(err)


def _exact(x: Any) -> np.ndarray:
    return np.cumsum(np.asarray(x, dtype=np.float64), axis=0)


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=10)
@given(data=st.data())
def test_valid_release_is_exact_under_zero_noise(name: str, data: st.DataObject) -> None:
    """Valid data of any real dtype/layout: right shape, finite, equal to the prefix sums."""
    m = mech(name)
    discrete = bool(getattr(m.sampler, "integer", False))
    n = data.draw(st.integers(1, T), label="n")
    d = data.draw(st.sampled_from([None, 1, 3]), label="dim")
    shape = (n,) if d is None else (n, d)
    dtype = data.draw(
        st.sampled_from([np.int64, np.int8, np.uint8, np.float32, ">f8", np.bool_, np.float64])
    )
    values = data.draw(
        st.lists(st.integers(-100, 100), min_size=math.prod(shape), max_size=math.prod(shape))
    )
    x = np.array(values).reshape(shape)
    if dtype in (np.uint8, np.bool_):
        x = np.abs(x) % (2 if dtype is np.bool_ else 256)
    x = x.astype(dtype)
    layout = data.draw(st.sampled_from(["plain", "read-only", "strided"]))
    if layout == "read-only":
        x.setflags(write=False)
    elif layout == "strided":
        x = np.repeat(x, 2, axis=0)[::2]
    if not discrete and dtype not in (np.bool_, np.uint8, np.int8, np.int64):
        x = x * 0.5 if x.flags.writeable else x.astype(np.float64) * 0.5
    before = np.array(x, copy=True)
    out = m.with_sampler(ZeroNoise()).release(x)
    assert out.shape == shape and np.isfinite(out).all()
    np.testing.assert_array_equal(out, _exact(before))  # uint8 sums do not wrap
    np.testing.assert_array_equal(x, before)  # the input is never modified


@pytest.mark.parametrize("name", [n for n in MECHS if "discrete" in n])
def test_discrete_noise_refuses_fractional_steps(name: str) -> None:
    assert_rejects(
        lambda: mech(name).release([1.0, 0.5]), ValueError, r"x must hold whole numbers.*step 2"
    )
    assert_rejects(lambda: mech(name).stream().update(0.5), ValueError, r"x must be a whole")


@pytest.mark.parametrize("name", [n for n in MECHS if "discrete" in n])
def test_discrete_noise_refuses_an_int64_overflow_of_the_running_sum(name: str) -> None:
    """Before: the int64 prefix sums wrapped silently past 2^63 (256+ steps of 2^53)."""
    m = FACTORIES[name](600, 0)
    x = np.full(600, 2**53, dtype=np.int64)
    assert_rejects(lambda: m.release(x), ValueError, r"x: the integer running sum.*step 257")
    s = m.stream()
    s.update_many(x[:200])
    assert_rejects(lambda: s.update_many(x[:100]), ValueError, r"xs: .*step 257")
    s2 = m.stream()
    for _ in range(256):
        s2.update(np.array([2**53, 1]))
    assert_rejects(lambda: s2.update(np.array([2**53, 1])), ValueError, r"x: .*step 257")


# -- streams ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=10)
@given(
    bad=st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, np.float64("nan"), 2**60]).map(
            lambda v: (v, ValueError)
        ),
        st.sampled_from(["a", None, 1j, b"1", object()]).map(lambda v: (v, TypeError)),
        st.just((ragged(2), ValueError)),
    )
)
def test_stream_update_refuses_a_bad_first_step(
    name: str, bad: tuple[Any, type[Exception]]
) -> None:
    x, exc = bad
    assert_rejects(lambda: mech(name).stream().update(x), exc, r"\bx\b")


CHANGED_SHAPES = [(1.0, bad) for bad in ([1.0], [1.0, 2.0], np.ones(1), "a")] + [
    ([1.0, 2.0], bad)
    for bad in ([1.0], [1.0, 2.0, 3.0], 1.0, np.ones((1, 2)), [1.0, "a"], "a", ragged(2))
]


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=8)
@given(pair=st.sampled_from(CHANGED_SHAPES))
def test_stream_refuses_steps_of_a_changing_shape(name: str, pair: tuple[Any, Any]) -> None:
    first, bad = pair
    s = mech(name).stream()
    # update_many sets the step shape without pre-drawing a block of ~2^20 noise values
    s.update_many(np.array([first]))
    assert_rejects(lambda: s.update(bad), (ValueError, TypeError), r"\bx\b")
    assert s.step == 1  # a refused step is not consumed


@pytest.mark.parametrize("name", MECHS)
def test_stream_refuses_steps_past_the_horizon(name: str) -> None:
    s = mech(name).stream()
    s.update_many(np.ones(T - 2))
    assert_rejects(lambda: s.update_many(np.ones(3)), ValueError, r"xs has 3 steps but only 2")
    s.update_many(np.ones(2))
    assert_rejects(lambda: s.update(1.0), ValueError, r"horizon \(12 steps released\)")
    assert_rejects(lambda: s.update_many([1.0]), ValueError, r"xs has 1 steps but only 0 remain")


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=8)
@given(
    bad=st.one_of(
        bad_dtype_array(2),
        st.sampled_from([ragged(2), np.zeros(0), np.zeros((2, 2, 2))]).map(
            lambda v: (v, ValueError)
        ),
    )
)
def test_stream_update_many_refuses_bad_blocks(name: str, bad: tuple[Any, type[Exception]]) -> None:
    xs, exc = bad
    assert_rejects(lambda: mech(name).stream().update_many(xs), exc, r"\bxs\b")


@pytest.mark.parametrize("name", MECHS)
@settings(max_examples=8)
@given(steps=st.lists(st.integers(-5, 5), min_size=1, max_size=T))
def test_valid_stream_is_exact_under_zero_noise(name: str, steps: list[int]) -> None:
    s = mech(name).with_sampler(ZeroNoise()).stream()
    half = len(steps) // 2
    out = [float(s.update(v)) for v in steps[:half]]
    if steps[half:]:
        out += s.update_many(np.array(steps[half:])).tolist()
    np.testing.assert_array_equal(out, np.cumsum(steps))


# -- with_sampler, registry, factorization, digits ---------------------------------------


@pytest.mark.parametrize("name", MECHS)
@pytest.mark.parametrize("sampler", [None, "zero", 1.0, ZeroNoise])
def test_with_sampler_refuses_a_non_sampler(name: str, sampler: Any) -> None:
    """Before: accepted; the copy then failed with AttributeError at release."""
    assert_rejects(lambda: mech(name).with_sampler(sampler), TypeError, r"sampler must be")


@settings(max_examples=15)
@given(bad=bad_choice(MECHANISMS))
def test_registry_refuses_an_unknown_mechanism(bad: tuple[Any, type[Exception]]) -> None:
    name, exc = bad
    assert_rejects(
        lambda: build_mechanism(name, budget=Budget(epsilon=1.0), horizon=T),
        exc,
        r"mechanism",
        value=name,
    )
    assert_rejects(lambda: default_noise(name, None), exc, r"mechanism", value=name)
    assert_rejects(lambda: class_noise(name, 1e-6), exc, r"mechanism", value=name)
    assert_rejects(lambda: max_horizon(name), exc, r"mechanism", value=name)
    assert_rejects(lambda: objectives(name), exc, r"mechanism", value=name)


@settings(max_examples=15)
@given(
    bad=bad_choice(("sqrt", "blt", "banded-toeplitz", "none", "chebyshev")),
    which=st.sampled_from(["rows", "base"]),
)
def test_scaled_of_refuses_an_unknown_base_or_rows(
    bad: tuple[Any, type[Exception]], which: str
) -> None:
    value, exc = bad
    call = {"base": lambda: Scaled.of(value), "rows": lambda: Scaled.of("blt", rows=value)}
    assert_rejects(call[which], exc, which, value=value)


@settings(max_examples=15)
@given(bad=bad_choice(MECHANISMS), bad_class=bad_choice(CLASSES))
def test_capabilities_refuse_an_unknown_mechanism_or_class(
    bad: tuple[Any, type[Exception]], bad_class: tuple[Any, type[Exception]]
) -> None:
    assert_rejects(lambda: capabilities(bad[0]), bad[1], r"mechanism", value=bad[0])
    name, exc = bad_class
    assert_rejects(lambda: class_capabilities(name), exc, r"class_name", value=name)


@settings(max_examples=15)
@given(bad=bad_integer(1).filter(lambda b: b[0] is not None))  # None: every name
def test_names_refuse_a_bad_horizon(bad: tuple[Any, type[Exception]]) -> None:
    value, exc = bad
    assert_rejects(lambda: names(value), exc, r"horizon", value=value)


@pytest.mark.parametrize("name", sorted(GAUSSIAN_ONLY))
def test_gaussian_only_mechanisms_need_delta(name: str) -> None:
    assert_rejects(lambda: class_noise(name, None), ValueError, r"\bdelta\b")
    assert class_noise(name, 1e-6) == "gaussian"


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_registry_passes_bad_values_to_the_constructor_checks(name: str) -> None:
    kw = {"horizon": T, "budget": Budget(epsilon=1.0, delta=1e-6)}
    assert_rejects(lambda: build_mechanism(name, **{**kw, "horizon": 0}), ValueError, "horizon")
    assert_rejects(lambda: Budget(epsilon=math.nan), ValueError, "eps")
    assert_rejects(lambda: build_mechanism(name, **kw, bogus=1), TypeError, "bogus")


L4, R4 = np.tril(np.ones((4, 4))), np.eye(4)


@pytest.mark.parametrize(
    ("param", "value", "exc"),
    [
        ("L", np.full((4, 4), np.nan), ValueError),
        ("L", np.ones(4), ValueError),
        ("L", [[1, 2], [3]], ValueError),
        ("L", np.ones((4, 4), dtype=complex), TypeError),
        ("L", "abc", TypeError),
        ("L", np.zeros((0, 0)), ValueError),
        ("R", np.full((4, 4), np.inf), ValueError),
        ("R", [[1], [1, 2]], ValueError),
        ("R", np.zeros((4, 4)), ValueError),
        ("atol", -1.0, ValueError),
        ("atol", "a", TypeError),
        ("causal", 1, TypeError),
        ("epsilon", 0.0, ValueError),
    ],
)
def test_factorization_mechanism_refuses_bad_factors(param: str, value: Any, exc: Any) -> None:
    """Before: a ragged L/R reached numpy's 'inhomogeneous shape' error."""
    kw: dict[str, Any] = {"L": L4, "R": R4, "epsilon": 1.0, "rng": 0}
    assert_rejects(
        lambda: FactorizationMechanism(**{**kw, param: value}), exc, (param, "L", "R", "workload")
    )


@settings(max_examples=20)
@given(
    k=st.one_of(st.integers(max_value=1), st.sampled_from([1.5, "3", None, True])),
    low=st.integers(-3, 0),
)
def test_digit_system_refuses_a_bad_base(k: Any, low: int) -> None:
    """Before: DigitSystem(k=0 or 1.5 or 'a', ...) was accepted (division by k − 1 later)."""
    exc = ValueError if isinstance(k, int) and not isinstance(k, bool) else TypeError
    assert_rejects(lambda: DigitSystem(k, low), exc, r"\bk\b")
    assert_rejects(lambda: DigitSystem.for_tree(k, True), exc, r"\bk\b")


@pytest.mark.parametrize(("k", "low"), [(3, 1), (3, -3), (5, 0.5), (4, "0")])
def test_digit_system_refuses_a_bad_offset(k: int, low: Any) -> None:
    exc = ValueError if isinstance(low, int) else TypeError
    assert_rejects(lambda: DigitSystem(k, low), exc, r"\blow\b")
    assert_rejects(lambda: DigitSystem.for_tree(3, 1), TypeError, r"subtract")  # type: ignore[arg-type]


@settings(max_examples=20)
@given(k=st.integers(2, 40), subtract=st.booleans(), horizon=st.integers(1, 10**6))
def test_valid_digit_systems_cover_the_horizon(k: int, subtract: bool, horizon: int) -> None:
    system = DigitSystem.for_tree(k, subtract)
    h = system.height(horizon)
    assert system.capacity(h) >= horizon > (system.capacity(h - 1) if h > 1 else 0)


@pytest.mark.parametrize("path", [123, None, b"ck.bin", 1.5, ["ck"], ""])
def test_checkpoint_paths_are_validated(path: Any, tmp_path: Any) -> None:
    stream = KaryTree(T, epsilon=1.0, rng=0).stream()
    exc = ValueError if path == "" else TypeError
    assert_rejects(lambda: save_stream(stream, path), exc, "path")
    assert_rejects(lambda: load_stream(path), exc, "path")


@pytest.mark.parametrize("bad", ["kary", 3, KaryTree, KaryTree(T, epsilon=1.0, rng=0).stream()])
def test_checkpoint_expect_and_stream_are_validated(bad: Any, tmp_path: Any) -> None:
    good = KaryTree(T, epsilon=1.0, rng=0).stream()
    good.update(1.0)
    path = tmp_path / "ck.bin"
    save_stream(good, path)
    assert_rejects(lambda: load_stream(path, expect=bad), TypeError, "expect")
    if not hasattr(bad, "update"):  # a stream is a valid first argument of save_stream
        assert_rejects(lambda: save_stream(bad, path), TypeError, "stream")


def test_checkpoint_missing_or_foreign_file(tmp_path: Any) -> None:
    missing = tmp_path / "none.bin"
    with pytest.raises(FileNotFoundError, match=r"none\.bin"):
        load_stream(missing)
    foreign = tmp_path / "data.csv"
    foreign.write_text("1\n2\n")
    assert_rejects(lambda: load_stream(foreign), ValueError, r"data\.csv")


# -- UnboundedCounter (no horizon) -------------------------------------------------------

UNBOUNDED = ScalarCase(
    "UnboundedCounter",
    UnboundedCounter,
    {"inner": "binary", "epsilon": 1.0, "rng": 0},
    {
        "inner": bad_choice(sorted(MECHANISMS)),
        "k": bad_integer(2),
        "subtract": st.sampled_from([1, 0, "True", None, 1.0]).map(lambda v: (v, TypeError)),
        "epsilon": bad_positive_real(),
        "delta": bad_probability(allow_none=True, none_exc=ValueError),
        "step_sensitivity": bad_positive_real(),
        "noise": bad_choice(NOISES),
        "rng": bad_rng(),
    },
    names={"rng": "rng", "delta": "delta"},
)


@pytest.mark.parametrize(("case", "param"), case_params([UNBOUNDED]))
@settings(max_examples=12)
@given(data=st.data())
def test_unbounded_bad_constructor_scalar_is_refused(
    case: ScalarCase, param: str, data: st.DataObject
) -> None:
    value, exc = data.draw(case.bad[param], label=param)
    case.check(param, value, exc)


_UNBOUNDED = UnboundedCounter(inner="binary", epsilon=1.0, rng=0)


@settings(max_examples=20)
@given(
    bad=st.one_of(
        bad_dtype_array(3),
        bad_dtype_array(3, extra_shape=(2,)),
        st.sampled_from(
            [np.zeros(0), np.zeros((0, 2)), np.zeros((3, 0)), np.zeros((2, 2, 2)), 3, ragged(3)]
        ).map(lambda v: (v, ValueError)),
        st.sampled_from(["abc", None, [1, None, 2]]).map(lambda v: (v, TypeError)),
    )
)
def test_unbounded_release_refuses_bad_data(bad: tuple[Any, type[Exception]]) -> None:
    x, exc = bad
    assert_rejects(lambda: _UNBOUNDED.release(x), exc, r"\bx\b")


@settings(max_examples=12)
@given(pair=st.sampled_from(CHANGED_SHAPES), before=st.sampled_from([1, 2, 3]))
def test_unbounded_stream_refuses_steps_of_a_changing_shape(
    pair: tuple[Any, Any], before: int
) -> None:
    """After 1 or 3 steps the next step opens a new block (whose inner stream would take
    any shape); after 2 it is inside block 1."""
    first, bad = pair
    s = _UNBOUNDED.stream()
    s.update_many(np.array([first] * before))
    assert_rejects(lambda: s.update(bad), (ValueError, TypeError), r"\bx\b")
    assert s.step == before  # a refused step is not consumed
    s.update(first)
    assert s.step == before + 1


def test_memory_estimates_refuse_bad_input() -> None:
    from dpcount.counting.registry import check_memory, memory_estimate

    assert_rejects(lambda: memory_estimate("nope", 8), ValueError, "mechanism", value="nope")
    assert_rejects(lambda: memory_estimate("sqrt", 0), ValueError, "horizon")
    assert_rejects(lambda: memory_estimate("kary", 8, k=1), ValueError, r"\bk\b")
    assert_rejects(lambda: check_memory("sqrt", 8, memory="lots"), ValueError, "memory")
    assert_rejects(lambda: check_memory("sqrt", 8, memory=1.5), TypeError, "memory")
