"""``dpcount keyed``: private running counts per key and time step from an event log."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dpcount._cli.common import check_digits, err_console, flags, given_flags, positive_float
from dpcount._cli.options import (
    CALIBRATION,
    DELTA,
    EPSILON,
    HORIZON,
    MAX_KEYS,
    MAX_STEPS,
    MAX_WEIGHT,
    MECHANISM,
    MIN_SEPARATION,
    NOISE,
    OUTPUT,
    SELECT_EVERY,
    START,
    STEP,
    TIME_COLUMN,
    K,
    add,
    digits_of,
)
from dpcount.counting.registry import MECHANISMS
from dpcount.privacy.budget import NoiseKind

if TYPE_CHECKING:
    from dpcount.keyed.selection import KeySelection

HELP = (
    "private running counts per key at every time step, from an event log (CSV or "
    "Parquet): for the keys of --keys, or for keys selected privately from the data"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    _event_arguments(p)
    _mechanism_arguments(p)
    _run_arguments(p)


def _event_arguments(p: argparse.ArgumentParser) -> None:
    """The events: file, columns, steps and contribution bounds."""
    p.add_argument(
        "input", metavar="EVENTS", nargs="?", default=None, help="events file (.csv or .parquet)"
    )
    p.add_argument(
        "--input-dir",
        default=None,
        metavar="DIR",
        help="instead of EVENTS: an incremental run over the files arriving in DIR (needs "
        "--state, and --until or --allowed-lateness): consumes the files not consumed before "
        "(recorded beside the state), releases the newly complete steps and appends them to "
        "--output (.csv, or a directory of Parquet parts) exactly once, even across a crash "
        "and a rerun (default: none, the one EVENTS file)",
    )
    add(p, TIME_COLUMN.but(required=True, help="column of integer or ISO times"))
    p.add_argument("--key-column", required=True, help="column of keys")
    p.add_argument(
        "--keys",
        default=None,
        metavar="FILE",
        help="public key universe, one a line (default: none, an open key set: keys are "
        "selected privately, with --select-epsilon and --select-delta or half of --epsilon "
        "and --delta)",
    )
    p.add_argument(
        "--select-epsilon",
        type=positive_float,
        default=None,
        help="open key set (no --keys): ε of private key selection, added to --epsilon "
        "(default: without --select-epsilon and --select-delta, half of --epsilon, the "
        "counting keeping the other half, and select-δ = --delta, or half of it with "
        "Gaussian counting noise; the summary states the split)",
    )
    p.add_argument(
        "--select-delta",
        type=positive_float,
        default=None,
        help="open key set (no --keys): δ of key selection, added to --delta; a key of one "
        "unit is ever released with probability <= select-delta/max-keys (default: see "
        "--select-epsilon)",
    )
    p.add_argument(
        "--selector",
        choices=("sparse-vector", "tree"),
        default="sparse-vector",
        help="open key set: how keys are selected: 'sparse-vector' (default; per-key "
        "AboveThreshold: threshold 46 at T = 1461, select-ε 1, select-δ 1e-6) or 'tree' "
        "(0.4's binary-tree selection counter: threshold 359 there)",
    )
    add(
        p,
        SELECT_EVERY.but(
            metavar="N|STEP",
            help="open key set, sparse vector: check keys every N steps (and at the last), or "
            "at the last step of each calendar period (W-MON, MS, 7D) of a dated run; fewer "
            "checks lower the threshold (default: every step)",
        ),
    )
    _bound_arguments(p)


def _bound_arguments(p: argparse.ArgumentParser) -> None:
    """A unit's contribution bounds."""
    p.add_argument(
        "--unit-scope",
        choices=("step", "run"),
        default="step",
        help="what --max-keys bounds: 'step' (default; keys per unit and step, guarantee per "
        "step) or 'run' (keys per unit over the whole run, with --max-steps and "
        "--min-separation per key: user-level privacy over the run)",
    )
    add(p, _MAX_STEPS, _MIN_SEPARATION, _STEP, START, _HORIZON)
    p.add_argument(
        "--weight-column",
        default=None,
        help="column of non-negative weights (default: none, every event counts 1)",
    )
    p.add_argument(
        "--unit-column",
        default=None,
        help="column of unit ids (needs --max-keys) bounding each unit within ONE step: "
        "the guarantee protects one unit's events of one step, not its whole history (a "
        "unit active at n steps is protected at n times the budget) (default: none, "
        "event level)",
    )
    add(p, MAX_WEIGHT, _MAX_KEYS)


