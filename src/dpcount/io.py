"""Reading one numeric series from a CSV, lazily, with errors that name the line."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["CSVError", "SeriesReader"]


class CSVError(ValueError):
    """A malformed CSV input; the message names the line."""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class SeriesReader:
    """Yields ``(line_number, value)`` for one numeric column of a CSV, lazily.

    Args:
        lines: an iterable of text lines (an open file or ``sys.stdin``); read one
            line at a time, so a live pipe works.
        column: a header name; if given, the first non-blank line must be a header
            holding it. If None, the input must have a single column, and a first
            line that is not a number is taken as its header.
        source: the input's name for messages.

    Blank lines are skipped. Every other value must be a finite number; anything
    else raises :class:`CSVError` naming the line, the column and the text.
    """

    lines: Iterable[str]
    column: str | None = None
    source: str = "input"

    def __iter__(self) -> Iterator[tuple[int, float]]:
        index, label, first = 0, self.column or "1", True
        for line_number, row in enumerate(csv.reader(self.lines), start=1):
            cells = [c.strip() for c in row]
            if not any(cells):
                continue
            if first:
                first = False
                if self.column is not None:
                    if self.column not in cells:
                        raise CSVError(
                            f"{self.source}: line {line_number}: no column named {self.column!r} "
                            f"in header {cells}"
                        )
                    index = cells.index(self.column)
                    continue
                if len(cells) != 1:
                    raise CSVError(
                        f"{self.source}: line {line_number}: found {len(cells)} columns; "
                        "choose one with --column"
                    )
                if not _is_number(cells[0]):
                    label = cells[0]
                    continue
            if self.column is None and len(cells) != 1:
                raise CSVError(
                    f"{self.source}: line {line_number}: found {len(cells)} fields, expected 1"
                )
            if index >= len(cells):
                raise CSVError(
                    f"{self.source}: line {line_number}: no field for column {label!r} "
                    f"(found {len(cells)} fields)"
                )
            text = cells[index]
            try:
                value = float(text)
            except ValueError:
                raise CSVError(
                    f"{self.source}: line {line_number}: could not read {text!r} as a number "
                    f"(column {label!r})"
                ) from None
            if not math.isfinite(value):
                raise CSVError(f"{self.source}: line {line_number}: value {text!r} is not finite")
            yield line_number, value
