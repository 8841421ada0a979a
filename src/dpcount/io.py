"""Reading one numeric series from a CSV, lazily, with errors that name the line."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MISSING_MARKERS",
    "MISSING_POLICIES",
    "CSVError",
    "Condition",
    "SeriesReader",
    "csv_rows",
    "parse_number",
    "parse_where",
    "read_plain_column",
    "starts_like_number",
]

#: cells read as a missing value (case-insensitive)
MISSING_MARKERS = frozenset({"", "na", "n/a", "nan", "null", "none"})
#: what to do with one: stop with an error naming the line, drop the row, or read 0
MISSING_POLICIES = ("error", "skip", "zero")


class CSVError(ValueError):
    """A malformed CSV input; the message names the line."""


@dataclass(frozen=True)
class Condition:
    """One row filter of ``count --where`` (and ``dpcount.frame``'s ``where=``): the
    cell of ``column`` (its text, spaces around it ignored) is one of ``values``, or
    with ``negate`` none of them."""

    column: str
    values: tuple[str, ...]
    negate: bool = False

    def matches(self, cell: str) -> bool:
        """Whether a (stripped) cell passes the condition."""
        return (cell in self.values) != self.negate

    def text(self) -> str:
        """The condition as ``--where`` spells it (``weather=rain``, ``weather!=sun``,
        ``weather in rain,drizzle``, ``weather not in rain,drizzle``)."""
        if len(self.values) == 1:
            return f"{self.column}{'!=' if self.negate else '='}{self.values[0]}"
        return f"{self.column} {'not in' if self.negate else 'in'} {','.join(self.values)}"


_WHERE_FORMS = "COLUMN=VALUE, COLUMN!=VALUE, 'COLUMN in V1,V2' or 'COLUMN not in V1,V2'"
_IN = re.compile(r"(?P<column>.+?)\s+(?P<op>not\s+in|in)\s+(?P<values>.*)")


def parse_where(text: object, flag: str = "--where") -> Condition:
    """A condition spelled ``COLUMN=VALUE``, ``COLUMN!=VALUE``, ``COLUMN in V1,V2`` or
    ``COLUMN not in V1,V2`` (spaces around names and values ignored; a listed value
    cannot hold a comma).

    Raises:
        TypeError: ``text`` is not a string.
        ValueError: none of these forms, an empty column name or list, naming ``flag``.
    """
    if not isinstance(text, str):
        raise TypeError(f"{flag} must be {_WHERE_FORMS} (a string), got {text!r}")
    listed = _IN.fullmatch(text.strip())
    if listed is not None and "=" not in listed["column"]:
        column, negate = listed["column"].strip(), listed["op"] != "in"
        values = tuple(v.strip() for v in listed["values"].split(","))
        if not listed["values"].strip():
            raise ValueError(f"{flag} {text!r}: the list after '{listed['op']}' is empty")
    else:
        column, sep, value = text.partition("=")
        if not sep:
            raise ValueError(f"{flag} must be {_WHERE_FORMS}, got {text!r}")
        negate = column.endswith("!")
        column, values = column.removesuffix("!").strip(), (value.strip(),)
    if not column:
        raise ValueError(f"{flag} {text!r} names no column (must be {_WHERE_FORMS})")
    return Condition(column, values, negate)


#: Integers beyond this magnitude are not exact in float64: refused, never rounded.
_MAX_EXACT_INT = 2**53
_INTEGER = re.compile(r"[+-]?\d+")
#: A header cell must not look like the start of a number (a typo such as "12a" in the
#: first row would otherwise be taken as a header and the row silently dropped).
_NUMBER_START = re.compile(r"[+-]?\.?\d")


def starts_like_number(text: str) -> bool:
    """Whether ``text`` begins like a number (a digit, optionally after a sign or a point)."""
    return _NUMBER_START.match(text) is not None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _without_bom(lines: Iterable[str]) -> Iterator[str]:
    """The lines with a leading byte-order mark removed (before CSV parsing, so a quoted
    first field stays quoted); lazy, so a live pipe still works."""
    it = iter(lines)
    for first in it:
        yield first[1:] if first.startswith("\ufeff") else first
        break
    yield from it


def csv_rows(lines: Iterable[str], source: str) -> Iterator[tuple[int, list[str]]]:
    """``(line_number, stripped cells)`` of every CSV record; blank records are skipped.

    A UTF-8 byte-order mark at the start is dropped. Errors of the csv module (e.g. a
    field over its size limit) and undecodable bytes raise :class:`CSVError` naming
    ``source`` and the line.
    """
    reader = csv.reader(_without_bom(lines))
    line_number = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise CSVError(f"{source}: line {line_number + 1}: malformed CSV ({err})") from None
        except UnicodeDecodeError as err:
            where = "near the start" if line_number == 0 else f"after line {line_number}"
            raise CSVError(f"{source}: not UTF-8 text ({where}): {err.reason}") from None
        line_number += 1
        cells = [c.strip() for c in row]
        if any(cells):
            yield line_number, cells


def parse_number(text: str, *, where: str, label: str) -> float:
    """A finite float from a CSV cell; integers beyond 2^53 are refused, in integer or float
    syntax (``9007199254740993.0`` would round), as is any value at or above 2^53 that
    float64 does not hold exactly."""
    try:
        value = float(text)
    except ValueError:
        raise CSVError(f"{where}: could not read {text!r} as a number (column {label!r})") from None
    if not math.isfinite(value):
        raise CSVError(f"{where}: value {text!r} is not finite")
    if _INTEGER.fullmatch(text) and abs(int(text)) > _MAX_EXACT_INT:
        raise CSVError(
            f"{where}: integer {text} is beyond 2^53 and cannot be represented exactly "
            f"(column {label!r})"
        )
    if abs(value) >= _MAX_EXACT_INT and _beyond_exact(text, value):
        raise CSVError(
            f"{where}: value {text} is an integer beyond 2^53 or is rounded in float64 "
            f"(column {label!r})"
        )
    return value


def _beyond_exact(text: str, value: float) -> bool:
    """Float syntax (``9007199254740993.0``, ``1e20``) at or above 2^53: its exact decimal
    value is an integer beyond 2^53 or differs from the float (silent rounding)."""
    exact = Decimal(text.strip())
    return abs(exact) > _MAX_EXACT_INT or exact != Decimal(value)


@dataclass
class SeriesReader:
    """Yields ``(line_number, value)`` for one numeric column of a CSV, lazily.

    Args:
        lines: an iterable of text lines (an open file or ``sys.stdin``); read one
            line at a time, so a live pipe works.
        column: a header name; if given, the first non-blank line must be a header
            holding it. If None, the input must have a single column, and a first
            line that is not a number is taken as its header (unless it starts like
            a number, e.g. ``12a``: that is an error, not a header).
        source: the input's name for messages.
        time_column: a header name whose cell is passed through with each value
            (:meth:`records`); needs ``column`` (a header).
        missing: what a missing value (an empty cell, ``NA``, ``NaN``, ``null``...)
            does: ``"error"`` (default; the message names the line and the way out),
            ``"skip"`` (the row is dropped; counted in ``skipped``) or ``"zero"``
            (read as 0; counted in ``zeroed``).
        where: :class:`Condition` s (or ``(header name, value)`` pairs, meaning
            equality): a row whose cells fail any of them (compared after stripping
            spaces) is yielded with the value 0 (it keeps its time, so the steps span
            the whole input) and counted in ``unmatched``. Needs a header.
        count_rows: every yielded row has the value 1 (an event log without a numeric
            column: the sum of a step is its number of rows); ``column`` must be None
            and the first line is a header.

    Blank lines and a UTF-8 byte-order mark are skipped. Every other value must be a
    finite number (integers of magnitude at most 2^53); anything else raises
    :class:`CSVError` naming the line, the column and the text.
    """

    lines: Iterable[str]
    column: str | None = None
    source: str = "input"
    time_column: str | None = None
    missing: str = "error"
    where: tuple[Condition | tuple[str, str], ...] = ()
    count_rows: bool = False
    skipped: int = field(default=0, init=False)
    zeroed: int = field(default=0, init=False)
    unmatched: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.where = tuple(
            c if isinstance(c, Condition) else Condition(c[0], (c[1],)) for c in self.where
        )
        if self.missing not in MISSING_POLICIES:
            raise ValueError(f"--missing must be one of {MISSING_POLICIES}, got {self.missing!r}")
        if self.count_rows and self.column is not None:
            raise ValueError("count_rows counts rows: it takes no --column")
        if self.time_column is not None and self.column is None and not self.count_rows:
            raise ValueError("--time-column needs --column (the input must have a header)")
        if self.where and self.column is None and not self.count_rows:
            raise ValueError(
                "--where needs --column (or counting rows): the input must have a header"
            )

    @property
    def _has_header(self) -> bool:
        return self.column is not None or self.count_rows

    def _find(self, name: str, cells: list[str], where: str, what: str) -> int:
        if name not in cells:
            raise CSVError(f"{where}: no {what} named {name!r} in header {cells}")
        return cells.index(name)

    def __iter__(self) -> Iterator[tuple[int, float]]:
        for line_number, _, value in self.records():
            yield line_number, value

    def records(self) -> Iterator[tuple[int, str | None, float]]:
        """``(line_number, time cell or None, value)`` per row (see the class)."""
        layout: _Layout | None = None
        for line_number, cells in csv_rows(self.lines, self.source):
            where = f"{self.source}: line {line_number}"
            if layout is None:
                layout, header = self._layout(cells, where)
                if header:
                    continue
            if not self._has_header and len(cells) != 1:
                raise CSVError(f"{where}: found {len(cells)} fields, expected 1")
            layout.check_width(cells, where, self.time_column)
            value = self._value(layout, cells, where)
            if value is not None:
                yield line_number, (cells[layout.time] if layout.time >= 0 else None), value

    def _layout(self, cells: list[str], where: str) -> tuple[_Layout, bool]:
        """The columns read, from the first row, and whether that row is a header."""
        if self._has_header:
            index, label = -1, "rows"  # no column: each row counts 1
            if self.column is not None:
                index, label = self._find(self.column, cells, where, "column"), self.column
            time = -1
            if self.time_column is not None:
                time = self._find(self.time_column, cells, where, "time column")
            conditions = tuple(
                (self._find(c.column, cells, where, "--where column"), c)
                for c in self.where
                if isinstance(c, Condition)
            )
            return _Layout(index, label, time, conditions), True
        if len(cells) != 1:
            raise CSVError(f"{where}: found {len(cells)} columns; choose one with --column")
        if _is_number(cells[0]):
            return _Layout(0, "1", -1, ()), False
        if starts_like_number(cells[0]):
            raise CSVError(
                f"{where}: could not read {cells[0]!r} as a number (a header must "
                "not start like a number)"
            )
        return _Layout(0, cells[0], -1, ()), True

    def _value(self, layout: _Layout, cells: list[str], where: str) -> float | None:
        """The value of a data row (None: skipped), counting what is not read as is."""
        if not all(c.matches(cells[i]) for i, c in layout.conditions):
            # the row still marks its time (the steps span the whole input, not
            # only the matching rows): it counts 0
            self.unmatched += 1
            return 0.0
        if layout.value < 0:
            return 1.0
        cell = cells[layout.value]
        if cell.lower() not in MISSING_MARKERS:
            return parse_number(cell, where=where, label=layout.label)
        if self.missing == "error":
            raise CSVError(
                f"{where}: missing value {cell!r} in column {layout.label!r} (pass "
                "--missing skip to drop such rows, or --missing zero to read them as 0)"
            )
        if self.missing == "skip":
            self.skipped += 1
            return None
        self.zeroed += 1
        return 0.0


class _Layout(NamedTuple):
    """Where :meth:`SeriesReader.records` finds its cells: the value's column (-1:
    each row counts 1) and its name for messages, the time column (-1: none) and the
    ``--where`` conditions' columns."""

    value: int
    label: str
    time: int
    conditions: tuple[tuple[int, Condition], ...]

    def check_width(self, cells: list[str], where: str, time_column: str | None) -> None:
        """A row too short for a column read is refused, naming that column."""
        if max([self.value, self.time, *(i for i, _ in self.conditions)]) < len(cells):
            return
        if self.value >= len(cells):
            name = self.label
        elif self.time >= len(cells):
            name = str(time_column)
        else:
            name = next(c.column for i, c in self.conditions if i >= len(cells))
        raise CSVError(f"{where}: no field for column {name!r} (found {len(cells)} fields)")


