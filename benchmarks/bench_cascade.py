"""Cascade Sampling speed and memory, as ratios to floors measured in the same run.

Floor: drawing the same number of standard normals with numpy
(``rng.standard_normal(n)``), which Cascade Sampling must do anyway (one normal per
leaf). Target (issue #4): n = 2^25 in ≤ 2× the floor. Memory: n = 2^28 must fit; the
peak resident memory of a fresh process drawing it is printed as a multiple of the
output's size (2 GiB of float64).

Usage: python benchmarks/bench_cascade.py [--log2n 25] [--repeats 3] [--memory]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.ranges import CorrelatedPerturbation, cascade_sample


def child(log2n: int) -> None:
    """Draw 2^log2n leaves in this (fresh) process and report the peak memory."""
    n = 1 << log2n
    start = time.perf_counter()
    noise = cascade_sample(n, 1.0, np.random.default_rng(0))
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(
        f"n = 2^{log2n}: {elapsed:.2f} s; output {noise.nbytes / 2**30:.2f} GiB; "
        f"peak RSS {peak / 2**30:.2f} GiB = {peak / noise.nbytes:.2f}× the output"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log2n", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="also draw n = 2^28 (needs ~3 GiB)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    rng = np.random.default_rng(0)
    n = 1 << args.log2n
    print(f"{'case':<34}{'seconds':>10}{'÷ floor':>10}")
    floor = best_of(lambda: rng.standard_normal(n), args.repeats)
    print(f"{'floor: numpy standard_normal(n)':<34}{floor:>10.3f}{1.0:>9.2f}×")
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"cascade n = 2^{args.log2n}", lambda: cascade_sample(n, 1.0, rng)),
        (f"cascade n = 2^{args.log2n} − 12345", lambda: cascade_sample(n - 12345, 1.0, rng)),
        (
            f"cascade 2-D 2^{args.log2n // 2} × 2^{args.log2n - args.log2n // 2}",
            lambda: cascade_sample((1 << args.log2n // 2, n >> args.log2n // 2), 1.0, rng),
        ),
    ]
    mech = CorrelatedPerturbation(n, epsilon=1.0, delta=1e-9, rng=1)
    x = np.zeros(n)
    cases.append((f"release (x + noise, prefix sums) 2^{args.log2n}", lambda: mech.release(x)))
    for name, fn in cases:
        t = best_of(fn, args.repeats)
        print(f"{name:<34}{t:>10.3f}{t / floor:>9.2f}×")
    print("target: cascade n = 2^25 ≤ 2× floor")
    if args.memory:
        subprocess.run([sys.executable, __file__, "--child", "28"], check=True)


if __name__ == "__main__":
    main()
