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

from dpcount.counting import unbounded as ub
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
    assert max(ratios) <= MODEL_KAPPA / 4, ratios  # measured ≤ 3.1 (seeds 1–3)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["batch", "vbatch"])
def test_within_a_quarter_of_kappa_at_the_refusal_limit(path: str) -> None:
    (r,) = BENCH.measure(path, [hfg.FLOAT_MODEL_STEPS], 3)
    assert r <= MODEL_KAPPA / 4  # measured 2.2 (scalar), 2.6 (vector, dim 4) at 2^20


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
    from dpcount.counting.checkpoint import load_stream

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
    with pytest.raises(ValueError, match="different noise process"):
        ub._restore_unbounded(inner, None)
