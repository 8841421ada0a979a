"""``dpcount plan``: rank every mechanism by its exact error and recommend one."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from dpcount._cli._plan_open_keys import add_open_key_arguments, check_not_open, run_open_keys
from dpcount._cli.common import (
    add_participation_arguments,
    escape,
    flags,
    out_console,
    participation_from,
    positive_float,
)
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

HELP = (
    "rank every continual-counting mechanism by its exact error for a horizon and budget "
    "(--ranges: the range-query mechanisms for a histogram size)"
)

_NOISE_NAMES = {"laplace": "Lap", "gaussian": "Gauss"}

#: calibration rules that are their noise's default (an integer-noise command drops them)
_DEFAULT_RULES = ("pure", "theorem3", "analytic")

_METRIC_NAMES = {
    "mse": "MSE (mean variance over the horizon)",
    "max_variance": "largest per-step variance",
    "linf": "bound on the largest error over the horizon",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="number of steps T (required without --ranges; no default)",
    )
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
    p.add_argument("--epsilon", type=positive_float, required=True, help="privacy parameter ε > 0")
    p.add_argument(
        "--delta", type=positive_float, default=None, help="δ in (0, 1) (default: none, pure ε-DP)"
    )
    p.add_argument("--metric", choices=METRICS, default="mse", help="ranking metric (default mse)")
    p.add_argument(
        "--beta",
        type=positive_float,
        default=0.05,
        help="failure probability of the ℓ∞ bound column (default 0.05)",
    )
    p.add_argument(
        "--sensitivity",
        type=float,
        default=1.0,
        help="largest change of one step between neighbouring inputs (default 1)",
    )
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
    add_participation_arguments(p)
    add_open_key_arguments(p)


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


def _ratio(value: float) -> str:
    """At most five characters (keeps the table narrow): 1.07, 58.67, 123, >999."""
    if value > 999:
        return ">999"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _lower_ratio(value: float) -> str:
    """Three decimals near 1 (the certified gap is what it shows), else as _ratio."""
    return f"{value:.3f}" if value < 10 else _ratio(value)


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
    con = out_console(80)
    con.print(_table(args, rows, schema))
    _notes(con, args, rows, schema)
    _recommendation(con, args, rows, budget)
    return 0


def _table(args: argparse.Namespace, rows: tuple[Candidate, ...], schema: Any) -> Table:
    """The ranking, best first (bold)."""
    budget = f"ε = {args.epsilon:g}" + ("" if args.delta is None else f", δ = {args.delta:g}")
    if schema is not None:
        budget += f", {schema.max_participations} participations ≥ {schema.min_separation} apart"
    table = Table(
        title=f"T = {args.horizon:,}, {budget}: ranked by {_METRIC_NAMES[args.metric]}",
        title_justify="left",
    )
    table.add_column("#", justify="right")
    table.add_column("mechanism", min_width=max(13, *(len(r.label) for r in rows)))
    table.add_column("noise")
    table.add_column("RMSE", justify="right")
    table.add_column("max std", justify="right")
    table.add_column(f"ℓ∞ (β={args.beta:g})", justify="right")
    if schema is not None:
        table.add_column("sens")
    if args.memory_note is not None:
        table.add_column("stream", justify="right")
    reference = next((r.certificate for r in rows if r.certificate is not None), None)
    if reference is not None:  # Gaussian rows exist (a delta was given)
        table.add_column("÷best", justify="right")
        if schema is None:  # the asymptotic bound is for one participation
            table.add_column("÷asym", justify="right")
            table.add_column("÷lower", justify="right")  # the certified lower bound
    for i, r in enumerate(rows, start=1):
        cert = r.certificate
        ratios = [] if reference is None else ["n/a"] if schema is not None else ["n/a"] * 3
        if cert is not None:
            asym = cert.ratio_to_asymptotic
            ratios = [_ratio(cert.ratio_to_best)]
            if schema is None:
                ratios.append("n/a" if asym is None else _ratio(asym))
                lower = cert.ratio_to_lower_bound
                ratios.append("n/a" if lower is None else _lower_ratio(lower))
        sens = []
        if schema is not None:
            sens = ["?" if r.sensitivity is None else _sens(r.sensitivity.exact)]
        if args.memory_note is not None:
            sens.append("?" if r.stream_bytes is None else format_bytes(r.stream_bytes))
        table.add_row(
            str(i),
            escape(r.label),
            _NOISE_NAMES[r.noise] + " " + r.calibration,
            f"{math.sqrt(r.mse):.4g}",
            f"{math.sqrt(r.max_variance):.4g}",
            f"{r.linf:.4g}",
            *sens,
            *ratios,
            style="bold" if i == 1 else None,
        )
    return table


def _notes(
    con: Console, args: argparse.Namespace, rows: tuple[Candidate, ...], schema: Any
) -> None:
    """What the columns mean and which mechanisms are left out."""
    reference = next((r.certificate for r in rows if r.certificate is not None), None)
    if args.memory_note is not None:
        con.print(args.memory_note + " stream = the noise state one stream holds at its peak.")
    if schema is not None:
        con.print(
            f"Every row is calibrated to user-level ({schema.max_participations}, "
            f"{schema.min_separation})-participation: sens = its sensitivity under the schema "
            "(ℓ₂ for Gaussian, ℓ₁ for Laplace rows), exact or a certified upper bound."
        )
    if reference is not None:
        ref = reference.reference
        loss_text = (
            f"Gaussian rows' {ref.objective} loss (variance ÷ that of a sensitivity-1 "
            "Gaussian at the same budget"
        )
        if schema is None:
            con.print(
                f"÷best, ÷asym: {loss_text}) over the best factorization dpcount can compute "
                f"for this horizon ({escape(ref.source)}, {ref.loss:.4g}) and over the "
                f"asymptotic lower bound (0.701 + ln T/π)² = {reference.asymptotic_bound:.4g} "
                "(Henzinger–Kalinin–Upadhyay 2025, a limit as T → ∞, not a bound at this T). "
                "n/a: Laplace noise."
            )
            if reference.lower_bound is not None:
                bound = reference.lower_bound
                con.print(
                    f"÷lower: the same loss over {bound.value:.5g}, a certified lower bound on "
                    f"the {bound.objective} loss of every factorization at this T "
                    f"({escape(bound.source)})."
                )
        else:
            con.print(
                f"÷best: {loss_text}, with the schema sensitivity) over the best one "
                f"dpcount computed for this horizon and schema ({escape(ref.source)}, "
                f"{ref.loss:.5g}). No ÷asym column: the asymptotic bound (0.701 + ln T/π)² "
                "(like the dense optimum) is for one participation, not for this schema. "
                "n/a: Laplace noise."
            )
    if args.horizon > NORMALIZED_SQRT_COMPARE_LIMIT and args.delta is not None:
        con.print(
            f"Column-normalized square root not listed: its exact variances are computed "
            f"on the fly only for T ≤ {NORMALIZED_SQRT_COMPARE_LIMIT:,}."
        )
    if args.horizon > MAX_OPTIMIZED_HORIZON and args.delta is not None:
        con.print(
            f"Optimized Toeplitz not listed: computed on the fly only for T ≤ "
            f"{MAX_OPTIMIZED_HORIZON:,} (BLT's shipped parameters cover larger horizons)."
        )
    con.print(
        "Every row satisfies the requested budget (pure: ε-DP; theorem3: Laplace noise "
        "for (ε, δ)-DP, count-on-your-elders Thm 3; analytic/fhu/classic: Gaussian). "
        "All figures are exact and data-independent."
    )


def _recommendation(
    con: Console, args: argparse.Namespace, rows: tuple[Candidate, ...], budget: Budget
) -> None:
    """The best row and the commands to copy: integer noise for whole-number data
    (what ``count --mechanism auto`` takes: the library's choice), the best row's own
    continuous noise for fractional data."""
    best = rows[0]
    con.print(
        f"Recommendation: [bold]{best.label}[/] with {best.noise} noise ({best.guarantee}); "
        f"exact RMSE {math.sqrt(best.mse):.4g}, largest std {math.sqrt(best.max_variance):.4g}, "
        f"all errors ≤ {best.linf:.4g} with probability ≥ {1 - args.beta:g}."
        + (
            ""
            if args.memory_note is None or best.stream_bytes is None
            else f" Stream state {format_bytes(best.stream_bytes)}."
        )
    )
    if best.certificate is not None:
        cert = best.certificate
        con.print(
            f"  {cert.reference.objective} loss {cert.loss:.5g} (÷best "
            f"{cert.ratio_to_best:.3f})"
            + ("" if best.sensitivity is None else f"; sensitivity {best.sensitivity.describe()}")
        )
    if len(rows) > 1 and best.value > 0:
        ratio = rows[1].value / best.value
        if ratio > 1.0 + 1e-9:
            con.print(f"  (next: {rows[1].label}, {ratio:.3g}× worse by this metric)")
        else:
            con.print(f"  ({rows[1].label} ties by this metric)")
    integer = _integer_row(args, rows, budget)
    if integer is None:
        con.print(f"  dpcount count INPUT {best.command()}", soft_wrap=True)
        return
    row, noise, mse = integer
    con.print(
        f"  whole-number data (counts): dpcount count INPUT {row.command(noise)}", soft_wrap=True
    )
    who = (
        "`dpcount count --mechanism auto` takes"
        if args.metric == "mse"
        else "the best row with integer noise:"
    )
    con.print(
        f"    {who} {escape(row.label)} with {noise} noise (exact integer output; exact RMSE "
        f"{math.sqrt(mse):.4g}"
        + ("" if row == best else f"; {escape(best.label)} needs floating-point noise")
        + "; see docs/safe-noise.md)",
        soft_wrap=True,
    )
    con.print(f"  fractional data: dpcount count INPUT {best.command()}", soft_wrap=True)


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
