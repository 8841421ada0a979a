"""BLT mechanism: closed forms against the dense oracle, inverse, streams, bad input."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from dpcount.counting import BLT, FactorizationMechanism
from dpcount.counting.factorization.blt import blt_inverse, blt_losses, check_blt_parameters
from dpcount.privacy import ConstantNoise, ZeroNoise
from dpcount.privacy.source import NoiseSource


def dense_encoder(theta: np.ndarray, omega: np.ndarray, T: int) -> np.ndarray:
    """C[i, j] = c_{i−j}, c_0 = 1, c_k = Σ ω θ^{k−1}, straight from the definition."""
    c = np.ones(T)
    k = np.arange(1, T)
    c[1:] = (omega[None, :] * theta[None, :] ** (k[:, None] - 1)).sum(axis=1)
    C = np.zeros((T, T))
    for j in range(T):
        C[j:, j] = c[: T - j]
    return C


def oracle(theta: np.ndarray, omega: np.ndarray, T: int) -> FactorizationMechanism:
    """The dense factorization mechanism with R = C and L = A·C⁻¹ by triangular solve."""
    C = dense_encoder(theta, omega, T)
    # B·C = A by a triangular solve of Cᵀ Bᵀ = Aᵀ (backward stable: the product is A to
    # round-off, as FactorizationMechanism requires).
    A = np.tril(np.ones((T, T)))
    B = solve_triangular(C.T, A.T, lower=False).T
    return FactorizationMechanism(B, C, epsilon=1.0, delta=1e-6, noise="gaussian")


def random_parameters(rng: np.random.Generator, regime: int) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(1, 7))
    if regime == 0:  # spread decays
        theta = rng.uniform(0.01, 0.99, n)
    elif regime == 1:  # decays up to 1 − 1e-9
        theta = 1 - 10.0 ** (-rng.uniform(0, 9, n))
    elif regime == 2:  # clustered near 1
        theta = 1 - 10.0 ** (-rng.uniform(5, 6, n))
    else:  # scales at the edge of the stability condition Σ ω/(1 + θ) < 1
        theta = rng.uniform(0.0, 1.0, n) ** 0.2
    theta = np.unique(theta)
    share = rng.dirichlet(np.ones(len(theta)))
    level = 1 - 10.0 ** (-rng.uniform(1, 6)) if regime == 3 else rng.uniform(0.01, 0.99)
    return theta, share * level * (1 + theta)


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("regime", range(4))
@pytest.mark.parametrize("T", [1, 2, 3, 64, 1000, pytest.param(2048, marks=pytest.mark.slow)])
def test_closed_forms_match_dense_oracle(regime: int, T: int) -> None:
    rng = np.random.default_rng(1000 * regime + T)
    for _ in range(1 if T >= 1000 else 6):
        theta, omega = random_parameters(rng, regime)
        m = BLT(T, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6)
        d = oracle(theta, omega, T)
        # sensitivity (through the calibrated sigma), mean and largest variance, per step
        assert rel(m.noise_scale, d.noise_scale) < 1e-9
        assert rel(m.mse(), d.mse()) < 1e-9
        assert rel(m.max_variance(), d.max_variance()) < 1e-9
        np.testing.assert_allclose(m.noise_coefficients(), d.noise_coefficients(), rtol=1e-9)
        losses = m.losses()
        assert losses.mean_variance > 0 and losses.max_variance > 0
        assert losses.sensitivity_squared >= 1
        B, C = m.dense_factorization()
        np.testing.assert_allclose(C, d.R, rtol=1e-12, atol=0)
        np.testing.assert_allclose(B, d.L, rtol=1e-9, atol=1e-12)


def test_wrong_closed_form_would_be_caught() -> None:
    """The oracle comparison is sharp: a 1e-6 change to a scale is detected."""
    theta, omega = np.array([0.5, 0.99]), np.array([0.2, 0.3])
    d = oracle(theta, omega, 500)
    m = BLT(500, buffer_decay=theta, output_scale=omega * (1 + 1e-6), epsilon=1.0, delta=1e-6)
    assert rel(m.mse(), d.mse()) > 1e-8


def test_inverse_is_the_inverse_blt() -> None:
    rng = np.random.default_rng(5)
    T = 300
    for regime in range(4):
        theta, omega = random_parameters(rng, regime)
        inv = blt_inverse(theta, omega)
        # C⁻¹ = BLT(λ, ω′) built from the definition equals the dense inverse of C
        lam, scale = inv.decay, inv.scale
        c_inv = np.ones(T)
        k = np.arange(1, T)
        c_inv[1:] = (scale[None, :] * lam[None, :] ** (k[:, None] - 1)).sum(axis=1)
        C = dense_encoder(theta, omega, T)
        dense_inv = solve_triangular(C, np.eye(T), lower=True)[:, 0]
        np.testing.assert_allclose(c_inv, dense_inv, rtol=1e-9, atol=1e-13)
        assert inv.a + inv.beta.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(inv.beta > 0) and inv.a > 0
        assert np.all(np.abs(lam) < 1)
        np.testing.assert_allclose(1 - lam, inv.one_minus_decay, rtol=1e-6)
        # interlacing λ_1 < θ_1 < λ_2 < …
        merged = np.empty(2 * len(theta))
        merged[0::2], merged[1::2] = np.sort(lam), theta
        assert np.all(np.diff(merged) > 0)


@pytest.mark.parametrize("seed", range(6))
def test_closed_forms_match_exact_sums_at_large_horizon(seed: int) -> None:
    """At T = 2^20 (no dense oracle) the O(n²) forms agree with the O(T) exact sums."""
    rng = np.random.default_rng(seed)
    T = 2**20
    theta, omega = random_parameters(rng, seed % 4)
    m = BLT(T, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6)
    v = m.noise_coefficients()
    losses = m.losses()
    assert np.all(np.diff(v) >= 0) and v[0] == pytest.approx(1.0, abs=1e-12)
    assert rel(losses.max_variance, float(v[-1])) < 1e-9
    assert rel(losses.mean_variance, float(v.mean())) < 1e-9


@pytest.mark.slow  # statistical; CI runs the slow set
def test_never_negative_for_extreme_parameters() -> None:
    """Near-1 decays, nearly equal decays and scales at the stability edge."""
    cases = [
        ([1 - 1e-12, 1 - 2e-12], [0.9, 0.9]),
        ([0.999999, 0.9999991, 0.9999992], [0.3, 0.3, 1.3]),
        ([1e-9, 0.5], [0.8, 0.15]),
        ([0.1, 1 - 1e-10], [0.55, 0.9998]),
    ]
    for theta, omega in cases:
        for T in [1, 2, 1000, 2**24]:
            losses = blt_losses(theta, omega, T)
            assert losses.mean_variance > 0 and losses.max_variance > 0
            assert losses.mean_variance <= losses.max_variance * (1 + 1e-12)
            assert losses.sensitivity_squared >= 1
    for theta, omega in cases:
        d = oracle(np.array(theta), np.array(omega), 1500)
        m = BLT(1500, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6)
        assert rel(m.mse(), d.mse()) < 1e-9
        assert rel(m.max_variance(), d.max_variance()) < 1e-9


def test_parameters_are_sorted_and_validated() -> None:
    theta, omega = check_blt_parameters([0.9, 0.1], [0.2, 0.3])
    assert theta.tolist() == [0.1, 0.9] and omega.tolist() == [0.3, 0.2]
    bad = [
        (([0.5, 1.0], [0.1, 0.1]), r"buffer_decay must lie in \(0, 1\)"),
        (([0.0], [0.1]), r"buffer_decay must lie in \(0, 1\)"),
        (([0.5, 0.5], [0.1, 0.1]), r"buffer_decay must be distinct"),
        (([0.5], [0.0]), r"output_scale must be positive"),
        (([0.5], [float("nan")]), r"output_scale must be positive and finite"),
        (([0.5, 0.6], [0.1]), r"output_scale must have one entry per buffer"),
        (([], []), r"buffer_decay must be a non-empty"),
        (([0.5], [1.5]), r"output_scale too large: sum\(output_scale / \(1 \+ buffer_decay\)\)"),
        # stable, but the inverse decay 0.5 − ω = −1 + 1.5e-9 rounds the closed forms
        (([0.5], [1.5 * (1 - 1e-9)]), r"output_scale too large: the inverse BLT's decay"),
    ]
    for (decay, scale), message in bad:
        with pytest.raises(ValueError, match=message):
            BLT(10, buffer_decay=decay, output_scale=scale, epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize("noise", ["laplace", "discrete-gaussian", "discrete-laplace"])
def test_only_gaussian_noise(noise: str) -> None:
    with pytest.raises(ValueError, match=rf"noise='{noise}' is not available for BLT"):
        BLT(10, buffer_decay=[0.5], output_scale=[0.5], epsilon=1.0, delta=1e-6, noise=noise)


def test_gaussian_is_the_default_and_delta_is_required() -> None:
    m = BLT(10, buffer_decay=[0.5], output_scale=[0.5], epsilon=1.0, delta=1e-6)
    assert m.privacy is not None and m.privacy.noise == "gaussian"
    with pytest.raises(ValueError, match="delta"):
        BLT(10, buffer_decay=[0.5], output_scale=[0.5], epsilon=1.0)


def test_vector_stream_holds_buffers_plus_one_rows() -> None:
    """A vector stream keeps (n + 1)·d floats between steps and matches the batch."""
    theta, omega = [0.2, 0.7, 0.99, 0.9999], [0.1, 0.1, 0.1, 0.1]
    T, d = 50, 7
    m = BLT(T, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6, rng=3)
    s = m.stream()
    x = np.random.default_rng(0).normal(size=(T, d))
    outs = [s.update(x[0])]
    process = s._process
    assert process is not None
    state = process.state_dict()
    assert state["q"].shape == (5, d) and state["pending"].shape == (0,)
    assert s.live_count() == 5
    outs.extend(s.update(row) for row in x[1:])
    # same noise as a batch release with the same seed
    batch = BLT(T, buffer_decay=theta, output_scale=omega, epsilon=1.0, delta=1e-6, rng=3)
    # the stream draws one step at a time, the batch all at once: compare structures
    # with constant noise instead (distribution equality is in the contract suite)
    assert np.array(outs).shape == batch.release(x).shape
    cm = m.with_sampler(ConstantNoise(1.0))
    cs = cm.stream()
    steps = np.array([cs.update(row) for row in np.zeros((T, d))])
    np.testing.assert_allclose(steps, cm.release(np.zeros((T, d))), rtol=1e-12)
    b = np.cumsum(cm.dense_factorization()[0], axis=1)[:, -1]  # Σ_k b_k = noise at t
    np.testing.assert_allclose(steps[:, 0], b, rtol=1e-12)


def test_zero_noise_and_mixed_schedule_match_prefix_sums() -> None:
    m = BLT(9000, buffer_decay=[0.5, 0.999], output_scale=[0.4, 0.3], epsilon=1.0, delta=1e-6)
    x = np.random.default_rng(1).normal(size=9000)
    z = m.with_sampler(ZeroNoise())
    np.testing.assert_allclose(z.release(x), np.cumsum(x), rtol=1e-9, atol=1e-8)
    c = m.with_sampler(ConstantNoise(1.0))
    batch = c.release(np.zeros(9000))
    s = c.stream()
    parts = [np.atleast_1d(s.update(0.0)) for _ in range(4100)]
    parts.append(s.update_many(np.zeros(4000)))
    parts.extend(np.atleast_1d(s.update(0.0)) for _ in range(900))
    np.testing.assert_allclose(np.concatenate(parts), batch, rtol=1e-12)


def test_repr_and_config_round_trip() -> None:
    m = BLT(100, buffer_decay=[0.9, 0.5], output_scale=[0.1, 0.2], epsilon=1.0, delta=1e-6)
    assert "buffers=2" in repr(m)
    cfg = m.config()
    assert cfg["class"] == "BLT"
    again = BLT(**cfg["kwargs"])
    assert again.noise_scale == m.noise_scale
    assert again.buffer_decay.tolist() == [0.5, 0.9]


def test_vector_step_peak_memory_is_buffers_plus_two_vectors() -> None:
    """Issue 11 item 5: a vector step holds at most (n + 2)·d floats (tracemalloc)."""
    import tracemalloc

    d = 20_000
    m = BLT(
        100, buffer_decay=[0.3, 0.9, 0.99, 0.999], output_scale=[0.1] * 4, epsilon=1.0, delta=1e-6
    )
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        process = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(0), d), d)
        peak = 0
        for _ in range(20):
            tracemalloc.reset_peak()
            noise = process.next()
            peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
            del noise
    finally:
        tracemalloc.stop()
    n = len(m.buffer_decay)
    assert peak <= (n + 2) * d * 8 + 64 * 1024, peak / (d * 8)
    assert peak >= (n + 1) * d * 8  # the state itself is traced: the check can fail


def test_vectors_of_length_one_keep_their_shape() -> None:
    """Found by the property suite: (n, 1) steps came back as (n,)."""
    m = BLT(40, buffer_decay=[0.5, 0.9], output_scale=[0.3, 0.2], epsilon=1.0, delta=1e-6)
    z = m.with_sampler(ZeroNoise())
    x = np.arange(40.0).reshape(40, 1)
    np.testing.assert_array_equal(z.release(x), np.cumsum(x, axis=0))
    s = z.stream()
    assert s.update_many(x[:20]).shape == (20, 1)
    assert np.shape(s.update(x[20])) == (1,)


def test_fused_vector_step_equals_the_three_pass_step_bit_for_bit() -> None:
    """Issue 20 item 3: the step in column blocks (decay, add, weighted sum per block)
    gives the same floats as decaying, adding and summing the whole state in turn."""
    from dpcount.counting.factorization import blt as blt_module

    d = 2 * blt_module._STEP_COLUMNS + 123  # three blocks, the last one partial
    m = BLT(60, buffer_decay=[0.3, 0.9, 0.999], output_scale=[0.2, 0.1, 0.1], epsilon=1.0,
            delta=1e-6)  # fmt: skip
    process = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(4), d), d)
    rng = np.random.default_rng(4)
    decay = np.append(m.inverse.decay, 1.0)
    weight = np.append(m.inverse.beta, m.inverse.a)
    q = np.zeros((len(decay), d))
    for _ in range(30):
        got = process.next()
        z = m.sampler.sample(rng, (d,))
        q[:-1] *= decay[:-1, None]
        q += z
        want = np.einsum("i,ij->j", weight, q)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(process.state_dict()["q"], q)


def test_scalar_chunks_equal_the_chunk_major_layout_bit_for_bit() -> None:
    """Issue 20 item 3 (batch release): the scalar chunks keep the chunks' own state
    parts one buffer per row, (n + 1, K), so each recursion across chunks is one lfilter
    over a contiguous row; the noise is the same floats as with the chunk-major (K, n + 1)
    layout (E = rows·Pᵀ, one lfilter per column, rows·Bᵀ + prev·Fᵀ), and so is the state
    it hands on. Two calls, so the second starts from a nonzero state."""
    from scipy.signal import lfilter

    from dpcount.counting.factorization import blt as blt_module

    m = BLT(5000, buffer_decay=[0.3, 0.9, 0.999], output_scale=[0.2, 0.1, 0.1], epsilon=1.0,
            delta=1e-6)  # fmt: skip
    process = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(7)))
    c = blt_module._BLOCK
    B, P, F, rc = process._matrices(c)
    rng = np.random.default_rng(7)
    q = np.zeros(len(rc))
    for K in (70, 1):
        got = process.next_many(K * c)
        rows = m.sampler.sample(rng, (K * c,)).reshape(K, c)
        E = blt_module._rows_times(rows, P.T)
        prev = np.empty_like(E)
        prev[0] = q
        for i in range(len(q)):
            ends = lfilter([1.0], [1.0, -rc[i]], np.ascontiguousarray(E[:, i]), zi=[rc[i] * q[i]])
            prev[1:, i] = ends[0][:-1]
            q[i] = ends[0][-1]
        want = blt_module._rows_times(rows, B.T)
        blt_module._rows_times(prev, F.T, want, add=True)
        np.testing.assert_array_equal(got, want.ravel())
        np.testing.assert_array_equal(process.state_dict()["q"], q)


def test_vector_chunks_in_blocks_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 item 3: a vector batch runs in blocks of whole chunks with reused arrays,
    each buffer's filter continued from lfilter's exact final state (the compensated
    decays' error pass too); the noise and the state it hands on are the same floats as
    one filter pass over every chunk ((chunk, coordinate) rows, one compensated_filter
    per buffer over all K chunks) with the products in the blocks' rows (OpenBLAS can
    round a row differently by its place in a call: here the last rows of a call whose
    row count is not a multiple of 4; see ``BLTNoiseProcess._scalar_chunks``). Blocks of
    5 chunks, so a batch of 73 chunks takes 15."""
    from dpcount.counting.factorization import blt as blt_module

    c, d = blt_module._BLOCK, 3
    monkeypatch.setattr(blt_module, "_VECTOR_BLOCK_VALUES", 5 * c * d)

    def blocks(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """a·b as the process computes it: _rows_times on each block's 5·d rows."""
        parts = [blt_module._rows_times(a[s : s + 5 * d], b) for s in range(0, len(a), 5 * d)]
        product = np.concatenate(parts)
        if out is None:
            return product
        out += product
        return out

    T = blt_module.COMPENSATE_ABOVE + 1000  # the compensated decays (lo ≠ 0)
    m = BLT.optimized(T, epsilon=1.0, delta=1e-6)  # shipped: a measured float model
    process = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(7), d), d)
    rng = np.random.default_rng(7)
    n = len(m.inverse.decay) + 1  # the buffers and the running sum
    q = np.zeros((n, d))
    for K in (73, 1, 12):
        got = process.next_many(K * c)
        B, P, F, rc = process._matrices(c)
        lo = process._lows[c]
        rows = m.sampler.sample(rng, (K * c, d)).reshape(K, c, d).transpose(0, 2, 1).reshape(-1, c)
        E = blocks(rows, P.T).reshape(K, d, n)
        prev = np.empty_like(E)
        prev[0] = q.T
        for i in range(n):
            if K == 1:
                q[i] = rc[i] * q[i] + (lo[i] * q[i] + E[0, :, i] if lo[i] else E[0, :, i])
                continue
            ends = blt_module.compensated_filter(E[:, :, i], rc[i], lo[i], q[i])
            prev[1:, :, i] = ends[:-1]
            q[i] = ends[-1]
        want = blocks(rows, B.T)
        blocks(prev.reshape(-1, n), F.T, want)
        np.testing.assert_array_equal(got, want.reshape(K, d, c).transpose(0, 2, 1).reshape(-1, d))
        np.testing.assert_array_equal(process.state_dict()["q"], q)
    assert np.count_nonzero(lo) > 0  # the compensated decays ran


