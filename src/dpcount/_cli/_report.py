"""A ranking table the CLI prints (``dpcount plan``), in four formats.

* ``table``: for a terminal or a log. Never truncated: a number is never cut (its
  column is as wide as its widest value), a text cell wraps, and when the columns do
  not fit the width side by side the table is printed in parts, each repeating the
  key columns (``#`` and the mechanism). A legend says what each column means.
* ``csv``: one header line of column names, one line per row, every number at full
  precision (``repr``), an empty cell where a value does not apply; the notes and the
  recommendation go to stderr, so the file holds the table only.
* ``json``: one object: ``title``, ``columns`` (name, header, description),
  ``rows`` (objects, numbers at full precision, ``null`` where a value does not
  apply), ``notes`` and ``recommendation`` (lists of lines).
* ``markdown``: a pipe table (numbers as in ``table``), the legend, the notes and
  the recommendation, for a report or an issue.
"""

from __future__ import annotations

import csv
import enum
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from dpcount.counting.base import format_bytes

#: a line holding a command to copy (printed on one line, however long)
_COMMAND = re.compile(r"(^\s*|: )dpcount \w+ INPUT ")

#: the values of ``--format``
FORMATS = ("table", "csv", "json", "markdown")


class Kind(enum.Enum):
    """How a column's values are shown in ``table`` and ``markdown``."""

    TEXT = "text"
    INT = "int"
    NUMBER = "number"  # 4 significant digits
    RATIO = "ratio"  # 2 decimals (3 near 1 with ``precise``), >999 beyond
    BYTES = "bytes"


@dataclass(frozen=True)
class Column:
    """One column: ``name`` (CSV/JSON), ``header`` (table/markdown), ``legend``
    (what it means, in plain words; None for self-explanatory ones)."""

    name: str
    header: str
    kind: Kind
    legend: str | None = None
    precise: bool = False  # a ratio shown with 3 decimals below 10


@dataclass
class Report:
    """A title, columns, rows of raw values (None: does not apply), and the lines
    printed under the table."""

    title: str
    columns: list[Column]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    recommendation: list[str] = field(default_factory=list)
    #: leading columns repeated in every part of a table split to fit the width
    key_columns: int = 2


def shown(column: Column, value: Any) -> str:
    """A value as ``table`` and ``markdown`` show it."""
    if value is None:
        return "n/a"
    if column.kind is Kind.NUMBER:
        return f"{value:.4g}"
    if column.kind is Kind.RATIO:
        if value > 999:
            return ">999"
        if column.precise and value < 10:
            return f"{value:.3f}"
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    if column.kind is Kind.BYTES:
        return format_bytes(int(value))
    return str(value)


def _raw(value: Any) -> Any:
    """A value for JSON: numbers at full precision, a non-finite float as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render(
    report: Report, fmt: str, *, width: int | None = None, out: TextIO | None = None
) -> None:
    """Print ``report`` in format ``fmt`` (one of :data:`FORMATS`) on ``out`` (stdout);
    a ``table`` fits ``width`` (default: the terminal's, ``COLUMNS``, or 80 in a file)."""
    out = sys.stdout if out is None else out
    width = Console().width if width is None else width
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.name for c in report.columns])
        for row in report.rows:
            writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v
                             for v in row])  # fmt: skip
        for line in [*report.notes, *report.recommendation]:
            print(line, file=sys.stderr)
    elif fmt == "json":
        body = {
            "title": report.title,
            "columns": [
                {"name": c.name, "header": c.header, "description": c.legend}
                for c in report.columns
            ],
            "rows": [
                {c.name: _raw(v) for c, v in zip(report.columns, row, strict=True)}
                for row in report.rows
            ],
            "notes": report.notes,
            "recommendation": report.recommendation,
        }
        out.write(json.dumps(body, indent=2, allow_nan=False, ensure_ascii=False) + "\n")
    elif fmt == "markdown":
        out.write(_markdown(report))
    elif fmt == "table":
        _table(report, width, out)
    else:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def _legend(report: Report) -> list[str]:
    return [f"{c.header}: {c.legend}" for c in report.columns if c.legend is not None]


