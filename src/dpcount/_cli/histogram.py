"""``dpcount histogram``: a private continual histogram of timestamped events."""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass, field

import numpy as np

from dpcount._cli._counting import DEFAULT_K, warn_ignored
from dpcount._cli._time import Clock
from dpcount._cli.common import (
    check_digits,
    err_console,
    escape,
    flags,
    open_output,
)
from dpcount._cli.options import (
    BUDGET,
    CALIBRATION,
    DIGITS,
    HORIZON,
    MECHANISM,
    MISSING,
    NO_SUBTRACT,
    NOISE,
    OUTPUT,
    START,
    TIME_COLUMN,
    K,
    add,
)
from dpcount.apps import ContinualHistogram
from dpcount.io import MISSING_MARKERS, CSVError, csv_rows
from dpcount.privacy.budget import NoiseKind
from dpcount.privacy.notes import data_derived_warning

HELP = (
    "release a private histogram of CSV events after every time step "
    "(insertions, at most b items per step)"
)

#: steps released per call to the histogram (bounds memory at CHUNK × universe floats)
_CHUNK = 512
#: events more steps than this after --start are refused (each step is an output row)
_MAX_STEPS = 1e12


def add_arguments(p: argparse.ArgumentParser) -> None:
    _event_arguments(p)
    _mechanism_arguments(p)


def _event_arguments(p: argparse.ArgumentParser) -> None:
    """The events: file, columns, universe, steps and contribution bounds."""
    p.add_argument("input", metavar="EVENTS", help="CSV file with a header, one event per row")
    add(p, _TIME_COLUMN)
    p.add_argument("--item-column", required=True, help="header of the item column")
    p.add_argument(
        "--items",
        required=True,
        help="the public universe of items: a comma-separated list, or @FILE with one item "
        "per line (an item outside it is an error; never derived from the data)",
    )
    p.add_argument(
        "--step-width",
        default="1",
        help="width W of a time step: a number for numeric times, a duration (1D, 6h, 15min, "
        "30s) or a calendar step (MS months, QS quarters, YS years, W-MON weeks ending on "
        "Monday) for ISO times, binned and labelled as pandas' resample; step k covers "
        "[start + (k-1)W, start + kW) (default 1); events before --start or after --horizon "
        "are dropped and counted in the summary",
    )
    add(p, _START, _HORIZON)
    p.add_argument(
        "--max-items-per-step",
        type=int,
        default=1,
        help="b: most events per step (default 1); more is an error unless --drop-excess",
    )
    p.add_argument(
        "--max-count-per-item",
        type=int,
        default=1,
        help="m: most events of one item per step (default 1)",
    )
    p.add_argument(
        "--drop-excess",
        action="store_true",
        help="contribution bounding: in each step keep events in file order while the step has "
        "fewer than b events and the item fewer than m, drop the rest (and report how many)",
    )


def _mechanism_arguments(p: argparse.ArgumentParser) -> None:
    """The mechanism, its budget, missing values and the output."""
    add(p, _MECHANISM, _K, NO_SUBTRACT, BUDGET, _NOISE, _CALIBRATION, _MISSING, OUTPUT, DIGITS)


_TIME_COLUMN = TIME_COLUMN.but(
    required=True,
    help="header of the time column: numbers, or ISO 8601 dates/timestamps (2012-01-01, "
    "2012-01-01T08:30:00); copied into the output as the start of each step",
)
_START = START.but(
    help="time where step 1 starts, a number or an ISO date (default: 0 for numeric "
    "times; for ISO times the earliest event, which reveals it: give it to keep it public)"
)
_HORIZON = HORIZON.but(
    help="number of steps T (default: the steps up to the last event, which reveals the "
    "time of the last event; give it to keep T public)"
)
_MECHANISM = MECHANISM.but(
    help="counting mechanism (default: kary; sqrt when --delta and a continuous --noise are given)"
)
_K = K.but(
    help=f"branching factor for kary (default {DEFAULT_K}; other mechanisms ignore it, "
    "with a warning)"
)
_NOISE = NOISE.but(
    help="default: integer noise on the k-ary tree (discrete-gaussian with --delta, else "
    "discrete-laplace; counts are integers, so floating-point rounding cannot leak them) "
    "unless --mechanism names one without integer noise (then gaussian with --delta, else "
    "laplace)"
)
_CALIBRATION = CALIBRATION.but(help="Gaussian calibration (default analytic)")
_MISSING = MISSING.but(
    choices=("error", "skip"),
    help="an event with a missing time or item (empty, NA, NaN, null): stop with an error "
    "naming the line, or skip it (and report how many)",
)