def read_plain_column(
    text: str, column: str | None = None, time_column: str | None = None
) -> tuple[NDArray[np.float64], list[str] | None] | None:
    """The values (and time cells) of a *plain* CSV, vectorized; None when the text
    needs :class:`SeriesReader`'s row-by-row reading.

    Plain: no quotes, carriage returns, underscores, blank or missing cells, a header
    when ``column`` is given (else one column, with or without a header), and every
    value a finite number below 2^53 in magnitude. On such text the result equals
    :meth:`SeriesReader.records`'s values (both parse with a correctly rounded
    decimal-to-binary conversion); anything else returns None, and the caller reads
    row by row, which reports the offending line as usual.
    """
    lines = _plain_lines(text)
    if lines is None:
        return None
    if column is None:
        if time_column is not None or "," in text:
            return None
        cells = lines[1:] if not _is_number(lines[0]) else lines
        if cells is not lines and starts_like_number(lines[0]):
            return None
        labels = None
    else:
        found = _plain_columns(lines, column, time_column)
        if found is None:
            return None
        cells, labels = found
    values = _plain_values(cells)
    return None if values is None else (values, labels)


def _plain_lines(text: str) -> list[str] | None:
    """The lines of a text without quotes, carriage returns, underscores, a byte-order
    mark or blank lines; None otherwise."""
    if any(c in text for c in '"\r_') or text.startswith("\ufeff"):
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or any(not line.strip() for line in lines):
        return None
    return lines


def _plain_columns(
    lines: list[str], column: str, time_column: str | None
) -> tuple[list[str], list[str] | None] | None:
    """The cells of ``column`` (and of ``time_column``) under a header; None unless
    every row has the header's width."""
    header = [c.strip() for c in lines[0].split(",")]
    if column not in header or (time_column is not None and time_column not in header):
        return None
    rows = [line.split(",") for line in lines[1:]]
    width = len(header)
    if any(len(row) != width for row in rows):
        return None
    index = header.index(column)
    labels = None
    if time_column is not None:
        t_index = header.index(time_column)
        labels = [row[t_index].strip() for row in rows]
    return [row[index] for row in rows], labels


def _plain_values(cells: list[str]) -> NDArray[np.float64] | None:
    """The cells as floats when every one is a finite number below 2^53; else None."""
    if not cells:
        return None
    try:
        values = np.array(cells, dtype=np.float64)
    except ValueError:
        return None
    if not np.isfinite(values).all() or (np.abs(values) >= _MAX_EXACT_INT).any():
        return None
    return values