_MAX_STEPS = MAX_STEPS.but(help="--unit-scope run: steps per unit and key (default: every step)")
_MIN_SEPARATION = MIN_SEPARATION.but(
    type=int,
    default=None,
    metavar=None,
    help="--unit-scope run with --max-steps: least gap between a unit's steps of a key (default 1)",
)
_STEP = STEP.but(
    required=True,
    help="bucket width: an integer for integer times; for dates a duration (1D, 1h, 15min) "
    "or a calendar step (MS months, QS quarters, YS years, W-MON weeks ending on Monday; "
    "binned and labelled as pandas' resample; 1M is refused as ambiguous)",
)
_HORIZON = HORIZON.but(help="number of steps T (default: from the data)")
_MAX_KEYS = MAX_KEYS.but(help="keys per unit and step (default: none; needed with --unit-column)")


def _mechanism_arguments(p: argparse.ArgumentParser) -> None:
    """The budget and the counting mechanism."""
    add(p, EPSILON, _DELTA, _NOISE, _CALIBRATION, _MECHANISM, _K)
    p.add_argument(
        "--subtract",
        action="store_true",
        default=None,
        help="k-ary tree with subtraction (offset digits; --mechanism kary or tree only)",
    )


_DELTA = DELTA.but(help="δ for Gaussian noise (default: none, pure ε-DP)")
_NOISE = NOISE.but(
    default=str(NoiseKind.DISCRETE_LAPLACE),
    help="noise kind (default discrete-laplace: exact integer noise)",
)
_CALIBRATION = CALIBRATION.but(
    help="calibration rule, see dpcount count (default: the noise kind's default)"
)
_MECHANISM = MECHANISM.but(
    choices=lambda: ("auto", *sorted(MECHANISMS), "tree"),
    default="auto",
    help="counting mechanism (default auto: the one dpcount plan ranks first for the "
    "horizon, budget and noise; 'tree': the k-ary tree, binary unless --k)",
)
_K = K.but(
    help="branching factor (--mechanism kary or tree only; default: 2 for tree, 19 for kary)"
)


def _run_arguments(p: argparse.ArgumentParser) -> None:
    """The secret, the output, resuming and the engine."""
    p.add_argument(
        "--secret",
        required=True,
        metavar="FILE",
        help="run secret file, created (mode 0600) if absent; as sensitive as the raw data",
    )
    add(
        p,
        OUTPUT.but(
            required=True,
            help="output file (.csv or .parquet), or a directory of Parquet parts (no extension)",
        ),
        digits_of("std column of a CSV output (Parquet keeps the float)"),
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="FILE",
        help="resume across time: the run's exact running sums after its last released step "
        "(mode 0600, as sensitive as the raw data); if it exists, continue from it with events "
        "of later steps only; written when the output is complete (needs --start, --horizon, "
        "--until; default: none, one run over all steps)",
    )
    p.add_argument(
        "--until",
        type=int,
        default=None,
        metavar="STEP",
        help="last step to release (default: the horizon); later events are reported, not counted",
    )
    p.add_argument(
        "--late",
        choices=("refuse", "next-step"),
        default="refuse",
        help="an event of an already released step (with --state): refuse stops with an error "
        "naming its file and line; next-step counts it in the first step this run releases "
        "(bounded with that step, and reported) (default: refuse)",
    )
    p.add_argument(
        "--allowed-lateness",
        default=None,
        metavar="WAIT",
        help="instead of --until: release the steps complete by the latest event time less WAIT "
        "(a duration such as 2h or 1D for dates, a whole number for integer times, or 0); "
        "which steps are released then depends on the data (not private) (default: none)",
    )
    p.add_argument(
        "--engine",
        choices=("embedded", "dask", "spark"),
        default="embedded",
        help="where to compute (spark: the spark extra, Java 17)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Dask local worker processes (--engine dask without --scheduler; default 2)",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="Dask or Spark input partitions (default: the input's own)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="Dask scheduler address of a real cluster (default: none, a local cluster)",
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master URL (--engine spark; default local[2], a session for the run)",
    )
    p.add_argument("--chunk-keys", type=int, default=2048, help="keys per chunk (memory)")


