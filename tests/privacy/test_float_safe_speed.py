"""The fast forms of the float-safe release give the same floats as the direct ones.

:func:`~dpcount.privacy.float_safe.snap_release` on arrays computes in the scaled form
(s/g, trunc, rint, no ``fmod``); :class:`~dpcount.privacy.float_safe.GridTable` keeps a
mechanism's grids run-length encoded or as exponents; :class:`StepGrids` reads a stream's
grids a block at a time. Each is checked to the bit against the direct computation
(``fmod`` written out here, :func:`release_grids` of each √V_t).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dpcount.counting import BinaryTree
from dpcount.privacy import Budget, float_safe
from dpcount.privacy.float_safe import GridTable, StepGrids, release_grids, snap_release


def _fmod_form(sums: np.ndarray, noise: np.ndarray, grid: object) -> np.ndarray:
    """The module docstring's release, written out: RN(hi + R_g(fl(lo + noise)))."""
    s = np.asarray(sums, dtype=np.float64)
    lo = np.fmod(s, grid)
    out = np.rint((noise + lo) / grid) * grid
    return out - (lo - s)  # type: ignore[no-any-return]


def _cases(rng: np.random.Generator, n: int = 400) -> list[tuple[np.ndarray, np.ndarray, object]]:
    g = release_grids(np.abs(rng.normal(0, 10.0 ** rng.integers(-6, 7, n))) + 1e-300)
    edge = np.array([0.0, -0.0, 5e-324, -5e-324, 2.0**52, -(2.0**52), 1e-310, -0.1])
    sums = [
        np.cumsum(rng.integers(-3, 4, n)).astype(np.float64),  # whole numbers
        np.cumsum(rng.integers(-3, 4, n)),  # int64 (the whole-number blocks)
        np.concatenate([edge, rng.normal(0, 1e6, n - edge.size)]),
        -np.abs(rng.normal(0, 1, n)),
    ]
    out = []
    for s in sums:
        noise = rng.normal(0, 1, n) * g * 7
        noise[:6] = [0.0, -0.0, g[2] / 2, -g[3] / 2, 5e-324, -5e-324]  # zeros, ties
        out += [(s, noise, g), (s, noise, float(g[0])), (s, noise, float(g[0]) * 2**40)]
    return out


def test_scaled_snap_equals_the_fmod_form_to_the_bit() -> None:
    rng = np.random.default_rng(11)
    for _ in range(5):
        for s, noise, grid in _cases(rng):
            want = _fmod_form(s, noise.copy(), grid)
            got = snap_release(s, noise.copy(), grid)
            assert got.tobytes() == want.tobytes()
            work = np.full((2, s.size + 3), np.nan)  # larger than needed, dirty
            assert snap_release(s, noise.copy(), grid, work=work).tobytes() == want.tobytes()
            kept, out = noise.copy(), np.full(s.size, np.nan)
            assert snap_release(s, kept, grid, out=out) is out  # noise left as it is
            assert out.tobytes() == want.tobytes() and kept.tobytes() == noise.tobytes()
            # the caller's least sum (or a bound below it), and sums all above the grid
            # (R + q for R − (0 − q))
            for low in (s.min(), s.min() - 1):
                assert (
                    snap_release(s, noise.copy(), grid, known=(low, None)).tobytes()
                    == want.tobytes()
                )
            high = s - s.min() + np.max(grid) * 3
            want = _fmod_form(high, noise.copy(), grid)
            for low in (None, high.min()):
                got = snap_release(high, noise.copy(), grid, known=(low, None))
                assert got.tobytes() == want.tobytes()


