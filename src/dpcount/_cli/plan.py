"""``dpcount plan``: rank every mechanism by its exact error and recommend one."""

from __future__ import annotations

import argparse
import math
from typing import Any

from dpcount._cli._plan_open_keys import OPEN_KEYS, check_not_open, run_open_keys
from dpcount._cli._report import FORMATS, Column, Kind, Report, render
from dpcount._cli.common import flags, participation_from, positive_float
from dpcount._cli.options import DELTA, EPSILON, HORIZON, PARTICIPATION, SENSITIVITY, add
from dpcount.analysis.choice import choose
from dpcount.analysis.compare import METRICS, NORMALIZED_SQRT_COMPARE_LIMIT, Candidate, compare
from dpcount.counting.base import available_memory, format_bytes, parse_bytes
from dpcount.counting.factorization.toeplitz import MAX_OPTIMIZED_HORIZON
from dpcount.counting.registry import (
    DISCRETE_CAPABLE,
    MECHANISMS,
    build_mechanism,
    memory_estimate,
)
from dpcount.privacy.budget import Budget
from dpcount.privacy.float_safe import float_delta, float_safety

HELP = (
    "rank every continual-counting mechanism by its exact error for a horizon and budget "
    "(--ranges: the range-query mechanisms for a histogram size)"
)

_NOISE_NAMES = {"laplace": "Laplace", "gaussian": "Gaussian"}

#: calibration rules that are their noise's default (an integer-noise command drops them)
_DEFAULT_RULES = ("pure", "theorem3", "analytic")

_METRIC_SHORT = {"mse": "MSE", "max_variance": "largest variance", "linf": "error bound"}

_METRIC_NAMES = {
    "mse": "MSE (mean variance over the horizon)",
    "max_variance": "largest per-step variance",
    "linf": "bound on the largest error over the horizon",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add(p, HORIZON.but(help="number of steps T (required without --ranges; no default)"))
    p.add_argument(
        "--ranges",
        action="store_true",
        help="rank the range-query mechanisms (dpcount ranges --mechanism) for a histogram of "
        "--size cells instead, by exact error over --workload",
    )
    p.add_argument(
        "--size",
        default=None,
        help="with --ranges: cells of the histogram, N (1-D) or RxC (2-D) (no default)",
    )
    p.add_argument(
        "--workload",
        default="all",
        help="with --ranges: 'all' (every range, or every rectangle in 2-D) or a CSV of "
        "ranges lo,hi as for dpcount ranges --queries (1-D)",
    )
    add(p, EPSILON, DELTA)
    p.add_argument("--metric", choices=METRICS, default="mse", help="ranking metric (default mse)")
    p.add_argument(
        "--beta",
        type=positive_float,
        default=0.05,
        help="failure probability of the ℓ∞ bound column (default 0.05)",
    )
    add(p, SENSITIVITY)
    p.add_argument(
        "--dim",
        type=int,
        default=None,
        help="length of a vector step (e.g. a model's gradient size): rank only mechanisms "
        "whose stream fits in --memory and show each row's stream state (default: scalar "
        "steps)",
    )
    p.add_argument(
        "--memory",
        default=None,
        help="memory limit for the mechanism and one stream, e.g. 2GiB or 500MB (default with "
        "--dim: the machine's available memory)",
    )
    add(p, PARTICIPATION, OPEN_KEYS)
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default: for a terminal, never cut: wrapped or split in parts to fit "
        "its width, with a legend), csv (the table only, numbers at full precision; notes "
        "on stderr), json (table, legend, notes and recommendation) or markdown",
    )