class _KeepingSampler:
    """The BLT's sampler, keeping every array it hands out (as a recorder or a replay
    would): the process must not compute its noise in them."""

    integer = False

    def __init__(self, base: object) -> None:
        self.base = base
        self.kept: list[np.ndarray] = []
        self.copies: list[np.ndarray] = []

    @property
    def variance(self) -> float:
        return float(self.base.variance)  # type: ignore[attr-defined]

    def sample(self, rng: np.random.Generator, size: object) -> np.ndarray:
        out = self.base.sample(rng, size)  # type: ignore[attr-defined]
        self.kept.append(out)
        self.copies.append(out.copy())
        return out  # type: ignore[no-any-return]


@pytest.mark.parametrize("dim", [None, 1, 3])
def test_batch_noise_computed_in_its_draws_equals_a_separate_array(
    monkeypatch: pytest.MonkeyPatch, dim: int | None
) -> None:
    """Issue 33 (hot paths): a one-block ``next_many`` computes the noise in the array of
    its draws when nothing else holds it (``_compute_new``); the floats equal the
    two-array path's (``_compute`` into a new array), and an array the sampler keeps is
    never written (the noise goes to a new array then)."""
    from dpcount.counting.factorization import blt as blt_module

    monkeypatch.setattr(blt_module, "_IN_DRAWS_VALUES", 1)  # every batch, however small
    T = blt_module.COMPENSATE_ABOVE + 1000  # the compensated decays too
    m = BLT.optimized(T, epsilon=1.0, delta=1e-6, rng=3)
    tail = () if dim is None else (dim,)
    n = T - 37  # whole chunks and a short last one

    in_place: list[bool] = []  # per _fill call: whether the noise went into its draws

    def noise(fresh: bool, sampler: object = None) -> np.ndarray:
        s = m.sampler if sampler is None else sampler
        source = NoiseSource.generator(s, np.random.default_rng(11), dim)  # type: ignore[arg-type]
        process = m.noise_process(source, dim)
        fill = process._fill
        monkeypatch.setattr(
            process, "_fill", lambda z, dest: (in_place.append(z is dest), fill(z, dest))[1]
        )
        if not fresh:
            monkeypatch.setattr(process, "_compute_new", lambda k: None)
        first = process.next_many(20)  # then a nonzero state
        return np.concatenate([first.ravel(), process.next_many(n).ravel()])

    in_draws = noise(True)
    assert in_place == [True, True]  # the path under test was taken
    np.testing.assert_array_equal(in_draws, noise(False))
    keeping = _KeepingSampler(m.sampler)
    in_place.clear()
    np.testing.assert_array_equal(in_draws, noise(True, keeping))
    assert in_place == [False, False]  # a kept array is never written
    assert [k.shape for k in keeping.kept] == [(20, *tail), (n, *tail)]
    for kept, copy in zip(keeping.kept, keeping.copies, strict=True):
        np.testing.assert_array_equal(kept, copy)  # the draws it kept, unchanged


