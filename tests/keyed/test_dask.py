"""Dask engine: bit-for-bit equal to the embedded engine, on a real 2-process LocalCluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from dpcount.keyed.selection import KeySelection  # noqa: E402
from dpcount.keyed.state import RunState  # noqa: E402
from tests.keyed._budget import keyed_counts  # noqa: E402
from tests.keyed._runners import (  # noqa: E402
    KEYS,
    SECRET,
    check_equals_embedded,
    check_float_mechanism,
    check_key_selection,
    check_parts_resume,
    check_resumed_runs,
    keys_file,
    same_runs_on_two_engines,
)
from tests.keyed._runners import small_events as _events  # noqa: E402
from tests.keyed._runners import small_kw as _kw  # noqa: E402
from tests.keyed._runners import twin as _twin  # noqa: E402
from tests.keyed.test_incremental import open_keys_in_incremental_runs  # noqa: E402
from tests.keyed.test_order import check_order_reveals_nothing  # noqa: E402
from tests.keyed.test_selection import (  # noqa: E402
    open_kw,
    split_runs_release_the_brute_force_rows,
    units_bounded_across_runs,
)


def _dask_options(client: Any) -> dict[str, Any]:
    """The Dask runs' options of :func:`same_runs_on_two_engines`."""
    return dict(engine="dask", scheduler=client, partitions=3, chunk_keys=7)


#: a real 2-process LocalCluster per module: slow (CI runs the slow set)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize(
    ("partitions", "units"), [(1, False), (2, False), (7, False), (64, False), (7, True)]
)
def test_dask_equals_embedded_for_any_partitioning(
    client: Any, partitions: int, units: bool
) -> None:
    extra = {"unit_column": "unit", "max_keys": 2} if units else {}
    report = check_equals_embedded(
        dict(engine="dask", scheduler=client, partitions=partitions), **extra
    )
    assert report.unknown_key > 0
    if units:
        assert report.unit_dropped_keys > 0


def test_dask_keeps_a_frames_object_keys_as_they_are(client: Any) -> None:
    """Keys of mixed types in an object column (1 and "a"): Dask's default turned the
    column into strings, so the universe's 1 missed the events' "1" (counted as unknown
    keys). Both engines match keys by their canonical text (a "1" would match 1 too),
    and an open key set over a column that is not all integers holds its keys as text
    (issue #30: one form, whatever values occur), on either engine."""
    keys = pd.Series([1, 1, "a", 2, 1, "a"] * 20, dtype=object)
    events = pd.DataFrame({"t": np.arange(120) % 50, "key": keys})
    kw = _kw(keys=[1, 2, "a"], weight_column=None)
    embedded = keyed_counts(events, **kw)
    dasked = keyed_counts(events, engine="dask", scheduler=client, partitions=2, **kw)
    assert embedded.report.unknown_key == 0 and dasked.report == embedded.report
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)
    kw = _kw(keys=None, weight_column=None, selection=KeySelection(epsilon=50.0, delta=0.3))
    embedded = keyed_counts(events, **kw)
    dasked = keyed_counts(events, engine="dask", scheduler=client, partitions=2, **kw)
    assert dasked.selection == embedded.selection
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)
    assert {"1", "a"} <= set(embedded.frame["key"])  # a mixed column's keys: text


@pytest.mark.parametrize("partitions", [1, 5])
def test_dask_run_level_unit_bounds_equal_embedded(client: Any, partitions: int) -> None:
    """unit_scope='run' (max_keys over the run, max_steps per key min_separation apart):
    the Dask engine bounds each unit over all its keys in one shard, as the embedded
    engine does over the whole frame: the same rows, bits and report."""
    extra = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2, min_separation=3)
    report = check_equals_embedded(
        dict(engine="dask", scheduler=client, partitions=partitions), **extra
    )
    assert report.unit_dropped_keys > 0 and report.unit_dropped_steps > 0


@pytest.mark.parametrize("units", [True, False])
def test_dask_key_selection_equals_embedded(client: Any, tmp_path: Path, units: bool) -> None:
    """An open key set (keys=None): the candidates read off every partition, the key
    table placed by first counted step, then name, as the embedded engine places it
    (event level: the shards regrouped by position), each shard's keys selected where
    the shard lies; the released rows and the outcome equal the embedded engine's (a
    frame, and the bytes of a Parquet file)."""
    check_key_selection(tmp_path, dict(engine="dask", scheduler=client, partitions=3), units)


