"""``dpcount count``: private running counts of a CSV column."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import sys
from typing import IO, Any

import numpy as np

from dpcount._cli._counting import (
    DEFAULT_K,
    build,
    build_unbounded,
    header,
    postprocessed,
    row_line,
    summary,
    summary_unbounded,
)
from dpcount._cli._durable import run_durable
from dpcount._cli._time import Clock, parse_width
from dpcount._cli.common import (
    add_participation_arguments,
    add_privacy_arguments,
    err_console,
    escape,
    open_output,
)
from dpcount.counting._steps import NotWholeNumberError
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.registry import MECHANISMS
from dpcount.counting.unbounded import UnboundedCounter, UnboundedStream
from dpcount.io import MISSING_POLICIES, SeriesReader
from dpcount.privacy.notes import data_derived_warning

HELP = "release private running counts (prefix sums) of a numeric CSV column"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "input",
        metavar="INPUT",
        help="CSV file, or - to read stdin line by line (live: each row is released as it "
        "arrives; with --monotone, --step or --plot stdin is read to its end first, as a file)",
    )
    p.add_argument(
        "--column",
        default=None,
        help="header name of the column to count (default: the input's only column)",
    )
    _mechanism_arguments(p)
    _time_arguments(p)
    _post_arguments(p)
    _checkpoint_arguments(p)


def _mechanism_arguments(p: argparse.ArgumentParser) -> None:
    """The mechanism, its budget and its horizon."""
    p.add_argument(
        "--mechanism",
        choices=["auto", *sorted(MECHANISMS)],
        default="auto",
        help="counting mechanism; auto: the one `dpcount plan` ranks first by exact MSE for "
        "this horizon and budget, among those taking the default integer noise when the data "
        "and --sensitivity are whole numbers (else with its own noise; the summary says when "
        "plan's first row needs floating-point noise, and what it would cost). Stdin without "
        "--horizon: the inner mechanism of the unbounded counter (auto: the lowest exact "
        "variance at t = 2^16)",
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
    p.add_argument(
        "--bands",
        type=int,
        default=None,
        help="bands of --mechanism toeplitz's optimized encoder (default: the horizon, a full "
        "Toeplitz matrix; `dpcount plan` recommends --bands B with --min-separation B; other "
        "mechanisms ignore it, with a warning)",
    )
    add_privacy_arguments(p)
    p.add_argument(
        "--noise",
        choices=("laplace", "gaussian", "discrete-laplace", "discrete-gaussian"),
        default=None,
        help="default: exact integer noise (discrete-laplace, or discrete-gaussian with "
        "--delta; with --mechanism auto and --delta, whichever of the two gives the smaller "
        "exact MSE; integer output, not attackable through floating-point rounding) when the "
        "mechanism takes it (kary, binary, honaker), the data and --sensitivity are whole "
        "numbers and no --calibration is given (stdin: a fractional row is then an error); "
        "otherwise the mechanism's own default (gaussian for blt and toeplitz, which then need "
        "--delta; else laplace), with a one-line note on stderr",
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
    add_participation_arguments(p)
    p.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="number of steps T (default: the steps of INPUT, or of stdin when it is read to "
        "its end for --monotone/--step/--plot). Live stdin without --horizon runs the "
        "unbounded doubling counter: step t in block i (steps 2^i..2^(i+1)-1) is released as "
        "the finished blocks' last releases plus block i's own mechanism (horizon 2^i, full "
        "budget; disjoint blocks, so the guarantee holds for every prefix); its error grows "
        "with t (the std column is exact per row)",
    )


def _time_arguments(p: argparse.ArgumentParser) -> None:
    """The output file, time labels, bucketing and missing values."""
    p.add_argument("--output", default=None, help="output CSV (default: stdout)")
    p.add_argument(
        "--time-column",
        default=None,
        help="header of a time column (dates, timestamps or ids) copied into the output, "
        "under its own name, next to t (default: none, t = 1..N only)",
    )
    p.add_argument(
        "--step",
        default=None,
        help="bucket the rows by --time-column into steps of this width: 1D, 6h, 15min, 30s, "
        "2W for ISO dates/timestamps, a number for numeric times; a step's value is the sum "
        "of its rows (an empty step is 0), so --sensitivity must bound the change of one "
        "step's sum; reads stdin to its end; not with --checkpoint (default: none, one row "
        "per step)",
    )
    p.add_argument(
        "--start",
        default=None,
        help="with --step: where step 1 starts (default: the earliest time in INPUT, which "
        "reveals it; give it to keep the start public)",
    )
    p.add_argument(
        "--missing",
        choices=MISSING_POLICIES,
        default="error",
        help="a missing value (empty, NA, NaN, null): stop with an error naming the line, "
        "skip the row, or read it as zero",
    )


def _post_arguments(p: argparse.ArgumentParser) -> None:
    """Post-processing of the release and the check plot."""
    p.add_argument(
        "--monotone",
        action="store_true",
        help="post-process: the closest non-decreasing series (isotonic regression; for "
        "steps that are never negative its l2 error to the truth is never larger than the "
        "raw release's); a fit of the whole series: reads stdin to its end, not with "
        "--checkpoint",
    )
    p.add_argument("--clamp", action="store_true", help="post-process: negative releases become 0")
    p.add_argument(
        "--round", action="store_true", help="post-process: round to integers (ties to even)"
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        default=None,
        help="draw the release with its ±2σ band over the true counts (for the data owner, "
        "not for publication: it shows the truth; needs dpcount[plot]; reads stdin to its "
        "end; not with --checkpoint; default: no plot)",
    )


def _checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    """The durable mode (docs/durable-streams.md)."""
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        default=None,
        help="durable run: save the stream to FILE as it goes and resume from FILE if it "
        "exists, never releasing a step twice (needs --output; FILE holds the noise key: "
        "protect it like the data; --time-column, --round and --clamp work row by row with it, "
        "--monotone, --step and --plot need the whole series and are refused; see "
        "docs/durable-streams.md; default: none, a plain run)",
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


def _check_options(args: argparse.Namespace) -> None:
    """Options a run cannot honour are refused up front, naming the flag and why."""
    if args.checkpoint is None:
        if args.checkpoint_every is not None:
            raise ValueError("--checkpoint-every needs --checkpoint FILE")
        if args.checkpoint_seconds != 1.0:
            raise ValueError("--checkpoint-seconds needs --checkpoint FILE")
    else:
        # A durable run releases (and delivers) row by row: whole-series options would
        # need rows not yet seen, or would change lines already released.
        why = {
            "--monotone": "the isotonic fit of a step changes with later rows, and released "
            "lines are final (run it on the output file afterwards)",
            "--step": "a step's sum is only known once the input is past it",
            "--plot": "the plot needs the true series of the whole input",
        }
        for flag, reason in why.items():
            if getattr(args, flag[2:]):
                raise ValueError(f"{flag} is not available with --checkpoint: {reason}")
        if args.checkpoint_every is not None and args.checkpoint_seconds != 1.0:
            raise ValueError(
                "--checkpoint-seconds is not used with --checkpoint-every N (a save every N "
                "steps exactly): give one of them"
            )
    if args.step is not None and args.time_column is None:
        raise ValueError("--step needs --time-column (the times to bucket)")
    if args.start is not None and args.step is None:
        raise ValueError("--start needs --step")


def _whole_input(args: argparse.Namespace) -> bool:
    """Whether the run reads the whole input before releasing: a file, or stdin with an
    option that needs the whole series (--monotone, --step, --plot)."""
    return args.input != "-" or bool(args.monotone or args.step or args.plot)


def _read_file(args: argparse.Namespace) -> tuple[list[float], list[str] | None, SeriesReader]:
    """The steps of the whole input (a file, or stdin read to its end) and their time
    labels (None without --time-column): one row per step, or with ``--step`` the sum
    of each bucket's rows (an empty bucket is a step of 0)."""
    source = "stdin" if args.input == "-" else args.input
    with contextlib.ExitStack() as stack:
        fh: IO[str] = (
            sys.stdin
            if args.input == "-"
            else stack.enter_context(open(args.input, encoding="utf-8", newline=""))
        )
        reader = SeriesReader(
            fh, args.column, source=source, time_column=args.time_column, missing=args.missing
        )
        records = list(reader.records())
    if not records:
        raise ValueError(f"{source}: no data rows")
    if args.step is None:
        labels = None if args.time_column is None else [str(t) for _, t, _ in records]
        return [v for _, _, v in records], labels, reader
    width, duration = parse_width(args.step, "--step")
    clock = Clock(width, duration, "--step")
    times = [clock.read(str(t), f"{source}: line {line}") for line, t, _ in records]
    if args.start is not None:
        clock.set_start(args.start, "--start")
    else:
        clock.start = min(times)
    sums: dict[int, float] = {}
    for (line, _, v), time in zip(records, times, strict=True):
        step = clock.step(time)
        if step < 1:
            raise ValueError(f"{source}: line {line}: time is before --start {args.start}")
        sums[step] = sums.get(step, 0.0) + v
    n = max(sums)
    return (
        [sums.get(k, 0.0) for k in range(1, n + 1)],
        [clock.label(k) for k in range(1, n + 1)],
        reader,
    )


