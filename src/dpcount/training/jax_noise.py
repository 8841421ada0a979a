"""A jit-able JAX noise process for the privatizer's streaming strategies.

The numpy privatizer (:mod:`dpcount.training.privatizer`) draws its noise on the host;
under ``jax.jit`` every step would copy model-sized arrays to the host and back. This
module runs the same correlated noise N = B·z on the device, as pure functions of a
state pytree, for the strategies whose noise is a linear time-invariant recursion:

==================  ==================================================================
strategy            state per coordinate (between steps) and the step
==================  ==================================================================
``blt`` (BLT)       n buffers q_i(t) = λ_i q_i(t−1) + z_t and (prefix sums only)
                    the running sum q_n(t) = Σ_{s≤t} z_s; N_t = a·q_n(t) + Σ_i β_i q_i(t)
                    (:mod:`dpcount.counting.factorization.blt`: C⁻¹ = BLT(λ, ω′),
                    decoder b_k = a + Σ_i β_i λ_i^k)
``toeplitz``        the last n − 1 values of w = C⁻¹z (w_t = (z_t − Σ_{i≥1} c_i
(banded, n bands)   w_{t−i})/c_0) and their running sum N_t = Σ_{s≤t} w_s
``input``           the running sum N_t = Σ_{s≤t} z_s (independent noise: DP-SGD)
==================  ==================================================================

Released as gradients (``release="gradient"``, the default), every strategy releases
its increment N_t − N_{t−1} directly and keeps no running sum: w_t for Toeplitz, σz_t
for independent noise, and for BLT (λ = 1 for the running sum)
N_t − N_{t−1} = (a + Σ_i β_i)·σz_t + Σ_i β_i (λ_i − 1) q_i(t−1), from the n buffers
alone. Each leaf of the model keeps its own state (coordinates are independent), in
the leaf's floating dtype, as separate leaf-shaped arrays (not one stacked array), so
a training step that donates its optimizer state (``jax.jit(..., donate_argnums=...)``)
updates every buffer in place (XLA still copies a Toeplitz filter's history to shift
it).

Randomness: z_t of leaf ℓ is σ·``jax.random.normal(fold_in(fold_in(key, t), ℓ))``, a
pure function of the run's key, the step and the leaf (counter-based: no generator
state, retries and re-compilations cannot draw fresh noise for a step). The key is
drawn once per run from the privatizer's Generator (``rng=None``: the operating
system's entropy through a cryptographically secure generator). JAX's default
Threefry-2x32 key has 64 bits and its Gaussian sampler works in the leaf's float
precision (float32 by default): this path is for training throughput, not hardened
against floating-point attacks on the low-order bits (Mironov 2012) the way dpcount's
exact integer samplers are.

Cost (d = 10⁶, CPU): the draw dominates. jax lowers Threefry on CPU as a rolled loop
whose two counter arrays XLA stores and reloads five times; the step instead draws the
*same* bits (the same PRNG, key and counters; tested bit for bit against
``jax.random.bits`` and ``jax.random.normal``) through an unrolled Threefry that XLA
fuses with the inverse error function into one pass. That pass sits inside a
``lax.cond`` on "step within the horizon": a conditional is a fusion boundary, so the
draw is computed once and stored, where otherwise XLA recomputes it inside each
buffer's update (it duplicates cheap-looking producers into every consumer); the
false branch is the NaN poisoning past the horizon. A BLT step released as gradients
then makes n + 1 passes over memory (XLA's CPU fusions write one array each): the
output (reading the clipped sum, σz_t and the n old buffers) and one in-place update
per buffer (reading it and σz_t). The updates are made to depend on the output's
first element (:func:`_after`: a data dependency that changes no bit), so XLA orders
them after the pass that reads the old buffers; otherwise it copies every buffer
first. No pass stores N_t or N_{t−1}, and nothing is converted to float64. (For
prefix sums BLT keeps the running sum, and N_t is materialized by a second
conditional for the same reason as the draw; Toeplitz's shifted history is copied.)
``benchmarks/bench_training_jax.py`` prints the ratios to ``optax.add_noise``.

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
host-side ledger (an XLA custom call whose answer gates every value derived from the
draw, see :meth:`JaxNoiseProcess.gated`) that fails a replayed step of a run it drew.
The gate is a select fused into the buffer updates: it adds no pass over memory. The
ledger is in memory, per transformation, or also durable in a folder shared by
processes (``optax_privatizer(..., ledger=folder)``): thread each returned state into
the next step and never keep, restore or share an older one (or a copy of the key);
the guarantee assumes it.

References:
    * Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
      noise generation for streaming differential privacy", FOCS 2024,
      https://arxiv.org/abs/2404.16706 (BLT streaming recursion).
    * Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
      SC 2011, https://doi.org/10.1145/2063384.2063405 (counter-based Threefry).
"""

