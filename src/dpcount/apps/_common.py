"""What every app shares: choosing its counting mechanism, its sensitivity, the test hook.

Sensitivity of a vector stream (the one rule every app uses)
-------------------------------------------------------------
An app turns its input into a stream of vectors x_1, …, x_T ∈ R^d and releases
their private prefix sums with a :class:`~dpcount.counting.CountingMechanism`.
Every dpcount counting mechanism perturbs a linear image R·X of the stream
(X the T×d matrix of steps, the same R for every coordinate, noise i.i.d. per
entry) and calibrates the noise to the sensitivities (r₁·Δ₁, r₂·Δ₂) of R·X for
a change of ONE step with ‖δ‖₁ ≤ Δ₁ (Laplace) or ‖δ‖₂ ≤ Δ₂ (Gaussian), where
r₁, r₂ bound the ℓ₁/ℓ₂ norms of R's columns (``_unit_sensitivities``).

In several apps a neighbouring input changes *several* steps (a letter changes
ℓ substring indicators, an edge insertion changes a degree histogram at every
later step). Write the change as a T×d matrix D with columns D_c (coordinate c
over time). Then, by the triangle inequality per coordinate,

* ‖R·D‖₁ = Σ_c ‖R·D_c‖₁ ≤ r₁ · Σ_c ‖D_c‖₁ = r₁ · Γ₁,
* ‖R·D‖_F = (Σ_c ‖R·D_c‖₂²)^½ ≤ r₂ · (Σ_c ‖D_c‖₁²)^½ = r₂ · Γ₂,

so declaring ``step_sensitivity = Γ₁`` (Laplace) or ``Γ₂`` (Gaussian), and
``step_l2_sensitivity = Γ₂`` (Laplace with a delta), calibrates the mechanism
for the multi-step change exactly as for a one-step change of that size. This
is :class:`StreamSensitivity`. For a change confined to one step, Γ₁ and Γ₂ are
that step's ℓ₁ and ℓ₂ norms. Note Γ₂ (ℓ₂ over coordinates of the per-coordinate
total variation) is never larger than Σ_t ‖δ_t‖₂ (Minkowski) and never larger
than Γ₁.

The papers sometimes use the ℓ₂ norm of the whole change, (Σ_{t,c} δ_{t,c}²)^½,
as if it were one step's: that is *not* a valid sensitivity for correlated
mechanisms (R's columns overlap), and dpcount never does it.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_bool, check_choice, check_integer, check_real
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import MECHANISMS, build_mechanism, default_noise
from dpcount.privacy.guarantee import DISCRETE_NOISE_KINDS, NOISE_KINDS, PrivacyGuarantee
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.tails import gaussian_two_sided_quantile

__all__ = [
    "DEFAULT_APPROX_MECHANISM",
    "DEFAULT_PURE_MECHANISM",
    "AppBase",
    "MechanismChoice",
    "StreamSensitivity",
    "gaussian_two_sided_quantile",
]

#: default with a delta on fractional data: the square-root factorization with Gaussian
#: noise (constant-matters); integer data default to the k-ary tree with integer noise
DEFAULT_APPROX_MECHANISM = "sqrt"
#: default without a delta: k-ary tree, k = 19, with subtraction (pure ε-DP); discrete
#: Laplace noise on integer data, Laplace noise otherwise
DEFAULT_PURE_MECHANISM = "kary"


@dataclass(frozen=True)
class StreamSensitivity:
    """Largest change of an app's vector stream between neighbouring inputs.

    Attributes:
        l1: Γ₁ = max Σ_c Σ_t |δ_{t,c}| (used for Laplace noise).
        l2: Γ₂ = max (Σ_c (Σ_t |δ_{t,c}|)²)^½ (used for Gaussian noise, and as the
            ℓ₂ bound of Laplace noise with a delta). Always Γ₂ ≤ Γ₁.

    See the module docstring for why these are the right inputs to a counting
    mechanism's ``step_sensitivity`` even when the change spans several steps.
    """

    l1: float
    l2: float

    def __post_init__(self) -> None:
        l1 = check_real("l1 sensitivity", self.l1, gt=0)
        l2 = check_real("l2 sensitivity", self.l2, gt=0)
        if l2 > l1 * (1.0 + 1e-12):
            raise ValueError(f"l2 sensitivity must be <= l1 sensitivity {l1!r}, got {l2!r}")

    def for_noise(self, noise: str) -> tuple[float, float | None]:
        """``(step_sensitivity, step_l2_sensitivity)`` for the counting mechanism."""
        if noise == "gaussian":
            return self.l2, None
        return self.l1, self.l2


@dataclass(frozen=True)
class MechanismChoice:
    """Which registered counting mechanism an app runs, and its noise.

    The safe path is the default where the data allow it (docs/safe-noise.md):
    an app whose stream is integer-valued (counts) and whose ℓ₁ sensitivity is a
    whole number gets integer noise — ``"discrete-laplace"`` without delta,
    ``"discrete-gaussian"`` with one — on the k-ary tree, whose release is then an
    exact integer function of the noisy node values, so floating-point rounding
    cannot leak the data. Continuous noise is the default only for fractional
    streams (e.g. :class:`~dpcount.apps.RunningAverage`), or for a named mechanism
    that cannot take integer noise.

    Attributes:
        name: a name in :data:`dpcount.counting.registry.MECHANISMS`; ``None``
            picks the default: ``"kary"`` (k = 19 with subtraction) without a
            delta, or with integer noise; else ``"sqrt"`` (square-root
            factorization, Gaussian noise, constant-matters).
        noise: ``"laplace"``, ``"gaussian"``, ``"discrete-laplace"`` or
            ``"discrete-gaussian"`` (integer data only; the trees and Honaker);
            ``None``: integer noise for integer data where possible (see above),
            else Gaussian when a delta is given and Laplace without.
        calibration: passed to the mechanism (Gaussian method or Laplace rule).
        k, subtract: tree options (ignored by mechanisms without them).
    """

    name: str | None = None
    noise: str | None = None
    calibration: str | None = None
    k: int = 19
    subtract: bool = True

    def __post_init__(self) -> None:
        if self.name is not None:
            check_choice("mechanism", self.name, MECHANISMS)
        if self.noise is not None:
            check_choice("noise", self.noise, NOISE_KINDS)
        check_integer("k", self.k, ge=2)
        check_bool("subtract", self.subtract)

    def resolve(
        self, delta: float | None, sensitivity: StreamSensitivity | None = None
    ) -> tuple[str, str]:
        """``(mechanism name, noise kind)`` for this delta.

        ``sensitivity``: given by apps whose stream is integer-valued; then integer
        noise is the default when its ℓ₁ bound is a whole number (see the class).
        """
        name, noise = self.name, self.noise
        if noise is None and sensitivity is not None:
            noise = default_noise(name or "kary", delta, sensitivity.l1)
        if name is None:
            discrete = noise in DISCRETE_NOISE_KINDS
            name = DEFAULT_PURE_MECHANISM if delta is None or discrete else DEFAULT_APPROX_MECHANISM
        if noise is None:
            noise = "laplace" if delta is None else "gaussian"
        return name, noise

    def build(
        self,
        *,
        horizon: int,
        epsilon: float,
        delta: float | None,
        rng: RNGLike,
        sensitivity: StreamSensitivity,
        integer: bool = False,
    ) -> CountingMechanism:
        """Build the counting mechanism through the registry, calibrated for ``sensitivity``
        (``integer``: the app's stream is integer-valued, see :meth:`resolve`)."""
        name, noise = self.resolve(delta, sensitivity if integer else None)
        step, step_l2 = sensitivity.for_noise(noise)
        kwargs: dict[str, Any] = {
            "horizon": horizon,
            "epsilon": epsilon,
            "delta": delta,
            "noise": noise,
            "rng": rng,
            "step_sensitivity": step,
            "calibration": self.calibration,
            "k": self.k,
            "subtract": self.subtract,
        }
        if step_l2 is not None:
            kwargs["step_l2_sensitivity"] = step_l2
        return build_mechanism(name, **kwargs)


_App = TypeVar("_App", bound="AppBase")


class AppBase:
    """Common surface of the apps: the mechanism, its guarantee, exact variances, test hook.

    Subclasses set ``self.mechanism``, ``self.noise`` and ``self.neighbouring``
    (the app's own neighbouring relation, in words) and implement :meth:`_reset`
    (back to step 0).
    """

    mechanism: CountingMechanism
    noise: str
    neighbouring: str

    def _reset(self) -> None:
        raise NotImplementedError

    @property
    def privacy(self) -> PrivacyGuarantee | None:
        """The guarantee, stated for the app's neighbouring relation (None under a test sampler)."""
        base = self.mechanism.privacy
        if base is None:
            return None
        return dataclasses.replace(base, neighbouring=self.neighbouring)

    def describe(self) -> str:
        """One line: the app, its mechanism and its guarantee."""
        guarantee = "no privacy guarantee" if self.privacy is None else self.privacy.describe()
        return f"{type(self).__name__} over {self.mechanism!r}: {guarantee}"

    def variances(self) -> NDArray[np.float64]:
        """Exact variance of each released coordinate at steps 1..horizon (data-independent)."""
        return self.mechanism.variances()

    def with_sampler(self: _App, sampler: NoiseSampler) -> _App:
        """A fresh copy (at step 0) whose mechanism uses ``sampler`` as is.

        For testing, e.g. with :class:`~dpcount.privacy.ZeroNoise` the app returns
        the exact non-private answer. The copy carries no privacy guarantee.
        """
        clone = copy.copy(self)
        clone.mechanism = self.mechanism.with_sampler(sampler)
        clone._reset()
        return clone
