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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array, state_int, state_keys
from dpcount._validate import as_array, check_integer, check_real, check_real_dtype
from dpcount.counting.base import CountingMechanism
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.noise import NoiseSampler
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DenseNoiseProcess", "FactorizationMechanism"]


def _as_matrix(name: str, value: Any) -> NDArray[np.float64]:
    arr = check_real_dtype(name, as_array(name, value))
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{name} must be a non-empty 2-D matrix, got shape {arr.shape}")
    out = np.array(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} must be finite")
    return out


class DenseNoiseProcess:
    """N = L z with z (m values, ×dim) drawn when the process starts. Memory O(T·dim)."""

    def __init__(
        self,
        L: NDArray[np.float64],
        sampler: NoiseSampler,
        rng: np.random.Generator,
        dim: int | None = None,
    ) -> None:
        m = L.shape[1]
        z = sampler.sample(rng, (m,) if dim is None else (m, dim))
        self._noise: NDArray[np.float64] = L @ z
        self.dim = dim
        self._t = 0

    @property
    def step(self) -> int:
        return self._t

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
        return {"t": self._t, "noise": self._noise[self._t :]}

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same L and dim),
        checking every field; see :mod:`dpcount._state`. The released steps' noise is
        not kept (it is NaN in the restored array and never read)."""
        owner = "DenseNoiseProcess"
        st = state_keys(owner, state, ("t", "noise"))
        T = len(self._noise)
        t = state_int(owner, "t", st["t"], 0, T)
        rest = state_array(
            owner, "noise", st["noise"], rows=T - t, dim=self.dim, dtypes=(np.float64,)
        )
        noise = np.full(self._noise.shape, np.nan)
        noise[t:] = rest
        self._noise, self._t = noise, t


class FactorizationMechanism(CountingMechanism):
    """The factorization mechanism for a dense causal pair with L·R = A.

    Privacy (event level, step sensitivity Δ): a change of step t by Δ changes
    R x by Δ·R[:, t], so Δ₁ = Δ·max_t ‖R[:, t]‖₁ and Δ₂ = Δ·max_t ‖R[:, t]‖₂;
    ε-DP with Laplace noise, (ε, δ)-DP with a delta (Laplace by count-on-your-elders
    Thm 3, Gaussian by the analytic Gaussian mechanism or ``calibration``).
    Exact error: Var_t = σ_z²·‖L[t, :]‖₂², the covariance of the releases is
    σ_z²·L Lᵀ.

    Args:
        L: (T, m) left factor.
        R: (m, T) right factor.
        epsilon, delta, noise, calibration, rng, step_sensitivity,
        step_l2_sensitivity: as for :class:`~dpcount.counting.KaryTree`.
        atol: tolerance for L·R = A and for the zeros causality requires.
        causal: require L[t, i] = 0 whenever measurement i involves a step after t
            (see the module docstring for when False is appropriate).

    Raises:
        ValueError: wrong shapes, non-finite entries, L·R ≠ A, or (with
            ``causal=True``) a non-causal pair.
    """

    name = "factorization"

    def __init__(
        self,
        L: Any,
        R: Any,
        *,
        atol: float = 1e-9,
        causal: bool = True,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        left = _as_matrix("L", L)
        right = _as_matrix("R", R)
        tol = check_real("atol", atol, ge=0)
        T, m = left.shape
        if right.shape != (m, T):
            raise ValueError(
                f"R must have shape {(m, T)} for L of shape {left.shape}, got {right.shape}"
            )
        product = left @ right
        target = np.tril(np.ones((T, T)))
        worst = float(np.max(np.abs(product - target)))
        if worst > tol:
            raise ValueError(
                f"L @ R must equal the lower-triangular all-ones matrix within atol={tol:g}; "
                f"largest deviation {worst:.3g}"
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
        self.max_noise_coefficient = float(np.max(np.abs(left)))
        super().__init__(
            T, budget=Budget.resolve(budget, fields, owner="FactorizationMechanism"), rng=rng
        )

    def _repr_fields(self) -> dict[str, object]:
        return {"measurements": self.L.shape[1]}

    def _config_kwargs(self) -> dict[str, Any]:
        kwargs = super()._config_kwargs()
        del kwargs["horizon"]  # the shape of L
        return {"L": self.L, "R": self.R, **kwargs, "atol": self.atol, "causal": self.causal}

    def _unit_sensitivities(self) -> tuple[float, float]:
        l1 = float(np.max(np.abs(self.R).sum(axis=0)))
        l2 = float(np.sqrt(np.max((self.R**2).sum(axis=0))))
        return l1, l2

    def noise_process(
        self, sampler: NoiseSampler, rng: np.random.Generator, dim: int | None = None
    ) -> DenseNoiseProcess:
        return DenseNoiseProcess(self.L, sampler, rng, dim)

    def noise_coefficients(self) -> NDArray[np.float64]:
        """‖L[t, :]‖₂² for t = 1..T."""
        return np.asarray((self.L**2).sum(axis=1), dtype=np.float64)

    def covariance(self) -> NDArray[np.float64]:
        """Exact covariance of the releases: σ_z²·L Lᵀ."""
        return np.asarray(self.sampler.variance * (self.L @ self.L.T), dtype=np.float64)
