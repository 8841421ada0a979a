"""``Scaled(base, rows=..., columns=...)``: a scaled factorization built from its base.

Every preset built from an unscaled base object (the square root, a BLT's θ, ω, a banded
Toeplitz encoder's coefficients) is the registered preset itself: the same class,
constructor arguments, dense factorization, kept exact variances, certified
sensitivity and noise scale, and the same released bits for the same seed (zero-noise
structure first: the noise coefficients and the dense pair, compared exactly). Every
preset's ``base`` is that unscaled mechanism, and ``Scaled(p.base, ...)`` rebuilds p.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpcount.counting import (
    BLT,
    NormalizedBLT,
    Scaled,
    SqrtFactorization,
    ToeplitzFactorization,
)
from dpcount.counting.factorization.scaled import PRESETS, UNSCALED, Base, Rows
from dpcount.counting.registry import REGISTRY, build_mechanism
from dpcount.privacy import Budget, Participation

T = 33
BUDGET = Budget(epsilon=1.0, delta=1e-6)
#: the banded preset is shipped at 2048 only: cheap coefficients at T, not optimized
BANDED = {"coefficients": [1.0, 0.5, 0.25]}
BANDED_OPTIONS = {"log_weights": [0.1, -0.2], "column_scales": [1.0, 0.9]}
X = np.arange(T, dtype=np.float64) % 3


def _registered(name: str, *, budget: Budget = BUDGET, rng: Any = 0) -> Scaled:
    """The registry's preset ``name`` at T (the banded one from its constructor)."""
    if name == "row-scaled-banded":
        cls = Scaled.of(Base.BANDED_TOEPLITZ, rows=Rows.CHEBYSHEV)
        return cls(T, **BANDED, **BANDED_OPTIONS, budget=budget, rng=rng)  # type: ignore[call-arg]
    mechanism = build_mechanism(name, horizon=T, budget=budget, rng=rng)
    assert isinstance(mechanism, Scaled)
    return mechanism


def _independent_base(name: str, budget: Budget = BUDGET) -> Any:
    """The preset's base built from the preset's published parameters, not from it."""
    scaling = PRESETS[name]
    if scaling.base is Base.SQRT:
        return SqrtFactorization(T, budget=budget, rng=0)
    if scaling.base is Base.BLT:
        cls = Scaled.of(Base.BLT, rows=scaling.rows)
        shipped = cls.shipped_parameters(T)  # type: ignore[attr-defined]
        theta, omega = shipped["buffer_decay"], shipped["output_scale"]
        return BLT(T, buffer_decay=theta, output_scale=omega, budget=budget, rng=0)
    return ToeplitzFactorization(T, **BANDED, budget=budget, rng=0)


def _assert_same_preset(built: Scaled, expected: Scaled) -> None:
    assert type(built) is type(expected)
    assert built.config() == expected.config()
    assert built.budget == expected.budget
    # zero-noise structure, exactly: the noise coefficients and the dense pair
    np.testing.assert_array_equal(built.noise_coefficients(), expected.noise_coefficients())
    for got, want in zip(built.dense_factorization(), expected.dense_factorization(), strict=True):
        np.testing.assert_array_equal(got, want)
    assert built._unit_sensitivities() == expected._unit_sensitivities()
    assert built.sampler.variance == expected.sampler.variance


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_scaled_of_a_base_is_the_registered_preset(name: str) -> None:
    expected = _registered(name)
    base = _independent_base(name)
    built = Scaled(base, rows=PRESETS[name].rows, rng=0, **expected.scaling_options())
    _assert_same_preset(built, expected)
    # the same seeded release, bit for bit (both fresh generators, seed 0)
    np.testing.assert_array_equal(built.release(X), expected.release(X))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_base_is_the_unscaled_mechanism_and_rebuilds_the_preset(name: str) -> None:
    preset = _registered(name)
    base = preset.base
    assert type(base) is next(e.cls for e in REGISTRY if e.name == UNSCALED[preset.scaling.base])
    assert base.horizon == preset.horizon
    assert base.budget == preset.budget
    assert base.config() == _independent_base(name).config()  # same parameters
    assert base._rng is not preset._rng
    rebuilt = Scaled(
        base,
        rows=preset.scaling.rows,
        columns=preset.scaling.columns,
        rng=0,
        **preset.scaling_options(),
    )
    _assert_same_preset(rebuilt, preset)
    assert "_built_by_scaled" not in rebuilt.__dict__  # the skipped second __init__ ran


def test_scaling_options_are_the_presets_own() -> None:
    assert _registered("normalized-blt").scaling_options() == {}
    assert _registered("normalized-sqrt").scaling_options() == {"block_ratio": None}
    assert set(_registered("row-scaled-sqrt").scaling_options()) == {"log_weights"}
    assert set(_registered("row-scaled-blt").scaling_options()) == {"log_weights"}
    assert _registered("row-scaled-banded").scaling_options() == BANDED_OPTIONS