def _check_engine_flags(args: argparse.Namespace) -> None:
    """The Dask options are errors where the chosen engine would ignore them."""
    _check_input_flags(args)
    given = given_flags(
        ("--workers", args.workers),
        ("--partitions", args.partitions),
        ("--scheduler", args.scheduler),
    )
    if args.engine == "embedded" and given:
        raise ValueError(f"{', '.join(given)} needs --engine dask (the embedded engine ignores it)")
    dask_only = [flag for flag in given if flag != "--partitions"]
    if args.engine == "spark" and dask_only:
        raise ValueError(
            f"{', '.join(dask_only)} needs --engine dask (Spark takes --master instead)"
        )
    if args.master is not None and args.engine != "spark":
        raise ValueError(f"--master needs --engine spark (--engine {args.engine} ignores it)")
    _check_resume_flags(args)
    if args.scheduler is not None and args.workers is not None:
        raise ValueError("--workers is not used with --scheduler (the cluster has its own)")


def _check_input_flags(args: argparse.Namespace) -> None:
    """One input: an EVENTS file, or --input-dir with --state and when to release."""
    if (args.input is None) == (args.input_dir is None):
        raise ValueError("give an EVENTS file or --input-dir DIR (exactly one)")
    if args.input_dir is not None:
        if args.state is None:
            raise ValueError("--input-dir needs --state FILE (where the run continues from)")
        if (args.until is None) == (args.allowed_lateness is None):
            raise ValueError("--input-dir needs --until STEP or --allowed-lateness WAIT (one)")


def _check_resume_flags(args: argparse.Namespace) -> None:
    """--late needs --state; --until and --allowed-lateness exclude each other."""
    if args.late != "refuse" and args.state is None:
        raise ValueError(
            f"--late {args.late} needs --state: without a stored state no step was released "
            "before this run, so no event can be late"
        )
    if args.allowed_lateness is not None and args.until is not None:
        raise ValueError("give --until or --allowed-lateness, not both")


def _selection(args: argparse.Namespace) -> KeySelection | None:
    """The KeySelection of --select-epsilon/--select-delta/--selector/--select-every
    (None with --keys). Neither budget flag given: the default split of --epsilon and
    --delta (:func:`_default_split`, which sets the counting share in ``args``)."""
    given = [
        flag
        for flag, value in (
            ("--select-epsilon", args.select_epsilon),
            ("--select-delta", args.select_delta),
            ("--select-every", args.select_every),
            ("--selector", None if args.selector == "sparse-vector" else args.selector),
        )
        if value is not None
    ]
    if args.keys is not None:
        if given:
            raise ValueError(
                f"{', '.join(given)} selects keys from the data: with --keys every key of the "
                "universe is released (omit --keys for an open key set)"
            )
        return None
    from dpcount.keyed.selection import KeySelection

    if args.select_epsilon is None and args.select_delta is None:
        _default_split(args)
    elif args.select_epsilon is None or args.select_delta is None:
        raise ValueError(
            "an open key set needs both --select-epsilon and --select-delta (e.g. "
            "--select-epsilon 1 --select-delta 1e-6), or neither (half of --epsilon and "
            "--delta go to key selection), or --keys FILE"
        )
    return KeySelection(
        epsilon=getattr(args, "select_epsilon"),  # noqa: B009  (set by _default_split)
        delta=getattr(args, "select_delta"),  # noqa: B009
        selector=args.selector,
        every=args.select_every,
    )


