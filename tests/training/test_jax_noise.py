"""The jit-able JAX noise process: the exact structure N = σ·B z against a dense decoder
(the same z, float64), the covariance by Monte Carlo (with a wrong σ rejected), jit,
the horizon and refusals. Slow: importing jax and compiling cost seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcount.counting import InputPerturbation, ToeplitzFactorization
from dpcount.privacy import Budget, Participation, ZeroNoise
from dpcount.training import GradientPrivatizer, gaussian_privatizer, optax_privatizer
from tests.stats import Z_TOLERANCE, variance_z_scores

pytestmark = pytest.mark.slow

EPOCHS, BATCHES = 2, 3
T = EPOCHS * BATCHES


def _jax() -> tuple[Any, Any]:
    return pytest.importorskip("jax"), pytest.importorskip("jax.numpy")


def _budget() -> Budget:
    return Budget(epsilon=2.0, delta=1e-5)


def _privatizer(name: str, release: str = "gradient", seed: int = 0) -> GradientPrivatizer:
    if name.startswith("toeplitz-"):  # banded, calibrated by hand like the registry
        coefficients = [1.0, -0.4, 0.1] if name == "toeplitz-banded" else [1.0]
        run = Budget(
            epsilon=2.0,
            delta=1e-5,
            noise="gaussian",
            participation=Participation(max_participations=EPOCHS, min_separation=BATCHES),
        )
        mech = ToeplitzFactorization(T, coefficients=coefficients, budget=run)
        return GradientPrivatizer(mech, release=release, rng=seed)
    return gaussian_privatizer(
        name,
        epochs=EPOCHS,
        batches_per_epoch=BATCHES,
        clip_norm=1.0,
        budget=_budget(),
        release=release,
        rng=seed,
    )


def _decoder(p: GradientPrivatizer) -> np.ndarray:
    m = p.mechanism
    if isinstance(m, InputPerturbation):
        return np.tril(np.ones((T, T)))
    return np.asarray(m.dense_factorization()[0])


@pytest.mark.parametrize("name", ["blt", "toeplitz", "toeplitz-banded", "toeplitz-1", "input"])
@pytest.mark.parametrize("release", ["gradient", "prefix-sum"])
def test_device_noise_is_sigma_times_the_decoder_on_the_same_z(name: str, release: str) -> None:
    """Exact structure (float64): the released values are the clipped sums plus σ·(B z)
    (prefix sums) or its increments (gradients), z the process's own normals."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import jax_noise_process

    p = _privatizer(name, release)
    process = jax_noise_process(p)
    with jax.enable_x64(True):
        key = jax.random.key(7)
        params = {"a": jnp.zeros((2, 3)), "b": jnp.zeros(4)}
        state = process.init(key, params)
        rng = np.random.default_rng(1)
        grads = [{"a": rng.normal(size=(2, 3)), "b": rng.normal(size=4)} for _ in range(T)]
        outs = []
        for g in grads:
            out, state = process.privatize(state, jax.tree_util.tree_map(jnp.asarray, g))
            outs.append(out)
        for index, leaf in enumerate(("a", "b")):
            shape = params[leaf].shape
            z = np.stack(
                [
                    np.asarray(
                        jax.random.normal(
                            jax.random.fold_in(jax.random.fold_in(key, t), index), shape
                        )
                    )
                    for t in range(1, T + 1)
                ]
            ).reshape(T, -1)
            noise = process.sigma * (_decoder(p) @ z)  # N_1..N_T
            g = np.stack([x[leaf] for x in grads]).reshape(T, -1)
            if release == "gradient":
                want = g + np.diff(noise, axis=0, prepend=0.0)
            else:
                want = np.cumsum(g, axis=0) + noise
            got = np.stack([np.asarray(o[leaf]) for o in outs]).reshape(T, -1)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * process.sigma)


