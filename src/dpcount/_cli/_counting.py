"""What `dpcount count` and its durable mode share: the mechanism the options
describe, the output line, and the summary on stderr."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
from rich.console import Console

from dpcount._cli.common import err_console, escape, participation_from
from dpcount.analysis.choice import DEFAULT_K, UNBOUNDED_PROBE, Choice, choose
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import MECHANISMS, objectives
from dpcount.counting.unbounded import UnboundedCounter
from dpcount.postprocess import clamp, monotone, round_half_even
from dpcount.privacy.budget import Budget, MissingDeltaError, ParticipationUnsupportedError

__all__ = [
    "DEFAULT_K",
    "SPELLING",
    "build",
    "build_unbounded",
    "check_unbounded",
    "choice_for",
    "finished",
    "header",
    "postprocessed",
    "row_line",
    "summary",
    "summary_unbounded",
    "warn_ignored",
]


def warn_ignored(args: argparse.Namespace, mechanism: str) -> None:
    """One warning line on stderr for tree options given to a mechanism without them."""
    ignored = [
        flag
        for flag, given in (("--k", args.k is not None), ("--no-subtract", args.no_subtract))
        if given
    ]
    if mechanism != "toeplitz" and getattr(args, "bands", None) is not None:
        err_console().print(
            f"warning: --bands ignored: --mechanism {escape(mechanism)} has no such option "
            "(only toeplitz does)"
        )
    objective = getattr(args, "objective", None)
    if objective is not None and not objectives(mechanism):
        with_one = ", ".join(name for name in MECHANISMS if objectives(name))
        err_console().print(
            f"warning: --objective ignored: --mechanism {escape(mechanism)} has no such option "
            f"(only {with_one} do)"
        )
    if mechanism != "kary" and ignored:
        err_console().print(
            f"warning: {' and '.join(ignored)} ignored: --mechanism {escape(mechanism)} "
            "has no such option (only kary does)"
        )


#: the command line's spelling of the library's parameter names (notes and errors)
SPELLING = {
    "calibration": "--calibration",
    "noise": "--noise",
    "step_sensitivity": "--sensitivity",
    "delta": "--delta",
}


#: flags --mechanism auto refuses (it chooses them itself), and why
_AUTO_CHOOSES = {
    "bands": "--bands chooses the Toeplitz factorization: pass --mechanism toeplitz with it "
    "(--mechanism auto chooses the bands itself)",
    "objective": "--objective chooses a factorization's parameters: name the mechanism with it "
    "(`dpcount plan --metric max_variance` prints the command)",
}
#: flags the unbounded doubling counter (no --horizon) refuses, and why
_UNBOUNDED_REFUSES = {
    "bands": "--bands needs --horizon: without one the unbounded doubling counter runs a "
    "fresh full-band mechanism per block (horizons 2^i)",
    "objective": "--objective needs --horizon: without one the unbounded doubling counter runs "
    "a fresh mean-loss mechanism per block (horizons 2^i)",
}


def _refuse_given(args: argparse.Namespace, refusals: dict[str, str]) -> None:
    """ValueError with the reason of the first flag of ``refusals`` (by its dest) given."""
    for name, reason in refusals.items():
        if getattr(args, name, None) is not None:
            raise ValueError(reason)


def _structure(args: argparse.Namespace) -> dict[str, Any]:
    """The structure flags given (``--k``, ``--no-subtract``, ``--bands``) as options of
    :func:`~dpcount.analysis.choice.choose`; a named kary gets k = DEFAULT_K."""
    if args.mechanism == "auto":
        if args.k is not None or args.no_subtract:
            raise ValueError(
                "--k and --no-subtract choose the k-ary tree: pass --mechanism kary with them "
                "(--mechanism auto chooses k, or the inner mechanism, itself)"
            )
        _refuse_given(args, _AUTO_CHOOSES)
        return {}
    options: dict[str, Any] = {"k": DEFAULT_K if args.k is None else args.k}
    options["subtract"] = not args.no_subtract
    if getattr(args, "bands", None) is not None:
        options["bands"] = args.bands
    if getattr(args, "objective", None) is not None:
        options["objective"] = args.objective
    return options


def choice_for(
    args: argparse.Namespace, horizon: int | None, values: list[float] | None = None
) -> Choice:
    """The library's :func:`~dpcount.analysis.choice.choose` for the flags: the
    mechanism (``--mechanism auto`` resolved), its options and its noise, for
    ``horizon`` steps (None: the doubling counter), under the
    :class:`~dpcount.privacy.Budget` of the privacy flags (the schema of
    ``--participations``/``--min-separation`` checked against ``horizon`` when given).
    ``values``: the rows when known in advance (a file), None for live input (a
    fractional row is then refused)."""
    whole = None if values is None else all(math.isfinite(v) and float(v).is_integer()
                                            for v in values)  # fmt: skip
    options = _structure(args)
    if args.mechanism != "auto":
        warn_ignored(args, args.mechanism)
    schema = participation_from(args, horizon)
    try:
        budget = Budget(
            epsilon=args.epsilon, delta=args.delta, noise=args.noise,
            calibration=args.calibration, step_sensitivity=args.sensitivity,
            participation=schema,
        )  # fmt: skip
        return choose(
            horizon, budget=budget, mechanism=args.mechanism, whole=whole, options=options
        )
    except MissingDeltaError:
        if args.noise is not None:
            raise ValueError(f"--delta must be given for --noise {args.noise}") from None
        raise ValueError(
            f"--mechanism {args.mechanism} uses Gaussian noise (the only noise it is "
            "calibrated for), which needs --delta (Gaussian noise cannot give pure ε-DP)"
        ) from None


def print_noise_note(note: str) -> None:
    """Print on stderr why the noise is continuous, with the floating-point warning."""
    err_console().print(
        f"note: {escape(note)} (floating-point noise: values snapped to a power-of-two grid, a "
        "float-safety term in delta; see "
        "docs/safe-noise.md; pass --noise to choose)",
        highlight=False,
        soft_wrap=True,
    )


def _announce(args: argparse.Namespace, choice: Choice) -> None:
    """The choice's notes on stderr (why the noise stays continuous; that the estimate
    is rounded to whole numbers) and, for auto, the reason kept for the summary
    (``args.auto_note``). The choice is kept as ``args.choice`` (:func:`finished`)."""
    args.choice = choice
    if choice.note is not None:
        print_noise_note(choice.note.text(SPELLING))
    post = args.monotone or args.clamp or args.round
    rounding = choice.rounding_note("raw_std" if post else "std")
    if rounding is not None:
        err_console().print(f"note: {escape(rounding)}", highlight=False, soft_wrap=True)
    if choice.auto is not None:
        args.auto_note = f"chosen by --mechanism auto: {choice.auto.text()}"


def finished(args: argparse.Namespace, release: Any) -> Any:
    """The release as published: the library's :meth:`Choice.finish
    <dpcount.analysis.choice.Choice.finish>` of the choice :func:`build` made (Honaker's
    estimate under integer noise rounded to whole numbers; otherwise unchanged)."""
    choice: Choice | None = getattr(args, "choice", None)
    return release if choice is None else choice.finish(release)


def build(
    args: argparse.Namespace, horizon: int, values: list[float] | None = None
) -> CountingMechanism:
    """The mechanism the options describe, for ``horizon`` steps (``values``: the rows,
    when known, for the noise default; a note goes to stderr if noise stays continuous)."""
    choice = choice_for(args, horizon, values)
    _announce(args, choice)
    return choice.build(rng=args.seed)


def check_unbounded(args: argparse.Namespace) -> None:
    """Refuse what the doubling counter (no ``--horizon``) cannot honour, before any
    row is read: a participation schema (the library's reason:
    :class:`~dpcount.privacy.ParticipationUnsupportedError`; its blocks are calibrated
    for one participation) and ``--bands`` (its blocks use the full band)."""
    _refuse_given(args, _UNBOUNDED_REFUSES)
    schema = participation_from(args)
    if schema is None:
        return
    try:
        UnboundedCounter(inner="binary", epsilon=1.0, participation=schema, rng=0)
    except ParticipationUnsupportedError as err:
        raise ValueError(
            f"--participations {schema.max_participations} (--min-separation "
            f"{schema.min_separation}) needs --horizon: stdin without --horizon runs the "
            f"unbounded doubling counter, and {err}"
        ) from None


def build_unbounded(args: argparse.Namespace) -> UnboundedCounter:
    """The doubling counter for a stream without ``--horizon`` (live stdin): the inner
    mechanism is ``--mechanism`` (auto: the library's choice without a horizon), with
    the same noise defaults as a fixed horizon. Flags it cannot honour are refused
    (:func:`check_unbounded`)."""
    check_unbounded(args)
    choice = choice_for(args, None)
    _announce(args, choice)
    return choice.build_unbounded(rng=args.seed)


def summary_unbounded(
    counter: UnboundedCounter, steps: int, args: argparse.Namespace | None = None
) -> None:
    """The summary of an unbounded run: the construction, its guarantee and the exact
    error at the first and last steps (it grows with t)."""
    con = _print_mechanism(counter, args, ", for every prefix")
    con.print(f"[bold]relation[/]   {escape(counter.relation)}")
    last = f"; at t={steps}: std {counter.std_at(steps):.4g}" if steps >= 1 else ""
    con.print(
        f"[bold]exact error[/] grows with t: std {counter.std_at(1):.4g} at t=1"
        f"{last}, {counter.std_at(UNBOUNDED_PROBE):.4g} at t=2^16; the std column is exact "
        f"per row; {steps} steps released"
    )


def _print_mechanism(
    mech: CountingMechanism | UnboundedCounter, args: argparse.Namespace | None, scope: str = ""
) -> Console:
    """Print the mechanism (with the "auto" note) and its guarantee; return the console."""
    con = err_console()
    privacy = mech.privacy.describe() if mech.privacy else "none"
    note = getattr(args, "auto_note", None)
    con.print(f"[bold]mechanism[/]  {escape(repr(mech))}" + (f" ({note})" if note else ""))
    con.print(f"[bold]privacy[/]    {escape(privacy)}{scope}")
    return con


def summary(mech: CountingMechanism, steps: int, args: argparse.Namespace | None = None) -> None:
    con = _print_mechanism(mech, args)
    con.print(
        f"[bold]exact error[/] MSE {mech.mse():.6g} (RMSE {math.sqrt(mech.mse()):.4g}), "
        f"max std {math.sqrt(mech.max_variance()):.4g} over horizon {mech.horizon}; "
        f"{steps} steps released"
    )


def header(args: argparse.Namespace, post: bool) -> list[str]:
    """The output columns: ``t``, the input's time column if given, the release and its
    std; with post-processing the raw release and *its* std (``raw_std``) follow the
    post-processed values, whose error the std does not describe."""
    reserved = {"t", "private_count", "raw_private_count", "raw_std", "std"}
    time = args.time_column
    cols = ["t"] + ([time + ("_input" if time in reserved else "")] if time else [])
    return cols + (["private_count", "raw_private_count", "raw_std"] if post else
                   ["private_count", "std"])  # fmt: skip


def row_line(
    t: int, label: str | None, value: Any, std: float, raw: Any = None, digits: int | None = None
) -> str:
    """One output line; ``digits``: significant digits of the std (None: every bit)."""
    cells = [str(t)] + ([] if label is None else [_csv_cell(label)]) + [_number(value)]
    if raw is not None:
        cells.append(_number(raw))
    cells.append(repr(float(std)) if digits is None else f"{float(std):.{digits}g}")
    return ",".join(cells) + "\n"


def _csv_cell(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


def _number(value: Any) -> str:
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


def postprocessed(args: argparse.Namespace, raw: Any) -> list[Any] | None:
    """The release after --monotone, --clamp, --round (in that order), or None."""
    if not (args.monotone or args.clamp or args.round):
        return None
    values = np.asarray(raw, dtype=np.float64)
    if args.monotone:
        values = monotone(values)
    if args.clamp:
        values = clamp(values)
    if args.round:
        out: list[Any] = round_half_even(values).tolist()
        return out
    if not args.monotone and np.issubdtype(np.asarray(raw).dtype, np.integer):
        ints: list[Any] = np.asarray(values, dtype=np.int64).tolist()  # clamped integers
        return ints
    floats: list[Any] = values.tolist()
    return floats