def test_snap_vector_rows_and_the_fmod_fallback() -> None:
    rng = np.random.default_rng(12)
    s = np.cumsum(rng.integers(0, 5, (50, 3)), axis=0).astype(np.float64)
    g = release_grids(rng.uniform(1, 100, 50))[:, None]
    noise = rng.normal(0, 30, (50, 3))
    assert snap_release(s, noise.copy(), g).tobytes() == _fmod_form(s, noise, g).tobytes()
    big = np.array([1e300, -1e300, 3.0])  # s/g overflows: the fmod form is taken
    noise = np.array([0.3, -0.7, 0.6])
    assert snap_release(big, noise.copy(), 2.0**-100).tobytes() == (
        _fmod_form(big, noise, 2.0**-100).tobytes()
    )
    out = np.empty(3)
    snap_release(big, noise, 2.0**-100, out=out)
    assert out.tobytes() == _fmod_form(big, noise, 2.0**-100).tobytes()


def test_a_grid_by_its_inverse_equals_a_division() -> None:
    """x·(1/g) for a power-of-two grid is x/g to the bit (subnormal and huge results
    too); a grid 1/g is not exact for (none above 2^1022, none not a power of two)
    divides."""
    rng = np.random.default_rng(19)
    x = np.concatenate([rng.normal(0, 10.0 ** rng.integers(-300, 300, 2000)), [5e-324, -0.0]])
    for e in (-1003, -60, -1, 0, 3, 52, 1000, 1022):
        g = 2.0**e
        inverse = float_safe._inverse(g)
        assert inverse is not None
        with np.errstate(over="ignore"):  # infinities alike
            assert (x * inverse).tobytes() == (x / g).tobytes()
    assert float_safe._inverse(2.0**1023) is None and float_safe._inverse(3.0) is None
    assert float_safe._inverse(np.array([1.0])) is None


def test_a_wrong_zero_sign_would_be_seen() -> None:
    """The check above can fail: the sign of fmod's zero matters for a zero noise."""
    s, noise = np.array([-0.0]), np.array([-0.0])
    assert math.copysign(1.0, float(_fmod_form(s, noise.copy(), 1.0)[0])) == -1.0
    assert math.copysign(1.0, float(snap_release(s, noise.copy(), 1.0)[0])) == -1.0
    u = s / 1.0 - np.trunc(s / 1.0)  # lo/g without the sign of fmod's zero: +0
    wrong = (np.rint(noise + u) - (0.0 - np.trunc(s))) * 1.0
    assert math.copysign(1.0, float(wrong[0])) == 1.0


