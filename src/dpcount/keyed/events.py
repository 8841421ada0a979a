"""Event logs → per-(key, step) contributions: reading, time buckets, key universe, bounding.

An event is a row (time, key[, weight][, unit]). This module turns a table of events
into the sparse table of *bounded* contributions that the mechanism counts, and a
:class:`DropReport` of everything it did not count — nothing is dropped silently.

Neighbouring relations (what the privacy guarantee is stated for):

* **event level** (no unit column, the default): two event logs differ in one
  event, whose weight (1 without a weight column) is at most ``max_weight``
  (larger weights are cut to ``max_weight``, the excess reported). One event
  changes one key at one step by at most ``max_weight``: across keys, per-step
  ℓ₁ and ℓ₂ sensitivity ``max_weight``.
* **unit-step level** (a unit id column): two logs differ in the events of one
  privacy unit within one step. Per (unit, step) at most ``max_keys`` keys are
  kept — those with the smallest keyed hash of (unit, key), a deterministic
  choice that does not depend on row order or partitioning — and each kept
  (unit, step, key) total is cut to ``max_weight``; everything removed is
  reported. Per-step sensitivity across keys: ℓ₁ = max_keys·max_weight,
  ℓ₂ = √max_keys·max_weight. This protects a unit's events of **one step**, not
  its history: a unit active at n steps is protected at n times the budget (basic
  composition), and nothing here bounds n.

Every sum is exact: weights are added in float64 (whole numbers are exact below
2^53) and a (key, step) total or a key's running count that reaches 2^53 is refused
with a ValueError naming the key and the step (:func:`to_contributions`,
:func:`check_running`) — never wrapped (int64) or rounded.

Events whose key is not in the public key universe, or whose step is outside
1..horizon, are dropped and counted in the report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount._time import Step, parse_step
from dpcount._validate import MAX_EXACT_SUM
from dpcount.counting._steps import check_running_sums
from dpcount.keyed.ids import EXACT_FLOAT, as_int_keys, canonical_text, key_texts, unit_ids

__all__ = [
    "Contributions",
    "DropReport",
    "EventColumns",
    "KeyUniverse",
    "StepWindow",
    "TimeBuckets",
    "bound_units",
    "check_running",
    "clip_events",
    "map_events",
    "partial_sums",
    "to_contributions",
]

I64 = NDArray[np.int64]


# --------------------------------------------------------------------------------------
# Columns and rows (reading files: dpcount.keyed.io)
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EventColumns:
    """Names of the event columns (weight and unit optional)."""

    time: str
    key: str
    weight: str | None = None
    unit: str | None = None

    def names(self) -> list[str]:
        return [c for c in (self.time, self.key, self.weight, self.unit) if c is not None]

    def check(self, available: Sequence[str], source: str) -> None:
        """ValueError naming the first column that ``source`` does not have."""
        have = [str(c) for c in available]
        for role, name in (
            ("time", self.time),
            ("key", self.key),
            ("weight", self.weight),
            ("unit", self.unit),
        ):
            if name is not None and name not in have:
                raise ValueError(
                    f"{role} column {name!r} not found in {source} (columns: {', '.join(have)})"
                )


#: the index name of events read from a CSV file: the index holds file line numbers
LINE = "line"


def row_name(index: pd.Index, i: int) -> str:
    """The ``i``-th (from 0) event of a frame, for a message: ``line N`` of its CSV
    file (header = line 1, as in ``dpcount count``), the label an incremental run gave
    it (``FILE line N``), ``data row N`` (counted from 1) of a frame with the default
    index, or else the row's index label."""
    label = index[i]
    label = label.item() if isinstance(label, np.generic) else label
    if isinstance(label, str):
        return label
    if index.name == LINE:
        return f"line {label}"
    if index.equals(pd.RangeIndex(len(index))):
        return f"data row {i + 1}"
    return f"index label {label!r}"