@pytest.mark.parametrize(
    ("partitions", "units"),
    [(1, None), (3, None), (3, "step"), (2, "run")],
)
def test_dask_keys_file_joined_on_the_workers_equals_embedded(
    client: Any, tmp_path: Path, partitions: int, units: str | None
) -> None:
    """A keys file on Dask is never read whole: the workers join the events' keys to
    its blocks (dpcount.keyed.keys) and name the released keys from them. The rows,
    bits and report of the embedded run, which reads the list; keys of the file absent
    from the events (and events' keys absent from the file) included."""
    bounds: dict[str, Any] = {
        None: {},
        "step": {"unit_column": "unit", "max_keys": 2},
        "run": dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2),
    }[units]
    path = keys_file(tmp_path, ("7", "007", "zz"))
    report = check_equals_embedded(
        dict(engine="dask", scheduler=client, partitions=partitions), keys=path, **bounds
    )
    assert report.unknown_key > 0
    if units is not None:
        assert report.unit_dropped_keys > 0


def test_dask_run_level_bounds_rank_a_keys_files_pairs_by_span(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run-level unit bounds over a keys file: the (unit, key) pairs' tie-breaks are
    ranked by spans of the file's keys (7 keys a span here: six spans, each task reading
    only its keys' names), the bounding task gets the ranks and never the names; the
    rows, bits and report of the embedded run (which ranks from the list)."""
    from dpcount.keyed.runners import dask as dask_runner

    monkeypatch.setattr(dask_runner, "JOIN_KEYS", 7)
    calls: list[int] = []
    real = dask_runner.DaskScheduler._ranks

    def ranks(self: Any, job: Any, pieces: list[Any]) -> list[Any]:
        got = real(self, job, pieces)
        calls.append(len(got))
        return got

    monkeypatch.setattr(dask_runner.DaskScheduler, "_ranks", ranks)
    path = keys_file(tmp_path, ("7", "007", "zz"))
    bounds = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2)
    report = check_equals_embedded(
        dict(engine="dask", scheduler=client, partitions=3), keys=path, **bounds
    )
    assert calls == [-(-43 // 7)] and report.unit_dropped_keys > 0


def test_dask_keys_file_writes_resumes_and_continues_the_embedded_bytes(
    client: Any, tmp_path: Path
) -> None:
    """With a keys file: the workers write the embedded run's parts (key names read
    from the file's blocks), a stopped run resumes them, and runs continuing a state
    (whose secret binds the streamed digest of the file) release one embedded run's
    bits."""
    path = keys_file(tmp_path)
    dask = dict(engine="dask", scheduler=client, partitions=3)
    (tmp_path / "a").mkdir()
    check_parts_resume(tmp_path / "a", dask, {**dask, "partitions": 5}, keys=path)
    (tmp_path / "b").mkdir()
    check_resumed_runs(tmp_path / "b", {**dask, "chunk_keys": 7}, (3, 10), _events(), keys=path)


def test_dask_keys_file_with_a_key_twice_is_refused_as_embedded(
    client: Any, tmp_path: Path
) -> None:
    path = keys_file(tmp_path, ("k3",))
    for runner in ({}, dict(engine="dask", scheduler=client, partitions=2)):
        with pytest.raises(ValueError, match="keys must be unique, 'k3' and 'k3' appears more"):
            keyed_counts(_events(), **runner, **_kw(keys=path))


def test_dask_reads_files_and_writes_the_same_bytes(client: Any, tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    _events().to_parquet(path)
    a = keyed_counts(path, output=tmp_path / "a.parquet", **_kw())
    b = keyed_counts(
        path,
        output=tmp_path / "b.parquet",
        engine="dask",
        scheduler=client,
        partitions=3,
        **_kw(),
    )
    assert a.output is not None and b.output is not None
    assert a.output.read_bytes() == b.output.read_bytes()


@pytest.mark.parametrize("partitions", [None, 3])
def test_dask_reads_parquet_row_groups_as_partitions(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partitions: int | None
) -> None:
    """A Parquet file is read in blocks of whole row groups (here one per partition), not
    as one partition of the whole file: the same release as the embedded engine's."""
    import dask.dataframe as dd

    from dpcount.keyed.runners import dask as engine

    path = tmp_path / "events.parquet"
    _events().to_parquet(path, row_group_size=500)
    monkeypatch.setattr(engine, "PARQUET_BLOCK", 1)
    kw = _kw()
    ddf = engine._dask_frame(path, engine.EventColumns("t", "key", "w"), None)
    assert ddf.npartitions == 8 == len(dd.read_parquet(path, split_row_groups=True).divisions) - 1
    a = keyed_counts(path, **kw)
    b = keyed_counts(path, engine="dask", scheduler=client, partitions=partitions, **kw)
    assert a.frame is not None and b.frame is not None
    assert b.frame.equals(a.frame) and b.report == a.report


@pytest.mark.slow
def test_worker_killed_midway_gives_the_same_output(client: Any) -> None:
    """A worker process is SIGKILLed after the first chunk arrives; lost tasks are rerun."""
    keys = list(range(3000))
    rng = np.random.default_rng(5)
    events = pd.DataFrame({"t": rng.integers(0, 400, 20_000), "key": rng.integers(0, 3000, 20_000)})
    kw: dict[str, Any] = dict(
        keys=keys,
        time_column="t",
        key_column="key",
        step=1,
        start=0,
        horizon=400,
        epsilon=1.0,
        secret=SECRET,
        chunk_keys=100,
    )
    embedded = keyed_counts(events, **kw)
    pids = client.run(os.getpid)
    killed: list[int] = []

    def kill_one(done: int, total: int) -> None:
        if not killed:
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    dasked = keyed_counts(
        events, engine="dask", scheduler=client, partitions=4, progress=kill_one, **kw
    )
    assert killed
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()) != set(pids.values())  # a worker was replaced
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)


