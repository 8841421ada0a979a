"""The registry names its classes ("module:Class") and states what choosing needs to
know about them without importing them; each statement must be the class's own."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

from dpcount.counting.registry import (
    CLASSES,
    MECHANISMS,
    REGISTRY,
    build_mechanism,
    capabilities,
    class_capabilities,
    max_horizon,
    names,
)
from dpcount.privacy import Budget, Participation

#: the module constant each stated horizon limit copies
_LIMITS = {
    "toeplitz": ("factorization.toeplitz", "MAX_OPTIMIZED_HORIZON"),
    "normalized-sqrt": ("factorization.normalized_sqrt", "NORMALIZED_SQRT_BLOCK_MAX_HORIZON"),
    "normalized-blt": ("factorization.normalized_blt", "NORMALIZED_BLT_MAX_HORIZON"),
    "row-scaled-blt": ("factorization.row_scaled_blt", "ROW_SCALED_BLT_MAX_HORIZON"),
    "dense-optimum": ("factorization.dense", "DENSE_OPTIMUM_MAX_HORIZON"),
    "dense-max-optimum": ("factorization.dense", "DENSE_OPTIMUM_MAX_HORIZON"),
    "row-scaled-sqrt": ("factorization.row_scaled_sqrt", "ROW_SCALED_MAX_HORIZON"),
    "row-scaled-banded": ("factorization.row_scaled_banded", "ROW_SCALED_BANDED_MAX_HORIZON"),
    "input": ("input_perturbation", "INPUT_MAX_HORIZON"),
}


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: str(e.name or e.class_name))
def test_stated_capabilities_are_the_class_declarations(entry) -> None:  # type: ignore[no-untyped-def]
    cls = entry.cls
    caps = entry.capabilities
    assert cls.__name__ == entry.class_name
    assert CLASSES[entry.class_name] is cls
    assert caps.discrete == cls.supports_discrete_noise
    assert caps.continuous == cls.continuous_noise
    assert caps.integer_release == cls.integer_release
    assert caps.noise == entry.noise_families() == cls.noise_families()
    # the dense optima's names default to Gaussian, the loss they minimize; the class
    # built from explicit matrices keeps the Laplace default
    assert caps.default_noise == cls.default_noise or entry.factory == "optimal"
    assert entry.factory is None or callable(getattr(cls, entry.factory))
    # every declared option is a keyword of the builder, with the declared default
    factory = inspect.signature(getattr(cls, entry.factory or "__init__")).parameters
    for option in caps.options:
        assert option.name in factory, option.name
        assert factory[option.name].default == option.default, option.name
    if entry.objectives:
        assert factory["objective"].default == entry.objectives[0]
    elif entry.name is not None and "objective" in factory:
        # the dense optima: one name per objective (dense-max-optimum's preset)
        assert entry.name in ("dense-optimum", "dense-max-optimum")
    # every declared checkpoint argument is a constructor keyword
    init = inspect.signature(cls.__init__).parameters
    assert all(o.name in init for o in caps.saved), caps.saved
    if entry.name is not None:
        where = _LIMITS.get(entry.name)
        want = (
            None
            if where is None
            else getattr(importlib.import_module(f"dpcount.counting.{where[0]}"), where[1])
        )
        assert caps.max_horizon == want == max_horizon(entry.name)


def test_every_list_argument_a_config_holds_is_declared_for_checkpoints() -> None:
    """The declared ``saved`` options cover the list/matrix arguments each class's
    config writes (what a checkpoint must bound): built once per named class at T = 8."""
    budget = Budget(epsilon=1.0, delta=1e-6)
    seen: dict[str, set[str]] = {}
    for entry in REGISTRY:
        if entry.name is None or entry.class_name in seen:
            continue
        m = build_mechanism(entry.name, horizon=8, budget=budget, rng=0, bands=3)
        kwargs = m.config()["kwargs"]
        seen[entry.class_name] = {k for k, v in kwargs.items() if isinstance(v, (list, np.ndarray))}
        # (a row-scaled banded Toeplitz's column_scales are None when it needs none)
        assert seen[entry.class_name] <= {o.name for o in entry.capabilities.saved}, entry.name
        assert bool(seen[entry.class_name]) == bool(entry.capabilities.saved), entry.name


@pytest.mark.parametrize("entry", [e for e in REGISTRY if not e.capabilities.participation])
def test_single_participation_declarations_are_the_class_refusals(entry) -> None:  # type: ignore[no-untyped-def]
    """A mechanism declared single-participation refuses a schema (what
    ``supports`` answers from the declaration without building anything)."""
    schema = Budget(epsilon=1.0, delta=1e-6, participation=Participation(2, 4))
    assert not entry.capabilities.supports(schema, 16)
    assert entry.capabilities.supports(Budget(epsilon=1.0, delta=1e-6), 16)
    with pytest.raises(ValueError, match="single participation"):
        entry.cls(16, budget=schema)


def test_every_registered_mechanism_is_a_strategy() -> None:
    from dpcount.counting import Strategy

    budget = Budget(epsilon=1.0, delta=1e-6)
    for name in names():
        assert isinstance(build_mechanism(name, horizon=8, budget=budget, rng=0), Strategy)


def test_supports_answers_from_the_declaration() -> None:
    caps = capabilities("blt")
    assert caps.supports(Budget(epsilon=1.0, delta=1e-6), 1 << 30)
    assert not caps.supports(Budget(epsilon=1.0), 8)  # Gaussian only: needs delta
    assert not caps.supports(Budget(epsilon=1.0, delta=1e-6, noise="laplace"), 8)
    assert caps.unsupported(noise="laplace") == (
        "noise 'laplace' is not one of its kinds (gaussian)"
    )
    assert not capabilities("toeplitz").supports(Budget(epsilon=1.0, delta=1e-6), (1 << 16) + 1)
    kary = capabilities("kary")
    assert kary.supports(Budget(epsilon=1.0, noise="discrete-laplace"), 1 << 40)
    assert not capabilities("sqrt").supports(Budget(epsilon=1.0, noise="discrete-laplace"))
    assert kary.option("k") is not None and kary.option("objective") is None
    assert class_capabilities("FactorizationMechanism") is capabilities("dense-optimum")
    with pytest.raises(ValueError, match="class_name"):
        class_capabilities("Unregistered")
    # the names whose declarations support a request (the CLI's choices)
    assert names() == tuple(sorted(MECHANISMS))
    pure = {n for n in names() if capabilities(n).supports(Budget(epsilon=1.0), 100)}
    # (the dense optima take Laplace noise without delta: their class is not Gaussian-only)
    assert pure == {
        "binary",
        "dense-max-optimum",
        "dense-optimum",
        "honaker",
        "input",
        "kary",
        "smooth-binary",
        "sqrt",
    }
    assert "toeplitz" not in names(horizon=1 << 20) and "blt" in names(horizon=1 << 20)


def test_option_checks_type_and_bounds() -> None:
    k = capabilities("kary").option("k")
    assert k is not None and k.accepts(2) and k.accepts(None)
    assert not k.accepts(1) and not k.accepts(True) and not k.accepts(2.0)
    with pytest.raises(ValueError, match=r"k of kary must be an int >= 2, got 1"):
        k.check(1, "kary")
    objective = capabilities("blt").option("objective")
    assert objective is not None and objective.accepts("max") and not objective.accepts("median")
    decay = class_capabilities("BLT").saved_option("buffer_decay")
    assert decay is not None and decay.accepts([0.5] * 64) and not decay.accepts([0.5] * 65)
    assert not decay.accepts([]) and not decay.accepts([float("nan")]) and not decay.accepts([1])
    assert decay.describe() == "a list of 1 to 64 finite floats"


def test_classes_lists_every_registered_class_and_refuses_others() -> None:
    assert sorted(CLASSES) == sorted({e.class_name for e in REGISTRY})
    assert CLASSES.get("Unregistered") is None
    with pytest.raises(KeyError, match="Unregistered"):
        CLASSES["Unregistered"]


def test_the_objective_option_builds_the_max_preset_and_is_refused_elsewhere() -> None:
    from dpcount.counting import RowScaledBLT
    from dpcount.counting.registry import build_mechanism, objectives
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6, noise="gaussian")
    assert objectives("row-scaled-blt") == ("mean", "max") and objectives("kary") == ()
    built = build_mechanism("row-scaled-blt", horizon=300, budget=budget, objective="max", rng=0)
    want = RowScaledBLT.optimized(300, objective="max", budget=budget, rng=0)
    assert (
        built.max_variance()
        == want.max_variance()
        < build_mechanism("row-scaled-blt", horizon=300, budget=budget, rng=0).max_variance()
    )
    with pytest.raises(ValueError, match="objective is not an option of mechanism 'kary'"):
        build_mechanism("kary", horizon=300, budget=budget, objective="max")
    with pytest.raises(ValueError, match="objective"):
        build_mechanism("blt", horizon=300, budget=budget, objective="median")