@dataclass(frozen=True)
class KeyUniverse:
    """The public, ordered key universe; key index = position in the list.

    A ``range`` of integers stays a ``range`` (O(1) memory, whatever its length): a
    universe of 10^7 keys as a tuple of Python ints takes ~360 MiB in every process
    that holds the job, and matching event keys against it built a hash table of it
    per input partition. A range matches like the tuple of its values (a
    ``pandas.RangeIndex`` computes the positions arithmetically) and has the same
    digest, so the run's configuration, secret and outputs are the same either way.
    """

    keys: tuple[Any, ...] | range

    def __init__(self, keys: Sequence[Any]) -> None:
        if isinstance(keys, (str, bytes, os.PathLike)):
            raise TypeError(
                f"keys must be a sequence of keys, got {type(keys).__name__} {keys!r} (a keys "
                "file is read with dpcount.keyed.io.read_keys)"
            )
        if isinstance(keys, range):  # unique integers already: nothing to convert
            if not keys:
                raise ValueError("keys must hold at least one key")
            object.__setattr__(self, "keys", keys)
            return
        # numpy scalars as Python values: the fingerprint must not depend on the container
        ks = tuple(k.item() if isinstance(k, np.generic) else k for k in keys)
        if not ks:
            raise ValueError("keys must hold at least one key")
        index, integers = _lookup_index(ks)
        if not index.is_unique:
            dup = index[index.duplicated()][0]
            same = [k for k in ks if canonical_text(k) == canonical_text(dup)]
            raise ValueError(
                f"keys must be unique, {' and '.join(map(repr, same[:2]))} "
                + (
                    "appears more than once"
                    if len(set(map(repr, same))) == 1
                    else "are one key (equal as numbers or as text)"
                )
            )
        object.__setattr__(self, "keys", ks)
        object.__setattr__(self, "_lookup", (index, integers))

    def __len__(self) -> int:
        return len(self.keys)

    def __getstate__(self) -> dict[str, Any]:
        return {"keys": self.keys}  # the lookup index is rebuilt where it is used

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "keys", state["keys"])

    def indices(self, values: pd.Series) -> I64:
        """Key index of every value, −1 for keys outside the universe.

        Keys are compared by their canonical text (:mod:`dpcount.keyed.ids`): a
        universe of strings (e.g. read from a keys file) matches integer keys written
        as its digits, and ``7``, ``7.0`` and ``"7"`` are one key; an integer universe
        is matched as integers (``"007"`` is not 7).

        The lookup index (and its hash table) is built once per process and universe,
        not per call: a Dask worker matches every input partition against the one it
        built. At 10^7 string keys each call took 7.2 s and ~2 GiB before (measured).
        """
        cached: tuple[pd.Index, bool] | None = self.__dict__.get("_lookup")
        if cached is None:  # unpickled: built on first use
            cached = _lookup_index(self.keys)
            object.__setattr__(self, "_lookup", cached)
        index, integers = cached
        if integers:
            ints, ok = as_int_keys(values)
            out: I64 = np.where(ok, index.get_indexer(ints), -1).astype(np.int64)
            return out
        # Python strings against the index's own: the hash table of the keys is used
        # as built (a str-dtype target made pandas convert the index on first use)
        target = pd.Index(key_texts(values), dtype=object)
        out = index.get_indexer(target).astype(np.int64)
        return out

    def digest(self) -> str:
        import hashlib

        h = hashlib.sha256()
        if isinstance(self.keys, range):  # the same bytes, a block of keys at a time
            for lo in range(0, len(self.keys), _DIGEST_BLOCK):
                block = self.keys[lo : lo + _DIGEST_BLOCK]
                h.update(("\n".join(map(str, block)) + "\n").encode())
            return h.hexdigest()
        for k in self.keys:
            h.update(repr(k).encode() + b"\n")
        return h.hexdigest()


def _lookup_index(keys: tuple[Any, ...] | range) -> tuple[pd.Index, bool]:
    """The index that matches event keys against a universe, and whether it matches
    integers (a universe of integers, or a range) rather than canonical texts. Strings
    go in an object index of the keys' own Python values (pandas would copy them into
    Arrow storage and hash fresh copies: 10^7 keys took 1.9 GiB, not 0.9)."""
    if isinstance(keys, range):
        return pd.RangeIndex(keys.start, keys.stop, keys.step), True
    kinds = {type(k) for k in keys}
    if kinds == {str}:
        return pd.Index(keys, dtype=object), False
    if kinds == {int} and min(keys) >= -(2**63) and max(keys) < 2**63:
        return pd.Index(keys, dtype=np.int64), True
    return pd.Index([canonical_text(k) for k in keys], dtype=object), False


