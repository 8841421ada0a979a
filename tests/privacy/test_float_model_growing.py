"""The float model (F) of the float-safe release for the horizon-free BLT with growing
columns (block 0 of the default unbounded counter): every noise path within κ/4 where it
is measured, a wrong reference (a normalizer 10⁻¹² off) fails the same check, steps
beyond :data:`FLOAT_MODEL_STEPS` are refused, and a checkpoint of the old default
unbounded counter (block 0 = HorizonFreeBLT) is refused rather than continued with
another noise process (benchmarks/float_model_growing.py computes the ratios: the
noise's error against the same recursion in long double, from the very draws)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcount.counting import Honaker
from dpcount.counting import unbounded as ub
from dpcount.counting.checkpoint import load_stream
from dpcount.counting.factorization import horizon_free_growing as hfg
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

DATA = Path(__file__).resolve().parent / "data"
BUDGET = Budget(epsilon=1.0, delta=1e-6)


def _bench() -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "float_model_growing.py"
    spec = importlib.util.spec_from_file_location("float_model_growing", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("float_model_growing", module)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def test_scalar_path_within_a_quarter_of_kappa_at_2_11() -> None:
    (r,) = BENCH.measure("batch", [1 << 11], 1)
    assert 0.5 < r <= MODEL_KAPPA / 4  # measured 1.6 (a ratio below ~1 would be suspect)


def test_check_fails_on_a_wrong_computation() -> None:
    """The same check against a reference whose normalizers are 10⁻¹² off fails κ."""
    mech = BENCH.mechanism()
    T = 1 << 11
    noise, z = BENCH.drive(mech, "batch", T, 1)
    exact = BENCH.exact_noise(mech.columns, z)
    (good,) = BENCH.ratios(mech, noise, exact, z, [T])
    cols = mech.columns
    wrong = hfg.GrowingColumns(
        decay=cols.decay,
        starts=cols.starts,
        scales=cols.scales,
        normalizers=cols.normalizers * (1.0 + 1e-12),
    )
    (bad,) = BENCH.ratios(mech, noise, BENCH.exact_noise(wrong, z), z, [T])
    assert good <= MODEL_KAPPA / 4 < MODEL_KAPPA < bad


@pytest.mark.slow
@pytest.mark.parametrize("path", ["batch", "blocks", "scalar", "vector", "vbatch", "unbounded"])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_path_within_a_quarter_of_kappa_at_2_17(path: str, seed: int) -> None:
    ratios = BENCH.measure(path, [1 << 11, 1 << 14, 1 << 17], seed)
    assert max(ratios) <= MODEL_KAPPA / 4, ratios  # ≤ 3.1 (seeds 1–3, before head factors)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["batch", "vbatch"])
def test_within_a_quarter_of_kappa_at_2_22(path: str) -> None:
    """2^22 steps (the limit, 2^25, takes minutes a path: its figures are the benchmark's,
    benchmarks/float_model_growing.py --log2 24,25 --beyond). vbatch's noise computed
    coordinate by coordinate (bit for bit vbatch's: checked inside on 2^14 steps and by
    :func:`test_vbatch_by_coordinates_is_vbatch`): 99.6 s in a clean-clone CI, where the
    vbatch path took 144 and 151 s in two CIs on the same machine."""
    if path == "vbatch":
        (r,) = BENCH.measure_vector_by_coordinates([1 << 22], 3)
    else:
        (r,) = BENCH.measure(path, [1 << 22], 3)
    assert r <= MODEL_KAPPA / 4  # benchmark: 2.30 (scalar), 2.89 (vector, dim 4) at 2^22


def test_vbatch_by_coordinates_is_vbatch() -> None:
    """The benchmark's fast vector measurement (the scalar path on each coordinate of
    vbatch's own draws) gives vbatch's ratios exactly, and its draws are vbatch's."""
    Ts = [1 << 9, 1 << 11]
    assert BENCH.measure_vector_by_coordinates(Ts, 3, check=1 << 9) == BENCH.measure(
        "vbatch", Ts, 3
    )
    mech = BENCH.mechanism("vbatch")
    _, z = BENCH.Driver("vbatch", 1 << 9, 2, mech).take(1 << 9)
    np.testing.assert_array_equal(BENCH.vector_draws(1 << 9, 2), z)


