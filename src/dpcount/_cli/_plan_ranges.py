"""``dpcount plan --ranges``: rank the range-query mechanisms by exact error.

Every figure is exact and data-independent (the noise covariance of each
mechanism, :mod:`dpcount.ranges.metrics`): the total squared error over the
workload (Def. 3.11 of Dharangutte et al.), its root mean square per query, the
largest per-query standard deviation and the worst-case expected error
(Def. 3.12). All mechanisms are calibrated to the same (ε, δ) with the same
(analytic Gaussian) calibration.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from dpcount._cli._report import Column, Kind, Report, render
from dpcount.ranges import (
    MECHANISMS,
    RangeWorkload,
    build_mechanism,
    max_query_variance,
    total_squared_error,
    worst_case_expected_error,
)

__all__ = ["RangeRow", "rank_ranges", "run_ranges"]


@dataclass(frozen=True)
class RangeRow:
    """One range mechanism's exact error over the workload."""

    mechanism: str
    total: float
    rmse: float
    max_std: float
    worst_expected: float


def parse_size(text: str | None) -> tuple[int, ...]:
    if text is None:
        raise ValueError("--ranges needs --size N (or RxC for a 2-D histogram)")
    parts = text.lower().split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"--size must be N or RxC (positive integers), got {text!r}") from None
    if len(shape) > 2 or any(n < 1 for n in shape):
        raise ValueError(f"--size must be N or RxC (positive integers), got {text!r}")
    return shape


def rank_ranges(
    shape: tuple[int, ...], epsilon: float, delta: float, workload: Any = None
) -> tuple[list[RangeRow], list[str]]:
    """Rows best first (by total squared error) and notes on mechanisms left out."""
    count = math.prod(n * (n + 1) // 2 for n in shape) if workload is None else int(workload.count)
    rows, notes = [], []
    for name in MECHANISMS:
        try:
            mech = build_mechanism(name, shape, epsilon=epsilon, delta=delta)
        except ValueError as err:  # e.g. EigenDesign beyond its size limit, or 2-D
            notes.append(f"{name}: {err}")
            continue
        total = total_squared_error(mech, workload)
        rows.append(
            RangeRow(
                name,
                total,
                math.sqrt(total / count),
                math.sqrt(max_query_variance(mech, workload)),
                worst_case_expected_error(mech, workload),
            )
        )
    rows.sort(key=lambda r: (r.total, r.mechanism))
    return rows, notes


def run_ranges(args: argparse.Namespace) -> int:
    from dpcount._cli.ranges import read_queries

    shape = parse_size(args.size)
    if args.delta is None:
        raise ValueError("--ranges needs --delta: the range mechanisms add Gaussian noise")
    if args.horizon is not None:
        raise ValueError("--horizon is for continual counting: --ranges takes --size")
    # options of the continual-counting ranking that the range ranking has no use for
    unused = {
        "--metric": args.metric != "mse",
        "--beta": args.beta != 0.05,
        "--sensitivity": args.sensitivity != 1.0,
        "--participations": args.participations is not None,
        "--min-separation": args.min_separation != 1,
    }
    for flag, given in unused.items():
        if given:
            raise ValueError(
                f"{flag} is an option of continual counting, not of --ranges (which ranks by "
                "total squared error, for histograms differing by 1 in one cell)"
            )
    workload = None
    if args.workload != "all":
        if len(shape) != 1:
            raise ValueError("a --workload file needs a 1-D --size (2-D: all rectangles only)")
        lo, hi = read_queries(args.workload, 1, shape)
        workload = RangeWorkload(shape[0], lo, hi)
    rows, notes = rank_ranges(shape, args.epsilon, args.delta, workload)
    what = "all ranges" if workload is None else f"{workload.count} ranges of {args.workload}"
    if workload is None and len(shape) == 2:
        what = "all rectangles"
    size = "x".join(map(str, shape))
    columns = [
        Column("rank", "#", Kind.INT),
        Column("mechanism", "mechanism", Kind.TEXT),
        Column("rmse", "RMSE per query", Kind.NUMBER, f"root mean squared error over {what}"),
        Column("max_std", "largest std", Kind.NUMBER, "the largest standard deviation of a query"),
        Column(
            "worst_expected_error",
            "worst E|error|",
            Kind.NUMBER,
            "the largest expected absolute error of a query (Def. 3.12)",
        ),
    ]
    table = [[i, r.mechanism, r.rmse, r.max_std, r.worst_expected] for i, r in enumerate(rows, 1)]
    title = (
        f"n = {size}, ε = {args.epsilon:g}, δ = {args.delta:g}: ranked by total squared "
        f"error over {what}"
    )
    best = rows[0]
    report = Report(
        title,
        columns,
        table,
        notes=[
            *(f"left out: {note}" for note in notes),
            "Every row is (ε, δ)-DP for histograms differing by 1 in one cell, with "
            "continuous Gaussian noise (analytic calibration); `dpcount ranges` uses exact "
            "integer noise (discrete-gaussian, a little more error) on whole-number counts "
            "unless --noise gaussian. All figures are exact and data-independent.",
        ],
        recommendation=[
            f"Recommendation: {best.mechanism} (exact RMSE {best.rmse:.4g} per query)",
            f"  dpcount ranges INPUT --mechanism {best.mechanism} --epsilon {args.epsilon:g} "
            f"--delta {args.delta:g} --output OUT",
        ],
    )
    render(report, args.format)
    return 0