def _warn_data_derived(args: argparse.Namespace) -> None:
    """With ``--step``, the start of step 1 and the horizon default to the earliest and
    the latest time in the input: released (as labels and as the number of rows)
    without noise. Say so, as ``dpcount keyed`` does."""
    names = [flag for flag, value in (("--start", args.start), ("--horizon", args.horizon))
             if value is None]  # fmt: skip
    if names:
        err_console().print(escape(data_derived_warning(names)), highlight=False)


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.checkpoint is not None:
        return run_durable(args)
    if not _whole_input(args):
        return _run_live(args)
    values, labels, reader = _read_file(args)
    horizon = len(values) if args.horizon is None else args.horizon
    if horizon < len(values):
        raise ValueError(
            f"--horizon {horizon} is smaller than the {len(values)} "
            f"{'rows' if args.step is None else 'steps'} of "
            + ("stdin" if args.input == "-" else args.input)
        )
    mech = build(args, horizon, values)
    if args.step is not None:
        _warn_data_derived(args)
    raw = mech.release(np.asarray(values))
    std = _released_std(mech, len(values))
    post = postprocessed(args, raw)
    with open_output(args.output) as out:
        out.write(",".join(header(args, post is not None)) + "\n")
        raw_list = raw.tolist()
        shown = raw_list if post is None else post
        for i, (v, s) in enumerate(zip(shown, std, strict=True)):
            label = None if labels is None else labels[i]
            out.write(row_line(i + 1, label, v, s, None if post is None else raw_list[i]))
    summary(mech, len(values), args)
    _report_missing(reader)
    if args.plot:
        from dpcount._cli._plot import plot_release

        path = plot_release(
            args.plot, np.cumsum(values), raw, np.asarray(std), post, labels, mech,
            time_name=args.time_column,
        )  # fmt: skip
        err_console().print(
            f"plot written to {escape(str(path))} (it shows the true counts: for the data "
            "owner, not for publication)"
        )
    return 0


