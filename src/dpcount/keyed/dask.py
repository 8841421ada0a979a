"""The Dask engine: the same results as the embedded engine, on any partitioning.

Work is split in two stages, both on the workers:

1. **Bounding and summing** (one task per input partition, reading its part of a
   Parquet or CSV file itself): map events to (key index, step), clip per event
   (event level) and sum per (key, step) — or per (unit, step, key) for unit
   bounding; each partition's sums are split into shards of whole key chunks and
   every shard's contributions are combined by one task (one shard holding all keys
   at unit level, where a unit's keys are bounded together). Integer sums do not
   depend on the partitioning, so the contributions are identical for any number
   of partitions (floating-point weights may differ in the last bits: use integer
   weights and discrete noise for bit-for-bit equality). The client receives the
   drop reports, and the contributions themselves only when the run keeps a state or
   a released-up-to mark (for the state's totals and the input digest; 24 bytes per
   (key, step) with a contribution) — never the events.
2. **Release** (one task per key chunk, reading its shard where it lies): the run's
   counting mechanism and its noise, whose every sample is a pure function of
   (secret, draw index, key) (:mod:`dpcount.keyed.engine`,
   :class:`~dpcount.keyed.prf.PRFSource`). A task that is retried, or rerun after a
   worker dies, recomputes exactly the same values; nothing is drawn from a
   per-worker or per-partition generator. The mechanism and the part writer are
   scattered to the workers once, not embedded in every task.

The run secret travels to the workers inside the tasks: the cluster must be as
trusted as the place where the raw events are kept.

``scheduler``: None starts a ``LocalCluster`` with ``workers`` worker processes
(one thread each) for the run; a string is a scheduler address
(``"tcp://host:8786"``); a ``distributed.Client`` is used as is. The LocalCluster
starts its workers without distributed's default ``MALLOC_TRIM_THRESHOLD_=65536``,
which made the release tasks 3-5x slower (large temporaries mapped afresh each
time); for a cluster of your own, start the workers with
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_`` unset likewise.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.engine import KeyedMechanism, chunk_bounds
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    _line_numbers,
    check_running,
    parse_times,
)
from dpcount.keyed.job import (
    Carry,
    KeyedJob,
    SecretArg,
    begin_release,
    continue_from,
    load_base,
    make_job,
)

__all__ = ["run_dask"]


def _release_task(
    mechanism: KeyedMechanism,
    secret: bytes,
    contributions: Contributions,
    lo: int,
    hi: int,
    window: tuple[int, int],
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    keep_state: bool,
    writer: Any = None,
    keys: tuple[Any, ...] = (),
) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
    """One key chunk. The task carries the mechanism, the secret, the chunk's noise state
    (``buffers``) and (to write its own part file) the chunk's keys — never the whole key
    universe. Returns the counts (or None after writing them with ``writer``;
    ``writer=False``: not written) and the chunk's noise state after the window (None
    unless ``keep_state`` and the mechanism keeps one)."""
    first, last = window
    values, ends = mechanism.release_with_state(
        secret,
        contributions,
        lo,
        hi,
        first=first,
        last=last,
        base=base,
        noise_state=buffers,
        keep_state=keep_state,
    )
    if writer is None:
        return values, ends
    if writer is not False:
        writer.write(lo, values, keys)
    return None, ends


def _shard_edges(n_keys: int, chunk_keys: int, shards: int) -> list[int]:
    """Key edges of ``shards`` contiguous shards made of whole key chunks."""
    starts = [lo for lo, _ in chunk_bounds(n_keys, chunk_keys)]
    per = -(-len(starts) // max(1, min(shards, len(starts))))
    return [*starts[::per], n_keys]


def _split_rows(
    prepared: tuple[pd.DataFrame, DropReport], edges: Sequence[int]
) -> list[pd.DataFrame]:
    """One partition's partial sums split by shard (``edges``: the shards' key edges)."""
    rows = prepared[0]
    if len(edges) == 2:
        return [rows]
    shard = np.searchsorted(np.asarray(edges[1:-1]), rows["key"].to_numpy(), side="right")
    order = np.argsort(shard, kind="stable")
    cuts = np.searchsorted(shard[order], np.arange(1, len(edges) - 1))
    return [rows.iloc[part] for part in np.split(order, cuts)]


def _finish_shard(job: KeyedJob, *pieces: pd.DataFrame) -> tuple[Contributions, DropReport]:
    return job.finish(list(pieces))


def _check_shard(
    job: KeyedJob, shard: tuple[Contributions, DropReport], base: NDArray[Any] | None
) -> None:
    """:func:`check_running` on one shard (no stored state: ``base`` is None)."""
    check_running(shard[0], base, job.universe.keys, job.first, job.until)


def _concat(shards: Sequence[Contributions]) -> Contributions:
    """Shards in key order: the whole run's contributions, sorted by (key, step)."""
    return Contributions(
        np.concatenate([c.key for c in shards]),
        np.concatenate([c.step for c in shards]),
        np.concatenate([c.value for c in shards]),
    )


