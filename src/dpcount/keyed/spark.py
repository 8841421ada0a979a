"""The Spark engine: the same results as the embedded and Dask engines, on Spark.

The runner only schedules the stages of :mod:`dpcount.keyed.shards` (the Dask engine's,
:mod:`dpcount.keyed.dask`) as Spark tasks over plain RDDs of Python objects:

1. **Reading, bounding and summing** (one task per input split): an executor reads its
   split of the file itself — a CSV file's byte range of whole lines, a Parquet file's
   block of whole row groups (at most :data:`~dpcount.keyed.dask.PARQUET_BLOCK` bytes) —
   with the options of :func:`dpcount.keyed.io.read_events`, maps, clips and sums it
   (:meth:`~dpcount.keyed.job.KeyedJob.prepare`) and splits the sums into shards of
   contiguous key chunks (:func:`~dpcount.keyed.shards.prepare_split`). A shuffle by
   shard brings each shard's pieces to one task, which finishes them
   (:meth:`~dpcount.keyed.job.KeyedJob.finish_run`; one shard holding all keys with unit
   bounds, where a unit's keys are bounded together). The driver receives the drop
   reports, never the events; the contributions (24 bytes per (key, step) with one) only
   when the run keeps a state or a released-up-to mark, as the Dask client does.
2. **Key selection** (open key sets): each shard's keys' first counted steps (8 bytes
   per key) come to the driver, which places the keys as every engine does
   (:func:`~dpcount.keyed.job.key_positions`, :func:`~dpcount.keyed.job.placed_job`);
   the shards are renamed to positions and regrouped by a second shuffle, and each
   placed shard selects its keys where it lies
   (:func:`~dpcount.keyed.shards.select_shard`). A run continuing a stored state does
   on the driver exactly what the embedded engine does
   (:func:`~dpcount.keyed.session.settle`), then sends the placed contributions back to the
   executors for the release.
3. **Release** (one task per shard): the embedded engine's release of each key chunk
   (:func:`~dpcount.keyed.shards.release_chunks`), every noise sample a pure function of
   (secret, configuration, key, position) — never of a partition or task index, so a
   retried task recomputes the same bits. With an output directory the executors write
   the Parquet parts themselves (the path must be on a file system they share with the
   driver); otherwise the counts stream to the driver one shard at a time.

Errors: a split that cannot be read, or whose events are refused, is reported by the
driver with the embedded engine's own message (file, line, column): the driver then
reads the events itself to name the first bad row (on that error path only). A CSV
file is split at line ends: a quoted field spanning lines across a cut is refused
(a split with an odd number of quote characters), never read in pieces; pass
``partitions=1`` for such a file.

``master``: a Spark master URL (default ``"local[2]"``: a session started for the run
and stopped after it; a session already active at that master is used as is), or a
``pyspark.sql.SparkSession`` used as is. The run secret
travels to the executors inside the tasks: the cluster must be as trusted as the place
where the raw events are kept.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed import job as jobs
from dpcount.keyed import session as sessions
from dpcount.keyed import shards as stages
from dpcount.keyed.events import Contributions, DropReport, EventColumns, parse_times
from dpcount.keyed.io import csv_options, read_events
from dpcount.keyed.job import KeyedJob, SecretArg
from dpcount.keyed.selection import SelectionOutcome
from dpcount.keyed.session import EngineRun

__all__ = ["DEFAULT_MASTER", "run_spark"]

#: the master of the session a run starts for itself
DEFAULT_MASTER = "local[2]"

#: most bytes of a CSV file in one input split
CSV_SPLIT = 32 * 2**20

Shard = tuple[Contributions, DropReport, Any]


@dataclass(frozen=True)
class Split:
    """One task's part of the input: a CSV byte range of whole lines (``start``,
    ``end``: byte offsets, each moved to the next line start), a Parquet file's row
    groups, or rows of an in-memory frame."""

    index: int
    path: str | None = None
    start: int = 0
    end: int = 0
    row_groups: tuple[int, ...] = ()
    parquet: bool = False
    frame: pd.DataFrame | None = None


@dataclass(frozen=True)
class Failed:
    """A task's refusal, carried to the driver as a value (Spark would wrap it)."""

    kind: type[Exception]
    message: str


