"""The registry names its classes ("module:Class") and states what choosing needs to
know about them without importing them; each statement must be the class's own."""

from __future__ import annotations

import importlib
import inspect

import pytest

from dpcount.counting.registry import CLASSES, REGISTRY, max_horizon

#: the module constant each stated horizon limit copies
_LIMITS = {
    "toeplitz": ("factorization.toeplitz", "MAX_OPTIMIZED_HORIZON"),
    "normalized-sqrt": ("factorization.normalized_sqrt", "NORMALIZED_SQRT_BLOCK_MAX_HORIZON"),
    "normalized-blt": ("factorization.normalized_blt", "NORMALIZED_BLT_MAX_HORIZON"),
    "row-scaled-blt": ("factorization.row_scaled_blt", "ROW_SCALED_BLT_MAX_HORIZON"),
    "dense-optimum": ("factorization.dense", "DENSE_OPTIMUM_MAX_HORIZON"),
    "dense-max-optimum": ("factorization.dense", "DENSE_OPTIMUM_MAX_HORIZON"),
    "row-scaled-sqrt": ("factorization.row_scaled_sqrt", "ROW_SCALED_MAX_HORIZON"),
    "row-scaled-banded": ("factorization.row_scaled_sqrt", "ROW_SCALED_MAX_HORIZON"),
}


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: str(e.name))
def test_stated_capabilities_are_the_class_declarations(entry) -> None:  # type: ignore[no-untyped-def]
    cls = entry.cls
    assert cls.__name__ == entry.class_name
    assert CLASSES[entry.class_name] is cls
    assert entry.discrete == cls.supports_discrete_noise
    assert entry.continuous == cls.continuous_noise
    assert entry.default == cls.default_noise
    assert entry.noise_families() == cls.noise_families()
    assert entry.factory is None or callable(getattr(cls, entry.factory))
    # the declared objective values are the factory's option (its default first)
    factory = inspect.signature(getattr(cls, entry.factory or "__init__")).parameters
    if entry.objectives:
        assert factory["objective"].default == entry.objectives[0]
    elif entry.name is not None and "objective" in factory:
        # the dense optima: one name per objective (dense-max-optimum's preset)
        assert entry.name in ("dense-optimum", "dense-max-optimum")
    if entry.name is not None:
        where = _LIMITS.get(entry.name)
        want = (
            None
            if where is None
            else getattr(importlib.import_module(f"dpcount.counting.{where[0]}"), where[1])
        )
        assert entry.max_horizon == want == max_horizon(entry.name)


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