def _run_live(args: argparse.Namespace) -> int:
    reader = SeriesReader(
        sys.stdin, args.column, source="stdin", time_column=args.time_column, missing=args.missing
    )
    mech: CountingMechanism | UnboundedCounter
    mech = build_unbounded(args) if args.horizon is None else build(args, args.horizon, None)
    post = args.round or args.clamp
    with open_output(args.output) as out:
        out.write(",".join(header(args, post)) + "\n")
        out.flush()
        stream = mech.stream()
        # Step by step: memory independent of --horizon (never variances()).
        variances = mech.iter_variances()
        steps = 0
        for _, time, value in reader.records():
            if args.horizon is not None and steps >= args.horizon:
                raise ValueError(f"stdin has more than --horizon {args.horizon} rows")
            v = _update(args, stream, value)
            shown = postprocessed(args, np.asarray([v]))
            s = math.sqrt(next(variances))
            line = row_line(steps + 1, time, v if shown is None else shown[0], s,
                            None if shown is None else v)  # fmt: skip
            out.write(line)
            out.flush()
            steps += 1
    if isinstance(mech, UnboundedCounter):
        summary_unbounded(mech, steps, args)
    else:
        summary(mech, steps, args)
    _report_missing(reader)
    return 0


def _report_missing(reader: SeriesReader) -> None:
    if reader.skipped or reader.zeroed:
        what = (
            f"{reader.skipped} row(s) with a missing value skipped (--missing skip)"
            if reader.skipped
            else f"{reader.zeroed} missing value(s) read as 0 (--missing zero)"
        )
        err_console().print(f"note: {what}")


def _released_std(mech: CountingMechanism, n: int) -> list[float]:
    """The exact std of steps 1..n: vectorized when n is most of the horizon, else step
    by step (a short file with a large --horizon costs memory of the file, not of T)."""
    if 2 * n >= mech.horizon:
        std: list[float] = np.sqrt(mech.variances()[:n]).tolist()
        return std
    return [math.sqrt(v) for v in itertools.islice(mech.iter_variances(), n)]


def _update(
    args: argparse.Namespace, stream: CountingStream | UnboundedStream, value: float
) -> Any:
    """``stream.update``; a fractional stdin row under the default integer noise gets a hint."""
    try:
        return stream.update(value)
    except NotWholeNumberError as err:
        if args.noise is None:
            raise ValueError(
                f"{err}; the default noise for integer data is integer noise: pass --noise "
                "laplace (or gaussian) for fractional data"
            ) from err
        raise
