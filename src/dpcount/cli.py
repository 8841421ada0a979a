"""Command-line interface: a thin layer over the library.

Each subcommand lives in ``dpcount._cli.<name>`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Errors in the user's input
(including usage errors), missing optional dependencies and running out of memory
are printed as one line (``dpcount: error: ...``) with exit status 2; ``main``
returns the status instead of raising ``SystemExit``.

Start-up is kept short: only the subcommand being run is imported (with numpy,
scipy and rich), so ``dpcount --version`` and ``dpcount --help`` import none of
them. A closed stdout (``dpcount count ... | head -3``) ends the run quietly with
status 0.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from dpcount._version import __version__

SUBCOMMANDS = ("count", "demo", "plan", "histogram", "ranges", "reproduce", "keyed", "sample")

#: one-line summaries for ``dpcount --help`` without importing every subcommand; a
#: subcommand missing here is imported for its ``HELP`` (tests check they agree)
SUMMARIES = {
    "count": "release private running counts (prefix sums) of a numeric CSV column, or of the "
    "rows of an event log per time step",
    "demo": "stream a real time series (SEARCHLOGS) through the best tree and the binary tree",
    "plan": "rank every continual-counting mechanism by its exact error for a horizon and budget "
    "(--ranges: the range-query mechanisms for a histogram size)",
    "histogram": "release a private histogram of CSV events after every time step "
    "(insertions, at most b items per step)",
    "ranges": "release a private histogram (1-D or 2-D) and answer range queries with exact "
    "error bars",
    "reproduce": "reproduce the three papers' tables and figures (CSV + PNG + paper-vs-ours table)",
    "sample": "write a small real sample file (CSV) to try dpcount with; without NAME, list them",
    "keyed": "private running counts per key at every time step, from an event log (CSV or "
    "Parquet): for the keys of --keys, or for keys selected privately from the data",
}

#: optional dependencies: module -> the extra that installs it
EXTRAS = {
    "matplotlib": "plot",
    "dp_accounting": "accounting",
    "pandas": "frame",
    "polars": "frame",
}

#: library parameter names that some subcommands spell differently on the command line
_FLAG_ALIASES = {"step_sensitivity": "--sensitivity", "rng seed": "--seed", "rng": "--seed"}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows every default and every choice: ``(default: X)`` is added to an
    option's help unless it already says its default, and a choice list is spelled
    out (``choices: a, b, c``) when a metavar hides it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.help is argparse.SUPPRESS:
            return text
        if action.choices is not None and action.metavar is not None:
            text += f" (choices: {', '.join(map(str, action.choices))})"
        shows_default = "default" in text or "%(default)" in text
        if (
            not shows_default
            and action.option_strings
            and action.default not in (None, False, argparse.SUPPRESS)
            and not action.required
        ):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, like every other dpcount error."""

    def error(self, message: str) -> NoReturn:
        print(f"dpcount: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first argument that is not an option)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser of every subcommand; with ``only`` (or ``lazy``), just that
    subcommand's options are set up and its module imported (none with ``lazy`` and no
    ``only``): the others are listed for ``--help`` but not imported."""
    parser = _Parser(
        prog="dpcount",
        description="Differentially private counting over time and over ranges, with exact error.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpcount {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        if (lazy or only is not None) and name != only and name in SUMMARIES:
            sub.add_parser(name, help=SUMMARIES[name])
            continue
        module = importlib.import_module(f"dpcount._cli.{name}")
        p = sub.add_parser(
            name, help=module.HELP, description=module.HELP, formatter_class=HelpFormatter
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _parser=p)
    return parser


def cli_message(err: BaseException, parser: argparse.ArgumentParser | None = None) -> str:
    """The error as the command line speaks: library parameter names become their flags
    (``step_sensitivity`` -> ``--sensitivity``), a missing optional dependency names the
    extra that installs it."""
    if isinstance(err, ImportError) and err.name is not None:
        top = err.name.split(".")[0]
        if top in EXTRAS:
            return f"{top} is not installed: pip install 'dpcount[{EXTRAS[top]}]'"
    text = str(err)
    aliases = dict(_FLAG_ALIASES)
    if parser is not None:
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--"):
                    aliases.setdefault(action.dest, option)
    for name, flag in aliases.items():
        # the library's forms "<parameter> must ..." (dpcount._validate) and
        # "<parameter>='value'"; whole words only
        word = rf"(?<![\w-]){re.escape(name)}"
        text = re.sub(rf"{word}(?= must)", flag, text)
        text = re.sub(rf"{word}='([^'\s]*)'", rf"{flag} \1", text)
    return text


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush
    does not raise again (the recipe of the Python signal documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests): nothing to flush
        pass
    finally:
        os.close(devnull)


def _warn_delta(args: argparse.Namespace) -> None:
    """One warning line on stderr, before any work, for a ``--delta`` above 1e-3 (every
    subcommand that takes one; the guarantee line repeats it) — or, for ``dpcount
    keyed`` with key selection, for the run's total δ, ``--delta`` + ``--select-delta``."""
    delta = getattr(args, "delta", None)
    select = getattr(args, "select_delta", None)
    if delta is None and select is None:
        return
    from dpcount.privacy.notes import delta_warning

    if select is None:
        text = delta_warning(delta, parameter="--delta")
    elif delta is None:
        text = delta_warning(select, parameter="--select-delta")
    else:
        text = delta_warning(delta + select, parameter="--delta + --select-delta =")
    if text is not None:
        print(f"dpcount: warning: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(argv)
    parser = build_parser(command if command in SUBCOMMANDS else None, lazy=True)
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error (already printed)
        return done.code if isinstance(done.code, int) else 2
    sub: argparse.ArgumentParser = args._parser
    try:
        _warn_delta(args)
        status = int(args._run(args))
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader went away (| head): not an error
        _quiet_stdout()
        return 0
    except (ValueError, TypeError, OSError, ImportError) as err:
        print(f"dpcount: error: {cli_message(err, sub)}", file=sys.stderr)
        return 2
    except MemoryError as err:
        print(
            f"dpcount: error: not enough memory ({err or 'MemoryError'}); "
            "a smaller --horizon or input needs less",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
