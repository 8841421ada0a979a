"""Column-normalized BLT: weights, sensitivity, variances and streams against dense oracles."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import fftconvolve

from dpcount.counting import NormalizedBLT, load_stream, save_stream
from dpcount.counting.factorization.normalized_blt import (
    normalized_blt_losses,
    normalized_blt_noise_coefficients,
    normalized_blt_weights,
    shipped_normalized_blt_parameters,
)
from dpcount.counting.registry import CLASSES, build_mechanism
from dpcount.privacy import Budget, ConstantNoise, ZeroNoise, gaussian_sigma
from dpcount.privacy.source import NoiseSource
from tests.counting.factorization.test_normalized_sqrt import RecordingSampler

GAUSS = {"epsilon": 1.0, "delta": 1e-6}
THETA = [0.2, 0.6, 0.95, 0.999]
OMEGA = [0.15, 0.1, 0.08, 0.05]


def oracle(theta: list[float], omega: list[float], T: int) -> tuple[np.ndarray, np.ndarray]:
    """(B′, C′) from the definition, independently of the module: c_k by direct powers,
    column norms by summing the dense columns in extended precision, B′ = A·C′⁻¹ by a
    dense solve."""
    th, om = np.array(theta, dtype=np.longdouble), np.array(omega, dtype=np.longdouble)
    c = np.ones(T, dtype=np.longdouble)
    for k in range(1, T):
        c[k] = np.sum(om * th ** (k - 1))
    C = np.zeros((T, T), dtype=np.longdouble)
    for j in range(T):
        C[j:, j] = c[: T - j]
    norms = np.sqrt(np.sum(C * C, axis=0))
    Cn = (C / (norms / norms[0])[None, :]).astype(np.float64)
    A = np.tril(np.ones((T, T)))
    return A @ np.linalg.inv(Cn), Cn


@functools.lru_cache(maxsize=1)
def _oracle_1100() -> np.ndarray:
    """B′ of (THETA, OMEGA) at T = 1100 (the accurate paths' tests), built once."""
    return oracle(THETA, OMEGA, 1100)[0]


@pytest.mark.parametrize("T", [1, 2, 3, 17, 64])
def test_variances_and_sensitivity_match_the_dense_oracle(T: int) -> None:
    B, C = oracle(THETA, OMEGA, T)
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=0)
    v_true = np.sum(B * B, axis=1)
    # the oracle normalizes exactly; the mechanism's weights are 2^-40 larger (rounded up)
    np.testing.assert_allclose(m.noise_coefficients(), v_true, rtol=1e-10)
    np.testing.assert_allclose(
        normalized_blt_noise_coefficients(THETA, OMEGA, T), v_true, rtol=1e-10
    )
    Bm, Cm = m.dense_factorization()
    np.testing.assert_allclose(Bm, B, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Cm, C, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Bm @ Cm, np.tril(np.ones((T, T))), atol=1e-12)
    # every column of the mechanism's C′ is within the calibrated sensitivity, the first
    # one at it (norms in extended precision)
    assert m.privacy is not None
    s = m.privacy.l2_sensitivity
    wide = Cm.astype(np.longdouble)
    norms = np.sqrt(np.sum(wide * wide, axis=0))
    assert np.all(norms <= s) and norms[0] == pytest.approx(s, rel=1e-11)
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    mean, largest = normalized_blt_losses(THETA, OMEGA, T)
    assert m.mse() / unit == pytest.approx(mean, rel=1e-9)
    assert mean == pytest.approx(float(norms[0]) ** 2 * v_true.mean(), rel=1e-10)
    assert largest == pytest.approx(float(norms[0]) ** 2 * v_true.max(), rel=1e-10)
    if T >= 17:  # a wrong recursion (the cross term 2·e_t·X_t dropped) would be far off
        assert not np.allclose(np.cumsum(m.weights() ** 2), v_true, rtol=1e-3)