#: keys of a range universe hashed per update (:meth:`KeyUniverse.digest`)
_DIGEST_BLOCK = 1 << 16


# --------------------------------------------------------------------------------------
# Time buckets
# --------------------------------------------------------------------------------------
def _parse_width(step: int | str) -> Step:
    """The step of ``step`` (:func:`dpcount._time.parse_step`, shared with ``dpcount
    count`` and ``histogram``): a whole number for integer times, else a duration or a
    calendar step."""
    if isinstance(step, (float, np.floating)) or (
        isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step < 1
    ):
        raise ValueError(f"step must be a positive integer width for integer times, got {step!r}")
    parsed = parse_step(step, "step")
    if parsed.kind == "number" and not parsed.width.is_integer():
        raise ValueError(f"step must be a positive integer width for integer times, got {step!r}")
    return parsed


def parse_times(values: pd.Series, column: str, source: str | None = None) -> pd.Series:
    """Integer times as int64, or ISO dates/timestamps as naive UTC datetimes.

    ``source``: the file the values come from, for messages (rows are named by
    :func:`row_name`: a CSV's line, a frame's data row).

    Raises:
        ValueError: missing or unparseable times, or an integer time outside the
            64-bit range (never wrapped), naming the column, the row and ``source``.
    """
    where = "" if source is None else f" of {source}"
    if values.isna().any():
        row = row_name(values.index, int(np.flatnonzero(values.isna().to_numpy())[0]))
        raise ValueError(f"missing time in column {column!r} ({row}{where})")
    if pd.api.types.is_integer_dtype(values.dtype):
        _check_int64_times(values, column, where)
        return values.astype(np.int64)
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        out = values
    else:
        text = values.astype(str)
        if text.str.fullmatch(r"-?\d+").all():
            _check_int64_times(text, column, where)
            return text.astype(np.int64)
        out = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
        bad = out.isna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"unparseable time {text.iloc[i]!r} in column {column!r} "
                f"({row_name(values.index, i)}{where}); "
                "expected integers or ISO dates/timestamps"
            )
    if getattr(out.dt, "tz", None) is not None:
        out = out.dt.tz_convert("UTC").dt.tz_localize(None)
    return out.astype("datetime64[ns]")


#: the range of integer times (and of an integer ``start``): int64
_TIME_MIN, _TIME_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def _check_int64_times(values: pd.Series, column: str, where: str) -> None:
    """ValueError naming the first integer time outside int64 (an unsigned column above
    2^63 − 1 would wrap, digits beyond it overflow)."""
    if pd.api.types.is_integer_dtype(values.dtype):
        if not pd.api.types.is_unsigned_integer_dtype(values.dtype) or not len(values):
            return
        over = values.to_numpy() > np.uint64(_TIME_MAX)
    else:  # digits, as text: 19 digits or fewer fit (one more only for -2^63 exactly)
        long = values.str.len().to_numpy() > 18
        if not long.any():
            return
        over = np.zeros(len(values), dtype=bool)
        at = np.flatnonzero(long)
        over[at] = [not _TIME_MIN <= int(values.iloc[i]) <= _TIME_MAX for i in at]
    if over.any():
        i = int(np.argmax(over))
        raise ValueError(
            f"integer time {values.iloc[i]} in column {column!r} ({row_name(values.index, i)}"
            f"{where}) is outside the 64-bit range of integer times "
            f"({_TIME_MIN}..{_TIME_MAX})"
        )


