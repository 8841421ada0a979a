"""``dpcount plan`` at T = 2^20 against ``python -c "import numpy, scipy.signal"``.

Times ``dpcount plan --horizon 1048576 --epsilon 1 --delta 1e-6 --dim 100000`` (a fresh
interpreter, output discarded) and the floor in the same run, alternately, best of
``--repeat`` each (wall clock and the child's CPU time, user + sys), and prints their
ratios. Target (issue 33 item 3): ≤ 8× the floor (≤ 2 s on an idle machine). On a shared
machine only the ratios mean something; the CPU ratio is the one load inflates least.

    python benchmarks/bench_plan.py [--repeat 3] [--src DIR] [--horizon T]

``--src`` times another checkout's ``src`` (e.g. the code before a change).

Measured 2026-12-07 02:13 UTC (issue 33, "coldstart"), load average 10-13, compiled
bytecode, best of 3, alternating with the code before: plan 5.19 s CPU (5.90x the floor;
wall 5.8 s, 6.16x) → 0.52 s (0.62x; wall 0.54 s, 0.41x), output unchanged. plan's
whole-number line asks ``auto`` for the integer choice; ``auto`` ranked every mechanism
again without ``--dim`` (the normalized and row-scaled BLT rows at 2^20 among them), and
now keeps that choice from bounds without building the Gaussian rows
(``analysis/recommend.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

PYTHON = sys.executable
SRC = str(Path(__file__).resolve().parents[1] / "src")
FLOOR = [PYTHON, "-c", "import numpy, scipy.signal"]


def _run(cmd: list[str], src: str) -> tuple[float, float]:
    """(wall s, CPU s) of one child process with ``src`` on its path."""
    env = {**os.environ, "PYTHONPATH": src}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise RuntimeError(f"{cmd} failed: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=1 << 20)
    parser.add_argument("--src", default=SRC, help="the dpcount source to time (default: this)")
    args = parser.parse_args()
    plan = [PYTHON, "-m", "dpcount", "plan", "--horizon", str(args.horizon), "--epsilon", "1"]
    plan += ["--delta", "1e-6", "--dim", "100000"]
    floors, plans = [], []
    for _ in range(args.repeat):  # alternate, so both see the same load
        floors.append(_run(FLOOR, args.src))
        plans.append(_run(plan, args.src))
    floor = (min(w for w, _ in floors), min(c for _, c in floors))
    best = (min(w for w, _ in plans), min(c for _, c in plans))
    print(f"source: {args.src}")
    print(f"floor  (import numpy, scipy.signal): wall {floor[0]:.3f} s, CPU {floor[1]:.3f} s")
    print(f"plan   (T = {args.horizon}):          wall {best[0]:.3f} s, CPU {best[1]:.3f} s")
    print(f"ratio: wall {best[0] / floor[0]:.2f}x, CPU {best[1] / floor[1]:.2f}x (target <= 8x)")


if __name__ == "__main__":
    main()
