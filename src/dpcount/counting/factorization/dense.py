"""Any factorization A = L·R of the counting matrix, as dense matrices (small T).

The factorization mechanism (Li et al. 2015; count-on-your-elders eq. in §1):
release L(R x + z) = A x + L z with z i.i.d. noise calibrated to the column norms
of R. For continual release the pair must be *causal*: a release at step t may
only use noisy measurements of steps ≤ t. With L of shape (T, m) and R of shape
(m, T), measurement i involves the steps up to τ_i (the last nonzero column of
row i of R), and L[t, i] must be 0 whenever τ_i > t. A lower-triangular square
pair is the usual case (τ_i ≤ i ≤ t), and the (steps × nodes) factorizations of
the binary tree, Honaker Online and the smooth binary mechanism are causal too.

Causality is checked by default but is not what makes the release computable
online here: the release is S_t + (L z)_t with z independent of the data, which
any pair with L R = A allows at step t, and its privacy for a stream fixed in
advance is that of the batch release L(R x + z). The k-ary trees with subtraction
(count-on-your-elders Alg. 2) are such a pair: the release at t subtracts nodes
that extend past t (their data cancels, their noise does not), so their dense
factorization needs ``causal=False``. This class is the dense oracle every other
mechanism is tested against.

References:
    * C. Li, G. Miklau, M. Hay, A. McGregor, V. Rastogi. "The matrix mechanism:
      optimizing linear counting queries under differential privacy". The VLDB
      Journal 24(6), 2015. https://doi.org/10.1007/s00778-015-0398-x
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array
from dpcount._validate import (
    as_array,
    check_choice,
    check_integer,
    check_real,
    check_real_dtype,
)
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting.base import (
    MAX_NOISE_COEFFICIENT,
    CountingMechanism,
    MemoryEstimate,
    step_bytes,
)
from dpcount.counting.factorization.optimize import optimize_dense
from dpcount.counting.factorization.optimize_max import dense_max_factors
from dpcount.counting.participation import (
    DENSE_LIMIT,
    Sensitivity,
    encoder_sensitivities,
    multiplied,
)
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import Budget, BudgetFields, Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DenseNoiseProcess", "FactorizationMechanism", "product_roundoff_bound"]


def _as_matrix(name: str, value: Any) -> NDArray[np.float64]:
    arr = check_real_dtype(name, as_array(name, value))
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{name} must be a non-empty 2-D matrix, got shape {arr.shape}")
    out = np.array(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} must be finite")
    if not float(np.max(np.abs(out))) <= _MAX_ENTRY:
        raise ValueError(
            f"{name} must hold entries of magnitude <= 2^100 (its products and norms must "
            f"stay finite), got {float(np.max(np.abs(out))):.3g}"
        )
    return out


#: largest |entry| of L or R: the norms and products of a T×T pair (T <= 2^26) stay
#: finite, and no useful factorization of the counting matrix comes near it
_MAX_ENTRY = 2.0**100


class DenseNoiseProcess(SourcedNoiseProcess):
    """N = L z with z (m values, ×dim) drawn when the process starts. Memory O(T·dim)."""

    _state_owner = "DenseNoiseProcess"

    def __init__(self, L: NDArray[np.float64], source: NoiseBuffer) -> None:
        super().__init__(L.shape[0], source)
        m, dim = L.shape[1], self.dim
        z = self.noise.sample((m,) if dim is None else (m, dim))
        self._noise: NDArray[np.float64] = L @ z

    def live_count(self) -> int:
        return len(self._noise) - self._t

    def next(self) -> Any:
        if self._t >= len(self._noise):
            raise ValueError(f"noise process is at its horizon ({len(self._noise)} steps)")
        row = self._noise[self._t]
        self._t += 1
        return float(row) if self.dim is None else row.copy()

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        if self._t + n > len(self._noise):
            raise ValueError(
                f"noise process holds {len(self._noise)} steps, asked for {self._t + n}"
            )
        out: NDArray[np.float64] = self._noise[self._t : self._t + n].copy()
        self._t += n
        return out

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step and the noise of the
        steps not yet released (a view; do not modify it)."""
        return self._state(noise=self._noise[self._t :])

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same L and dim),
        checking every field; see :mod:`dpcount._state`. The released steps' noise is
        not kept (it is NaN in the restored array and never read)."""
        st, t = self._read_state(state, ("noise",))
        T = len(self._noise)
        rest = state_array(
            self._owner, "noise", st["noise"], rows=T - t, dim=self.dim, dtypes=(np.float64,)
        )
        noise = np.full(self._noise.shape, np.nan)
        noise[t:] = rest
        self._noise, self._t = noise, t


#: Safety multiple on the first-order round-off bound (m + 2)·u of :func:`product_roundoff_bound`.
_ROUNDOFF_MULTIPLE = 4.0


def product_roundoff_bound(L: NDArray[np.float64], R: NDArray[np.float64]) -> float:
    """A bound on the floating-point error of a float64 factorization L·R = A.

    Computing L·R with inner dimension m errs entrywise by at most
    γ_m·(|L||R|) with γ_m = m·u/(1 − m·u), u = 2⁻⁵³ (Higham 2002, *Accuracy and
    Stability of Numerical Algorithms*, §3.5); rounding the entries of exactly
    factorizing L and R to float64 adds at most 2u·(|L||R|) to first order. This
    returns 4·(m + 2)·u·B with B = min(‖L‖_∞·max|R|, max|L|·‖R‖₁) ≥ max(|L||R|),
    a conservative round-off tolerance (the dense factorizations of the mechanisms
    in this package deviate by at most a few percent of it).
    """
    m = L.shape[1]
    u = float(np.finfo(np.float64).eps) / 2.0
    abs_l, abs_r = np.abs(L), np.abs(R)
    norm = min(
        float(abs_l.sum(axis=1).max()) * float(abs_r.max()),
        float(abs_l.max()) * float(abs_r.sum(axis=0).max()),
    )
    return float(_ROUNDOFF_MULTIPLE * (m + 2) * u * norm)


def _product_tolerance(L: NDArray[np.float64], R: NDArray[np.float64], atol: Any) -> float:
    bound = product_roundoff_bound(L, R)
    if atol is None:
        return bound
    tol = check_real("atol", atol, ge=0)
    if tol > bound:
        raise ValueError(
            f"atol={tol:g} is above the floating-point round-off bound {bound:.3g} of these "
            "factors: L @ R must equal A up to rounding (a larger deviation would release "
            "A x + L z, which R's sensitivity does not cover); pass atol=None"
        )
    return tol


#: largest horizon of :meth:`FactorizationMechanism.optimal` (that of optimize_dense)
DENSE_OPTIMUM_MAX_HORIZON = 2048


@lru_cache(maxsize=4)
def _dense_optimum(horizon: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(B, C) of the dense mean-loss optimum at ``horizon``, read-only, cached."""
    r = optimize_dense(horizon)
    decoder, encoder = np.array(r.decoder), np.array(r.encoder)
    decoder.setflags(write=False)
    encoder.setflags(write=False)
    return decoder, encoder


