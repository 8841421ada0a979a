"""The Spark engine: the same results as the embedded and Dask engines, on Spark.

The runner only schedules the stages of :mod:`dpcount.keyed.stages` (the Dask engine's,
:mod:`dpcount.keyed.runners.dask`) as Spark tasks over plain RDDs of Python objects:

1. **Reading, bounding and summing** (one task per input split): an executor reads its
   split of the file itself — a CSV file's byte range of whole lines, a Parquet file's
   block of whole row groups (at most :data:`~dpcount.keyed.runners.dask.PARQUET_BLOCK` bytes) —
   with the options of :func:`dpcount.keyed.events.read_events`, maps, clips and sums it
   (:func:`~dpcount.keyed.stages.bound_partition`) and splits the sums into shards of
   contiguous key chunks (:func:`~dpcount.keyed.stages.prepare_split`). A shuffle by
   shard brings each shard's pieces to one task, which finishes them
   (:func:`~dpcount.keyed.stages.merge_partials`; one shard holding all keys with unit
   bounds, where a unit's keys are bounded together; run-level bounds over a keys
   file get their (unit, key) pairs' tie-breaks from one task per span of the file's
   keys, :func:`~dpcount.keyed.stages.rank_span`, never the names). The driver receives the drop
   reports, never the events; the contributions (24 bytes per (key, step) with one) only
   when the run keeps a state or a released-up-to mark, as the Dask client does.
2. **Key selection** (open key sets): each shard's keys' first counted steps (8 bytes
   per key) come to the driver, which places the keys as every engine does
   (:func:`~dpcount.keyed.job.key_positions`, :func:`~dpcount.keyed.job.placed_job`);
   the shards are renamed to positions and regrouped by a second shuffle, and each
   placed shard selects its keys where it lies
   (:func:`~dpcount.keyed.stages.select_shard`). A run continuing a stored state does
   on the driver exactly what the embedded engine does
   (:func:`~dpcount.keyed.session.settle`), then sends the placed contributions back to the
   executors for the release.
3. **Release** (one task per shard): the embedded engine's release of each key chunk
   (:func:`~dpcount.keyed.stages.release_chunks`), every noise sample a pure function of
   (secret, configuration, key, position) — never of a partition or task index, so a
   retried task recomputes the same bits. With an output directory the executors write
   the Parquet parts themselves (the path must be on a file system they share with the
   driver); otherwise the counts stream to the driver one shard at a time, narrowed
   for the wire (:class:`~dpcount.keyed.stages.Narrowed`).

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

from dpcount.keyed import runners, stages
from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    parse_times,
)
from dpcount.keyed.io import csv_options, read_events
from dpcount.keyed.job import KeyedJob
from dpcount.keyed.keys import FileUniverse, JoinedKeys, event_buckets, join_parts, table_span
from dpcount.keyed.runners import Released, ReleaseTasks, RunPlan
from dpcount.keyed.spec import Spark

__all__ = ["DEFAULT_MASTER", "run_spark"]

#: the master of the session a run starts for itself
DEFAULT_MASTER = "local[2]"

#: most bytes of a CSV file in one input split
CSV_SPLIT = 32 * 2**20

Shard = tuple[Contributions, DropReport, Any]
#: a key chunk of the release: (first key, end, whether its counts are written)
Chunk = tuple[int, int, bool]


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


def _prepare(
    split: Split, job: KeyedJob, edges: Sequence[int], joined: JoinedKeys | Failed | None = None
) -> Any:
    """One split read and prepared: (split index, its pieces per shard, its report);
    ``joined``: the positions of its keys in a keys file
    (:class:`~dpcount.keyed.keys.FileUniverse`)."""
    if isinstance(joined, Failed):
        return joined
    frame = read_split(split, job.columns)
    if joined is not None:
        assert isinstance(job.universe, FileUniverse)
        known = joined.known(frame[job.columns.key])
        spec = dataclasses.replace(job.spec, universe=job.universe.with_known(known))
        job = dataclasses.replace(job, spec=spec)
    pieces, report = stages.prepare_split(job, frame, edges)
    return split.index, pieces, report


def _to_splits(bucket: int, found: Any, count: int) -> Any:
    """A bucket's join results by split, tagged with the bucket; a refusal (a key twice
    in the file) to every split, whose bounding then reports it (:func:`_raise_failed`)."""
    if isinstance(found, Failed):
        return [(i, (bucket, found)) for i in range(count)]
    return [(i, (bucket, part)) for i, part in found]


def _joined_of(items: list[tuple[int, Any]]) -> Any:
    """A split's :class:`~dpcount.keyed.keys.JoinedKeys` from its buckets' results."""
    failed = [r for _, r in items if isinstance(r, Failed)]
    return failed[0] if failed else JoinedKeys.of(*(r for _, r in sorted(items, key=_first)))


def _first(item: tuple[int, Any]) -> int:
    return item[0]


def _split_buckets(split: Split, columns: EventColumns, buckets: int) -> list[Any]:
    """A split's distinct key texts by join bucket, tagged with the split (nothing for a
    split that cannot be read: the bounding names its error)."""
    try:
        found = event_buckets(read_split(split, columns)[columns.key], buckets)
    except (ValueError, TypeError, UnicodeDecodeError):
        return []
    return [(b, ("events", split.index, texts)) for b, texts in enumerate(found)]


def _join_bucket(items: Iterable[tuple[str, int, Any]]) -> Any:
    """One bucket's join: (split index, its keys' positions and checksum) for each split."""
    listed = list(items)
    table = [rows for kind, _, rows in listed if kind == "table"]
    splits = [(i, texts) for kind, i, texts in listed if kind == "events"]
    parts = join_parts(len(table), *table, *(texts for _, texts in splits))
    return [(i, part) for (i, _), part in zip(splits, parts, strict=True)]


#: the split index that tags a key span's ranked pairs among a shard's pieces
_RANKS = -1


def _finish(job: KeyedJob, pieces: Iterable[tuple[int, Any]]) -> Shard | Failed:
    """One shard from its pieces, in split order: (contributions, report, unit ledger);
    pieces tagged :data:`_RANKS` are the key spans' ranked pairs (run-level bounds over
    a keys file, :func:`~dpcount.keyed.stages.rank_span`)."""
    listed = list(pieces)
    ranks = [piece for i, piece in listed if i == _RANKS]
    failed = [r for r in ranks if isinstance(r, Failed)]
    if failed:
        return failed[0]
    ordered = [piece for i, piece in sorted(listed, key=_first) if i != _RANKS]
    ranked = pd.concat(ranks, ignore_index=True) if ranks else None
    return stages.merge_partials(job, ordered, ranked)


def _span_pieces(p: Any, cuts: Sequence[int]) -> list[tuple[int, pd.DataFrame]]:
    """A prepared split's (unit, key) pairs by key span (one shard: unit bounds)."""
    return list(enumerate(stages.pair_spans(p[1][0], cuts)))


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
    if job is not None and isinstance(job.universe, FileUniverse):
        # the keys file's list, on this error path only (a key twice is refused here)
        spec = dataclasses.replace(job.spec, universe=KeyUniverse(list(job.universe.keys)))
        job = dataclasses.replace(job, spec=spec)
    if job is not None:
        stages.bound_partition(
            job, frame, None if isinstance(events, pd.DataFrame) else str(events)
        )
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

        from dpcount.keyed.runners.dask import PARQUET_BLOCK

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


