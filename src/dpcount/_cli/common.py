"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import IO

from rich.console import Console

__all__ = ["add_privacy_arguments", "err_console", "open_output", "positive_float"]


def err_console() -> Console:
    """Rich console on stderr (summaries go there so stdout can carry data)."""
    return Console(stderr=True, highlight=False)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return value


def add_privacy_arguments(p: argparse.ArgumentParser, *, gaussian_default: bool = False) -> None:
    p.add_argument("--epsilon", type=positive_float, required=True, help="privacy parameter ε > 0")
    p.add_argument(
        "--delta", type=positive_float, default=None, help="δ in (0, 1); omit for pure ε-DP"
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
