"""Times in CSV inputs: numbers or ISO 8601 dates/timestamps, and step widths such as
``1D``, ``6h``, ``15min`` or a number (shared by ``count --step``, ``histogram`` and
``dpcount.frame.private_counts(..., step=)``)."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

__all__ = ["Clock", "parse_width"]

_UNITS = {"w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0}
_WIDTH = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(w|d|h|min|m|s)\s*", re.IGNORECASE)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def parse_width(text: str, flag: str) -> tuple[float, bool]:
    """``(width, is_duration)``: ``1D``/``6h``/``15min``/``30s``/``2W`` are durations
    in seconds (for ISO times); a plain number is a width in the time column's units."""
    m = _WIDTH.fullmatch(text)
    if m:
        width, duration = float(m.group(1)) * _UNITS[m.group(2).lower()], True
    else:
        try:
            width, duration = float(text), False
        except ValueError:
            raise ValueError(
                f"{flag} must be a number or a duration such as 1D, 6h, 15min, 30s, 2W; "
                f"got {text!r}"
            ) from None
    if not (math.isfinite(width) and width > 0):
        raise ValueError(f"{flag} must be > 0, got {text if duration else width!r}")
    return width, duration


def _iso_seconds(text: str) -> tuple[float, bool] | None:
    """POSIX seconds of an ISO date or timestamp (naive = UTC), and whether it was a
    date only; None if ``text`` is not ISO."""
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
    return (value - _EPOCH).total_seconds(), date_only


@dataclass
class Clock:
    """Reads a time column (all numbers, or all ISO dates/timestamps) and maps times to
    steps of ``width`` from ``start`` (step k covers [start + (k−1)·width, start + k·width)).

    ``kind`` is fixed by the first time read (or by ``start``): "number" or "iso".
    """

    width: float
    duration: bool
    flag: str
    start: float | None = None
    kind: str | None = None
    dates_only: bool = True

    def read(self, text: str, where: str) -> float:
        """The time of a cell (seconds for ISO), checked against the column's kind."""
        iso = _iso_seconds(text)
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
            if kind == "iso" and not self.duration:
                raise ValueError(
                    f"{where}: ISO times need a duration for {self.flag} (e.g. 1D, 6h, 15min), "
                    f"not a plain number"
                )
            if kind == "number" and self.duration:
                raise ValueError(
                    f"{where}: numeric times need a plain number for {self.flag}, not a duration"
                )
        elif kind != self.kind:
            raise ValueError(f"{where}: time {text!r} mixes ISO dates and numbers in one column")
        return value

    def set_start(self, text: str, flag: str) -> None:
        self.start = self.read(text, flag)

    def step(self, value: float) -> int:
        """The 1-based step holding time ``value`` (``start`` must be set)."""
        assert self.start is not None
        return math.floor((value - self.start) / self.width) + 1

    def label(self, step: int) -> str:
        """The start of step ``step``, as the column's kind (ISO date or timestamp, or a
        number)."""
        assert self.start is not None
        value = self.start + (step - 1) * self.width
        if self.kind != "iso":
            return repr(float(value)) if not float(value).is_integer() else str(int(value))
        moment = _EPOCH + dt.timedelta(seconds=value)
        if self.width % 86400 == 0 and value % 86400 == 0:  # whole days from midnight
            return moment.date().isoformat()
        return moment.replace(tzinfo=None).isoformat()
