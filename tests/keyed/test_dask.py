"""Dask engine: bit-for-bit equal to the embedded engine, on a real 2-process LocalCluster."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from dpcount.keyed.secret import unsafe_testing_secret  # noqa: E402
from tests.keyed._budget import keyed_counts  # noqa: E402

SECRET_BYTES = b"d" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)
KEYS = [f"k{i}" for i in range(40)]


def _twin(tmp_path: Path) -> Any:
    """The secret file's bytes and run id as a testing secret: the same noise, without
    the file's mark (which refuses the oracle's second release of the same steps)."""
    body = json.loads((tmp_path / "run.key").read_text())
    return unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])


#: a real 2-process LocalCluster per module: slow (CI runs the slow set)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


def _events(n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "t": rng.integers(0, 50, n),
            "key": rng.choice([*KEYS, "nope"], n),
            "unit": rng.integers(0, 80, n),
            "w": rng.integers(0, 4, n),
        }
    )


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS,
        time_column="t",
        key_column="key",
        weight_column="w",
        step=5,
        start=0,
        horizon=10,
        epsilon=1.0,
        secret=SECRET,
        max_weight=2,
        mechanism="tree",
        k=3,
    )
    kw.update(extra)
    return kw


@pytest.mark.parametrize(
    ("partitions", "units"), [(1, False), (2, False), (7, False), (64, False), (7, True)]
)
def test_dask_equals_embedded_for_any_partitioning(
    client: Any, partitions: int, units: bool
) -> None:
    events = _events()
    extra = {"unit_column": "unit", "max_keys": 2} if units else {}
    embedded = keyed_counts(events, chunk_keys=16, **_kw(**extra))
    dasked = keyed_counts(
        events,
        engine="dask",
        scheduler=client,
        partitions=partitions,
        chunk_keys=7,
        **_kw(**extra),
    )
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)
    assert dasked.report == embedded.report
    assert embedded.report.unknown_key > 0
    if units:
        assert embedded.report.unit_dropped_keys > 0


@pytest.mark.parametrize("partitions", [1, 5])
def test_dask_run_level_unit_bounds_equal_embedded(client: Any, partitions: int) -> None:
    """unit_scope='run' (max_keys over the run, max_steps per key min_separation apart):
    the Dask engine bounds each unit over all its keys in one shard, as the embedded
    engine does over the whole frame: the same rows, bits and report."""
    events = _events()
    extra = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2, min_separation=3)
    embedded = keyed_counts(events, chunk_keys=16, **_kw(**extra))
    dasked = keyed_counts(
        events, engine="dask", scheduler=client, partitions=partitions, chunk_keys=7, **_kw(**extra)
    )
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)
    assert dasked.report == embedded.report
    assert embedded.report.unit_dropped_keys > 0 and embedded.report.unit_dropped_steps > 0


@pytest.mark.parametrize("units", [True, False])
def test_dask_key_selection_equals_embedded(client: Any, tmp_path: Path, units: bool) -> None:
    """An open key set (keys=None): the candidates read off every partition, the key
    table placed by first counted step, then name, as the embedded engine places it
    (event level: the shards regrouped by position), each shard's keys selected where
    the shard lies; the released rows and the outcome equal the embedded engine's (a
    frame, and the bytes of a Parquet file)."""
    from dpcount.keyed.selection import KeySelection

    rng = np.random.default_rng(3)
    n = 3000
    events = pd.DataFrame(
        {
            "t": rng.integers(0, 50, n),
            # a few heavy keys (selected) and many light ones (mostly not)
            "key": np.where(rng.random(n) < 0.6, rng.integers(0, 6, n), rng.integers(6, 400, n)),
            "unit": rng.integers(0, 1500, n),
        }
    )
    extra: dict[str, Any] = dict(
        keys=None, selection=KeySelection(epsilon=1.5, delta=0.15), weight_column=None, max_weight=1
    )
    if units:
        extra.update(unit_column="unit", unit_scope="run", max_keys=1)
    embedded = keyed_counts(events, chunk_keys=16, **_kw(**extra))
    dasked = keyed_counts(
        events, engine="dask", scheduler=client, partitions=3, chunk_keys=7, **_kw(**extra)
    )
    assert embedded.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(embedded.frame)
    assert dasked.selection == embedded.selection
    assert embedded.selection is not None
    assert 0 < embedded.selection.selected < embedded.selection.candidates
    a = keyed_counts(events, output=tmp_path / "a.parquet", chunk_keys=16, **_kw(**extra))
    b = keyed_counts(
        events,
        engine="dask",
        scheduler=client,
        partitions=2,
        output=tmp_path / "b.parquet",
        chunk_keys=7,
        **_kw(**extra),
    )
    assert a.output is not None and b.output is not None
    assert a.output.read_bytes() == b.output.read_bytes()


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

    from dpcount.keyed import dask as engine

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
    events = _events()
    kw = _kw(secret=tmp_path / "run.key", chunk_keys=6)
    keyed_counts(events, output=tmp_path / "embedded", **kw)

    class Stop(Exception):
        pass

    def stop(done: int, total: int) -> None:
        raise Stop

    with pytest.raises(Stop):  # the client stops after the first part
        keyed_counts(
            events,
            output=tmp_path / "dask",
            engine="dask",
            scheduler=client,
            partitions=3,
            progress=stop,
            **kw,
        )
    computed: list[int] = []
    keyed_counts(
        events,
        output=tmp_path / "dask",
        engine="dask",
        scheduler=client,
        partitions=5,
        progress=lambda done, total: computed.append(done),
        **kw,
    )
    assert len(computed) < len(range(0, len(KEYS), 6))  # only missing parts were run

    def files(p: Path) -> dict[str, bytes]:
        return {f.name: f.read_bytes() for f in sorted(p.iterdir())}

    assert files(tmp_path / "dask") == files(tmp_path / "embedded")


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
    events = _events()
    frames, first = [], 1
    for last in (3, 9, 10):
        t = events["t"] // 5 + 1  # step of each event
        piece = events[(t >= first) & (t <= last)]
        res = keyed_counts(
            piece,
            engine="dask",
            scheduler=client,
            partitions=partitions,
            chunk_keys=7,
            state=tmp_path / "run.state",
            until=last,
            **_kw(secret=tmp_path / "run.key"),
        )
        assert res.frame is not None
        frames.append(res.frame)
        first = last + 1
    one = keyed_counts(events, chunk_keys=16, **_kw(secret=_twin(tmp_path)))
    assert one.frame is not None
    got = pd.concat(frames, ignore_index=True)
    order = np.lexsort((got["step"].to_numpy(), got["key"].map(KEYS.index).to_numpy()))
    assert got.iloc[order].reset_index(drop=True).equals(one.frame)


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
    events = _events().assign(w=lambda f: f["w"].astype(np.float64) * 0.75)
    blt = {"noise": "gaussian", "delta": 1e-6, "mechanism": mechanism, "k": None}
    one = keyed_counts(events, chunk_keys=16, **_kw(**blt))
    dasked = keyed_counts(
        events, engine="dask", scheduler=client, partitions=partitions, chunk_keys=7, **_kw(**blt)
    )
    assert one.frame is not None and dasked.frame is not None
    assert dasked.frame.equals(one.frame)
    t = events["t"] // 5 + 1
    frames = []
    kw = _kw(**blt, secret=tmp_path / "run.key")
    for piece, until in ((events[t <= 4], 4), (events[t > 4], 10)):
        res = keyed_counts(
            piece,
            engine="dask",
            scheduler=client,
            partitions=partitions,
            chunk_keys=9,
            state=tmp_path / "run.state",
            until=until,
            **kw,
        )
        assert res.frame is not None
        frames.append(res.frame)
    one = keyed_counts(events, chunk_keys=16, **_kw(**blt, secret=_twin(tmp_path)))
    assert one.frame is not None
    got = pd.concat(frames, ignore_index=True)
    order = np.lexsort((got["step"].to_numpy(), got["key"].map(KEYS.index).to_numpy()))
    assert got.iloc[order].reset_index(drop=True).equals(one.frame)
