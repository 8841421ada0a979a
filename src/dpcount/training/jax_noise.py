"""A jit-able JAX noise process for the privatizer's streaming strategies.

The numpy privatizer (:mod:`dpcount.training.privatizer`) draws its noise on the host;
under ``jax.jit`` every step would copy model-sized arrays to the host and back. This
module runs the same correlated noise N = B·z on the device, as pure functions of a
state pytree, for the strategies whose noise is a linear time-invariant recursion:

==================  ==================================================================
strategy            state per coordinate (between steps) and the step
==================  ==================================================================
``blt`` (BLT)       n buffers q_i(t) = λ_i q_i(t−1) + z_t and the running sum
                    q_n(t) = Σ_{s≤t} z_s; N_t = a·q_n(t) + Σ_i β_i q_i(t)
                    (:mod:`dpcount.counting.factorization.blt`: C⁻¹ = BLT(λ, ω′),
                    decoder b_k = a + Σ_i β_i λ_i^k)
``toeplitz``        the last n − 1 values of w = C⁻¹z (w_t = (z_t − Σ_{i≥1} c_i
(banded, n bands)   w_{t−i})/c_0) and their running sum N_t = Σ_{s≤t} w_s
``input``           the running sum N_t = Σ_{s≤t} z_s (independent noise: DP-SGD)
==================  ==================================================================

plus, for ``release="gradient"``, the previous noise N_{t−1} (the released gradient
noise is N_t − N_{t−1}). Each leaf of the model keeps its own state (coordinates are
independent), in the leaf's floating dtype.

Randomness: z_t of leaf ℓ is σ·``jax.random.normal(fold_in(fold_in(key, ℓ), t))``, a
pure function of the run's key, the leaf and the step (counter-based: no generator
state, retries and re-compilations cannot draw fresh noise for a step). The key is
drawn once per run from the privatizer's Generator (``rng=None``: the operating
system's entropy through a cryptographically secure generator). JAX's default
Threefry-2x32 key has 64 bits and its Gaussian sampler works in the leaf's float
precision (float32 by default): this path is for training throughput, not hardened
against floating-point attacks on the low-order bits (Mironov 2012) the way dpcount's
exact integer samplers are.

Formal guarantee: the same as :class:`~dpcount.training.GradientPrivatizer`'s (the
noise has the same distribution, N = B·z with z i.i.d. N(0, σ²), σ from the
privatizer's calibration). Past the horizon T the step returns NaN noise (a traced
step counter cannot raise inside ``jit``), so an update beyond the budget's steps is
poisoned rather than silently released without a guarantee.

Replay: a state re-derives its step's noise (the key and the step are in it), so
**passing an older state again releases the same noise on other gradients** — the
difference of the two releases is the difference of the gradients, exactly. The
numpy privatizer refuses a stale state; a pure function inside ``jit`` cannot (it keeps
no memory of the steps it drew), so :func:`~dpcount.training.optax_privatizer` adds a
host-side ledger (an ordered ``io_callback``) that fails a replayed step of a run it
drew. The ledger is in memory, per transformation: thread each returned state into the
next step and never keep, restore or share an older one (or a copy of the key); the
guarantee assumes it.

References:
    * Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
      noise generation for streaming differential privacy", FOCS 2024,
      https://arxiv.org/abs/2404.16706 (BLT streaming recursion).
    * Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
      SC 2011, https://doi.org/10.1145/2063384.2063405 (counter-based Threefry).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dpcount.counting.factorization.blt import BLT
from dpcount.counting.factorization.toeplitz import ToeplitzFactorization
from dpcount.counting.input_perturbation import InputPerturbation
from dpcount.training.privatizer import GradientPrivatizer

__all__ = ["JaxNoiseProcess", "JaxNoiseState", "Recursion", "jax_noise_process", "run_key"]

_INSTALL_HINT = "the JAX noise process needs jax: pip install 'dpcount[training]'"


class Recursion(enum.Enum):
    """The streaming recursion a strategy's noise follows (module docstring)."""

    BLT = "blt"
    TOEPLITZ = "toeplitz"
    INPUT = "input"


