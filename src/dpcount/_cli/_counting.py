"""What `dpcount count` and its durable mode share: the mechanism the options
describe, the output line, and the summary on stderr."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from dpcount._cli.common import err_console
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import build_mechanism, default_noise

__all__ = ["build", "format_line", "resolve_noise", "summary"]


def resolve_noise(args: argparse.Namespace, values: list[float] | None) -> tuple[str, str | None]:
    """``(noise, note)``: ``--noise`` as given, else the safe default (see the help).

    ``values``: the input rows when known in advance (a file), None for stdin. The
    note (one line for stderr) says why continuous noise was kept, else None.
    """
    if args.noise is not None:
        return args.noise, None
    if args.calibration is not None:
        return "laplace", "--calibration given without --noise: using laplace"
    if default_noise(args.mechanism, args.delta, args.sensitivity) is None:
        if args.mechanism in ("kary", "binary", "honaker"):
            why = f"--sensitivity {args.sensitivity!r} is not a whole number"
        else:
            why = f"mechanism {args.mechanism!r} does not take integer noise"
        return "laplace", f"{why}: using continuous laplace noise"
    if values is not None and not all(math.isfinite(v) and float(v).is_integer() for v in values):
        return "laplace", "the data are not all whole numbers: using continuous laplace noise"
    return ("discrete-laplace" if args.delta is None else "discrete-gaussian"), None


def build(
    args: argparse.Namespace, horizon: int, values: list[float] | None = None
) -> CountingMechanism:
    """The mechanism the options describe, for ``horizon`` steps (``values``: the rows,
    when known, for the noise default; a note goes to stderr if noise stays continuous)."""
    noise, note = resolve_noise(args, values)
    if note is not None:
        err_console().print(
            f"note: {note} (floating-point noise can leak low-order bits; see "
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
        k=args.k,
        subtract=not args.no_subtract,
        step_sensitivity=args.sensitivity,
        calibration=args.calibration,
    )


def format_line(t: int, value: Any, std: float) -> str:
    """One output line; integer releases (discrete noise on the trees) print as ints."""
    text = str(int(value)) if isinstance(value, (int, np.integer)) else repr(float(value))
    return f"{t},{text},{std!r}\n"


def summary(mech: CountingMechanism, steps: int) -> None:
    con = err_console()
    privacy = mech.privacy.describe() if mech.privacy else "none"
    con.print(f"[bold]mechanism[/]  {mech!r}")
    con.print(f"[bold]privacy[/]    {privacy}")
    con.print(
        f"[bold]exact error[/] MSE {mech.mse():.6g} (RMSE {math.sqrt(mech.mse()):.4g}), "
        f"max std {math.sqrt(mech.max_variance()):.4g} over horizon {mech.horizon}; "
        f"{steps} steps released"
    )
