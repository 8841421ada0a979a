"""Continual counting: private prefix sums released step by step.

Every mechanism shares :class:`CountingMechanism`'s interface: ``release(x)``,
``stream()``, and the exact ``variances()``, ``mse()``, ``max_variance()``, with
``variance_at(t)`` / ``iter_variances(start)`` for one step or a run of steps in
memory independent of the horizon (bit-identical to ``variances()``).
A stream can be checkpointed (:func:`save_stream`) and restored
(:func:`load_stream`); see :mod:`dpcount.counting.checkpoint`.
For a stream without a horizon, :class:`UnboundedCounter` runs any of them over
doubling blocks, with its guarantee for every prefix and its exact ``variance_at(t)``.
"""

from dpcount.counting.base import CountingMechanism, CountingStream, NoiseProcess
from dpcount.counting.blt import BLT, BLTNoiseProcess
from dpcount.counting.checkpoint import load_stream, save_stream
from dpcount.counting.dense import DenseNoiseProcess, FactorizationMechanism
from dpcount.counting.digits import DigitSystem, max_digit_l1_norm
from dpcount.counting.honaker import Honaker, HonakerNoiseProcess
from dpcount.counting.input_perturbation import InputNoiseProcess, InputPerturbation
from dpcount.counting.normalized_blt import NormalizedBLT
from dpcount.counting.normalized_sqrt import (
    NormalizedSqrtBlockNoiseProcess,
    NormalizedSqrtFactorization,
    NormalizedSqrtNoiseProcess,
)
from dpcount.counting.smooth_binary import SmoothBinary, SmoothBinaryNoiseProcess
from dpcount.counting.sqrt import SqrtFactorization, SqrtNoiseProcess
from dpcount.counting.toeplitz_opt import ToeplitzFactorization, ToeplitzNoiseProcess
from dpcount.counting.tree import BinaryTree, KaryTree, TreeNoiseProcess
from dpcount.counting.unbounded import UnboundedCounter, UnboundedStream

__all__ = [
    "BLT",
    "BLTNoiseProcess",
    "BinaryTree",
    "CountingMechanism",
    "CountingStream",
    "DenseNoiseProcess",
    "DigitSystem",
    "FactorizationMechanism",
    "Honaker",
    "HonakerNoiseProcess",
    "InputNoiseProcess",
    "InputPerturbation",
    "KaryTree",
    "NoiseProcess",
    "NormalizedBLT",
    "NormalizedSqrtBlockNoiseProcess",
    "NormalizedSqrtFactorization",
    "NormalizedSqrtNoiseProcess",
    "SmoothBinary",
    "SmoothBinaryNoiseProcess",
    "SqrtFactorization",
    "SqrtNoiseProcess",
    "ToeplitzFactorization",
    "ToeplitzNoiseProcess",
    "TreeNoiseProcess",
    "UnboundedCounter",
    "UnboundedStream",
    "load_stream",
    "max_digit_l1_norm",
    "save_stream",
]
