"""Event time in keyed runs: where late events go, and which steps are complete.

Events are placed at the step of their **event time** (the time column), whatever
file or run they arrive in. A run that continues an earlier one
(:func:`dpcount.keyed.run.keyed_counts` with ``state=``, or
:func:`dpcount.keyed.incremental.run_incremental`) has already released steps
1..first−1; an event of one of those steps arrives after its step was released:
it is *late*, and the run's **lateness policy** (``late=``, ``--late``) decides:

* ``"refuse"`` (the default): the run stops with a ValueError naming the event's
  file and line (a frame: its 1-based data row) — nothing is released;
* ``"next-step"``: the event is counted in step ``first``, the first step still
  open, and the report counts it (``report.late_moved``). The contribution bounds
  apply *after* moving: at event level a moved event is one event of weight
  ≤ ``max_weight`` in one step, as any other; at unit-step level a unit's moved
  events join its events of step ``first`` and are bounded with them (≤ ``max_keys``
  keys, ≤ ``max_weight`` per key in that step). So the per-step sensitivity, and the
  guarantee, are unchanged — stated for the events *as placed* (a moved event is an
  event of the step it is counted in).

A late event is never dropped silently.

**Complete steps and the watermark.** ``allowed_lateness`` (``--allowed-lateness``)
lets the events decide how far a run releases: the *watermark* is the latest event
time read so far, and step s (covering [b_s, b_{s+1})) is complete once
b_{s+1} + allowed_lateness ≤ watermark; the run releases the complete steps (up to
the horizon). An event that arrives for a step after it was released is late (see
above): the allowed lateness is how long the run waits for stragglers before
releasing. The watermark is the latest event time, so **which steps a run releases
depends on the data** (not private, like a start or horizon read off the data: the
result lists it in ``data_derived``); pass ``until=`` for a release schedule fixed in
advance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dpcount._time import parse_step
from dpcount.keyed.events import TimeBuckets

__all__ = ["LATE_POLICIES", "check_late", "complete_through", "parse_lateness"]

#: what a run does with an event of an already released step
LATE_POLICIES = ("refuse", "next-step")


def check_late(late: object, flag: str = "late") -> str:
    """``late`` if it is one of :data:`LATE_POLICIES` (ValueError naming ``flag``)."""
    if late not in LATE_POLICIES:
        raise ValueError(f"{flag} must be one of {', '.join(LATE_POLICIES)}, got {late!r}")
    return str(late)


def parse_lateness(value: Any, buckets: TimeBuckets, flag: str = "allowed_lateness") -> int:
    """The allowed lateness in the times' units: nanoseconds for dates (a fixed duration
    such as ``"2h"``, ``"1D"``; calendar steps are refused: a month is no fixed wait),
    a whole number for integer times; 0 waits for nothing."""
    if isinstance(value, bool):
        raise TypeError(f"{flag} must be a duration or a whole number, got {value!r}")
    if value in (0, "0"):
        return 0
    step = parse_step(value, flag)
    if buckets.width.kind == "number":
        if step.kind != "number" or not step.width.is_integer():
            raise ValueError(f"{flag} must be a whole number for integer times, got {value!r}")
        return int(step.width)
    if step.kind != "fixed" or step.calendar:
        raise ValueError(
            f"{flag} must be a fixed duration (such as 2h or 1D) for dates, got {value!r}"
        )
    return step.nanos


def complete_through(buckets: TimeBuckets, horizon: int, watermark: Any, lateness: int) -> int:
    """The last step s ≤ ``horizon`` with b_{s+1} + ``lateness`` ≤ ``watermark`` (0: none).

    ``watermark``: the latest event time (an int, or a pandas Timestamp)."""
    ends = buckets.times(2, horizon + 1)
    if buckets.width.kind == "number":
        limit = int(watermark) - lateness
        return int(np.searchsorted(ends, limit, side="right"))
    stamp = pd.Timestamp(watermark).as_unit("ns")
    limit_ns = int(stamp.value) - lateness
    return int(np.searchsorted(ends.view(np.int64), limit_ns, side="right"))
