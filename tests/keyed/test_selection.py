"""Private key selection (open key sets): the δ claim exactly and by simulation, the
selected rows, determinism and the refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import (
    KeySelection,
    SelectionPlan,
    Selector,
    noise_tail,
    union_tail,
)
from dpcount.privacy.source import NoiseSource
from tests.keyed._budget import keyed_counts, make_job
from tests.keyed._keys import noise_key, sub_key
from tests.keyed.test_bounds import naive_bound

pytest.importorskip("pyarrow")


# ----------------------------------------------------------------------------------
# Independent computations
# ----------------------------------------------------------------------------------
def dl_pmf(scale: float, half_width: int) -> np.ndarray:
    """Lap_Z(scale) on −L..L, P[y] = (1 − q)/(1 + q)·q^|y| (closed form, no geometric)."""
    q = math.exp(-1.0 / scale)
    y = np.arange(-half_width, half_width + 1)
    return (1 - q) / (1 + q) * q ** np.abs(y)


def convolved_tail(nodes: int, scale: float, x: int, half_width: int = 400) -> float:
    """P[sum of ``nodes`` Lap_Z ≥ x] by convolving the truncated pmf (truncated mass
    ~ q^400, far below the tolerances used)."""
    one = dl_pmf(scale, half_width)
    pmf = one
    for _ in range(nodes - 1):
        pmf = np.convolve(pmf, one)
    centre = (len(pmf) - 1) // 2
    return float(pmf[max(0, centre + x) :].sum())


class _Tags(NoiseSource):
    """A NoiseSource handing out row r as 2^r: the noise of a step, read in binary,
    names the rows (tree nodes) it sums."""

    def __init__(self, sampler: Any) -> None:
        super().__init__(sampler, None)

    def sample(self, size: Any) -> np.ndarray:
        rows = int(np.prod(size))
        out = np.array([1 << (self.rows_drawn + i) for i in range(rows)], dtype=np.int64)
        self.rows_drawn += rows
        return out.reshape(size)


def incidence(plan: SelectionPlan) -> list[list[int]]:
    """The nodes each step's selection noise sums (from the tree's own noise process)."""
    m = plan.mechanism.counting
    process = m.noise_process(_Tags(m.sampler), None)
    noise = process.next_many(m.horizon)
    return [[r for r in range(62) if int(v) >> r & 1] for v in noise]


def exact_crossing(plan: SelectionPlan, count: int, threshold: int, half_width: int = 200) -> float:
    """P[∃ s: count + N_s ≥ threshold] exactly for a key whose running count is
    ``count``: the steps are grouped into components that share tree nodes (independent
    of each other); in each, P[no step crosses] is a sum over a product grid of its
    nodes' values (the mass beyond ±``half_width``, ~q^200 < 1e-20 here, is counted as
    crossing, so the result is an upper bound by that much)."""
    steps = incidence(plan)
    pmf = dl_pmf(float(plan.scale), half_width)
    values = np.arange(-half_width, half_width + 1)
    x = threshold - count
    components: list[tuple[set[int], list[list[int]]]] = []
    for s in steps:
        joined = [c for c in components if c[0] & set(s)]
        nodes, members = set(s), [s]
        for c in joined:
            components.remove(c)
            nodes |= c[0]
            members += c[1]
        components.append((nodes, members))
    no_crossing = 1.0
    for nodes, members in components:
        used = sorted(nodes)
        grids = np.meshgrid(*([values] * len(used)), indexing="ij", sparse=True)
        weights = np.ones([1] * len(used))
        for axis in range(len(used)):
            shape = [1] * len(used)
            shape[axis] = len(values)
            weights = weights * pmf.reshape(shape)
        ok = np.ones(weights.shape, dtype=bool)
        for s in members:
            ok = ok & (sum(grids[used.index(r)] for r in s) < x)
        no_crossing *= float(weights[ok].sum())
    return 1.0 - no_crossing


def plan_for(horizon: int, epsilon_s: float, delta_s: float, max_weight: int) -> SelectionPlan:
    job, _ = make_job(
        times=pd.Series([1]),
        keys=None,
        key_values=pd.Series(["a"]),
        columns=_columns(),
        step=1,
        epsilon=1.0,
        delta=None,
        noise="discrete-laplace",
        calibration=None,
        max_weight=max_weight,
        max_keys=None,
        start=1,
        horizon=horizon,
        mechanism="tree",
        selection=KeySelection(epsilon=epsilon_s, delta=delta_s, selector=Selector.TREE),
    )
    assert job.selection is not None
    return job.selection


def _columns() -> Any:
    from dpcount.keyed.events import EventColumns

    return EventColumns("t", "key")


# ----------------------------------------------------------------------------------
# The calibration of τ
# ----------------------------------------------------------------------------------
def test_noise_tail_is_a_tight_upper_bound_of_the_convolution() -> None:
    for nodes, scale, x in [(1, 2.0, 5), (3, 2.0, 7), (5, 1.5, 12), (2, 10.0, 30), (4, 3.0, 40)]:
        exact = convolved_tail(nodes, scale, x)
        bound = noise_tail(nodes, scale, x)
        assert exact <= bound <= exact * (1 + 1e-5), (nodes, scale, x)


def test_noise_tail_in_blocks_for_large_scales() -> None:
    """Scale >= 200: blocks of scale/100 values, an upper bound within ~1% (one node:
    the closed form P[Z >= x] = q^x/(1 + q))."""
    for scale, x in [(1000.0, 8000), (250.0, 900)]:
        q = math.exp(-1.0 / scale)
        exact = q**x / (1 + q)
        assert exact <= noise_tail(1, scale, x) <= exact * 1.02


def test_threshold_is_the_least_union_bound_below_key_delta() -> None:
    plan = plan_for(16, 1.0, 1e-3, 1)
    nodes, scale = plan.nodes(), float(plan.scale)
    x = plan.threshold - plan.per_key_total
    union = sum(convolved_tail(int(n), scale, x) for n in nodes)
    below = sum(convolved_tail(int(n), scale, x - 1) for n in nodes)
    assert union <= plan.key_delta < below
    assert union_tail(nodes, plan.scale, x) >= union  # the library's bound is an upper bound
    # the nodes are the binary tree's: one node per 1-bit of the step (no subtraction)
    assert nodes.tolist() == [bin(s).count("1") for s in range(1, 17)]
    assert [len(s) for s in incidence(plan)] == nodes.tolist()


def test_key_delta_splits_delta_over_units_keys_and_e_epsilon() -> None:
    plan = plan_for(8, 0.5, 1e-6, 1)
    assert plan.key_delta == pytest.approx(1e-6 * math.exp(-1.5))  # ε = 0.5 + 1.0
    assert plan.epsilon_total == 1.5 and plan.delta_total == 1e-6  # pure counting
    assert "(1.5, 1e-06)-DP" in plan.describe()


def test_exact_probability_of_a_one_unit_key_is_below_key_delta() -> None:
    """The δ claim, exactly: T = 4, a one-unit key with count C at every step (its
    worst case); and a threshold halved above C breaks it."""
    plan = plan_for(4, 1.5, 0.15, 2)  # scale 4, p₁ ≈ 0.012
    C, tau = plan.per_key_total, plan.threshold
    exact = exact_crossing(plan, C, tau)
    union = union_tail(plan.nodes(), plan.scale, tau - C)
    assert exact <= union <= plan.key_delta
    assert exact > 0.5 * plan.key_delta  # the union bound is not vacuous here
    wrong = C + (tau - C) // 2
    assert exact_crossing(plan, C, wrong) > 2 * plan.key_delta


def _one_unit_keys(n: int, weight: int) -> pd.DataFrame:
    keys = [f"k{i:05d}" for i in range(n)]
    return pd.DataFrame({"t": np.ones(n, dtype=np.int64), "key": keys, "w": weight})


def open_kw(**kw: Any) -> dict[str, Any]:
    """keyed_counts' arguments of an open key set over integer steps (``kw`` override)."""
    base: dict[str, Any] = dict(
        keys=None,
        selection=KeySelection(epsilon=1.5, delta=0.15, selector=Selector.TREE),
        time_column="t",
        key_column="key",
        step=1,
        start=1,
        horizon=4,
        epsilon=1.0,
        mechanism="tree",
    )
    base.update(kw)
    return base