def test_every_path_computes_the_noise_of_one_call() -> None:
    """Each path's noise equals, bit for bit, the one-call path's (batch / vbatch) that
    runs the same code, so a ratio measured on one holds for the other."""
    assert all(BENCH.identical(list(BENCH.PATHS), 1 << 10, 3).values())


def _process(dim: int | None = None) -> Any:
    mech = hfg.HorizonFreeGrowingBLT(1 << 53, budget=BUDGET, rng=1)
    source = NoiseSource.generator(mech.sampler, np.random.default_rng(1), dim)
    return mech.noise_process(source, dim)


def _at_limit(dim: int | None) -> Any:
    """A process whose state says every step up to the limit is released."""
    proc = _process(dim)
    state = proc.state_dict()
    state["t"] = hfg.FLOAT_MODEL_STEPS
    fresh = _process(dim)
    fresh.load_state_dict(state)
    return fresh


@pytest.mark.parametrize("dim", [None, 3])
def test_steps_beyond_the_measured_limit_are_refused(dim: int | None) -> None:
    L = hfg.FLOAT_MODEL_STEPS
    proc = _at_limit(dim)
    with pytest.raises(ValueError, match=rf"horizon-free-growing-blt: noise at step {L + 1} "):
        proc.next()
    with pytest.raises(ValueError, match=rf"step {L + 5} \(dim {dim}\) is refused"):
        proc.next_many(5)
    early = _process(dim)  # below the limit nothing is refused
    assert np.all(np.isfinite(early.next_many(3)))
    with pytest.raises(ValueError, match="refused"):
        early.next_many(L)  # 3 + L steps: refused before anything is drawn
    assert early.next_many(1).shape == ((1,) if dim is None else (1, dim))


def test_old_default_unbounded_checkpoint_is_refused(tmp_path: Path) -> None:
    """A checkpoint saved by dpcount 0.5.0 (block 0 = HorizonFreeBLT for steps 1 … 2^26 − 1,
    three vector steps) is refused with a clear error, not resumed with the growing BLT."""
    path = tmp_path / "old.ckpt"
    shutil.copy(DATA / "unbounded_horizon_free_blt_0.5.0.ckpt", path)
    with pytest.raises(ValueError, match="HorizonFreeBLT for steps 1 … 2\\^26 − 1") as err:
        ub.load_unbounded(path)
    assert "different noise process" in str(err.value)


def test_new_checkpoint_resumes_and_one_without_the_span_is_refused(tmp_path: Path) -> None:
    def counter() -> ub.UnboundedCounter:
        return ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=5)

    xs = [np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.array([1.0, 1.0])]
    whole = counter().stream()
    ref = [whole.update(x) for x in xs + xs]
    first = counter().stream()
    for x in xs:
        first.update(x)
    path = tmp_path / "new.ckpt"
    ub.save_unbounded(first, path)
    resumed = ub.load_unbounded(path)
    np.testing.assert_array_equal([resumed.update(x) for x in xs], ref[3:])
    inner = load_stream(path)
    del inner.extra["unbounded"]["block0_span_log2"]  # type: ignore[index]
    with pytest.raises(ValueError, match="corrupt UnboundedStream state: it must hold"):
        ub._restore_unbounded(inner, None)  # a head without a span: no version saved it
    del inner.extra["unbounded"]["block0_head_factors"]  # type: ignore[index]
    with pytest.raises(ValueError, match="different noise process"):  # as 0.5.0 saved it
        ub._restore_unbounded(inner, None)


def _span_counter(monkeypatch: pytest.MonkeyPatch, span: int) -> ub.UnboundedCounter:
    """The default horizon-free counter as a dpcount whose block 0 spans 2^span − 1 built it."""
    with monkeypatch.context() as m:
        m.setattr(ub, "HORIZON_FREE_BLT_SPAN_LOG2", span)
        return ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=7)


