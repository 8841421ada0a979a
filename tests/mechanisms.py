"""Factories for every counting mechanism, used by the contract, property and
checkpoint suites.

Each entry builds a mechanism for a horizon with an int seed. The hand-written ones
cover noise and option variants; every registered class they do not cover is
DISCOVERED from the registry (built by its registry name, or by its constructor for
a class without one, with its default noise and δ = 1e-6), so a new mechanism is held
to the same contract (tests/counting/test_contract.py) by its registry entry alone.
"""

from __future__ import annotations

from collections.abc import Callable

from dpcount.counting import (
    BLT,
    BinaryTree,
    CountingMechanism,
    FactorizationMechanism,
    Honaker,
    InputPerturbation,
    KaryTree,
    NormalizedBLT,
    NormalizedSqrtFactorization,
    SmoothBinary,
    SqrtFactorization,
    ToeplitzFactorization,
)
from dpcount.counting.registry import REGISTRY, Entry, build_mechanism
from dpcount.privacy import Budget

Factory = Callable[[int, int], CountingMechanism]

_HAND: dict[str, Factory] = {
    "binary": lambda T, seed: BinaryTree(T, epsilon=1.0, rng=seed),
    "kary-19-sub": lambda T, seed: KaryTree(T, epsilon=1.0, k=19, subtract=True, rng=seed),
    "kary-4-sub-gauss": lambda T, seed: KaryTree(
        T, epsilon=0.5, k=4, subtract=True, noise="gaussian", delta=1e-6, rng=seed
    ),
    "kary-5-laplace-delta": lambda T, seed: KaryTree(
        T, epsilon=1.0, k=5, subtract=False, delta=1e-8, rng=seed
    ),
    "binary-discrete-laplace": lambda T, seed: BinaryTree(
        T, epsilon=1.0, noise="discrete-laplace", rng=seed
    ),
    "kary-7-sub-discrete-gauss": lambda T, seed: KaryTree(
        T, epsilon=0.5, k=7, subtract=True, noise="discrete-gaussian", delta=1e-6, rng=seed
    ),
    "sqrt-gauss": lambda T, seed: SqrtFactorization(T, epsilon=0.5, delta=1e-6, rng=seed),
    "sqrt-fhu": lambda T, seed: SqrtFactorization(
        T, epsilon=0.5, delta=1e-6, calibration="fhu", rng=seed
    ),
    "sqrt-laplace": lambda T, seed: SqrtFactorization(T, epsilon=1.0, noise="laplace", rng=seed),
    "sqrt-laplace-delta": lambda T, seed: SqrtFactorization(
        T, epsilon=1.0, delta=1e-8, noise="laplace", rng=seed
    ),
    "honaker": lambda T, seed: Honaker(T, epsilon=1.0, rng=seed),
    "honaker-gauss": lambda T, seed: Honaker(
        T, epsilon=1.0, delta=1e-6, noise="gaussian", rng=seed
    ),
    "honaker-discrete-laplace": lambda T, seed: Honaker(
        T, epsilon=1.0, noise="discrete-laplace", rng=seed
    ),
    "honaker-discrete-gauss": lambda T, seed: Honaker(
        T, epsilon=1.0, delta=1e-6, noise="discrete-gaussian", rng=seed
    ),
    "smooth-binary": lambda T, seed: SmoothBinary(T, epsilon=1.0, delta=1e-6, rng=seed),
    "smooth-binary-laplace": lambda T, seed: SmoothBinary(
        T, epsilon=1.0, noise="laplace", rng=seed
    ),
    # Laplace input perturbation is tested in test_input_perturbation.py: its random-walk
    # noise is so correlated over steps that 1000 stream replicates of the contract's
    # pooled check cannot also reject 0.8x the variance.
    "input-gauss": lambda T, seed: InputPerturbation(
        T, epsilon=2.0, delta=1e-5, noise="gaussian", rng=seed
    ),
    "blt-3": lambda T, seed: BLT(
        T,
        buffer_decay=[0.3, 0.9, 0.999],
        output_scale=[0.2, 0.1, 0.05],
        epsilon=1.0,
        delta=1e-6,
        rng=seed,
    ),
    "blt-1-near-one": lambda T, seed: BLT(
        T, buffer_decay=[1 - 1e-7], output_scale=[0.9], epsilon=0.5, delta=1e-5, rng=seed
    ),
    "dense-sqrt": lambda T, seed: FactorizationMechanism(
        *SqrtFactorization(T, epsilon=1.0, delta=1e-6).dense_factorization(),
        epsilon=1.0,
        delta=1e-6,
        noise="gaussian",
        rng=seed,
    ),
    "toeplitz-banded": lambda T, seed: ToeplitzFactorization(
        T, coefficients=[1.0, 0.4, -0.1, 0.25][:T], epsilon=1.0, delta=1e-6, rng=seed
    ),
    "normalized-sqrt": lambda T, seed: NormalizedSqrtFactorization(
        T, epsilon=1.0, delta=1e-6, rng=seed
    ),
    "normalized-sqrt-blocks": lambda T, seed: NormalizedSqrtFactorization(
        T, epsilon=1.0, delta=1e-6, rng=seed, block_ratio=1.3
    ),
    "normalized-blt": lambda T, seed: NormalizedBLT(
        T,
        buffer_decay=[0.3, 0.9, 0.999],
        output_scale=[0.2, 0.1, 0.05],
        epsilon=1.0,
        delta=1e-6,
        rng=seed,
    ),
}


def _registry_factory(entry: Entry) -> Factory:
    """A factory building ``entry``'s mechanism with its default noise (δ = 1e-6)."""
    budget = Budget(epsilon=1.0, delta=1e-6)
    name = entry.name
    if name is not None:
        return lambda T, seed: build_mechanism(name, horizon=T, budget=budget, rng=seed)
    cls = entry.cls
    return lambda T, seed: cls(T, budget=budget, rng=seed)  # type: ignore[call-arg]


def _discover() -> dict[str, Factory]:
    """One factory per registered class no hand-written factory builds (the class of
    each hand-written one is read from a horizon-1 build)."""
    covered = {type(factory(1, 0)).__name__ for factory in _HAND.values()}
    found: dict[str, Factory] = {}
    for entry in REGISTRY:
        if entry.class_name not in covered:
            covered.add(entry.class_name)
            found[f"registry-{entry.name or entry.class_name}"] = _registry_factory(entry)
    return found


#: the factories found in the registry (the heavy contract cases of these are ``slow``)
DISCOVERED: dict[str, Factory] = _discover()
#: every factory: the hand-written variants and the discovered classes
FACTORIES: dict[str, Factory] = {**_HAND, **DISCOVERED}
#: the largest horizon each discovered factory builds (its registry entry's), None: any
MAX_HORIZON: dict[str, int | None] = {
    f"registry-{e.name or e.class_name}": e.capabilities.max_horizon for e in REGISTRY
}


def reaches(name: str, horizon: int) -> bool:
    """Whether factory ``name`` builds at ``horizon`` (a hand-written one named like a
    registry entry: that entry's limit; the others: any)."""
    limit = MAX_HORIZON.get(name if name in DISCOVERED else f"registry-{name}")
    return limit is None or horizon <= limit