def _open_run(events: pd.DataFrame, testing: bytes | None, **kw: Any) -> Any:
    if testing is not None:
        kw = {"secret": unsafe_testing_secret(testing), **kw}
    return keyed_counts(events, **open_kw(**kw))


def test_simulated_release_rate_of_one_unit_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The δ claim by simulation through the PRF engine: 4000 keys of one event of
    weight C at step 1; the released fraction matches the exact probability within 5
    standard errors and stays below p₁; with τ halved above C it does not."""
    n = 4000
    events = _one_unit_keys(n, 2)
    result = _open_run(events, b"selection-sim-1".ljust(32, b"."), weight_column="w", max_weight=2)
    assert result.selection is not None
    plan = result.selection.plan
    exact = exact_crossing(plan, plan.per_key_total, plan.threshold)
    rate = result.frame["key"].nunique() / n
    se = math.sqrt(exact * (1 - exact) / n)
    assert abs(rate - exact) <= 5 * se
    assert rate <= plan.key_delta + 5 * math.sqrt(plan.key_delta / n)
    wrong = plan.per_key_total + (plan.threshold - plan.per_key_total) // 2
    monkeypatch.setattr(SelectionPlan, "threshold", property(lambda self: wrong))
    bad = _open_run(events, b"selection-sim-2".ljust(32, b"."), weight_column="w", max_weight=2)
    bad_rate = bad.frame["key"].nunique() / n
    assert bad_rate > plan.key_delta + 5 * math.sqrt(plan.key_delta / n)


# ----------------------------------------------------------------------------------
# The release
# ----------------------------------------------------------------------------------
def _mixed_events() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    big = pd.DataFrame({"t": rng.integers(1, 9, 600), "key": "big"})
    rare = pd.DataFrame({"t": [2], "key": ["rare"]})
    late = pd.DataFrame({"t": [20], "key": ["outside"]})  # outside steps 1..8: no candidate
    return pd.concat([big, rare, late], ignore_index=True)


def test_large_key_is_selected_and_released_from_its_selection_step() -> None:
    events = _mixed_events()
    secret = b"selection-release".ljust(32, b".")
    tree = KeySelection(epsilon=1.0, delta=1e-6, selector=Selector.TREE)
    result = _open_run(events, secret, horizon=8, selection=tree)
    frame = result.frame
    assert set(frame["key"]) == {"big"}  # "rare" (one event) and "outside" never appear
    assert result.report.out_of_range == 1
    assert result.selection.candidates == 2 and result.selection.selected == 1
    # the selection step recomputed from the selection counter's PRF noise
    plan = result.selection.plan
    key = sub_key(noise_key(secret, result.config), b"dpcount/keyed/key-selection")
    job, _ = make_job(
        times=events["t"],
        keys=None,
        key_values=events["key"],
        columns=_columns(),
        step=1,
        epsilon=1.0,
        delta=None,
        noise="discrete-laplace",
        calibration=None,
        max_weight=1,
        max_keys=None,
        start=1,
        horizon=8,
        mechanism="tree",
        selection=tree,
    )
    contributions, _ = job.finish([job.prepare(events)[0]])
    big = job.universe.keys.index("big")
    noisy = plan.mechanism.release(key, contributions, big, big + 1)[:, 0]
    sigma = int(np.argmax(noisy >= plan.threshold)) + 1
    assert (noisy >= plan.threshold).any()
    assert frame["step"].tolist() == list(range(sigma, 9))
    # its counts are the counting mechanism's: running count + noise, std exact
    assert np.array_equal(frame["std"].to_numpy(), result.mechanism.std()[sigma - 1 :])


def test_rerun_is_bit_identical_whatever_the_row_order() -> None:
    events = _mixed_events()
    secret = b"selection-rerun".ljust(32, b".")
    kw: dict[str, Any] = dict(horizon=8, selection=KeySelection(epsilon=1.0, delta=1e-6))
    first = _open_run(events, secret, **kw).frame
    again = _open_run(events.sample(frac=1.0, random_state=1), secret, chunk_keys=1, **kw).frame
    assert first.equals(again) and len(first) > 0


def test_units_over_the_run_with_selection() -> None:
    """A unit's many keys are cut to max_keys over the run (counted) before selection."""
    rng = np.random.default_rng(2)
    events = pd.DataFrame(
        {
            "t": [1] * 6 + rng.integers(1, 9, 2000).tolist(),
            "key": [f"spam{i}" for i in range(6)] + ["big"] * 2000,
            "user": ["u"] * 6 + [f"v{i}" for i in range(2000)],
        }
    )
    result = _open_run(
        events,
        b"selection-units".ljust(32, b"."),
        horizon=8,
        unit_column="user",
        unit_scope="run",
        max_keys=2,
        max_steps=1,
        selection=KeySelection(epsilon=1.0, delta=1e-6),
    )
    assert result.report.unit_dropped_keys == 4  # u keeps 2 of its 6 keys
    assert result.selection.candidates == 3
    assert set(result.frame["key"]) == {"big"}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(selection=KeySelection(epsilon=1.0, delta=1e-6), keys=["a"]), "keys=None"),
        (dict(selection=None), "selection=KeySelection"),
        (dict(noise="laplace"), "discrete counting noise"),
        (dict(unit_column="user", max_keys=1), "unit_scope='run'"),
        (dict(on_chunk=lambda lo, v: None), "on_chunk"),
        (dict(output="dir_without_suffix"), "directory of parts"),
        (dict(unit_column="user", max_keys=1, max_steps=2), "needs unit_scope='run'"),
        (dict(unit_scope="run"), "needs a unit column"),
        (dict(unit_scope="runs"), "unit_scope must be"),
    ],
)
def test_bad_parameters_name_the_parameter(change: dict[str, Any], match: str) -> None:
    events = pd.DataFrame({"t": [1, 2], "key": ["a", "b"], "user": ["u", "v"]})
    with pytest.raises(ValueError, match=match):
        _open_run(events, b"selection-bad".ljust(32, b"."), **change)


