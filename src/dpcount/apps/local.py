"""Non-interactive local median and 1-D convex risk minimization (constant-matters App. B.5).

n clients each hold d_i ∈ [0, 1]. The interval is cut into w = ⌈ε√n⌉ buckets
I_0, …, I_{w−1} of width 1/w. Client i builds two one-hot vectors u_i, v_i ∈
{0, 1}^w — u_i[j] = v_i[w−1−j] = 1 for its bucket j — and sends the outputs
y_i, z_i of a continual counting mechanism run over the w "steps" of u_i and
v_i (private prefix sums). The server forms

    x̂[t] = (1/n)·(Σ_i y_i[t] − Σ_i z_i[w−2−t])      (eq. (10); the z term is 0 at t = w−1)

≈ (#{d_i in buckets ≤ t} − #{d_i in buckets > t})/n, the slope of the median
loss θ ↦ (1/n)Σ_i |θ − d_i| at the right edge of bucket t, and returns the
minimizer of f(x̂, θ) = ∫_0^θ g(x̂, s) ds over the grid {0, 1/w, …, 1}, where g is
x̂[t] on bucket t: f(k/w) = (1/w)·Σ_{t<k} x̂[t].

General 1-Lipschitz convex losses (Theorem B.7, Smith–Thakurta–Upadhyay 2017):
a client with loss derivative ∂ℓ(θ; d) ∈ [−1, 1] (non-decreasing in θ) first
draws z ∈ [0, 1] with CDF F(θ) = (1 + ∂ℓ(θ; d))/2; then E|θ − z| has derivative
2F(θ) − 1 = ∂ℓ(θ; d), so the median objective of the z's equals the risk up to
a constant, and the protocol above runs on the z's
(:func:`local_risk_minimization`).

Corrections to the paper: the bucket size is 1/w (the text's ⌊1/(ε√n)⌋ is 0);
Var x̂[t] = (Var_t + Var_{w−2−t})/n with the per-step variances of the counting
mechanism (the paper writes 2σ_t/n with the same t for both terms); and the
calibration is for the local neighbouring relation — *any* two inputs — under
which u_i changes at two steps (see :class:`LocalMedianProtocol`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_array_in_range,
    check_callable,
    check_integer,
    check_real_array,
)
from dpcount.apps._bounds import check_on_out_of_bounds
from dpcount.apps._common import AppBase, AppFields, StreamSensitivity
from dpcount.privacy.budget import Budget
from dpcount.privacy.rng import RNGLike, as_generator

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "LocalMedianProtocol",
    "LocalMedianResult",
    "local_median",
    "local_risk_minimization",
]

#: floats per block of client messages simulated at once (memory bound, not a loop per client)
_BLOCK_FLOATS = 1 << 21


@dataclass(frozen=True, eq=False)
class LocalMedianResult:
    """What the server computes.

    Attributes:
        estimate: the minimizer of f(x̂, ·) over the grid (first one on ties).
        buckets: w.
        slopes: x̂, shape (w,).
        slope_variances: exact Var x̂[t], shape (w,).
        grid: the grid {0, 1/w, …, 1}, shape (w + 1,).
        objective: f(x̂, ·) on the grid, shape (w + 1,).
        clipped: clients whose value was clipped into [0, 1]
            (``on_out_of_bounds="clip"``; else 0). Exact and NOT private: for the
            caller only, never to be published with the estimate.
    """

    estimate: float
    buckets: int
    slopes: NDArray[np.float64]
    slope_variances: NDArray[np.float64]
    grid: NDArray[np.float64]
    objective: NDArray[np.float64]
    clipped: int = 0


class LocalMedianProtocol(AppBase):
    """The non-interactive LDP median protocol of App. B.5 for ``n_clients`` clients.

    Each client runs one counting mechanism over w steps on the 2-dimensional
    stream (u_i[t], v_i[t]) — the paper's two counters, with independent noise
    per coordinate and one joint calibration — and sends its release. The
    clients are simulated vectorized: all clients' streams are the coordinates
    of one ``release`` of shape (w, 2·clients), in blocks bounded in memory.

    Neighbouring relation (local model, per client): any two inputs d, d′ ∈ [0, 1].
    Moving the client's bucket moves the single 1 of u_i and of v_i: each of the
    two coordinates changes at two steps by 1, so (per-coordinate total
    variation, :class:`~dpcount.apps.StreamSensitivity`) Γ₁ = 4 and Γ₂ = 2√2.
    Splitting (ε/2, δ/2) between two separately calibrated counters with
    sensitivity 2 each, as the paper does, gives the same Laplace scale and a
    larger Gaussian σ; the paper's sensitivity 1 would under-noise.

    Formal guarantee: each client's message is ε-LDP without a delta and
    (ε, δ)-LDP with one — the counting mechanism's guarantee for the
    sensitivity above (:attr:`privacy`, :meth:`dp_event`: one client's message);
    the server's output is post-processing. Fichtenberger, Henzinger, Upadhyay,
    "Constant Matters: Fine-grained Error Bound on Differentially Private
    Continual Observation", ICML 2023 (arXiv:2202.11205), App. B.5 (with the
    sensitivity corrected, see the module docstring).

    Out-of-bound data (:mod:`dpcount.apps._bounds`): with
    ``on_out_of_bounds="error"`` (the default) :meth:`run` and
    :meth:`bucket_of` raise ValueError if a value is outside [0, 1], and no
    message is sent. That refusal is a data-dependent signal the LDP guarantee
    does not cover (that the run failed reveals that some client's value was
    out of range); keep such errors with the data holder. With
    ``on_out_of_bounds="clip"`` each value is clipped to [0, 1] before it is
    bucketed, a fixed map of that client's value alone, so every message keeps
    its ε- or (ε, δ)-LDP guarantee (any two inputs are neighbours in the local
    model). ``clipped`` is the number of clients clipped in the latest
    :meth:`bucket_of`/:meth:`run`: exact and NOT private (for the caller only;
    in a real deployment it would be known only to the clients themselves).
    NaN and infinities always raise.

    Exact error: Var x̂[t] = (Var_t + Var_{w−2−t})/n (:meth:`slope_variances`),
    Var the counting mechanism's per-step variances (:meth:`variances`).

    Args:
        n_clients: n ≥ 1.
        buckets: w (default ⌈ε√n⌉, at least 1).
        mechanism, k, subtract, rng: as for :class:`~dpcount.apps.ContinualHistogram`
            (horizon = w).
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon``: ε > 0; ``delta``: None for pure ε-LDP, else δ ∈ (0, 1);
            ``noise``, ``calibration``), as for
            :class:`~dpcount.apps.ContinualHistogram`. The step sensitivity is
            fixed by the protocol (a budget that sets one is refused).
        on_out_of_bounds: ``"error"`` (default) or ``"clip"``, see above.

    Example:
        >>> from dpcount.apps import LocalMedianProtocol
        >>> from dpcount.privacy import ZeroNoise
        >>> protocol = LocalMedianProtocol(4, epsilon=2.0)  # w = ⌈2·√4⌉ = 4 buckets
        >>> exact = protocol.with_sampler(ZeroNoise()).run([0.1, 0.3, 0.35, 0.9])
        >>> exact.slopes.tolist(), exact.estimate  # median bucket [0.25, 0.5)
        ([-0.5, 0.5, 0.5, 1.0], 0.25)
    """

    _shown = ("n_clients", "buckets")

    def __init__(
        self,
        n_clients: int,
        *,
        buckets: int | None = None,
        on_out_of_bounds: str = "error",
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[AppFields],
    ) -> None:
        user_budget, choice = self._options(
            budget, fields, bounds="the protocol (two steps of each of two coordinates change by 1)"
        )
        self.on_out_of_bounds = check_on_out_of_bounds(on_out_of_bounds)
        #: clients clipped into [0, 1] by the latest bucket_of/run: exact, NOT private
        self.clipped = 0
        self.n_clients = check_integer("n_clients", n_clients, ge=1)
        self.buckets = (
            max(1, math.ceil(user_budget.epsilon * math.sqrt(self.n_clients)))
            if buckets is None
            else check_integer("buckets", buckets, ge=1)
        )
        self._setup_mechanism(
            choice,
            user_budget,
            StreamSensitivity(4.0, 2.0 * math.sqrt(2.0)),
            horizon=self.buckets,
            rng=rng,
            neighbouring="local: any two inputs of one client",
            integer=True,  # integer-valued stream
        )

    def _reset(self) -> None:
        """No stream state; only the (non-private) clipping report."""
        self.clipped = 0

    # -- client side ------------------------------------------------------------------
    def bucket_of(self, data: Any) -> NDArray[np.int64]:
        """Bucket j = min(⌊d·w⌋, w − 1) of each value in [0, 1] (shape (n_clients,));
        values outside [0, 1] raise, or are clipped with ``on_out_of_bounds="clip"``."""
        if self.on_out_of_bounds == "clip":
            raw = check_array_in_range(
                "data", data, low=-math.inf, high=math.inf, shape=(self.n_clients,)
            )
            d = np.clip(raw, 0.0, 1.0)
            self.clipped = int(np.count_nonzero(d != raw))
        else:
            d = check_array_in_range("data", data, low=0.0, high=1.0, shape=(self.n_clients,))
        return np.minimum(np.floor(d * self.buckets), self.buckets - 1).astype(np.int64)

    def client_messages(
        self, bucket_indices: Any
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Every client's message (y_i, z_i), each of shape (clients, w).

        Args:
            bucket_indices: each client's bucket in 0..w−1 (any number of clients).
        """
        j = self._check_buckets(bucket_indices)
        w, c = self.buckets, j.shape[0]
        x = np.zeros((w, 2 * c))
        cols = np.arange(c)
        x[j, cols] = 1.0  # u_i
        x[w - 1 - j, c + cols] = 1.0  # v_i
        released = self.mechanism.release(x)
        return released[:, :c].T.copy(), released[:, c:].T.copy()

    def _check_buckets(self, bucket_indices: Any) -> NDArray[np.int64]:
        arr = as_array("bucket_indices", bucket_indices)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"bucket_indices must be a non-empty 1-D array, got shape {arr.shape}")
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"bucket_indices must hold integers, got dtype {arr.dtype}")
        bad = (arr < 0) | (arr >= self.buckets)
        if bad.any():
            raise ValueError(
                f"bucket_indices must be in [0, {self.buckets}), got {int(arr[np.argmax(bad)])}"
            )
        return arr.astype(np.int64)

    # -- server side ------------------------------------------------------------------
    def aggregate(self, y_sum: Any, z_sum: Any) -> NDArray[np.float64]:
        """x̂ of eq. (10) from the sums over clients of y_i and of z_i (each shape (w,))."""
        w = self.buckets
        y = check_array_in_range("y_sum", y_sum, low=-math.inf, high=math.inf, shape=(w,))
        z = check_array_in_range("z_sum", z_sum, low=-math.inf, high=math.inf, shape=(w,))
        x = y.copy()
        x[: w - 1] -= z[w - 2 :: -1] if w > 1 else 0.0
        slopes: NDArray[np.float64] = x / self.n_clients
        return slopes

    def slope_variances(self) -> NDArray[np.float64]:
        """Exact Var x̂[t] = (Var_t + Var_{w−2−t})/n for t = 0..w−1 (no z term at t = w−1)."""
        v = self.mechanism.variances()
        out = v.copy()
        out[: self.buckets - 1] += v[self.buckets - 2 :: -1] if self.buckets > 1 else 0.0
        result: NDArray[np.float64] = out / self.n_clients
        return result

    def run(self, data: Any) -> LocalMedianResult:
        """Run the protocol on each client's value in [0, 1] (shape (n_clients,))."""
        buckets = self.bucket_of(data)
        return self._run(buckets, self.clipped)

    def run_buckets(self, bucket_indices: Any) -> LocalMedianResult:
        """Run the protocol on each client's bucket (shape (n_clients,))."""
        self.clipped = 0
        return self._run(bucket_indices, 0)

    def _run(self, bucket_indices: Any, clipped: int) -> LocalMedianResult:
        j = self._check_buckets(bucket_indices)
        if j.shape[0] != self.n_clients:
            raise ValueError(
                f"bucket_indices must have {self.n_clients} entries (n_clients), got {j.shape[0]}"
            )
        w = self.buckets
        block = max(1, _BLOCK_FLOATS // (2 * w))
        y_sum, z_sum = np.zeros(w), np.zeros(w)
        for start in range(0, self.n_clients, block):
            y, z = self.client_messages(j[start : start + block])
            y_sum += y.sum(axis=0)
            z_sum += z.sum(axis=0)
        return self._result(self.aggregate(y_sum, z_sum), clipped)

    def _result(self, slopes: NDArray[np.float64], clipped: int) -> LocalMedianResult:
        w = self.buckets
        objective = np.concatenate(([0.0], np.cumsum(slopes) / w))
        grid = np.arange(w + 1) / w
        k = int(np.argmin(objective))
        return LocalMedianResult(
            estimate=float(grid[k]),
            buckets=w,
            slopes=slopes,
            slope_variances=self.slope_variances(),
            grid=grid,
            objective=objective,
            clipped=clipped,
        )


def local_median(data: Any, **options: Any) -> LocalMedianResult:
    """Run :class:`LocalMedianProtocol` with one client per value of ``data`` (in [0, 1]).

    ``options`` (keyword only): the protocol's budget (``budget=`` or
    ``epsilon=``, ``delta=``, …), ``buckets``, ``on_out_of_bounds`` and its
    mechanism options (with ``on_out_of_bounds="clip"`` the result's ``clipped``
    reports the clipped clients: not private). The guarantee is the protocol's:
    every client's message is ε- or (ε, δ)-LDP.

    Example:
        >>> import numpy as np
        >>> from dpcount.apps import local_median
        >>> data = np.random.default_rng(1).beta(2, 5, size=10_000)
        >>> result = local_median(data, epsilon=1.0, rng=2)  # ε-LDP, k-ary tree
        >>> result.buckets, 0.0 <= result.estimate <= 1.0
        (100, True)
    """
    n = as_array("data", data).size
    if n == 0:
        raise ValueError("data must contain at least one value, got none")
    return LocalMedianProtocol(n, **options).run(data)


def smith_randomizer_buckets(
    data: Any,
    gradient: Callable[[NDArray[np.float64], NDArray[np.float64]], Any],
    buckets: int,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """Bucket of z_i ~ F_i(θ) = (1 + ∂ℓ(θ; d_i))/2 for every client (Theorem B.7).

    Only the bucket of z is needed: P(z in bucket j) = F(e_{j+1}) − F(e_j) with
    interior edges e_j = j/w (F = 0 below 0, the atom at 1 goes to the last
    bucket). ``gradient(theta, d)`` is called with theta of shape (1, w − 1)
    and d of shape (n, 1) and must return shape (n, w − 1), values in [−1, 1],
    non-decreasing along theta (a convex 1-Lipschitz loss).
    """
    check_callable("gradient", gradient)
    d = check_real_array("data", data, allow_empty=True)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"data must be a non-empty 1-D array, got shape {d.shape}")
    w = check_integer("buckets", buckets, ge=1)
    if w == 1:
        return np.zeros(d.size, dtype=np.int64)
    edges = np.arange(1, w, dtype=np.float64)[None, :] / w
    g = check_array_in_range(
        "gradient(theta, data)",
        gradient(edges, d[:, None]),
        low=-1.0,
        high=1.0,
        shape=(d.size, w - 1),
    )
    if (np.diff(g, axis=1) < 0).any():
        i = int(np.argwhere(np.diff(g, axis=1) < 0)[0, 0])
        raise ValueError(
            f"gradient(theta, data) must be non-decreasing in theta (a convex loss); "
            f"it decreases for data[{i}] = {float(d[i])!r}"
        )
    cdf = (1.0 + g) / 2.0
    u = rng.random(d.size)
    chosen: NDArray[np.int64] = (cdf < u[:, None]).sum(axis=1).astype(np.int64)
    return chosen


def local_risk_minimization(
    data: Any,
    gradient: Callable[[NDArray[np.float64], NDArray[np.float64]], Any],
    *,
    rng: RNGLike = None,
    **options: Any,
) -> LocalMedianResult:
    """Non-interactive LDP minimization of (1/n)Σ ℓ(θ; d_i) over θ ∈ [0, 1] (App. B.5).

    Each client draws z_i with CDF (1 + ∂ℓ(θ; d_i))/2 (Theorem B.7), whose median
    objective equals its risk up to a constant, and takes part in
    :class:`LocalMedianProtocol` with z_i. The randomizer runs on the client
    before the private protocol, so the LDP guarantee is the protocol's.

    Args:
        data: each client's value (1-D, numeric).
        gradient: ∂ℓ(θ; d) as a broadcasting function (see
            :func:`smith_randomizer_buckets`).
        rng: randomness for both the randomizer and the protocol's noise.
        options: the LDP budget (``budget=`` or ``epsilon=``, ``delta=``, …),
            ``buckets`` and the mechanism options of the protocol (keyword only).

    Example:
        >>> import numpy as np
        >>> from dpcount.apps import local_risk_minimization
        >>> data = np.random.default_rng(3).uniform(0.2, 0.6, size=10_000)
        >>> squared = lambda theta, d: theta - d  # ℓ = (θ − d)²/2, minimized by the mean
        >>> result = local_risk_minimization(data, squared, epsilon=1.0, rng=4)
        >>> result.buckets, result.objective.shape
        (100, (101,))
    """
    check_callable("gradient", gradient)
    gen = as_generator(rng)
    d = check_real_array("data", data, allow_empty=True)
    n = d.size
    if n == 0:
        raise ValueError("data must contain at least one value, got none")
    protocol = LocalMedianProtocol(n, rng=gen, **options)
    return protocol.run_buckets(smith_randomizer_buckets(d, gradient, protocol.buckets, gen))