def _default_split(args: argparse.Namespace) -> None:
    """Without --select-epsilon/--select-delta: key selection gets half of --epsilon and
    the --delta (all of it with pure counting noise, half with discrete Gaussian)."""
    if args.delta is None:
        raise ValueError(
            "an open key set (no --keys) needs a δ for key selection: give --delta (e.g. "
            "--epsilon 2 --delta 1e-6: select-ε 1 and select-δ 1e-6, the counting ε 1), or "
            "--select-epsilon 1 --select-delta 1e-6, or --keys FILE"
        )
    gaussian = args.noise in ("discrete-gaussian", "gaussian")
    args.select_epsilon = args.epsilon / 2
    args.select_delta = args.delta / 2 if gaussian else args.delta
    args.epsilon = args.epsilon / 2
    args.delta = args.delta / 2 if gaussian else None
    args.split_note = (
        f"budget split (no --select-epsilon/--select-delta): key selection epsilon "
        f"{args.select_epsilon:g}, delta {args.select_delta:g}; counting epsilon "
        f"{args.epsilon:g}" + ("" if args.delta is None else f", delta {args.delta:g}")
    )


def _runner(args: argparse.Namespace) -> Any:
    """The runner of --engine with its options (:mod:`dpcount.keyed.spec`)."""
    from dpcount.keyed.spec import Dask, Embedded, Engine, Spark

    engine = Engine(args.engine)
    if engine is Engine.DASK:
        return Dask(args.scheduler, 2 if args.workers is None else args.workers, args.partitions)
    if engine is Engine.SPARK:
        return Spark(args.master, args.partitions)
    return Embedded()


def _groups(
    args: argparse.Namespace, selection: KeySelection | None, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    """The option groups of :func:`~dpcount.keyed.run.keyed_counts` from the flags (and
    the secret), as the library builds them (:mod:`dpcount.keyed.spec`)."""
    from dpcount.keyed.events import EventColumns
    from dpcount.keyed.spec import (
        Bounds,
        Counting,
        Keys,
        Late,
        Output,
        Steps,
        UnitScope,
        Window,
    )
    from dpcount.privacy.budget import Budget

    weight = args.max_weight
    return {
        "columns": EventColumns(
            args.time_column, args.key_column, args.weight_column, args.unit_column
        ),
        "keys": Keys(args.keys, selection),
        "steps": Steps(args.step, args.start, args.horizon),
        "secret": args.secret,
        "counting": Counting(
            args.mechanism,
            budget=Budget(**flags(args, "epsilon", "delta", "noise", "calibration")),
            k=args.k,
            subtract=args.subtract,
        ),
        "bounds": Bounds(
            int(weight) if weight == int(weight) else weight,
            args.max_keys,
            UnitScope(args.unit_scope),
            args.max_steps,
            args.min_separation,
        ),
        "window": Window(args.state, args.until, Late(args.late), args.allowed_lateness),
        "runner": _runner(args),
        "output": Output(
            args.output, chunk_keys=args.chunk_keys, std_digits=args.digits, progress=progress
        ),
    }


def run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    _check_engine_flags(args)
    check_digits(args)
    selection = _selection(args)

    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"dpcount keyed needs the 'keyed' extra ({err.name} is missing): "
            "pip install 'dpcount[keyed]'"
        ) from None
    from dpcount._cli._counting import print_noise_note
    from dpcount.keyed.incremental import run_incremental
    from dpcount.keyed.run import keyed_counts
    from dpcount.keyed.spec import to_keywords

    console = err_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("keys released", total=None)
        groups = _groups(
            args, selection, lambda done, total: bar.update(task, completed=done, total=total)
        )
        if args.input_dir is not None:
            when = dict(until=args.until, late=args.late, allowed_lateness=args.allowed_lateness)
            options = to_keywords(groups)
            ran = run_incremental(
                args.input_dir, state=args.state, output=args.output, **when, **options
            )
            if ran.completed_interrupted:
                console.print("completed the release an interrupted run had begun", markup=False)
            if ran.result is None:
                console.print(
                    f"no new complete step to release; {len(ran.new_files)} new file(s) wait",
                    markup=False,
                )
                return 0
            result = ran.result
        else:
            result = keyed_counts(args.input, **groups)
    if not result.mechanism.noise.is_discrete:
        print_noise_note(
            f"--noise {result.mechanism.noise} adds continuous floating-point noise to the "
            "counts (--noise discrete-laplace, or discrete-gaussian with --delta, is exact)"
        )
    if getattr(args, "split_note", None) is not None:
        console.print(args.split_note, markup=False, soft_wrap=True)
    console.print("(event counts below are exact, not private: do not publish them)", markup=False)
    for line in result.summary():
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"output: {result.output}", markup=False)
    return 0