class SparkScheduler:
    """The stages as Spark tasks over RDDs of Python objects: one task per input split,
    a shuffle by shard, the release where each shard lies. The driver never collects
    events (only reports, 8 bytes per key for placement and selection, and the
    contributions when a state or a mark needs them)."""

    def __init__(self, sc: Any, splits: list[Split], events: Any, plan: RunPlan) -> None:
        self.sc, self.splits, self.events, self.columns = sc, splits, events, plan.columns
        self.chunk_keys = plan.output.chunk_keys
        self.prepared: Any = None
        self.held: Any = None  # the shards RDD
        self.driver: Contributions | None = None  # a stored state's placed contributions

    def scan(self, time: str | None, key: str | None) -> tuple[pd.Series, pd.Series | None]:
        columns, need_times, open_keys = self.columns, time is not None, key is not None
        scans = (
            self.sc.parallelize(self.splits, len(self.splits))
            .map(lambda s: _guarded(_scan_split)(s, columns, need_times, open_keys))
            .collect()
        )
        _raise_failed(scans, self.events, columns, None)
        times = pd.Series([], dtype=np.int64)
        if need_times:
            times = pd.concat([t for t, _ in scans], ignore_index=True)
        keys = pd.concat([k for _, k in scans], ignore_index=True) if open_keys else None
        return times, keys

    def shards(self, job: KeyedJob) -> int:
        return 1 if job.max_keys is not None else 4 * max(1, self.sc.defaultParallelism)

    def known_keys(self, universe: FileUniverse) -> Any:
        """An RDD of each split's :class:`~dpcount.keyed.keys.KnownKeys` (partition i:
        split i's): the keys file's blocks and the splits' distinct keys shuffled by
        join bucket, one task per bucket (:func:`~dpcount.keyed.keys.join_parts`), the
        results shuffled back by split; the driver holds no key. A key twice in the
        file is refused here (checked before the events are bounded)."""
        from dpcount.keyed.runners.dask import JOIN_KEYS

        sc, names, columns, count = self.sc, universe.keys, self.columns, len(self.splits)
        n = len(names)
        buckets = max(4 * max(1, sc.defaultParallelism), -(-n // JOIN_KEYS))
        spans = [(lo, min(n, lo + JOIN_KEYS)) for lo in range(0, n, JOIN_KEYS)]
        tables = sc.parallelize(spans, len(spans)).flatMap(
            lambda span: [
                (b, ("table", -1, rows))
                for b, rows in enumerate(table_span(names, span[0], span[1], buckets))
            ]
        )
        events = sc.parallelize(self.splits, count).flatMap(
            lambda split: _split_buckets(split, columns, buckets)
        )
        known = (
            tables.union(events)
            .partitionBy(buckets, _identity)
            .mapPartitionsWithIndex(
                lambda b, it: _to_splits(b, _guarded(_join_bucket)(v for _, v in it), count)
            )
            .partitionBy(count, _identity)
            .mapPartitions(lambda it: [_joined_of([found for _, found in it])])
        )
        return known

    def bound(self, job: KeyedJob, edges: Sequence[int]) -> DropReport:
        shipped = self.sc.broadcast(job)
        self.count = len(edges) - 1
        rdd = self.sc.parallelize(self.splits, len(self.splits))
        if isinstance(job.universe, FileUniverse):
            rdd = rdd.zip(self.known_keys(job.universe))
            prepared = rdd.map(
                lambda sk: _guarded(_prepare)(sk[0], shipped.value, edges, sk[1])
            ).persist()
        else:
            prepared = rdd.map(lambda s: _guarded(_prepare)(s, shipped.value, edges)).persist()
        outs = prepared.map(lambda p: p if isinstance(p, Failed) else p[2]).collect()
        _raise_failed(outs, self.events, job.columns, job)
        self.prepared = prepared
        return runners.sum_reports(outs)

    def merge(self, job: KeyedJob) -> DropReport:
        secret_job = self.sc.broadcast(job)
        pieces = self.prepared.flatMap(
            lambda p: [(g, (p[0], piece)) for g, piece in enumerate(p[1])]
        )
        if job.run_bound is not None and isinstance(job.universe, FileUniverse):
            pieces = pieces.union(self._ranks(job, secret_job))
        self.held = (
            pieces.partitionBy(self.count, _identity)
            .mapPartitions(lambda it: [_guarded(_finish)(secret_job.value, (v for _, v in it))])
            .persist()
        )
        reports = self.held.map(lambda s: s if isinstance(s, Failed) else s[1]).collect()
        self.prepared.unpersist()
        return runners.sum_reports(_check_failed(reports))

    def _ranks(self, job: KeyedJob, secret_job: Any) -> Any:
        """Run-level bounds over a keys file: the (unit, key) pairs' tie-break ranks,
        shuffled by span of :data:`~dpcount.keyed.runners.dask.JOIN_KEYS` keys and
        ranked there (:func:`~dpcount.keyed.stages.rank_span`: only the span's names
        read), tagged for the one bounding shard: it never holds the file's names."""
        from dpcount.keyed.runners.dask import JOIN_KEYS

        n = len(job.universe.keys)
        cuts = [*range(0, n, JOIN_KEYS), n]
        return (
            self.prepared.flatMap(lambda p: _span_pieces(p, cuts))
            .partitionBy(len(cuts) - 1, _identity)
            .mapPartitions(
                lambda it: [
                    (0, (_RANKS, _guarded(stages.rank_span)(secret_job.value, *(v for _, v in it))))
                ]
            )
        )

    def gather(self, job: KeyedJob) -> tuple[Contributions, UnitLedger | None]:
        ledger = self.held.first()[2] if job.run_bound is not None else None
        return stages.concat_shards(self.held.map(lambda s: s[0]).collect()), ledger

    def scatter(self, job: KeyedJob, contributions: Contributions, edges: Sequence[int]) -> None:
        self.driver = contributions  # sent one release task's keys at a time

    def first_steps(self, edges: Sequence[int]) -> NDArray[np.int64]:
        return np.concatenate(
            self.held.mapPartitionsWithIndex(
                lambda i, it: [stages.shard_first_steps(s, edges[i], edges[i + 1]) for s in it]
            ).collect()
        )

    def place(self, position: NDArray[np.int64], edges: Sequence[int]) -> None:
        renamed = self.sc.broadcast(position)  # 8 bytes per key, to each executor once
        placed = (
            self.held.flatMap(lambda s: enumerate(stages.place_split(s, renamed.value, edges)))
            .partitionBy(len(edges) - 1, _identity)
            .mapPartitions(lambda it: [(*stages.join_placed(*(c for _, c in it)), None)])
            .persist()
        )
        self.held.unpersist()
        self.held = placed

    def select(self, job: KeyedJob, edges: Sequence[int]) -> NDArray[np.int64]:
        shipped, k = self.sc.broadcast(job), self.chunk_keys
        return np.concatenate(
            self.held.mapPartitionsWithIndex(
                lambda i, it: [
                    stages.select_shard(shipped.value, s, edges[i], edges[i + 1], k) for s in it
                ]
            ).collect()
        )

    def check(self, job: KeyedJob) -> None:
        shipped = self.sc.broadcast(job)
        _check_failed(
            self.held.map(lambda s: _guarded(stages.check_shard)(shipped.value, s, None)).collect()
        )

    def release(self, job: KeyedJob, tasks: ReleaseTasks) -> Iterator[Released]:
        """One task per shard, streamed to the driver one shard at a time; with an
        output directory the executors write the parts (in a folder they share)."""
        writer = tasks.writer
        if writer is not None:  # the executors write the parts: not in their own folder
            writer = dataclasses.replace(writer, path=writer.path.absolute())
        edges = tasks.edges
        groups: list[list[Chunk]] = [[] for _ in range(len(edges) - 1)]
        for chunk in tasks.chunks:
            groups[int(np.searchsorted(edges, chunk[0], side="right")) - 1].append(chunk)
        rdd = self._tasks(job, groups, tasks, writer)
        return _streamed(rdd.toLocalIterator(prefetchPartitions=True), self.held)

    def _tasks(
        self,
        job: KeyedJob,
        groups: list[list[tuple[int, int, bool]]],
        tasks: ReleaseTasks,
        writer: Any,
    ) -> Any:
        shipped = self.sc.broadcast(job)
        if self.driver is None:
            return self.held.mapPartitionsWithIndex(
                lambda i, it: [
                    stages.release_chunks(
                        shipped.value, s, groups[i], None, None, writer, wire=True
                    )
                    for s in it
                    if groups[i]
                ]
            )
        held = []
        for group in (g for g in groups if g):
            span = slice(group[0][0], group[-1][1])
            shard = (self.driver.for_keys(span.start, span.stop), DropReport())
            held.append((shard, group, *tasks.noise(span)))
        return self.sc.parallelize(held, max(1, len(held))).map(
            lambda t: stages.release_chunks(
                shipped.value, t[0], t[1], t[2], t[3], writer, wire=True
            )
        )


def _streamed(results: Iterable[Released], held: Any) -> Iterator[Released]:
    yield from results
    held.unpersist()


def run_spark(events: Any, plan: RunPlan, runner: Spark) -> runners.Ran:
    """Bound, sum, select and release on Spark (:func:`~dpcount.keyed.runners.drive`)."""
    stack = ExitStack()
    try:
        splits = _splits(events, plan.columns, runner.partitions)
        sc = _session(runner.master, stack).sparkContext
        ran = runners.drive(SparkScheduler(sc, splits, events, plan), plan)
    except BaseException:
        stack.close()
        raise
    return dataclasses.replace(ran, chunks=runners.closing(ran.chunks, stack))
