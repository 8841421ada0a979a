"""``dpcount count``: private running counts of a CSV column."""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from typing import Any

import numpy as np

from dpcount._cli._counting import DEFAULT_K, build, format_line, summary
from dpcount._cli._durable import run_durable
from dpcount._cli.common import add_privacy_arguments, open_output
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.registry import MECHANISMS
from dpcount.io import SeriesReader

HELP = "release private running counts (prefix sums) of a numeric CSV column"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "input", metavar="INPUT", help="CSV file, or - to read stdin line by line (live)"
    )
    p.add_argument(
        "--column",
        default=None,
        help="header name of the column to count (default: the input's only column)",
    )
    p.add_argument(
        "--mechanism",
        choices=["auto", *sorted(MECHANISMS)],
        default="auto",
        help="counting mechanism; auto: the one `dpcount plan` ranks first by exact MSE for "
        "this horizon and budget (its noise family, in integer form when the data allow it)",
    )
    p.add_argument(
        "--k",
        type=int,
        default=None,
        help=f"branching factor of --mechanism kary (default {DEFAULT_K}; other mechanisms "
        "ignore it, with a warning)",
    )
    p.add_argument(
        "--no-subtract",
        action="store_true",
        help="--mechanism kary without subtraction (Alg. 1)",
    )
    add_privacy_arguments(p)
    p.add_argument(
        "--noise",
        choices=("laplace", "gaussian", "discrete-laplace", "discrete-gaussian"),
        default=None,
        help="default: exact integer noise (discrete-laplace, or discrete-gaussian with "
        "--delta; integer output, not attackable through floating-point rounding) when the "
        "mechanism takes it (kary, binary, honaker), the data and --sensitivity are whole "
        "numbers and no --calibration is given (stdin: a fractional row is then an error); "
        "otherwise laplace, with a one-line note on stderr",
    )
    p.add_argument(
        "--calibration",
        default=None,
        help="Gaussian calibration: analytic (default), classic or fhu; Laplace with --delta: "
        "theorem3 (default) or pld (needs dpcount[accounting])",
    )
    p.add_argument(
        "--sensitivity",
        type=float,
        default=1.0,
        help="largest change of one step between neighbouring inputs (default 1)",
    )
    p.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="number of steps T (required for stdin; default: rows in INPUT)",
    )
    p.add_argument("--output", default=None, help="output CSV (default: stdout)")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        default=None,
        help="durable run: save the stream to FILE as it goes and resume from FILE if it "
        "exists, never releasing a step twice (needs --output; FILE holds the noise key: "
        "protect it like the data; see docs/durable-streams.md; default: none, a plain run)",
    )
    p.add_argument(
        "--checkpoint-every",
        metavar="N",
        type=int,
        default=None,
        help="with --checkpoint: save every N steps exactly (default: by time, see "
        "--checkpoint-seconds); output lines are held back until the checkpoint covering "
        "them is on disk",
    )
    p.add_argument(
        "--checkpoint-seconds",
        metavar="S",
        type=float,
        default=1.0,
        help="with --checkpoint and no --checkpoint-every: save when S seconds have passed "
        "since the last save, when live input pauses, or every 10000 steps, whichever comes "
        "first (default 1)",
    )


def run(args: argparse.Namespace) -> int:
    if args.checkpoint is not None:
        return run_durable(args)
    if args.checkpoint_every is not None:
        raise ValueError("--checkpoint-every needs --checkpoint FILE")
    if args.checkpoint_seconds != 1.0:
        raise ValueError("--checkpoint-seconds needs --checkpoint FILE")
    live = args.input == "-"
    if live:
        if args.horizon is None:
            raise ValueError(
                "--horizon is required when reading stdin (the noise is calibrated for it)"
            )
        rows = SeriesReader(sys.stdin, args.column, source="stdin")
        values: list[float] | None = None
        horizon = args.horizon
    else:
        with open(args.input, encoding="utf-8", newline="") as fh:
            values = [v for _, v in SeriesReader(fh, args.column, source=args.input)]
        if not values:
            raise ValueError(f"{args.input}: no data rows")
        horizon = len(values) if args.horizon is None else args.horizon
        if horizon < len(values):
            raise ValueError(
                f"--horizon {horizon} is smaller than the {len(values)} rows of {args.input}"
            )
    mech = build(args, horizon, values)
    with open_output(args.output) as out:
        out.write("t,private_count,std\n")
        out.flush()
        if values is not None:
            released = mech.release(np.asarray(values))
            std = _released_std(mech, len(values))
            for t, (v, s) in enumerate(zip(released.tolist(), std, strict=True), start=1):
                out.write(format_line(t, v, s))
            steps = len(values)
        else:
            stream = mech.stream()
            # Step by step: memory independent of --horizon (never variances()).
            variances = mech.iter_variances()
            steps = 0
            for _, value in rows:
                if steps >= horizon:
                    raise ValueError(f"stdin has more than --horizon {horizon} rows")
                v = _update(args, stream, value)
                out.write(format_line(steps + 1, v, math.sqrt(next(variances))))
                out.flush()
                steps += 1
    summary(mech, steps, args)
    return 0


def _released_std(mech: CountingMechanism, n: int) -> list[float]:
    """The exact std of steps 1..n: vectorized when n is most of the horizon, else step
    by step (a short file with a large --horizon costs memory of the file, not of T)."""
    if 2 * n >= mech.horizon:
        std: list[float] = np.sqrt(mech.variances()[:n]).tolist()
        return std
    return [math.sqrt(v) for v in itertools.islice(mech.iter_variances(), n)]


def _update(args: argparse.Namespace, stream: CountingStream, value: float) -> Any:
    """``stream.update``; a fractional stdin row under the default integer noise gets a hint."""
    try:
        return stream.update(value)
    except ValueError as err:
        if args.noise is None and "whole number" in str(err):
            raise ValueError(
                f"{err}; the default noise for integer data is integer noise: pass --noise "
                "laplace (or gaussian) for fractional data"
            ) from err
        raise
