"""The keyed run's lifecycle, written once, and the runners that schedule its stages.

:func:`drive` is the lifecycle every runner shares: read what the public configuration
needs off the events (their time extremes for an omitted start, horizon or allowed
lateness; an open key set's candidates), fix the job (:func:`~dpcount.keyed.spec.build_spec`
and the released window), bound and sum each partition (which validates the events
before a secret file is created), load or create the secret, merge the partial sums
into shards of contiguous key chunks, place and select an open key set's keys, begin
the release (the released-up-to mark: the run's
:class:`~dpcount.keyed.session.RunSession`, held in the :class:`RunPlan`) and release
the key chunks where their shard lies (:mod:`dpcount.keyed.stages`). A runner
(:class:`Scheduler`) only says where each stage runs and how its results travel:

* :mod:`~dpcount.keyed.runners.embedded` — in process, one shard;
* :mod:`~dpcount.keyed.runners.dask` — Dask futures, shards on the workers;
* :mod:`~dpcount.keyed.runners.spark` — Spark RDDs; the driver never collects events.

Every noise sample is a pure function of (secret, configuration, key, position)
(:mod:`dpcount.keyed.engine`), never of a partition, a shard or a worker: the output's
bytes are the same on every runner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed import spec
from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.events import Contributions, DropReport, EventColumns
from dpcount.keyed.job import KeyedJob, job_of, key_positions, placed_job
from dpcount.keyed.selection import SelectionOutcome
from dpcount.keyed.session import Carry, RunSession
from dpcount.keyed.spec import build_spec
from dpcount.keyed.stages import Narrowed, hand_out, plan_release

__all__ = [
    "Ran",
    "ReleaseTasks",
    "RunPlan",
    "Scheduler",
    "closing",
    "drive",
    "run_on",
    "sum_reports",
]

#: one release task's chunks: (first key, counts — narrowed for the wire by a remote
#: task — or None once written, noise state)
Released = list[tuple[int, NDArray[Any] | Narrowed | None, NDArray[Any] | None]]


@dataclass(frozen=True)
class RunPlan:
    """A run's option groups with its session (:class:`~dpcount.keyed.session.RunSession`:
    the secret, the lock and mark, the stored state) and the output's resumable parts
    directory (None: no directory of parts)."""

    columns: EventColumns
    keys: spec.Keys
    steps: spec.Steps
    counting: spec.Counting
    bounds: spec.Bounds
    window: spec.Window
    output: spec.Output
    session: RunSession
    parts: Any = None

    @property
    def need_times(self) -> bool:
        """Whether the job reads the event times' extremes (start, horizon, watermark)."""
        s = self.steps
        return s.start is None or s.horizon is None or self.window.allowed_lateness is not None

    def prior_keys(self) -> tuple[Any, ...]:
        """An open key set's stored key table (:meth:`RunSession.prior_keys`)."""
        return self.session.prior_keys(self.keys.open)

    def job(self, times: pd.Series, key_values: pd.Series | None) -> tuple[KeyedJob, list[str]]:
        """The job releasing this run's window (``times``: the event times or their
        extremes; ``key_values``: an open key set's candidates), and the parameters
        read off the data."""
        spec = build_spec(
            self.columns,
            self.keys,
            self.steps,
            counting=self.counting,
            bounds=self.bounds,
            late=self.window.late,
            times=times,
            key_values=key_values,
            prior_keys=self.prior_keys(),
        )
        derived = list(spec.derived)
        w = self.window
        job = self.session.window(job_of(spec), w.until, times, w.allowed_lateness, derived)
        return job, derived


@dataclass(frozen=True)
class Ran:
    """What a runner hands to the output: the job, whether its secret was created, the
    parameters read off the data, the drop report, the released chunks (first key,
    counts of shape (steps, keys), or None once a worker wrote them) — lazily —, what
    the next run needs (None: no state kept) and the key selection's outcome."""

    job: KeyedJob
    created: bool
    derived: list[str]
    report: DropReport
    chunks: Iterator[tuple[int, Any]]
    carry: Carry | None
    outcome: SelectionOutcome | None


