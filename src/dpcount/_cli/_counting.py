"""What `dpcount count` and its durable mode share: the mechanism the options
describe, the output line, and the summary on stderr."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from dpcount._cli.common import err_console, escape
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism, default_noise
from dpcount.postprocess import clamp, monotone, round_half_even

__all__ = [
    "build",
    "choose_auto",
    "header",
    "postprocessed",
    "resolve_noise",
    "row_line",
    "summary",
    "warn_ignored",
]

#: the k-ary tree's branching factor when --k is not given (count-on-your-elders Cor. 15)
DEFAULT_K = 19


def warn_ignored(args: argparse.Namespace, mechanism: str) -> None:
    """One warning line on stderr for tree options given to a mechanism without them."""
    ignored = [
        flag
        for flag, given in (("--k", args.k is not None), ("--no-subtract", args.no_subtract))
        if given
    ]
    if mechanism != "kary" and ignored:
        err_console().print(
            f"warning: {' and '.join(ignored)} ignored: --mechanism {escape(mechanism)} "
            "has no such option (only kary does)"
        )


def choose_auto(
    args: argparse.Namespace, horizon: int, values: list[float] | None = None
) -> argparse.Namespace:
    """``--mechanism auto``: the options of
    :func:`dpcount.analysis.recommend.recommend_mechanism` (the mechanism ``dpcount
    plan`` ranks first by exact MSE for this horizon and budget, among those taking
    the noise used; the same function chooses for ``dpcount.frame``). Without
    ``--noise`` the data count as whole when the sensitivity and the data (``values``;
    None for live input, where a fractional row is then an error) are whole numbers
    and no ``--calibration`` is given.
    Returns a copy of ``args`` naming the mechanism; ``--k``/``--no-subtract`` given
    with auto are an error (they choose a mechanism: name it).
    """
    from dpcount.analysis.recommend import recommend_mechanism

    if args.k is not None or args.no_subtract:
        raise ValueError(
            "--k and --no-subtract choose the k-ary tree: pass --mechanism kary with them "
            "(--mechanism auto chooses k itself)"
        )
    whole = args.calibration is None and _whole(args.sensitivity, values)
    try:
        choice = recommend_mechanism(
            horizon,
            epsilon=args.epsilon,
            delta=args.delta,
            noise=args.noise,
            whole=whole,
            step_sensitivity=args.sensitivity,
        )
    except ValueError as err:
        if args.noise is not None and "delta must be given" in str(err):
            raise ValueError(f"--delta must be given for --noise {args.noise}") from None
        # a budget no mechanism takes: the k-ary tree's own error names the flag
        return argparse.Namespace(**{**vars(args), "mechanism": "kary"})
    args.auto_note = "chosen by --mechanism auto: ranked first by exact MSE by dpcount plan"
    chosen = argparse.Namespace(**vars(args))
    chosen.mechanism, chosen.k = choice.mechanism, choice.k
    chosen.no_subtract = choice.subtract is False
    if args.calibration is None and choice.calibration is not None:
        chosen.calibration = choice.calibration  # the ranked row's rule (fhu, classic)
        chosen.noise = choice.noise
    if args.noise is None:
        if choice.noise.startswith("discrete"):
            chosen.noise = choice.noise  # the integer noise the choice was ranked with
        else:
            # continuous: resolve_noise keeps the row's family and says why on stderr
            chosen.auto_family = choice.candidate.noise
    return chosen


def _whole(sensitivity: float, values: list[float] | None) -> bool:
    """Whether integer noise can be the default: whole sensitivity and data (None: the
    data are not known yet, live input; a fractional row is then an error)."""
    if not float(sensitivity).is_integer():
        return False
    return values is None or all(math.isfinite(v) and float(v).is_integer() for v in values)


def resolve_noise(args: argparse.Namespace, values: list[float] | None) -> tuple[str, str | None]:
    """``(noise, note)``: ``--noise`` as given, else the safe default (see the help).

    ``values``: the input rows when known in advance (a file), None for stdin. The
    note (one line for stderr) says why continuous noise was kept, else None.
    """
    if args.noise is not None:
        return args.noise, None
    family = getattr(args, "auto_family", None)
    if args.calibration is not None:
        return "laplace", "--calibration given without --noise: using laplace"
    cont = family or "laplace"
    whole_data = values is None or all(math.isfinite(v) and float(v).is_integer() for v in values)
    if default_noise(args.mechanism, args.delta, args.sensitivity) is None:
        if args.mechanism in DISCRETE_CAPABLE or not float(args.sensitivity).is_integer():
            why = f"--sensitivity {args.sensitivity!r} is not a whole number"
        elif not whole_data:
            why = "the data are not all whole numbers"
        else:
            why = f"mechanism {args.mechanism!r} does not take integer noise"
        return cont, f"{why}: using continuous {cont} noise"
    if not whole_data:
        return cont, f"the data are not all whole numbers: using continuous {cont} noise"
    return ("discrete-laplace" if args.delta is None else "discrete-gaussian"), None


def build(
    args: argparse.Namespace, horizon: int, values: list[float] | None = None
) -> CountingMechanism:
    """The mechanism the options describe, for ``horizon`` steps (``values``: the rows,
    when known, for the noise default; a note goes to stderr if noise stays continuous).
    ``--mechanism auto`` is resolved by :func:`choose_auto` first."""
    if args.mechanism == "auto":
        args = choose_auto(args, horizon, values)
    else:
        warn_ignored(args, args.mechanism)
    noise, note = resolve_noise(args, values)
    if note is not None:
        err_console().print(
            f"note: {escape(note)} (floating-point noise can leak low-order bits; see "
            "docs/safe-noise.md; pass --noise to choose)",
            highlight=False,
            soft_wrap=True,
        )
    return build_mechanism(
        args.mechanism,
        horizon=horizon,
        epsilon=args.epsilon,
        delta=args.delta,
        noise=noise,
        rng=args.seed,
        k=DEFAULT_K if args.k is None else args.k,
        subtract=not args.no_subtract,
        step_sensitivity=args.sensitivity,
        calibration=args.calibration,
    )


def summary(mech: CountingMechanism, steps: int, args: argparse.Namespace | None = None) -> None:
    con = err_console()
    privacy = mech.privacy.describe() if mech.privacy else "none"
    note = getattr(args, "auto_note", None)
    con.print(f"[bold]mechanism[/]  {escape(repr(mech))}" + (f" ({note})" if note else ""))
    con.print(f"[bold]privacy[/]    {escape(privacy)}")
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


def row_line(t: int, label: str | None, value: Any, std: float, raw: Any = None) -> str:
    cells = [str(t)] + ([] if label is None else [_csv_cell(label)]) + [_number(value)]
    if raw is not None:
        cells.append(_number(raw))
    cells.append(repr(float(std)))
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