@dataclass(frozen=True)
class TimeBuckets:
    """Step s (from 1) covers times [b_s, b_{s+1}): b_s = start + (s−1)·width for an
    integer width or a fixed duration, the (s−1)·n-th calendar boundary after
    ``start`` for a calendar step (:class:`dpcount._time.Step`: months, quarters and
    years of unequal lengths, weeks from a weekday)."""

    width: Step
    start: int | pd.Timestamp

    @classmethod
    def make(cls, step: int | str, start: int | str | pd.Timestamp) -> TimeBuckets:
        width = _parse_width(step)
        if width.kind == "number":
            if isinstance(start, str):
                start = int(start) if start.strip().lstrip("-").isdigit() else start
            if not isinstance(start, (int, np.integer)) or isinstance(start, bool):
                raise ValueError(f"start must be an integer for an integer step, got {start!r}")
            if not _TIME_MIN <= int(start) <= _TIME_MAX:
                raise ValueError(
                    f"start {start} is outside the 64-bit range of integer times "
                    f"({_TIME_MIN}..{_TIME_MAX})"
                )
            return cls(width, int(start))
        try:
            ts = pd.Timestamp(start)
        except (ValueError, TypeError):
            raise ValueError(f"start must be an ISO date or timestamp, got {start!r}") from None
        if ts.tzinfo is not None:
            ts = ts.tz_convert("UTC").tz_localize(None)
        ts = ts.as_unit("ns")
        width.check_start(int(ts.value), "start", str(start))
        return cls(width, ts)

    @classmethod
    def from_data(cls, step: int | str, times: pd.Series) -> TimeBuckets:
        """Buckets from pandas' first bin holding the earliest time
        (:meth:`dpcount._time.Step.floor`)."""
        width = _parse_width(step)
        if len(times) == 0:
            raise ValueError("no events to take start and horizon from: pass start and horizon")
        first = times.min()
        if width.kind == "number":
            if not isinstance(first, (int, np.integer)):
                raise ValueError(
                    f"step {step!r} is an integer width but the times are dates; "
                    "use a duration such as '1D'"
                )
            return cls(width, int(first))
        if not isinstance(first, pd.Timestamp):
            raise ValueError(f"step {step!r} is a duration but the times are integers")
        return cls(width, pd.Timestamp(width.floor(int(first.as_unit("ns").value)), unit="ns"))

    def steps(self, times: pd.Series) -> I64:
        """1-based step of every time (≤ 0 before ``start``)."""
        if self.width.kind == "number":
            if not pd.api.types.is_integer_dtype(times.dtype):
                raise ValueError("the step is an integer width but the times are dates")
            assert isinstance(self.start, int)
            t = times.to_numpy(np.int64)
            diff = t - np.int64(self.start)  # wraps when |t − start| ≥ 2^63: fixed below
            out: I64 = diff // int(self.width.width) + 1
            after = t >= self.start
            if bool((after != (diff >= 0)).any()):  # wrapped: far before or after the steps
                out = np.where(after != (diff >= 0), np.where(after, _TIME_MAX, 0), out)
            return out
        if not pd.api.types.is_datetime64_any_dtype(times.dtype):
            raise ValueError("the step is a duration but the times are integers")
        assert isinstance(self.start, pd.Timestamp)
        ns = times.to_numpy("datetime64[ns]").view(np.int64)
        return self.width.index(int(self.start.value), ns)

    def check_horizon(self, horizon: object) -> None:
        """ValueError when the end of step ``horizon`` (integer times: start + horizon ·
        width) is beyond the 64-bit range of integer times (step starts would wrap)."""
        if self.width.kind != "number" or isinstance(horizon, bool):
            return
        if not isinstance(horizon, (int, np.integer)):
            return  # the mechanism refuses it, naming horizon
        assert isinstance(self.start, int)
        end = self.start + int(horizon) * int(self.width.width)
        if end > _TIME_MAX:
            raise ValueError(
                f"start {self.start} + horizon {horizon} x step {int(self.width.width)} = "
                f"{end} is beyond the 64-bit range of integer times (at most {_TIME_MAX})"
            )

    def last_step(self, times: pd.Series) -> int:
        return int(self.steps(times).max()) if len(times) else 0

    def times(self, first: int, last: int) -> NDArray[Any]:
        """The start b_s of steps first..last: int64 for integer times, else
        datetime64[ns] (Parquet outputs store them as timestamps)."""
        if self.width.kind == "number":
            assert isinstance(self.start, int)
            step = int(self.width.width)
            return self.start + np.arange(first - 1, last, dtype=np.int64) * step
        assert isinstance(self.start, pd.Timestamp)
        ns = self.width.boundaries(int(self.start.value), first, last)
        return ns.view("datetime64[ns]")

    def label_times(self, first: int, last: int) -> NDArray[Any]:
        """The labels of steps first..last as pandas' ``resample`` labels them: the
        start b_s (:meth:`times`), or for weeks (``W-MON``...) their last day."""
        if self.width.weekday is None:
            return self.times(first, last)
        assert isinstance(self.start, pd.Timestamp)
        return self.width.labels(int(self.start.value), first, last).view("datetime64[ns]")

    def labels(self, n_steps: int) -> list[str]:
        """Each step's label (:meth:`label_times`), as text (ISO date when whole days)."""
        values = self.label_times(1, n_steps)
        if self.width.kind == "number":
            return [str(v) for v in values.tolist()]
        assert isinstance(self.start, pd.Timestamp)
        stamps = pd.DatetimeIndex(values)
        if self.width.whole_days and self.start == self.start.normalize():
            return [t.strftime("%Y-%m-%d") for t in stamps]
        return [t.isoformat() for t in stamps]

    def describe(self) -> dict[str, str]:
        start = str(self.start) if isinstance(self.start, int) else self.start.isoformat()
        return {"step": self.width.describe(), "start": start}


