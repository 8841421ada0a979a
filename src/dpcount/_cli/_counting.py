"""What `dpcount count` and its durable mode share: the mechanism the options
describe, the output line, and the summary on stderr."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from dpcount._cli.common import err_console, escape, participation_from
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import (
    DISCRETE_CAPABLE,
    GAUSSIAN_ONLY,
    MECHANISMS,
    build_mechanism,
    class_noise,
    default_noise,
)
from dpcount.counting.unbounded import UnboundedCounter
from dpcount.postprocess import clamp, monotone, round_half_even
from dpcount.privacy.budget import ParticipationUnsupportedError

__all__ = [
    "build",
    "build_unbounded",
    "choose_auto",
    "choose_unbounded_inner",
    "header",
    "postprocessed",
    "resolve_noise",
    "row_line",
    "summary",
    "summary_unbounded",
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
    if mechanism != "toeplitz" and getattr(args, "bands", None) is not None:
        err_console().print(
            f"warning: --bands ignored: --mechanism {escape(mechanism)} has no such option "
            "(only toeplitz does)"
        )
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
    With ``--participations``/``--min-separation`` the ranking is computed for that
    schema (every candidate calibrated to it, banded Toeplitz included).
    Returns a copy of ``args`` naming the mechanism; ``--k``/``--no-subtract``/``--bands``
    given with auto are an error (they choose a mechanism: name it).
    """
    from dpcount.analysis.recommend import recommend_mechanism

    if args.k is not None or args.no_subtract:
        raise ValueError(
            "--k and --no-subtract choose the k-ary tree: pass --mechanism kary with them "
            "(--mechanism auto chooses k itself)"
        )
    if getattr(args, "bands", None) is not None:
        raise ValueError(
            "--bands chooses the Toeplitz factorization: pass --mechanism toeplitz with it "
            "(--mechanism auto chooses the bands itself)"
        )
    schema = participation_from(args, horizon)
    whole = args.calibration is None and _whole(args.sensitivity, values)
    try:
        choice = recommend_mechanism(
            horizon,
            epsilon=args.epsilon,
            delta=args.delta,
            noise=args.noise,
            whole=whole,
            step_sensitivity=args.sensitivity,
            participation=schema,
        )
    except ValueError as err:
        if args.noise is not None and "delta must be given" in str(err):
            raise ValueError(f"--delta must be given for --noise {args.noise}") from None
        # a budget no mechanism takes: the k-ary tree's own error names the flag
        return argparse.Namespace(**{**vars(args), "mechanism": "kary"})
    args.auto_note = "chosen by --mechanism auto: ranked first by exact MSE by dpcount plan"
    chosen = argparse.Namespace(**vars(args))
    chosen.mechanism, chosen.k, chosen.bands = choice.mechanism, choice.k, choice.bands
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
    if family is None and args.mechanism in GAUSSIAN_ONLY and args.delta is None:
        raise ValueError(
            f"--mechanism {args.mechanism} uses Gaussian noise (the only noise it is "
            "calibrated for), which needs --delta (Gaussian noise cannot give pure ε-DP)"
        )
    cont = family or class_noise(args.mechanism, args.delta)
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


def _noise_with_note(args: argparse.Namespace, values: list[float] | None) -> str:
    """:func:`resolve_noise`, printing its note (why the noise stays continuous)."""
    noise, note = resolve_noise(args, values)
    if note is not None:
        err_console().print(
            f"note: {escape(note)} (floating-point noise can leak low-order bits; see "
            "docs/safe-noise.md; pass --noise to choose)",
            highlight=False,
            soft_wrap=True,
        )
    return noise


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
    noise = _noise_with_note(args, values)
    return build_mechanism(
        args.mechanism,
        horizon=horizon,
        epsilon=args.epsilon,
        delta=args.delta,
        noise=noise,
        rng=args.seed,
        k=DEFAULT_K if args.k is None else args.k,
        subtract=not args.no_subtract,
        bands=getattr(args, "bands", None),
        step_sensitivity=args.sensitivity,
        calibration=args.calibration,
        participation=participation_from(args, horizon),
    )


#: the step at which ``--mechanism auto`` compares the unbounded counter's inner mechanisms
UNBOUNDED_PROBE = 2**16


def _unbounded(args: argparse.Namespace, noise: str) -> UnboundedCounter:
    return UnboundedCounter(
        inner=args.mechanism,
        k=DEFAULT_K if args.k is None else args.k,
        subtract=not args.no_subtract,
        epsilon=args.epsilon,
        delta=args.delta,
        noise=noise,
        step_sensitivity=args.sensitivity,
        calibration=args.calibration,
        participation=participation_from(args),
        rng=args.seed,
    )


