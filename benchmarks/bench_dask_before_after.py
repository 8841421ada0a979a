"""The Dask runner before and after this release, alternating in fresh processes.

"before" is the last 0.4 commit (:func:`bench_before_after.before_commit`: the parent
of the commit that set 0.5.0, b24b7db), its ``src`` extracted with ``git archive``
into a temporary directory; "after" is a source tree (``--after PATH``, default this
script's repository). Each round runs one child per version, in alternating order
(before, after; after, before; ...), each a fresh Python process with ``PYTHONPATH``
at one tree's ``src`` (it checks which ``dpcount`` it imported) timing one run of
``bench_keyed.py``'s Dask job (:func:`bench_keyed.dask_run`): a fresh ``LocalCluster``
of ``--workers`` processes, the workers' imports done first (start-up, not timed),
then ``keyed_counts(engine="dask")`` over K keys x T steps (binary tree, discrete
Laplace, ε = 1, E random events in memory; the counts gathered to the client and
discarded, or with ``--write DIR`` Parquet parts written by the workers). A child
reports wall seconds and the CPU seconds of the client (with the scheduler, which runs
in it) and every worker together.

Printed: per version the best and the median over rounds of CPU and wall, their
after ÷ before, and the load average at each child's end (the machine's other jobs
stretch the wall time: compare CPU first, and rounds taken at one load).

The default job (10^5 keys x 10^3 steps, 10^6 events, 2 workers) takes ~10-15 s per
child on an idle 2-core machine, ~25-30 s a round.

Usage: python benchmarks/bench_dask_before_after.py [--rounds N] [--keys K] [--steps T]
[--events E] [--workers W] [--write DIR] [--before REV] [--after PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def child(args: argparse.Namespace) -> None:
    """One timed Dask run with the dpcount on the path (under ``args.expect``); prints
    one JSON line."""
    import warnings

    warnings.simplefilter("ignore")
    import dpcount

    where = Path(dpcount.__file__).resolve()
    if not where.is_relative_to(Path(args.expect).resolve()):
        raise SystemExit(f"imported dpcount from {where}, expected under {args.expect}")
    sys.path.insert(0, str(HERE.parent))
    import bench_keyed

    events = bench_keyed._events(args.keys, args.steps, args.events)
    kw = bench_keyed._kwargs(args.keys, args.steps, 2, args.chunk_keys)
    wall, cpu, rss, meter = bench_keyed.dask_run(events, kw, args.workers, args.write)
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "worker_rss": max(rss),
                "client_rss": meter.peak / 2**20,
                "sent": meter.sent / 2**20,
                "load": os.getloadavg()[0],
            }
        )
    )


def run_child(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, str(HERE), "--child", "--expect", str(src)]
    cmd += ["--keys", str(args.keys), "--steps", str(args.steps), "--events", str(args.events)]
    cmd += ["--workers", str(args.workers), "--chunk-keys", str(args.chunk_keys)]
    cmd += [] if args.write is None else ["--write", args.write]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"child for {src} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def report(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Best and median CPU and wall per version, after ÷ before, loads."""
    lines = [
        f"{'':<8}{'CPU best':>10}{'CPU median':>12}{'wall best':>11}{'wall median':>13}  loads"
    ]
    stats: dict[str, dict[str, float]] = {}
    for name, rows in results.items():
        cpu, wall = [r["cpu"] for r in rows], [r["wall"] for r in rows]
        stats[name] = {
            "cpu_best": min(cpu),
            "cpu_median": statistics.median(cpu),
            "wall_best": min(wall),
            "wall_median": statistics.median(wall),
        }
        s = stats[name]
        loads = " ".join(f"{r['load']:.1f}" for r in rows)
        lines.append(
            f"{name:<8}{s['cpu_best']:>9.2f}s{s['cpu_median']:>11.2f}s{s['wall_best']:>10.2f}s"
            f"{s['wall_median']:>12.2f}s  {loads}"
        )
    a, b = stats["after"], stats["before"]
    ratio = {k: a[k] / b[k] for k in a}
    lines.append(
        f"{'A÷B':<8}{ratio['cpu_best']:>10.3f}{ratio['cpu_median']:>12.3f}"
        f"{ratio['wall_best']:>11.3f}{ratio['wall_median']:>13.3f}"
    )
    for name, rows in results.items():
        lines.append(
            f"{name}: per round CPU "
            + " ".join(f"{r['cpu']:.2f}" for r in rows)
            + "; wall "
            + " ".join(f"{r['wall']:.2f}" for r in rows)
            + f"; worker peak RSS {max(r['worker_rss'] for r in rows):.0f} MiB, client "
            f"{max(r['client_rss'] for r in rows):.0f} MiB, sent {rows[-1]['sent']:.1f} MiB"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--after", type=Path, default=HERE.parents[1], help="source tree")
    parser.add_argument("--before", default=None, help="commit (default: the last 0.4 one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", type=int, default=10**5)
    parser.add_argument("--steps", type=int, default=10**3)
    parser.add_argument("--events", type=int, default=10**6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-keys", type=int, default=2048)
    parser.add_argument("--write", metavar="DIR", default=None, help="workers write Parquet parts")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--expect", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sys.path.insert(0, str(HERE.parent))
    from bench_before_after import _git, before_commit

    repo = HERE.parents[1]
    rev = args.before if args.before is not None else before_commit(repo)
    after = args.after.resolve()
    head = _git(after, "rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if _git(after, "status", "--porcelain", "--", "src") else ""
    with tempfile.TemporaryDirectory(prefix="dpcount-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", rev, "src"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        trees = {"before": Path(tmp) / "src", "after": after / "src"}
        print(
            f"before = {rev}, after = {after} at {head}{dirty}; {args.keys:,} keys x "
            f"{args.steps:,} steps, {args.events:,} events, {args.workers} workers, "
            f"{'Parquet parts' if args.write else 'counts to the client'}; {args.rounds} "
            f"rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
            flush=True,
        )
        start = time.perf_counter()
        results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for name in order:
                results[name].append(run_child(trees[name], args))
            print(
                f"  round {r + 1}/{args.rounds} at {time.perf_counter() - start:.0f} s: "
                + ", ".join(
                    f"{n} {results[n][-1]['cpu']:.2f} s CPU {results[n][-1]['wall']:.2f} s wall"
                    for n in order
                )
                + f"; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    print("\n".join(report(results)))
    print(
        "CPU: client (with the scheduler) and workers, user + system; A÷B: after ÷ before "
        "(target <= 1.05, aimed at <= 0.9 median); loads: 1-min load average after each child."
    )


if __name__ == "__main__":
    main()
