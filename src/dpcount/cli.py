"""Command-line interface: a thin layer over the library.

Each subcommand lives in ``dpcount._cli.<name>`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Errors in the user's input
and missing optional dependencies are printed as one line
(``dpcount: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dpcount import __version__

SUBCOMMANDS = ("count", "demo", "plan", "histogram", "ranges", "reproduce")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except (ValueError, TypeError, OSError, ImportError) as err:
        print(f"dpcount: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
