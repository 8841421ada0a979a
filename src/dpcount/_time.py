"""Times and steps: the one parser of step widths (``count --step``, ``histogram
--step-width``, ``keyed --step``, ``dpcount.frame.private_counts(step=)`` and
:func:`dpcount.keyed.run.keyed_counts`), and the clock that reads a CSV time column.

Step spellings: pandas' offset aliases, binned and labelled as
``pandas.Series.resample`` bins and labels them (tested alias by alias against it);
case matters where pandas' does, e.g. ``MS`` month start vs ``ms`` millisecond:

=====================  ==============================================================
``5``, ``2.5``         a plain number: a width in the time column's own units
``1D``, ``6h``,        a fixed duration (days of 24 h, hours, minutes (``min``/``T``),
``15min``, ``30s``     seconds (``s``/``S``), ``ms``, ``us``); decimals allowed
``MS``, ``3MS``        calendar months starting on the 1st (``n`` months per step)
``QS``, ``QS-FEB``     calendar quarters starting in January/April/July/October (or
                       in the named month and every third month after it)
``YS``, ``YS-JUL``     calendar years starting on 1 January (or on the 1st of the named
                       month); ``AS`` is pandas' older spelling
``W-MON`` … ``W-SUN``  weeks *ending* on that weekday, as pandas: ``W-MON`` is Tuesday
                       00:00 to the next Tuesday 00:00, labelled by its Monday
                       (``2W-MON``: two weeks, labelled by the last Monday)
=====================  ==============================================================

Step k covers [b_k, b_{k+1}); its label is b_k (pandas' ``label="left"``), except
for weeks, labelled by their last day b_{k+1} − 1 day (pandas' ``W`` closes and
labels on the right). A step of months, quarters or years has unequal lengths
(28–31 days, leap years): b_k is the (k−1)·n-th calendar boundary after the
start, computed on the calendar, never as a fixed number of seconds. A calendar
step needs a start on one of its boundaries (a month's 1st at 00:00, a Tuesday at
00:00 for ``W-MON``, ...). A start read off the data is pandas' first bin: for a
fixed duration the multiple of the width after midnight of the earliest time's
day at or before it (pandas' ``origin="start_day"``), for months, quarters and
years the boundary at or before it, for ``nW-DAY`` the n weeks ending on the
first DAY on or after the earliest date. Times are UTC (naive times are read as
UTC).

Refused, with both meanings named: ``M``/``m`` (minutes in older dpcount, months
or month *ends* in pandas: write ``1min``/``1T`` or ``1MS``), ``W`` without a day
(7 days from the start in older dpcount, weeks ending on Sunday in pandas: write
``7D`` or ``W-SUN``), and the month, quarter and year *end* aliases (``ME``,
``Q``, ``QE``, ``Y``, ``YE``, ``A``): write their start spellings.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["Clock", "Step", "parse_step"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DAY_NS = 86_400 * 10**9
_NS_PER = {"ns": 1, "us": 1_000}
_WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
#: fixed units, case-insensitive (after the case-sensitive ones below): nanoseconds
_FIXED = {"d": _DAY_NS, "h": 3600 * 10**9, "min": 60 * 10**9, "t": 60 * 10**9, "s": 10**9}
#: case-sensitive sub-second units (``MS`` is a month start)
_SUBSECOND = {"ms": 10**6, "us": 10**3}
#: calendar units: months per unit
_CALENDAR = {"MS": 1, "QS": 3, "YS": 12, "AS": 12}
_SPELLING = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)?\s*([A-Za-z]+)(?:-([A-Za-z]+))?\s*")
_EXAMPLES = "a number, a duration (1D, 6h, 15min, 30s) or a calendar step (MS, QS, YS, W-MON)"


def _ambiguous(text: str, flag: str, unit: str) -> str | None:
    """The refusal of a spelling with two meanings, or None."""
    n = text.strip()[: -len(unit)].strip() or "1"
    if unit in ("M", "m"):
        return (
            f"{flag} {text!r} is ambiguous: minutes (older dpcount read 'M' as minutes: write "
            f"{n}min or {n}T) or months (pandas: write {n}MS for steps starting on the 1st of "
            "each month)"
        )
    if unit in ("W", "w"):
        return (
            f"{flag} {text!r} is ambiguous: {7 * float(n):g} days from the start (older dpcount: "
            f"write {7 * float(n):g}D) or calendar weeks (pandas' W is weeks ending on Sunday: "
            f"write {n}W-MON ... {n}W-SUN for weeks ending on that day, as pandas)"
        )
    ends = {"ME": "MS", "Q": "QS", "QE": "QS", "Y": "YS", "YE": "YS", "A": "YS", "BM": "MS"}
    if unit in ends:
        return (
            f"{flag} {text!r} names a period END (pandas' {unit}); a step is named by where it "
            f"starts: write {n}{ends[unit]}"
        )
    return None


@dataclass(frozen=True)
class Step:
    """A parsed step width (:func:`parse_step`).

    ``kind``: ``"number"`` (``width`` in the time column's units), ``"fixed"``
    (``nanos`` nanoseconds; weeks too, with ``weekday`` their *last* day, Monday = 0,
    as pandas' ``W-MON``)
    or ``"months"`` (``months`` calendar months per step; ``anchor``: a month, 1–12,
    on which a step may start, the others following every ``unit`` months).
    """

    kind: Literal["number", "fixed", "months"]
    width: float = 0.0
    nanos: int = 0
    months: int = 0
    unit: int = 1
    anchor: int = 1
    weekday: int | None = None

    @property
    def calendar(self) -> bool:
        """Whether the step has calendar boundaries (months, quarters, years, weeks)."""
        return self.kind == "months" or self.weekday is not None

    @property
    def whole_days(self) -> bool:
        """Every step boundary after a midnight start is a midnight."""
        return self.kind == "months" or (self.kind == "fixed" and self.nanos % _DAY_NS == 0)

    def describe(self) -> str:
        """The canonical spelling (``1D``, ``6h``, ``15min``, ``1MS``, ``1QS-JAN``,
        ``1W-MON``, a number): part of a keyed run's configuration."""
        if self.kind == "number":
            w = self.width
            return str(int(w)) if float(w).is_integer() else repr(float(w))
        if self.kind == "months":
            n = self.months // self.unit
            if self.unit == 1:
                return f"{n}MS"
            return f"{n}{'QS' if self.unit == 3 else 'YS'}-{_MONTHS[self.anchor - 1]}"
        if self.weekday is not None:
            return f"{self.nanos // (7 * _DAY_NS)}W-{_WEEKDAYS[self.weekday]}"
        for size, name in ((_DAY_NS, "D"), (3600 * 10**9, "h"), (60 * 10**9, "min"), (10**9, "s")):
            if self.nanos % size == 0:
                return f"{self.nanos // size}{name}"
        return f"{self.nanos}ns"

    # ----------------------------------------------------------------------------------
    # datetimes as integers: nanoseconds (``resolution="ns"``, pandas) or microseconds
    # (``"us"``, the clock of CSV times, which reaches year 9999) since 1970-01-01 UTC
    # ----------------------------------------------------------------------------------
    def _units(self, resolution: str, flag: str) -> int:
        per = _NS_PER[resolution]
        if self.nanos % per:
            raise ValueError(
                f"{flag} {self.describe()} is finer than the times' resolution (1{resolution})"
            )
        return self.nanos // per

    def on_boundary(self, start: int, resolution: str = "ns") -> bool:
        """Whether ``start`` can begin a step (always, for a fixed duration)."""
        if self.kind == "months":
            day = np.array([start], dtype=f"datetime64[{resolution}]").astype("datetime64[D]")
            month = int(day.astype("datetime64[M]").astype(np.int64)[0])
            first = day.astype("datetime64[M]").astype("datetime64[D]")
            at_midnight = start % (_DAY_NS // _NS_PER[resolution]) == 0
            return bool(at_midnight and day[0] == first[0]) and (
                (month % 12 + 1 - self.anchor) % self.unit == 0
            )
        if self.weekday is not None:  # a week ending on DAY starts the day after it
            per_day = _DAY_NS // _NS_PER[resolution]
            return start % per_day == 0 and (start // per_day + 3) % 7 == (self.weekday + 1) % 7
        return True

    def check_start(self, start: int, flag: str, text: str, resolution: str = "ns") -> None:
        """ValueError unless ``start`` is on one of the step's calendar boundaries."""
        if not self.on_boundary(start, resolution):
            where = {1: "the 1st of a month", 3: "the 1st of a quarter's first month"}.get(
                self.unit, "the 1st of a year's first month"
            )
            if self.weekday is not None:
                day = _WEEKDAYS[self.weekday].title()
                where = (
                    f"a {_WEEKDAYS[(self.weekday + 1) % 7].title()} (pandas' W-{day.upper()}: "
                    f"weeks ending on {day}, labelled by the {day})"
                )
            elif self.unit != 1:
                months = [_MONTHS[(self.anchor - 1 + i) % 12] for i in range(0, 12, self.unit)]
                where += f" ({', '.join(months)})"
            raise ValueError(
                f"{flag} {text!r} does not start a step of {self.describe()}: a calendar step "
                f"starts on {where} at 00:00"
            )

    def floor(self, time: int, resolution: str = "ns") -> int:
        """The start of the step holding ``time`` when step 1 is read off the data:
        pandas' first bin (``resample``'s default origin): for a fixed duration the
        multiple of the width after midnight of ``time``'s day at or before it, for
        months, quarters and years the boundary at or before it, for ``nW-DAY`` the
        start of the n weeks ending on the first DAY on or after ``time``'s date."""
        per = _NS_PER[resolution]
        per_day = _DAY_NS // per
        if self.kind == "months":
            month = int(
                np.array([time], dtype=f"datetime64[{resolution}]")
                .astype("datetime64[M]")
                .astype(np.int64)[0]
            )
            month -= (month % 12 + 1 - self.anchor) % self.unit
            out = np.array([month], dtype="datetime64[M]").astype(f"datetime64[{resolution}]")
            return int(out.astype(np.int64)[0])
        if self.weekday is not None:
            day = time // per_day
            last = day + (self.weekday - (day + 3)) % 7  # the first DAY on or after it
            return (last + 1) * per_day - self._units(resolution, "step")
        width = self._units(resolution, "step")
        midnight = time - time % per_day
        return midnight + (time - midnight) // width * width

    def index(
        self, start: int, times: NDArray[np.int64], resolution: str = "ns", flag: str = "step"
    ) -> NDArray[np.int64]:
        """The 1-based step of every time (≤ 0 before ``start``, which must be a
        boundary): b_k ≤ t < b_{k+1} ⇒ k."""
        times = np.asarray(times, dtype=np.int64)
        if self.kind == "months":
            unit = f"datetime64[{resolution}]"
            month = times.view(unit).astype("datetime64[M]").astype(np.int64)
            first = np.array([start], dtype=unit).astype("datetime64[M]").astype(np.int64)[0]
            out: NDArray[np.int64] = (month - first) // self.months + 1
            return out
        if self.kind != "fixed":
            raise ValueError(f"{flag} {self.describe()} is a number, not a duration")
        out = (times - start) // self._units(resolution, flag) + 1
        return out

    def boundaries(
        self, start: int, first: int, last: int, resolution: str = "ns"
    ) -> NDArray[np.int64]:
        """The starts b_k of steps k = first..last."""
        k = np.arange(first - 1, last, dtype=np.int64)
        if self.kind == "months":
            unit = f"datetime64[{resolution}]"
            month = np.array([start], dtype=unit).astype("datetime64[M]").astype(np.int64)[0]
            out: NDArray[np.int64] = (
                (month + k * self.months).astype("datetime64[M]").astype(unit).astype(np.int64)
            )
            return out
        return start + k * self._units(resolution, "step")

    def labels(
        self, start: int, first: int, last: int, resolution: str = "ns"
    ) -> NDArray[np.int64]:
        """The labels of steps first..last, as pandas' ``resample`` labels them: the
        start b_k, or for weeks their last day b_{k+1} − 1 day."""
        if self.weekday is None:
            return self.boundaries(start, first, last, resolution)
        per_day = _DAY_NS // _NS_PER[resolution]
        out: NDArray[np.int64] = self.boundaries(start, first + 1, last + 1, resolution) - per_day
        return out


def parse_step(step: object, flag: str = "step") -> Step:
    """The step of a spelling (see the module docstring) or of a positive number.

    Raises:
        TypeError: ``step`` is neither text nor a number.
        ValueError: an unknown or ambiguous spelling, or a width ≤ 0, naming ``flag``.
    """
    if isinstance(step, bool) or not isinstance(step, (str, int, float, np.integer, np.floating)):
        raise TypeError(f"{flag} must be {_EXAMPLES}, got {step!r}")
    width = _number(step)
    if width is not None:
        if not (math.isfinite(width) and width > 0):
            raise ValueError(f"{flag} must be > 0, got {step!r}")
        return Step("number", width=width)
    assert isinstance(step, str)
    m = _SPELLING.fullmatch(step)
    if m is None:
        raise ValueError(f"{flag} must be {_EXAMPLES}; got {step!r}")
    count, unit, suffix = m.group(1), m.group(2), m.group(3)
    refusal = _ambiguous(step, flag, unit) if suffix is None else None
    if refusal is not None:
        raise ValueError(refusal)
    if unit in _CALENDAR or (unit == "W" and suffix is not None):
        return _calendar_step(step, flag, count, unit, suffix)
    if suffix is not None:
        raise ValueError(f"{flag} must be {_EXAMPLES}; got {step!r}")
    return _fixed_step(step, flag, count, unit)


def _number(step: object) -> float | None:
    """``step`` as a float when it is a number or spells one, else None."""
    if not isinstance(step, str):
        return float(step)  # type: ignore[arg-type]  # a number (parse_step checked)
    try:
        return float(step)
    except ValueError:
        return None


def _calendar_step(step: str, flag: str, count: str | None, unit: str, suffix: str | None) -> Step:
    """``nMS``, ``nQS[-MON]``, ``nYS[-MON]`` or ``nW-DAY``."""
    if count is not None and not count.isdigit():
        raise ValueError(f"{flag} {step!r}: a calendar step needs a whole number of units")
    n = 1 if count is None else int(count)
    if n < 1:
        raise ValueError(f"{flag} must be > 0, got {step!r}")
    if unit == "W":
        day = suffix.upper() if suffix is not None else ""
        if day not in _WEEKDAYS:
            raise ValueError(f"{flag} {step!r}: W-DAY needs a weekday ({', '.join(_WEEKDAYS)})")
        return Step("fixed", nanos=7 * n * _DAY_NS, weekday=_WEEKDAYS.index(day))
    months = _CALENDAR[unit]
    anchor = 1
    if suffix is not None:
        if months == 1 or suffix.upper() not in _MONTHS:
            raise ValueError(
                f"{flag} {step!r}: only QS and YS take a month (QS-JAN ... QS-DEC, "
                "YS-JAN ... YS-DEC)"
            )
        anchor = _MONTHS.index(suffix.upper()) + 1
    return Step("months", months=months * n, unit=months, anchor=(anchor - 1) % months + 1)


def _fixed_step(step: str, flag: str, count: str | None, unit: str) -> Step:
    """A fixed duration: ``[n]`` and a unit (``D``, ``h``, ``min``, ``s``, ``ms`` ...)."""
    nanos = _SUBSECOND.get(unit) or _FIXED.get(unit.lower())
    if nanos is None or (unit.lower() in _SUBSECOND and unit not in _SUBSECOND):
        raise ValueError(f"{flag} must be {_EXAMPLES}; got {step!r}")
    value = 1.0 if count is None else float(count)
    total = round(value * nanos)
    if total <= 0:
        raise ValueError(f"{flag} must be > 0, got {step!r}")
    if abs(total - value * nanos) > 1e-6 * nanos:
        raise ValueError(f"{flag} must be a positive whole number of nanoseconds, got {step!r}")
    return Step("fixed", nanos=total)


def _iso_micros(text: str) -> tuple[int, bool] | None:
    """Microseconds since 1970-01-01 UTC of an ISO date or timestamp (naive = UTC), and
    whether it was a date only; None if ``text`` is not ISO."""
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        value = dt.datetime.fromisoformat(t)
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    date_only = len(text.strip()) == 10 and text.strip()[4] == "-"
    return (value - _EPOCH) // dt.timedelta(microseconds=1), date_only


@dataclass
class Clock:
    """Reads a time column (all numbers, or all ISO dates/timestamps) and maps times to
    steps from ``start`` (step k covers [b_k, b_{k+1}), see :class:`Step`).

    ISO times are read as integer microseconds since 1970-01-01 UTC; ``kind`` is
    fixed by the first time read (or by ``start``): "number" or "iso".
    """

    step_width: Step
    flag: str
    start: float | None = None
    kind: str | None = None
    dates_only: bool = True

    @classmethod
    def parse(cls, text: str, flag: str) -> Clock:
        """The clock of the step spelled ``text`` (:func:`parse_step`) for ``flag``."""
        return cls(parse_step(text, flag), flag)

    def read(self, text: str, where: str) -> float:
        """The time of a cell (for ISO an int of microseconds: exact to year 9999, where
        a float is not), checked against the column's kind."""
        iso = _iso_micros(text)
        value: float
        if iso is not None:
            kind, value = "iso", iso[0]
            self.dates_only = self.dates_only and iso[1]
        else:
            try:
                value = float(text)
            except ValueError:
                raise ValueError(
                    f"{where}: could not read {text!r} as a time (a number or an ISO 8601 "
                    "date/timestamp such as 2012-01-01 or 2012-01-01T08:30:00)"
                ) from None
            if not math.isfinite(value):
                raise ValueError(f"{where}: time {text!r} is not finite")
            kind = "number"
        if self.kind is None:
            self.kind = kind
            if kind == "iso" and self.step_width.kind == "number":
                raise ValueError(
                    f"{where}: ISO times need a duration or a calendar step for {self.flag} "
                    "(e.g. 1D, 6h, 15min, MS), not a plain number"
                )
            if kind == "number" and self.step_width.kind != "number":
                raise ValueError(
                    f"{where}: numeric times need a plain number for {self.flag}, not a duration"
                )
        elif kind != self.kind:
            raise ValueError(f"{where}: time {text!r} mixes ISO dates and numbers in one column")
        return value

    def set_start(self, text: str, flag: str) -> None:
        start = self.read(text, flag)
        if self.kind == "iso":
            self.step_width.check_start(int(start), flag, text, "us")
        self.start = start

    def start_at(self, earliest: float) -> None:
        """Step 1 from the earliest time read: the number itself, or for ISO times
        the start of pandas' first bin (:meth:`Step.floor`)."""
        self.start = earliest
        if self.kind == "iso":
            self.start = self.step_width.floor(int(earliest), "us")

    def step(self, value: float) -> int:
        """The 1-based step holding time ``value`` (``start`` must be set)."""
        if self.start is None:
            raise ValueError(f"{self.flag}: the start of step 1 is not set")
        if self.kind != "iso":
            return math.floor((value - self.start) / self.step_width.width) + 1
        times = np.array([int(value)], dtype=np.int64)
        return int(self.step_width.index(int(self.start), times, "us", self.flag)[0])

    def steps(self, values: list[float]) -> NDArray[np.int64]:
        """The 1-based step of every time (:meth:`step`, vectorized)."""
        if self.start is None:
            raise ValueError(f"{self.flag}: the start of step 1 is not set")
        if self.kind != "iso":
            width = self.step_width.width
            out: NDArray[np.int64] = (
                np.floor((np.asarray(values, dtype=np.float64) - self.start) / width).astype(
                    np.int64
                )
                + 1
            )
            return out
        times = np.asarray(values, dtype=np.int64)
        return self.step_width.index(int(self.start), times, "us", self.flag)

    def label_value(self, step: int) -> float | dt.datetime:
        """The label of step ``step``: a number, or a naive UTC datetime."""
        if self.start is None:
            raise ValueError(f"{self.flag}: the start of step 1 is not set")
        if self.kind != "iso":
            return self.start + (step - 1) * self.step_width.width
        (micros,) = self.step_width.labels(int(self.start), step, step, "us").tolist()
        return (_EPOCH + dt.timedelta(microseconds=micros)).replace(tzinfo=None)

    def label(self, step: int) -> str:
        """The label of step ``step`` (:meth:`Step.labels`), as the column's kind (ISO
        date or timestamp, or a number)."""
        if self.start is None:
            raise ValueError(f"{self.flag}: the start of step 1 is not set")
        if self.kind != "iso":
            value = self.start + (step - 1) * self.step_width.width
            return repr(float(value)) if not float(value).is_integer() else str(int(value))
        (micros,) = self.step_width.labels(int(self.start), step, step, "us").tolist()
        moment = _EPOCH + dt.timedelta(microseconds=micros)
        if self.step_width.whole_days and micros % (_DAY_NS // 1000) == 0:
            return moment.date().isoformat()
        return moment.replace(tzinfo=None).isoformat()
