"""``dpcount ranges``: release a private histogram and answer range queries with error bars."""

from __future__ import annotations

import argparse
import math
import pickle
import sys

import numpy as np
from numpy.typing import NDArray

from dpcount._cli._counting import print_noise_note
from dpcount._cli.common import err_console, escape, flags, open_output
from dpcount._cli.options import (
    CALIBRATION,
    COLUMN,
    DELTA,
    EPSILON,
    MECHANISM,
    NOISE,
    OUTPUT,
    SEED,
    add,
)
from dpcount._validate import check_probability
from dpcount.io import CSVError, SeriesReader, csv_rows, starts_like_number
from dpcount.ranges import (
    MECHANISMS,
    CorrelatedPerturbation,
    RangeAnswers,
    RangeMechanism,
    build_mechanism,
    max_query_variance,
    total_squared_error,
    worst_case_expected_error,
)
from dpcount.ranges.mechanism import RANGE_NOISE_KINDS
from dpcount.ranges.release import range_bounds

HELP = "release a private histogram (1-D or 2-D) and answer range queries with exact error bars"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "input",
        metavar="INPUT",
        help="histogram: .npy (1-D or 2-D array of counts) or .csv (one numeric column)",
    )
    add(p, _COLUMN, EPSILON, _DELTA, _MECHANISM, _NOISE, _CALIBRATION)
    p.add_argument(
        "--queries",
        default=None,
        help="CSV of ranges, 0-based inclusive: lo,hi (1-D) or row_lo,col_lo,row_hi,col_hi (2-D) "
        "(default: none, no queries answered)",
    )
    p.add_argument(
        "--answers",
        default=None,
        help="CSV for the answers (default: stdout; with --output - it must be a file: one "
        "stream holds one table)",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    add(
        p,
        SEED,
        OUTPUT.but(
            required=True,
            help="released histogram: .npy, or CSV with the exact std per cell (- for stdout)",
        ),
    )


_COLUMN = COLUMN.but(
    help="CSV header name of the column of counts (default: the CSV's only column)"
)
_DELTA = DELTA.but(required=True, help="δ in (0, 1)")
_MECHANISM = MECHANISM.but(
    choices=sorted(MECHANISMS),
    default="correlated",
    help="range mechanism (dpcount plan --ranges ranks them by exact error)",
)
_NOISE = NOISE.but(
    choices=RANGE_NOISE_KINDS,
    help="discrete-gaussian (exact integer noise; the default for whole-number counts "
    "where the mechanism has it: all but 2-D correlated, and with --calibration zcdp "
    "or none) or gaussian (continuous, the default otherwise, with a note on stderr "
    "saying why)",
)
_CALIBRATION = CALIBRATION.but(
    choices=("analytic", "paper", "classic", "zcdp"),
    help="gaussian: analytic (exact, default), paper (Thm 3.7, epsilon <= 1) or classic; "
    "discrete-gaussian: zcdp (default)",
)


def read_histogram(path: str, column: str | None) -> NDArray[np.float64]:
    if path.endswith(".npy"):
        try:
            data = np.load(path, allow_pickle=False)
        except (ValueError, EOFError, pickle.UnpicklingError) as err:
            # numpy's messages name neither the file nor the problem (e.g. "pickled data"
            # for a text file), so say what was expected.
            raise ValueError(f"{path}: not a .npy file of numbers ({err})") from None
        if data.ndim not in (1, 2) or data.size == 0:
            raise ValueError(
                f"{path}: expected a non-empty 1-D or 2-D array, got shape {data.shape}"
            )
        return np.asarray(data)
    with open(path, encoding="utf-8", newline="") as fh:
        values = [v for _, v in SeriesReader(fh, column, source=path)]
    if not values:
        raise ValueError(f"{path}: no data rows")
    return np.asarray(values)


def _check_query(path: str, line: int, bounds: list[int], shape: tuple[int, ...]) -> None:
    """One query's bounds against the histogram's shape; the error names file and line."""
    names = ("lo", "hi") if len(shape) == 1 else ("row_lo", "col_lo", "row_hi", "col_hi")
    axes = (0, 0) if len(shape) == 1 else (0, 1, 0, 1)
    for name, axis, b in zip(names, axes, bounds, strict=True):
        if not 0 <= b < shape[axis]:
            raise CSVError(
                f"{path}: line {line}: {name} = {b} is outside 0..{shape[axis] - 1} (the "
                f"histogram has {shape[axis]} {'cells' if len(shape) == 1 else 'entries'} "
                f"on {'its' if len(shape) == 1 else ('the row' if axis == 0 else 'the column')}"
                f" axis)"
            )
    half = len(bounds) // 2
    for i in range(half):
        if bounds[i] > bounds[i + half]:
            raise CSVError(
                f"{path}: line {line}: {names[i]} = {bounds[i]} is after "
                f"{names[i + half]} = {bounds[i + half]} (bounds are inclusive, lo <= hi)"
            )


def read_queries(
    path: str, ndim: int, shape: tuple[int, ...] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Ranges from a CSV (optional header); errors name the file and line, including
    bounds outside ``shape`` (the histogram's) when it is given."""
    width = 2 if ndim == 1 else 4
    rows: list[list[int]] = []
    with open(path, encoding="utf-8", newline="") as fh:
        first = True
        for line, cells in csv_rows(fh, path):
            if first:
                first = False
                # Only the first line may be a header, and only if it cannot be a query
                # (a malformed first query such as "1.5,3" is an error, not a header).
                if not any(starts_like_number(c) for c in cells):
                    continue
            if len(cells) != width:
                raise CSVError(f"{path}: line {line}: expected {width} fields, found {len(cells)}")
            try:
                bounds = [int(c) for c in cells]
            except ValueError:
                raise CSVError(
                    f"{path}: line {line}: bounds must be integers, got {cells}"
                ) from None
            if any(abs(b) >= 2**63 for b in bounds):
                raise CSVError(f"{path}: line {line}: bounds out of range, got {cells}")
            if shape is not None:
                _check_query(path, line, bounds, shape)
            rows.append(bounds)
    if not rows:
        raise ValueError(f"{path}: no queries")
    table = np.asarray(rows, dtype=np.int64)
    if ndim == 1:
        return table[:, 0], table[:, 1]
    return table[:, 0:2], table[:, 2:4]


def run(args: argparse.Namespace) -> int:
    check_probability("--level", args.level)
    if args.queries is None:
        for flag, given in (
            ("--answers", args.answers is not None),
            ("--level", args.level != 0.95),
        ):
            if given:
                raise ValueError(f"{flag} needs --queries (the ranges to answer)")
    if args.column is not None and args.input.endswith(".npy"):
        raise ValueError(f"--column is for a CSV input; {args.input} is a .npy array")
    if args.queries is not None and _is_stdout(args.output) and _is_stdout(args.answers):
        raise ValueError(
            "--output - and the answers to --queries would both go to stdout, two CSV tables "
            "in one stream: give --answers FILE (or --output FILE)"
        )
    x = read_histogram(args.input, args.column)
    args.noise, note = default_noise(args, x)
    mech = build_mechanism(
        args.mechanism,
        x.shape,
        **flags(args, "epsilon", "delta", "calibration", "noise"),
        rng=args.seed,
    )
    queries = read_queries(args.queries, x.ndim, x.shape) if args.queries is not None else None
    if queries is not None:
        range_bounds(*queries, x.shape)  # bad bounds are refused before anything is released
    release = mech.release(x)
    _write_histogram(args.output, release, mech)
    if queries is not None:
        lo, hi = queries
        answers = release.query(lo, hi)
        std = np.sqrt(release.range_variance(lo, hi))
        low, high = release.interval(lo, hi, level=args.level)
        bounds = ["lo", "hi"] if x.ndim == 1 else ["row_lo", "col_lo", "row_hi", "col_hi"]
        cols = np.column_stack((lo, hi))
        with open_output(args.answers) as out:
            out.write(",".join([*bounds, "answer", "std", "ci_low", "ci_high"]) + "\n")
            numbers = np.column_stack((answers, std, low, high)).tolist()
            for b, (a, s, lw, hg) in zip(cols.tolist(), numbers, strict=True):
                out.write(",".join(str(v) for v in b) + f",{a!r},{s!r},{lw!r},{hg!r}\n")
    if note is not None:  # said once the release is done (never before an error)
        print_noise_note(f"continuous Gaussian noise: {note}")
    _summary(mech, x)
    return 0


def default_noise(args: argparse.Namespace, x: NDArray[np.float64]) -> tuple[str, str | None]:
    """``--noise`` as given, else exact integer noise (``discrete-gaussian``) when the
    mechanism has it and the counts are whole numbers, else ``gaussian`` and why (the
    note ``dpcount ranges`` prints on stderr, as ``dpcount count`` does for its
    integer-noise default). A histogram that is not finite real numbers gets no note:
    the mechanism refuses it."""
    if args.noise is not None:
        return str(args.noise), None
    x = np.asarray(x)
    if x.dtype.kind not in "biuf" or not bool(np.all(np.isfinite(x))):
        return "gaussian", None
    reason = None
    if not MECHANISMS[args.mechanism].supports_discrete_noise:  # none yet: all have it
        reason = f"--mechanism {args.mechanism} has no discrete Gaussian noise"
    elif args.mechanism == "correlated" and x.ndim == 2:
        reason = "the 2-D correlated mechanism has no exact integer noise"
    elif args.calibration not in (None, "zcdp"):
        reason = f"--calibration {args.calibration} calibrates continuous Gaussian noise"
    elif not bool(np.all(x == np.round(x))):
        reason = "the histogram has counts that are not whole numbers"
    return ("discrete-gaussian", None) if reason is None else ("gaussian", reason)


def _is_stdout(path: str | None) -> bool:
    return path is None or path == "-"


def _write_histogram(path: str, release: RangeAnswers, mech: RangeMechanism) -> None:
    values = np.asarray(release.values)  # type: ignore[attr-defined]
    if path.endswith(".npy"):
        np.save(path, values)
        return
    cells = np.indices(values.shape).reshape(values.ndim, -1).T
    lo = cells if values.ndim == 2 else cells[:, 0]
    std = np.sqrt(release.range_variance(lo, lo)).ravel()
    header = "index" if values.ndim == 1 else "row,col"
    with open_output(path) as fh:
        fh.write(f"{header},noisy_count,std\n")
        for idx, v, s in zip(cells.tolist(), values.ravel().tolist(), std.tolist(), strict=True):
            fh.write(",".join(str(i) for i in idx) + f",{v!r},{s!r}\n")


def _summary(mech: RangeMechanism, x: NDArray[np.float64]) -> None:
    con = err_console()
    privacy = mech.privacy.describe() if mech.privacy else "none"
    count = math.prod(n * (n + 1) // 2 for n in x.shape)
    kind = "ranges" if x.ndim == 1 else "rectangles"
    total = total_squared_error(mech)
    con.print(f"[bold]mechanism[/]   {escape(repr(mech))}, sigma {mech.sigma:.6g}")
    if isinstance(mech, CorrelatedPerturbation):
        con.print(
            f"[bold]sensitivity[/] Mahalanobis sqrt(max diag C^-1) = "
            f"{math.sqrt(mech.precision_max_diag):.6g}"
        )
    con.print(f"[bold]privacy[/]     {escape(privacy)}")
    worst_std = math.sqrt(max_query_variance(mech))
    con.print(
        f"[bold]exact error[/] over all {count:,} {kind}: total squared error {total:.6g} "
        f"(RMSE {math.sqrt(total / count):.4g}); max std {worst_std:.4g}; "
        f"worst-case expected error {worst_case_expected_error(mech):.4g}"
    )
    sys.stderr.flush()