class JaxNoiseState(NamedTuple):
    """One run's noise state (a pytree of device arrays): **as sensitive as the data**.

    Attributes:
        key: the run's PRNG key (whoever holds it can subtract the noise).
        step: steps drawn so far (int32 scalar).
        buffers: one array per leaf, shape (m, *leaf.shape): the recursion's values.
        previous: one array per leaf: N_{t−1} (``release="gradient"``) or the raw
            running sum of the clipped gradients (``"prefix-sum"``).
    """

    key: Any
    step: Any
    buffers: tuple[Any, ...]
    previous: tuple[Any, ...]


@dataclass(frozen=True)
class JaxNoiseProcess:
    """The device-side noise of a :class:`~dpcount.training.GradientPrivatizer`.

    Build it with :func:`jax_noise_process`. :meth:`init` and :meth:`privatize` are
    pure functions of their arguments (no Python state changes), so ``privatize``
    runs inside ``jax.jit`` with the rest of a training step.

    Attributes:
        recursion: which recursion the strategy's noise follows.
        decay: the per-buffer decays (BLT: λ_1..λ_n then 1 for the running sum).
        weight: the per-buffer output weights (BLT: β_1..β_n then a); Toeplitz: the
            encoder coefficients c_0..c_{n−1}; input: empty.
        sigma: the noise standard deviation σ (per coordinate of z).
        horizon: T, the steps the guarantee covers.
        release: ``"gradient"`` or ``"prefix-sum"`` (as the privatizer's).
    """

    recursion: Recursion
    decay: tuple[float, ...]
    weight: tuple[float, ...]
    sigma: float
    horizon: int
    release: str

    @property
    def rows(self) -> int:
        """Values held per coordinate between steps (besides ``previous``)."""
        if self.recursion is Recursion.BLT:
            return len(self.decay)
        if self.recursion is Recursion.TOEPLITZ:
            return len(self.weight)  # n − 1 filter values and the running sum
        return 1

    def init(self, key: Any, params: Any) -> JaxNoiseState:
        """A fresh run's state for updates shaped like ``params`` (a pytree of arrays).

        Args:
            key: a ``jax.random`` key (:func:`run_key` draws one from the
                privatizer's generator, secure by default). One key, one run: two
                runs with one key add the same noise (the budget is spent twice).
            params: the model parameters or any pytree with the updates' shapes and
                floating dtypes.
        """
        import jax
        import jax.numpy as jnp

        leaves = jax.tree_util.tree_leaves(params)
        buffers = tuple(jnp.zeros((self.rows, *jnp.shape(x)), _dtype(x)) for x in leaves)
        previous = tuple(jnp.zeros(jnp.shape(x), _dtype(x)) for x in leaves)
        return JaxNoiseState(key, jnp.zeros((), jnp.int32), buffers, previous)

    def privatize(self, state: JaxNoiseState, clipped_sum: Any) -> tuple[Any, JaxNoiseState]:
        """One step: the noisy gradient (or prefix sum) and the next state (jit-able).

        Args:
            state: the latest state (:meth:`init` or the previous call).
            clipped_sum: the batch's sum of per-example gradients, each clipped to the
                privatizer's clip norm, with ``params``' structure.

        Returns:
            ``(noisy, new_state)``: g_t + N_t − N_{t−1} (``release="gradient"``) or
            Σ_{s≤t} g_s + N_t (``"prefix-sum"``), in the leaves' dtypes; NaN past the
            horizon.
        """
        import jax
        import jax.numpy as jnp

        leaves, treedef = jax.tree_util.tree_flatten(clipped_sum)
        t = state.step + 1
        step_key = jax.random.fold_in(state.key, t)
        out, buffers, previous = [], [], []
        for index, (g, q, prev) in enumerate(
            zip(leaves, state.buffers, state.previous, strict=True)
        ):
            dtype = q.dtype
            z = jax.random.normal(jax.random.fold_in(step_key, index), jnp.shape(g), dtype)
            noise, q = self._advance(q, z * jnp.asarray(self.sigma, dtype))
            noise = jnp.where(t <= self.horizon, noise, jnp.asarray(jnp.nan, dtype))
            g = jnp.asarray(g, dtype)
            if self.release == "gradient":
                out.append(g + (noise - prev))
                previous.append(noise)
            else:
                running = prev + g
                out.append(running + noise)
                previous.append(running)
            buffers.append(q)
        new = JaxNoiseState(state.key, t, tuple(buffers), tuple(previous))
        return jax.tree_util.tree_unflatten(treedef, out), new

    def _advance(self, q: Any, z: Any) -> tuple[Any, Any]:
        """N_t and the next buffers from the buffers after step t − 1 and z_t."""
        import jax.numpy as jnp

        shape = (-1,) + (1,) * (q.ndim - 1)
        if self.recursion is Recursion.BLT:
            q = q * jnp.asarray(self.decay, q.dtype).reshape(shape) + z[None]
            weight = jnp.asarray(self.weight, q.dtype)
            return jnp.tensordot(weight, q, axes=1), q
        if self.recursion is Recursion.TOEPLITZ:
            c = jnp.asarray(self.weight, q.dtype)
            if len(self.weight) == 1:
                total = q[0] + z / c[0]
                return total, total[None]
            history, total = q[:-1], q[-1]  # w_{t−1}, …, w_{t−n+1}; Σ w
            w = (z - jnp.tensordot(c[1:], history, axes=1)) / c[0]
            total = total + w
            q = jnp.concatenate([w[None], history[:-1], total[None]], axis=0)
            return total, q
        total = q[0] + z
        return total, total[None]


