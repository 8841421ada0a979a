"""The optax adapter: the same noise as the numpy privatizer, the updates' structure
and dtypes, and refusals (jit, another structure). Skipped without jax/optax; slow
(importing jax and compiling cost about two seconds), so collecting this file does not
import jax."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from dpcount.privacy import Budget, ZeroNoise
from dpcount.training import GradientPrivatizer, gaussian_privatizer, optax_privatizer

pytestmark = pytest.mark.slow


def _imports() -> tuple[Any, Any, Any]:
    return (
        pytest.importorskip("jax"),
        pytest.importorskip("jax.numpy"),
        pytest.importorskip("optax"),
    )


def _privatizer(seed: int) -> GradientPrivatizer:
    return gaussian_privatizer(
        "blt",
        epochs=2,
        batches_per_epoch=3,
        clip_norm=1.0,
        budget=Budget(epsilon=2.0, delta=1e-5),
        rng=seed,
    )


def test_optax_noise_is_the_privatizers_and_sgd_applies_it() -> None:
    _, jnp, optax = _imports()
    params = {"w": jnp.zeros((2, 3), jnp.float32), "b": jnp.zeros(3, jnp.float32)}
    lr = 0.5
    tx = optax.chain(optax_privatizer(_privatizer(5), device=False), optax.sgd(lr))
    state = tx.init(params)
    reference = _privatizer(5)
    ref_state = reference.init({"w": (2, 3), "b": (3,)})
    grads = {"w": jnp.ones((2, 3), jnp.float32), "b": jnp.full(3, 0.5, jnp.float32)}
    for _ in range(6):
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        noisy, ref_state = reference.privatize(ref_state, grads)
        assert updates["w"].dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(updates["w"]), -lr * noisy["w"], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(updates["b"]), -lr * noisy["b"], rtol=1e-6)
    with pytest.raises(ValueError, match="at its horizon"):
        tx.update(grads, state, params)


def test_zero_noise_passes_updates_through_and_bad_use_is_refused() -> None:
    jax, jnp, _ = _imports()
    exact = GradientPrivatizer(_privatizer(0).mechanism.with_sampler(ZeroNoise()), rng=0)
    tx = optax_privatizer(exact)
    params = [jnp.zeros(2), (jnp.zeros(()), jnp.zeros(1))]
    state = tx.init(params)
    grads = [jnp.array([1.0, -2.0]), (jnp.array(3.0), jnp.array([4.0]))]
    out, state = tx.update(grads, state)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(grads)
    leaves = zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(grads), strict=True)
    for got, want in leaves:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(TypeError, match="updates must have the structure given to init"):
        tx.update([jnp.zeros(2)], state)
    with pytest.raises(TypeError, match=r"cannot run under jax\.jit"):
        jax.jit(lambda g: tx.update(g, state)[0])(grads)
    with pytest.raises(TypeError, match="privatizer must be a GradientPrivatizer"):
        optax_privatizer("blt")


def test_importing_dpcount_does_not_import_jax() -> None:
    code = "import sys, dpcount, dpcount.training; print('jax' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"
