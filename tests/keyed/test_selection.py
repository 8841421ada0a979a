"""Private key selection (open key sets): the δ claim exactly and by simulation, the
selected rows, determinism and the refusals."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.job import make_job
from dpcount.keyed.secret import RunSecret, unsafe_testing_secret
from dpcount.keyed.selection import (
    KeySelection,
    SelectionPlan,
    noise_tail,
    selection_secret,
    union_tail,
)
from dpcount.privacy.rng import as_generator
from dpcount.privacy.source import SourcedSampler
from tests.keyed._budget import keyed_counts

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


class _Tags:
    """A NoiseSource handing out row r as 2^r: the noise of a step, read in binary,
    names the rows (tree nodes) it sums."""

    width = None

    def __init__(self) -> None:
        self.rows_drawn = 0

    def draw(self, sampler: Any, rows: int) -> np.ndarray:
        out = np.array([1 << (self.rows_drawn + i) for i in range(rows)], dtype=np.int64)
        self.rows_drawn += rows
        return out


def incidence(plan: SelectionPlan) -> list[list[int]]:
    """The nodes each step's selection noise sums (from the tree's own noise process)."""
    m = plan.mechanism.counting
    process = m.noise_process(SourcedSampler(m.sampler, _Tags()), as_generator(0), None)
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
        selection=KeySelection(epsilon=epsilon_s, delta=delta_s),
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


def _open_run(events: pd.DataFrame, secret: bytes, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        keys=None,
        selection=KeySelection(epsilon=1.5, delta=0.15),
        time_column="t",
        key_column="key",
        step=1,
        start=1,
        horizon=4,
        epsilon=1.0,
        mechanism="tree",
        secret=unsafe_testing_secret(secret),
    )
    base.update(kw)
    return keyed_counts(events, **base)


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
    result = _open_run(events, secret, horizon=8, selection=KeySelection(epsilon=1.0, delta=1e-6))
    frame = result.frame
    assert set(frame["key"]) == {"big"}  # "rare" (one event) and "outside" never appear
    assert result.report.out_of_range == 1
    assert result.selection.candidates == 2 and result.selection.selected == 1
    # the selection step recomputed from the selection counter's PRF noise
    plan = result.selection.plan
    prf_key = RunSecret.in_memory(secret, result.config).prf_key
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
        selection=KeySelection(epsilon=1.0, delta=1e-6),
    )
    contributions, _ = job.finish([job.prepare(events)[0]])
    big = job.universe.keys.index("big")
    noisy = plan.mechanism.release(selection_secret(prf_key), contributions, big, big + 1)[:, 0]
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


def test_selection_refuses_state(tmp_path: Any) -> None:
    events = pd.DataFrame({"t": [1], "key": ["a"]})
    with pytest.raises(ValueError, match="state="):
        keyed_counts(
            events,
            keys=None,
            selection=KeySelection(epsilon=1.0, delta=1e-6),
            time_column="t",
            key_column="key",
            step=1,
            start=1,
            horizon=4,
            epsilon=1.0,
            secret=str(tmp_path / "k"),
            state=tmp_path / "s.state",
            until=2,
        )


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
    assert "--select-epsilon and --select-delta" in capsys.readouterr().err
    assert main([*args, "--select-epsilon", "1", "--select-delta", "1e-6"]) == 0
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