def _memory_note(args: argparse.Namespace) -> str | None:
    """Which mechanisms --dim/--memory left out, or None without them."""
    if args.dim is None and args.memory is None:
        return None
    if args.dim is not None and args.dim < 1:
        raise ValueError(f"--dim must be >= 1, got {args.dim}")
    limit = available_memory() if args.memory is None else parse_bytes("--memory", args.memory)
    if limit is None:
        return None
    left_out = [
        f"{name} ({format_bytes(estimate.total)})"
        for name in MECHANISMS
        if (estimate := memory_estimate(name, args.horizon, args.dim)).total > limit
    ]
    steps = "scalar steps" if args.dim is None else f"steps of length {args.dim:,}"
    text = f"Memory limit {format_bytes(limit)} for the mechanism and one stream of {steps}"
    if left_out:
        text += "; left out (need): " + ", ".join(left_out)
    return text + "."


def _sens(exact: bool) -> str:
    return "exact" if exact else "bound"


def run(args: argparse.Namespace) -> int:
    if args.open_keys:
        return run_open_keys(args)
    check_not_open(args)
    if args.ranges:
        from dpcount._cli._plan_ranges import run_ranges

        for flag, value in (("--dim", args.dim), ("--memory", args.memory)):
            if value is not None:
                raise ValueError(f"{flag} is not used with --ranges (a static release)")

        return run_ranges(args)
    for flag, given in (("--size", args.size), ("--workload", args.workload != "all")):
        if given:
            raise ValueError(f"{flag} needs --ranges")
    if args.horizon is None:
        raise ValueError("--horizon is required (or --ranges with --size)")
    schema = participation_from(args, args.horizon)
    budget = Budget(
        **flags(args, "epsilon", "delta"), step_sensitivity=args.sensitivity, participation=schema
    )
    rows = compare(args.horizon, budget=budget, **flags(args, "metric", "beta", "dim", "memory"))
    args.memory_note = _memory_note(args)
    report = _report(args, rows, schema)
    report.notes = _notes(args)
    report.recommendation = _recommendation(args, rows, budget)
    render(report, args.format)
    return 0


def _report(args: argparse.Namespace, rows: tuple[Candidate, ...], schema: Any) -> Report:
    """The ranking, best first, with what each column means."""
    budget = f"ε = {args.epsilon:g}" + ("" if args.delta is None else f", δ = {args.delta:g}")
    if schema is not None:
        budget += f", {schema.max_participations} participations ≥ {schema.min_separation} apart"
    columns = [
        Column("rank", "#", Kind.INT),
        Column("mechanism", "mechanism", Kind.TEXT),
        Column("noise", "noise", Kind.TEXT),
        Column(
            "calibration",
            "calibration",
            Kind.TEXT,
            "the rule that sets the noise scale (pure: ε-DP; theorem3: Laplace noise for "
            "(ε, δ)-DP, count-on-your-elders Thm 3; analytic, fhu, classic: Gaussian)",
        ),
        Column("rmse", "RMSE", Kind.NUMBER, "root mean squared error over the T steps"),
        Column("max_std", "largest std", Kind.NUMBER, "largest standard deviation of a step"),
        Column(
            "max_error",
            f"max error (β={args.beta:g})",
            Kind.NUMBER,
            f"the largest error over all T steps is below it with probability ≥ {1 - args.beta:g}",
        ),
    ]
    if schema is not None:
        columns.append(
            Column(
                "sensitivity",
                "sensitivity",
                Kind.TEXT,
                f"under the ({schema.max_participations}, {schema.min_separation})-"
                "participation schema (ℓ₂ for Gaussian, ℓ₁ for Laplace rows): exact, or a "
                "certified upper bound (bound)",
            )
        )
    if args.memory_note is not None:
        columns.append(
            Column("stream_bytes", "stream memory", Kind.BYTES, "the noise state one stream "
                   "holds at its peak")
        )  # fmt: skip
    columns += _ratio_columns(rows, schema)
    table: list[list[Any]] = []
    for i, r in enumerate(rows, start=1):
        row: list[Any] = [i, r.label, _NOISE_NAMES[r.noise], r.calibration]
        row += [math.sqrt(r.mse), math.sqrt(r.max_variance), r.linf]
        if schema is not None:
            row.append(None if r.sensitivity is None else _sens(r.sensitivity.exact))
        if args.memory_note is not None:
            row.append(r.stream_bytes)
        cert = r.certificate
        for column in columns[len(row) :]:
            row.append(None if cert is None else getattr(cert, _RATIOS[column.name]))
        table.append(row)
    title = f"T = {args.horizon:,}, {budget}: ranked by {_METRIC_NAMES[args.metric]}"
    return Report(title, columns, table)


