"""Shared machinery for the paper reproductions: results, CSV, figures, progress."""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dpcount.durable.atomic import PUBLIC, atomic_file
from dpcount.experiments._plotting import figure

__all__ = [
    "Comparison",
    "ExperimentConfig",
    "ExperimentResult",
    "figure",
    "progress_iter",
    "write_csv",
]


@dataclass(frozen=True)
class Comparison:
    """A number the paper states next to ours."""

    quantity: str
    paper: float | str
    ours: float
    note: str = ""


@dataclass(frozen=True)
class ExperimentConfig:
    """How to run: ``quick`` shrinks sizes (CI), ``out`` holds CSV/PNG, ``seed`` fixes noise."""

    quick: bool
    out: Path
    seed: int
    show_progress: bool = True


@dataclass
class ExperimentResult:
    """What an experiment produced; ``key`` holds the numbers the tests assert."""

    name: str
    title: str
    csv: Path
    figure: Path | None
    comparisons: list[Comparison] = field(default_factory=list)
    key: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    runtime: float = 0.0


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, mode=PUBLIC) as raw:  # the one writer (docs: durable.atomic)
        fh = io.TextIOWrapper(raw, newline="", encoding="utf-8", write_through=True)
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([f"{v:.10g}" if isinstance(v, float) else v for v in row])
        fh.detach()
    return path


#: seconds between two progress lines when stderr is not a terminal (a log file)
LOG_INTERVAL = 5.0


def progress_iter(items: Sequence[Any], label: str, show: bool) -> Iterator[Any]:
    """Iterate with progress on stderr when ``show``: a transient bar on a terminal,
    else (a log) a start line, a line at most every :data:`LOG_INTERVAL` seconds and
    a final line, so a long run is never silent in a log."""
    if not show:
        yield from items
        return
    if not sys.stderr.isatty():
        yield from _logged(items, label)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(label, total=len(items))
        for item in items:
            yield item
            progress.advance(task)


def _logged(items: Sequence[Any], label: str) -> Iterator[Any]:
    """Progress as plain lines on stderr (``label: done/total, elapsed s``)."""
    start = last = time.monotonic()
    total = len(items)
    print(f"{label}: 0/{total} started", file=sys.stderr, flush=True)
    for done, item in enumerate(items, start=1):
        yield item
        now = time.monotonic()
        if now - last >= LOG_INTERVAL or done == total:
            last = now
            print(f"{label}: {done}/{total} done, {now - start:.1f} s", file=sys.stderr, flush=True)


def timed(
    fn: Callable[[ExperimentConfig], ExperimentResult],
) -> Callable[[ExperimentConfig], ExperimentResult]:
    """Record the wall-clock runtime of an experiment in its result."""

    def wrapper(config: ExperimentConfig) -> ExperimentResult:
        start = time.perf_counter()
        result = fn(config)
        result.runtime = time.perf_counter() - start
        return result

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