def test_the_default_block_0_spans_the_measured_steps() -> None:
    counter = ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET)
    assert hfg.FLOAT_MODEL_STEPS == 1 << ub.HORIZON_FREE_BLT_SPAN_LOG2
    assert counter.block_mechanism(0).horizon == hfg.FLOAT_MODEL_STEPS - 1
    assert f"steps 1 .. 2^{ub.HORIZON_FREE_BLT_SPAN_LOG2}-1" in counter.relation


@pytest.mark.parametrize("span", [22, 24])
def test_a_checkpoint_with_an_earlier_span_resumes_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, span: int
) -> None:
    """A checkpoint saved by an earlier 0.5 state (block 0 the growing BLT for steps
    1 … 2^22 − 1 or 1 … 2^24 − 1, recorded as block0_span_log2 = 22 / 24) continues as
    that version would have: block 0 ends at 2^span − 1, Honaker from 2^span, the same
    releases bit for bit; saved again, it keeps its span."""
    xs = [np.array([1.0, 0.0, 2.0]), np.array([0.0, 2.0, 1.0]), np.array([1.0, 1.0, 0.0])]
    whole = _span_counter(monkeypatch, span).stream()
    want = [whole.update(x) for x in xs + xs]
    first = _span_counter(monkeypatch, span).stream()
    for x in xs:
        first.update(x)
    path = tmp_path / f"span{span}.ckpt"
    ub.save_unbounded(first, path)
    assert ub.HORIZON_FREE_BLT_SPAN_LOG2 == 25  # loaded by this version's default
    resumed = ub.load_unbounded(
        path, expect=ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET)
    )
    np.testing.assert_array_equal([resumed.update(x) for x in xs], want[3:])
    old, new = resumed.counter, ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET)
    assert old.block_mechanism(0).horizon == (1 << span) - 1
    assert new.block_mechanism(0).horizon == (1 << 25) - 1
    assert isinstance(old.block_mechanism(span), Honaker)
    tag = f"2^{span}-1"
    assert tag in old.relation and tag in old.privacy.calibration  # type: ignore[union-attr]
    v = old.variance_at(1 << span)
    assert v == whole.counter.variance_at(1 << span) != new.variance_at(1 << span)
    ub.save_unbounded(resumed, path)
    assert load_stream(path).extra["unbounded"]["block0_span_log2"] == span  # type: ignore[index]


@pytest.mark.parametrize("cut", [2, 7, 9])
def test_a_short_span_checkpoint_crosses_its_block_end_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    """Block 0 for steps 1 … 7 (recorded span 3), saved at step ``cut`` and resumed by this
    version: the releases across step 8 (Honaker blocks) equal the uninterrupted stream's."""
    x = np.arange(30) % 4
    whole = _span_counter(monkeypatch, 3).stream()
    want = [whole.update(v) for v in x[:cut]] + list(whole.update_many(x[cut:]))  # same calls
    first = _span_counter(monkeypatch, 3).stream()
    got = [first.update(v) for v in x[:cut]]
    ub.save_unbounded(first, tmp_path / "s3.ckpt")
    resumed = ub.load_unbounded(tmp_path / "s3.ckpt")
    got += list(resumed.update_many(x[cut:]))
    np.testing.assert_array_equal(got, want)
    assert resumed.counter.block_mechanism(0).horizon == 7


@pytest.mark.parametrize(
    ("span", "message"),
    [
        (26, r"2\^26 − 1 \(block0_span_log2 = 26\): this dpcount cannot continue it"),
        (0, "cannot continue it"),
        (True, "block0_span_log2 True is not an int"),
        ("22", "block0_span_log2 '22' is not an int"),
    ],
)
def test_a_span_it_cannot_continue_is_refused(tmp_path: Path, span: Any, message: str) -> None:
    stream = ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=5).stream()
    stream.update(1.0)
    path = tmp_path / "c.ckpt"
    ub.save_unbounded(stream, path)
    inner = load_stream(path)
    inner.extra["unbounded"]["block0_span_log2"] = span  # type: ignore[index]
    with pytest.raises(ValueError, match=message):
        ub._restore_unbounded(inner, None)


