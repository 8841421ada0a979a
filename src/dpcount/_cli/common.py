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

from dpcount.durable.atomic import PUBLIC, atomic_file
from dpcount.privacy.budget import Participation

__all__ = [
    "add_privacy_arguments",
    "add_seed_argument",
    "err_console",
    "escape",
    "flags",
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


def add_digits_argument(p: argparse.ArgumentParser, columns: str = "std column") -> None:
    """``--digits N`` (default 4): significant digits of the printed exact error, shared
    by count, histogram and keyed; :func:`check_digits` validates it."""
    p.add_argument(
        "--digits",
        metavar="N",
        type=int,
        default=4,
        help=f"significant digits of the {columns} (the exact error; 17 prints every bit "
        "of the float)",
    )


def check_digits(args: argparse.Namespace) -> None:
    if not 1 <= args.digits <= 17:
        raise ValueError(f"--digits must be between 1 and 17, got {args.digits}")


def flags(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """``{name: args.name}``: the flags a command passes on under the library's own
    parameter names (``--time-column`` is ``time_column=``)."""
    return {name: getattr(args, name) for name in names}


def add_privacy_arguments(p: argparse.ArgumentParser, *, gaussian_default: bool = False) -> None:
    p.add_argument("--epsilon", type=positive_float, required=True, help="privacy parameter ε > 0")
    p.add_argument(
        "--delta", type=positive_float, default=None, help="δ in (0, 1) (default: none, pure ε-DP)"
    )
    add_seed_argument(p)


def add_seed_argument(p: argparse.ArgumentParser) -> None:
    """``--seed`` (default: operating-system entropy), with its warning."""
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for reproducible research ONLY: anyone with the seed can remove the noise; "
        "default: operating-system entropy",
    )


def _count_at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def add_participation_arguments(p: argparse.ArgumentParser) -> None:
    """``--participations K`` and ``--min-separation B``: the (k, b)-participation schema."""
    p.add_argument(
        "--participations",
        metavar="K",
        type=_count_at_least_one,
        default=None,
        help="user-level privacy: each user contributes to at most K steps, any two at least "
        "--min-separation steps apart; neighbouring inputs differ in up to K such steps, each "
        "by at most --sensitivity, and the noise is calibrated to the exact (or certified) "
        "sensitivity under that schema (default 1: event level, one step)",
    )
    p.add_argument(
        "--min-separation",
        metavar="B",
        type=_count_at_least_one,
        default=1,
        help="with --participations: the fewest steps between two contributions of one user "
        "(>= 1; 1 allows consecutive steps; default 1; without --participations an error: "
        "it would be ignored and the noise calibrated for one contribution)",
    )


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