def run_key(rng: np.random.Generator) -> Any:
    """A fresh run key (Threefry-2x32, 64 bits) drawn from ``rng`` on the host.

    Draw it outside ``jit``: a key drawn while tracing would be a constant of the
    compiled function, and every call of it would add the same noise."""
    import jax
    import jax.numpy as jnp

    words = rng.integers(0, 2**32, size=2, dtype=np.uint32)
    return jax.random.wrap_key_data(jnp.asarray(words), impl="threefry2x32")


def _dtype(x: Any) -> Any:
    import jax.numpy as jnp

    dtype = jnp.result_type(x)
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32


def jax_noise_process(privatizer: GradientPrivatizer) -> JaxNoiseProcess:
    """The jit-able noise process of ``privatizer``'s mechanism.

    Supported: :class:`~dpcount.counting.BLT` (``"blt"``),
    :class:`~dpcount.counting.ToeplitzFactorization` (``"toeplitz"``, banded or not:
    state n values per coordinate for n bands) and
    :class:`~dpcount.counting.InputPerturbation` (``"input"``).

    Raises:
        ImportError: jax is not installed.
        TypeError: ``privatizer`` is not a GradientPrivatizer.
        ValueError: its mechanism has no time-invariant streaming recursion here
            (the numpy privatizer runs every mechanism).
    """
    if not isinstance(privatizer, GradientPrivatizer):
        raise TypeError(f"privatizer must be a GradientPrivatizer, got {type(privatizer).__name__}")
    try:
        import jax  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    m = privatizer.mechanism
    if m.privacy is None:
        raise ValueError(
            "the JAX noise process draws the calibrated Gaussian noise; this mechanism has "
            "another sampler (with_sampler) and no guarantee: use the numpy privatizer"
        )
    sigma = float(m.noise_scale)
    horizon, release = m.horizon, privatizer.release
    if type(m) is BLT:
        inv = m.inverse
        decay = (*map(float, inv.decay), 1.0)
        weight = (*map(float, inv.beta), float(inv.a))
        return JaxNoiseProcess(Recursion.BLT, decay, weight, sigma, horizon, release)
    if type(m) is ToeplitzFactorization:
        coefficients = tuple(map(float, m.coefficients))
        return JaxNoiseProcess(Recursion.TOEPLITZ, (), coefficients, sigma, horizon, release)
    if type(m) is InputPerturbation:
        return JaxNoiseProcess(Recursion.INPUT, (), (), sigma, horizon, release)
    raise ValueError(
        "the JAX noise process supports the blt, toeplitz and input mechanisms, got "
        f"{type(m).__name__}; use the numpy privatizer (optax_privatizer(..., device=False))"
    )