def test_dask_workers_write_the_same_parts_and_resume(client: Any, tmp_path: Path) -> None:
    check_parts_resume(
        tmp_path,
        dict(engine="dask", scheduler=client, partitions=3),
        dict(engine="dask", scheduler=client, partitions=5),
    )


def test_cli_dask_engine_writes_the_embedded_bytes(tmp_path: Path) -> None:
    """`dpcount keyed ... --engine dask --workers 2` on its own LocalCluster."""
    from dpcount.cli import main

    events = _events().assign(t=lambda f: f["t"].astype(str))
    events.to_csv(tmp_path / "events.csv", index=False)
    (tmp_path / "keys.txt").write_text("\n".join(KEYS) + "\n")
    base = [
        "keyed", str(tmp_path / "events.csv"), "--time-column", "t", "--key-column", "key",
        "--keys", str(tmp_path / "keys.txt"), "--step", "5", "--start", "0", "--horizon", "10",
        "--epsilon", "1", "--secret", str(tmp_path / "run.key"),
    ]  # fmt: skip
    assert main([*base, "--output", str(tmp_path / "a.parquet")]) == 0
    argv = [*base, "--output", str(tmp_path / "b.parquet"), "--engine", "dask", "--workers", "2"]
    assert main(argv) == 0
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


@pytest.mark.parametrize("partitions", [1, 2, 7])
def test_dask_resumed_across_time_equals_one_embedded_run(
    client: Any, tmp_path: Path, partitions: int
) -> None:
    """Three Dask runs (steps 1..3, 4..9 — a node boundary of k = 3 —, 10) from a stored
    state: the same bits as one embedded run over steps 1..10."""
    dask = dict(engine="dask", scheduler=client, partitions=partitions, chunk_keys=7)
    check_resumed_runs(tmp_path, dask, (3, 9, 10), _events())


@pytest.mark.parametrize(
    ("mechanism", "partitions"),
    [("blt", 1), ("blt", 2), ("blt", 7), ("sqrt", 2), ("toeplitz", 2), ("dense-optimum", 2)],
)
def test_dask_float_mechanisms_equal_embedded_and_resume(
    client: Any, tmp_path: Path, mechanism: str, partitions: int
) -> None:
    """Floating-point Gaussian noise through BLT and the factorizations (single-threaded
    Dask workers, BLAS products): the same bits on Dask for any partitioning and key
    chunking, in one run and resumed from a state after step 4."""
    check_float_mechanism(
        tmp_path, dict(engine="dask", scheduler=client, partitions=partitions), mechanism
    )


# ----------------------------------------------------------------------------------
# state= with key selection and run-level unit bounds: the embedded engine's runs
# ----------------------------------------------------------------------------------
def test_dask_allowed_lateness_releases_the_embedded_steps(client: Any, tmp_path: Path) -> None:
    """allowed_lateness= on Dask: the watermark is the latest event time over every
    partition, so both engines release the same steps, rows and state."""
    events = _events()
    kw = {k: v for k, v in _kw().items() if k != "secret"}
    # step s covers t in [5(s-1), 5s); the second run gets step 6's events again
    steps = [(1, 6), (6, 10)]
    runs = same_runs_on_two_engines(
        _dask_options(client),
        tmp_path,
        events,
        steps,
        lambda e: e["t"] // 5 + 1,
        allowed_lateness=3,
        **kw,
    )
    # latest t 29 (run 1) and 49: step s is complete when 5s + 3 <= latest
    assert [r.released for r in runs] == [(1, 5), (6, 9)]
    assert all(any("from the latest event time" in x for x in r.summary()) for r in runs)


