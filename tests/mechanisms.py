"""Factories for every counting mechanism, used by the contract suite.

Each entry builds a mechanism for a horizon with an int seed. Add new mechanisms
here so they are held to the same contract (tests/counting/test_contract.py).
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

Factory = Callable[[int, int], CountingMechanism]

FACTORIES: dict[str, Factory] = {
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
