"""``dpcount count``: private running counts of a CSV column."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import shlex
import sys
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from dpcount._cli import _counting, common
from dpcount._cli._counting import DEFAULT_K
from dpcount._cli._durable import run_durable
from dpcount._cli.options import (
    BUDGET,
    CALIBRATION,
    COLUMN,
    HORIZON,
    MECHANISM,
    MISSING,
    NO_SUBTRACT,
    NOISE,
    OBJECTIVE,
    OUTPUT,
    PARTICIPATION,
    SENSITIVITY,
    START,
    STEP,
    TIME_COLUMN,
    K,
    Option,
    add,
    digits_of,
)
from dpcount._events import (
    ABOVE_POLICIES,
    Bucketing,
    StepSums,
    bound_text,
    cut_note,
    outside_note,
    sum_steps,
)
from dpcount.counting._steps import NotWholeNumberError
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.registry import MECHANISMS
from dpcount.counting.unbounded import UnboundedCounter, UnboundedStream
from dpcount.io import Condition, SeriesReader, parse_where, read_plain_column
from dpcount.postprocess import MONOTONE_NOTE
from dpcount.privacy.notes import data_derived_warning

HELP = (
    "release private running counts (prefix sums) of a numeric CSV column, or of the rows "
    "of an event log per time step"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "input",
        metavar="INPUT",
        help="CSV file, or - to read stdin line by line (live: each row is released as it "
        "arrives; with --monotone, --step or --plot stdin is read to its end first, as a file)",
    )
    add(p, _COLUMN, _WHERE, digits_of("std columns"))
    add(p, _MECHANISM, _K, NO_SUBTRACT, _BANDS, OBJECTIVE, BUDGET, _NOISE, _CALIBRATION)
    add(p, _SENSITIVITY, PARTICIPATION, _HORIZON)
    add(p, OUTPUT, _TIME_COLUMN, _STEP, _ABOVE_BOUND, _START, MISSING)
    add(p, _MONOTONE, _CLAMP, _ROUND, _PLOT, _CHECKPOINT, _CHECKPOINT_EVERY, _CHECKPOINT_SECONDS)


# -- the input ------------------------------------------------------------------------

_COLUMN = COLUMN.but(
    help="header name of the column to count (default: the input's only column; with "
    "--time-column and --step and no --column, each row counts 1: the number of rows per "
    "step, e.g. events of a log)"
)
_WHERE = Option(
    ("--where",),
    "count only the rows whose COLUMN (a header name) passes the condition: "
    "COLUMN=VALUE (exact text, spaces around it ignored), COLUMN!=VALUE, 'COLUMN in "
    "V1,V2' (one of the listed values) or 'COLUMN not in V1,V2'; repeat for several "
    "conditions, all must hold; another row counts 0 but keeps its time, so the steps "
    "span the whole input; how many did not match is printed on stderr (default: every "
    "row)",
    {"metavar": "CONDITION", "action": "append", "default": None},
)

# -- the mechanism, its budget and its horizon ---------------------------------------------

_MECHANISM = MECHANISM.but(
    choices=lambda: ["auto", *sorted(MECHANISMS)],
    default="auto",
    help="counting mechanism; auto: the one `dpcount plan` ranks first by exact MSE for "
    "this horizon and budget, among those taking the default integer noise when the data "
    "and --sensitivity are whole numbers (else with its own noise; the summary says when "
    "plan's first row needs floating-point noise, and what it would cost). Stdin without "
    "--horizon: the inner mechanism of the unbounded counter (auto: the lowest exact "
    "variance at t = 2^16)",
)
_K = K.but(
    help=f"branching factor of --mechanism kary (default {DEFAULT_K}; other mechanisms "
    "ignore it, with a warning)"
)
_BANDS = Option(
    ("--bands",),
    "bands of --mechanism toeplitz's optimized encoder (default: the horizon, a full "
    "Toeplitz matrix; `dpcount plan` recommends --bands B with --min-separation B; other "
    "mechanisms ignore it, with a warning)",
    {"type": int, "default": None},
)
_NOISE = NOISE.but(
    help="default: exact integer noise (discrete-laplace, or discrete-gaussian with "
    "--delta; with --mechanism auto and --delta, whichever of the two gives the smaller "
    "exact MSE; not attackable through floating-point rounding; integer output: kary and "
    "binary release integers, and honaker's estimate, an exact fraction of integer sums, "
    "is rounded to whole numbers, post-processing: the std column is the unrounded "
    "estimate's, rounding adds at most 0.5) when the "
    "mechanism takes it (kary, binary, honaker), the data and --sensitivity are whole "
    "numbers and no --calibration is given (stdin: a fractional row is then an error); "
    "otherwise the mechanism's own default (gaussian for blt and toeplitz, which then need "
    "--delta; else laplace), with a one-line note on stderr"
)
_CALIBRATION = CALIBRATION.but(
    help="Gaussian calibration: analytic (default), classic or fhu; Laplace with --delta: "
    "theorem3 (default) or pld (needs dpcount[accounting])"
)
_SENSITIVITY = SENSITIVITY.but(
    help="largest change of one step between neighbouring inputs (default 1); with "
    "--step each row is one event and its value is bounded by it (see --above-bound)"
)
_HORIZON = HORIZON.but(
    help="number of steps T (default: the steps of INPUT, or of stdin when it is read to "
    "its end for --monotone/--step/--plot; rows after step T are dropped and how many is "
    "printed, as `dpcount keyed` drops events outside its steps; live stdin stops "
    "reading at step T). Live stdin without --horizon runs the "
    "unbounded doubling counter: step t in block i (steps 2^i..2^(i+1)-1) is released as "
    "the finished blocks' last releases plus block i's own mechanism (horizon 2^i, full "
    "budget; disjoint blocks, so the guarantee holds for every prefix); its error grows "
    "with t (the std column is exact per row)"
)

# -- time labels and bucketing -----------------------------------------------------------------

_TIME_COLUMN = TIME_COLUMN.but(
    help="header of a time column (dates, timestamps or ids) copied into the output, "
    "under its own name, next to t (default: none, t = 1..N only)"
)
_STEP = STEP.but(
    help="bucket the rows by --time-column into steps of this width: 1D, 6h, 15min, 30s, "
    "or calendar steps MS (months), QS (quarters), YS (years), W-MON (weeks to Monday) "
    "for ISO dates/timestamps, a number for numeric times (1M is refused: write 1min or "
    "1MS); binned and labelled as pandas' resample (W-MON: weeks ending on Monday, "
    "labelled by it); a step's value is the sum of its rows (an empty step is 0); each "
    "row is one event, its value cut to --sensitivity (see --above-bound); reads stdin "
    "to its end; not with --checkpoint (default: none, one row per step)"
)
_ABOVE_BOUND = Option(
    ("--above-bound",),
    "with --step: a row whose value is above --sensitivity in absolute value is "
    "cut to the bound, and how many were cut is printed (exact, not private), as "
    "`dpcount keyed` cuts to --max-weight (cut, the default), or stops the run with an "
    "error naming its line (error)",
    {"choices": ABOVE_POLICIES, "default": None},
)
_START = START.but(
    help="with --step: where step 1 starts (default: pandas' first bin of the earliest "
    "time in INPUT, which reveals it; give it to keep the start public); rows before it, "
    "and rows after --horizon steps, are dropped and how many is printed"
)

# -- post-processing and the check plot ------------------------------------------------------

_MONOTONE = Option(
    ("--monotone",),
    "post-process: the closest non-decreasing series (isotonic regression; for "
    "steps that are never negative its l2 error to the truth, summed over the series, is "
    "never larger than the raw release's). BIASED per step: correlated noise drifts for "
    "many steps and the fit follows it, so a sparse series can look flat (too low) over "
    "long stretches; the std column then describes the raw release only (raw_std), and "
    "the fitted values have no exact per-step error (see docs/tutorials/dashboard.md). "
    "A fit of the whole series: reads stdin to its end, not with --checkpoint",
    {"action": "store_true"},
)
_CLAMP = Option(("--clamp",), "post-process: negative releases become 0", {"action": "store_true"})
_ROUND = Option(
    ("--round",), "post-process: round to integers (ties to even)", {"action": "store_true"}
)
_PLOT = Option(
    ("--plot",),
    "draw the release with its ±2σ band over the true counts (for the data owner, "
    "not for publication: it shows the truth; needs dpcount[plot]; reads stdin to its "
    "end; not with --checkpoint; default: no plot)",
    {"metavar": "PNG", "default": None},
)

# -- the durable mode (docs/durable-streams.md) ------------------------------------------------

_CHECKPOINT = Option(
    ("--checkpoint",),
    "durable run: save the stream to FILE as it goes and resume from FILE if it "
    "exists, never releasing a step twice (needs --output; FILE holds the noise key: "
    "protect it like the data; --time-column, --round and --clamp work row by row with it, "
    "--monotone, --step and --plot need the whole series and are refused; see "
    "docs/durable-streams.md; default: none, a plain run)",
    {"metavar": "FILE", "default": None},
)
_CHECKPOINT_EVERY = Option(
    ("--checkpoint-every",),
    "with --checkpoint: save every N steps exactly (default: by time, see "
    "--checkpoint-seconds); output lines are held back until the checkpoint covering "
    "them is on disk",
    {"metavar": "N", "type": int, "default": None},
)
_CHECKPOINT_SECONDS = Option(
    ("--checkpoint-seconds",),
    "with --checkpoint and no --checkpoint-every: save when S seconds have passed "
    "since the last save, when live input pauses, or every 10000 steps, whichever comes "
    "first (default 1)",
    {"metavar": "S", "type": float, "default": 1.0},
)


def _check_options(args: argparse.Namespace) -> None:
    """Options a run cannot honour are refused up front, naming the flag and why."""
    _check_checkpoint(args)
    if args.step is not None and args.time_column is None:
        raise ValueError("--step needs --time-column (the times to bucket)")
    common.check_digits(args)
    args.where_conditions = tuple(parse_where(text) for text in args.where or ())
    if args.above_bound is not None and args.step is None:
        raise ValueError(
            "--above-bound needs --step (without it a row is a step, and --sensitivity "
            "bounds the change of a step, not a value)"
        )
    args.count_rows = args.column is None and (args.time_column is not None or bool(args.where))
    if args.count_rows and args.step is None:
        raise ValueError(
            "counting rows (no --column) needs --step: without it every step is one row, "
            "so every count is 1; pass --column NAME to sum a numeric column"
        )
    if args.checkpoint is not None and args.where:
        raise ValueError("--where is not available with --checkpoint (filter the input first)")
    if args.start is not None and args.step is None:
        raise ValueError("--start needs --step")


#: why a durable run (which releases and delivers row by row) refuses a whole-series
#: option: it would need rows not yet seen, or would change lines already released
_NOT_DURABLE = {
    "--monotone": "the isotonic fit of a step changes with later rows, and released "
    "lines are final (run it on the output file afterwards)",
    "--step": "a step's sum is only known once the input is past it",
    "--plot": "the plot needs the true series of the whole input",
}


def _check_checkpoint(args: argparse.Namespace) -> None:
    """The --checkpoint options: their flags need it, and it refuses whole-series ones."""
    if args.checkpoint is None:
        if args.checkpoint_every is not None:
            raise ValueError("--checkpoint-every needs --checkpoint FILE")
        if args.checkpoint_seconds != 1.0:
            raise ValueError("--checkpoint-seconds needs --checkpoint FILE")
        return
    for flag, reason in _NOT_DURABLE.items():
        if getattr(args, flag[2:]):
            raise ValueError(f"{flag} is not available with --checkpoint: {reason}")
    if args.checkpoint_every is not None and args.checkpoint_seconds != 1.0:
        raise ValueError(
            "--checkpoint-seconds is not used with --checkpoint-every N (a save every N "
            "steps exactly): give one of them"
        )


def _where_text(reader: SeriesReader) -> str:
    return " ".join(
        f"--where {shlex.quote(c.text())}" for c in reader.where if isinstance(c, Condition)
    )


def _reader(args: argparse.Namespace, fh: Any, source: str) -> SeriesReader:
    """The reader of the input, as the options describe it."""
    return SeriesReader(
        fh,
        args.column,
        source=source,
        **common.flags(args, "time_column", "missing"),
        where=args.where_conditions,
        count_rows=args.count_rows,
    )


def _whole_input(args: argparse.Namespace) -> bool:
    """Whether the run reads the whole input before releasing: a file, or stdin with an
    option that needs the whole series (--monotone, --step, --plot)."""
    return args.input != "-" or bool(args.monotone or args.step or args.plot)


def _read_file(
    args: argparse.Namespace,
) -> tuple[list[float], list[str] | None, SeriesReader, StepSums | None]:
    """The steps of the whole input (a file, or stdin read to its end), their time
    labels (None without --time-column), the reader and, with ``--step``, the
    bucketing (:func:`dpcount._events.sum_steps`: each bucket's rows, each cut to
    --sensitivity, summed; an empty bucket is a step of 0; rows outside the steps
    dropped and counted)."""
    source = "stdin" if args.input == "-" else args.input
    if args.input != "-" and args.step is None and not args.where_conditions:
        fast = _read_plain(args)
        if fast is not None:
            return fast[0], fast[1], _reader(args, (), source), None
    with contextlib.ExitStack() as stack:
        fh: IO[str] = (
            sys.stdin
            if args.input == "-"
            else stack.enter_context(open(args.input, encoding="utf-8", newline=""))
        )
        reader = _reader(args, fh, source)
        records = list(reader.records())
    if not records:
        raise ValueError(f"{source}: no data rows")
    if reader.where and reader.unmatched == len(records):
        raise ValueError(f"{source}: no row matches {_where_text(reader)}")
    if args.step is None:
        labels = None if args.time_column is None else [str(t) for _, t, _ in records]
        return [v for _, _, v in records], labels, reader, None
    how = Bucketing(
        args.step, args.start, args.horizon, args.sensitivity, args.above_bound or "cut",
        ("--step", "--start", "--horizon", "--sensitivity", "--above-bound"),
    )  # fmt: skip
    bucketed = sum_steps(
        np.array([v for _, _, v in records], dtype=np.float64),
        [str(t) for _, t, _ in records],
        how,
        lambda i: f"{source}: line {records[i][0]}",
    )
    return bucketed.sums.tolist(), bucketed.labels(), reader, bucketed


def _read_plain(args: argparse.Namespace) -> tuple[list[float], list[str] | None] | None:
    """A plain file read vectorized (:func:`dpcount.io.read_plain_column`), or None:
    then the row-by-row reader reads it (and names the line of any problem)."""
    try:
        with open(args.input, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        return None  # the row-by-row reader says where
    fast = read_plain_column(text, args.column, args.time_column)
    del text
    if fast is None:
        return None
    values: list[float] = fast[0].tolist()
    return values, fast[1]


def _write_rows(
    out: IO[str],
    labels: list[str] | None,
    shown: Any,
    std: NDArray[np.float64],
    raw: Any | None,
    digits: int,
) -> None:
    """The output lines of a whole release, formatted in blocks by one format string
    per line (the same text as :func:`row_line`: ints as ints, floats by repr); arrays
    become Python numbers one block at a time (memory of a block, not of the file)."""
    block = 65536
    cells = "{}" if labels is None else "{},{}"
    cells += ",{!r}" + (",{!r}" if raw is not None else "") + f",{{:.{digits}g}}\n"
    for start in range(0, len(shown), block):
        stop = min(start + block, len(shown))
        columns: list[Any] = [range(start + 1, stop + 1)]
        if labels is not None:
            columns.append([_csv_cell(label) for label in labels[start:stop]])
        columns.append(_as_list(shown[start:stop]))
        if raw is not None:
            columns.append(_as_list(raw[start:stop]))
        columns.append(std[start:stop].tolist())
        out.write("".join(map(cells.format, *columns)))


def _as_list(values: Any) -> list[Any]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def _csv_cell(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


def _warn_data_derived(args: argparse.Namespace) -> None:
    """With ``--step``, the start of step 1 and the horizon default to the earliest and
    the latest time in the input: released (as labels and as the number of rows)
    without noise. Say so, as ``dpcount keyed`` does."""
    names = [flag for flag, value in (("--start", args.start), ("--horizon", args.horizon))
             if value is None]  # fmt: skip
    if names:
        common.err_console().print(common.escape(data_derived_warning(names)), highlight=False)


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.checkpoint is not None:
        return run_durable(args)
    if not _whole_input(args):
        return _run_live(args)
    values, labels, reader, bucketed = _read_file(args)
    horizon = len(values) if args.horizon is None else args.horizon
    dropped = max(len(values) - horizon, 0) if bucketed is None else bucketed.outside
    del values[horizon:]  # rows after the horizon: dropped and reported (the one rule)
    labels = None if labels is None else labels[:horizon]
    mech = _counting.build(args, horizon, values)
    if args.step is not None:
        _warn_data_derived(args)
    raw = _counting.finished(args, mech.release(np.asarray(values)))
    std = _released_std(mech, len(values))
    post = _counting.postprocessed(args, raw)
    with common.open_output(args.output) as out:
        out.write(",".join(_counting.header(args, post is not None)) + "\n")
        shown = raw if post is None else post
        _write_rows(out, labels, shown, std, None if post is None else raw, args.digits)
    _counting.summary(mech, len(values), args)
    if bucketed is not None:
        _report_bound(args, bucketed)
    if args.monotone:
        common.err_console().print(f"note: --monotone: {MONOTONE_NOTE}", highlight=False)
    _report_missing(reader)
    _report_dropped(dropped, horizon, None if args.step is None else "--start")
    if args.plot:
        from dpcount._cli._plot import plot_release

        path = plot_release(
            args.plot, np.cumsum(values), raw, np.asarray(std), post, labels, mech,
            time_name=args.time_column,
        )  # fmt: skip
        common.err_console().print(
            f"plot written to {common.escape(str(path))} (it shows the true counts: for the data "
            "owner, not for publication)"
        )
    return 0


def _run_live(args: argparse.Namespace) -> int:
    reader = _reader(args, sys.stdin, "stdin")
    mech: CountingMechanism | UnboundedCounter
    if args.horizon is None:
        mech = _counting.build_unbounded(args)
    else:
        mech = _counting.build(args, args.horizon, None)
    post = args.round or args.clamp
    with common.open_output(args.output, live=True) as out:
        out.write(",".join(_counting.header(args, post)) + "\n")
        out.flush()
        stream = mech.stream()
        # Step by step: memory independent of --horizon (never variances()).
        variances = mech.iter_variances()
        steps, beyond = 0, False
        for _, time, value in reader.records():
            if args.horizon is not None and steps >= args.horizon:
                beyond = True  # the rest is dropped, unread (the one rule: see run)
                break
            v = _counting.finished(args, _update(args, stream, value))
            shown = _counting.postprocessed(args, np.asarray([v]))
            s = math.sqrt(next(variances))
            line = _counting.row_line(steps + 1, time, v if shown is None else shown[0], s,
                            None if shown is None else v, args.digits)  # fmt: skip
            out.write(line)
            out.flush()
            steps += 1
    if isinstance(mech, UnboundedCounter):
        _counting.summary_unbounded(mech, steps, args)
    else:
        _counting.summary(mech, steps, args)
    _report_missing(reader)
    if beyond:
        common.err_console().print(
            f"note: dropped: stdin continues after --horizon {args.horizon}: the rest is not "
            "read (exact, not private)",
            highlight=False,
        )
    return 0


def _report_bound(args: argparse.Namespace, bucketed: StepSums) -> None:
    """With --step: the per-event bound of the guarantee and how many rows it cut."""
    con = common.err_console()
    con.print(
        f"[bold]bound[/]      {common.escape(bound_text(args.sensitivity, '--sensitivity'))}",
        soft_wrap=True,
    )
    if bucketed.cut:
        text = cut_note(bucketed.cut, bucketed.cut_weight, args.sensitivity, "--sensitivity")
        con.print(f"note: {common.escape(text)}", highlight=False, soft_wrap=True)


def _report_dropped(dropped: int, horizon: int, start: str | None) -> None:
    """Rows outside steps 1..T: dropped (as `dpcount keyed` drops them) and counted."""
    if dropped:
        text = outside_note(dropped, horizon, "--horizon", start)
        common.err_console().print(f"note: {common.escape(text)}", highlight=False)


def _report_missing(reader: SeriesReader) -> None:
    if reader.count_rows:
        common.err_console().print("note: no --column: each row counts 1 (rows per step)")
    if reader.where:
        common.err_console().print(
            f"note: {reader.unmatched} row(s) not matching "
            f"{common.escape(_where_text(reader))} counted 0",
            highlight=False,
        )
    if reader.skipped or reader.zeroed:
        what = (
            f"{reader.skipped} row(s) with a missing value skipped (--missing skip)"
            if reader.skipped
            else f"{reader.zeroed} missing value(s) read as 0 (--missing zero)"
        )
        common.err_console().print(f"note: {what}")


def _released_std(mech: CountingMechanism, n: int) -> NDArray[np.float64]:
    """The exact std of steps 1..n: vectorized when n is most of the horizon, else step
    by step (a short file with a large --horizon costs memory of the file, not of T)."""
    if 2 * n >= mech.horizon:
        return np.sqrt(mech.variances()[:n])
    return np.sqrt(np.fromiter(itertools.islice(mech.iter_variances(), n), np.float64, n))


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