def _stored_selection(path: Path) -> dict[Any, int]:
    """Each key's selection step recorded in an open key set's state file (read as
    :meth:`RunState.peek_keys` reads the key table, unauthenticated: a test oracle)."""
    line, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(line)
    n, rows = header["n_keys"], header["noise_rows"]
    at = 8 * n * (1 + rows) + header["open"]["keys_bytes"]
    selected = np.frombuffer(payload[at : at + 8 * n], dtype="<i8")
    return dict(zip(RunState.peek_keys(path), selected.tolist(), strict=True))


@pytest.mark.parametrize(
    ("selector", "tau", "per_step"), [("sparse-vector", 51, 3), ("tree", 110, 10)]
)
@pytest.mark.parametrize("units", [False, True])
def test_dask_state_with_key_selection_equals_embedded_runs(
    client: Any, tmp_path: Path, units: bool, selector: str, tau: int, per_step: int
) -> None:
    """An open key set over three runs with state= (keys new in each run, placed after
    the stored key table; the selection counter continued from its stored noise
    state, or the sparse vector's from the stored sums; with ``units`` a unit's keys
    bounded over all runs by the stored ledger):
    the Dask engine's rows, reports, selection outcomes and state files equal the
    embedded engine's, and their rows equal one uninterrupted run's."""
    from dpcount.keyed.selection import KeySelection

    rng = np.random.default_rng(21)
    n = 1500
    heavy = rng.random(n) < 0.7
    events = pd.DataFrame(
        {  # heavy keys appear in every run; light keys first appear in later runs too
            "t": rng.integers(1, 9, n),
            "key": np.where(heavy, rng.integers(0, 5, n), rng.integers(5, 60, n)).astype(str),
            "unit": rng.integers(0, 1500, n),
        }
    )
    # a key counted from step 1 that reaches the threshold τ only in a later run: its
    # selection count continues from the stored sums (and the tree's noise state)
    # (one event a step in the first run, then 8·per_step a step, far above τ by step 8:
    # the test must not depend on the fresh secret's draws. At δ = 1e-3 (τ = 21) the
    # sparse vector selected the counts 1, 2, 3 of the first run in a clean-clone CI
    # run: their exact probability there is 7.6e-4 (release_profile); at δ = 1e-9 it is
    # 6.4e-10 and missing the final count of 123 against τ = 51 is 2.4e-13; the tree's
    # crossing at counts <= 3 is <= 2.1e-10 by union_tail, against τ = 110)
    steps = np.concatenate([np.arange(1, 4), np.repeat(np.arange(4, 9), 8 * per_step)])
    slow = pd.DataFrame({"t": steps, "key": "slow", "unit": -1 - np.arange(len(steps))})
    events = pd.concat([events, slow], ignore_index=True)
    selection = KeySelection(epsilon=1.0, delta=1e-9, selector=selector)
    kw = open_kw(horizon=8, selection=selection)
    if units:
        kw.update(unit_column="unit", unit_scope="run", max_keys=1, max_steps=1)
    windows = ((1, 3), (4, 6), (7, 8))
    runs = same_runs_on_two_engines(
        _dask_options(client), tmp_path, events, windows, lambda f: f["t"], **kw
    )
    table = RunState.peek_keys(tmp_path / "dask" / "run.state")
    assert runs[0].selection.candidates < runs[-1].selection.candidates  # the table grew
    assert 0 < runs[-1].selection.selected < runs[-1].selection.candidates == len(table)
    if units:
        assert sum(r.report.unit_dropped_keys for r in runs[1:]) > 0  # bounded across runs
    one = keyed_counts(events, secret=_twin(tmp_path / "dask"), **kw)
    assert one.frame is not None and one.selection == runs[-1].selection
    got = pd.concat([r.frame for r in runs], ignore_index=True)
    assert runs[0].selection.plan.threshold == tau
    assert got.loc[got["key"] == "slow", "step"].min() > windows[0][1]
    # the stored selection steps (T + 1: not selected) are one run's first released steps
    first = one.frame.groupby("key", observed=True)["step"].min()
    assert _stored_selection(tmp_path / "dask" / "run.state") == {
        key: int(first.get(key, 9)) for key in table
    }
    want = one.frame.sort_values(["key", "step"]).reset_index(drop=True)
    got = got.sort_values(["key", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_categorical=False)


def test_dask_state_with_run_level_bounds_equals_embedded_runs(client: Any, tmp_path: Path) -> None:
    """A public key universe with unit_scope='run' over three runs with state= (steps
    1..3, 4..9, 10): each unit's keys and steps bounded over all runs by the stored
    ledger, on Dask as on the embedded engine (rows, reports, state files), and the
    rows equal one run's."""
    extra = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2, min_separation=3)
    kw = {k: v for k, v in _kw(**extra).items() if k != "secret"}
    windows = ((1, 3), (4, 9), (10, 10))
    runs = same_runs_on_two_engines(
        _dask_options(client), tmp_path, _events(), windows, lambda f: f["t"] // 5 + 1, **kw
    )
    assert sum(r.report.unit_dropped_keys for r in runs[1:]) > 0
    assert sum(r.report.unit_dropped_steps for r in runs[1:]) > 0
    one = keyed_counts(_events(), chunk_keys=16, **_kw(**extra, secret=_twin(tmp_path / "dask")))
    assert one.frame is not None
    got = pd.concat([r.frame for r in runs], ignore_index=True)
    order = np.lexsort((got["step"].to_numpy(), got["key"].map(KEYS.index).to_numpy()))
    assert got.iloc[order].reset_index(drop=True).equals(one.frame)
    assert sum(r.report.unit_dropped_steps for r in runs) == one.report.unit_dropped_steps