def _markdown(report: Report) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"

    align = ["---" if c.kind is Kind.TEXT else "---:" for c in report.columns]
    text = f"**{report.title}**\n\n" + line([c.header for c in report.columns]) + line(align)
    for row in report.rows:
        text += line([shown(c, v) for c, v in zip(report.columns, row, strict=True)])
    text += "\n" + "".join(f"- {item}\n" for item in _legend(report))
    text += "".join(f"\n{note}\n" for note in report.notes)
    if report.recommendation:
        text += "\n" + "".join(f"    {r}\n" for r in report.recommendation)
    return text


def _words(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _widths(report: Report, columns: list[int], width: int) -> list[int] | None:
    """Each column's width so that the table fits ``width``: as wide as its widest cell
    or header, then narrowed (headers and text wrap at spaces, never inside a word or a
    number) as far as needed; None if even the narrowest do not fit."""
    natural, least = [], []
    for i in columns:
        c = report.columns[i]
        cells = [shown(c, row[i]) for row in report.rows]
        natural.append(max(len(t) for t in [c.header, *cells]))
        least.append(max(_words(t) for t in [c.header, *cells]))
    excess = sum(natural) + 2 * len(columns) - 1 - width  # two spaces between columns
    widths = list(natural)
    for j in sorted(range(len(columns)), key=lambda j: least[j] - natural[j]):
        cut = min(max(excess, 0), natural[j] - least[j])
        widths[j] -= cut
        excess -= cut
    return widths if excess <= 0 else None


def _rich_table(report: Report, columns: list[int], title: str | None, widths: list[int]) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),  # two spaces between columns
        pad_edge=False,
        show_edge=False,
        expand=False,
    )
    for i, w in zip(columns, widths, strict=True):
        c = report.columns[i]
        if c.kind is Kind.TEXT:
            table.add_column(c.header, justify="left", overflow="fold", width=w)
        else:
            table.add_column(c.header, justify="right", overflow="fold", width=w)
    for n, row in enumerate(report.rows):
        cells = [shown(report.columns[i], row[i]) for i in columns]
        table.add_row(*cells, style="bold" if n == 0 else None)
    return table


def _parts(report: Report, width: int) -> list[tuple[list[int], list[int]]]:
    """The columns of each printed part, with their widths: all in one if they fit
    ``width``, else greedy groups, each led by the key columns."""
    keys = list(range(report.key_columns))
    parts: list[tuple[list[int], list[int]]] = []
    current = list(keys)
    for i in range(report.key_columns, len(report.columns)):
        if len(current) > len(keys) and _widths(report, [*current, i], width) is None:
            parts.append((current, _fitted(report, current, width)))
            current = [*keys, i]
        else:
            current.append(i)
    parts.append((current, _fitted(report, current, width)))
    return parts


def _fitted(report: Report, columns: list[int], width: int) -> list[int]:
    """The widths of a part; a part too wide even so (a single very long word) keeps
    its natural widths and runs past ``width`` rather than cut anything."""
    widths = _widths(report, columns, width)
    if widths is None:
        widths = _widths(report, columns, 10**6)
    assert widths is not None  # an unbounded width always fits
    return widths


def _table(report: Report, width: int, out: TextIO) -> None:
    console = Console(file=out, width=width, highlight=False, markup=False, emoji=False)
    parts = _parts(report, width)
    for n, (columns, widths) in enumerate(parts):
        title = report.title if n == 0 else None
        if len(parts) > 1:
            title = f"{report.title if n == 0 else ''} (part {n + 1} of {len(parts)})".strip()
        console.print(_rich_table(report, columns, title, widths), crop=False)
        console.print()
    for line in [*_legend(report), *report.notes]:
        console.print(line, crop=False)
    for line in report.recommendation:  # a command stays on one line, to copy
        console.print(line, soft_wrap=_COMMAND.search(line) is not None, crop=False)