# --------------------------------------------------------------------------------------
# Mapping and bounding
# --------------------------------------------------------------------------------------
@dataclass
class DropReport:
    """What happened to the events: every dropped or cut contribution is counted."""

    events: int = 0
    unknown_key: int = 0
    out_of_range: int = 0
    clipped_events: int = 0
    clipped_weight: float = 0.0
    unit_dropped_keys: int = 0
    unit_dropped_weight: float = 0.0
    #: (unit, key, step) contributions beyond a unit's steps per key over the run
    #: (``unit_scope="run"``: ``max_steps``, ``min_separation``), and their weight
    unit_dropped_steps: int = 0
    unit_dropped_steps_weight: float = 0.0
    #: events in steps after the last step released by this run (``until``): not
    #: counted now; pass them again to the run that releases their step
    later_steps: int = 0
    #: late events (of steps already released) counted in the first open step
    #: (``late="next-step"``); included in ``kept_events``
    late_moved: int = 0

    def __add__(self, other: DropReport) -> DropReport:
        return DropReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    @property
    def kept_events(self) -> int:
        return self.events - self.unknown_key - self.out_of_range - self.later_steps

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Contributions:
    """Sparse bounded contributions, sorted by (key, step), one row per pair."""

    key: I64
    step: I64
    value: NDArray[Any]  # int64 (discrete noise) or float64

    def for_keys(self, lo: int, hi: int) -> Contributions:
        a, b = np.searchsorted(self.key, [lo, hi])
        return Contributions(self.key[a:b], self.step[a:b], self.value[a:b])

    def dense(self, lo: int, hi: int, last: int, first: int = 1) -> NDArray[Any]:
        """((last − first + 1) × (hi − lo)) matrix of the contributions of keys [lo, hi)
        at steps first..last (every contribution must lie in those steps)."""
        part = self.for_keys(lo, hi)
        out = np.zeros((last - first + 1, hi - lo), dtype=self.value.dtype)
        if len(part.step) and (part.step.min() < first or part.step.max() > last):
            raise ValueError(f"contributions outside steps {first}..{last}")
        out[part.step - first, part.key - lo] = part.value
        return out


def _weights(frame: pd.DataFrame, column: str | None, integer: bool) -> NDArray[np.float64]:
    """The events' weights as float64 (whole numbers ≤ 2^53 when ``integer``): every sum
    is taken in float64, where a sum of whole numbers is exact below 2^53 and one that
    reaches 2^53 is seen as such (:func:`to_contributions`) — int64 sums would wrap."""
    if column is None:
        return np.ones(len(frame), dtype=np.float64)
    w = frame[column]
    if not pd.api.types.is_numeric_dtype(w.dtype) or pd.api.types.is_bool_dtype(w.dtype):
        raise ValueError(f"weight column {column!r} must be numeric, got dtype {w.dtype}")
    arr: NDArray[np.float64] = np.asarray(w.to_numpy(np.float64, na_value=np.nan))
    bad = ~np.isfinite(arr)
    if bad.any():
        row = row_name(w.index, int(np.argmax(bad)))
        raise ValueError(f"missing or infinite weight in column {column!r} ({row})")
    if (arr < 0).any():
        i = int(np.argmax(arr < 0))
        row = row_name(w.index, i)
        raise ValueError(f"negative weight {float(arr[i])!r} in column {column!r} ({row})")
    if integer and ((arr != np.floor(arr)).any() or (arr > 2**53).any()):
        i = int(np.argmax((arr != np.floor(arr)) | (arr > 2**53)))
        raise ValueError(
            f"weight {float(arr[i])!r} in column {column!r} ({row_name(w.index, i)}) is not "
            "an integer: "
            "discrete noise needs integer weights"
        )
    return arr