def _line_start(fh: Any, pos: int) -> int:
    """The first line start at or after byte ``pos`` (0: the start)."""
    if pos == 0:
        return 0
    fh.seek(pos - 1)
    fh.readline()
    return int(fh.tell())


def read_split(split: Split, columns: EventColumns) -> pd.DataFrame:
    """The events of one split, read as :func:`~dpcount.keyed.io.read_events` reads
    the whole file (a CSV split: the header line, then the split's lines)."""
    if split.frame is not None:
        return split.frame
    assert split.path is not None
    if split.parquet:
        import pyarrow.parquet as pq

        if not split.row_groups:  # a file without row groups: its columns, no rows
            return pq.read_table(split.path, columns=columns.names()).to_pandas()
        table = pq.ParquetFile(split.path).read_row_groups(
            list(split.row_groups), columns=columns.names()
        )
        return table.to_pandas()
    with open(split.path, "rb") as fh:
        header = fh.readline()
        start = max(_line_start(fh, split.start), len(header))
        end = max(_line_start(fh, split.end), start)
        fh.seek(start)
        body = fh.read(end - start)
        whole = split.start == 0 and split.end >= os.fstat(fh.fileno()).st_size
    if not whole and body.count(b'"') % 2:
        # a split's cut inside a quoted field leaves an odd number of quotes before it
        # (escaped quotes come in pairs): the first such cut ends a split of odd count
        raise ValueError(
            f"events file {split.path}: a quoted field spans lines across a cut of the file "
            f"into splits (near byte {end}); read it as one split (partitions=1, "
            "--partitions 1)"
        )
    return pd.read_csv(io.BytesIO(header + body), **csv_options(columns))


def _guarded(task: Callable[..., Any]) -> Callable[..., Any]:
    """``task`` returning a :class:`Failed` instead of raising a ValueError or a parser
    error (named again on the driver, :func:`_raise_failed`)."""

    def run(*args: Any) -> Any:
        try:
            return task(*args)
        except (ValueError, TypeError, UnicodeDecodeError) as err:
            kind = TypeError if isinstance(err, TypeError) else ValueError
            return Failed(kind, str(err))

    return run


def _scan_split(split: Split, columns: EventColumns, time: bool, key: bool) -> Any:
    frame = read_split(split, columns)
    return stages.scan_partition(
        frame, columns.time if time else None, columns.key if key else None
    )


def _prepare(split: Split, job: KeyedJob, edges: Sequence[int]) -> Any:
    """One split read and prepared: (split index, its pieces per shard, its report)."""
    pieces, report = stages.prepare_split(job, read_split(split, job.columns), edges)
    return split.index, pieces, report


def _finish(job: KeyedJob, pieces: Iterable[tuple[int, Any]]) -> Shard:
    """One shard from its pieces, in split order: (contributions, report, unit ledger)."""
    ordered = [piece for _, piece in sorted(pieces, key=lambda item: item[0])]
    return job.finish_run(ordered)


def _check_failed(results: Iterable[Any]) -> list[Any]:
    listed = list(results)
    for item in listed:
        if isinstance(item, Failed):
            raise item.kind(item.message)
    return listed


def _raise_failed(
    results: Sequence[Any], events: Any, columns: EventColumns, job: KeyedJob | None
) -> None:
    """If a split failed: name the embedded engine's first error (the driver reads the
    events, on this error path only), else the task's own."""
    failed = [item for item in results if isinstance(item, Failed)]
    if not failed:
        return
    frame = events if isinstance(events, pd.DataFrame) else read_events(events, columns)
    parse_times(frame[columns.time], columns.time)
    if job is not None:
        job.prepare(frame, None if isinstance(events, pd.DataFrame) else str(events))
    raise failed[0].kind(failed[0].message)


