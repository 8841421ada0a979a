"""``dpcount reproduce``: regenerate the papers' tables and figures."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from dpcount._cli.common import escape, out_console
from dpcount._cli.options import SEED, add

if TYPE_CHECKING:
    from dpcount.experiments import ExperimentResult

HELP = "reproduce the three papers' tables and figures (CSV + PNG + paper-vs-ours table)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name",
        nargs="?",
        default=None,
        metavar="NAME",
        help="experiment name, or 'all' (see --list)",
    )
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--quick", action="store_true", help="small sizes (all experiments in minutes)")
    p.add_argument("--out", default="reproduction", help="output folder for CSV and PNG files")
    add(p, SEED.but(default=0, help="seed of the experiments' noise (default 0)"))


def run(args: argparse.Namespace) -> int:
    listing = args.list or args.name is None
    if not listing:
        # Every experiment draws a figure: say what to install before seconds of imports
        # and minutes of work, not after (the error names the extra: dpcount.cli.cli_message).
        import matplotlib  # noqa: F401
    from dpcount.experiments import EXPERIMENTS, run_experiment

    con = out_console(110)
    if listing:
        _refuse_run_options(args)
        for name, fn in EXPERIMENTS.items():
            doc = (fn.__doc__ or "").strip().splitlines()[0]
            con.print(escape(f"{name:<20} {doc}"))
        return 0
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    for name in names:
        if name not in EXPERIMENTS:
            raise ValueError(f"unknown experiment {name!r}; choose from: {', '.join(EXPERIMENTS)}")
    for name in names:
        result = run_experiment(
            name, quick=args.quick, out=args.out, seed=args.seed, show_progress=True
        )
        _print_result(con, result, quick=args.quick)
    return 0


def _refuse_run_options(args: argparse.Namespace) -> None:
    """ValueError naming the first option of a run given to a listing (or to no NAME)."""
    given = {"NAME": args.list and args.name is not None, "--quick": args.quick,
             "--out": args.out != "reproduction", "--seed": args.seed != 0}  # fmt: skip
    for what, used in given.items():
        if used:
            raise ValueError(
                f"{what} is for running an experiment: "
                + ("--list only lists them" if args.list else "name one (see --list)")
            )


def _print_result(con: Console, result: ExperimentResult, *, quick: bool) -> None:
    """An experiment's paper-vs-ours table, notes, files and runtime."""
    con.rule(escape(f"{result.name}: {result.title}"))
    if result.comparisons:
        table = Table(show_edge=False)
        for col in ("quantity", "paper", "ours", "note"):
            table.add_column(col)
        for c in result.comparisons:
            ours = f"{c.ours:.6g}" if isinstance(c.ours, float) else str(c.ours)
            table.add_row(*(escape(s) for s in (c.quantity, str(c.paper), ours, c.note)))
        con.print(table)
    for note in result.notes:
        con.print(escape(f"note: {note}"))
    figure = f"   figure: {result.figure}" if result.figure else ""
    con.print(escape(f"data: {result.csv}{figure}"))
    con.print(f"runtime: {result.runtime:.1f} s" + (" (--quick)" if quick else ""))