class StepWindow(NamedTuple):
    """The steps a run counts: ``first``..``last`` (None: the horizon) of 1..``horizon``,
    and what happens to *late* events, of steps 1..first − 1 (``late``:
    :data:`dpcount.keyed.watermark.LATE_POLICIES`)."""

    horizon: int
    first: int = 1
    last: int | None = None
    late: str = "refuse"


def map_events(
    frame: pd.DataFrame,
    columns: EventColumns,
    universe: KeyUniverse,
    buckets: TimeBuckets,
    window: StepWindow,
    *,
    integer: bool,
    source: str | None = None,
) -> tuple[pd.DataFrame, DropReport]:
    """Rows (key, step, weight[, unit]) of the events inside the universe and the
    ``window``'s steps ``first``..``last`` (default 1..horizon).

    Events in steps 1..first−1 — already released by an earlier run that this one
    continues: *late* events — follow ``late``
    (:data:`dpcount.keyed.watermark.LATE_POLICIES`): ``"refuse"`` raises a ValueError
    naming the first such row (and ``source``, the file); ``"next-step"`` places them
    in step ``first``, the first step still open, and counts them in
    ``report.late_moved``. Moved rows are bounded with the step they are counted in
    (the bounds apply after moving). Never dropped silently.
    Events in steps last+1..horizon are counted in ``later_steps`` and dropped.
    Works on any subset of the rows (a partition): the report of a union is the sum.
    """
    horizon, first, last, late = window
    columns.check(list(frame.columns), "the events")
    times = parse_times(frame[columns.time], columns.time, source)
    steps = buckets.steps(times)
    keys = universe.indices(frame[columns.key])
    weight = _weights(frame, columns.weight, integer)
    out = pd.DataFrame({"key": keys, "step": steps, "weight": weight})
    if columns.unit is not None:
        unit = frame[columns.unit]
        if unit.isna().any():
            row = row_name(unit.index, int(np.flatnonzero(unit.isna().to_numpy())[0]))
            raise ValueError(f"missing unit id in column {columns.unit!r} ({row})")
        check_unit_floats(unit, columns.unit, source)
        out["unit"] = unit.to_numpy()
    unknown = keys < 0
    outside = ~unknown & ((steps < 1) | (steps > horizon))
    moved = 0
    if first > 1:
        released = (steps >= 1) & (steps < first)
        if released.any() and late == "next-step":
            moved = int((released & ~unknown).sum())
            steps = np.where(released, first, steps)
            out["step"] = steps
        elif released.any():
            i = int(np.flatnonzero(released)[0])
            where = row_name(frame.index, i) + ("" if source is None else f" of {source}")
            raise ValueError(
                f"late event at {where} (time "
                f"{frame[columns.time].iloc[i]}) is in step {int(steps[i])}, already "
                f"released: this run continues from step {first}; pass only events of "
                f"steps >= {first}, or place late events in the next open step with "
                f"late='next-step' ({int(released.sum())} events refused)"
            )
    later = np.zeros(len(steps), dtype=bool)
    if last is not None and last < horizon:
        later = ~unknown & ~outside & (steps > last)
    report = DropReport(
        events=len(frame),
        unknown_key=int(unknown.sum()),
        out_of_range=int(outside.sum()),
        later_steps=int(later.sum()),
        late_moved=moved,
    )
    return out[~(unknown | outside | later)].reset_index(drop=True), report


def check_unit_floats(unit: pd.Series, column: str, source: str | None = None) -> None:
    """ValueError naming the first unit id of a float column beyond 2^53: such a float is
    not an exact integer id (2^53 + 1 reads as 2^53), so it could not be told from the
    same unit's integer id in another file (:mod:`dpcount.keyed.ids`)."""
    if not pd.api.types.is_float_dtype(unit.dtype):
        return
    big = np.abs(unit.to_numpy(np.float64)) > EXACT_FLOAT
    if big.any():
        i = int(np.argmax(big))
        where = row_name(unit.index, i) + ("" if source is None else f" of {source}")
        raise ValueError(
            f"unit id {float(unit.iloc[i])!r} in column {column!r} ({where}) is a float beyond "
            "2^53, which cannot hold an integer id exactly; store unit ids as integers "
            "or text"
        )