def _splits(events: Any, columns: EventColumns, partitions: int | None) -> list[Split]:
    """The input's splits, from its size or metadata (the events are not read)."""
    if isinstance(events, pd.DataFrame):
        columns.check(list(events.columns), "the events")
        cuts = np.array_split(np.arange(len(events)), max(1, partitions or 2))
        return [Split(i, frame=events.iloc[rows]) for i, rows in enumerate(cuts)]
    if not isinstance(events, (str, os.PathLike)):
        raise TypeError(
            "engine='spark' reads a CSV or Parquet path or a pandas DataFrame, got "
            f"{type(events).__name__}"
        )
    given = Path(events)  # as messages name it, as the embedded engine does
    p = Path(os.path.abspath(given))  # the executors' working folder is not the driver's
    suffix = p.suffix.lower()
    if suffix not in (".csv", ".txt", ".parquet", ".pq") or not p.is_file():
        read_events(given, columns)  # the embedded engine's refusal (missing file, extension)
    try:
        if suffix in (".csv", ".txt"):
            columns.check(list(pd.read_csv(p, nrows=0).columns), str(given))
            size = p.stat().st_size
            count = partitions or max(1, -(-size // CSV_SPLIT))
            edges = [size * i // count for i in range(count + 1)]
            return [
                Split(i, path=str(p), start=lo, end=hi)
                for i, (lo, hi) in enumerate(itertools.pairwise(edges))
            ]
        import pyarrow.parquet as pq

        from dpcount.keyed.dask import PARQUET_BLOCK

        meta = pq.ParquetFile(p).metadata
        columns.check(list(meta.schema.names), str(given))
        sizes = [meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)]
    except ValueError:
        raise
    except Exception:
        read_events(given, columns)  # the embedded engine's own message
        raise
    return [
        Split(i, path=str(p), row_groups=groups, parquet=True)
        for i, groups in enumerate(_row_group_blocks(sizes, partitions, PARQUET_BLOCK))
    ]


def _row_group_blocks(
    sizes: Sequence[int], partitions: int | None, block: int
) -> list[tuple[int, ...]]:
    """Consecutive row groups in blocks of at most ``block`` bytes (a larger group is a
    block of its own), or in ``partitions`` blocks of about equal size."""
    if not sizes:
        return [()]
    if partitions is not None:
        cuts = np.array_split(np.arange(len(sizes)), min(partitions, len(sizes)))
        return [tuple(int(g) for g in cut) for cut in cuts]
    blocks: list[list[int]] = [[]]
    used = 0
    for g, size in enumerate(sizes):
        if blocks[-1] and used + size > block:
            blocks.append([])
            used = 0
        blocks[-1].append(g)
        used += size
    return [tuple(b) for b in blocks]


def _session(master: Any, stack: ExitStack) -> Any:
    """The run's Spark session: ``master`` as is if it is a session, else one started
    (and stopped with ``stack``) at the ``master`` URL."""
    with warnings.catch_warnings():
        # pyspark 4 warns that it does not fully support pandas 3 in its pandas APIs,
        # which this runner does not use (its tasks pass pickled pandas objects)
        warnings.filterwarnings("ignore", "PySpark does not yet fully support", FutureWarning)
        return _started(master, stack)


def _started(master: Any, stack: ExitStack) -> Any:
    from pyspark.sql import SparkSession

    if isinstance(master, SparkSession):
        return master
    if master is not None and not isinstance(master, str):
        raise TypeError(f"master must be a Spark master URL or a SparkSession, got {master!r}")
    active = SparkSession.getActiveSession()
    if active is not None:  # used as is, not stopped: its owner stops it
        if active.sparkContext.master != (master or DEFAULT_MASTER):
            raise ValueError(
                f"master={master!r}: a Spark session at {active.sparkContext.master} is "
                "already active in this process (pass it as master=, or stop it first)"
            )
        return active
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName("dpcount keyed")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
    )
    if "PYTHONPATH" in os.environ:
        builder = builder.config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    stack.callback(session.stop)
    return session


def _identity(shard: int) -> int:
    return shard


def _bound(
    sc: Any,
    splits: list[Split],
    events: Any,
    job: KeyedJob,
    edges: Sequence[int],
    secret: SecretArg,
    state: str | os.PathLike[str] | None,
) -> tuple[KeyedJob, bool, Any, Any, DropReport]:
    """Stage 1: (the job with its secret, whether it was created, the stored state, the
    shards RDD (one shard per partition), the drop report)."""
    shipped = sc.broadcast(job)
    rdd = sc.parallelize(splits, len(splits))
    prepared = rdd.map(lambda s: _guarded(_prepare)(s, shipped.value, edges)).persist()
    outs = prepared.map(lambda p: p if isinstance(p, Failed) else p[2]).collect()
    _raise_failed(outs, events, job.columns, job)
    report = DropReport()
    for part in outs:
        report = report + part  # validates the events before a secret is created
    job, created = sessions.with_secret(job, secret)
    job, stored = sessions.with_stored(job, state)  # a stored unit ledger goes to the bounding
    secret_job = sc.broadcast(job)
    count = len(edges) - 1
    shards = (
        prepared.flatMap(lambda p: [(g, (p[0], piece)) for g, piece in enumerate(p[1])])
        .partitionBy(count, _identity)
        .mapPartitions(lambda it: [_guarded(_finish)(secret_job.value, (v for _, v in it))])
        .persist()
    )
    for part in _check_failed(shards.map(lambda s: s if isinstance(s, Failed) else s[1]).collect()):
        report = report + part
    prepared.unpersist()
    return job, created, stored, shards, report


def _select(
    sc: Any, job: KeyedJob, shards: Any, edges: Sequence[int], chunk_keys: int, count: int
) -> tuple[KeyedJob, Any, list[int], SelectionOutcome]:
    """Stage 2 (open key set, no stored state): the keys placed and selected; the placed
    shards and their edges."""
    first = np.concatenate(
        shards.mapPartitionsWithIndex(
            lambda i, it: [stages.shard_first_steps(s, edges[i], edges[i + 1]) for s in it]
        ).collect()
    )
    position = jobs.key_positions(first, 0)
    job = jobs.placed_job(job, position)
    plan = job.selection
    assert plan is not None
    n = job.mechanism.n_keys
    placed_edges = stages.shard_edges(n, chunk_keys, count)
    renamed = sc.broadcast(position)  # 8 bytes per key, to each executor once
    placed = (
        shards.flatMap(lambda s: enumerate(stages.place_split(s, renamed.value, placed_edges)))
        .partitionBy(len(placed_edges) - 1, _identity)
        .mapPartitions(lambda it: [(*stages.join_placed(*(c for _, c in it)), None)])
        .persist()
    )
    shipped = sc.broadcast(job)
    selected = np.concatenate(
        placed.mapPartitionsWithIndex(
            lambda i, it: [
                stages.select_shard(
                    shipped.value, s, placed_edges[i], placed_edges[i + 1], chunk_keys
                )
                for s in it
            ]
        ).collect()
    )
    shards.unpersist()
    outcome = SelectionOutcome(plan, n, int((selected <= job.until).sum()))
    return dataclasses.replace(job, selected=selected), placed, placed_edges, outcome


def _gathered(shards: Any) -> Contributions:
    return stages.concat_shards(shards.map(lambda s: s[0]).collect())


def _release_tasks(
    sc: Any,
    job: KeyedJob,
    shards: Any,
    edges: Sequence[int],
    chunks: Sequence[tuple[int, int, bool]],
    held: tuple[Contributions, NDArray[Any] | None, NDArray[Any] | None] | None,
    writer: Any,
) -> Any:
    """Stage 3: an RDD of each release task's [(lo, counts or None, noise state)], in key
    order. ``held``: the contributions, sums and noise state on the driver (a run
    continuing a state), sent to the executors one shard each; else the shards RDD's."""
    groups: list[list[tuple[int, int, bool]]] = [[] for _ in range(len(edges) - 1)]
    for chunk in chunks:
        groups[int(np.searchsorted(edges, chunk[0], side="right")) - 1].append(chunk)
    shipped = sc.broadcast(job)
    if held is None:
        return shards.mapPartitionsWithIndex(
            lambda i, it: [
                stages.release_chunks(shipped.value, s, groups[i], None, None, writer)
                for s in it
                if groups[i]
            ]
        )
    contributions, base, buffers = held
    tasks = []
    for group in (g for g in groups if g):
        span = slice(group[0][0], group[-1][1])
        tasks.append(
            (
                (contributions.for_keys(span.start, span.stop), DropReport()),
                group,
                None if base is None else base[span],
                None if buffers is None else buffers[:, span],
            )
        )
    return sc.parallelize(tasks, max(1, len(tasks))).map(
        lambda t: stages.release_chunks(shipped.value, t[0], t[1], t[2], t[3], writer)
    )


def run_spark(
    events: Any, common: dict[str, Any], secret: SecretArg, *, master: Any, **options: Any
) -> EngineRun:
    """Bound, sum, select and release on Spark; see :func:`dpcount.keyed.keyed_counts`
    (``options``: those of :func:`~dpcount.keyed.dask.run_dask` but its scheduler and
    workers: parts, time_label, chunk_keys, partitions, progress, state, until, guard,
    allowed_lateness)."""
    parts, time_label = options.get("parts"), options.get("time_label", "time")
    chunk_keys: int = options["chunk_keys"]
    progress: Callable[[int, int], None] | None = options.get("progress")
    state: str | os.PathLike[str] | None = options.get("state")
    guard, lateness = options.get("guard"), options.get("allowed_lateness")
    columns: EventColumns = common["columns"]
    stack = ExitStack()
    try:
        splits = _splits(events, columns, options.get("partitions"))
        sc = _session(master, stack).sparkContext
        need_times = common["start"] is None or common["horizon"] is None or lateness is not None
        open_keys = common["keys"] is None
        times = pd.Series([], dtype=np.int64)  # not used when start and horizon are given
        key_values = None
        if need_times or open_keys:  # read them off the data, on the executors
            scans = (
                sc.parallelize(splits, len(splits))
                .map(lambda s: _guarded(_scan_split)(s, columns, need_times, open_keys))
                .collect()
            )
            _raise_failed(scans, events, columns, None)
            if need_times:
                times = pd.concat([t for t, _ in scans], ignore_index=True)
            if open_keys:
                key_values = pd.concat([k for _, k in scans], ignore_index=True)
        prior = sessions.stored_keys(common, state)
        job, derived = jobs.make_job(times=times, key_values=key_values, prior_keys=prior, **common)
        job = sessions.release_window(job, state, options.get("until"), times, lateness, derived)
        # a unit's bound covers all its keys: one shard at unit level
        count = 1 if job.max_keys is not None else 4 * max(1, sc.defaultParallelism)
        edges = stages.shard_edges(job.mechanism.n_keys, chunk_keys, count)
        job, created, stored, shards, report = _bound(sc, splits, events, job, edges, secret, state)
        outcome, carry, held = None, None, None
        if state is not None:
            ledger = shards.first()[2] if job.run_bound is not None else None
            job, contributions, base, buffers, carry, outcome = sessions.settle(
                job, created, stored, _gathered(shards), ledger, chunk_keys, guard, state
            )
            held = (contributions, base, buffers)
            job = dataclasses.replace(job, ledger=None)  # the bounding had it
            edges = stages.shard_edges(job.mechanism.n_keys, chunk_keys, count)
        else:
            if job.selection is not None:
                job, shards, edges, outcome = _select(sc, job, shards, edges, chunk_keys, count)
            if job.secret.path is not None:
                # the released-up-to mark's input digest needs every contribution
                sessions.begin_release(guard, job, created, _gathered(shards), None, None, state)
            else:
                shipped = sc.broadcast(job)
                _check_failed(
                    shards.map(
                        lambda s: _guarded(stages.check_shard)(shipped.value, s, None)
                    ).collect()
                )
        chunks, quiet, writer = stages.plan_release(job, parts, carry, chunk_keys, time_label)
        if writer is not None:  # the executors write the parts: not in their own folder
            writer = dataclasses.replace(writer, path=writer.path.absolute())
        tasks = _release_tasks(sc, job, shards, edges, chunks, held, writer)
        results = tasks.toLocalIterator(prefetchPartitions=True)
    except BaseException:
        stack.close()
        raise
    n = job.mechanism.n_keys

    def released() -> Iterator[tuple[int, Any]]:
        with stack:
            for got in results:
                yield from stages.hand_out(got, n, chunk_keys, carry, quiet, progress)
            shards.unpersist()

    return job, created, derived, report, released(), carry, outcome