@pytest.mark.slow
def test_block_recursion_matches_the_direct_sum_past_one_block() -> None:
    """The variance recursion carried over blocks of 2^16 (T = 70 000, through the
    module's exact functions: the mechanism itself stops at 2^16, its float model's
    limit) against the row recursion V_t = ‖row t‖² done directly at the steps around
    the block boundary."""
    T = 70_000
    v = normalized_blt_noise_coefficients(THETA, OMEGA, T)
    e = normalized_blt_weights(THETA, OMEGA, T)
    inv = NormalizedBLT(64, buffer_decay=THETA, output_scale=OMEGA, **GAUSS).inverse
    t = np.arange(T - 1, dtype=np.float64)
    g = np.concatenate([[1.0], (inv.scale[None, :] * inv.decay[None, :] ** t[:, None]).sum(1)])
    for step in (65_535, 65_536, 65_537, T - 1):
        # row step of B′ (reversed): h(step − i) = Σ_{k≤i} e_{step−k} g_{i−k}, by FFT
        conv = fftconvolve(e[: step + 1][::-1], g[: step + 1])[: step + 1]
        assert v[step] == pytest.approx(float(conv @ conv), rel=1e-9)
    m = NormalizedBLT(1 << 16, buffer_decay=THETA, output_scale=OMEGA, **GAUSS)
    assert m.variance_at(65_536) == m.variances()[65_535]
    assert list(m.iter_variances(65_535)) == m.variances()[65_534:].tolist()


def test_weights_are_closed_form_and_rounded_up() -> None:
    T = 300
    e = normalized_blt_weights(THETA, OMEGA, T)
    th, om = np.array(THETA), np.array(OMEGA)
    c = np.concatenate([[1.0], (om[None, :] * th[None, :] ** np.arange(T - 1)[:, None]).sum(1)])
    S = np.cumsum((c * c).astype(np.longdouble))
    exact = np.sqrt(S[::-1] / S[-1]).astype(np.float64)
    assert e[0] == 1.0 and np.all(e[1:] > exact[1:])
    np.testing.assert_allclose(e, exact, rtol=2e-12)
    # each weight is the same float whatever block it is computed in
    np.testing.assert_array_equal(normalized_blt_weights(THETA, OMEGA, T, 100, 50), e[100:150])
    np.testing.assert_array_equal(normalized_blt_weights(THETA, OMEGA, T, 299, 1), e[299:])


@pytest.mark.parametrize("dim", [None, 3])
def test_zero_noise_releases_exact_prefix_sums(dim: int | None) -> None:
    T = 500
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS).with_sampler(ZeroNoise())
    x = np.random.default_rng(1).normal(size=(T,) if dim is None else (T, dim))
    np.testing.assert_allclose(m.release(x), np.cumsum(x, axis=0), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("dim", [None, 2])
def test_noise_is_the_decoder_applied_to_the_drawn_z(dim: int | None) -> None:
    """Batch, step-by-step and mixed streams release B′z for the z they drew."""
    T = 300
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=11)
    B, _ = oracle(THETA, OMEGA, T)
    shape = (T,) if dim is None else (T, dim)
    for mode in ("batch", "steps", "mixed", "blocks"):
        rec = RecordingSampler()
        mech = m.with_sampler(rec)  # type: ignore[arg-type]
        if mode == "batch":
            out = mech.release(np.zeros(shape))
        elif mode == "steps":
            s = mech.stream()
            out = np.array([s.update(np.zeros(shape[1:]) if dim else 0.0) for _ in range(T)])
        elif mode == "mixed":
            s = mech.stream()
            step = np.zeros(shape[1:]) if dim else 0.0
            rows = [s.update(step), *s.update_many(np.zeros((150, *shape[1:])))]
            rows += [s.update(step) for _ in range(49)]
            rows += list(s.update_many(np.zeros((T - 200, *shape[1:]))))
            out = np.array(rows)
        elif mode == "blocks":  # the process alone: several blocks carry the buffers
            proc = mech.noise_process(
                NoiseSource.generator(rec, np.random.default_rng(0), dim), dim
            )  # type: ignore[arg-type]
            out = np.concatenate([proc.next_many(k) for k in (1, 99, 37, 163)])
        z = np.concatenate([a.reshape(-1, *shape[1:]) for a in rec.draws])
        assert z.shape == shape
        np.testing.assert_allclose(out, B @ z, rtol=1e-9, atol=1e-9)


