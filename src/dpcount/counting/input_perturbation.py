"""Input perturbation: independent noise on every step (the local-DP baseline).

Each x_t is released as x_t + ζ_t with ζ_t i.i.d., and the running sum of the
noisy inputs is published: the factorization L = A (all-ones lower-triangular),
R = I. A change of one step by Δ changes one noisy input, so the sensitivities are
Δ (ℓ₁ and ℓ₂) — the same as releasing a single count, and the same guarantee each
user would get by randomizing their own input locally. The price: the prefix noise
is a random walk, Var_t = t·σ², so the MSE grows linearly in T.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_value
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess
from dpcount.counting._steps import grid_table_bytes
from dpcount.counting.base import (
    CountingMechanism,
    MemoryEstimate,
    buffered_stream_memory,
)
from dpcount.counting.participation import Sensitivity, SensitivityMethod
from dpcount.privacy._statements import noise_statements
from dpcount.privacy.budget import Participation
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource

__all__ = ["INPUT_MAX_HORIZON", "InputNoiseProcess", "InputPerturbation"]

#: largest horizon: the noise is a float running sum of the draws, whose rounding errors
#: add up over the steps (≈ u·σ_t·√t); measured within a quarter of the float-safe
#: release's model κ (:mod:`dpcount.privacy.float_safe`) up to 2^20 (≤ 62 over three
#: seeds, scalar steps; benchmarks/float_model_long.py), not beyond
INPUT_MAX_HORIZON = 1 << 20


class InputNoiseProcess(SourcedNoiseProcess):
    """N_t = ζ_1 + … + ζ_t. Memory: the running sum (×dim)."""

    def __init__(self, horizon: int, source: NoiseBuffer) -> None:
        super().__init__(horizon, source)
        self._sum: Any = 0.0 if self.dim is None else np.zeros(self.dim)

    def live_count(self) -> int:
        return 1

    def next(self) -> Any:
        if self._t >= self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        self._sum = self._sum + self._buffer.take_one()
        self._t += 1
        return self._sum

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        if self._t + n > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {self._t + n}")
        out = np.cumsum(self._buffer.take(n), axis=0)
        out += self._sum
        self._sum = float(out[-1]) if self.dim is None else out[-1].copy()
        self._t += n
        return out

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What this process needs to continue exactly: the step, the running noise sum
        and the noise buffer."""
        return self._state(sum=self._sum, buffer=self._buffer.state_dict())

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this fresh process (same horizon,
        sampler and dim), checking every field; see :mod:`dpcount._state`."""
        st, t = self._read_state(state, ("sum", "buffer"))
        total = state_value(self._owner, "sum", st["sum"], self.dim)
        self._buffer.load_state_dict(st["buffer"])
        self._t, self._sum = t, total


@noise_statements
class InputPerturbation(CountingMechanism):
    """Independent noise on each input; prefix sums of the noisy inputs.

    Formal guarantee:
        [neighbouring: event level]

        The perturbed vector is x itself (the factorization L = A, R = I), so its ℓ₁
        and ℓ₂ sensitivities are both Δ (Δ₁ = Δ₂ = Δ); the prefix sums of the noisy inputs are
        post-processing. This is also the guarantee each user would get by randomizing
        their own input locally.

        [noise kinds: continuous]

        Exact variance: Var_t = t·v (v = 2λ² for Laplace, σ² for Gaussian), MSE =
        (T + 1)·v/2, largest variance T·v.

    References:
        [noise kinds references]

    Args are those of :class:`~dpcount.counting.BinaryTree`.
    """

    name = "input"
    max_noise_coefficient = 1.0

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: the running noise sum, the noise buffer and a step's arrays.
        Structure: the float-safe grid table a batch release with continuous noise keeps:
        Var_t = t·v takes at most ⌊log₂ T⌋/2 + 2 grids (one a binade of √(t·v)), so a
        few runs, and 1/g of every step up to 2^17 steps
        (:func:`~dpcount.counting._steps.grid_table_bytes`)."""
        T = check_integer("horizon", horizon, ge=1)
        stream = buffered_stream_memory(1, dim).stream
        return MemoryEstimate(structure=grid_table_bytes(T, T.bit_length() // 2 + 3), stream=stream)

    def _set_structure(self, horizon: int) -> None:
        check_integer("horizon", horizon, ge=1, le=INPUT_MAX_HORIZON)

    def _unit_sensitivities(self) -> tuple[float, float]:
        return 1.0, 1.0

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """Under (k, b)-participation: the encoder is the identity, so the k changed steps
        change k disjoint coordinates: Δ₁ = k and Δ₂ = √k, exact."""
        k = schema.max_participations
        method = SensitivityMethod.DISJOINT_COLUMNS
        # √k rounded up (math.sqrt rounds to nearest).
        l2 = math.nextafter(math.sqrt(k), math.inf)
        return Sensitivity(float(k), True, method), Sensitivity(l2, True, method)

    def noise_process(self, source: NoiseSource, width: int | None = None) -> InputNoiseProcess:
        return InputNoiseProcess(self.horizon, NoiseBuffer(source, width))

    def noise_coefficients(self) -> NDArray[np.float64]:
        return np.arange(1, self.horizon + 1, dtype=np.float64)

    def _noise_coefficient_at(self, t: int) -> float:
        return float(t)

    def mse(self) -> float:
        """Exact MSE = σ²·(T + 1)/2."""
        return self.sampler.variance * (self.horizon + 1) / 2.0

    def max_variance(self) -> float:
        """Exact largest variance = σ²·T."""
        return self.sampler.variance * float(self.horizon)

    def dense_factorization(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(L, R) = (A, I); for T ≤ 4096."""
        T = self.horizon
        if T > 4096:
            raise ValueError(f"dense factorization is for horizon <= 4096, got {T}")
        return np.tril(np.ones((T, T))), np.eye(T)