@dataclass(frozen=True)
class ReleaseTasks:
    """The release's key chunks (lo, hi, write) and shard ``edges``, the stored sums
    (``base``) and noise state (``buffers``) it continues from (None: from step 1), and
    the part writer (None: the counts go to the caller)."""

    chunks: list[tuple[int, int, bool]]
    edges: Sequence[int]
    base: NDArray[Any] | None = None
    buffers: NDArray[Any] | None = None
    writer: Any = None

    def noise(self, span: slice) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
        """The stored sums and noise state of the keys ``span``."""
        base, buffers = self.base, self.buffers
        return (None if base is None else base[span]), (
            None if buffers is None else buffers[:, span]
        )


class Scheduler(Protocol):
    """A runner's scheduling primitives, called by :func:`drive` in this order. The
    shards are the runner's to keep (futures, an RDD, a list): contiguous ranges of
    whole key chunks (:func:`~dpcount.keyed.stages.shard_edges`)."""

    def scan(self, time: str | None, key: str | None) -> tuple[pd.Series, pd.Series | None]:
        """Each partition's time extremes (``time``) and distinct keys (``key``)."""
        ...

    def shards(self, job: KeyedJob) -> int:
        """How many shards to make (one at unit level: a unit's keys bound together)."""
        ...

    def bound(self, job: KeyedJob, edges: Sequence[int]) -> DropReport:
        """Map every partition to its partial sums split by shard; their drop report."""
        ...

    def merge(self, job: KeyedJob) -> DropReport:
        """Reduce the partial sums into the shards (``job`` with its secret)."""
        ...

    def gather(self, job: KeyedJob) -> tuple[Contributions, UnitLedger | None]:
        """Every contribution (24 bytes per (key, step) with one) and the unit ledger."""
        ...

    def scatter(self, job: KeyedJob, contributions: Contributions, edges: Sequence[int]) -> None:
        """The driver's placed contributions back to the workers as shards."""
        ...

    def first_steps(self, edges: Sequence[int]) -> NDArray[np.int64]:
        """Each key's first counted step (8 bytes per key)."""
        ...

    def place(self, position: NDArray[np.int64], edges: Sequence[int]) -> None:
        """The shards' keys renamed to their positions, regrouped by ``edges``."""
        ...

    def select(self, job: KeyedJob, edges: Sequence[int]) -> NDArray[np.int64]:
        """Each placed shard's keys' selection steps, selected where the shard lies."""
        ...

    def check(self, job: KeyedJob) -> None:
        """Every running sum exact (no mark to digest the contributions for)."""
        ...

    def release(self, job: KeyedJob, tasks: ReleaseTasks) -> Iterator[Released]:
        """The release tasks' results, in key order."""
        ...


def _scan(scheduler: Scheduler, plan: RunPlan) -> tuple[pd.Series, pd.Series | None]:
    need_times, open_keys = plan.need_times, plan.keys.open
    if not (need_times or open_keys):
        return pd.Series([], dtype=np.int64), None  # times not used with start and horizon
    c = plan.columns
    return scheduler.scan(c.time if need_times else None, c.key if open_keys else None)


@dataclass
class _Settled:
    job: KeyedJob
    edges: Sequence[int]
    base: NDArray[Any] | None = None
    buffers: NDArray[Any] | None = None
    carry: Carry | None = None
    outcome: SelectionOutcome | None = None


def _settle_stored(s: Scheduler, plan: RunPlan, job: KeyedJob, count: int) -> _Settled:
    """A run continuing a stored state: the state's totals and the mark's input digest
    need every contribution, so the driver gathers them and the session begins the
    release as one process would (:meth:`~dpcount.keyed.session.RunSession.begin`), then
    scatters the placed shards back."""
    from dpcount.keyed.stages import shard_edges

    contributions, ledger = s.gather(job)
    chunk_keys, session = plan.output.chunk_keys, plan.session
    job, contributions, base, buffers = session.begin(job, contributions, ledger, chunk_keys)
    job = dataclasses.replace(job, ledger=None)  # the bounding had it
    edges = shard_edges(job.mechanism.n_keys, chunk_keys, count)
    s.scatter(job, contributions, edges)
    return _Settled(job, edges, base, buffers, session.carry, session.outcome)


