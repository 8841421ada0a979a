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
   does exactly what the embedded engine does (:func:`~dpcount.keyed.job.settle`):
   places the keys new in this run after the stored key table
   (:meth:`~dpcount.keyed.state.RunState.peek_keys` starts the universe), extends the
   stored sums and noise states to them, selects continuing the stored selection steps
   and selection noise state, and sends the placed contributions back to the workers
   as shards for the release. With run-level unit bounds (``unit_scope="run"``) the
   stored unit ledger travels with the job to the (single) bounding shard, which
   returns the ledger after this run's steps for the next state.
3. **Release** (one task per run of consecutive key chunks of a shard, on the
   worker holding the shard: the whole shard when the workers write the parts, else
   at most :data:`RESULT_BYTES` of counts per task): the embedded engine, chunk by
   chunk — the run's counting mechanism and its noise, whose every sample is a pure
   function of (secret, configuration, key, position) (:mod:`dpcount.keyed.engine`,
   :class:`~dpcount.keyed.prf.PRFSource`). A task that is retried, or rerun after a
   worker dies, recomputes exactly the same values; nothing is drawn from a
   per-worker or per-partition generator.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import UnitLedger
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
    EngineRun,
    KeyedJob,
    SecretArg,
    begin_release,
    first_steps,
    key_positions,
    make_job,
    placed_job,
    release_window,
    renumber,
    settle,
    stored_keys,
    with_stored,
)
from dpcount.keyed.selection import SelectionOutcome, select_keys
from dpcount.keyed.state import RunState

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
    keys: Sequence[Any] = (),
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


def _release_chunks(
    job: KeyedJob,
    shard: tuple[Contributions, DropReport],
    chunks: Sequence[tuple[int, int, bool]],
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    writer: Any = None,
) -> list[tuple[int, NDArray[Any] | None, NDArray[Any] | None]]:
    """The embedded engine on consecutive key chunks of one shard, on the worker that
    holds the shard: for each chunk (lo, hi, write), (lo, counts or None once written by
    ``writer``, its noise state after the window). ``write`` False: computed for its
    noise state only (its part exists). ``base``, ``buffers``: of the keys from the
    first chunk's lo to the last chunk's hi."""
    contributions = shard[0]
    origin = chunks[0][0]
    out: list[tuple[int, NDArray[Any] | None, NDArray[Any] | None]] = []
    for lo, hi, write in chunks:
        own = slice(lo - origin, hi - origin)
        values, ends = _release_task(
            job.mechanism,
            job.secret.prf_key,
            contributions.for_keys(lo, hi),
            lo,
            hi,
            (job.first, job.until),
            None if base is None else base[own],
            None if buffers is None else buffers[:, own],
            job.keep_state,
            *((False,) if writer is not None and not write else ()),
            *((writer, job.universe.keys[lo:hi]) if writer is not None and write else ()),
        )
        out.append((lo, values, ends))
    return out


