"""Private running mean of a bounded stream (continual averaging).

The mean of the first t values is the prefix sum divided by the public step
count t, so a continual counting mechanism gives it directly (constant-matters
§1.3: "counting and averaging under continual release follows from" Thm 1.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_array_in_range,
    check_bool,
    check_real,
    check_real_dtype,
)
from dpcount.apps._bounds import check_on_out_of_bounds
from dpcount.apps._common import AppBase, AppFields, StreamSensitivity
from dpcount.privacy.budget import Budget
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RunningAverage"]


class RunningAverage(AppBase):
    """Private running mean of values in ``[lower, upper]``, one value per step.

    ``update(v)`` returns (S_t + N_t)/t, where S_t is the sum of the first t
    values and N_t the counting mechanism's noise at step t.

    Neighbouring relation (event level): two streams differ in one value, both
    in [lower, upper]; the sensitivity passed to the counting mechanism is
    ``upper − lower`` (ℓ₁ = ℓ₂ for scalar steps).

    Formal guarantee: for that event-level relation the releases of all T steps
    together are ε-DP without a delta and (ε, δ)-DP with one — the counting
    mechanism's guarantee (:attr:`privacy`, :meth:`dp_event`), calibrated for
    step sensitivity ``upper − lower``; the division by the public t is
    post-processing. Averaging under continual release as a consequence of
    continual counting: Fichtenberger, Henzinger, Upadhyay, "Constant Matters:
    Fine-grained Error Bound on Differentially Private Continual Observation",
    ICML 2023 (arXiv:2202.11205), §1.3.

    Exact error: the mean at step t is unbiased with variance
    ``variances()[t − 1]`` = Var(N_t)/t².

    Out-of-bound values (:mod:`dpcount.apps._bounds`): with
    ``on_out_of_bounds="error"`` (the default) a value outside [lower, upper]
    raises ValueError and is not consumed. That refusal is a data-dependent
    signal the guarantee does not cover: a stream that stops at step t reveals
    that its t-th value was out of bounds. With ``on_out_of_bounds="clip"``
    (or ``clip=True``) every value is replaced by the nearest bound before use:
    clipping is a fixed per-value map into [lower, upper], so two raw streams
    differing in one value give clipped streams differing in one value within
    the bounds, and the guarantee above holds for the raw streams with the same
    sensitivity; the mean is that of the clipped values. The attribute
    ``clipped`` counts the values clipped so far: exact and NOT private (for
    the caller only, never to be published with the release). NaN and
    infinities always raise.

    Args:
        horizon: T, the number of steps.
        lower, upper: the public bounds of every value (lower < upper).
        on_out_of_bounds: ``"error"`` (default) or ``"clip"``, see above.
        clip: ``True`` is the older spelling of ``on_out_of_bounds="clip"``.
        mechanism, k, subtract, rng: as for :class:`~dpcount.apps.ContinualHistogram`.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon``, ``delta``, ``noise``, ``calibration``), as for
            :class:`~dpcount.apps.ContinualHistogram`, except that the default
            noise is continuous (Gaussian iff delta given): the values are
            fractional, and integer noise needs whole-number steps. For
            whole-number values pass ``noise="discrete-laplace"`` (or
            ``"discrete-gaussian"``) with integer ``lower``/``upper``. The step
            sensitivity is ``upper − lower``, set by the app (a budget that sets
            one is refused).

    Example:
        >>> from dpcount.apps import RunningAverage
        >>> from dpcount.privacy import ZeroNoise
        >>> avg = RunningAverage(4, epsilon=1.0, lower=0.0, upper=10.0).with_sampler(ZeroNoise())
        >>> [avg.update(v) for v in (2.0, 4.0, 9.0)]
        [2.0, 3.0, 5.0]
    """

    def __init__(
        self,
        horizon: int,
        *,
        lower: float,
        upper: float,
        on_out_of_bounds: str = "error",
        clip: bool = False,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[AppFields],
    ) -> None:
        user_budget, choice = self._options(
            budget, fields, bounds="lower and upper (upper - lower)"
        )
        self.lower = check_real("lower", lower)
        self.upper = check_real("upper", upper)
        if not self.upper > self.lower:
            raise ValueError(f"upper must be > lower={lower!r}, got {upper!r}")
        mode = check_on_out_of_bounds(on_out_of_bounds)
        if check_bool("clip", clip):
            if on_out_of_bounds != "error":
                raise ValueError(
                    f"give either clip=True or on_out_of_bounds={on_out_of_bounds!r}, not both"
                )
            mode = "clip"
        self.on_out_of_bounds = mode
        self.clip = mode == "clip"
        width = self.upper - self.lower
        self._setup_mechanism(
            choice,
            user_budget,
            StreamSensitivity.scalar(width),
            horizon=horizon,
            rng=rng,
            neighbouring="event-level: streams differ in one value, both in "
            f"[{self.lower:g}, {self.upper:g}]",
        )
        self._reset()

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        #: values clipped into [lower, upper] so far: exact, NOT private (caller only)
        self.clipped = 0

    def _structure(self) -> str:
        return (
            f"horizon={self.horizon}, lower={self.lower:g}, upper={self.upper:g}, "
            f"on_out_of_bounds={self.on_out_of_bounds!r}"
        )

    @property
    def step(self) -> int:
        """Steps released so far."""
        return self._stream.step

    def _values(self, values: Any, name: str) -> tuple[NDArray[np.float64], int]:
        """The values to release and how many of them were clipped."""
        if self.clip:
            arr = np.asarray(check_real_dtype(name, as_array(name, values)), dtype=np.float64)
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} must be finite (clipping applies to finite values only)")
            outside = int(np.count_nonzero((arr < self.lower) | (arr > self.upper)))
            return np.clip(arr, self.lower, self.upper), outside
        return check_array_in_range(name, values, low=self.lower, high=self.upper), 0

    def update(self, value: float) -> float:
        """Add one value; return the private mean of all values so far."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise TypeError(
                f"value must be a real number, got {value!r} of type {type(value).__name__}"
            )
        arr, outside = self._values(np.float64(value), "value")
        total = float(self._stream.update(float(arr)))
        self.clipped += outside
        return total / self._stream.step

    def update_many(self, values: Any) -> NDArray[np.float64]:
        """Add several values (shape ``(n,)``); return the private means after each."""
        arr, outside = self._values(values, "values")
        if arr.ndim != 1:
            raise ValueError(f"values must have shape (n,), got shape {arr.shape}")
        start = self._stream.step
        sums = self._stream.update_many(arr)
        self.clipped += outside
        return sums / np.arange(start + 1, start + 1 + arr.shape[0])

    def variances(self) -> NDArray[np.float64]:
        """Exact variance of the private mean at steps 1..horizon: Var(N_t)/t²."""
        t = np.arange(1, self.horizon + 1, dtype=np.float64)
        return self.mechanism.variances() / (t * t)