def _settle_fresh(
    s: Scheduler, plan: RunPlan, job: KeyedJob, edges: Sequence[int], count: int
) -> _Settled:
    """A run from step 1 without a state: an open key set's keys placed by their first
    counted step (then name) and selected where their shards lie; the release begun."""
    from dpcount.keyed.stages import shard_edges

    outcome = None
    if job.selection is not None:
        position = key_positions(s.first_steps(edges), 0)
        job = placed_job(job, position)
        edges = shard_edges(job.mechanism.n_keys, plan.output.chunk_keys, count)
        s.place(position, edges)
        selected = s.select(job, edges)
        assert job.selection is not None
        shown = int((selected <= job.until).sum())
        outcome = SelectionOutcome(job.selection, job.mechanism.n_keys, shown)
        job = dataclasses.replace(job, selected=selected)
    if job.secret.path is not None:
        # the released-up-to mark's input digest needs every contribution
        contributions, _ = s.gather(job)
        plan.session.begin_placed(job, contributions)
    else:  # a testing secret has no mark
        s.check(job)
    return _Settled(job, edges, outcome=outcome)


def drive(s: Scheduler, plan: RunPlan) -> Ran:
    """The lifecycle of one run on the scheduler ``s`` (see the module docstring)."""
    from dpcount.keyed.stages import shard_edges

    times, key_values = _scan(s, plan)
    job, derived = plan.job(times, key_values)
    count = s.shards(job)
    chunk_keys = plan.output.chunk_keys
    edges = shard_edges(job.mechanism.n_keys, chunk_keys, count)
    report = s.bound(job, edges)  # validates the events before a secret is created
    job = plan.session.bind(job)  # the secret, and a stored ledger for the bounding
    report = report + s.merge(job)
    if plan.window.state is not None:
        settled = _settle_stored(s, plan, job, count)
    else:
        settled = _settle_fresh(s, plan, job, edges, count)
    job, carry = settled.job, settled.carry
    chunks, quiet, writer = plan_release(job, plan.parts, carry, chunk_keys, plan.output.time_label)
    tasks = ReleaseTasks(chunks, settled.edges, settled.base, settled.buffers, writer)
    results = s.release(job, tasks)
    n, progress = job.mechanism.n_keys, plan.output.progress

    def released() -> Iterator[tuple[int, Any]]:
        for got in results:
            yield from hand_out(got, n, chunk_keys, carry, quiet, progress)

    created = plan.session.created
    return Ran(job, created, derived, report, released(), carry, settled.outcome)


def sum_reports(reports: Iterable[DropReport]) -> DropReport:
    """The drop reports of the partitions or shards added up."""
    total = DropReport()
    for report in reports:
        total = total + report
    return total


def closing(chunks: Iterator[tuple[int, Any]], stack: ExitStack) -> Iterator[tuple[int, Any]]:
    """``chunks``, then ``stack`` closed (a cluster or session the run started), also
    when the consumer stops early."""
    with stack:
        yield from chunks


def run_on(runner: spec.Runner, events: Any, plan: RunPlan) -> Ran:
    """The run of ``plan`` over ``events`` on ``runner``."""
    if isinstance(runner, spec.Dask):
        from dpcount.keyed.runners.dask import run_dask

        return run_dask(events, plan, runner)
    if isinstance(runner, spec.Spark):
        from dpcount.keyed.runners.spark import run_spark

        return run_spark(events, plan, runner)
    if isinstance(runner, spec.Embedded):
        from dpcount.keyed.runners.embedded import run_embedded

        return run_embedded(events, plan)
    raise TypeError(f"runner must be Embedded(), Dask(...) or Spark(...), got {runner!r}")