def check_unbounded(args: argparse.Namespace) -> None:
    """Refuse what the doubling counter (no ``--horizon``) cannot honour, before any
    row is read: a participation schema (the library's reason:
    :class:`~dpcount.privacy.ParticipationUnsupportedError`; its blocks are calibrated
    for one participation) and ``--bands`` (its blocks use the full band)."""
    if getattr(args, "bands", None) is not None:
        raise ValueError(
            "--bands needs --horizon: without one the unbounded doubling counter runs a "
            "fresh full-band mechanism per block (horizons 2^i)"
        )
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


def choose_unbounded_inner(args: argparse.Namespace) -> argparse.Namespace:
    """``--mechanism auto`` without a horizon: the inner mechanism of the doubling counter
    with the lowest exact variance at t = 2^16 (:meth:`UnboundedCounter.variance_at`).

    Among the mechanisms that take the default integer noise when it applies (no
    ``--noise``/``--calibration``, whole ``--sensitivity``), else among all that accept
    the noise (input perturbation excluded: its error grows linearly in the block
    length). One step is compared because no horizon is known; 2^16 is a typical
    live stream, and the ranking is the same at 2^10 and 2^20 for the budgets we
    tried (Honaker first: its last-step release, the carried block total, has the
    lowest variance). Returns a copy of ``args`` naming the mechanism.
    """
    if args.k is not None or args.no_subtract:
        raise ValueError(
            "--k and --no-subtract choose the k-ary tree: pass --mechanism kary with them "
            "(--mechanism auto chooses the inner mechanism itself)"
        )
    safe = args.noise is None and args.calibration is None and _whole(args.sensitivity, None)
    names = sorted(DISCRETE_CAPABLE if safe else set(MECHANISMS) - {"input"})
    best: tuple[float, str] | None = None
    first_error: ValueError | None = None
    for name in names:
        trial = argparse.Namespace(**{**vars(args), "mechanism": name})
        try:
            var = _unbounded(trial, resolve_noise(trial, None)[0]).variance_at(UNBOUNDED_PROBE)
        except ValueError as err:  # this inner refuses the budget or the noise
            first_error = first_error or err
            continue
        if best is None or var < best[0]:
            best = (var, name)
    if best is None:
        assert first_error is not None
        raise first_error
    args.auto_note = (
        "chosen by --mechanism auto: lowest exact variance at t = 2^16 among the inner mechanisms"
    )
    return argparse.Namespace(**{**vars(args), "mechanism": best[1]})


def build_unbounded(args: argparse.Namespace) -> UnboundedCounter:
    """The doubling counter for a stream without ``--horizon`` (live stdin): the inner
    mechanism is ``--mechanism`` (auto: :func:`choose_unbounded_inner`), with the same
    noise defaults as a fixed horizon. Flags it cannot honour are refused
    (:func:`check_unbounded`)."""
    check_unbounded(args)
    if args.mechanism == "auto":
        args = choose_unbounded_inner(args)
    else:
        warn_ignored(args, args.mechanism)
    noise = _noise_with_note(args, None)
    return _unbounded(args, noise)


def summary_unbounded(
    counter: UnboundedCounter, steps: int, args: argparse.Namespace | None = None
) -> None:
    """The summary of an unbounded run: the construction, its guarantee and the exact
    error at the first and last steps (it grows with t)."""
    con = err_console()
    privacy = counter.privacy.describe() if counter.privacy else "none"
    note = getattr(args, "auto_note", None)
    con.print(f"[bold]mechanism[/]  {escape(repr(counter))}" + (f" ({note})" if note else ""))
    con.print(f"[bold]privacy[/]    {escape(privacy)}, for every prefix")
    con.print(
        "[bold]relation[/]   no horizon: step t in block i (steps 2^i .. 2^(i+1)-1) is "
        f"released as the finished blocks' last releases plus block i's {counter.inner} "
        "release (a fresh mechanism for horizon 2^i, full budget; blocks are disjoint)"
    )
    last = f"; at t={steps}: std {counter.std_at(steps):.4g}" if steps >= 1 else ""
    con.print(
        f"[bold]exact error[/] grows with t: std {counter.std_at(1):.4g} at t=1"
        f"{last}, {counter.std_at(UNBOUNDED_PROBE):.4g} at t=2^16; the std column is exact "
        f"per row; {steps} steps released"
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