@pytest.mark.parametrize("name", ["blt", "toeplitz"])
def test_prefix_variance_matches_the_exact_formula_and_a_wrong_sigma_fails(name: str) -> None:
    """float32, 2·10^5 i.i.d. coordinates per step: the second moment of N_t is within
    5.5 standard errors of ``prefix_variance(t)`` at every t; 1.05σ is rejected."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import jax_noise_process

    p = _privatizer(name, "prefix-sum")
    process = jax_noise_process(p)
    d = 200_000
    zero = jnp.zeros(d, jnp.float32)
    state = process.init(jax.random.key(3), zero)
    step = jax.jit(process.privatize)
    columns = []
    for _ in range(T):
        out, state = step(state, zero)
        columns.append(np.asarray(out, dtype=np.float64))
    errors = np.stack(columns, axis=1)  # coordinates × steps
    exact = p.prefix_variances()
    z = variance_z_scores(errors, exact)
    assert np.max(np.abs(z)) < Z_TOLERANCE, z
    assert np.max(np.abs(variance_z_scores(errors, 1.05**2 * exact))) > Z_TOLERANCE


def test_jit_matches_eager_and_past_the_horizon_is_nan() -> None:
    jax, jnp = _jax()
    from dpcount.training.jax_noise import jax_noise_process

    process = jax_noise_process(_privatizer("blt"))
    params = [jnp.zeros(5, jnp.float32), jnp.zeros((2, 2), jnp.float32)]
    grads = [jnp.ones(5, jnp.float32), jnp.full((2, 2), 0.5, jnp.float32)]
    eager = process.init(jax.random.key(0), params)
    jitted = process.init(jax.random.key(0), params)
    step = jax.jit(process.privatize)
    for _ in range(T):
        a, eager = process.privatize(eager, grads)
        b, jitted = step(jitted, grads)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)
            assert np.isfinite(np.asarray(y)).all()
    past, _ = step(jitted, grads)
    assert all(np.isnan(np.asarray(x)).all() for x in past)


def test_optax_device_update_runs_under_jit_and_init_refuses_jit() -> None:
    jax, jnp = _jax()
    optax = pytest.importorskip("optax")
    from dpcount.training import OptaxDeviceNoiseState

    tx = optax.chain(optax_privatizer(_privatizer("blt", seed=None), device=True), optax.sgd(0.1))
    params = {"w": jnp.zeros((3, 2), jnp.float32)}
    state = tx.init(params)
    assert isinstance(state[0], OptaxDeviceNoiseState)

    @jax.jit
    def train_step(params: Any, state: Any) -> Any:
        grads = {"w": jnp.ones((3, 2), jnp.float32)}
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params, state = train_step(params, state)
    params, state = train_step(params, state)
    assert np.isfinite(np.asarray(params["w"])).all() and int(state[0].noise.step) == 2
    # two inits, two keys: different noise
    other = tx.init({"w": jnp.zeros((3, 2), jnp.float32)})
    assert not np.array_equal(
        np.asarray(jax.random.key_data(other[0].noise.key)),
        np.asarray(jax.random.key_data(state[0].noise.key)),
    )
    with pytest.raises(TypeError, match=r"init must run outside jax\.jit"):
        jax.jit(tx.init)(params)


def test_unsupported_mechanisms_fall_back_or_are_refused() -> None:
    _jax()
    pytest.importorskip("optax")
    from dpcount.training import OptaxNoiseState
    from dpcount.training.jax_noise import jax_noise_process

    tree = _privatizer("binary")
    with pytest.raises(ValueError, match="supports the blt, toeplitz and input"):
        jax_noise_process(tree)
    with pytest.raises(ValueError, match="supports the blt, toeplitz and input"):
        optax_privatizer(tree, device=True)
    assert isinstance(optax_privatizer(tree).init([np.zeros(2)]), OptaxNoiseState)
    zero = GradientPrivatizer(_privatizer("blt").mechanism.with_sampler(ZeroNoise()), rng=0)
    with pytest.raises(ValueError, match="another sampler"):
        jax_noise_process(zero)


@pytest.mark.parametrize("ffi", [True, False], ids=["ffi-handler", "io-callback"])
def test_optax_device_update_refuses_a_replayed_state(
    ffi: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host ledger: passing an older state again fails the step (under jit and
    eagerly; twice in one computation, or in every turn of a loop, too) instead of
    releasing its noise twice; the latest state keeps working, and another run
    (another key) is independent. Through the FFI handler and the io_callback
    fallback."""
    jax, jnp = _jax()
    pytest.importorskip("optax")
    from dpcount.training import _ledger_ffi

    assert _ledger_ffi._registered()  # this jax takes the handler: the default path
    if not ffi:
        monkeypatch.setattr(_ledger_ffi, "_REGISTRATION", [False])
    refused = (ValueError, jax.errors.JaxRuntimeError)
    tx = optax_privatizer(_privatizer("blt", seed=3), device=True)
    grads = {"w": jnp.ones((3, 2), jnp.float32)}
    update = jax.jit(tx.update)
    first = tx.init(grads)
    _, second = update(grads, first)
    with pytest.raises(refused, match="replayed step"):
        jax.block_until_ready(update(grads, first))
    with pytest.raises(refused, match="replayed step"):
        jax.block_until_ready(tx.update(grads, first))
    out, third = update(grads, second)
    assert np.isfinite(np.asarray(out["w"])).all() and int(third.noise.step) == 2

    @jax.jit
    def twice(state: Any) -> Any:  # one state, two updates, one computation
        return tx.update(grads, state)[0], tx.update(grads, state)[0]

    @jax.jit
    def loop(state: Any) -> Any:  # the same state in every turn of a loop
        def body(total: Any, _: Any) -> Any:
            return total + tx.update(grads, state)[0]["w"].sum(), None

        return jax.lax.scan(body, 0.0, None, length=2)[0]

    with pytest.raises(refused, match="replayed step"):
        jax.block_until_ready(twice(third))
    with pytest.raises(refused, match="replayed step"):
        jax.block_until_ready(loop(tx.init(grads)))
    other = tx.init(grads)  # a fresh run, a fresh key: its step 1 is not a replay
    out, _ = update(grads, other)
    assert np.isfinite(np.asarray(out["w"])).all()
    unguarded = optax_privatizer(_privatizer("blt", seed=3), device=True, replay_guard=False)
    start = unguarded.init(grads)
    again = [np.asarray(jax.jit(unguarded.update)(grads, start)[0]["w"]) for _ in range(2)]
    np.testing.assert_array_equal(again[0], again[1])  # the hazard the ledger refuses
    guarded = optax_privatizer(_privatizer("blt", seed=3), device=True)
    np.testing.assert_array_equal(  # the gate changes no bit of the noise
        np.asarray(jax.jit(guarded.update)(grads, guarded.init(grads))[0]["w"]), again[0]
    )
    with pytest.raises(ValueError, match="replay_guard"):
        optax_privatizer(_privatizer("blt"), replay_guard=False)