def _clip(values: NDArray[Any], max_weight: float) -> tuple[NDArray[Any], int, float]:
    over = values > max_weight
    excess = float((values[over] - max_weight).sum())
    clipped = np.minimum(values, max_weight).astype(values.dtype)
    return clipped, int(over.sum()), excess


def _unit_rank(rows: pd.DataFrame, hash_key: str) -> NDArray[np.uint64]:
    """Keyed hash of (unit, key): a deterministic, order-free ranking of a unit's keys."""
    unit = rows["unit"]
    values = (
        unit.to_numpy()
        if pd.api.types.is_numeric_dtype(unit.dtype)
        else unit.astype(str).to_numpy(dtype=object)
    )
    frame = pd.DataFrame({"unit": values, "key": rows["key"].to_numpy()})
    out: NDArray[np.uint64] = pd.util.hash_pandas_object(
        frame, index=False, hash_key=hash_key
    ).to_numpy()
    return out


def clip_events(rows: pd.DataFrame, max_weight: float) -> tuple[pd.DataFrame, DropReport]:
    """Event level: cut every event's weight to ``max_weight`` (per row, order-free)."""
    w, n, excess = _clip(rows["weight"].to_numpy(), max_weight)
    return rows.assign(weight=w), DropReport(clipped_events=n, clipped_weight=excess)


def _whole_sums(
    key: I64, step: I64, weight: NDArray[np.float64]
) -> tuple[I64, I64, NDArray[np.float64]] | None:
    """Weights summed per (key, step), sorted by key then step — or None unless every
    weight is a whole number (and the codes fit), where pandas' groupby is used instead.

    Whole numbers add up exactly in float64 while a sum stays below 2^53, in any
    order, so these sums have the same bits as pandas' compensated (Kahan) groupby
    sums; a sum that reaches 2^53 is ≥ 2^53 here too (partial sums of non-negative
    weights only grow and rounding is monotone), so it is refused all the same
    (:func:`to_contributions`). One sort of int64 codes instead of a groupby: ~10x
    faster at 10^6 events.
    """
    if len(key) == 0 or not bool((weight == np.trunc(weight)).all()):
        return None
    stride = int(step.max()) + 1
    if int(step.min()) < 0 or int(key.min()) < 0 or int(key.max()) >= 2**62 // stride:
        return None
    code = key * stride + step
    if bool((code[1:] > code[:-1]).all()):  # already one row per (key, step), in order
        return key, step, weight
    order = np.argsort(code)  # any order within a (key, step): the sums are exact
    code = code[order]
    starts = np.flatnonzero(np.concatenate(([True], code[1:] != code[:-1])))
    sums: NDArray[np.float64] = np.add.reduceat(weight[order], starts)
    first = order[starts]
    return key[first], step[first], sums


def partial_sums(rows: pd.DataFrame, by_unit: bool) -> pd.DataFrame:
    """Weights summed per (key, step), or per (unit, step, key) for unit bounding."""
    if not by_unit:
        whole = _whole_sums(
            rows["key"].to_numpy(np.int64),
            rows["step"].to_numpy(np.int64),
            rows["weight"].to_numpy(np.float64),
        )
        if whole is not None:
            return pd.DataFrame({"key": whole[0], "step": whole[1], "weight": whole[2]})
    cols = ["unit", "step", "key"] if by_unit else ["key", "step"]
    return rows.groupby(cols, sort=False, observed=True)["weight"].sum().reset_index()