@noise_statements
class FactorizationMechanism(CountingMechanism):
    """The factorization mechanism for a dense causal pair with L·R = A.

    Formal guarantee:
        [neighbouring: event level]

        A change of step t by Δ changes R x by Δ·R[:, t], so Δ₁ = Δ·max_t ‖R[:, t]‖₁
        and Δ₂ = Δ·max_t ‖R[:, t]‖₂; the release A x + L z equals the post-processing
        L(R x + z) because L·R = A (checked to round-off, see below).

        [noise kinds: continuous]

        Exact variance: Var_t = v·‖L[t, :]‖₂² (v the variance of one z), and the releases
        have covariance v·L Lᵀ.

    References:
        [noise kinds references]

    Args:
        L: (T, m) left factor.
        R: (m, T) right factor.
        epsilon, delta, noise, calibration, rng, step_sensitivity,
        step_l2_sensitivity: as for :class:`~dpcount.counting.KaryTree`.
        atol: tolerance for L·R = A and for the zeros causality requires; None
            (default) for the floating-point round-off bound
            :func:`product_roundoff_bound` of the factors, and never above it.
        causal: require L[t, i] = 0 whenever measurement i involves a step after t
            (see the module docstring for when False is appropriate).

    The release is computed as S_t + (L z)_t, i.e. A x + L z. It equals the
    post-processing L(R x + z), whose privacy R's column norms certify, only when
    L·R = A; a pair off by more than rounding would be released with a guarantee it
    does not have (L = I, R = A/2 would be certified ε but is 2ε-DP), so it is
    refused, as is any ``atol`` above the round-off bound.

    Raises:
        ValueError: wrong shapes, non-finite entries, L·R ≠ A up to rounding, an
            ``atol`` above the round-off bound, or (with ``causal=True``) a
            non-causal pair.
    """

    name = "factorization"

    def __init__(
        self,
        L: Any,
        R: Any,
        *,
        atol: float | None = None,
        causal: bool = True,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        left = _as_matrix("L", L)
        right = _as_matrix("R", R)
        T, m = left.shape
        if right.shape != (m, T):
            raise ValueError(
                f"R must have shape {(m, T)} for L of shape {left.shape}, got {right.shape}"
            )
        tol = _product_tolerance(left, right, atol)
        product = left @ right
        target = np.tril(np.ones((T, T)))
        worst = float(np.max(np.abs(product - target)))
        if not worst <= tol:
            raise ValueError(
                f"L @ R must equal the lower-triangular all-ones matrix A up to rounding "
                f"(atol={tol:.3g}); largest deviation {worst:.3g}. The release is A x + L z, "
                "which is post-processing of R x + z (and private by R's column norms) only "
                "when L R = A"
            )
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {causal!r}")
        nonzero = np.abs(right) > tol
        last_step = np.where(nonzero.any(axis=1), T - 1 - np.argmax(nonzero[:, ::-1], axis=1), -1)
        future = last_step[None, :] > np.arange(T)[:, None]  # measurement i involves steps > t
        bad = np.argwhere(future & (np.abs(left) > tol))
        if causal and len(bad):
            t, i = (int(v) for v in bad[0])
            raise ValueError(
                f"the pair is not causal: L[{t}, {i}] = {left[t, i]:.3g} uses measurement {i}, "
                f"which involves step {int(last_step[i])} > {t} (0-based)"
            )
        self.L = left
        self.R = right
        self.causal = not len(bad)
        self.atol = tol
        self._atol_given = atol is not None
        self.max_noise_coefficient = float(np.max(np.abs(left)))
        with np.errstate(over="ignore"):
            row_norm = float(np.max((left**2).sum(axis=1)))
        if not row_norm <= MAX_NOISE_COEFFICIENT:
            raise ValueError(
                f"L has a row with sum of squares {row_norm:.3g}, beyond 2^64: its noise "
                "variances could overflow float64; rescale L and R"
            )
        super().__init__(
            T, budget=Budget.resolve(budget, fields, owner="FactorizationMechanism"), rng=rng
        )

    @classmethod
    def optimal(
        cls,
        horizon: int,
        *,
        objective: str = "mean",
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> FactorizationMechanism:
        """The dense factorization with the smallest mean loss dpcount can compute, for
        ``horizon`` ≤ 2048: (L, R) = (B, C) of
        :func:`~dpcount.counting.factorization.optimize.optimize_dense` (within its certified
        duality
        gap of 10⁻⁶ relative of the optimum over *all* factorizations of A), as a
        :class:`FactorizationMechanism` (whose guarantee and exact variances apply
        unchanged: R's largest column norm is the sensitivity, L·R = A is checked).

        With ``objective="max"`` (registry name ``dense-max-optimum``): the dense causal
        factorization with the smallest **max** loss, within a certified relative
        gap of 10⁻⁴
        (:func:`~dpcount.counting.factorization.optimize_max.dense_max_factors`:
        rebuilt from shipped dual weights for T a power of two, one O(T²) eigendecomposition and an
        O(T³) product, ≈ 2 s at 2048; optimized from interpolated shipped weights for
        other T, ≈ 1 min at 1000). Its max loss is 8.7711 at T = 1024 (certified
        optimum ≥ 8.7702), its mean loss 8.7707 (0.4 % above the mean optimum).

        Gaussian noise by default (the loss it minimizes is the ℓ₂ one; ``noise=`` may
        choose another continuous kind). The optimization runs once per horizon and
        process (about 6 s at T = 1024, 22 s at 2048 on the development machine);
        the stream holds the T×T matrices (32 MB each at 2048).

        Raises:
            ValueError: ``horizon`` outside [1, 2048] or an ``objective`` other than
                ``"mean"``/``"max"`` (naming them), or a budget the mechanism refuses.
        """
        T = check_integer("horizon", horizon, ge=1, le=DENSE_OPTIMUM_MAX_HORIZON)
        check_choice("objective", objective, ("mean", "max"))
        if budget is None and fields.get("noise") is None:
            fields["noise"] = "gaussian"
        if objective == "max":
            decoder, encoder = dense_max_factors(T)
        else:
            decoder, encoder = _dense_optimum(T)
        return cls(decoder, encoder, budget=budget, rng=rng, **fields)

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """O(T·d): the stream draws its m·d samples at once and holds L z (T·d);
        structure: L and R (2·T·m floats). ``measurements`` m (None: T)."""
        T = check_integer("horizon", horizon, ge=1)
        m = options.get("measurements")
        m = T if m is None else int(m)
        d = 1 if dim is None else dim
        return MemoryEstimate(structure=16 * T * m, stream=8 * d * (T + m) + step_bytes(dim))

    def _memory_options(self) -> dict[str, Any]:
        return {"measurements": self.L.shape[1]}

    def _repr_fields(self) -> dict[str, object]:
        return {"measurements": self.L.shape[1]}

    def _config_kwargs(self) -> dict[str, Any]:
        kwargs = super()._config_kwargs()
        del kwargs["horizon"]  # the shape of L
        return {
            "L": self.L,
            "R": self.R,
            **kwargs,
            "atol": self.atol if self._atol_given else None,
            "causal": self.causal,
        }

    def _unit_sensitivities(self) -> tuple[float, float]:
        l1 = float(np.max(np.abs(self.R).sum(axis=0)))
        l2 = float(np.sqrt(np.max((self.R**2).sum(axis=0))))
        return l1, l2

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: the dense computation on R
        (:func:`~dpcount.counting.participation.encoder_sensitivities`: brute force over
        patterns or the certified Gram bound; exact when RᵀR ≥ 0 on the reachable
        pairs), for T ≤ 4096; beyond, k × the single-participation sensitivities."""
        r1, r2 = self._unit_sensitivities()
        if self.horizon > DENSE_LIMIT:
            return multiplied(r1, schema), multiplied(r2, schema)
        return encoder_sensitivities(self.R, schema)

    def noise_process(self, source: NoiseSource, width: int | None = None) -> DenseNoiseProcess:
        return DenseNoiseProcess(self.L, NoiseBuffer(source, width))

    def noise_coefficients(self) -> NDArray[np.float64]:
        """‖L[t, :]‖₂² for t = 1..T."""
        return np.asarray((self.L**2).sum(axis=1), dtype=np.float64)

    def _noise_coefficient_at(self, t: int) -> float:
        row = self.L[t - 1]
        return float((row**2).sum())

    def _iter_noise_coefficients(self, start: int) -> Iterator[float]:
        # T values beside the T×T matrix L: no gain in computing them one by one.
        yield from self.noise_coefficients()[start - 1 :].tolist()

    def covariance(self) -> NDArray[np.float64]:
        """Exact covariance of the releases: σ_z²·L Lᵀ."""
        return np.asarray(self.sampler.variance * (self.L @ self.L.T), dtype=np.float64)