def test_the_guard_is_a_side_effecting_custom_call_not_a_python_callback() -> None:
    """The guarded step compiles to one call of the ledger's FFI handler, marked as a
    side effect for XLA (never merged, hoisted or dropped), and to no jax host
    callback (so jax keeps its fast, asynchronous dispatch)."""
    jax, jnp = _jax()
    pytest.importorskip("optax")
    tx = optax_privatizer(_privatizer("blt", seed=3), device=True)
    grads = {"w": jnp.ones(4, jnp.float32)}
    text = jax.jit(tx.update).lower(grads, tx.init(grads)).compile().as_text()
    (call,) = [line for line in text.splitlines() if "custom-call(" in line]
    assert 'custom_call_target="dpcount_step_ledger"' in call
    assert "custom_call_has_side_effect=true" in call
    assert "python_cpu_callback" not in text  # jax's host callbacks are custom calls too


@pytest.mark.parametrize("name", ["blt", "toeplitz-banded", "input"])
@pytest.mark.parametrize("release", ["gradient", "prefix-sum"])
def test_a_failed_gate_poisons_every_noise_value_and_a_passed_one_changes_no_bit(
    name: str, release: str
) -> None:
    """``gated`` with a traced gate: True releases exactly what ``privatize`` does
    (output and next state, bit for bit); False leaves no finite value derived from
    the step's noise: the output and every buffer the step wrote are NaN."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import jax_noise_process

    process = jax_noise_process(_privatizer(name, release))
    params = [jnp.zeros(5, jnp.float32), jnp.zeros((2, 2), jnp.float32)]
    grads = [jnp.ones(5, jnp.float32), jnp.full((2, 2), 0.5, jnp.float32)]
    state = process.init(jax.random.key(4), params)
    step, gated = jax.jit(process.privatize), jax.jit(process.gated)
    state = step(state, grads)[1]  # one step in, so the buffers hold noise

    def values(result: Any) -> list[Any]:
        out, new = result
        return jax.tree_util.tree_leaves((out, new.step, new.buffers, new.previous))

    def asked(answer: bool) -> Any:  # the gate as a function of (t, done)
        def gate(t: Any, done: Any) -> Any:  # done is 0 within the horizon
            return jnp.logical_and(done == 0, answer)

        return jax.jit(lambda s, g: process.gated(s, g, gate))

    want = step(state, grads)
    for same in gated(state, grads, jnp.bool_(True)), asked(True)(state, grads):
        for x, y in zip(values(want), values(same), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for out, new in gated(state, grads, jnp.bool_(False)), asked(False)(state, grads):
        assert all(np.isnan(np.asarray(x)).all() for x in out)
        written = [q[0] for q in new.buffers if q]  # the newest value of each recursion
        if name == "blt":
            written = [r for q in new.buffers for r in q]  # every BLT buffer is rewritten
        assert written or process.rows == 0
        assert all(np.isnan(np.asarray(x)).all() for x in written)
    assert int(new.step) == int(state.step) + 1


def test_blt_gradient_step_is_one_pass_per_buffer_in_place() -> None:
    """The compiled, donated, guarded BLT step released as gradients keeps the n
    buffers only (no running sum, no N_{t−1}) and makes n + 1 passes over leaf-sized
    arrays besides the draw (the output, then one in-place update per buffer): no
    leaf-sized copy (the updates are ordered after the output by a data dependency)
    and no float64."""
    jax, jnp = _jax()
    pytest.importorskip("optax")
    from dpcount.training.jax_noise import jax_noise_process

    tx = optax_privatizer(_privatizer("blt", seed=3), device=True)
    grads = jnp.ones(1000, jnp.float32)
    state = tx.init(grads)
    n = len(state.noise.buffers[0])
    assert n == len(jax_noise_process(_privatizer("blt")).decay) - 1
    assert state.noise.previous[0].size == 0
    step = jax.jit(tx.update, donate_argnums=(0, 1))
    text = step.lower(grads, state).compile().as_text()
    entry = text[text.index("ENTRY") :].splitlines()[1:]
    passes = [line for line in entry if "= f32[1000]{0} fusion(" in line]
    assert len(passes) == n + 1, passes
    assert not [line for line in entry if "f32[1000]{0} copy(" in line]
    assert "f64" not in text


def test_after_changes_no_bit() -> None:
    """``_after`` (the data dependency ordering the buffer updates) returns its first
    argument bit for bit, whatever the output's first value (NaN, −0.0, ±inf)."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import _after

    head = np.array([0.0, -0.0, 1.5, -np.inf, np.nan, 1e-45], np.float32)
    for first in (np.nan, -0.0, np.inf, -3.25, 7.0):
        out = jnp.asarray(np.array([first, 1.0], np.float32))
        got = np.asarray(jax.jit(_after)(jnp.asarray(head), out))
        assert got.tobytes() == head.tobytes()


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4)])
def test_unrolled_threefry_draws_jaxs_own_bits_and_normals(shape: tuple[int, ...]) -> None:
    """The device step's unrolled Threefry lowering is the same PRNG: the same bits
    (32-bit; other widths are delegated) and the same float32 normals as jax's own
    threefry2x32 key, bit for bit, eagerly and under jit."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import _unrolled

    for seed in (0, 1, 2**31 + 5):
        key = jax.random.fold_in(jax.random.key(seed), 11)
        fast = _unrolled(key)
        assert np.array_equal(jax.random.key_data(fast), jax.random.key_data(key))
        for width in (8, 16, 32, 64) if jax.config.jax_enable_x64 else (8, 16, 32):
            dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}[width]
            np.testing.assert_array_equal(
                jax.random.bits(fast, shape, dtype), jax.random.bits(key, shape, dtype)
            )
        want = np.asarray(jax.random.normal(key, shape, jnp.float32))
        got = jax.jit(lambda k: jax.random.normal(_unrolled(k), shape, jnp.float32))(key)
        np.testing.assert_array_equal(np.asarray(got), want)
    other = jax.random.key(0, impl="rbg")
    assert _unrolled(other) is other  # another PRNG is left alone


def test_donated_state_updates_in_place_with_the_same_values() -> None:
    """A step jitted with the state donated (the in-place update the benchmark
    measures) releases exactly what the undonated step releases; the donated old
    state is consumed."""
    jax, jnp = _jax()
    from dpcount.training.jax_noise import jax_noise_process

    for name in ("blt", "toeplitz-banded", "input"):
        process = jax_noise_process(_privatizer(name))
        params = [jnp.zeros(5, jnp.float32), jnp.zeros((2, 2), jnp.float32)]
        grads = [jnp.ones(5, jnp.float32), jnp.full((2, 2), 0.5, jnp.float32)]
        plain = process.init(jax.random.key(4), params)
        donated = process.init(jax.random.key(4), params)
        step = jax.jit(process.privatize)
        in_place = jax.jit(process.privatize, donate_argnums=0)
        for _ in range(T):
            a, plain = step(plain, grads)
            old = donated
            b, donated = in_place(donated, grads)
            for x, y in zip(a, b, strict=True):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert old.step.is_deleted() and old.previous[0].is_deleted()


_LEDGER_CHILD = """
import sys