def bound_units(
    per: pd.DataFrame, *, max_keys: int, max_weight: float, hash_key: str
) -> tuple[pd.DataFrame, DropReport]:
    """Unit-step level: per (unit, step) keep the ``max_keys`` keys of smallest keyed hash
    of (unit, key); cut each kept (unit, step, key) total to ``max_weight``.

    ``per`` may hold several partial sums of one (unit, step, key); they are added first.
    """
    # one unit whatever the type its id was read as (dpcount.keyed.ids): "7", 7, 7.0
    per = partial_sums(per.assign(unit=unit_ids(per["unit"])), by_unit=True)
    per["rank"] = _unit_rank(per, hash_key)
    per = per.sort_values(["unit", "step", "rank", "key"], kind="stable")
    order = per.groupby(["unit", "step"], sort=False).cumcount().to_numpy()
    drop = order >= max_keys
    report = DropReport(
        unit_dropped_keys=int(drop.sum()),
        unit_dropped_weight=float(per["weight"].to_numpy()[drop].sum()),
    )
    per = per[~drop]
    w, n, excess = _clip(per["weight"].to_numpy(), max_weight)
    report.clipped_events, report.clipped_weight = n, excess
    rows = pd.DataFrame({"key": per["key"].to_numpy(), "step": per["step"].to_numpy(), "weight": w})
    return rows, report


#: largest float64 sum of one (key, step) accepted: 2^53 less a margin for the
#: compensated (Kahan) summation of pandas' groupby, whose result may sit a few units
#: below a true sum ≥ 2^53
EXACT_STEP_SUM = MAX_EXACT_SUM - 2.0**11


def to_contributions(
    rows: pd.DataFrame, dtype: Any, keys: Sequence[Any] | None = None
) -> Contributions:
    """Sum (key, step, weight) rows per (key, step), sorted by key then step.

    The sums are taken in float64: whole-number weights add up exactly while every
    partial sum is below 2^53, and a sum that reaches 2^53 is refused (ValueError
    naming the key — ``keys[index]`` when given — and the step) instead of being
    rounded or, in int64, wrapping to a huge negative count.
    """
    whole = _whole_sums(
        rows["key"].to_numpy(np.int64),
        rows["step"].to_numpy(np.int64),
        rows["weight"].to_numpy(np.float64),
    )
    if whole is not None:
        index, steps, values = whole
    else:
        agg = rows.groupby(["key", "step"], sort=True)["weight"].sum()
        index = agg.index.get_level_values(0).to_numpy(np.int64)
        steps = agg.index.get_level_values(1).to_numpy(np.int64)
        values = agg.to_numpy(np.float64)
    bad = ~(values < EXACT_STEP_SUM)
    if bad.any():
        i = int(np.argmax(bad))
        name = index[i] if keys is None else keys[index[i]]
        raise ValueError(
            f"key {name!r}: the contributions of step {int(steps[i])} add up to "
            f"{float(values[i]):.17g}, at or beyond 2^53 where sums stop being exact (a "
            "change of 1 could move the release by 0, or by 2 or more); rescale the data"
        )
    return Contributions(index, steps, values.astype(dtype))


def check_running(
    contributions: Contributions,
    base: NDArray[Any] | None,
    keys: Sequence[Any],
    first: int,
    last: int,
) -> None:
    """Every key's exact running count (``base`` at step first − 1, then its
    contributions of steps first..last) must stay below 2^53, the bound of
    :func:`dpcount.counting._steps.check_running_sums`, which names the key and the
    first step that reaches it. Weights are non-negative, so a key's running count is
    largest at ``last``: its float64 total (any summation order of whole numbers
    reaches 2^53 exactly when the true sum does) is checked first, O(contributions)."""
    n = len(keys)
    totals = np.bincount(
        contributions.key, weights=contributions.value.astype(np.float64), minlength=n
    )
    if base is not None:
        totals = totals + np.asarray(base, dtype=np.float64)
    if not (totals >= MAX_EXACT_SUM).any():
        return
    i = int(np.argmax(totals >= MAX_EXACT_SUM))
    dense = contributions.dense(i, i + 1, last, first)[:, 0].astype(np.float64)
    if base is not None:
        dense[0] += float(base[i])
    check_running_sums(f"key {keys[i]!r}", np.cumsum(dense), already=first - 1)


def check_max_weight(max_weight: float, integer: bool) -> float | int:
    if isinstance(max_weight, bool) or not isinstance(max_weight, (int, float, np.number)):
        raise TypeError(f"max_weight must be a positive number, got {max_weight!r}")
    if not (math.isfinite(max_weight) and max_weight > 0):
        raise ValueError(f"max_weight must be a positive finite number, got {max_weight!r}")
    if integer:
        if max_weight != int(max_weight):
            raise ValueError(
                f"max_weight must be an integer for discrete noise, got {max_weight!r}"
            )
        return int(max_weight)
    return float(max_weight)
