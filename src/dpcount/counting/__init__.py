"""Continual counting: private prefix sums released step by step.

Every mechanism shares :class:`CountingMechanism`'s interface: ``release(x)``,
``stream()``, and the exact ``variances()``, ``mse()``, ``max_variance()``, with
``variance_at(t)`` / ``iter_variances(start)`` for one step or a run of steps in
memory independent of the horizon (bit-identical to ``variances()``).
A stream can be checkpointed (:func:`save_stream`) and restored
(:func:`load_stream`); see :mod:`dpcount.counting.checkpoint`.
For a stream without a horizon, :class:`UnboundedCounter` runs any of them over
doubling blocks, with its guarantee for every prefix and its exact ``variance_at(t)``.
Every mechanism is a :class:`Strategy`; what each registered one can do (noise kinds,
integer release, largest horizon, options, participation support) is its
:class:`Capabilities`, declared once in :mod:`dpcount.counting.registry`
(``registry.capabilities(name)``, ``registry.class_capabilities(class_name)``).

The names are imported on first use (a module ``__getattr__``, PEP 562): importing
``dpcount.counting`` costs nothing beyond the mechanisms a caller touches, so a
command-line run with one tree does not import the factorizations (nor scipy.signal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpcount._lazy import lazy_attributes

if TYPE_CHECKING:
    from dpcount.counting.base import CountingMechanism, CountingStream, NoiseProcess
    from dpcount.counting.checkpoint import load_stream, save_stream
    from dpcount.counting.digits import DigitSystem, max_digit_l1_norm
    from dpcount.counting.factorization.blt import BLT, BLTNoiseProcess
    from dpcount.counting.factorization.dense import DenseNoiseProcess, FactorizationMechanism
    from dpcount.counting.factorization.horizon_free import HorizonFreeSqrt
    from dpcount.counting.factorization.horizon_free_blt import HorizonFreeBLT
    from dpcount.counting.factorization.horizon_free_growing import HorizonFreeGrowingBLT
    from dpcount.counting.factorization.normalized_blt import NormalizedBLT
    from dpcount.counting.factorization.normalized_sqrt import (
        NormalizedSqrtBlockNoiseProcess,
        NormalizedSqrtFactorization,
        NormalizedSqrtNoiseProcess,
    )
    from dpcount.counting.factorization.row_scaled_banded import RowScaledBandedToeplitz
    from dpcount.counting.factorization.row_scaled_blt import RowScaledBLT
    from dpcount.counting.factorization.row_scaled_sqrt import RowScaledSqrtFactorization
    from dpcount.counting.factorization.scaled import Scaled
    from dpcount.counting.factorization.sqrt import SqrtFactorization, SqrtNoiseProcess
    from dpcount.counting.factorization.toeplitz import ToeplitzFactorization, ToeplitzNoiseProcess
    from dpcount.counting.honaker import Honaker, HonakerNoiseProcess
    from dpcount.counting.input_perturbation import InputNoiseProcess, InputPerturbation
    from dpcount.counting.smooth_binary import SmoothBinary, SmoothBinaryNoiseProcess
    from dpcount.counting.strategy import Capabilities, Option, Strategy
    from dpcount.counting.tree import BinaryTree, KaryTree, TreeNoiseProcess
    from dpcount.counting.unbounded import UnboundedCounter, UnboundedStream

#: public name -> the submodule that defines it
_WHERE = {
    "CountingMechanism": "base",
    "CountingStream": "base",
    "NoiseProcess": "base",
    "BLT": "factorization.blt",
    "BLTNoiseProcess": "factorization.blt",
    "load_stream": "checkpoint",
    "save_stream": "checkpoint",
    "DenseNoiseProcess": "factorization.dense",
    "FactorizationMechanism": "factorization.dense",
    "DigitSystem": "digits",
    "max_digit_l1_norm": "digits",
    "Honaker": "honaker",
    "HonakerNoiseProcess": "honaker",
    "InputNoiseProcess": "input_perturbation",
    "InputPerturbation": "input_perturbation",
    "NormalizedBLT": "factorization.normalized_blt",
    "NormalizedSqrtBlockNoiseProcess": "factorization.normalized_sqrt",
    "NormalizedSqrtFactorization": "factorization.normalized_sqrt",
    "NormalizedSqrtNoiseProcess": "factorization.normalized_sqrt",
    "RowScaledBandedToeplitz": "factorization.row_scaled_banded",
    "RowScaledBLT": "factorization.row_scaled_blt",
    "RowScaledSqrtFactorization": "factorization.row_scaled_sqrt",
    "Scaled": "factorization.scaled",
    "HorizonFreeSqrt": "factorization.horizon_free",
    "HorizonFreeBLT": "factorization.horizon_free_blt",
    "HorizonFreeGrowingBLT": "factorization.horizon_free_growing",
    "SmoothBinary": "smooth_binary",
    "SmoothBinaryNoiseProcess": "smooth_binary",
    "SqrtFactorization": "factorization.sqrt",
    "SqrtNoiseProcess": "factorization.sqrt",
    "Capabilities": "strategy",
    "Option": "strategy",
    "Strategy": "strategy",
    "ToeplitzFactorization": "factorization.toeplitz",
    "ToeplitzNoiseProcess": "factorization.toeplitz",
    "BinaryTree": "tree",
    "KaryTree": "tree",
    "TreeNoiseProcess": "tree",
    "UnboundedCounter": "unbounded",
    "UnboundedStream": "unbounded",
}

__all__ = [
    "BLT",
    "BLTNoiseProcess",
    "BinaryTree",
    "Capabilities",
    "CountingMechanism",
    "CountingStream",
    "DenseNoiseProcess",
    "DigitSystem",
    "FactorizationMechanism",
    "Honaker",
    "HonakerNoiseProcess",
    "HorizonFreeBLT",
    "HorizonFreeGrowingBLT",
    "HorizonFreeSqrt",
    "InputNoiseProcess",
    "InputPerturbation",
    "KaryTree",
    "NoiseProcess",
    "NormalizedBLT",
    "NormalizedSqrtBlockNoiseProcess",
    "NormalizedSqrtFactorization",
    "NormalizedSqrtNoiseProcess",
    "Option",
    "RowScaledBLT",
    "RowScaledBandedToeplitz",
    "RowScaledSqrtFactorization",
    "Scaled",
    "SmoothBinary",
    "SmoothBinaryNoiseProcess",
    "SqrtFactorization",
    "SqrtNoiseProcess",
    "Strategy",
    "ToeplitzFactorization",
    "ToeplitzNoiseProcess",
    "TreeNoiseProcess",
    "UnboundedCounter",
    "UnboundedStream",
    "load_stream",
    "max_digit_l1_norm",
    "save_stream",
]


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE, __all__)
