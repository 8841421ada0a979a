"""The embedded runner: every stage in process, over one partition and one shard.

The events are read whole (a frame, or a CSV/Parquet file by
:func:`~dpcount.keyed.events.read_events`), bounded and summed
(:func:`~dpcount.keyed.stages.bound_partition`), merged
(:func:`~dpcount.keyed.stages.merge_partials`) and released key chunk by key chunk,
lazily (:func:`~dpcount.keyed.stages.release_chunks`): memory is a few
(steps × ``chunk_keys``) arrays beside the events and their contributions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.events import Contributions, DropReport, parse_times
from dpcount.keyed.io import read_events
from dpcount.keyed.job import KeyedJob
from dpcount.keyed.runners import Ran, Released, ReleaseTasks, RunPlan, drive
from dpcount.keyed.selection import select_keys
from dpcount.keyed.stages import (
    bound_partition,
    check_shard,
    first_steps,
    merge_partials,
    release_chunks,
    renumber,
)

__all__ = ["EmbeddedScheduler", "run_embedded"]


class EmbeddedScheduler:
    """The stages in process: one partition (the whole frame), one shard."""

    def __init__(self, events: pd.DataFrame | str | os.PathLike[str], plan: RunPlan) -> None:
        columns = plan.columns
        frame = events if isinstance(events, pd.DataFrame) else read_events(events, columns)
        columns.check(list(frame.columns), "the events")
        self.frame = frame
        self.source = None if isinstance(events, pd.DataFrame) else str(events)
        # every time parsed (and refused with its file line) before the job is fixed
        self.times = parse_times(frame[columns.time], columns.time, self.source)
        self.chunk_keys = plan.output.chunk_keys
        self.partial: pd.DataFrame | None = None
        self.shard: tuple[Contributions, DropReport, UnitLedger | None] | None = None

    def scan(self, time: str | None, key: str | None) -> tuple[pd.Series, pd.Series | None]:
        return self.times, None if key is None else self.frame[key]

    def shards(self, job: KeyedJob) -> int:
        return 1

    def bound(self, job: KeyedJob, edges: Sequence[int]) -> DropReport:
        self.partial, report = bound_partition(job, self.frame, self.source)
        return report

    def merge(self, job: KeyedJob) -> DropReport:
        assert self.partial is not None
        self.shard = merge_partials(job, [self.partial])
        self.partial = None
        return self.shard[1]

    def _contributions(self) -> Contributions:
        assert self.shard is not None
        return self.shard[0]

    def gather(self, job: KeyedJob) -> tuple[Contributions, UnitLedger | None]:
        assert self.shard is not None
        return self.shard[0], self.shard[2]

    def scatter(self, job: KeyedJob, contributions: Contributions, edges: Sequence[int]) -> None:
        self.shard = (contributions, DropReport(), None)

    def first_steps(self, edges: Sequence[int]) -> NDArray[np.int64]:
        return first_steps(self._contributions(), edges[0], edges[-1])

    def place(self, position: NDArray[np.int64], edges: Sequence[int]) -> None:
        self.shard = (renumber(self._contributions(), position), DropReport(), None)

    def select(self, job: KeyedJob, edges: Sequence[int]) -> NDArray[np.int64]:
        selected, _, _ = select_keys(job, self._contributions(), self.chunk_keys)
        return selected

    def check(self, job: KeyedJob) -> None:
        check_shard(job, (self._contributions(), DropReport()), None)

    def release(self, job: KeyedJob, tasks: ReleaseTasks) -> Iterator[Released]:
        """One chunk at a time, lazily (the caller writes or keeps each before the next)."""
        shard = (self._contributions(), DropReport())
        for chunk in tasks.chunks:
            base, buffers = tasks.noise(slice(chunk[0], chunk[1]))
            yield release_chunks(job, shard, [chunk], base, buffers, tasks.writer)


def run_embedded(events: pd.DataFrame | str | os.PathLike[str], plan: RunPlan) -> Ran:
    """The run of ``plan`` in process (:func:`~dpcount.keyed.runners.drive`)."""
    return drive(EmbeddedScheduler(events, plan), plan)