import jax
import jax.numpy as jnp

from dpcount.training import optax_privatizer
from tests.training.test_jax_noise import _privatizer

tx = optax_privatizer(_privatizer("blt", seed=7), device=True, ledger=sys.argv[1])
grads = {"w": jnp.ones(3, jnp.float32)}
out, state = jax.jit(tx.update)(grads, tx.init(grads))
jax.block_until_ready(out)
print("released step 1")
"""


def test_durable_ledger_refuses_a_step_a_separate_process_released(tmp_path: Any) -> None:
    """Two real processes with one key: a child process releases step 1 through the
    ledger folder and exits; this process, same seed (same key), same folder, is refused
    step 1, while a fresh folder lets it through (so the refusal is the ledger's)."""
    jax, jnp = _jax()
    pytest.importorskip("optax")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    child = subprocess.run(
        [sys.executable, "-c", _LEDGER_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert "released step 1" in child.stdout
    grads = {"w": jnp.ones(3, jnp.float32)}
    here = optax_privatizer(_privatizer("blt", seed=7), device=True, ledger=tmp_path)
    with pytest.raises((ValueError, jax.errors.JaxRuntimeError), match="steps up to"):
        jax.block_until_ready(jax.jit(here.update)(grads, here.init(grads)))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    other = optax_privatizer(_privatizer("blt", seed=7), device=True, ledger=fresh)
    out, _ = jax.jit(other.update)(grads, other.init(grads))
    assert np.isfinite(np.asarray(out["w"])).all()


def test_durable_ledger_refuses_a_step_another_process_reserved(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two transformations sharing a ledger folder stand for two processes with one
    key (a seeded privatizer run twice): the second cannot release a step the first
    reserved; the file grows by blocks (2 steps here) and only its owner reads it."""
    jax, jnp = _jax()
    pytest.importorskip("optax")
    from dpcount.training import optax_adapter

    monkeypatch.setattr(optax_adapter, "RESERVED_STEPS", 2)
    grads = {"w": jnp.ones(3, jnp.float32)}
    first = optax_privatizer(_privatizer("blt", seed=5), device=True, ledger=tmp_path)
    state = first.init(grads)
    step = jax.jit(first.update)
    for _ in range(3):  # steps 1, 2 (block 1-2), 3 (block 3-4)
        out, state = step(grads, state)
        assert np.isfinite(np.asarray(out["w"])).all()
    (path,) = tmp_path.glob("*.steps.json")
    assert path.read_text() == '{"reserved": 4}' and (path.stat().st_mode & 0o077) == 0
    key = np.asarray(jax.random.key_data(state.noise.key)).tobytes()
    assert key.hex() not in path.name  # a digest names the run, not the key
    second = optax_privatizer(_privatizer("blt", seed=5), device=True, ledger=tmp_path)
    again = second.init(grads)  # the same seed: the same key
    same = jax.random.key_data(again.noise.key), jax.random.key_data(state.noise.key)
    assert np.array_equal(*same)
    refused = (ValueError, jax.errors.JaxRuntimeError)
    with pytest.raises(refused, match=r"steps up to 4 of this run"):
        jax.block_until_ready(jax.jit(second.update)(grads, again))
    # without the shared folder the second process would release step 1 again
    alone = optax_privatizer(_privatizer("blt", seed=5), device=True)
    replayed, _ = jax.jit(alone.update)(grads, alone.init(grads))
    first_again = optax_privatizer(_privatizer("blt", seed=5), device=True, replay_guard=False)
    original, _ = jax.jit(first_again.update)(grads, first_again.init(grads))
    np.testing.assert_array_equal(np.asarray(replayed["w"]), np.asarray(original["w"]))
    with pytest.raises(TypeError, match="ledger must be a folder path"):
        optax_privatizer(_privatizer("blt"), device=True, ledger=3)
    with pytest.raises(ValueError, match="needs device=True"):
        optax_privatizer(_privatizer("blt"), ledger=tmp_path)
    with pytest.raises(ValueError, match="existing folder"):
        optax_privatizer(_privatizer("blt"), device=True, ledger=tmp_path / "missing")