def test_constant_noise_vector_steps_span_column_blocks() -> None:
    """A vector step is computed in column blocks: every coordinate of a step wider than
    one block gets the noise of the dense decoder."""
    from dpcount.counting.factorization import normalized_blt

    T, d = 40, normalized_blt._COLUMNS + 100
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS)
    c = m.with_sampler(ConstantNoise(1.0))
    s = c.stream()
    wide = np.array([s.update(np.zeros(d)) for _ in range(T)])
    B, _ = oracle(THETA, OMEGA, T)
    np.testing.assert_allclose(wide, np.repeat(B.sum(1)[:, None], d, axis=1), rtol=1e-12)


def test_empirical_variance_matches_the_exact_one() -> None:
    T, runs = 64, 4000
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=3)
    noise = m.release(np.zeros((T, runs)))
    exact = m.variances()
    emp = noise.var(axis=1)
    se = exact * np.sqrt(2.0 / runs)
    assert np.all(np.abs(emp - exact) < 6 * se)
    assert np.mean(np.abs(emp - 2 * exact) < 6 * se) < 0.05  # twice the variance fails


@pytest.mark.parametrize("dim", [None, 2])
def test_checkpoint_round_trip_continues_bit_for_bit(tmp_path: Path, dim: int | None) -> None:
    T = 4096  # vector steps: blt.FLOAT_MODEL_HORIZONS
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=5)
    assert CLASSES[m.config()["class"]] is NormalizedBLT
    again = NormalizedBLT(**m.config()["kwargs"])
    assert again.noise_scale == m.noise_scale
    xs = np.ones(T) if dim is None else np.ones((T, dim))
    s = m.stream()
    s.update_many(xs[:2100])  # past several weight blocks of 512
    s.update(xs[2100])
    path = tmp_path / "ck.json"
    save_stream(s, path)
    ahead = [s.update(xs[2101]), *s.update_many(xs[2102:])]
    restored = load_stream(path, expect=m)
    back = [restored.update(xs[2101]), *restored.update_many(xs[2102:])]
    np.testing.assert_array_equal(np.array(back), np.array(ahead))


def test_corrupt_checkpoint_state_is_refused() -> None:
    m = NormalizedBLT(50, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=1)
    proc = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(0)))
    proc.next_many(10)
    state = proc.state_dict()
    fresh = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="sum must be finite"):
        fresh.load_state_dict({**state, "sum": np.array([np.nan])})
    with pytest.raises(ValueError, match="NormalizedBLTNoiseProcess"):
        fresh.load_state_dict({k: v for k, v in state.items() if k != "p"})
    fresh.load_state_dict(state)
    assert fresh.step == 10
    # same z ahead
    fresh.noise = NoiseSource.generator(m.sampler, np.random.default_rng(9))
    proc.noise = NoiseSource.generator(m.sampler, np.random.default_rng(9))
    np.testing.assert_array_equal(fresh.next_many(40), proc.next_many(40))


def test_vector_stream_holds_buffers_plus_one_rows() -> None:
    m = NormalizedBLT(4096, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=1)
    s = m.stream()
    for _ in range(3):
        s.update(np.zeros(1000))
    assert s.live_count() == len(THETA) + 1
    process = s._process
    assert process is not None
    assert process.state_dict()["p"].shape == (len(THETA), 1000)


def test_shipped_parameters_and_registry() -> None:
    decay, _ = shipped_normalized_blt_parameters(1000, "max")
    m = build_mechanism("normalized-blt", horizon=1000, budget=Budget(**GAUSS), rng=0)
    assert isinstance(m, NormalizedBLT) and m.budget.noise is not None
    assert m.budget.noise.value == "gaussian"
    best = NormalizedBLT.optimized(1024, objective="max", **GAUSS)
    assert best.buffer_decay.tolist() == sorted(decay)
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    assert best.max_variance() / unit < 9.491  # below the column-normalized square root