def test_step_width_takes_the_fewest_equal_blocks() -> None:
    """A fused vector step of d columns runs ⌈d / _STEP_COLUMNS⌉ blocks of equal width
    (no short last block)."""
    from dpcount.counting.factorization.blt import _STEP_COLUMNS, _step_width

    for d in (1, 7, _STEP_COLUMNS, _STEP_COLUMNS + 1, 10**5, 3 * _STEP_COLUMNS - 1):
        width = _step_width(d)
        blocks = -(-d // width)
        assert width <= _STEP_COLUMNS and blocks == -(-d // _STEP_COLUMNS)
        assert d - (blocks - 1) * width >= width - blocks  # the last block is not short
    assert _step_width(10**5) == 50000


def test_vector_stream_steps_refuse_bad_steps_and_keep_their_outputs() -> None:
    """A vector step sums into the stream's spare array and snaps into the BLT's fresh
    noise: a refused step (NaN, inf, a sum past 2^53) changes nothing, x is not written
    to, every returned array stays as it was returned, and a twin stream that never saw
    the refused steps gives the same bytes."""
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6)
    a, b = (BLT.optimized(64, budget=budget, rng=5).stream() for _ in "ab")
    rng = np.random.default_rng(6)
    xs = rng.integers(0, 3, (20, 7)).astype(np.float64)
    kept, copies = [], []
    for i, x in enumerate(xs):
        before = x.copy()
        if i in (3, 9):
            bad = x.copy()
            bad[2] = np.nan if i == 3 else np.inf
            with pytest.raises(ValueError, match=r"x must be finite"):
                a.update(bad)
        if i == 12:
            with pytest.raises(ValueError, match=r"running sum at step 13 \(coordinate 0\)"):
                a.update(np.full(7, 2.0**53))
        got = a.update(x)
        assert got.tobytes() == b.update(x).tobytes() and x.tobytes() == before.tobytes()
        kept.append(got)
        copies.append(got.copy())
    assert a.step == 20 and all(
        k.tobytes() == c.tobytes() for k, c in zip(kept, copies, strict=True)
    )


class _Recorded(np.ndarray):
    """An array whose matrix products record their multiply-adds."""

    products: ClassVar[list[int]] = []

    def __matmul__(self, other: object) -> np.ndarray:
        left, right = np.asarray(self), np.asarray(other)
        rows = 1 if left.ndim == 1 else left.shape[0]
        cols = 1 if right.ndim == 1 else right.shape[1]
        _Recorded.products.append(rows * left.shape[-1] * cols)
        return np.asarray(left @ right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((8,), (8, 65535)),  # the column-normalized BLT's variances: ω′ @ λ^k
        ((40001, 8), (8,)),  # encoder_coefficients
        ((9, 36), (36, 40003)),  # the row-scaled BLT's variances (a last block padded)
        ((9, 36), (36, 1235)),  # ≤ 10^6 multiply-adds: one call
        ((8,), (8, 100)),
    ],
)
def test_long_products_in_single_threaded_blocks_are_one_call_bit_for_bit(
    left: tuple[int, ...], right: tuple[int, ...]
) -> None:
    """Issue 33 item 3: ``_long_times`` cuts a long product into blocks of ≤ 2^18
    multiply-adds (OpenBLAS's worker thread, woken above ~2^19, then spins ~0.1 s into
    the releases after a build), multiples of 64 long, so its floats do not depend on the
    thread count; they are one single-threaded call's floats except where OpenBLAS's
    kernel rounds a call's edge tiles its own way (its Haswell kernel, 0.3.31: the last
    row of the last < 64 columns of (9 × 36)·(36 × 40003)), and there within the product's
    rounding bound γ_k·Σ|a||b|."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from dpcount.counting.factorization import blt as blt_module

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(left), rng.standard_normal(right)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        want = a @ b
        alone = blt_module._long_times(a, b)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        _Recorded.products = []
        got = np.asarray(blt_module._long_times(a.view(_Recorded), b))
    np.testing.assert_array_equal(got, alone)  # the same floats at 1 and 2 threads
    k = left[-1]
    bound = 1.01 * k * 2.0**-53 / (1 - k * 2.0**-53) * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(got - want) <= bound)
    edges = got != want  # only a call's last row of its last columns, never inside
    if edges.ndim == 2 and edges.any():
        rows, cols = np.nonzero(edges)
        assert set(rows.tolist()) <= {left[0] - 1} and cols.min() >= right[-1] // 64 * 64
    else:
        assert not edges.any()
    total = int(np.prod(left)) * (right[-1] if len(right) == 2 else 1)
    if total <= 10**6 and len(left) == 2 and len(right) == 2:
        assert _Recorded.products == [total]  # the one call, as before
    else:
        assert max(_Recorded.products) <= 1 << 18
        assert sum(_Recorded.products) >= total