def test_a_base_member_with_horizon_builds_the_preset_class() -> None:
    shipped = NormalizedBLT.shipped_parameters(T)
    built = Scaled("blt", horizon=T, budget=BUDGET, rng=0, **shipped)
    _assert_same_preset(built, _registered("normalized-blt"))
    banded = Scaled(
        Base.BANDED_TOEPLITZ,
        rows="chebyshev",
        horizon=T,
        budget=BUDGET,
        rng=0,
        **BANDED,
        **BANDED_OPTIONS,
    )
    _assert_same_preset(banded, _registered("row-scaled-banded"))


def test_the_whole_budget_is_the_bases_schema_included() -> None:
    budget = BUDGET.replace(participation=Participation(2, 8))
    for name in ("normalized-sqrt", "row-scaled-banded"):
        built = Scaled(
            _independent_base(name, budget),
            rows=PRESETS[name].rows,
            rng=0,
            **_registered(name).scaling_options(),
        )
        expected = _registered(name, budget=budget)
        assert built.budget.participation == Participation(2, 8)
        _assert_same_preset(built, expected)
        assert built.base.budget == budget.with_default_noise(built.default_noise)


def test_rng_is_the_keyword_never_the_bases_generator() -> None:
    base = _independent_base("normalized-blt")  # seeded rng=0
    a, b = Scaled(base), Scaled(base)  # rng None: OS entropy
    assert a._rng is not base._rng
    assert not np.array_equal(a.release(X), b.release(X))
    seeded = Scaled(base, rng=0).release(X)
    np.testing.assert_array_equal(seeded, Scaled(base, rng=0).release(X))
    # the base's own seeded draws are not the preset's
    assert not np.array_equal(seeded, Scaled(base, rng=1).release(X))


def test_build_is_the_typed_spelling_of_scaled() -> None:
    base = _independent_base("row-scaled-sqrt")
    options = _registered("row-scaled-sqrt").scaling_options()
    built = Scaled.build(base, rows=Rows.CHEBYSHEV, rng=0, **options)
    _assert_same_preset(built, Scaled(base, rows="chebyshev", rng=0, **options))
    _assert_same_preset(built, _registered("row-scaled-sqrt"))


def test_the_presets_keep_their_signatures() -> None:
    # Scaled(...) is build (base, ...); each preset's constructor is still its signature
    assert "buffer_decay" in inspect.signature(NormalizedBLT).parameters
    assert "base" in inspect.signature(Scaled).parameters
    assert inspect.signature(Scaled).parameters["budget"].kind is inspect.Parameter.KEYWORD_ONLY
    direct = NormalizedBLT(T, **NormalizedBLT.shipped_parameters(T), budget=BUDGET, rng=0)
    _assert_same_preset(direct, _registered("normalized-blt"))


def _blt(horizon: int = T) -> BLT:
    return BLT(horizon, buffer_decay=[0.3, 0.9], output_scale=[0.2, 0.1], budget=BUDGET)


ERRORS: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: Scaled(5), TypeError, r"base must be an unscaled SqrtFactorization, BLT or .*got int"),
    (
        lambda: Scaled(_registered("normalized-blt")),
        TypeError,
        r"base must be .*got NormalizedBLT; its base is \.base",
    ),
    (lambda: Scaled(_blt(), horizon=T), TypeError, r"takes the horizon and budget from base"),
    (lambda: Scaled(_blt(), budget=BUDGET), TypeError, r"from base \(BLT\), got budget"),
    (lambda: Scaled(_blt(), epsilon=2.0), TypeError, r"from base \(BLT\), got epsilon"),
    (lambda: Scaled(_blt(), output_scale=[0.1]), TypeError, r"output_scale is a parameter of base"),
    (lambda: Scaled(_blt(), _blt()), TypeError, r"one positional argument \(base\), got 2"),
    (lambda: Scaled("blt"), TypeError, r"Scaled\(base='blt'\) needs horizon="),
    (lambda: Scaled("tree", horizon=T), ValueError, r"base must be one of \('sqrt', 'blt'"),
    (lambda: Scaled(_blt(), rows="linear"), ValueError, r"rows must be one of \('none'"),
    (
        lambda: Scaled(ToeplitzFactorization(T, **BANDED, budget=BUDGET)),
        ValueError,
        r"no preset scales base 'banded-toeplitz' with rows 'none'.*presets are normalized-sqrt",
    ),
    # the preset's own refusals, naming the parameter
    (lambda: Scaled(_blt(1 << 24 | 1)), ValueError, r"horizon must be <= 16777216, got 16777217"),
    (lambda: Scaled(_blt(), rows="chebyshev"), TypeError, r"missing 1 .*'log_weights'"),
    (
        lambda: Scaled(_blt(), rows="chebyshev", log_weights=[9.0]),
        ValueError,
        r"log_weights must be finite with \|a_m\| <= 5",
    ),
    (
        lambda: Scaled(SqrtFactorization(T, epsilon=1.0, noise="laplace")),
        ValueError,
        r"noise='laplace' is not available for NormalizedSqrtFactorization",
    ),
]


@pytest.mark.parametrize(("build", "error", "match"), ERRORS)
def test_refusals_name_the_parameter(
    build: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        build()