def test_bad_inputs_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="buffer_decay must lie in"):
        NormalizedBLT(10, buffer_decay=[1.5], output_scale=[0.1], **GAUSS)
    with pytest.raises(ValueError, match="horizon"):
        NormalizedBLT(2**24 + 1, buffer_decay=[0.5], output_scale=[0.1], **GAUSS)
    with pytest.raises(ValueError, match="Gaussian noise only"):
        NormalizedBLT(10, buffer_decay=[0.5], output_scale=[0.1], epsilon=1.0, noise="laplace")
    with pytest.raises(ValueError, match="objective"):
        shipped_normalized_blt_parameters(10, "median")
    with pytest.raises(ValueError, match="start"):
        normalized_blt_weights([0.5], [0.1], 10, start=11)


def _running_sum_by_steps(w: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The TwoSum running sum step by step (the definition ``_running_sum`` vectorizes):
    within each block of 64 steps the pair (hi, lo) from (x_0, +0); across blocks the
    carry pair from (start, +0); each value fl(fl(C + hi) + fl(E + fl(c + lo)))."""

    def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = a + b
        bb = s - a
        return s, (a - (s - bb)) + (b - bb)

    out = np.empty(w.shape)
    c_hi, c_lo = np.array(start, dtype=np.float64), np.zeros(w.shape[1:])
    for k0 in range(0, len(w), 64):
        hi, lo = w[k0].copy(), np.zeros(w.shape[1:])
        for j in range(k0, min(k0 + 64, len(w))):
            if j > k0:
                hi, err = two_sum(hi, w[j])
                lo = lo + err
            s, e = two_sum(c_hi, hi)
            out[j] = s + (e + (c_lo + lo))
        for _ in range(min(k0 + 64, len(w)), k0 + 64):  # a partial block's zero padding
            hi, err = two_sum(hi, np.zeros(w.shape[1:]))
            lo = lo + err
        c_hi, err = two_sum(c_hi, hi)
        c_lo = c_lo + err + lo
    return out


@pytest.mark.parametrize(("steps", "tail"), [(1, ()), (200, ()), (1000, (3,)), (64 * 40, ())])
def test_running_sum_is_the_stepwise_two_sum_bit_for_bit(
    steps: int, tail: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcount.counting.factorization import normalized_blt

    rng = np.random.default_rng(7)
    w = rng.standard_normal((steps, *tail)) * np.exp(rng.uniform(-20, 20, (steps, *tail)))
    start = np.full(tail, 1e6)
    expected = _running_sum_by_steps(w, start)
    for piece in (1 << 17, 64 * 3):  # one piece; several, whose carries must chain
        monkeypatch.setattr(normalized_blt, "_SUM_PIECE", piece)
        dest = np.empty((steps, 2, *tail))[:, 0]  # not contiguous: written through a copy
        normalized_blt._running_sum(w, start, dest)
        assert dest.tobytes() == expected.tobytes()
        contiguous = np.empty(w.shape)
        normalized_blt._running_sum(w, start, contiguous)
        assert contiguous.tobytes() == expected.tobytes()
        # with per-step weights: the running sum of fl(w_t·e_t)
        e = rng.uniform(0.5, 2.0, steps)
        scaled = np.empty(w.shape)
        normalized_blt._running_sum(w, start, scaled, scale=e)
        product = w * e.reshape(-1, *(1,) * len(tail))
        assert scaled.tobytes() == _running_sum_by_steps(product, start).tobytes()
    # a wrong carry (the low part dropped across blocks) is caught at these sizes
    if steps > 64:
        assert not np.array_equal(np.cumsum(w, axis=0) + start, expected)


def test_vector_blocks_above_the_accurate_horizon_apply_the_decoder() -> None:
    """Vector blocks above ``_VECTOR_ACCURATE_ABOVE`` (chunked, computed in place over the
    draw, TwoSum running sum; blocks of at least 32 chunks by ``_vector_block``: the
    buffers by ``across_chunks``, the sums by ``_block_sums`` in the chunk rows) release
    B′z for the z they drew, for one width-1 row too (where the chunk rows could alias
    the draw), with a remainder chunk and several blocks."""
    T = 1100  # > 1024: the accurate vector path; 1100 = 34·32 + 12
    B = _oracle_1100()
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=3)
    for dim, sizes in (
        (1, (T,)),
        (1, (1, 640, 459)),
        (3, (T,)),
        (3, (1, 640, 459)),
        (2, (1030, 70)),
    ):
        rec = RecordingSampler()
        proc = m.with_sampler(rec).noise_process(  # type: ignore[arg-type]
            NoiseSource.generator(rec, np.random.default_rng(0), dim), dim
        )
        out = np.concatenate([proc.next_many(k) for k in sizes])
        z = np.concatenate([a.reshape(-1, dim) for a in rec.draws])
        np.testing.assert_allclose(out, B @ z, rtol=1e-9, atol=1e-9)
        assert not np.allclose(out, np.cumsum(z, axis=0), rtol=1e-3)  # not the plain sum


def test_scalar_blocks_above_the_accurate_horizon_apply_the_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scalar blocks in the accurate forms (the buffers across chunks by
    ``across_chunks``, the running sum by ``_blocked_sum``), here from T = 1100 on:
    B′z for the z they drew, with a remainder chunk and block and several blocks."""
    from dpcount.counting.factorization import normalized_blt

    monkeypatch.setattr(normalized_blt, "_SCALAR_ACCURATE_ABOVE", 512)
    T = 1100  # 34 chunks of 32 (≥ one super-chunk) and a remainder of 12
    B = _oracle_1100()
    m = NormalizedBLT(T, buffer_decay=THETA, output_scale=OMEGA, **GAUSS, rng=3)
    for sizes in ((T,), (1, 640, 459), (1030, 70)):
        rec = RecordingSampler()
        proc = m.with_sampler(rec).noise_process(  # type: ignore[arg-type]
            NoiseSource.generator(rec, np.random.default_rng(0))
        )
        out = np.concatenate([proc.next_many(k) for k in sizes])
        z = np.concatenate([a.reshape(-1) for a in rec.draws])
        np.testing.assert_allclose(out, B @ z, rtol=1e-9, atol=1e-9)
        assert not np.allclose(out, np.cumsum(z), rtol=1e-3)  # not the plain sum


def _exact_prefix(x: np.ndarray, start: float) -> np.ndarray:
    """start + Σ_{s≤t} x_s, each exactly (Fractions), rounded once."""
    from fractions import Fraction

    total, out = Fraction(start), np.empty(len(x))
    for t, v in enumerate(x.tolist()):
        total += Fraction(v)
        out[t] = float(total)
    return out


def _within_blocked_sum_bound(got: np.ndarray, x: np.ndarray, exact: np.ndarray) -> bool:
    """|got − exact| ≤ 3u·|exact| + γ_32·Σ|x| over the step's block of 32 (the partial
    sum's rounding) — no term that grows with the number of blocks."""
    u = 2.0**-53
    b = 32
    pad = np.zeros(-(-len(x) // b) * b)
    pad[: len(x)] = np.abs(x)
    block = np.repeat(pad.reshape(-1, b).sum(axis=1), b)[: len(x)]
    return bool(np.all(np.abs(got - exact) <= 3 * u * np.abs(exact) + 34 * u * block))


@pytest.mark.parametrize("steps", [1, 31, 32, 1000, 32 * 70])
def test_blocked_sum_is_the_running_sum_within_rounding(steps: int) -> None:
    """``_blocked_sum`` against exact prefix sums: within rounding at the sum's size and
    the block's partial sum, whatever the number of blocks; its carries keep each
    block's rounding errors (inputs made to round in every block: 1 then 31 values of
    3/4 ulp, which a float sum drops), where a float cumsum loses them step by step."""
    from dpcount.counting.factorization.normalized_blt import _blocked_sum

    rng = np.random.default_rng(11)
    x = rng.standard_normal(steps) * np.exp(rng.uniform(-5, 5, steps))
    got = np.empty(steps)
    _blocked_sum(x.copy(), np.array(1e3), got)  # (it overwrites its input)
    exact = _exact_prefix(x, 1e3)
    assert _within_blocked_sum_bound(got, x, exact)
    hard = np.tile(np.r_[1.0, np.full(31, 0.75 * 2.0**-52)], -(-steps // 32))[:steps]
    _blocked_sum(hard.copy(), np.array(0.0), got)
    exact = _exact_prefix(hard, 0.0)
    assert _within_blocked_sum_bound(got, hard, exact)
    if steps > 32 * 8:  # the bound catches sums that lose the blocks' errors
        assert not _within_blocked_sum_bound(np.cumsum(hard), hard, exact)


def test_across_chunks_is_the_buffer_recursion() -> None:
    """``across_chunks`` (matrix products with the accurate powers) against the
    recursion p(k) = ρ·p(k − 1) + E(k − 1) in long double with ρ = (1 − d)^c: within
    a few ulps of the buffers' size, with a partial last super-chunk; ρ off by 10^-9
    in the reference is caught."""
    from dpcount.counting.factorization.normalized_blt import _carry_matrices, across_chunks

    decay = np.array([0.1, 0.9, 0.999])
    d = np.array([0.9, 0.1, 0.001])  # 1 − decay, as given
    c, K = 8, 75
    E = np.random.default_rng(5).standard_normal((3, K))
    start = np.array([1.0, -2.0, 30.0])
    prev, end = across_chunks(E, start, _carry_matrices(decay, d, c, K))

    def reference(skew: float) -> np.ndarray:
        ld = np.longdouble
        rho = (ld(1) - d.astype(ld)) ** c * ld(1 + skew)
        p = np.empty((3, K + 1), dtype=ld)
        p[:, 0] = start
        for k in range(K):
            p[:, k + 1] = rho * p[:, k] + E[:, k].astype(ld)
        return p

    want = reference(0.0)
    scale = np.max(np.abs(want.astype(np.float64)), axis=1, keepdims=True)
    got = np.concatenate([prev, end[:, None]], axis=1)
    assert np.all(np.abs(got - want.astype(np.float64)) <= 64 * 2.0**-53 * scale)
    wrong = reference(1e-9).astype(np.float64)
    assert not np.all(np.abs(got - wrong) <= 64 * 2.0**-53 * scale)


@pytest.mark.parametrize("dim", [None, 2])
def test_processes_read_the_kept_residuals_bit_for_bit(
    dim: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decays' residuals (``decay_residuals``, ``power_residuals``) are computed by
    a mechanism's first process and kept with its chunk matrices (issue 33 item 3: a
    release computed them every time): later processes compute none, and their noise
    is the same to the bit as a process's with its own cache."""
    from dpcount.counting.factorization import normalized_blt

    T = 1100  # accurate blocks: full chunks and remainder chunks
    monkeypatch.setattr(normalized_blt, "_SCALAR_ACCURATE_ABOVE", 512)
    m = NormalizedBLT.optimized(T, **GAUSS, rng=3)  # decays near 1: compensated

    def noise(chunks: object) -> np.ndarray:
        source = NoiseSource.generator(m.sampler, np.random.default_rng(9), dim)
        proc = normalized_blt.NormalizedBLTNoiseProcess(
            m.inverse,
            m._sums,
            T,
            source,
            dim,
            chunks=chunks,  # type: ignore[arg-type]
        )
        return np.concatenate([proc.next_many(k) for k in (1030, 70)])

    own = noise(None)
    first = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(9), dim), dim)
    for k in (1030, 70):  # the same chunk lengths: 32 and remainders of 6
        first.next_many(k)
    kept = {k for k in m._chunk_mats if isinstance(k, tuple) and k[0] == "residuals"}
    assert {("residuals", "decay", 0), ("residuals", "power", 32)} <= kept

    def refuse(*args: object) -> None:
        raise AssertionError("recomputed")

    monkeypatch.setattr(normalized_blt, "decay_residuals", refuse)
    monkeypatch.setattr(normalized_blt, "power_residuals", refuse)
    shared = noise(m._chunk_mats)
    assert shared.view(np.int64).tolist() == own.view(np.int64).tolist()
    assert np.any(m._chunk_mats[("residuals", "decay", 0)][0] != 0.0)  # compensated here


def _chunk_major_block(proc: object, z: np.ndarray, e: np.ndarray) -> np.ndarray:
    """A vector block's noise in the chunk-major layout ``_vector_block`` had before
    (rows of (chunk, coordinate), the state arrays copied transposed, the running sums'
    carries along the chunks): the reference its coordinate-major rows must equal to
    the bit. Advances nothing (reads the process's buffers and sum)."""
    from dpcount.counting.factorization import normalized_blt as nb
    from dpcount.counting.factorization.blt import _rows_times

    c = nb._CHUNK
    G, P, F, _ = proc._chunk_matrices(c)  # type: ignore[attr-defined]
    K, D = len(z) // c, z.shape[1]
    n = len(P)
    carry = nb._carry_matrices(proc._decay, proc._one_minus_decay, c, K)  # type: ignore[attr-defined]
    rows = np.ascontiguousarray(z.reshape(K, c, D).transpose(0, 2, 1)).reshape(K * D, c)
    E = _rows_times(rows, P.T).reshape(K, D, n)
    before, _ = nb.across_chunks(
        np.ascontiguousarray(E.transpose(2, 1, 0)),
        proc._p.copy(),  # type: ignore[attr-defined]
        carry,
    )
    prev = np.ascontiguousarray(before.transpose(2, 1, 0))
    w = _rows_times(rows, G.T)
    _rows_times(prev.reshape(K * D, n), F.T, w, add=True)
    x = w.reshape(K, D, c) * e.reshape(K, 1, c)
    res = _blocks_first_sums(x, proc._sum)  # type: ignore[attr-defined]
    return np.ascontiguousarray(res.transpose(0, 2, 1)).reshape(K * c, D)


def _blocks_first_sums(rows: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The running sums in the blocks-first rows (K, R, b) ``_block_sums`` had before:
    each block's prefix sums by the partial-sum matrix, its TwoSum errors, the blocks'
    carries hi + lo from ``start``. Overwrites ``rows`` with the errors."""
    from dpcount.counting.factorization import normalized_blt as nb
    from dpcount.counting.factorization.blt import _rows_times

    K, R, b = rows.shape
    res = np.empty((K, R, b))
    _rows_times(rows.reshape(K * R, b), nb._partial_sum_matrix(b), res.reshape(K * R, b))
    flat, err = res.reshape(-1), rows.reshape(-1)
    nb._two_sum_error_into(flat[:-1], err[1:], flat[1:], np.empty(len(flat) - 1))
    err[::b] = 0.0
    hi = np.empty((K, R))
    hi[0] = start
    hi[1:] = res[:-1, :, -1]
    np.cumsum(hi, axis=0, out=hi)
    lo = np.zeros((K, R))
    nb._two_sum_error(hi[:-1], res[:-1, :, -1], hi[1:], lo[1:], np.empty((K - 1, R)))
    lo[1:] += err.reshape(K, R, b)[:-1] @ np.ones(b)
    np.cumsum(lo, axis=0, out=lo)
    res += (hi + lo)[:, :, None]
    return res


@pytest.mark.parametrize("dim", [1, 3, 4])
def test_vector_block_is_the_chunk_major_layout_bit_for_bit(dim: int) -> None:
    """``_vector_block`` in coordinate-major rows (issue 33 item 3: no transposed copies
    of the state arrays) gives the same floats as the chunk-major layout it replaced,
    for a first block and one continuing from nonzero buffers and sum (the shipped
    decays, near 1); a wrong carry in the reference is caught."""
    T = 1 << 12
    m = NormalizedBLT.optimized(T, **GAUSS, rng=3)
    source = NoiseSource.generator(m.sampler, np.random.default_rng(4), dim)
    proc = m.noise_process(source, dim)
    rng = np.random.default_rng(5)
    e = m.weights()
    for first in (0, 1024 + 32 * 37):
        z = rng.standard_normal((32 * 37, dim))  # 37 chunks: a partial super-chunk
        want = _chunk_major_block(proc, z.copy(), e[first : first + len(z)])
        got = np.empty_like(z)
        proc._vector_block(z.copy(), got, e[first : first + len(z)])
        assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
        assert np.any(proc._p != 0.0)
    proc._sum = proc._sum + 2.0**-40  # a wrong carry
    want = _chunk_major_block(proc, z.copy(), e[: len(z)])
    proc._sum = proc._sum - 2.0**-40
    got = np.empty_like(z)
    proc._vector_block(z.copy(), got, e[: len(z)])
    assert not np.array_equal(got, want)


def _cancelling_blocks(R: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks of (B, t, −B) triples (|t| far below ulp(B)) and two zeros: every
    partial sum after a triple and every block's sum are exactly 0, so the sums there
    are the carried TwoSum errors (the t's) alone, and the order in which each block's
    errors are added shows in the last bits."""
    x = np.zeros((R, K, 32))
    big = rng.uniform(1.0, 2.0, (R, K, 10)) * 2.0**60
    x[..., 0:30:3] = big
    x[..., 1:30:3] = rng.standard_normal((R, K, 10)) * np.exp(rng.uniform(-30, 0, (R, K, 10)))
    x[..., 2:30:3] = -big
    return x


@pytest.mark.parametrize("R", [1, 3])
@pytest.mark.parametrize("cancelling", [False, True])
def test_block_sums_are_the_blocks_first_layout_bit_for_bit(R: int, cancelling: bool) -> None:
    """``_block_sums`` in streams-first rows (R, K, b) against the blocks-first layout
    (K, R, b) it had before: the same floats (the blocks' errors summed by the same
    products), on sums of widely ranging values and on sums that are their carried
    errors alone (there a different order of the blocks' errors is caught)."""
    from dpcount.counting.factorization import normalized_blt as nb

    K, b = 70, 32
    rng = np.random.default_rng(6)
    if cancelling:
        x, start = _cancelling_blocks(R, K, rng), np.zeros(R)
    else:
        x = rng.standard_normal((R, K, b)) * np.exp(rng.uniform(-30, 30, (R, K, b)))
        start = rng.standard_normal(R) * 1e8
    got = np.empty((R, K, b))
    nb._block_sums(x.copy(), start, got)
    if cancelling:  # the carried errors, not a pass-through of the steps
        assert np.all(got[:, 1:, 3::3] != 0.0)
        order = np.sort(np.sum(x[:, :-1, 1:30:3], axis=2), axis=1)  # another order
        assert not np.array_equal(got[:, 1:, 29], np.cumsum(order, axis=1))
    # the blocks-first reference
    want = _blocks_first_sums(np.ascontiguousarray(x.transpose(1, 0, 2)), start).transpose(1, 0, 2)
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("rows", [1, 37, 257, 2049, 8192 + 96])
def test_upper_times_is_the_full_product_bit_for_bit(rows: int) -> None:
    """``_upper_times`` (issue 33 item 3: the triangular chunk products in two halves of
    columns, a quarter fewer multiply-adds) gives the full product's floats for the
    chunks' Toeplitz G_c transposed and the partial-sum ones, on values spread over
    2^±40 and on cancelling rows, for row counts whose last block of the full product
    is one row (1, 257, 2049: numpy's vector-matrix product there) or not, and for the
    first 300 row counts (the partial sums); a matrix with one entry below the diagonal
    (not upper-triangular: the halves leave it out) is caught."""
    from dpcount.counting.factorization import normalized_blt as nb
    from dpcount.counting.factorization.blt import _rows_times

    m = NormalizedBLT.optimized(1 << 12, **GAUSS, rng=3)  # the shipped decays
    proc = m.noise_process(NoiseSource.generator(m.sampler, np.random.default_rng(1), None))
    G = proc._chunk_matrices(32)[0]
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((max(rows, 300), 32)) * np.exp2(
        rng.uniform(-40, 40, (max(rows, 300), 32))
    )
    a[::3, 1::2] = -a[::3, ::2]  # pairs that cancel to zero in the sums
    U = nb._partial_sum_matrix(32)
    for b in (np.ascontiguousarray(G.T), U):
        got = np.empty((rows, 32))
        nb._upper_times(a[:rows], b, got)
        assert got.tobytes() == _rows_times(a[:rows], b).tobytes()
        if rows > 1:  # (one row alone is the full product)
            lower = b.copy()
            lower[20, 3] = 0.5
            nb._upper_times(a[:rows], lower, got)
            assert not np.array_equal(got, _rows_times(a[:rows], lower))
    if rows == 1:
        for count in range(2, 300):
            got = np.empty((count, 32))
            nb._upper_times(a[:count], U, got)
            assert got.tobytes() == _rows_times(a[:count], U).tobytes()