def _universe(spec: str) -> list[str]:
    if spec.startswith("@"):
        with open(spec[1:], encoding="utf-8") as fh:
            items = [line.strip() for line in fh if line.strip()]
        source = spec[1:]
    else:
        items = [s.strip() for s in spec.split(",") if s.strip()]
        source = "--items"
    if not items:
        raise ValueError(f"{source}: the item universe is empty")
    seen: set[str] = set()
    for item in items:
        if item in seen:
            raise ValueError(f"{source}: item {item!r} is listed twice")
        seen.add(item)
    return items


@dataclass
class _Events:
    """Events bucketed by step: step -> item counts, plus bookkeeping."""

    steps: dict[int, dict[int, int]] = field(default_factory=dict)
    totals: dict[int, int] = field(default_factory=dict)
    n_events: int = 0
    dropped: int = 0
    skipped: int = 0
    #: events before --start or after --horizon: dropped and reported
    outside: int = 0
    last_step: int = 0


def _read_events(args: argparse.Namespace, index: dict[str, int], clock: Clock) -> _Events:
    """The events of the input, bucketed by step (``clock.start`` set), bounded by
    --max-items-per-step and --max-count-per-item."""
    out = _Events()
    rows = _read_rows(args, clock, out)
    _set_start(args, clock, rows)
    for row in rows:
        _add_event(args, index, clock, out, row)
    return out


def _read_rows(
    args: argparse.Namespace, clock: Clock, out: _Events
) -> list[tuple[int, str, float, str]]:
    """The events as (line, time text, time, item), rows with a missing value counted
    in ``out.skipped`` (--missing skip) or refused."""
    rows: list[tuple[int, str, float, str]] = []
    with open(args.input, encoding="utf-8", newline="") as fh:
        header: list[str] | None = None
        for line_number, cells in csv_rows(fh, args.input):
            if header is None:
                header = cells
                for col in (args.time_column, args.item_column):
                    if col not in header:
                        raise CSVError(
                            f"{args.input}: line {line_number}: no column named {col!r} "
                            f"in header {header}"
                        )
                t_col, i_col = header.index(args.time_column), header.index(args.item_column)
                continue
            if max(t_col, i_col) >= len(cells):
                raise CSVError(f"{args.input}: line {line_number}: too few fields ({len(cells)})")
            if len(cells) > len(header):
                raise CSVError(
                    f"{args.input}: line {line_number}: found {len(cells)} fields, the header "
                    f"has {len(header)}"
                )
            where = f"{args.input}: line {line_number}"
            absent = [c for c in (t_col, i_col) if cells[c].lower() in MISSING_MARKERS]
            if absent:
                if args.missing == "skip":
                    out.skipped += 1
                    continue
                raise CSVError(
                    f"{where}: missing {'time' if absent[0] == t_col else 'item'} "
                    f"{cells[absent[0]]!r} (pass --missing skip to skip such events)"
                )
            time = clock.read(cells[t_col], where)
            rows.append((line_number, cells[t_col], time, cells[i_col]))
        if header is None:
            raise CSVError(f"{args.input}: no header row")
    return rows


def _set_start(
    args: argparse.Namespace, clock: Clock, rows: list[tuple[int, str, float, str]]
) -> None:
    if args.start is not None:
        clock.set_start(args.start, "--start")
    elif clock.kind == "iso":
        clock.start_at(min(r[2] for r in rows))
    else:
        clock.start = 0.0


def _add_event(
    args: argparse.Namespace,
    index: dict[str, int],
    clock: Clock,
    out: _Events,
    row: tuple[int, str, float, str],
) -> None:
    """One event into its step's counts (or dropped with --drop-excess)."""
    b, m = args.max_items_per_step, args.max_count_per_item
    line_number, text, time, label = row
    assert clock.start is not None
    step = clock.step(time)
    if time < clock.start or (args.horizon is not None and step > args.horizon):
        out.outside += 1  # outside steps 1..T: dropped and reported (count's and keyed's rule)
        return
    if not step <= _MAX_STEPS:
        raise CSVError(
            f"{args.input}: line {line_number}: time {text} falls more than "
            f"{_MAX_STEPS:.0e} steps of --step-width {args.step_width} after --start"
        )
    if label not in index:
        raise CSVError(
            f"{args.input}: line {line_number}: item {label!r} is not in the universe "
            "given by --items"
        )
    item = index[label]
    counts = out.steps.setdefault(step, {})
    total = out.totals.get(step, 0)
    if total + 1 > b or counts.get(item, 0) + 1 > m:
        if not args.drop_excess:
            what = (
                f"more than --max-items-per-step {b} events"
                if total + 1 > b
                else f"more than --max-count-per-item {m} events of item {label!r}"
            )
            raise CSVError(
                f"{args.input}: line {line_number}: step {step} has {what} "
                "(use --drop-excess to drop the excess deterministically)"
            )
        out.dropped += 1
        return
    counts[item] = counts.get(item, 0) + 1
    out.totals[step] = total + 1
    out.n_events += 1
    out.last_step = max(out.last_step, step)


