"""Continual counting: private prefix sums released step by step.

Every mechanism shares :class:`CountingMechanism`'s interface: ``release(x)``,
``stream()``, and the exact ``variances()``, ``mse()``, ``max_variance()``.
"""

from dpcount.counting.base import CountingMechanism, CountingStream, NoiseProcess
from dpcount.counting.digits import DigitSystem
from dpcount.counting.tree import BinaryTree, KaryTree, TreeNoiseProcess

__all__ = [
    "BinaryTree",
    "CountingMechanism",
    "CountingStream",
    "DigitSystem",
    "KaryTree",
    "NoiseProcess",
    "TreeNoiseProcess",
]
