"""Factories for every counting mechanism, used by the contract suite.

Each entry builds a mechanism for a horizon with an int seed. Add new mechanisms
here so they are held to the same contract (tests/test_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable

from dpcount.counting import BinaryTree, CountingMechanism, KaryTree

Factory = Callable[[int, int], CountingMechanism]

FACTORIES: dict[str, Factory] = {
    "binary": lambda T, seed: BinaryTree(T, 1.0, rng=seed),
    "kary-19-sub": lambda T, seed: KaryTree(T, 1.0, k=19, subtract=True, rng=seed),
    "kary-4-sub-gauss": lambda T, seed: KaryTree(
        T, 0.5, k=4, subtract=True, noise="gaussian", delta=1e-6, rng=seed
    ),
    "kary-5-laplace-delta": lambda T, seed: KaryTree(
        T, 1.0, k=5, subtract=False, delta=1e-8, rng=seed
    ),
    "binary-discrete-laplace": lambda T, seed: BinaryTree(
        T, 1.0, noise="discrete-laplace", rng=seed
    ),
    "kary-7-sub-discrete-gauss": lambda T, seed: KaryTree(
        T, 0.5, k=7, subtract=True, noise="discrete-gaussian", delta=1e-6, rng=seed
    ),
}