def run(args: argparse.Namespace) -> int:
    clock = Clock.parse(args.step_width, "--step-width")
    items = _universe(args.items)
    index = {label: i for i, label in enumerate(items)}
    if args.horizon is not None and args.horizon < 1:
        raise ValueError(f"--horizon must be >= 1, got {args.horizon}")
    check_digits(args)
    warn_ignored(args, _mechanism(args))
    events = _read_events(args, index, clock)
    horizon = args.horizon if args.horizon is not None else events.last_step
    if horizon < 1:
        raise ValueError(f"{args.input}: no events (give --horizon to release an empty stream)")
    hist = ContinualHistogram(
        len(items),
        horizon,
        **flags(args, "epsilon", "delta", "max_items_per_step", "max_count_per_item"),
        **flags(args, "mechanism", "noise", "calibration"),
        k=DEFAULT_K if args.k is None else args.k,
        subtract=not args.no_subtract,
        rng=args.seed,
    )
    derived = [flag for flag, value in (("--start", args.start if clock.kind == "iso" else 0),
               ("--horizon", args.horizon)) if value is None]  # fmt: skip
    if derived:  # the earliest / latest event time, released without noise
        err_console().print(escape(data_derived_warning(derived)), highlight=False)
    # Step by step (hist.variances() is the mechanism's): no horizon-long array.
    variances = hist.mechanism.iter_variances()
    with open_output(args.output) as out:
        writer = csv.writer(out, lineterminator="\n")
        reserved = {"t", "std", "top1_item", "top1_count", *items}
        time_col = args.time_column + ("_start" if args.time_column in reserved else "")
        writer.writerow(["t", time_col, "std", "top1_item", "top1_count", *items])
        for start in range(0, horizon, _CHUNK):
            n = min(_CHUNK, horizon - start)
            block = np.zeros((n, len(items)), dtype=np.int64)
            for r in range(n):
                for item, count in events.steps.get(start + r + 1, {}).items():
                    block[r, item] = count
            released = hist.update_many(block)
            for r in range(n):
                row = released[r]
                j = int(np.argmax(row))
                t = start + r + 1
                std = math.sqrt(next(variances))
                cells = [repr(v) for v in row.tolist()]  # the top count as its column
                writer.writerow(
                    [t, clock.label(t), f"{std:.{args.digits}g}", items[j], cells[j], *cells]
                )
            out.flush()
    _summary(hist, events)
    return 0


def _mechanism(args: argparse.Namespace) -> str:
    """--mechanism, or its default (MechanismChoice): sqrt with --delta and a continuous
    --noise, else kary."""
    if args.mechanism is not None:
        return str(args.mechanism)
    continuous = args.noise is not None and not NoiseKind(args.noise).is_discrete
    return "sqrt" if args.delta is not None and continuous else "kary"


def _summary(hist: ContinualHistogram, events: _Events) -> None:
    con = err_console()
    privacy = hist.privacy.describe() if hist.privacy else "none"
    con.print(f"[bold]histogram[/]  {escape(repr(hist))}")
    con.print(f"[bold]privacy[/]    {escape(privacy)}")
    con.print(
        f"[bold]exact error[/] max std {math.sqrt(hist.mechanism.max_variance()):.4g} per item "
        f"over horizon {hist.horizon}; {events.n_events} events in {hist.step} steps"
        + (f"; {events.dropped} events dropped (--drop-excess)" if events.dropped else "")
        + (f"; {events.skipped} events with a missing value skipped" if events.skipped else "")
        + (
            f"; {events.outside} events outside the steps (before --start or after --horizon) "
            "dropped"
            if events.outside
            else ""
        )
    )
