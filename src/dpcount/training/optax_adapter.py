"""The privatizer as an optax ``GradientTransformation`` (optional: ``dpcount[training]``).

jax and optax are imported when :func:`optax_privatizer` is called, never when
:mod:`dpcount` or :mod:`dpcount.training` is imported.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from dpcount._validate import check_instance
from dpcount.training.privatizer import GradientPrivatizer, NoiseState

__all__ = ["OptaxNoiseState", "optax_privatizer"]

_INSTALL_HINT = "optax_privatizer needs jax and optax: pip install 'dpcount[training]'"


class OptaxNoiseState(NamedTuple):
    """The transformation's state: the privatizer's :class:`NoiseState` (as sensitive
    as the data) and the structure of the updates it was started for."""

    noise: NoiseState
    treedef: Any


def optax_privatizer(privatizer: GradientPrivatizer) -> Any:
    """An ``optax.GradientTransformation`` that privatizes the updates it receives.

    The updates it is given must be the *sum* over the batch of clipped per-example
    gradients (clip each example to the privatizer's clip norm, e.g. with
    ``jax.vmap`` and :func:`~dpcount.training.clip_and_sum` or its jax equivalent);
    it returns the noisy gradient (or prefix sum, per ``privatizer.release``) with
    the updates' structure and dtypes. Chain it before the optimizer, e.g.
    ``optax.chain(optax_privatizer(p), optax.scale(1 / batch_size), optax.sgd(lr))``
    (divide by the public nominal batch size, not the actual count).

    The noise is drawn on the host with numpy (the privatizer's Generator), so
    ``update`` must run outside ``jax.jit`` (jit the gradient computation instead).
    Each ``init`` starts a fresh run (fresh noise, its own privacy budget); its state
    is as sensitive as the data.

    Raises:
        ImportError: jax or optax is not installed.
        TypeError: ``privatizer`` is not a GradientPrivatizer.
    """
    check_instance("privatizer", privatizer, GradientPrivatizer, "a GradientPrivatizer")
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc

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