#: ratio column -> the certificate's attribute
_RATIOS = {
    "loss_vs_best": "ratio_to_best",
    "loss_vs_limit": "ratio_to_asymptotic",
    "loss_vs_lower_bound": "ratio_to_lower_bound",
}


def _ratio_columns(rows: tuple[Candidate, ...], schema: Any) -> list[Column]:
    """Gaussian rows' loss over references (none without a delta: Laplace rows only)."""
    reference = next((r.certificate for r in rows if r.certificate is not None), None)
    if reference is None:
        return []
    ref = reference.reference
    loss = (
        f"a Gaussian row's {ref.objective} loss (its variance ÷ that of a sensitivity-1 "
        "Gaussian at the same budget"
        + ("" if schema is None else ", with the schema sensitivity")
        + ") ÷ "
    )
    plain = "; 1.00: as good, 1.25: 25% more variance; n/a: Laplace noise"
    best = "this T" if schema is None else "this T and schema"
    columns = [
        Column(
            "loss_vs_best",
            "vs best",
            Kind.RATIO,
            f"{loss}that of the best factorization dpcount can compute for {best} "
            f"({ref.source}, {ref.loss:.5g}){plain}",
        )
    ]
    if schema is not None:  # the asymptotic bound is for one participation
        return columns
    columns.append(
        Column(
            "loss_vs_limit",
            "vs limit",
            Kind.RATIO,
            f"the same loss ÷ the asymptotic lower bound (0.701 + ln T/π)² = "
            f"{reference.asymptotic_bound:.4g} (Henzinger–Kalinin–Upadhyay 2025, a limit as "
            "T → ∞, not a bound at this T)",
        )
    )
    if reference.lower_bound is not None:
        bound = reference.lower_bound
        columns.append(
            Column(
                "loss_vs_lower_bound",
                "vs lower bound",
                Kind.RATIO,
                f"the same loss ÷ {bound.value:.5g}, a certified lower bound on the "
                f"{bound.objective} loss of every factorization at this T ({bound.source})",
                precise=True,
            )
        )
    return columns


def _notes(args: argparse.Namespace) -> list[str]:
    """Which mechanisms are left out, and what every row guarantees."""
    notes = []
    if args.memory_note is not None:
        notes.append(args.memory_note)
    if args.horizon > NORMALIZED_SQRT_COMPARE_LIMIT and args.delta is not None:
        notes.append(
            f"Column-normalized square root not listed: its exact variances are computed "
            f"on the fly only for T ≤ {NORMALIZED_SQRT_COMPARE_LIMIT:,}."
        )
    if args.horizon > MAX_OPTIMIZED_HORIZON and args.delta is not None:
        notes.append(
            f"Optimized Toeplitz not listed: computed on the fly only for T ≤ "
            f"{MAX_OPTIMIZED_HORIZON:,} (BLT's shipped parameters cover larger horizons)."
        )
    values = args.horizon * (1 if args.dim is None else args.dim)
    added = {
        n: float_delta(float_safety(n).eta, args.epsilon, values) for n in ("gaussian", "laplace")
    }
    notes.append(
        "Every row satisfies the requested budget in exact arithmetic; its floating-point "
        f"release, snapped to a grid, adds (1 + e^ε)·n·η to δ for its n = {values:,} values "
        f"(Gaussian {added['gaussian']:.3g}, Laplace {added['laplace']:.3g} here; "
        "docs/safe-noise.md), as `dpcount count` states. All figures are exact and "
        "data-independent."
    )
    return notes


