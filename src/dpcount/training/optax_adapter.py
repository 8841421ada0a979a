"""The privatizer as an optax ``GradientTransformation`` (optional: ``dpcount[training]``).

jax and optax are imported when :func:`optax_privatizer` is called, never when
:mod:`dpcount` or :mod:`dpcount.training` is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpcount._validate import check_instance
from dpcount.durable.atomic import check_path, read_private_json, write_atomic
from dpcount.durable.lock import FileLock
from dpcount.training._ledger_ffi import ledger_gate, register_ledger
from dpcount.training.jax_noise import (
    JaxNoiseProcess,
    JaxNoiseState,
    jax_noise_process,
    run_key,
)
from dpcount.training.privatizer import GradientPrivatizer, NoiseState

__all__ = ["OptaxDeviceNoiseState", "OptaxNoiseState", "optax_privatizer"]

_INSTALL_HINT = "optax_privatizer needs jax and optax: pip install 'dpcount[training]'"

RESERVED_STEPS = 64
"""Steps a durable step ledger reserves per write (one locked, atomic write per block)."""


class OptaxDeviceNoiseState(NamedTuple):
    """The jit-able transformation's state: the device noise state (a pytree of device
    arrays, as sensitive as the data; see :class:`~dpcount.training.jax_noise.JaxNoiseState`)."""

    noise: JaxNoiseState


class OptaxNoiseState(NamedTuple):
    """The transformation's state: the privatizer's :class:`NoiseState` (as sensitive
    as the data) and the structure of the updates it was started for."""

    noise: NoiseState
    treedef: Any


class _StepLedger:
    """The host-side record of the last step each device run drew (keyed by the run's
    key data): a step at or below it is a replay of released noise and is refused.

    With a ``folder``, the record is also durable, in blocks: before the first step of
    a block of :data:`RESERVED_STEPS` steps the ledger reserves the block in the run's
    file (under a process lock, written atomically), refusing if the file shows that
    steps from there on were reserved already (by another process or ledger with the
    same key). A step is only released inside a block this ledger reserved, and a
    reservation only grows the file, so no step is released by two ledgers sharing
    the folder; the steps of a block a process did not reach are lost to every run
    with that key (never released).
    """

    def __init__(self, folder: Path | None = None) -> None:
        self._last: dict[bytes, int] = {}
        self._reserved: dict[bytes, int] = {}
        self._folder = folder
        self._lock = threading.Lock()
        self.ident = register_ledger(self)

    def check_step(self, run: bytes, t: int) -> None:
        """Record step ``t`` of ``run`` (its key data), or raise ValueError if this
        ledger drew it already (or another one reserved it, with a folder)."""
        with self._lock:
            last = self._last.get(run, 0)
            if t <= last:
                raise ValueError(
                    f"replayed step: this run already drew step {last}, and a state from "
                    f"step {t - 1} was passed again (its noise would be released twice); "
                    "thread the latest state"
                )
            if self._folder is not None and t > self._reserved.get(run, 0):
                self._reserved[run] = self._reserve(self._folder, run, t)
            self._last[run] = t

    @staticmethod
    def _reserve(folder: Path, run: bytes, t: int) -> int:
        """Reserve steps t … t + RESERVED_STEPS − 1 of ``run`` in its file in ``folder``."""
        name = hashlib.sha256(b"dpcount jax noise run\0" + run).hexdigest()[:32]
        path = folder / f"{name}.steps.json"
        with FileLock(folder / f"{name}.steps.lock"):
            reserved = 0
            if os.path.lexists(path):
                value = read_private_json(path, "step ledger", 4096).get("reserved")
                if type(value) is not int or value < 0:
                    raise ValueError(f"{path} is not a dpcount step ledger")
                reserved = value
            if t <= reserved:
                raise ValueError(
                    f"replayed step: steps up to {reserved} of this run (this key) were "
                    f"reserved in {path} by another process or transformation, and step "
                    f"{t} was asked for (its noise may have been released already)"
                )
            end = t + RESERVED_STEPS - 1
            write_atomic(path, [json.dumps({"reserved": end}).encode()])
        return end


def optax_privatizer(
    privatizer: GradientPrivatizer,
    *,
    device: bool = False,
    replay_guard: bool = True,
    ledger: str | os.PathLike[str] | None = None,
) -> Any:
    """An ``optax.GradientTransformation`` that privatizes the updates it receives.

    The updates it is given must be the *sum* over the batch of clipped per-example
    gradients (clip each example to the privatizer's clip norm, e.g. with
    ``jax.vmap`` and :func:`~dpcount.training.clip_and_sum` or its jax equivalent);
    it returns the noisy gradient (or prefix sum, per ``privatizer.release``) with
    the updates' structure and dtypes. Chain it before the optimizer, e.g.
    ``optax.chain(optax_privatizer(p), optax.scale(1 / batch_size), optax.sgd(lr))``
    (divide by the public nominal batch size, not the actual count).

    Where the noise is drawn (``device``):

    * ``False`` (default): on the host with numpy (the privatizer's Generator, every
      mechanism): float64, snapped to the float-safe grid
      (:mod:`dpcount.privacy.float_safe`), so
      :meth:`~dpcount.training.GradientPrivatizer.guarantee` covers the released
      values. ``update`` must run outside ``jax.jit`` (jit the gradient computation).
    * ``True``: on the device, by :mod:`dpcount.training.jax_noise` (``blt``,
      ``toeplitz`` and ``input`` mechanisms): ``update`` is a pure function of its
      arguments and runs inside ``jax.jit`` with the rest of the step. ``init`` draws
      the run's key from the privatizer's Generator on the host, so it must run
      outside ``jit`` (it refuses traced parameters). The device path works in the
      leaves' float precision (float32 by default), with JAX's 64-bit Threefry keys,
      and does not snap: it is **not** float-safe and the privatizer's float-safety
      term does not cover it (the noise distribution and the exact-real guarantee are
      the same). Opt in for throughput where that is acceptable. Jit the training
      step with the optimizer state donated (``donate_argnums``) so the noise
      buffers are updated in place (without donation every step allocates them
      afresh: ``benchmarks/bench_training_jax.py``'s "not donated" row).

      A host-side ledger records the last step of each run this transformation drew
      and refuses a replay: passing an older state again fails the step (reading its
      outputs raises ``jax.errors.JaxRuntimeError``, or ValueError where jax raises
      at dispatch, with the ledger's message "replayed step ...") instead of
      releasing its noise on other gradients. The ledger is asked through an XLA
      custom call (:mod:`dpcount.training._ledger_ffi`: a :mod:`ctypes` handler
      registered with ``jax.ffi``, nothing compiled; an unordered ``io_callback``
      where it cannot be registered or jax's default backend is not the CPU) whose
      answer gates every value derived from the step's noise
      (:meth:`~dpcount.training.jax_noise.JaxNoiseProcess.gated`): the output and
      each buffer the step writes are computed from ``where(answer, draw, NaN)``, so
      none of them exists before the host answered, and a refusal (an XLA error)
      fails the whole computation, so none of its outputs can be read. The call is
      a side effect for XLA: two updates of one state in one jitted function, or in
      every turn of a loop, are as many calls, and all but the first are refused.
      The draw itself, a temporary of the computation, is computed first and the
      host call after it (by then the Python thread that dispatched the step is
      usually waiting for it, so the call finds the GIL free). It costs one host
      call per step (microseconds), no pass over the parameters, and jax keeps its
      asynchronous dispatch. The ledger lives in this transformation object, in
      memory: a state restored into a new process or another transformation is not
      caught (a donated state is consumed by the step, which refuses it too).
      ``replay_guard=False`` drops the ledger; the caller then guarantees that no
      state is ever passed twice.

      ``ledger`` (a folder) makes the record durable and shared: before the first
      step of every block of ``RESERVED_STEPS`` (64) steps the transformation
      reserves the block in a file of that folder named by a digest of the run's key
      (SHA-256; the key has 64 bits, so the name is no weaker than the key), under a
      process lock, and refuses a step another process or transformation with the
      same key reserved. So two processes with one key (a seeded privatizer run
      twice, a state restored elsewhere) never release one step twice; the price is
      one locked atomic write per 64 steps, and the steps of a block a process did
      not reach cannot be used by any later process with that key (a run cannot be
      resumed from an older state: that would replay the steps after it).

    Each ``init`` starts a fresh run (fresh noise, its own privacy budget); its state
    is as sensitive as the data.

    Raises:
        ImportError: jax or optax is not installed.
        TypeError: ``privatizer`` is not a GradientPrivatizer.
        ValueError: ``device=True`` for a mechanism without a device process.
        TypeError: ``device`` or ``replay_guard`` is not a bool.
        ValueError: ``replay_guard=False`` without ``device=True``.
        TypeError: ``ledger`` is not a path.
        ValueError: ``ledger`` without ``device=True`` and the replay guard, or not an
            existing folder.
    """
    check_instance("privatizer", privatizer, GradientPrivatizer, "a GradientPrivatizer")
    check_instance("device", device, bool, "a bool")
    check_instance("replay_guard", replay_guard, bool, "a bool")
    if not replay_guard and not device:
        raise ValueError(
            "replay_guard=False is for device=True only (the numpy path always refuses a "
            "stale state)"
        )
    folder = None
    if ledger is not None:
        try:
            folder = Path(check_path(ledger))
        except TypeError:
            raise TypeError(f"ledger must be a folder path, got {type(ledger).__name__}") from None
        if not (device and replay_guard):
            raise ValueError("ledger is the replay guard's record: it needs device=True")
        if not folder.is_dir():
            raise ValueError(f"ledger must be an existing folder, got {folder}")
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc

    if device:
        process = jax_noise_process(privatizer)
        return _device_transformation(privatizer, process, replay_guard, folder)

    def init_fn(params: Any) -> OptaxNoiseState:
        leaves, treedef = jax.tree_util.tree_flatten(params)
        return OptaxNoiseState(privatizer.init([tuple(np.shape(x)) for x in leaves]), treedef)

    def update_fn(
        updates: Any, state: OptaxNoiseState, params: Any = None
    ) -> tuple[Any, OptaxNoiseState]:
        del params  # the noise does not depend on the parameters
        leaves, treedef = jax.tree_util.tree_flatten(updates)
        if treedef != state.treedef:
            raise TypeError(
                f"updates must have the structure given to init ({state.treedef}), got {treedef}"
            )
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            raise TypeError(
                "optax_privatizer's update cannot run under jax.jit or another transform: "
                "the noise is drawn on the host; jit the gradient computation instead"
            )
        noisy, noise = privatizer.privatize(state.noise, [np.asarray(x) for x in leaves])
        out = [jnp.asarray(n, dtype=x.dtype) for n, x in zip(noisy, leaves, strict=True)]
        return jax.tree_util.tree_unflatten(treedef, out), OptaxNoiseState(noise, treedef)

    return optax.GradientTransformation(init_fn, update_fn)


def _device_transformation(
    privatizer: GradientPrivatizer, process: JaxNoiseProcess, guard: bool, folder: Path | None
) -> Any:
    """The jit-able transformation over ``process`` (see :func:`optax_privatizer`)."""
    import jax
    import optax

    ledger = _StepLedger(folder)  # the handler holds it weakly; update_fn strongly

    def init_fn(params: Any) -> OptaxDeviceNoiseState:
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(params)):
            raise TypeError(
                "optax_privatizer's init must run outside jax.jit: it draws the run's key on "
                "the host (a key traced into a compiled init would repeat in every run)"
            )
        return OptaxDeviceNoiseState(process.init(run_key(privatizer.rng), params))

    def update_fn(
        updates: Any, state: OptaxDeviceNoiseState, params: Any = None
    ) -> tuple[Any, OptaxDeviceNoiseState]:
        del params  # the noise does not depend on the parameters
        if not guard:
            noisy, noise = process.privatize(state.noise, updates)
            return noisy, OptaxDeviceNoiseState(noise)
        # The ledger's answer gates every value derived from the step's noise (the
        # output and each new buffer: JaxNoiseProcess.gated), so XLA finishes the host
        # check before any of them exists; a refusal fails the computation.
        run = jax.random.key_data(state.noise.key)
        noisy, noise = process.gated(
            state.noise, updates, lambda t, done: ledger_gate(ledger.ident, run, t, done)
        )
        return noisy, OptaxDeviceNoiseState(noise)

    return optax.GradientTransformation(init_fn, update_fn)