@pytest.mark.parametrize("kind", ["runs", "dense", "exponents"])
def test_grid_table_equals_the_grids_of_each_step(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "exponents":  # the int16 form of horizons beyond 2^22
        monkeypatch.setattr(float_safe, "_DENSE_FLOATS", 100)
    rng = np.random.default_rng(13)
    T = 3000
    grows = np.cumsum(rng.uniform(0, 3, T)) + 1.0  # few runs
    v = grows if kind == "runs" else rng.uniform(1, 1000, T)  # else a change a step
    table = GridTable(v)
    assert table._runs is (kind == "runs")
    want = release_grids(np.sqrt(v))
    assert table.array(1, T).tobytes() == want.tobytes()
    for _ in range(200):
        first = int(rng.integers(1, T + 1))
        n = int(rng.integers(1, T - first + 2))
        got = table.grids(first, n)
        if isinstance(got, float):
            assert (want[first - 1 : first - 1 + n] == got).all()
        else:
            assert got.tobytes() == want[first - 1 : first - 1 + n].tobytes()
        runs = table.runs(first, n, most=n)
        assert (runs is None) is (kind != "runs")
        if runs is not None:  # consecutive, covering the n steps, one grid each
            assert [r[0] for r in runs] == [0] + [r[1] for r in runs[:-1]] and runs[-1][1] == n
            rebuilt = np.concatenate([np.full(b - a, g) for a, b, g in runs])
            assert rebuilt.tobytes() == want[first - 1 : first - 1 + n].tobytes()
            assert len(runs) == 1 or table.runs(first, n, most=len(runs) - 1) is None
        run = table.run_of(first - 1)  # the run of step `first`: its grid, lo, hi
        assert (run is None) is (kind != "runs")
        if run is not None:
            g, lo, hi = run
            assert lo < first <= hi and (want[lo:hi] == g).all()
            assert (lo == 0 or want[lo - 1] != g) and (hi == T or want[hi] != g)
    with pytest.raises(ValueError, match=r"outside 1\.\.3000"):
        table.grids(3000, 2)
    if kind == "runs":
        with pytest.raises(ValueError, match=r"outside 1\.\.3000"):
            table.runs(3000, 2, most=2)
        with pytest.raises(ValueError, match=r"step 3001 is outside 1\.\.3000"):
            table.run_of(3000)


def test_step_grids_equal_release_grids_of_each_step() -> None:
    v = [float(x) for x in np.random.default_rng(14).uniform(0.1, 1e4, 5000)]
    cuts = [0, 1, 70, 71, 1500, 4000, 5000]  # blocks of any length, one empty
    grids = StepGrids(np.array(v[a:b]) for a, b in zip(cuts, [*cuts[1:], 5000], strict=True))
    got = [grids.next() for _ in range(100)]
    got += grids.take(1000).tolist()
    got += [grids.next() for _ in range(3000)]
    got += grids.take(900).tolist()
    assert got == [release_grids(math.sqrt(x)) for x in v[:5000]]
    with pytest.raises(ValueError, match="past the horizon"):
        grids.take(1)


def test_step_grid_runs_and_give_back_equal_release_grids_of_each_step() -> None:
    """Whole runs (the stream's fast path), runs given back in part, single steps and
    takes, interleaved: the grids of consecutive steps, in order."""
    v = np.repeat(np.random.default_rng(15).uniform(0.1, 1e4, 300), 7)  # runs of >= 7
    v[::5] *= 30.0  # and some of length 1
    grids = StepGrids(iter(np.array_split(v, 9)))
    want = [release_grids(math.sqrt(x)) for x in v]
    got: list[float] = []
    for i in range(60):
        g, n = grids.run()
        assert n >= 1 and g == want[len(got)]
        used = n if i % 3 else max(1, n // 2)  # a stream that leaves the run early
        got += [g] * used
        grids.give_back(g, n - used)
        got += [grids.next()] if i % 4 == 0 else grids.take(i % 5).tolist()
    got += grids.take(len(v) - len(got)).tolist()
    assert got == want
    with pytest.raises(ValueError, match="past the horizon"):
        grids.run()


def test_batch_release_keeps_its_grid_table() -> None:
    """The second release reads the kept table: the variances are computed once."""
    mech = BinaryTree(512, budget=Budget(epsilon=1.0, noise="laplace"), rng=1)
    calls = []
    variances = mech.variances

    def counted() -> np.ndarray:
        calls.append(1)
        return variances()

    mech.variances = counted  # type: ignore[method-assign]
    x = np.ones(512)
    first, second = mech.release(x), mech.release(x)
    assert len(calls) == 1 and first.shape == second.shape
    want = release_grids(np.sqrt(variances()))
    assert mech.release_grids(1, 512).tobytes() == want.tobytes()  # type: ignore[union-attr]


def test_stream_and_batch_agree_on_grids() -> None:
    """A stream's snapped values are multiples of the batch table's grids."""
    mech = BinaryTree(1000, budget=Budget(epsilon=1.0, noise="laplace"), rng=3)
    s = mech.stream()
    values = np.array([s.update(1.0) for _ in range(600)] + list(s.update_many(np.ones(400))))
    grids = mech.release_grids(1, 1000)
    assert grids is not None
    assert np.all(values / grids == np.round(values / grids))


def test_scalar_snap_equals_round_half_even() -> None:
    """The two-addition rounding of :func:`snap_scalar` is Python's ``round`` (ties to
    even) on ties, near 2^51 and beyond it, and on random values."""
    rng = np.random.default_rng(15)
    qs = [k + 0.5 for k in range(-6, 6)] + [-0.0, 0.0, 0.49999999999999994, -0.5]
    qs += [2.0**51 - 0.5, -(2.0**51) + 0.5, 2.0**51 + 1, 2.0**52 + 2, 1e300]
    qs += rng.normal(0, 10.0 ** rng.integers(0, 17, 2000)).tolist()
    for q in qs:
        for s in (0.0, 3.0, -5.0, 2.0**40 + 1):
            got = snap_release(s, q, 1.0)  # lo = fmod(s, 1) = 0 for these s
            want = (s - math.fmod(s, 1.0)) + round(q) * 1.0
            assert math.copysign(1.0, got) == math.copysign(1.0, want) and got == want


@pytest.mark.parametrize("name", ["binary", "kary", "sqrt", "blt"])
def test_stream_fast_path_equals_snap_scalar(name: str) -> None:
    """``update``'s fast path (snap_scalar written out, grids read a block at a time)
    gives :func:`snap_scalar` of each running sum, the process's noise and
    :func:`release_grids` of √variance_at(t), through the grid blocks' ends (64, 128,
    … steps) and fractional sums."""
    from dpcount.counting.registry import build_mechanism
    from dpcount.privacy.source import NoiseSource

    budget = Budget(epsilon=1.0, delta=1e-6, noise="gaussian")
    x = np.random.default_rng(16).integers(-2, 4, 700).astype(np.float64)
    x[::9] += 0.375
    x[0] = 2.0
    one, ref = (build_mechanism(name, horizon=700, budget=budget, rng=17) for _ in range(2))
    s = one.stream()
    got = [s.update(2)] + [s.update(v) for v in x[1:].tolist()]  # an int first: general path
    process = ref.noise_process(NoiseSource.generator(ref.sampler, ref._rng, None), None)
    total, want = 0.0, []
    for t, v in enumerate(x.tolist(), start=1):
        total += v
        grid = release_grids(math.sqrt(ref.variance_at(t)))
        want.append(float_safe.snap_scalar(total, process.next(), grid))
    assert np.array(got).tobytes() == np.array(want).tobytes()


def test_stream_fast_path_refuses_what_the_general_path_refuses() -> None:
    mech = BinaryTree(6, budget=Budget(epsilon=1.0, noise="laplace"), rng=18)
    s = mech.stream()
    s.update(1.0)
    s.update(1.0)  # on the fast path from here
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="finite"):
            s.update(bad)
    with pytest.raises(ValueError, match="beyond ±2\\^53"):
        s.update(2.0**53)
    assert s.step == 2
    for _ in range(4):
        s.update(0.5)
    with pytest.raises(ValueError, match="at its horizon"):
        s.update(1.0)


@pytest.mark.parametrize("runs", [1, 5, 40])
def test_running_sums_snapped_run_by_run_equal_the_grid_array(runs: int) -> None:
    """A block whose steps share a few grids is snapped run by run (a float grid each,
    multiplied by 1/g), a run of one grid kept across blocks; the floats are those of
    the per-step grid array, with and without the steps' bounds (whole steps: the
    offset int64 sums)."""
    from dpcount.counting._steps import add_running_sums

    rng = np.random.default_rng(20)
    T = 150_000  # two blocks of 2^17
    v = np.repeat(4.0 ** rng.integers(0, 6, runs), -(-T // runs))[:T]  # runs of one grid
    table = GridTable(v)
    assert table._runs
    for x in (rng.integers(-2, 4, T).astype(np.float64), rng.normal(0, 3, T)):
        noise = rng.normal(0, 8, T)
        want = noise.copy()
        add_running_sums("x", want, x, grid=release_grids(np.sqrt(v)))
        for bounds in (None, (float(x.min()), float(x.max())), (0.0, 3.0)):
            if bounds == (0.0, 3.0):
                x = np.abs(x)  # steps that do not decrease the sums
                want = noise.copy()
                add_running_sums("x", want, x, grid=release_grids(np.sqrt(v)))
            got = noise.copy()
            add_running_sums("x", got, x, grid=table, bounds=bounds)
            assert got.tobytes() == want.tobytes()


def test_a_known_bound_on_the_sums_gives_the_same_floats() -> None:
    """``bound`` only spares the search for the largest sum: the same floats with and
    without it, and a bound too large for the scaled form (tiny grids) still takes
    ``fmod``."""
    rng = np.random.default_rng(21)
    for s, noise, g in _cases(rng, 300):
        s = np.asarray(s, dtype=np.float64)
        if not np.all(np.abs(s) < 2.0**53):
            continue
        want = snap_release(s, noise.copy(), g)
        got = snap_release(s, noise.copy(), g, known=(None, 2.0**53))
        assert got.tobytes() == want.tobytes()
    s, noise = np.array([1e300, 3.0]), np.array([0.25, -0.5])
    got = snap_release(s, noise.copy(), 2.0**-900, known=(None, 2.0**1000))
    assert got.tobytes() == _fmod_form(s, noise, 2.0**-900).tobytes()


def test_sqrt_hand_out_list_stays_in_step_with_blocks_and_checkpoints(tmp_path: Path) -> None:
    """The square root's process hands scalar noise out of one list that a stream's
    fast path pops directly; blocks (``update_many``) and a restored state empty it in
    place, so the steps after them are the same as one block of every step."""
    from dpcount.counting import SqrtFactorization
    from dpcount.counting.checkpoint import load_stream, save_stream

    budget = Budget(epsilon=1.0, delta=1e-6, noise="gaussian")
    x = np.random.default_rng(22).integers(0, 3, 3000).astype(np.float64)
    want = SqrtFactorization(3000, budget=budget, rng=23).stream().update_many(x)
    s = SqrtFactorization(3000, budget=budget, rng=23).stream()
    got: list[float] = []
    for a, b in ((0, 700), (700, 1500), (1500, 1501), (1501, 2100), (2100, 2600), (2600, 3000)):
        if a in (700, 1501):
            got += s.update_many(x[a:b]).tolist()
            continue
        handout = s._process.handout if s._process is not None else None
        got += [s.update(v) for v in x[a:b].tolist()]
        assert s._process.handout is handout or a == 0
        assert s._process.step == b and (len(s._process.handout) > 0 or b == 3000)
        if b == 2100:  # mid hand-out list: saved, restored, continued
            save_stream(s, tmp_path / "s.ckpt")
            s = load_stream(tmp_path / "s.ckpt")
    assert np.array(got).tobytes() == want.tobytes()


def test_a_few_first_steps_of_a_long_horizon_do_not_build_the_grid_table() -> None:
    from dpcount.counting import SqrtFactorization

    T = 1 << 12
    mech = SqrtFactorization(horizon=T, epsilon=1.0, delta=1e-6, noise="gaussian", rng=3)
    want = release_grids(np.sqrt(mech.variances()))
    few = mech.release_grids(1, 63)  # 64·63 < T: read from iter_variances
    assert "_grid_table" not in mech.__dict__
    assert few is not None and few.tobytes() == want[:63].tobytes()
    out = mech.release(np.zeros(63))  # the release snaps to the same grids
    assert "_grid_table" not in mech.__dict__ and np.all(np.mod(out, want[:63]) == 0)
    later = mech.release_grids(100, 20)  # not the first steps: the kept table
    assert "_grid_table" in mech.__dict__
    assert later is not None and later.tobytes() == want[99:119].tobytes()
    whole = SqrtFactorization(horizon=T, epsilon=1.0, delta=1e-6, noise="gaussian", rng=3)
    assert whole.release_grids(1, 64) is not None and "_grid_table" in whole.__dict__
