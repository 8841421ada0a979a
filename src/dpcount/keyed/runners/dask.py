"""The Dask engine: the same results as the embedded engine, on any partitioning.

Work is split in stages, all on the workers; the client sends the job (the public
configuration, its key universe and the secret) to every worker once and then only
small task descriptions, and collects the outputs:

1. **Bounding and summing** (one task per input partition, reading its part of a
   Parquet or CSV file itself; a Parquet file's partitions are blocks of whole row
   groups of at most :data:`PARQUET_BLOCK` bytes, so no task reads the whole file,
   and each partition is dropped once summed): map events to (key index, step), clip per event
   (event level) and sum per (key, step) — or per (unit, step, key) for unit
   bounding — and split the partition's sums into shards: contiguous ranges of whole
   key chunks, a function of the key index alone (never of the partition). One task
   per shard combines them (one shard holding all keys at unit level, where a unit's
   keys are bounded together, per step or over the run). Integer sums do not depend
   on the partitioning, so the contributions are identical for any number of
   partitions (floating-point weights may differ in the last bits: use integer
   weights and discrete noise for bit-for-bit equality). The client receives the
   drop reports, and the contributions themselves only when the run keeps a state or
   a released-up-to mark (for the state's totals and the input digest; 24 bytes per
   (key, step) with a contribution) — never the events.
2. **Key selection** (open key sets): each shard sends each key's first counted step
   (8 bytes per key); the client places the keys in the key table as the embedded
   engine does (:func:`~dpcount.keyed.job.place_keys`: by first counted step, then
   name), the shards' contributions are renamed to positions and regrouped into
   shards of contiguous positions, and one task per shard runs the embedded engine's
   :func:`~dpcount.keyed.selection.select_keys` on its keys where it lies; the client
   gathers each key's selection step (8 bytes per key). A run continuing a stored
   state (``state=``) has gathered every contribution already (stage 1), so the client
   does exactly what the embedded engine does (:func:`~dpcount.keyed.session.settle`):
   places the keys new in this run after the stored key table
   (:meth:`~dpcount.keyed.state.RunState.peek_keys` starts the universe), extends the
   stored sums and noise states to them, selects continuing the stored selection steps
   and selection noise state, and sends the placed contributions back to the workers
   as shards for the release. With run-level unit bounds (``unit_scope="run"``) the
   stored unit ledger travels with the job to the (single) bounding shard, which
   returns the ledger after this run's steps for the next state; over a keys file the
   (unit, key) pairs' tie-breaks are ranked first by spans of :data:`JOIN_KEYS` keys,
   one task per span reading only its keys' names
   (:func:`~dpcount.keyed.stages.rank_span`), so that the bounding shard gets 8-byte
   ranks, never the file's names.
3. **Release** (one task per run of consecutive key chunks of a shard, on the
   worker holding the shard: the whole shard when the workers write the parts, else
   at most :data:`RESULT_BYTES` of counts per task): the embedded engine, chunk by
   chunk — the run's counting mechanism and its noise, whose every sample is a pure
   function of (secret, configuration, key, position) (:mod:`dpcount.keyed.engine`,
   :class:`~dpcount.keyed.prf.PRFWords`). A task that is retried, or rerun after a
   worker dies, recomputes exactly the same values; nothing is drawn from a
   per-worker or per-partition generator. Counts that go to the client travel in the
   narrowest integer type holding them (:class:`~dpcount.keyed.stages.Narrowed`: a
   tree's discrete Laplace counts as int16, a quarter of the bytes) and are widened
   back on the client, the same values in the same type: moving 800 MB of int64
   counts (10^5 keys x 10^3 steps) was half the run's CPU.

The run secret travels to the workers inside the tasks: the cluster must be as
trusted as the place where the raw events are kept.

``scheduler``: None starts a ``LocalCluster`` with ``workers`` worker processes
(one thread each) for the run; a string is a scheduler address
(``"tcp://host:8786"``); a ``distributed.Client`` is used as is. The LocalCluster
starts its workers without distributed's default ``MALLOC_TRIM_THRESHOLD_=65536``,
which made the release tasks 3-5x slower (large temporaries mapped afresh each
time), and with slower housekeeping ticks (``_QUIET_CLUSTER``: no statistical
profiler, a 1 s event-loop tick and memory check), which cut the idle CPU of each
process by ~85%; for a cluster of your own, start the workers with
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_`` unset and those
settings likewise.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.events import Contributions, DropReport, EventColumns
from dpcount.keyed.io import csv_options, line_numbers
from dpcount.keyed.job import KeyedJob
from dpcount.keyed.keys import FileUniverse, JoinedKeys, event_buckets, join_parts, table_span
from dpcount.keyed.runners import (
    Ran,
    Released,
    ReleaseTasks,
    RunPlan,
    closing,
    drive,
    sum_reports,
)
from dpcount.keyed.spec import Dask
from dpcount.keyed.stages import (
    check_shard,
    concat_shards,
    join_placed,
    merge_partials,
    pair_spans,
    place_split,
    prepare_split,
    rank_span,
    release_chunks,
    scan_partition,
    select_shard,
    shard_first_steps,
)

__all__ = ["run_dask"]


def _piece(prepared: tuple[list[pd.DataFrame], DropReport], shard: int) -> pd.DataFrame:
    return prepared[0][shard]


def _finish_run_shard(
    job: KeyedJob, ranked: int, *pieces: pd.DataFrame
) -> tuple[Contributions, DropReport, UnitLedger | None]:
    """One shard from its pieces: (contributions, report, the unit ledger after the
    run's steps: run-level bounds, continuing the stored ``job.ledger``; None without).
    The first ``ranked`` pieces are the key spans' ranked pairs (:func:`rank_span`),
    the rest the partitions' sums; no ranked pieces: the pairs are ranked here."""
    ranks = pd.concat(list(pieces[:ranked]), ignore_index=True) if ranked else None
    return merge_partials(job, list(pieces[ranked:]), ranks)


def _placed_piece(pieces: list[Contributions], shard: int) -> Contributions:
    return pieces[shard]


def _item(items: Sequence[Any], i: int) -> Any:
    return items[i]


def _prepare_known(
    job: KeyedJob, frame: pd.DataFrame, edges: Sequence[int], joined: JoinedKeys
) -> tuple[list[pd.DataFrame], DropReport]:
    """:func:`prepare_split` of a partition whose keys' positions in the keys file the
    join found (``joined``)."""
    assert isinstance(job.universe, FileUniverse)
    known = joined.known(frame[job.columns.key])
    spec = dataclasses.replace(job.spec, universe=job.universe.with_known(known))
    return prepare_split(dataclasses.replace(job, spec=spec), frame, edges)


#: most keys of a keys file per task reading them for the join, and per join bucket
JOIN_KEYS = 2**21


#: a CSV row's index label is (partition + 1) · 2^40 + its row in the partition
#: (:func:`_number_rows`), which a message names as "index label N" and
#: :func:`_file_line` turns into the file line, as the embedded engine names it
_ROW_BITS = 40
_ROW_LABEL = re.compile(r"index label (\d+)")


def _number_rows(frame: pd.DataFrame, partition_info: dict[str, Any] | None = None) -> pd.DataFrame:
    """The partition with index labels that locate each row (:data:`_ROW_BITS`); a
    partition of ``dd.read_csv`` otherwise numbers its rows from 0."""
    number = 0 if partition_info is None else int(partition_info["number"])
    out = frame.copy(deep=False)
    out.index = pd.RangeIndex(len(frame)) + ((number + 1) << _ROW_BITS)
    return out


def _partition_lengths(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(frame.index.to_numpy() >> _ROW_BITS).value_counts()


def _file_line(err: ValueError, path: Path, ddf: Any) -> ValueError | None:
    """``err`` naming the file line (header = line 1, blank lines counted, as
    :func:`dpcount.keyed.io.read_events` numbers them) of the CSV row it names by
    its label (:func:`_number_rows`), or None when it names none. Counts the rows of
    the partitions before it: a pass over the file, on this error path only."""
    found = _ROW_LABEL.search(str(err))
    if found is None:
        return None
    label = int(found.group(1))
    part, row = (label >> _ROW_BITS) - 1, label & ((1 << _ROW_BITS) - 1)
    counts = ddf.map_partitions(_partition_lengths, meta=pd.Series([], dtype=np.int64))
    lengths = counts.compute().groupby(level=0).sum()
    position = int(lengths[lengths.index < part + 1].sum()) + row
    lines = line_numbers(path, int(lengths.sum()))
    name = f"data row {position + 1}" if lines is None else f"line {int(lines[position])}"
    name += "" if f" of {path}" in str(err) else f" of {path}"
    return ValueError(str(err).replace(found.group(0), name))


#: most (uncompressed, encoded) bytes of Parquet row groups read into one input
#: partition; a larger row group is a partition of its own
PARQUET_BLOCK = 32 * 2**20


def _frame_partitions(events: pd.DataFrame, partitions: int) -> Any:
    """``events`` as a Dask frame of ``partitions`` consecutive blocks of rows, each
    block in the graph as it is. ``dd.from_pandas`` computed sorted divisions of the
    frame's index first (``index.tolist()`` and a search over it: 0.15 s of client CPU
    at 10^6 events, in every run); the runner needs no divisions. The values stay as
    they are: Dask otherwise turns object columns into strings, so key 1 became "1"
    and missed the universe's 1 (counted as unknown)."""
    import dask.config
    import dask.dataframe as dd
    from dask.delayed import delayed

    n, count = len(events), max(1, partitions)  # a block may be empty
    cuts = [i * n // count for i in range(count + 1)]
    blocks = [delayed(events.iloc[lo:hi]) for lo, hi in itertools.pairwise(cuts)]
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_delayed(blocks, meta=events.iloc[:0], verify_meta=False)


def _dask_frame(events: Any, columns: EventColumns, partitions: int | None) -> Any:
    import dask.dataframe as dd

    if isinstance(events, (str, os.PathLike)):
        p = Path(events)
        if not p.is_file():
            raise FileNotFoundError(f"events file {p} not found")
        suffix = p.suffix.lower()
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            columns.check(pq.read_schema(p).names, str(p))
            # partitions of whole row groups up to PARQUET_BLOCK: dask's default read a
            # file of 2 * 10^7 events (320 MB in memory) as ONE partition, in one task
            ddf = dd.read_parquet(
                str(p),
                columns=columns.names(),
                split_row_groups="adaptive",
                blocksize=PARQUET_BLOCK,
            )
        elif suffix == ".csv":
            columns.check(list(pd.read_csv(p, nrows=0).columns), str(p))
            ddf = dd.read_csv(str(p), **csv_options(columns))
            ddf = ddf.map_partitions(_number_rows, meta=ddf._meta)
        else:
            raise ValueError(f"events file {p} must end in .csv or .parquet")
    elif isinstance(events, pd.DataFrame):
        columns.check(list(events.columns), "the events")
        ddf = _frame_partitions(events, partitions or 2)
    else:
        ddf = events
        columns.check(list(ddf.columns), "the events")
    if partitions is not None and ddf.npartitions != partitions:
        ddf = ddf.repartition(npartitions=partitions)
    return ddf


#: the configuration of the LocalCluster a run starts for itself (see :func:`_client`)
_QUIET_CLUSTER: dict[str, Any] = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def _client(scheduler: Any, workers: int, stack: ExitStack) -> Any:
    from distributed import Client, LocalCluster

    if isinstance(scheduler, Client):
        return scheduler
    if isinstance(scheduler, str):
        return stack.enter_context(Client(scheduler))  # type: ignore[no-untyped-call]
    if scheduler is not None:
        raise TypeError(f"scheduler must be an address or a distributed.Client, got {scheduler!r}")
    import dask.config

    # distributed sets MALLOC_TRIM_THRESHOLD_ in workers by default, which turns off
    # glibc's adaptive mmap threshold: every large temporary array is then mapped and
    # unmapped afresh (page faults); the release tasks ran 3-5x slower. The setting
    # stays in force for the cluster's lifetime (a restarted worker sees it too).
    # The cluster's housekeeping at distributed's defaults (a 20 ms event-loop tick, a memory check
    # every 100 ms, a statistical profiler, a system monitor) cost ~0.035 CPU seconds per
    # second in each worker and ~0.05 in the client (with the scheduler), measured idle:
    # a 2-worker run whose wall time a loaded machine stretches to 90 s spent ~15 of its
    # 35 CPU seconds there. Slower ticks cut it to ~0.005 and ~0.013 (no effect on the
    # results; memory limits are checked every second).
    stack.enter_context(dask.config.set(_QUIET_CLUSTER))
    cluster = stack.enter_context(
        LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    )
    stack.callback(_close_workers, cluster)  # after the client, before the cluster
    return stack.enter_context(Client(cluster))  # type: ignore[no-untyped-call]


#: seconds a local worker process has to exit after the run before it is killed
WORKER_EXIT_TIMEOUT = 30.0


def _close_workers(cluster: Any) -> None:
    """Close the LocalCluster's workers, giving each process
    :data:`WORKER_EXIT_TIMEOUT` seconds to exit. The cluster's own close gives a worker
    4 s (``Nanny.close``'s default timeout 5, of which 0.8), then kills it and logs
    "Worker process still alive after 4.0 seconds, killing": on a busy machine a
    worker with pandas loaded takes that long to shut its interpreter down, so every
    successful run ended with that warning. The results are gathered by then; a
    worker that does not exit within the timeout is still killed (and warned about)."""
    import asyncio

    async def close_all() -> None:
        nannies = list(cluster.workers.values())
        await asyncio.gather(*(n.close(timeout=WORKER_EXIT_TIMEOUT) for n in nannies))

    cluster.sync(close_all)


#: most bytes of counts one release task returns to the client (a task releases whole
#: key chunks; a task whose worker writes the parts itself takes its whole shard)
RESULT_BYTES = 64 * 2**20


def _tasks(
    chunks: Sequence[tuple[int, int, bool]], edges: Sequence[int], per_task: int
) -> list[list[tuple[int, int, bool]]]:
    """The chunks grouped into release tasks: consecutive chunks of one shard, at most
    ``per_task`` in a task."""
    groups: list[list[tuple[int, int, bool]]] = []
    shard_of_last = -1
    for chunk in chunks:
        shard = int(np.searchsorted(edges, chunk[0], side="right")) - 1
        if shard != shard_of_last or len(groups[-1]) >= per_task:
            groups.append([])
            shard_of_last = shard
        groups[-1].append(chunk)
    return groups


def _value(value: Any) -> Any:
    return value


def _shipped(client: Any, value: Any) -> Any:
    """``value`` as a task result: sent to the scheduler once, fetched once by each worker
    that needs it, and recomputed from its task if the workers holding it die (data
    scattered with ``client.scatter`` is lost with its last holder: the active memory
    manager keeps one replica)."""
    return client.submit(_value, value, pure=False)


def _gathered(client: Any, futures: Sequence[Any], item: int) -> list[Any]:
    """Item ``item`` of each future's result, gathered (only that item travels)."""
    return list(client.gather([client.submit(operator.itemgetter(item), f) for f in futures]))


class DaskScheduler:
    """The stages as Dask futures: one task per input partition, one per shard, the
    release on the worker holding the shard. The job goes to each worker once
    (:func:`_shipped`), never into each task."""

    def __init__(self, client: Any, ddf: Any, chunk_keys: int) -> None:
        self.client, self.ddf, self.chunk_keys = client, ddf, chunk_keys
        self.pieces = ddf.to_delayed()
        self.prepared: list[Any] = []
        self.held: list[Any] = []  # the shards' futures
        self.shipped: Any = None
        self.count = 1

    def scan(self, time: str | None, key: str | None) -> tuple[pd.Series, pd.Series | None]:
        from dask.base import compute
        from dask.delayed import delayed

        scans = compute(*[delayed(scan_partition)(p, time, key) for p in self.pieces])  # type: ignore[no-untyped-call]
        times = pd.Series([], dtype=np.int64)
        if time is not None:
            times = pd.concat([t for t, _ in scans], ignore_index=True)
        keys = None if key is None else pd.concat([k for _, k in scans], ignore_index=True)
        return times, keys

    def shards(self, job: KeyedJob) -> int:
        return 1 if job.max_keys is not None else 4 * max(1, len(self.client.ncores()))

    def known_keys(self, universe: FileUniverse, key: str) -> list[Any]:
        """Each input partition's :class:`~dpcount.keyed.keys.JoinedKeys` (a future
        each: 8 bytes per distinct key): the keys file and the partitions' distinct keys
        split into buckets by key text, one join task per bucket
        (:func:`~dpcount.keyed.keys.join_parts`), so that no process holds more of the
        file than a few buckets' keys. Waits for them: the join's tables are dropped
        before the events are read for the bounding."""
        from dask.delayed import delayed
        from distributed import wait

        client, names = self.client, universe.keys
        n = len(names)
        buckets = max(4 * max(1, len(client.ncores())), -(-n // JOIN_KEYS))
        tables = [
            client.submit(table_span, names, lo, min(n, lo + JOIN_KEYS), buckets, pure=False)
            for lo in range(0, n, JOIN_KEYS)
        ]
        keyed = [delayed(event_buckets)(p, buckets) for p in self.ddf[key].to_delayed()]
        events = client.compute(keyed)
        joined = [
            client.submit(
                join_parts,
                len(tables),
                *[client.submit(_item, f, b, pure=False) for f in [*tables, *events]],
                pure=False,
            )
            for b in range(buckets)
        ]
        known = [
            client.submit(
                JoinedKeys.of, *[client.submit(_item, j, p, pure=False) for j in joined], pure=False
            )
            for p in range(len(events))
        ]
        wait(known)  # type: ignore[no-untyped-call]
        return known

    def bound(self, job: KeyedJob, edges: Sequence[int]) -> DropReport:
        client = self.client
        shipped = _shipped(client, job)
        self.count = len(edges) - 1
        if isinstance(job.universe, FileUniverse):
            from dask.delayed import delayed

            known = self.known_keys(job.universe, job.columns.key)
            # one graph of reads and preparations: a worker reads a partition when it
            # is about to prepare it, rather than every partition ahead (~0.4 GiB each
            # at 5 x 10^6 string-keyed events)
            tasks = [
                delayed(_prepare_known)(shipped, p, edges, k)
                for p, k in zip(self.pieces, known, strict=True)
            ]
            self.prepared = client.compute(tasks)
            del known
        else:
            frames = client.compute(self.pieces)
            self.prepared = [
                client.submit(prepare_split, shipped, f, edges, pure=False) for f in frames
            ]
            # each input partition is dropped once its task has run, not held to the end
            # of the stage (the scheduler keeps the lineage while tasks depend on it)
            del frames
        return sum_reports(_gathered(client, self.prepared, 1))

    def merge(self, job: KeyedJob) -> DropReport:
        client, prepared = self.client, self.prepared
        self.shipped = _shipped(client, job)  # now with the run secret
        pieces = [
            [client.submit(_piece, f, g, pure=False) for f in prepared] for g in range(self.count)
        ]
        ranks = self._ranks(job, pieces[0]) if job.run_bound is not None else []
        self.held = [
            client.submit(
                _finish_run_shard, self.shipped, len(ranks), *ranks, *pieces[g], pure=False
            )
            for g in range(self.count)
        ]
        self.prepared = []  # each partition's sums go once the shards have them
        return sum_reports(_gathered(client, self.held, 1))

    def _ranks(self, job: KeyedJob, pieces: list[Any]) -> list[Any]:
        """Run-level bounds over a keys file: the tie-break ranks of the (unit, key)
        pairs, one task per span of :data:`JOIN_KEYS` keys reading only its keys' names
        (:func:`~dpcount.keyed.stages.rank_span`), so that the bounding task (one
        shard: a unit's keys are bounded together) never holds the file's names. Other
        universes are held whole by every worker: ranked in the bounding task (no
        futures)."""
        if not isinstance(job.universe, FileUniverse):
            return []
        client, n = self.client, len(job.universe.keys)
        cuts = [*range(0, n, JOIN_KEYS), n]
        split = [client.submit(pair_spans, p, cuts, pure=False) for p in pieces]
        return [
            client.submit(
                rank_span,
                self.shipped,
                *[client.submit(_item, f, s, pure=False) for f in split],
                pure=False,
            )
            for s in range(len(cuts) - 1)
        ]

    def gather(self, job: KeyedJob) -> tuple[Contributions, UnitLedger | None]:
        contributions = concat_shards(_gathered(self.client, self.held, 0))
        ledger = None
        if job.run_bound is not None:  # a unit's keys are bounded together: in one shard
            assert len(self.held) == 1
            ledger = self.client.gather(self.client.submit(operator.itemgetter(2), self.held[0]))
        return contributions, ledger

    def scatter(self, job: KeyedJob, contributions: Contributions, edges: Sequence[int]) -> None:
        if job.selection is not None:  # keys renamed to positions: the shards anew
            self.held = [
                _shipped(self.client, (contributions.for_keys(lo, hi), DropReport()))
                for lo, hi in itertools.pairwise(edges)
            ]

    def first_steps(self, edges: Sequence[int]) -> NDArray[np.int64]:
        client = self.client
        spans = zip(self.held, edges[:-1], edges[1:], strict=True)
        tasks = [client.submit(shard_first_steps, f, lo, hi, pure=False) for f, lo, hi in spans]
        return np.concatenate(client.gather(tasks))

    def place(self, position: NDArray[np.int64], edges: Sequence[int]) -> None:
        client = self.client
        renamed = _shipped(client, position)  # 8 bytes per key, to each worker once
        split = [client.submit(place_split, f, renamed, edges, pure=False) for f in self.held]
        self.held = [
            client.submit(
                join_placed,
                *[client.submit(_placed_piece, f, g, pure=False) for f in split],
                pure=False,
            )
            for g in range(len(edges) - 1)
        ]

    def select(self, job: KeyedJob, edges: Sequence[int]) -> NDArray[np.int64]:
        client, k = self.client, self.chunk_keys
        self.shipped = _shipped(client, job)
        spans = zip(self.held, edges[:-1], edges[1:], strict=True)
        tasks = [
            client.submit(select_shard, self.shipped, f, lo, hi, k, pure=False)
            for f, lo, hi in spans
        ]
        return np.concatenate(client.gather(tasks))

    def check(self, job: KeyedJob) -> None:
        client = self.client
        client.gather([client.submit(check_shard, self.shipped, f, None) for f in self.held])

    def release(self, job: KeyedJob, tasks: ReleaseTasks) -> Iterator[Released]:
        """Consecutive chunks of one shard per task, on the worker holding the shard: the
        whole shard when the workers write the parts, else at most :data:`RESULT_BYTES`
        of counts per task. The tasks are submitted now; their results come lazily."""
        client, edges, writer = self.client, tasks.edges, tasks.writer
        shipped = _shipped(client, job)
        shipped_writer = None if writer is None else _shipped(client, writer)
        if writer is None:  # the counts come to the client: bounded per task
            width = min(self.chunk_keys, job.mechanism.n_keys)
            per_task = max(1, RESULT_BYTES // (8 * (job.until - job.first + 1) * width))
        else:
            per_task = len(tasks.chunks) or 1
        futures = []
        for group in _tasks(tasks.chunks, edges, per_task):
            span = slice(group[0][0], group[-1][1])
            shard = self.held[int(np.searchsorted(edges, span.start, side="right")) - 1]
            base, buffers = tasks.noise(span)
            futures.append(
                client.submit(
                    release_chunks,
                    *(shipped, shard, group, base, buffers, shipped_writer),
                    wire=True,
                    pure=False,
                )
            )
        return _results(futures)


def _results(futures: list[Any]) -> Iterator[Released]:
    for fut in futures:
        got = fut.result()
        fut.release()
        yield got


def run_dask(events: Any, plan: RunPlan, runner: Dask) -> Ran:
    """Bound, sum, select and release on a Dask cluster
    (:func:`~dpcount.keyed.runners.drive`); a CSV row refused by a worker is named by its
    file line, as the embedded runner names it."""
    stack = ExitStack()
    ddf = None
    try:
        client = _client(runner.scheduler, runner.workers, stack)
        ddf = _dask_frame(events, plan.columns, runner.partitions)
        ran = drive(DaskScheduler(client, ddf, plan.output.chunk_keys), plan)
    except ValueError as err:
        located = None
        csv = isinstance(events, (str, os.PathLike)) and Path(events).suffix.lower() == ".csv"
        if csv and ddf is not None:
            located = _file_line(err, Path(events), ddf)
        stack.close()
        if located is not None:
            raise located from None
        raise
    except BaseException:
        stack.close()
        raise
    return dataclasses.replace(ran, chunks=closing(ran.chunks, stack))
