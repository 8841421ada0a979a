"""Private running mean of a bounded stream (continual averaging).

The mean of the first t values is the prefix sum divided by the public step
count t, so a continual counting mechanism gives it directly (constant-matters
§1.3: "counting and averaging under continual release follows from" Thm 1.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_array_in_range,
    check_bool,
    check_real,
    check_real_dtype,
)
from dpcount.apps._common import AppBase, MechanismChoice, StreamSensitivity
from dpcount.privacy.rng import RNGLike

__all__ = ["RunningAverage"]


class RunningAverage(AppBase):
    """Private running mean of values in ``[lower, upper]``, one value per step.

    ``update(v)`` returns (S_t + N_t)/t, where S_t is the sum of the first t
    values and N_t the counting mechanism's noise at step t.

    Neighbouring relation (event level): two streams differ in one value, both
    in [lower, upper]; the sensitivity passed to the counting mechanism is
    ``upper − lower`` (ℓ₁ = ℓ₂ for scalar steps).

    Privacy: the counting mechanism's guarantee for that relation (ε-DP without
    a delta, (ε, δ)-DP with one); the division by the public t is
    post-processing.

    Exact error: the mean at step t is unbiased with variance
    ``variances()[t − 1]`` = Var(N_t)/t².

    Values outside [lower, upper] raise ValueError, unless ``clip=True``, in
    which case they are replaced by the nearest bound before use (the privacy
    guarantee then holds for the raw stream, and the mean is that of the clipped
    values).

    Args:
        horizon: T, the number of steps.
        epsilon: ε > 0.
        delta: None for pure ε-DP, else δ ∈ (0, 1).
        lower, upper: the public bounds of every value (lower < upper).
        clip: clip out-of-range values instead of raising (default False).
        mechanism, noise, calibration, k, subtract, rng: as for
            :class:`~dpcount.apps.ContinualHistogram`, except that the default
            noise is continuous (Gaussian iff delta given): the values are
            fractional, and integer noise needs whole-number steps. For
            whole-number values pass ``noise="discrete-laplace"`` (or
            ``"discrete-gaussian"``) with integer ``lower``/``upper``.

    Example:
        >>> from dpcount.apps import RunningAverage
        >>> from dpcount.privacy import ZeroNoise
        >>> avg = RunningAverage(4, 1.0, lower=0.0, upper=10.0).with_sampler(ZeroNoise())
        >>> [avg.update(v) for v in (2.0, 4.0, 9.0)]
        [2.0, 3.0, 5.0]
    """

    def __init__(
        self,
        horizon: int,
        epsilon: float,
        delta: float | None = None,
        *,
        lower: float,
        upper: float,
        clip: bool = False,
        mechanism: str | None = None,
        noise: str | None = None,
        calibration: str | None = None,
        k: int = 19,
        subtract: bool = True,
        rng: RNGLike = None,
    ) -> None:
        self.lower = check_real("lower", lower)
        self.upper = check_real("upper", upper)
        if not self.upper > self.lower:
            raise ValueError(f"upper must be > lower={lower!r}, got {upper!r}")
        self.clip = check_bool("clip", clip)
        width = self.upper - self.lower
        self.sensitivity = StreamSensitivity(width, width)
        choice = MechanismChoice(mechanism, noise, calibration, k, subtract)
        self.noise = choice.resolve(delta)[1]
        self.mechanism = choice.build(
            horizon=horizon, epsilon=epsilon, delta=delta, rng=rng, sensitivity=self.sensitivity
        )
        self.horizon = self.mechanism.horizon
        self.neighbouring = (
            f"event-level: streams differ in one value, both in [{self.lower:g}, {self.upper:g}]"
        )
        self._reset()

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()

    def __repr__(self) -> str:
        return (
            f"RunningAverage(horizon={self.horizon}, lower={self.lower:g}, upper={self.upper:g}, "
            f"clip={self.clip}, mechanism={self.mechanism!r})"
        )

    @property
    def step(self) -> int:
        """Steps released so far."""
        return self._stream.step

    def _values(self, values: Any, name: str) -> NDArray[np.float64]:
        if self.clip:
            arr = np.asarray(check_real_dtype(name, as_array(name, values)), dtype=np.float64)
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} must be finite (clip=True clips only finite values)")
            return np.clip(arr, self.lower, self.upper)
        return check_array_in_range(name, values, low=self.lower, high=self.upper)

    def update(self, value: float) -> float:
        """Add one value; return the private mean of all values so far."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise TypeError(
                f"value must be a real number, got {value!r} of type {type(value).__name__}"
            )
        v = float(self._values(np.float64(value), "value"))
        total = float(self._stream.update(v))
        return total / self._stream.step

    def update_many(self, values: Any) -> NDArray[np.float64]:
        """Add several values (shape ``(n,)``); return the private means after each."""
        arr = self._values(values, "values")
        if arr.ndim != 1:
            raise ValueError(f"values must have shape (n,), got shape {arr.shape}")
        start = self._stream.step
        sums = self._stream.update_many(arr)
        return sums / np.arange(start + 1, start + 1 + arr.shape[0])

    def variances(self) -> NDArray[np.float64]:
        """Exact variance of the private mean at steps 1..horizon: Var(N_t)/t²."""
        t = np.arange(1, self.horizon + 1, dtype=np.float64)
        return self.mechanism.variances() / (t * t)
