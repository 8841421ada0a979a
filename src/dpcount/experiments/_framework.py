"""Shared machinery for the paper reproductions: results, CSV, figures, progress."""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dpcount.durable.atomic import PUBLIC, atomic_file
from dpcount.experiments._plotting import figure

__all__ = [
    "Comparison",
    "Experiment",
    "ExperimentConfig",
    "ExperimentResult",
    "Summary",
    "comparisons",
    "figure",
    "progress_iter",
    "write_csv",
    "write_records",
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

    def progress(self, items: Sequence[Any], label: str) -> Iterator[Any]:
        """``items`` with progress on stderr when :attr:`show_progress` (:func:`progress_iter`)."""
        return progress_iter(items, label, self.show_progress)


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


def comparisons(
    summary: Mapping[str, float], rows: Iterable[tuple[str, float | str, str, int, str]]
) -> list[Comparison]:
    """A :class:`Comparison` per row ``(quantity, paper, key, digits, note)``: ours is
    ``summary[key]`` rounded to ``digits``."""
    return [
        Comparison(quantity, paper, round(summary[key], digits), note)
        for quantity, paper, key, digits, note in rows
    ]


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


def write_records(path: Path, records: Sequence[Mapping[str, Any]]) -> Path:
    """:func:`write_csv` of one row per record, the header its keys (each column's name
    stands beside its value where the record is built; every record has the same keys in
    the same order)."""
    if not records:
        raise ValueError(f"no records for {path.name}: the header comes from them")
    header = list(records[0])
    for record in records:
        if list(record) != header:
            raise ValueError(f"record keys {list(record)} differ from the header {header}")
    return write_csv(path, header, ([record[k] for k in header] for record in records))


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


R = TypeVar("R")


@dataclass(frozen=True)
class Summary:
    """The numbers an experiment reports beside its CSV and figure."""

    comparisons: list[Comparison] = field(default_factory=list)
    key: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Experiment(Generic[R]):
    """A registered reproduction: compute → frozen result → CSV, figure and summary.

    Calling it with an :class:`ExperimentConfig` runs the steps in that order, writes
    ``NAME.png`` next to the CSV and records the wall-clock runtime, so each
    experiment is declared as data (its name, title and four functions) instead of a
    hand-written wrapper.

    Attributes:
        name: the ``dpcount reproduce`` name (also the figure's file name).
        title: the result's title.
        doc: one line for ``dpcount reproduce --list``.
        compute: draws the noise and returns a frozen result (writes nothing).
        write: writes the result's CSV into a folder and returns its path.
        plot: draws the result's figure to a path.
        summarize: the paper's numbers beside ours, the key numbers, notes.
    """

    name: str
    title: str
    doc: str
    compute: Callable[[ExperimentConfig], R]
    write: Callable[[R, Path], Path]
    plot: Callable[[R, Path], None]
    summarize: Callable[[R], Summary]

    def __post_init__(self) -> None:
        # ``dpcount reproduce --list`` and help() read an experiment's __doc__.
        object.__setattr__(self, "__doc__", self.doc)

    @classmethod
    def of(cls, module: ModuleType, name: str, title: str, doc: str) -> Experiment[Any]:
        """The experiment ``name`` whose steps are ``module``'s ``compute_NAME``,
        ``write_NAME``, ``plot_NAME`` and ``summarize_NAME`` (NAME: ``name`` with
        ``_`` for ``-``), so a registry row names an experiment and its text once.

        Raises:
            AttributeError: a step is missing (at import: a registry row cannot point
                to nothing).
        """
        stem = name.replace("-", "_")
        compute, write, plot, summarize = (
            getattr(module, f"{step}_{stem}") for step in ("compute", "write", "plot", "summarize")
        )
        return Experiment(name, title, doc, compute, write, plot, summarize)

    def __call__(self, config: ExperimentConfig) -> ExperimentResult:
        start = time.perf_counter()
        result = self.compute(config)
        csv_path = self.write(result, config.out)
        fig_path = config.out / f"{self.name}.png"
        self.plot(result, fig_path)
        summary = self.summarize(result)
        return ExperimentResult(
            name=self.name,
            title=self.title,
            csv=csv_path,
            figure=fig_path,
            comparisons=summary.comparisons,
            key=summary.key,
            notes=summary.notes,
            runtime=time.perf_counter() - start,
        )