def _shard_edges(n_keys: int, chunk_keys: int, shards: int) -> list[int]:
    """Key edges of ``shards`` contiguous shards made of whole key chunks.

    A shard is a function of the key index alone (never of the input partition): its
    keys' noise is computed where the shard lies, by the same pure function of (secret,
    configuration, key, position) as anywhere else. Contiguous ranges of whole chunks
    rather than a hash of each key: the PRF computes noise for aligned blocks of
    ``key_block`` keys, so scattering a block's keys over shards would make every
    worker compute every block."""
    starts = [lo for lo, _ in chunk_bounds(n_keys, chunk_keys)]
    count = max(1, min(shards, len(starts)))
    # ``count`` shards whose chunk counts differ by at most one (49 chunks in 8 shards:
    # 6 or 7 each; a fixed ceil(49 / 8) = 7 per shard made 7 shards, 4 on one worker of
    # two and 3 on the other, which then idled for a shard's time)
    return [*(starts[i * len(starts) // count] for i in range(count)), n_keys]


def _prepare_split(
    job: KeyedJob, frame: pd.DataFrame, edges: Sequence[int]
) -> tuple[list[pd.DataFrame], DropReport]:
    """One input partition mapped, clipped and summed (:meth:`KeyedJob.prepare`), its
    partial sums split by shard (``edges``: the shards' key edges)."""
    rows, report = job.prepare(frame)
    if len(edges) == 2:
        return [rows], report
    shard = np.searchsorted(np.asarray(edges[1:-1]), rows["key"].to_numpy(), side="right")
    order = np.argsort(shard, kind="stable")
    cuts = np.searchsorted(shard[order], np.arange(1, len(edges) - 1))
    return [rows.iloc[part] for part in np.split(order, cuts)], report


def _piece(prepared: tuple[list[pd.DataFrame], DropReport], shard: int) -> pd.DataFrame:
    return prepared[0][shard]


def _finish_shard(job: KeyedJob, *pieces: pd.DataFrame) -> tuple[Contributions, DropReport]:
    return job.finish(list(pieces))


def _finish_run_shard(
    job: KeyedJob, *pieces: pd.DataFrame
) -> tuple[Contributions, DropReport, UnitLedger | None]:
    """:func:`_finish_shard` and the unit ledger after the run's steps (run-level bounds,
    continuing the stored ``job.ledger``; None without them). The tasks that read a
    shard take its first two items, so this shard serves them as well."""
    return job.finish_run(list(pieces))


def _settle_stored(
    client: Any,
    job: KeyedJob,
    created: bool,
    stored: RunState | None,
    shards: list[Any],
    chunk_keys: int,
    count: int,
    guard: Any,
    state: str | os.PathLike[str],
) -> tuple[
    KeyedJob,
    list[Any],
    list[int],
    NDArray[Any] | None,
    NDArray[Any] | None,
    Carry | None,
    SelectionOutcome | None,
]:
    """A run continuing a stored ``state``: the state's totals and the mark's input
    digest need every contribution (24 bytes per (key, step) with one), so the client
    gathers them (and the unit ledger) from the shards and does what the embedded engine
    does between bounding and release (:func:`~dpcount.keyed.job.settle`: an open key
    set's keys placed after the stored key table, its selection continuing the stored
    selection counter, the mark, the carry). An open key set's placed contributions
    then go back to the workers as shards of contiguous positions (``count`` of them).
    Returns the job, the shards and their key edges, the running sums and noise state
    the release continues from, the carry and the selection outcome."""
    contributions = _concat(
        client.gather([client.submit(operator.itemgetter(0), f) for f in shards])
    )
    ledger = None
    if job.run_bound is not None:  # a unit's keys are bounded together: in one shard
        assert len(shards) == 1
        ledger = client.gather(client.submit(operator.itemgetter(2), shards[0]))
    job, contributions, base, buffers, carry, outcome = settle(
        job, created, stored, contributions, ledger, chunk_keys, guard, state
    )
    edges = _shard_edges(job.mechanism.n_keys, chunk_keys, count)
    if job.selection is not None:  # keys renamed to positions: the shards anew
        shards = [
            _shipped(client, (contributions.for_keys(lo, hi), DropReport()))
            for lo, hi in itertools.pairwise(edges)
        ]
    return job, shards, edges, base, buffers, carry, outcome


def _check_shard(
    job: KeyedJob, shard: tuple[Contributions, DropReport], base: NDArray[Any] | None
) -> None:
    """:func:`check_running` on one shard (no stored state: ``base`` is None)."""
    check_running(shard[0], base, job.universe.keys, job.first, job.until)


def _first_steps(shard: tuple[Contributions, DropReport], lo: int, hi: int) -> NDArray[np.int64]:
    """The first counted step of each key [lo, hi) of one shard (8 bytes per key)."""
    return first_steps(shard[0], lo, hi)


def _place_split(
    shard: tuple[Contributions, DropReport], position: NDArray[np.int64], edges: Sequence[int]
) -> list[Contributions]:
    """One shard's contributions with keys renamed to their positions in the key table
    (:func:`~dpcount.keyed.job.renumber`), split by the placed shards' key ``edges``."""
    placed = renumber(shard[0], position)
    cuts = np.searchsorted(placed.key, edges[1:-1])
    return [
        Contributions(k, s, v)
        for k, s, v in zip(
            np.split(placed.key, cuts),
            np.split(placed.step, cuts),
            np.split(placed.value, cuts),
            strict=True,
        )
    ]


def _placed_piece(pieces: list[Contributions], shard: int) -> Contributions:
    return pieces[shard]


def _join_placed(*pieces: Contributions) -> tuple[Contributions, DropReport]:
    """One placed shard: its pieces from every shard, sorted by (key, step) (each key
    lies in one piece; the reports were gathered from the shards before placement)."""
    joined = _concat(pieces)
    order = np.lexsort((joined.step, joined.key))
    return Contributions(joined.key[order], joined.step[order], joined.value[order]), DropReport()


def _select_shard(
    job: KeyedJob, shard: tuple[Contributions, DropReport], lo: int, hi: int, chunk_keys: int
) -> NDArray[np.int64]:
    """Key selection of the keys [lo, hi) of one placed shard: their selection steps
    (:func:`~dpcount.keyed.selection.select_keys` on the shard's contributions; the
    other keys have none, so it skips their chunks)."""
    selected, _, _ = select_keys(job, shard[0], chunk_keys)
    return selected[lo:hi]


def _concat(shards: Sequence[Contributions]) -> Contributions:
    """Shards in key order: the whole run's contributions, sorted by (key, step)."""
    return Contributions(
        np.concatenate([c.key for c in shards]),
        np.concatenate([c.step for c in shards]),
        np.concatenate([c.value for c in shards]),
    )


def _scan(frame: pd.DataFrame, time: str | None, key: str | None) -> tuple[pd.Series, pd.Series]:
    """One partition's earliest and latest times (``time``) and distinct keys (``key``;
    an open key set's candidates), for what the job needs before the events are read."""
    times = pd.Series([], dtype=np.int64) if time is None else _time_extremes(frame, time)
    keys = pd.Series([], dtype=object) if key is None else pd.Series(pd.unique(frame[key]))
    return times, keys


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
    name += "" if f" of {path}" in str(err) else f" of {path}"
    return ValueError(str(err).replace(found.group(0), name))


#: most (uncompressed, encoded) bytes of Parquet row groups read into one input
#: partition; a larger row group is a partition of its own
PARQUET_BLOCK = 32 * 2**20


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
            dtype = {columns.key: str, **({columns.unit: str} if columns.unit else {})}
            ddf = dd.read_csv(
                str(p), usecols=columns.names(), dtype=dtype, keep_default_na=False, na_values=[""]
            )
            ddf = ddf.map_partitions(_number_rows, meta=ddf._meta)
        else:
            raise ValueError(f"events file {p} must end in .csv or .parquet")
    elif isinstance(events, pd.DataFrame):
        columns.check(list(events.columns), "the events")
        import dask.config

        # the frame's values as they are: Dask otherwise turns object columns into
        # strings, so key 1 became "1" and missed the universe's 1 (counted as unknown)
        with dask.config.set({"dataframe.convert-string": False}):
            ddf = dd.from_pandas(events, npartitions=partitions or 2, sort=False)  # type: ignore[no-untyped-call]
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
    allowed_lateness: Any = None,
) -> EngineRun:
    """Bound, sum, select and release on a Dask cluster; see
    :func:`dpcount.keyed.keyed_counts` (``allowed_lateness``: the watermark from the
    latest event time, read off every partition as the embedded engine reads it)."""
    from dask.base import compute
    from dask.delayed import delayed

    columns: EventColumns = common["columns"]
    stack = ExitStack()
    ddf = None
    try:
        client = _client(scheduler, workers, stack)
        ddf = _dask_frame(events, columns, partitions)
        pieces = ddf.to_delayed()
        need_times = (
            common["start"] is None or common["horizon"] is None or allowed_lateness is not None
        )
        open_keys = common["keys"] is None
        times = pd.Series([], dtype=np.int64)  # not used when start and horizon are given
        key_values = None
        if need_times or open_keys:  # read them off the data, on the workers
            scans = compute(  # type: ignore[no-untyped-call]
                *[
                    delayed(_scan)(
                        p, columns.time if need_times else None, columns.key if open_keys else None
                    )
                    for p in pieces
                ]
            )
            if need_times:
                times = pd.concat([t for t, _ in scans], ignore_index=True)
            if open_keys:
                key_values = pd.concat([k for _, k in scans], ignore_index=True)
        prior = stored_keys(common, state)
        job, derived = make_job(times=times, key_values=key_values, prior_keys=prior, **common)
        job = release_window(job, state, until, times, allowed_lateness, derived)
        n = job.mechanism.n_keys
        # a unit's bound covers all its keys: one shard at unit level
        count = 1 if job.max_keys is not None else 4 * max(1, len(client.ncores()))
        edges = _shard_edges(n, chunk_keys, count)
        # the job (with its key universe) goes to each worker once, not into each task
        shipped = _shipped(client, job)
        frames = client.compute(pieces)
        prepared = [client.submit(_prepare_split, shipped, f, edges, pure=False) for f in frames]
        # each input partition is dropped once its task has run, not held to the end of
        # the stage (the scheduler keeps the lineage while tasks depend on it)
        del frames
        report = DropReport()
        for part_report in client.gather(
            [client.submit(operator.itemgetter(1), f) for f in prepared]
        ):
            report = report + part_report  # validates the events before a secret is created
        job, created = job.with_secret(secret)
        job, stored = with_stored(job, state)  # a stored unit ledger goes to the bounding
        base, buffers = None, None  # continuing a state: from settle (below)
        shipped = _shipped(client, job)  # now with the run secret
        shards = [
            client.submit(
                _finish_shard if state is None else _finish_run_shard,
                shipped,
                *[client.submit(_piece, f, g, pure=False) for f in prepared],
                pure=False,
            )
            for g in range(len(edges) - 1)
        ]
        del prepared  # likewise: each partition's sums go once the shards have them
        for shard_report in client.gather(
            [client.submit(operator.itemgetter(1), f) for f in shards]
        ):
            report = report + shard_report
        outcome, carry = None, None
        if state is not None:
            job, shards, edges, base, buffers, carry, outcome = _settle_stored(
                client, job, created, stored, shards, chunk_keys, count, guard, state
            )
            n = job.mechanism.n_keys
            # the release needs no unit ledger (the bounding had it): not shipped again
            shipped = _shipped(client, dataclasses.replace(job, ledger=None))
        elif job.selection is not None:
            # the key table: keys placed by their first counted step, then name, as the
            # embedded engine places them (:func:`~dpcount.keyed.job.place_keys`)
            first = np.concatenate(
                client.gather(
                    [
                        client.submit(_first_steps, f, lo, hi, pure=False)
                        for f, lo, hi in zip(shards, edges[:-1], edges[1:], strict=True)
                    ]
                )
            )
            position = key_positions(first, 0)
            job = placed_job(job, position)
            plan = job.selection
            assert plan is not None
            n = job.mechanism.n_keys
            edges = _shard_edges(n, chunk_keys, count)
            renamed = _shipped(client, position)  # 8 bytes per key, to each worker once
            split = [client.submit(_place_split, f, renamed, edges, pure=False) for f in shards]
            shards = [
                client.submit(
                    _join_placed,
                    *[client.submit(_placed_piece, f, g, pure=False) for f in split],
                    pure=False,
                )
                for g in range(len(edges) - 1)
            ]
            del split
            shipped = _shipped(client, job)
            selected = np.concatenate(
                client.gather(
                    [
                        client.submit(_select_shard, shipped, f, lo, hi, chunk_keys, pure=False)
                        for f, lo, hi in zip(shards, edges[:-1], edges[1:], strict=True)
                    ]
                )
            )
            outcome = SelectionOutcome(plan, n, int((selected <= job.until).sum()))
            job = dataclasses.replace(job, selected=selected)
        if state is None and job.secret.path is not None:
            # the released-up-to mark's input digest needs every contribution (24 bytes
            # per (key, step) with one); a testing secret has no mark
            contributions = _concat(
                client.gather([client.submit(operator.itemgetter(0), f) for f in shards])
            )
            begin_release(guard, job, created, contributions, base, buffers, state)
            del contributions
        elif state is None:
            client.gather([client.submit(_check_shard, shipped, f, None) for f in shards])
        need_state = carry is not None and carry.buffers is not None
        parts = None if parts is None else parts.for_job(job)
        done = set() if parts is None else parts.open(job)

        def shown(lo: int, hi: int) -> bool:  # a key of the chunk is released
            return job.selected is None or bool((job.selected[lo:hi] <= job.until).any())

        # (lo, hi, write); not written (its part exists, or no key of it is selected):
        # released for its noise state only, which the state needs
        chunks = [
            (lo, hi, lo not in done and shown(lo, hi))
            for lo, hi in chunk_bounds(n, chunk_keys)
            if need_state or (lo not in done and shown(lo, hi))
        ]
        quiet = {lo for lo, _, write in chunks if not write}
        writer = None if parts is None else parts.writer(job, time_label)
        shipped_writer = None if writer is None else _shipped(client, writer)
        if writer is None:  # the counts come to the client: bounded per task
            chunk_bytes = 8 * (job.until - job.first + 1) * min(chunk_keys, n)
            per_task = max(1, RESULT_BYTES // chunk_bytes)
        else:
            per_task = len(chunks) or 1
        groups = _tasks(chunks, edges, per_task)

        def shard_of(lo: int) -> Any:
            return shards[int(np.searchsorted(edges, lo, side="right")) - 1]

        def span(group: list[tuple[int, int, bool]]) -> slice:
            return slice(group[0][0], group[-1][1])

        futures = [
            client.submit(
                _release_chunks,
                shipped,
                shard_of(group[0][0]),
                group,
                None if base is None else base[span(group)],
                None if buffers is None else buffers[:, span(group)],
                shipped_writer,
                pure=False,
            )
            for group in groups
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

    def released() -> Iterator[tuple[int, Any]]:
        with stack:
            for fut in futures:
                got = fut.result()
                fut.release()
                for lo, values, ends in got:
                    hi = lo + min(chunk_keys, n - lo)
                    if carry is not None and carry.buffers is not None:
                        carry.buffers[:, lo:hi] = ends
                    if lo in quiet:  # run for its noise state only
                        continue
                    yield lo, None if values is None else np.asarray(values)
                    if progress is not None:
                        progress(hi, n)

    return job, created, derived, report, released(), carry, outcome