def _time_extremes(frame: pd.DataFrame, column: str) -> pd.Series:
    times = parse_times(frame[column], column)
    return times.iloc[[int(times.argmin()), int(times.argmax())]] if len(times) else times


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
    :func:`dpcount.keyed.events.read_events` numbers them) of the CSV row it names by
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
    lines = _line_numbers(path, int(lengths.sum()))
    name = f"data row {position + 1}" if lines is None else f"line {int(lines[position])}"
    return ValueError(str(err).replace(found.group(0), name))


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
            ddf = dd.read_parquet(str(p), columns=columns.names())
        elif suffix == ".csv":
            columns.check(list(pd.read_csv(p, nrows=0).columns), str(p))
            dtype = {columns.key: str, **({columns.unit: str} if columns.unit else {})}
            ddf = dd.read_csv(
                str(p), usecols=columns.names(), dtype=dtype, keep_default_na=False, na_values=[""]
            )
            ddf = ddf.map_partitions(_number_rows, meta=ddf._meta)
        else:
            raise ValueError(f"events file {p} must end in .csv or .parquet")
    elif isinstance(events, pd.DataFrame):
        columns.check(list(events.columns), "the events")
        ddf = dd.from_pandas(events, npartitions=partitions or 2, sort=False)  # type: ignore[no-untyped-call]
    else:
        ddf = events
        columns.check(list(ddf.columns), "the events")
    if partitions is not None and ddf.npartitions != partitions:
        ddf = ddf.repartition(npartitions=partitions)
    return ddf


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
    stack.enter_context(
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None})
    )
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


def run_dask(
    events: Any,
    common: dict[str, Any],
    secret: SecretArg,
    *,
    parts: Any = None,
    time_label: str = "time",
    chunk_keys: int,
    partitions: int | None,
    scheduler: Any,
    workers: int,
    progress: Callable[[int, int], None] | None,
    state: str | os.PathLike[str] | None = None,
    until: int | None = None,
    guard: Any = None,
) -> tuple[Any, bool, list[str], DropReport, Iterator[tuple[int, Any]], Carry | None]:
    """Bound, sum and release on a Dask cluster; see :func:`dpcount.keyed.keyed_counts`."""
    from dask.base import compute
    from dask.delayed import delayed

    columns: EventColumns = common["columns"]
    stack = ExitStack()
    ddf = None
    try:
        client = _client(scheduler, workers, stack)
        ddf = _dask_frame(events, columns, partitions)
        pieces = ddf.to_delayed()
        if common["start"] is None or common["horizon"] is None:  # read them off the data
            extremes = compute(*[delayed(_time_extremes)(p, columns.time) for p in pieces])  # type: ignore[no-untyped-call]
            times = pd.concat(list(extremes), ignore_index=True)
        else:
            times = pd.Series([], dtype=np.int64)  # not used: start and horizon are given
        job, derived = make_job(times=times, **common)
        job = continue_from(job, state, until)
        prepared = client.compute([delayed(job.prepare)(p) for p in pieces])
        report = DropReport()
        for part_report in client.gather(
            [client.submit(operator.itemgetter(1), f) for f in prepared]
        ):
            report = report + part_report
        job, created = job.with_secret(secret)
        base, buffers = load_base(job, state)
        n = job.mechanism.n_keys
        # unit level bounds each unit over all its keys: one shard
        count = 1 if job.max_keys is not None else 4 * max(1, len(client.ncores()))
        edges = _shard_edges(n, chunk_keys, count)
        splits = [client.submit(_split_rows, f, edges, pure=False) for f in prepared]
        shards = [
            client.submit(
                _finish_shard,
                job,
                *[client.submit(operator.getitem, part, g, pure=False) for part in splits],
                pure=False,
            )
            for g in range(len(edges) - 1)
        ]
        for shard_report in client.gather(
            [client.submit(operator.itemgetter(1), f) for f in shards]
        ):
            report = report + shard_report
        del prepared, splits  # the shards hold all the workers need
        contributions_of = [client.submit(operator.itemgetter(0), f) for f in shards]
        carry = None
        if guard is not None or state is not None:
            contributions = _concat(client.gather(contributions_of))
            begin_release(guard, job, created, contributions, base, buffers, state)
            carry = None if state is None else Carry.start(job, contributions, base, chunk_keys)
            del contributions
        else:
            client.gather([client.submit(_check_shard, job, f, None) for f in shards])
        del shards
        need_state = carry is not None and carry.buffers is not None
        parts = None if parts is None else parts.for_job(job)
        done = set() if parts is None else parts.open(job)
        bounds = [
            (lo, hi) for lo, hi in chunk_bounds(n, chunk_keys) if need_state or lo not in done
        ]
        writer = None if parts is None else parts.writer(job, time_label)
        keys = job.universe.keys
        # once to every worker, not pickled into each task
        mechanism = client.scatter(job.mechanism, broadcast=True)
        shipped_writer = None if writer is None else client.scatter(writer, broadcast=True)

        def outlet(lo: int, hi: int) -> tuple[Any, ...]:
            if writer is None:
                return ()
            return (False,) if lo in done else (shipped_writer, keys[lo:hi])

        def shard_of(lo: int) -> Any:
            return contributions_of[int(np.searchsorted(edges, lo, side="right")) - 1]

        futures = [
            client.submit(
                _release_task,
                mechanism,
                job.secret.prf_key,
                shard_of(lo),
                lo,
                hi,
                (job.first, job.until),
                None if base is None else base[lo:hi],
                None if buffers is None else buffers[:, lo:hi],
                job.keep_state,
                *outlet(lo, hi),
                pure=False,
            )
            for lo, hi in bounds
        ]
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

    def chunks() -> Iterator[tuple[int, Any]]:
        with stack:
            for (lo, hi), fut in zip(bounds, futures, strict=True):
                got, ends = fut.result()
                values = None if got is None else np.asarray(got)
                fut.release()
                if carry is not None and carry.buffers is not None:
                    carry.buffers[:, lo:hi] = ends
                if lo in done:  # written by an earlier attempt; run for its noise state
                    continue
                yield lo, values
                if progress is not None:
                    progress(hi, n)

    return job, created, derived, report, chunks(), carry
