"""An event log summed per time step: the one bucketing of ``dpcount count --step``
and ``dpcount.frame.private_counts(step=)``.

Each row is one event. Rows are filtered by ``--where`` conditions (a row that
fails one counts 0 but keeps its time, so the steps span the whole log), bounded
(each row's value is cut to [−S, S], S the step sensitivity, or refused), and
summed per step k = 1..n from a start and a horizon T, given or read off the whole
log. Rows outside steps 1..T (before the start or after the horizon) are dropped
and reported, as ``dpcount keyed`` drops the events outside its steps: one rule for
every front end.

Privacy: with every row cut to |v| ≤ S, two logs that differ in one row (one
event, added, removed or changed within the bound) give step sums that differ at
one step by at most S, the step sensitivity the counting mechanism is calibrated
for (event-level privacy; Dwork, Naor, Pitassi, Rothblum, "Differential privacy
under continual observation", STOC 2010, §2: one event per step changes one step).
The numbers of rows cut and dropped are exact, not private: for whoever runs the
job, not for publication.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcount._time import Clock

__all__ = [
    "ABOVE_POLICIES",
    "StepSums",
    "bound_rows",
    "bound_text",
    "cut_note",
    "outside_note",
    "sum_steps",
]

#: a row above the bound: cut it to the bound (and count it), or stop with an error
ABOVE_POLICIES = ("cut", "error")


def bound_rows(values: NDArray[np.float64], bound: float) -> tuple[NDArray[np.float64], int, float]:
    """Every value cut to [−``bound``, ``bound``], the number of values cut and the
    absolute weight removed (as ``dpcount keyed`` cuts an event to ``max_weight``)."""
    over = np.abs(values) > bound
    excess = float((np.abs(values[over]) - bound).sum())
    return np.clip(values, -bound, bound), int(over.sum()), excess


def bound_text(bound: float, flag: str) -> str:
    """The per-event bound of the guarantee (``flag``: how the front end spells S)."""
    return (
        f"each row is one event, its value cut to at most {bound:g} in absolute value "
        f"({flag}): logs that differ in one row differ at one step by at most {bound:g}"
    )


def cut_note(n: int, weight: float, bound: float, flag: str) -> str:
    """How many rows were cut (``dpcount keyed``'s "cut: N contributions above ...")."""
    return (
        f"cut: {n} row(s) above {flag} {bound:g} in absolute value (weight {weight:g}) "
        "(exact, not private)"
    )


def outside_note(n: int, horizon: int, horizon_flag: str, start_flag: str | None) -> str:
    """How many rows fell outside steps 1..T and were dropped (``start_flag``: the
    spelling of the start, None when there is none: rows are steps)."""
    where = f"after {horizon_flag} {horizon}"
    if start_flag is not None:
        where = f"outside steps 1..{horizon}, before {start_flag} or {where}"
    return f"dropped: {n} row(s) {where} (exact, not private)"


@dataclass
class StepSums:
    """Per-step sums 1..n of a log (:func:`sum_steps`) and what was cut or dropped."""

    sums: NDArray[np.float64]
    clock: Clock
    cut: int = 0
    cut_weight: float = 0.0
    outside: int = 0

    def labels(self) -> list[str]:
        """Each step's label as text (:meth:`Clock.label`)."""
        return [self.clock.label(k) for k in range(1, len(self.sums) + 1)]


@dataclass(frozen=True)
class Bucketing:
    """How to bucket: the step spelling, the start and horizon (None: read off the
    log), the per-row bound S and what a row above it does (:data:`ABOVE_POLICIES`),
    and the front end's spelling of each (``flags``: step, start, horizon, bound,
    above)."""

    step: str
    start: object
    horizon: int | None
    bound: float
    above: str = "cut"
    flags: tuple[str, str, str, str, str] = ("step", "start", "horizon", "bound", "above")


def sum_steps(
    values: NDArray[np.float64],
    times: Sequence[str],
    how: Bucketing,
    locate: Callable[[int], str],
) -> StepSums:
    """The sum of each step's rows (an empty step is 0), each row cut to the bound.

    Args:
        values: one value per row (0 for a row that fails a condition).
        times: each row's time, as text (numbers or ISO dates/timestamps).
        how: the bucketing (:class:`Bucketing`).
        locate: the place of row i for messages (``"in.csv: line 7"``).

    Raises:
        ValueError: an unreadable time or step, a start that does not begin a step,
            a row above the bound with ``above="error"``, no row inside steps 1..T;
            each naming the row or the flag.
    """
    step_flag, start_flag, horizon_flag, bound_flag, above_flag = how.flags
    if how.above not in ABOVE_POLICIES:
        raise ValueError(f"{above_flag} must be one of {ABOVE_POLICIES}, got {how.above!r}")
    if not (math.isfinite(how.bound) and how.bound > 0):
        raise ValueError(f"{bound_flag} must be finite and > 0, got {how.bound!r}")
    clock = Clock.parse(how.step, step_flag)
    read = [clock.read(t, locate(i)) for i, t in enumerate(times)]
    if how.start is not None:
        clock.set_start(str(how.start), start_flag)
    else:
        clock.start_at(min(read))
    steps = clock.steps(read)
    last = int(steps.max()) if how.horizon is None else how.horizon
    inside = (steps >= 1) & (steps <= last)
    if not inside.any():
        raise ValueError(
            f"no row falls inside steps 1..{last} ({start_flag} {how.start}, {horizon_flag} {last})"
        )
    kept = np.asarray(values, dtype=np.float64)[inside]
    over = np.abs(kept) > how.bound
    if over.any() and how.above == "error":
        row = int(np.flatnonzero(inside)[int(np.argmax(over))])
        raise ValueError(
            f"{locate(row)}: value {float(values[row])!r} is above {bound_flag} {how.bound:g} "
            f"in absolute value: one row is one event, bounded by {bound_flag} (pass "
            f"{above_flag} cut to cut such rows to the bound and report how many)"
        )
    kept, cut, weight = bound_rows(kept, how.bound)
    n = int(steps[inside].max())
    sums = np.bincount(steps[inside] - 1, weights=kept, minlength=n).astype(np.float64)
    outside = int((~inside).sum())
    return StepSums(sums, clock, cut, weight, outside)