@pytest.mark.parametrize("span", [22, 24, 25])
def test_a_checkpoint_saved_before_head_factors_resumes_bit_for_bit(
    tmp_path: Path, span: int
) -> None:
    """Default counters saved at step 10 by the code before head factors (no
    block0_head_factors; block 0 spans 2^span − 1; span 22 vector dim 3, 24 scalar, 25
    vector dim 2): resumed with every β_s = 1, steps 11 … 20 (head steps 11 … 16 among
    them) equal the uninterrupted stream's releases recorded in the file; saved again,
    the state records no head factors (and resumes the same way)."""
    path = tmp_path / "dev.ckpt"
    shutil.copy(DATA / f"growing_blt_span{span}_dev.ckpt", path)
    assert "block0_head_factors" not in load_stream(path).extra["unbounded"]  # type: ignore[index]
    resumed = ub.load_unbounded(path)
    extra: Any = resumed.extra
    assert resumed.counter._head() == ()
    assert resumed.counter.block_mechanism(0).horizon == (1 << span) - 1
    half = len(extra["inputs"]) // 2
    got = [np.asarray(resumed.update(np.asarray(x))).tolist() for x in extra["inputs"][:half]]
    ub.save_unbounded(resumed, path, extra=extra)
    assert load_stream(path).extra["unbounded"]["block0_head_factors"] == []  # type: ignore[index]
    again = ub.load_unbounded(path)
    got += [np.asarray(again.update(np.asarray(x))).tolist() for x in extra["inputs"][half:]]
    assert got == extra["releases"]
    # the same file resumed with this version's head factors would release other values
    fresh = ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET)
    assert fresh._head() == hfg.HORIZON_FREE_GROWING_HEAD
    assert fresh.variance_at(11) != again.counter.variance_at(11)


def test_a_new_checkpoint_records_the_head_factors() -> None:
    stream = ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=5).stream()
    stream.update(1.0)
    assert stream.counter._head() == hfg.HORIZON_FREE_GROWING_HEAD


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ([0.5], r"head factors \[0.5\] \(block0_head_factors\): this dpcount knows only"),
        ([1.0] * 16, "knows only none"),
        ("none", "block0_head_factors 'none' is not a list"),
        ([1.5], r"block0_head_factors: head_factors\[0\] must be"),
        ([0.9] * 17, "at most 16 factors"),
        ([True], r"head_factors\[0\] must be a real number"),
    ],
)
def test_head_factors_it_cannot_continue_are_refused(
    tmp_path: Path, head: Any, message: str
) -> None:
    stream = ub.UnboundedCounter(inner=ub.HORIZON_FREE_BLT, budget=BUDGET, rng=5).stream()
    stream.update(1.0)
    path = tmp_path / "c.ckpt"
    ub.save_unbounded(stream, path)
    assert load_stream(path).extra["unbounded"]["block0_head_factors"] == list(  # type: ignore[index]
        hfg.HORIZON_FREE_GROWING_HEAD
    )
    inner = load_stream(path)
    inner.extra["unbounded"]["block0_head_factors"] = head  # type: ignore[index]
    with pytest.raises(ValueError, match=message):
        ub._restore_unbounded(inner, None)


def test_the_reference_kernel_is_the_numpy_loop() -> None:
    """The reference's C loop (when a compiler is there) computes, bit for bit, what the
    numpy loop does (K ≥ 2 columns: numpy then sums the buffers row by row, as C does)."""
    mech = BENCH.mechanism()
    z = np.random.default_rng(5).standard_normal((1 << 10, 3))
    fast = BENCH.ExactNoise(mech.columns, 3)
    if fast.kernel is None:
        pytest.skip("no C compiler: the benchmark runs the numpy loop")
    slow = BENCH.ExactNoise(mech.columns, 3, fast=False).advance(z)
    np.testing.assert_array_equal(
        np.concatenate([fast.advance(z[:100]), fast.advance(z[100:])]), slow
    )
