"""dpcount.training: the array privatizer over streaming counting mechanisms.

Structure first (zero noise, and zero data against the mechanism's own process),
then the noise statistically (its covariance against the strategy's exact one),
the calibration against independent computations, memory, and bad input.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections import namedtuple
from typing import Any

import numpy as np
import pytest

from dpcount.counting import BLT, BinaryTree
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy import Budget, Participation, ZeroNoise
from dpcount.privacy.source import NoiseSource
from dpcount.training import (
    GradientPrivatizer,
    NoiseState,
    clip_and_sum,
    fixed_batches,
    gaussian_privatizer,
)
from tests.stats import Z_TOLERANCE, assert_variances_match

EPOCHS, BATCHES = 2, 4
T = EPOCHS * BATCHES
SHAPES = {"w": (3, 2), "b": (2,)}  # flattened: b (2 values), then w (6): dim 8
STREAMING = sorted(MECHANISMS)  # every registry mechanism streams vectors

Pair = namedtuple("Pair", ["first", "second"])


def make(name: str = "blt", **kw: Any) -> GradientPrivatizer:
    args: dict[str, Any] = {
        "epochs": EPOCHS,
        "batches_per_epoch": BATCHES,
        "clip_norm": 1.5,
        "budget": Budget(epsilon=1.0, delta=1e-6),
        "rng": 0,
    }
    args.update(kw)
    return gaussian_privatizer(name, **args)


def zeros_like_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    return {k: np.zeros(s) for k, s in shapes.items()}


# -- structure, exactly ---------------------------------------------------------------
@pytest.mark.parametrize("release", ["gradient", "prefix-sum"])
def test_zero_noise_returns_the_data_with_its_structure(release: str) -> None:
    mech = make().mechanism.with_sampler(ZeroNoise())
    priv = GradientPrivatizer(mech, release=release, rng=0)
    tree = {"dense": [np.zeros((2, 3), np.float32), np.zeros(3)], "pair": Pair(np.zeros(()), 0)}
    state = priv.init(tree)
    rng = np.random.default_rng(1)
    total = 0.0
    for _ in range(T):
        g = {
            "dense": [rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=3)],
            "pair": Pair(np.float64(rng.normal()), 2),
        }
        out, state = priv.privatize(state, g)
        total = total + np.concatenate([g["dense"][0].ravel(), g["dense"][1], [g["pair"][0], 2.0]])
        want = g if release == "gradient" else None
        flat = np.concatenate(
            [out["dense"][0].ravel(), out["dense"][1], [out["pair"].first, out["pair"].second]]
        )
        assert isinstance(out["pair"], Pair)
        assert out["dense"][0].dtype == np.float32 and out["dense"][1].dtype == np.float64
        assert out["pair"].second.dtype == np.float64  # an int leaf comes back as float64
        if want is not None:
            np.testing.assert_array_equal(out["dense"][0], g["dense"][0])
            np.testing.assert_array_equal(out["dense"][1], g["dense"][1])
            assert out["pair"].first == g["pair"][0] and out["pair"].second == 2.0
        else:
            np.testing.assert_allclose(flat, total, rtol=1e-6)
    assert state.step == T


@pytest.mark.parametrize("name", STREAMING)
def test_zero_data_noise_is_the_mechanisms_noise_process(name: str) -> None:
    """The prefix noise is the mechanism's process over the flattened vector (dict keys
    sorted: b then w), step by step, snapped to the float-safe grid (ties to even), bit
    for bit; the gradient noise its differences."""
    prefix = make(name, release="prefix-sum", rng=7)
    grad = make(name, rng=7)
    mech = prefix.mechanism
    process = mech.noise_process(
        NoiseSource.generator(mech.sampler, np.random.default_rng(7), 8), 8
    )
    grids = mech.release_grids(1, T)[:, None]
    expected = np.rint(np.array([process.next() for _ in range(T)]) / grids) * grids
    sp, sg = prefix.init(SHAPES), grad.init(SHAPES)
    got_prefix, got_grad = [], []
    for _ in range(T):
        p, sp = prefix.privatize(sp, zeros_like_shapes(SHAPES))
        g, sg = grad.privatize(sg, zeros_like_shapes(SHAPES))
        got_prefix.append(np.concatenate([p["b"], p["w"].ravel()]))
        got_grad.append(np.concatenate([g["b"], g["w"].ravel()]))
    np.testing.assert_array_equal(np.array(got_prefix), expected)
    np.testing.assert_array_equal(np.array(got_grad), np.diff(expected, axis=0, prepend=0.0))


# -- the noise, statistically ---------------------------------------------------------
@pytest.mark.parametrize("name", ["blt", "binary", "normalized-sqrt"])
def test_noise_covariance_is_the_strategys(name: str) -> None:
    """20000 coordinates are 20000 independent replicates of the T-step noise: each
    step's prefix noise has the exact variance the strategy states; for the
    factorizations, the per-step gradient noise N_t − N_{t−1} has σ²‖L_t − L_{t−1}‖²
    (the covariance of consecutive steps); distinct coordinates are uncorrelated."""
    dim = 20_000
    priv = make(name, release="prefix-sum", rng=11)
    state = priv.init((dim,))
    noise = np.empty((dim, T))
    for t in range(T):
        out, state = priv.privatize(state, np.zeros(dim))
        noise[:, t] = out
    assert_variances_match(noise, priv.prefix_variances())  # also rejects 2x and 0.8x
    mech = priv.mechanism
    dense = getattr(mech, "dense_factorization", None)
    if dense is not None:
        L, _ = dense()
        steps = np.diff(L, axis=0, prepend=0.0)
        step_variances = mech.sampler.variance * (steps**2).sum(axis=1)
        assert_variances_match(np.diff(noise, axis=1, prepend=0.0), step_variances)
    # coordinates 2i and 2i + 1 (i = 1..dim/2) at the last step: correlation 0
    pairs = noise[0::2, -1] * noise[1::2, -1] / priv.prefix_variance(T)
    z = pairs.mean() / (pairs.std(ddof=1) / np.sqrt(len(pairs)))
    assert abs(z) < Z_TOLERANCE


# -- calibration ----------------------------------------------------------------------
def test_calibration_against_brute_force_and_dp_accounting() -> None:
    """Δ₂ under the (epochs, batches) schema equals a brute force over every
    participation pattern of the dense encoder; the dp_event's ε (PLD accountant)
    is the requested one; replace-one doubles σ; independent noise gives √k·C."""
    pld = pytest.importorskip("dp_accounting.pld")
    priv = make("blt")
    mech = priv.mechanism
    assert isinstance(mech, BLT)
    _, C = mech.dense_factorization()
    brute = max(
        np.linalg.norm(C[:, list(p)].sum(axis=1))
        for r in range(1, EPOCHS + 1)
        for p in itertools.combinations(range(T), r)
        if all(j - i >= BATCHES for i, j in itertools.pairwise(p))
    )
    assert mech.privacy is not None
    delta2 = mech.privacy.l2_sensitivity
    assert 1.5 * brute <= delta2 <= 1.5 * brute * (1 + 1e-9)
    assert priv.noise_multiplier == pytest.approx(mech.noise_scale / delta2, rel=1e-15)
    accountant = pld.PLDAccountant().compose(priv.dp_event())
    eps = accountant.get_epsilon(1e-6)
    assert 0.99 <= eps <= 1.0 + 1e-6
    assert accountant.get_delta(0.98) > 1e-6  # a smaller ε is not certified: tight
    replace = make("blt", neighbouring="replace-one")
    assert replace.mechanism.noise_scale == pytest.approx(2 * mech.noise_scale, rel=1e-12)
    indep = make("input").mechanism
    assert indep.privacy is not None
    assert indep.privacy.l2_sensitivity == pytest.approx(np.sqrt(EPOCHS) * 1.5, rel=1e-9)


# -- memory ---------------------------------------------------------------------------
def test_blt_state_stays_bounded() -> None:
    """Over 800 steps at d = 1000 the traced memory does not grow; it is about the
    BLT buffers + 1 running sums plus the previous noise ((n + 2)·d floats)."""
    dim, steps = 1000, 800
    priv = gaussian_privatizer(
        "blt",
        epochs=4,
        batches_per_epoch=steps // 4,
        clip_norm=1.0,
        budget=Budget(epsilon=1.0, delta=1e-6),
    )
    g = np.zeros(dim)
    tracemalloc.start()
    try:
        base = tracemalloc.take_snapshot()
        state = priv.init((dim,))
        for _ in range(50):
            _, state = priv.privatize(state, g)
        early = tracemalloc.get_traced_memory()[0]
        for _ in range(steps - 50):
            _, state = priv.privatize(state, g)
        late = tracemalloc.get_traced_memory()[0]
        held = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(base, "filename"))
    finally:
        tracemalloc.stop()
    assert isinstance(priv.mechanism, BLT)
    buffers = len(priv.mechanism.buffer_decay)
    assert late - early < 4 * dim * 8  # no growth beyond a step's temporaries
    assert held < (buffers + 2 + 4) * dim * 8 + 64 * 1024


# -- helpers --------------------------------------------------------------------------
def test_clip_and_sum_clips_each_example_over_all_its_leaves() -> None:
    rng = np.random.default_rng(3)
    w = rng.normal(size=(50, 3, 2)) * rng.uniform(0.01, 3, size=(50, 1, 1))
    b = rng.normal(size=(50, 2))
    out = clip_and_sum({"w": w, "b": b}, 1.5)
    flat = np.concatenate([w.reshape(50, -1), b], axis=1)  # leaves sorted: w then b
    norms = np.linalg.norm(flat, axis=1)
    assert (norms > 1.5).any() and (norms < 1.4).any()
    clipped = flat * np.minimum(1.0, 1.5 / norms)[:, None]
    got = np.concatenate([out["w"].ravel(), out["b"]])
    np.testing.assert_allclose(got, clipped.sum(axis=0), rtol=1e-9)
    for i in range(50):  # one example at a time: its norm after clipping
        alone = clip_and_sum(flat[i : i + 1], 1.5)
        assert np.linalg.norm(alone) <= 1.5
        if norms[i] < 1.4:  # under the norm: unchanged
            np.testing.assert_array_equal(alone, flat[i])
        else:
            assert np.linalg.norm(alone) == pytest.approx(min(norms[i], 1.5), rel=1e-11)


def test_fixed_batches_partition_the_examples() -> None:
    batches = fixed_batches(103, 10, rng=0)
    assert sorted(len(b) for b in batches) == [10] * 7 + [11] * 3
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(103))


# -- bad input ------------------------------------------------------------------------
def test_bad_input_is_refused_naming_it() -> None:
    priv = make()
    state = priv.init(SHAPES)
    _, new = priv.privatize(state, zeros_like_shapes(SHAPES))
    with pytest.raises(ValueError, match="state is stale"):
        priv.privatize(state, zeros_like_shapes(SHAPES))
    with pytest.raises(TypeError, match="another privatizer"):
        make().privatize(new, zeros_like_shapes(SHAPES))
    with pytest.raises(TypeError, match="structure given to init"):
        priv.privatize(new, {"w": np.zeros((3, 2))})
    with pytest.raises(ValueError, match=r"clipped_sum\['w'\] must have shape \(3, 2\)"):
        priv.privatize(new, {"w": np.zeros(6), "b": np.zeros(2)})
    with pytest.raises(ValueError, match=r"clipped_sum\['b'\] must be finite"):
        priv.privatize(new, {"w": np.zeros((3, 2)), "b": np.array([0.0, np.nan])})
    with pytest.raises(TypeError, match=r"clipped_sum\['b'\] must hold real numbers"):
        priv.privatize(new, {"w": np.zeros((3, 2)), "b": np.zeros(2, complex)})
    with pytest.raises(TypeError, match="state must be a NoiseState"):
        priv.privatize(object(), zeros_like_shapes(SHAPES))  # type: ignore[arg-type]
    for _ in range(T - 1):
        _, new = priv.privatize(new, zeros_like_shapes(SHAPES))
    with pytest.raises(ValueError, match="at its horizon"):
        priv.privatize(new, zeros_like_shapes(SHAPES))
    with pytest.raises(ValueError, match="shapes must have at least one element"):
        priv.init({"a": (0,)})
    with pytest.raises(ValueError, match="non-negative dimensions"):
        priv.init((3, -1))
    with pytest.raises(TypeError, match=r"shapes\['a'\] must be an array, a number"):
        priv.init({"a": "x"})
    with pytest.raises(ValueError, match="release must be one of"):
        make(release="prefix")
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        make(neighbouring="add")
    with pytest.raises(ValueError, match="mechanism must be one of"):
        make("tree")
    with pytest.raises(ValueError, match="epochs must be"):
        make(epochs=0)
    with pytest.raises(ValueError, match="clip_norm must be"):
        make(clip_norm=0.0)
    with pytest.raises(ValueError, match=r"budget\.noise must be gaussian"):
        make(budget=Budget(epsilon=1.0, delta=1e-6, noise="laplace"))
    with pytest.raises(ValueError, match=r"budget\.step_sensitivity must be 1"):
        make(budget=Budget(epsilon=1.0, delta=1e-6, step_sensitivity=2.0))
    with pytest.raises(ValueError, match=r"does not calibrate to a participation schema"):
        make(budget=Budget(epsilon=1.0, delta=1e-6, participation=Participation(2, 3)))
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'epsilon'"):
        make(epsilon=1.0)
    with pytest.raises(ValueError, match="mechanism must use noise='gaussian'"):
        GradientPrivatizer(BinaryTree(T, epsilon=1.0))
    with pytest.raises(TypeError, match="mechanism must be a CountingMechanism"):
        GradientPrivatizer("blt")  # type: ignore[arg-type]
    hand_made = BLT.optimized(T, epsilon=1.0, delta=1e-6, step_sensitivity=1.5)
    assert isinstance(GradientPrivatizer(hand_made, rng=0).init((2,)), NoiseState)
    with pytest.raises(ValueError, match="batches_per_epoch must be"):
        fixed_batches(3, 4)
    with pytest.raises(ValueError, match=r"per_example\['b'\] has 2 examples"):
        clip_and_sum({"a": np.zeros((3, 1)), "b": np.zeros((2, 1))}, 1.0)


def test_the_loose_budget_spelling_is_a_type_error_naming_the_replacement() -> None:
    """0.4 deprecated the loose spelling, 0.5 removed it (issue 33)."""
    with pytest.raises(
        TypeError,
        match=r"gaussian_privatizer\(\) got an unexpected keyword argument 'epsilon': .* "
        r"removed in dpcount 0\.5 .*; pass budget=Budget\(epsilon=1\.0, delta=1e-06\) instead",
    ):
        gaussian_privatizer(  # type: ignore[call-arg]
            "blt", epochs=EPOCHS, batches_per_epoch=BATCHES, clip_norm=1.5, epsilon=1.0, delta=1e-6
        )


def test_state_repr_shows_no_values() -> None:
    priv = make()
    state = priv.init(SHAPES)
    assert repr(state) == "NoiseState(step=0, dim=8)"
