"""Command-line interface: a thin layer over the library.

Each subcommand lives in ``dpcount._cli.<name>`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Errors in the user's input
(including usage errors), missing optional dependencies and running out of memory
are printed as one line (``dpcount: error: ...``) with exit status 2; ``main``
returns the status instead of raising ``SystemExit``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from dpcount._version import __version__

SUBCOMMANDS = ("count", "demo", "plan", "histogram", "ranges", "reproduce", "keyed")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, like every other dpcount error."""

    def error(self, message: str) -> NoReturn:
        print(f"dpcount: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpcount",
        description="Differentially private counting over time and over ranges, with exact error.",
    )
    parser.add_argument("--version", action="version", version=f"dpcount {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"dpcount._cli.{name}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error (already printed)
        return done.code if isinstance(done.code, int) else 2
    try:
        return int(args._run(args))
    except (ValueError, TypeError, OSError, ImportError) as err:
        print(f"dpcount: error: {err}", file=sys.stderr)
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
