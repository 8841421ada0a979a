"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from rich.console import Console
from rich.markup import escape

from dpcount._cli.options import positive_float
from dpcount.durable.atomic import PUBLIC, atomic_file
from dpcount.privacy.budget import Participation

__all__ = [
    "check_digits",
    "err_console",
    "escape",
    "flags",
    "given_flags",
    "open_output",
    "out_console",
    "participation_from",
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


def given_flags(*pairs: tuple[str, object]) -> list[str]:
    """The flags of ``(flag, value)`` pairs whose value is not None, in order."""
    return [flag for flag, value in pairs if value is not None]


def check_digits(args: argparse.Namespace) -> None:
    if not 1 <= args.digits <= 17:
        raise ValueError(f"--digits must be between 1 and 17, got {args.digits}")


def flags(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """``{name: args.name}``: the flags a command passes on under the library's own
    parameter names (``--time-column`` is ``time_column=``)."""
    return {name: getattr(args, name) for name in names}


def participation_from(
    args: argparse.Namespace, horizon: int | None = None
) -> Participation | None:
    """The schema of ``--participations``/``--min-separation`` (None: event level); with
    a ``horizon``, refused (naming the flags) when K contributions B apart do not fit.
    ``--min-separation`` without ``--participations`` is refused: it would be ignored
    (one contribution), while whoever gave it meant users with several."""
    k = getattr(args, "participations", None)
    b = getattr(args, "min_separation", 1)
    if k is None and b != 1:
        raise ValueError(
            f"--min-separation {b} needs --participations K (K >= 2 contributions per user): "
            "without it the noise is calibrated for one contribution (event level)"
        )
    if k is None or k == 1:
        return None
    schema = Participation(max_participations=k, min_separation=b)
    if horizon is not None and k > schema.fits(horizon):
        raise ValueError(
            f"--participations {k} with --min-separation {b} do not fit in {horizon} steps "
            f"(at most {schema.fits(horizon)} contributions {b} apart do)"
        )
    return schema


@contextlib.contextmanager
def open_output(path: str | None, *, live: bool = False) -> Iterator[IO[str]]:
    """The output file, or stdout (``None`` or ``-``).

    A file is written through the one atomic writer
    (:func:`dpcount.durable.atomic.atomic_file`, released-output permissions): an
    unpredictable temporary name created ``O_EXCL`` in the target's folder, renamed
    over ``path`` once complete, so a planted symlink is never followed and a failed
    run leaves the old file. ``live``: a stream whose lines must be visible as they are
    released (``dpcount count -``) writes ``path`` directly, opened ``O_NOFOLLOW``
    (a symlink there is refused, never followed).
    """
    if path is None or path == "-":
        yield sys.stdout
        return
    if live:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            if os.path.islink(path):
                raise ValueError(f"--output {path} is a symbolic link: not followed") from None
            raise ValueError(f"--output {path}: {exc.strerror}") from None
        with open(fd, "w", newline="", encoding="utf-8") as fh:
            yield fh
        return
    with atomic_file(path, mode=PUBLIC) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        yield text
        text.flush()
        text.detach()  # atomic_file closes and renames the binary file