from __future__ import annotations

import enum
import math
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
        buffers: per leaf, a tuple of m arrays of the leaf's shape: the recursion's
            values (separate arrays, so a donated state is updated in place).
        previous: one array per leaf: the raw running sum of the clipped gradients
            (``"prefix-sum"``), or empty (``"gradient"``: the increment N_t − N_{t−1}
            is computed directly, and no running sum N is kept).
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
        """Values held per coordinate between steps (besides ``previous``): the
        recursion's; released as gradients no strategy keeps a running sum (the
        increment N_t − N_{t−1} is computed directly: :meth:`_increment`)."""
        gradient = self.release == "gradient"
        if self.recursion is Recursion.BLT:
            return len(self.decay) - gradient  # released as gradients: no running sum
        if self.recursion is Recursion.TOEPLITZ:
            return len(self.weight) - gradient  # n − 1 filter values (and Σ w)
        return 1 - gradient

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
        buffers = tuple(
            tuple(jnp.zeros(jnp.shape(x), _dtype(x)) for _ in range(self.rows)) for x in leaves
        )
        if self._direct:  # nothing to carry: an empty array of the dtype
            previous = tuple(jnp.zeros((0,), _dtype(x)) for x in leaves)
        else:
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
        return self.gated(state, clipped_sum, True)

    def gated(self, state: JaxNoiseState, clipped_sum: Any, gate: Any) -> tuple[Any, JaxNoiseState]:
        """:meth:`privatize`, released only where the traced boolean ``gate`` holds:
        otherwise (and past the horizon) the step's noise, its output and the next
        state's noise buffers are NaN.

        The draw (σz_t, the one array of step t that needs the PRNG) does not wait for
        the gate; every value derived from it, the output and every new buffer alike,
        is computed from ``where(gate, draw, NaN)``, fused into the buffer updates. So
        nothing derived from step t's noise is an output (or the operand of any other
        operation) before the gate is known, and none of it is finite unless the gate
        holds; the raw draw is a temporary of the computation and never leaves it.

        Args:
            state: the latest state, as for :meth:`privatize`.
            clipped_sum: the batch's sum of clipped per-example gradients.
            gate: a boolean (traced or not): whether this step may be released; or a
                function ``gate(t, done)`` returning it, of the step t (traced int32)
                and ``done``, a traced uint32 that exists once the draw is computed
                (0, or 1 past the horizon: public), for a host call that XLA should
                make after the draw (the optax adapter's ledger: by then the Python
                thread that dispatched the step is usually waiting for it, so the
                call finds the GIL free).

        Returns:
            ``(noisy, new_state)`` as :meth:`privatize`'s (bit for bit where ``gate``
            holds), or NaN where it fails.
        """
        import jax
        import jax.numpy as jnp

        leaves, treedef = jax.tree_util.tree_flatten(clipped_sum)
        if len(leaves) != len(state.buffers):
            raise TypeError(
                f"clipped_sum has {len(leaves)} leaves, the state was started for "
                f"{len(state.buffers)}"
            )
        t = state.step + 1
        within = t <= self.horizon
        shapes = tuple(
            jax.ShapeDtypeStruct(jnp.shape(g), p.dtype)  # type: ignore[no-untyped-call]
            for g, p in zip(leaves, state.previous, strict=True)
        )
        heads = _where_live(within, self._heads, _unrolled(state.key), t, state.buffers, shapes)
        if callable(gate):  # asked once the draw is done
            gate = gate(t, _done(heads))
        live = jnp.logical_and(within, gate)
        if gate is not True:  # the gate reaches every consumer of the draw
            heads = tuple(jnp.where(gate, h, jnp.asarray(jnp.nan, h.dtype)) for h in heads)
        out, buffers, previous = [], [], []
        for g, q, head, prev in zip(leaves, state.buffers, heads, state.previous, strict=True):
            g = jnp.asarray(g, head.dtype)
            if self._direct:
                delta, q = self._increment(q, head)
                out.append(g + delta)
                if self.recursion is Recursion.BLT:  # the update after the output
                    q = self._decayed(q, _after(head, out[-1]))
            else:
                noise, q = self._advance(live, q, head)
                prev = prev + g  # the running sum of the clipped gradients
                out.append(prev + noise)
            previous.append(prev)
            buffers.append(q)
        new = JaxNoiseState(state.key, t, tuple(buffers), tuple(previous))
        return jax.tree_util.tree_unflatten(treedef, out), new

    def _heads(
        self, key: Any, t: Any, buffers: tuple[Any, ...], shapes: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        """Per leaf, the one array of step t that needs the draw: σz_t (BLT, and
        independent noise released as gradients), w_t (Toeplitz) or the new running
        sum N_t (independent noise, prefix sums). Drawn inside a conditional, so XLA
        computes the Threefry bits and the Gaussian transform once, fused with this
        arithmetic, and hands one materialized array to the buffer updates."""
        import jax
        import jax.numpy as jnp

        step_key = jax.random.fold_in(key, t)
        heads = []
        for index, (rows, leaf) in enumerate(zip(buffers, shapes, strict=True)):
            dtype = leaf.dtype
            z = jax.random.normal(jax.random.fold_in(step_key, index), leaf.shape, dtype)
            z = z * jnp.asarray(self.sigma, dtype)
            if self.recursion is Recursion.TOEPLITZ:
                c = self.weight
                for ci, w_back in zip(c[1:], rows[: len(c) - 1], strict=True):
                    z = z - jnp.asarray(ci, dtype) * w_back
                z = z / jnp.asarray(c[0], dtype)
            elif self.recursion is Recursion.INPUT and rows:
                z = rows[0] + z
            heads.append(z)
        return tuple(heads)

    @property
    def _direct(self) -> bool:
        """Whether the released increment N_t − N_{t−1} is computed as an increment
        (``release="gradient"``: w_t for Toeplitz, σz_t for independent noise, from
        the buffers and σz_t for BLT) rather than as a difference of stored N's."""
        return self.release == "gradient"

    def _increment(self, q: tuple[Any, ...], head: Any) -> tuple[Any, tuple[Any, ...]]:
        """N_t − N_{t−1} and the next buffers (:attr:`_direct`), from the buffers
        after step t − 1 and the head: Toeplitz N_t = Σ_{s≤t} w_s, so the increment
        is w_t; independent noise: σz_t; BLT (N_t = Σ_i w_i q_i(t) with
        q_i(t) = λ_i q_i(t−1) + σz_t and λ = 1 for the running sum):
        N_t − N_{t−1} = (Σ_i w_i) σz_t + Σ_i w_i (λ_i − 1) q_i(t−1), which needs
        neither the running sum nor N_{t−1}; its buffers are returned unchanged (the
        caller advances them once the output is computed: :func:`_after`)."""
        if self.recursion is Recursion.TOEPLITZ:
            return head, (head, *q[:-1])[: len(q)]
        if self.recursion is Recursion.INPUT:
            return head, ()
        import jax.numpy as jnp

        dtype = head.dtype
        delta = head * jnp.asarray(math.fsum(self.weight), dtype)
        kept = len(q)  # the running sum (λ = 1, the last) is not kept
        for r, w, a in zip(q, self.weight[:kept], self.decay[:kept], strict=True):
            delta = delta + r * jnp.asarray(w * (a - 1.0), dtype)
        return delta, q

    def _decayed(self, q: tuple[Any, ...], head: Any) -> tuple[Any, ...]:
        """BLT's buffers after step t: λ_i q_i(t−1) + σz_t (one in-place pass each)."""
        import jax.numpy as jnp

        decay = self.decay[: len(q)]  # the running sum (λ = 1) is not kept
        return tuple(r * jnp.asarray(a, head.dtype) + head for r, a in zip(q, decay, strict=True))

    def _advance(self, live: Any, q: tuple[Any, ...], head: Any) -> tuple[Any, tuple[Any, ...]]:
        """N_t and the next buffers (``release="prefix-sum"``) from the buffers
        after step t − 1 and the head."""
        import jax.numpy as jnp

        if self.recursion is Recursion.BLT:
            dtype = head.dtype
            q = tuple(r * jnp.asarray(a, dtype) + head for r, a in zip(q, self.decay, strict=True))
            weight = tuple(jnp.asarray(w, dtype) for w in self.weight)
            (noise,) = _where_live(live, _combine, weight, q)
            return noise, q
        if self.recursion is Recursion.TOEPLITZ:
            total = q[-1] + head  # w_t, w_{t−1}, …, w_{t−n+2} and Σ w
            return total, (*(head, *q[:-2])[: len(q) - 1], total)
        return head, (head,)


def _after(head: Any, out: Any) -> Any:
    """``head``, bit for bit, made to depend on ``out`` (its first element's bits,
    shifted out to zero and or-ed in), so that XLA orders the in-place buffer updates
    that read it after ``out``'s pass, which reads the old buffers. Without the data
    dependency XLA cannot tell the two apart in time and copies every buffer first
    (a read and a write of each per step)."""
    import jax.numpy as jnp
    from jax import lax

    if not out.size or not head.size:
        return head
    first = jnp.ravel(out)[0]
    bits = lax.bitcast_convert_type(first, jnp.dtype(f"uint{8 * first.dtype.itemsize}"))
    half = jnp.asarray(4 * first.dtype.itemsize, bits.dtype)  # two shifts leave 0
    zero = lax.shift_right_logical(lax.shift_right_logical(bits, half), half)
    word = jnp.dtype(f"uint{8 * head.dtype.itemsize}")
    raw = lax.bitcast_convert_type(head, word) | zero.astype(word)
    return lax.bitcast_convert_type(raw, head.dtype)


def _done(heads: tuple[Any, ...]) -> Any:
    """A uint32 scalar computed from the draw, so that whatever takes it runs after
    the draw: whether its first value is NaN (only past the horizon: public)."""
    import jax.numpy as jnp

    for head in heads:
        if head.size:
            return jnp.isnan(jnp.ravel(head)[0]).astype(jnp.uint32)
    return jnp.zeros((), jnp.uint32)


def _combine(weight: tuple[Any, ...], rows: tuple[Any, ...]) -> tuple[Any]:
    """Σ_i weight_i · rows_i (one materialized array)."""
    total = weight[0] * rows[0]
    for w, r in zip(weight[1:], rows[1:], strict=True):
        total = total + w * r
    return (total,)


def _where_live(live: Any, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` where the traced ``live`` holds, else NaN arrays of its shapes.

    A conditional is a fusion boundary for XLA: its result is computed once and
    stored, where an ``jnp.where`` would let XLA recompute an expensive producer (the
    Threefry rounds and the inverse error function) inside each of its consumers.
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    def poisoned(*a: Any) -> Any:
        shapes = jax.eval_shape(fn, *a)
        return jax.tree_util.tree_map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)

    return lax.cond(live, fn, poisoned, *args)


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[Any, Any]:
    """Threefry-2x32 with 20 rounds, written out round by round.

    The same function as jax's ``threefry2x32`` primitive (Salmon et al. 2011: the
    Threefish rotation constants R = 13, 15, 26, 6, 17, 29, 16, 24, a key injection
    every four rounds with the Skein parity constant 0x1BD11BDA); jax lowers it on CPU
    as a rolled loop whose state XLA stores to memory between iterations, while this
    unrolled form fuses with its consumers into one pass.
    """
    from jax import lax

    ks = (k1, k2, k1 ^ k2 ^ np.uint32(_PARITY))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x1 = x1 + x2
            rotated = lax.shift_left(x2, np.uint32(r)) | lax.shift_right_logical(
                x2, np.uint32(32 - r)
            )
            x2 = rotated ^ x1
        x1 = x1 + ks[(block + 1) % 3]
        x2 = x2 + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x1, x2


def _unrolled_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """jax's Threefry random bits (partitionable scheme), bit for bit, unrolled.

    32-bit words of fewer than 2³² elements under ``jax_threefry_partitionable`` (the
    default): the counter of element i is the 64-bit i (high word 0), the word the xor
    of Threefry's two outputs. Everything else is delegated to jax's own function."""
    import jax
    import jax.extend.random as jr
    import jax.numpy as jnp
    from jax import lax

    size = int(np.prod(shape, dtype=np.int64))
    partitionable = jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
    if bit_width != 32 or not 0 < size < 2**32 or not partitionable:
        return jr.threefry_prng_impl.random_bits(key, bit_width, shape)
    low = lax.iota(np.uint32, size).reshape(shape)
    b1, b2 = _threefry2x32(key[0], key[1], jnp.zeros(shape, np.uint32), low)
    return b1 ^ b2


_UNROLLED: list[Any] = []


def _unrolled(key: Any) -> Any:
    """``key`` (a Threefry-2x32 key) with the unrolled lowering of its random bits:
    the same key data, the same bits (tested), fused by XLA. Other keys unchanged."""
    import jax
    import jax.extend.random as jr

    if str(jax.random.key_impl(key)) != "threefry2x32":
        return key
    if not _UNROLLED:
        fry = jr.threefry_prng_impl
        _UNROLLED.append(
            jr.define_prng_impl(
                key_shape=fry.key_shape,
                seed=fry.seed,
                split=fry.split,
                random_bits=_unrolled_bits,
                fold_in=fry.fold_in,
                name="threefry2x32 (unrolled lowering)",
                tag="fry_unrolled",
            )
        )
    return jax.random.wrap_key_data(jax.random.key_data(key), impl=_UNROLLED[0])


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
