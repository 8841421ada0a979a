"""``dpcount plan --open-keys``: the sparse vector's threshold for an open key set.

Before any data is read: τ for the horizon, the selection budget (--epsilon, --delta
are the selection's ε_s and δ_s here), a unit's bounds and the check schedule, and
for keys of a few sizes spread evenly over the horizon the probability that each is
released by the end and its expected delay (:func:`dpcount.keyed.selection.plan_open_keys`).
"""

from __future__ import annotations

import argparse

from dpcount._cli._report import Column, Kind, Report, render
from dpcount._cli.options import MAX_KEYS, MAX_STEPS, MAX_WEIGHT, SELECT_EVERY, Option

__all__ = ["OPEN_KEYS", "check_not_open", "run_open_keys"]

#: the open-key flags and their defaults (errors without --open-keys)
OPEN_KEY_FLAGS = {
    "--max-keys": ("max_keys", None),
    "--max-steps": ("max_steps", None),
    "--max-weight": ("max_weight", 1),
    "--select-every": ("select_every", None),
    "--key-events": ("key_events", None),
}


#: the options of ``dpcount plan --open-keys``
OPEN_KEYS = (
    Option(
        ("--open-keys",),
        "plan an open key set (dpcount keyed without --keys): the sparse-vector "
        "selection threshold for --horizon, with --epsilon/--delta the selection's own "
        "select-ε and select-δ, and how keys of --key-events sizes fare",
        {"action": "store_true"},
    ),
    MAX_KEYS.but(help="with --open-keys: keys per unit over the run (default: none, event level)"),
    MAX_STEPS.but(
        help="with --open-keys and --max-keys: steps per unit and key (default: every step)"
    ),
    MAX_WEIGHT.but(
        type=int,
        default=1,
        help="with --open-keys: largest weight of one event (or unit per key and step) (default 1)",
    ),
    SELECT_EVERY.but(
        help="with --open-keys: check every N steps (and the last) (default: every step; a "
        "calendar schedule such as W-MON needs the run's dates: plan_open_keys(buckets=...))"
    ),
    Option(
        ("--key-events",),
        "with --open-keys: comma-separated key sizes n (events spread evenly over the "
        "horizon) to assess (default: τ/2, τ, 2τ and 4τ)",
        {"default": None},
    ),
)


def check_not_open(args: argparse.Namespace) -> None:
    """The open-key flags are errors without --open-keys."""
    for flag, (name, default) in OPEN_KEY_FLAGS.items():
        if getattr(args, name) != default:
            raise ValueError(f"{flag} needs --open-keys")


def _key_events(text: str | None, threshold: int) -> tuple[int, ...]:
    if text is None:
        return tuple(sorted({max(1, threshold // 2), threshold, 2 * threshold, 4 * threshold}))
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--key-events must be whole numbers a,b,c, got {text!r}") from None
    if any(v < 1 for v in values):
        raise ValueError(f"--key-events must be positive, got {text!r}")
    return values


def run_open_keys(args: argparse.Namespace) -> int:
    from dpcount.keyed.selection import KeySelection, plan_open_keys

    if args.horizon is None:
        raise ValueError("--open-keys needs --horizon")
    if args.delta is None:
        raise ValueError("--open-keys needs --delta (the selection's select-δ, e.g. 1e-6)")
    for flag, given in (
        ("--ranges", args.ranges),
        ("--metric", args.metric != "mse"),
        ("--sensitivity", args.sensitivity != 1.0),
        ("--participations", args.participations is not None),
        ("--dim", args.dim is not None),
        ("--memory", args.memory is not None),
        ("--beta", args.beta != 0.05),
        ("--size", args.size is not None),
        ("--workload", args.workload != "all"),
    ):
        if given:
            raise ValueError(f"{flag} is not used with --open-keys")
    if args.max_keys is None and (args.max_steps is not None or args.min_separation != 1):
        flag = "--max-steps" if args.max_steps is not None else "--min-separation"
        raise ValueError(f"{flag} bounds a unit over the run: it needs --max-keys")
    selection = KeySelection(epsilon=args.epsilon, delta=args.delta, every=args.select_every)
    bounds = dict(
        max_weight=args.max_weight,
        max_keys=args.max_keys,
        max_steps=args.max_steps,
        min_separation=args.min_separation,
    )
    plan = plan_open_keys(selection, horizon=args.horizon, **bounds)
    sizes = _key_events(args.key_events, plan.threshold)
    plan = plan_open_keys(
        selection,
        horizon=args.horizon,
        key_events=sizes,
        **bounds,
    )
    _print(args, plan)
    return 0


def _print(args: argparse.Namespace, plan: object) -> None:
    """The plan as a :class:`~dpcount._cli._report.Report` in ``--format``'s format."""
    from dpcount.keyed.selection import OpenKeyPlan

    assert isinstance(plan, OpenKeyPlan)
    sv = plan.calibration
    who = "event level" if args.max_keys is None else f"{plan.max_keys} keys per unit"
    columns = [
        Column("events", "n events", Kind.INT, "the key's events, spread evenly over T"),
        Column("released", "P(released by T)", Kind.NUMBER, "probability it is released"),
        Column("first_event", "first event", Kind.INT, "the step of its first event"),
        Column("expected_step", "E(release step)", Kind.NUMBER, "its expected release step"),
        Column("expected_delay", "E(delay)", Kind.NUMBER, "expected steps from first event"),
    ]
    rows = [
        [k.events, float(k.released), k.first_step, k.expected_step, k.expected_delay]
        for k in plan.keys
    ]
    notes = [
        f"Open key set, sparse-vector selection: T = {plan.horizon:,}, select-ε = "
        f"{args.epsilon:g}, select-δ = {args.delta:g}, {who}, one unit adds at most "
        f"C = {plan.per_key_total} to a key; {sv.checks:,} checked steps.",
        f"Threshold τ = {sv.threshold}: a key is released from the first checked step its "
        f"count + ν reaches τ + ρ (ρ scale {float(sv.rho_scale):.4g}, {sv.rho_share} of "
        f"select-ε; ν scale {float(sv.nu_scale):.4g}); a key of one unit is ever released "
        f"with probability <= {sv.bound:.3g} (<= select-δ/m = {sv.key_delta:.3g}).",
    ]
    report = Report(
        "A key with n events spread evenly over the horizon", columns, rows, notes=notes
    )
    report.key_columns = 1
    render(report, args.format)