def test_dask_state_bounds_a_units_keys_across_runs(client: Any, tmp_path: Path) -> None:
    """The embedded engine's test of the stored unit ledger, on Dask."""
    units_bounded_across_runs(tmp_path, engine="dask", scheduler=client)


def test_dask_state_split_runs_release_the_brute_force_rows(client: Any, tmp_path: Path) -> None:
    """The embedded engine's zero-noise brute-force test of three runs with state=
    (selection and run-level bounds), on Dask (the one-run oracle on Dask too)."""
    split_runs_release_the_brute_force_rows(tmp_path, engine="dask", scheduler=client)


def test_dask_incremental_runs_with_open_keys(client: Any, tmp_path: Path) -> None:
    """The embedded engine's test of incremental runs (keys=None, selection, run-level
    bounds over two arrivals equal one run), with the runs on Dask."""
    open_keys_in_incremental_runs(tmp_path, engine="dask", scheduler=client)


def test_cli_dask_state_with_key_selection(client: Any, tmp_path: Path) -> None:
    """`dpcount keyed --engine dask --state ... --select-epsilon ...` (on the shared
    cluster, --scheduler) in two runs writes the bytes the embedded engine writes."""
    from dpcount.cli import main

    events = _events().assign(key=lambda f: f["key"].where(f["unit"] % 3 > 0, "heavy"))
    step = events["t"] // 5 + 1
    for name, piece in (("a", events[step <= 4]), ("b", events[step > 4])):
        piece.to_csv(tmp_path / f"{name}.csv", index=False)
    for engine in ("dask", "embedded"):
        work = tmp_path / engine
        work.mkdir()
        if engine == "embedded":  # the secret (its mark after run a: then a is a retry)
            for name in ("run.key", "run.key.released"):
                shutil.copy2(tmp_path / "a-mark" / name, work / name)
        flags = ["--engine", "dask", "--scheduler", client.scheduler.address]
        for name, until in (("a", 4), ("b", 10)):
            if engine == "dask" and name == "b":
                shutil.copytree(work, tmp_path / "a-mark")
            argv = [
                "keyed", str(tmp_path / f"{name}.csv"), "--time-column", "t", "--key-column",
                "key", "--step", "5", "--start", "0", "--horizon", "10", "--epsilon", "1",
                "--select-epsilon", "1", "--select-delta", "1e-3", "--mechanism", "tree",
                "--secret", str(work / "run.key"), "--state", str(work / "run.state"),
                "--until", str(until), "--output", str(work / f"{name}.csv"),
                *(flags if engine == "dask" else []),
            ]  # fmt: skip
            assert main(argv) == 0
    for name in ("a.csv", "b.csv", "run.state"):
        got, want = (tmp_path / "dask" / name), (tmp_path / "embedded" / name)
        assert got.read_bytes() == want.read_bytes()
    assert "heavy" in pd.read_csv(tmp_path / "dask" / "b.csv")["key"].to_numpy()


def test_dask_row_order_does_not_reveal_events_before_a_keys_selection(
    client: Any, tmp_path: Path
) -> None:
    """The embedded engine's row-order test (issue #30, item 1) on Dask: two logs that
    differ only before a key's selection give the same bytes in every output form."""
    check_order_reveals_nothing(tmp_path, engine="dask", scheduler=client, partitions=2)