def _how_much_worse(ratio: float) -> str:
    """``ratio`` of two errors in words: "0.04% larger", "25% larger", "3.47 times"."""
    if ratio < 2:
        return f"{(ratio - 1) * 100:.2g}% larger"
    return f"{ratio:.3g} times as large"


def _recommendation(
    args: argparse.Namespace, rows: tuple[Candidate, ...], budget: Budget
) -> list[str]:
    """The best row and the commands to copy: integer noise for whole-number data
    (what ``count --mechanism auto`` takes: the library's choice), the best row's own
    continuous noise for fractional data."""
    best = rows[0]
    lines = [
        f"Recommendation: {best.label} with {best.noise} noise ({best.guarantee}); "
        f"exact RMSE {math.sqrt(best.mse):.4g}, largest std {math.sqrt(best.max_variance):.4g}, "
        f"all errors ≤ {best.linf:.4g} with probability ≥ {1 - args.beta:g}."
        + (
            ""
            if args.memory_note is None or best.stream_bytes is None
            else f" Stream state {format_bytes(best.stream_bytes)}."
        )
    ]
    if best.certificate is not None:
        cert = best.certificate
        lines.append(
            f"  {cert.reference.objective} loss {cert.loss:.5g} ({cert.ratio_to_best:.3f} "
            "times the best factorization's)"
            + ("" if best.sensitivity is None else f"; sensitivity {best.sensitivity.describe()}")
        )
    if len(rows) > 1 and best.value > 0:
        ratio = rows[1].value / best.value
        metric = _METRIC_SHORT[args.metric]
        if ratio > 1.0 + 1e-9:
            lines.append(f"  next: {rows[1].label}, its {metric} {_how_much_worse(ratio)}")
        else:
            lines.append(f"  next: {rows[1].label}, the same {metric}")
    integer = _integer_row(args, rows, budget)
    if integer is None:
        lines.append(f"  dpcount count INPUT {best.command()}")
        return lines
    row, noise, mse = integer
    lines.append(f"  whole-number data (counts): dpcount count INPUT {row.command(noise)}")
    who = (
        "`dpcount count --mechanism auto` takes"
        if args.metric == "mse"
        else "the best row with integer noise:"
    )
    lines.append(
        f"    {who} {row.label} with {noise} noise (exact integer output; exact RMSE "
        f"{math.sqrt(mse):.4g}"
        + ("" if row == best else f"; {best.label} needs floating-point noise")
        + "; see docs/safe-noise.md)"
    )
    lines.append(f"  fractional data: dpcount count INPUT {best.command()}")
    return lines


def _integer_row(
    args: argparse.Namespace, rows: tuple[Candidate, ...], budget: Budget
) -> tuple[Candidate, str, float] | None:
    """(row, integer noise, exact MSE with it) for whole-number data, or None when no
    row takes integer noise: by MSE the choice of ``count --mechanism auto``; by another
    metric the best row if its mechanism takes integer noise."""
    if args.metric == "mse":
        choice = choose(args.horizon, budget=budget, whole=True)
        if choice.auto is None or choice.auto.candidate is None:
            return None
        noise = choice.budget.noise
        if noise is None or not noise.is_discrete:
            return None
        return choice.auto.candidate, noise.value, choice.auto.mse
    best = rows[0]
    if best.mechanism not in DISCRETE_CAPABLE or best.calibration not in _DEFAULT_RULES:
        return None
    if not float(args.sensitivity).is_integer():
        return None
    discrete = "discrete-" + best.noise
    options: dict[str, Any] = {} if best.k is None else {"k": best.k, "subtract": best.subtract}
    integer = budget.replace(noise=discrete)
    mech = build_mechanism(best.mechanism, horizon=best.horizon, budget=integer, rng=0, **options)
    return best, discrete, mech.mse()