@pytest.mark.parametrize(
    ("epsilon", "delta", "match"),
    [
        (0.0, 1e-6, "selection epsilon"),
        (1.0, 1.5, "selection delta"),
        (1.0, 0.0, "selection delta"),
    ],
)
def test_bad_selection_budget(epsilon: float, delta: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        KeySelection(epsilon=epsilon, delta=delta)


# ----------------------------------------------------------------------------------
# Across runs (state=): the key table, selection and unit ledger persist
# ----------------------------------------------------------------------------------
WINDOWS = ((1, 3), (4, 6), (7, 8))


def _split_runs(events: pd.DataFrame, work: Path, **kw: Any) -> tuple[list[Any], pd.DataFrame, Any]:
    """The events released in three runs (WINDOWS) continuing a state; the results,
    their rows together, and the oracle's testing secret (the same secret bytes)."""
    results = []
    for lo, hi in WINDOWS:
        part = events[(events["t"] >= lo) & (events["t"] <= hi)]
        results.append(
            _open_run(part, None, secret=str(work / "run.key"), state=work / "s", until=hi, **kw)
        )
    rows = pd.concat([r.frame for r in results], ignore_index=True)
    body = json.loads((work / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    return results, rows.sort_values(["key", "step"]).reset_index(drop=True), twin


def _user_log(seed: int, n: int, keys: list[str], p: Any, users: int) -> pd.DataFrame:
    """``n`` events at steps 1..8 of keys drawn with probabilities ``p`` by ``users``."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "t": rng.integers(1, 9, n),
            "key": rng.choice(keys, n, p=p),
            "user": rng.integers(0, users, n),
        }
    )


def _run_level(epsilon: float, delta: float = 1e-6, **bound: Any) -> dict[str, Any]:
    """An open key set over 8 steps with run-level unit bounds, ε for each part (δ the
    selection's)."""
    return dict(
        horizon=8,
        epsilon=epsilon,
        selection=KeySelection(epsilon=epsilon, delta=delta),
        unit_column="user",
        unit_scope="run",
        **bound,
    )


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["key", "step"]).reset_index(drop=True)


def test_split_runs_without_noise_release_the_brute_force_rows(tmp_path: Path) -> None:
    split_runs_release_the_brute_force_rows(tmp_path)


def split_runs_release_the_brute_force_rows(tmp_path: Path, **engine: Any) -> None:
    """Zero noise (ε = 1000, below): three runs with state= release exactly the rows of
    the rule, computed by brute force on the bounded events — a unit's first max_keys
    keys and greedy steps over all runs (ledger), a key from the first step its running
    count reaches τ = C + 1 (key table and selection steps), its exact running count
    — and one run equals them. ``engine``: keyed_counts' engine options (default: the
    embedded engine)."""
    keys = ["a", "b", "c", "d", "e", "f"]
    events = _user_log(11, 400, keys, [0.5, 0.3, 0.1, 0.05, 0.03, 0.02], 60)
    # The runs draw from a fresh secret file, so "zero noise" is a probability. At ε = 200
    # (δ 1e-6) it was not small: the tree's scale was 0.07 (a node ≠ 0 w.p. 1.2e-6, ~40
    # nodes released) and ρ's 0.067 (≠ 0 w.p. 6e-7 a key): the rows missed the rule
    # w.p. 5.0e-5 a run. At ε = 1000 and δ = 1e-12 (τ = 3 still): tree scale 0.014 (a
    # node ≠ 0 w.p. 1.9e-31), ρ's 0.033; a selection step differs from the rule's w.p.
    # 3.3e-13 (at most 4.7e-13 over 300 unit-rank keys; release_profile, exact up to its
    # truncation of 1e-12 a key): below 1e-11 in all.
    kw = _run_level(1000.0, 1e-12, max_keys=2, max_steps=2, min_separation=2, **engine)
    results, got, twin = _split_runs(events, tmp_path, **kw)
    plan = results[-1].selection.plan
    assert plan.per_key_total == 2 < plan.threshold
    hash_key = hmac.new(twin.secret, b"unit-rank", hashlib.sha256).hexdigest()[:16]
    rows = events.rename(columns={"user": "unit", "t": "step"}).assign(weight=1.0)
    expect = naive_bound(rows, 2, 2, 2, 1, hash_key)
    running: dict[str, np.ndarray] = {}
    for (key, step), value in expect.items():
        running.setdefault(key, np.zeros(8))[step - 1] += value
    rows = []
    for key, counts in sorted(running.items()):
        total = np.cumsum(counts)
        for s in np.flatnonzero(total >= plan.threshold)[:1]:
            rows += [(key, t + 1, total[t]) for t in range(s, 8)]
    assert len(rows) and len(rows) < 6 * 8  # some keys, not all, are released
    want = pd.DataFrame(rows, columns=["key", "step", "private_count"])
    pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False)
    std = results[-1].mechanism.std()
    assert np.array_equal(got["std"].to_numpy(), std[got["step"].to_numpy() - 1])
    one = _open_run(events, None, secret=twin, **kw).frame
    pd.testing.assert_frame_equal(_sorted(one), got, check_dtype=False, check_categorical=False)


def test_split_runs_with_noise_equal_one_run_bit_for_bit(tmp_path: Path) -> None:
    """With noise: the rows of three runs with state= (selection, run-level bounds) equal
    one run's, bit for bit; the reports add up to one run's."""
    keys = [f"k{i}" for i in range(30)]
    events = _user_log(12, 6000, keys, np.r_[np.full(5, 0.18), np.full(25, 0.004)], 2500)
    kw = _run_level(2.0, max_keys=1, max_steps=2)
    results, got, twin = _split_runs(events, tmp_path, **kw)
    one = _open_run(events, None, secret=twin, **kw)
    assert 0 < one.selection.selected < one.selection.candidates
    pd.testing.assert_frame_equal(
        _sorted(one.frame), got, check_dtype=False, check_categorical=False
    )
    assert sum(r.report.unit_dropped_keys for r in results) == one.report.unit_dropped_keys
    assert sum(r.report.unit_dropped_steps for r in results) == one.report.unit_dropped_steps
    assert results[-1].selection.selected == one.selection.selected


def test_resumed_open_runs_draw_no_prf_row_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counting and the selection noise both resume from the stored noise state:
    with every key already counted in the first run, later runs draw no PRF row of
    either stream that an earlier run drew (run 2, inside a block of 8 steps, none at
    all), and the rows of all runs are those of one run."""
    import dpcount.keyed.engine as engine
    from dpcount.keyed.prf import PRFWords

    monkeypatch.setattr(engine, "STEP_BLOCK", 8)
    draws: list[tuple[bytes, int, int]] = []
    original = PRFWords.block

    def block(self: PRFWords, row: int, shape: tuple[int, ...]) -> Any:
        rows = int(np.prod(shape[:-1]))
        draws.extend((self.prf.aes_key, self.key_lo, row + i) for i in range(rows))
        return original(self, row, shape)

    monkeypatch.setattr(PRFWords, "block", block)
    rng = np.random.default_rng(13)
    events = pd.DataFrame({"t": rng.integers(1, 25, 3000), "key": rng.choice(list("abc"), 3000)})
    events.loc[len(events)] = [1, "d"]  # every key counted in the first run
    tree = KeySelection(epsilon=1.0, delta=1e-6, selector=Selector.TREE)
    kw: dict[str, Any] = dict(horizon=24, selection=tree)
    runs, first = [], 1
    for last in (10, 11, 24):
        draws.clear()
        part = events[(events["t"] >= first) & (events["t"] <= last)]
        secret = str(tmp_path / "run.key")
        res = _open_run(part, None, secret=secret, state=tmp_path / "s", until=last, **kw)
        runs.append((res.frame, set(draws)))
        first = last + 1
    rows = [drawn for _, drawn in runs]
    assert rows[1] == set() and len({stream for stream, _, _ in rows[2]}) == 2
    assert not rows[0] & rows[2]
    body = json.loads((tmp_path / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    draws.clear()
    one = _open_run(events, None, secret=twin, **kw).frame
    assert set(draws) == rows[0] | rows[2]
    got = pd.concat([frame for frame, _ in runs], ignore_index=True)
    pd.testing.assert_frame_equal(_sorted(got), _sorted(one), check_categorical=False)


def test_a_units_keys_are_bounded_across_runs(tmp_path: Path) -> None:
    units_bounded_across_runs(tmp_path)


def units_bounded_across_runs(tmp_path: Path, **engine: Any) -> None:
    """max_keys counts a unit's keys over all runs: the keys u used in run 1 leave it
    none for run 2 (its events there are dropped and reported), and the state that
    records it is owner-only and authenticated (a changed byte is refused). ``engine``:
    keyed_counts' engine options (default: the embedded engine)."""
    first = pd.DataFrame({"t": [1, 1], "key": ["a", "b"], "user": ["u", "u"]})
    second = pd.DataFrame({"t": [2, 2, 2], "key": ["c", "a", "c"], "user": ["u", "u", "v"]})
    kw: dict[str, Any] = dict(
        horizon=4,
        selection=KeySelection(epsilon=1.0, delta=1e-6),
        unit_column="user",
        unit_scope="run",
        max_keys=2,
        max_steps=4,
        secret=str(tmp_path / "run.key"),
        state=tmp_path / "s",
        **engine,
    )
    _open_run(first, None, until=1, **kw)
    assert (tmp_path / "s").stat().st_mode & 0o077 == 0
    ran = _open_run(second, None, until=2, **kw)
    assert ran.report.unit_dropped_keys == 1  # u's "c"; u's "a" and v's "c" are kept
    assert ran.report.unit_dropped_weight == 1
    data = bytearray((tmp_path / "s").read_bytes())
    data[-3] ^= 1  # inside the unit ledger
    (tmp_path / "s").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="fails its authentication check"):
        _open_run(second.assign(t=3), None, until=3, **kw)


@pytest.mark.slow  # 1 s: the CLI over the library path tested above
def test_cli_open_keys(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from dpcount.cli import main

    events = _mixed_events()
    path = tmp_path / "events.csv"
    events.to_csv(path, index=False)
    out = tmp_path / "out.csv"
    args = [
        "keyed", str(path), "--time-column", "t", "--key-column", "key", "--step", "1",
        "--start", "1", "--horizon", "8", "--epsilon", "1", "--mechanism", "tree",
        "--secret", str(tmp_path / "run.key"), "--output", str(out),
    ]  # fmt: skip
    assert main(args) == 2
    assert "needs a δ for key selection: give --delta" in capsys.readouterr().err
    # a fresh secret file: "rare" (count 1 at 7 checks) is released w.p. 9.0e-7 at
    # --select-delta 1e-6 (τ = 37), 8.8e-11 at 1e-10 (τ = 56); "big" (78 at step 1)
    # is missed w.p. < 1e-12 (release_profile, exact up to its 1e-12 truncation)
    assert main([*args, "--select-epsilon", "1", "--select-delta", "1e-10"]) == 0
    assert "key selection: 2 candidate keys in the data, 1 released" in capsys.readouterr().err
    assert set(pd.read_csv(out)["key"]) == {"big"}
    (tmp_path / "k").write_text("big\n")
    assert main([*args, "--keys", str(tmp_path / "k"), "--select-epsilon", "1"]) == 2
    assert "--select-epsilon selects keys" in capsys.readouterr().err
    assert main([*args, "--select-epsilon", "1", "--select-delta", "1e-6", "--max-steps", "2"]) == 2
    assert "needs --unit-scope run" in capsys.readouterr().err


def test_exact_crossing_is_independent_of_enumeration_width() -> None:
    plan = plan_for(4, 1.5, 0.15, 2)
    assert incidence(plan) and plan.scale == Fraction(4)
    a = exact_crossing(plan, 2, plan.threshold, half_width=150)
    b = exact_crossing(plan, 2, plan.threshold, half_width=200)
    assert a == pytest.approx(b, rel=1e-12)
