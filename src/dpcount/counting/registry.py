"""Build a counting mechanism by name (used by the CLI and the advisor)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpcount._validate import check_choice
from dpcount.counting.base import CountingMechanism
from dpcount.counting.honaker import Honaker
from dpcount.counting.input_perturbation import InputPerturbation
from dpcount.counting.smooth_binary import SmoothBinary
from dpcount.counting.sqrt import SqrtFactorization
from dpcount.counting.tree import BinaryTree, KaryTree

__all__ = ["DISCRETE_CAPABLE", "MECHANISMS", "build_mechanism", "default_noise"]


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
}


#: names whose mechanism accepts integer noise (``supports_discrete_noise``)
DISCRETE_CAPABLE: frozenset[str] = frozenset({"binary", "kary", "honaker"})


def default_noise(name: str, delta: float | None, step_sensitivity: float = 1.0) -> str | None:
    """The safe default noise for mechanism ``name``, or None to keep the class default.

    Integer noise (``"discrete-laplace"`` without delta, ``"discrete-gaussian"`` with
    one) when the mechanism accepts it and ``step_sensitivity`` is a whole number:
    its release is computed from the noisy integer vector only, so floating-point
    rounding cannot leak the data (docs/safe-noise.md). It then needs whole-number
    steps (fractional data raise a ValueError naming ``x``; pass ``noise=`` to use
    continuous noise). Other mechanisms keep their continuous default (None).
    """
    check_choice("mechanism", name, MECHANISMS)
    whole = isinstance(step_sensitivity, (int, float)) and float(step_sensitivity).is_integer()
    if name not in DISCRETE_CAPABLE or not whole:
        return None
    return "discrete-laplace" if delta is None else "discrete-gaussian"


def build_mechanism(name: str, **kwargs: Any) -> CountingMechanism:
    """``build_mechanism("kary", horizon=T, epsilon=1.0, k=19, subtract=True, ...)``.

    Without ``noise`` (or with ``noise=None``) the noise is :func:`default_noise`:
    integer noise for the trees and Honaker (whole-number data and sensitivity),
    the class default (continuous) for the others.
    """
    check_choice("mechanism", name, MECHANISMS)
    if kwargs.get("noise") is None:
        kwargs.pop("noise", None)
        chosen = default_noise(name, kwargs.get("delta"), kwargs.get("step_sensitivity", 1.0))
        if chosen is not None:
            kwargs["noise"] = chosen
    return MECHANISMS[name](**kwargs)
