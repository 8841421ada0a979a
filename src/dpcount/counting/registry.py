"""Build a counting mechanism by name (used by the CLI and the advisor)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpcount._validate import check_choice
from dpcount.counting.base import CountingMechanism
from dpcount.counting.blt import BLT
from dpcount.counting.honaker import Honaker
from dpcount.counting.input_perturbation import InputPerturbation
from dpcount.counting.smooth_binary import SmoothBinary
from dpcount.counting.sqrt import SqrtFactorization
from dpcount.counting.tree import BinaryTree, KaryTree

__all__ = ["MECHANISMS", "build_mechanism"]


def _binary(**kw: Any) -> CountingMechanism:
    kw.pop("k", None)
    kw.pop("subtract", None)
    return BinaryTree(**kw)


def _kary(**kw: Any) -> CountingMechanism:
    return KaryTree(**kw)


def _without_tree_options(
    cls: Callable[..., CountingMechanism],
) -> Callable[..., CountingMechanism]:
    def build(**kw: Any) -> CountingMechanism:
        kw.pop("k", None)
        kw.pop("subtract", None)
        return cls(**kw)

    return build


#: name -> builder taking horizon, epsilon, delta, noise, rng, step_sensitivity,
#: calibration, and the tree options k and subtract (ignored where meaningless)
MECHANISMS: dict[str, Callable[..., CountingMechanism]] = {
    "binary": _binary,
    "kary": _kary,
    "sqrt": _without_tree_options(SqrtFactorization),
    "honaker": _without_tree_options(Honaker),
    "smooth-binary": _without_tree_options(SmoothBinary),
    "input": _without_tree_options(InputPerturbation),
    "blt": _without_tree_options(BLT.optimized),  # shipped mean-optimized parameters
}


def build_mechanism(name: str, **kwargs: Any) -> CountingMechanism:
    """``build_mechanism("kary", horizon=T, epsilon=1.0, k=19, subtract=True, ...)``."""
    check_choice("mechanism", name, MECHANISMS)
    return MECHANISMS[name](**kwargs)
