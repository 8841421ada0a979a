"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import IO

from rich.console import Console
from rich.markup import escape

__all__ = [
    "add_privacy_arguments",
    "err_console",
    "escape",
    "open_output",
    "out_console",
    "positive_float",
]


def err_console() -> Console:
    """Rich console on stderr (summaries go there so stdout can carry data).

    ``soft_wrap``: a line is never broken at the console width (80 columns when
    stderr is a log file), so a log holds whole sentences. Text that is not markup
    (file names, reprs, notes) must go through :func:`escape`: ``dpcount[plot]``
    would otherwise lose its ``[plot]`` as an unknown style tag.
    """
    return Console(stderr=True, highlight=False, soft_wrap=True)


def out_console(min_width: int = 100) -> Console:
    """Rich console on stdout for tables: at least ``min_width`` columns (a log file
    would get 80), lines not wrapped (see :func:`err_console`)."""
    return Console(highlight=False, width=max(min_width, Console().width), soft_wrap=True)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return value


def add_privacy_arguments(p: argparse.ArgumentParser, *, gaussian_default: bool = False) -> None:
    p.add_argument("--epsilon", type=positive_float, required=True, help="privacy parameter ε > 0")
    p.add_argument(
        "--delta", type=positive_float, default=None, help="δ in (0, 1) (default: none, pure ε-DP)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for reproducible research ONLY: anyone with the seed can remove the noise; "
        "default: operating-system entropy",
    )


@contextlib.contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """The output file (atomic replace not needed: a partial file is visibly partial), or stdout."""
    if path is None or path == "-":
        yield sys.stdout
        return
    with open(path, "w", newline="", encoding="utf-8") as fh:
        yield fh
