"""Exact discrete samplers: samples/s, and time as a ratio to numpy's continuous Laplace.

Floor: ``rng.laplace`` drawing the same number of samples in the same run (a
floating-point sampler, not exact). Target (issue #7): ≥ 1M samples/s for every
sampler below, with the secure default generator and with seeded PCG64.

Usage: python benchmarks/bench_discrete.py [--samples N] [--repeats R]
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.privacy import DiscreteGaussianNoise, DiscreteLaplaceNoise, secure_generator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, r = args.samples, args.repeats
    samplers = [
        ("discrete Laplace t=0.3", DiscreteLaplaceNoise(0.3)),
        ("discrete Laplace t=24", DiscreteLaplaceNoise(24.0)),
        ("discrete Laplace t=1000", DiscreteLaplaceNoise(1000.0)),
        ("discrete Gaussian σ=0.5", DiscreteGaussianNoise(0.5)),
        ("discrete Gaussian σ=4.5", DiscreteGaussianNoise(4.5)),
        ("discrete Gaussian σ=1000", DiscreteGaussianNoise(1000.0)),
    ]
    for label, rng in (
        ("PCG64 (seeded)", np.random.default_rng(0)),
        ("secure", secure_generator()),
    ):
        floor = best_of(lambda g=rng: g.laplace(0.0, 1.0, n), r)
        print(f"{label}: floor {n:,} numpy Laplace samples in {floor * 1e3:.1f} ms")
        print(f"  {'sampler':<28}{'M samples/s':>12}{'÷ floor':>10}{'1024-batch M/s':>16}")
        for name, sampler in samplers:
            t = best_of(lambda s=sampler, g=rng: s.sample(g, n), r)
            small = best_of(lambda s=sampler, g=rng: [s.sample(g, 1024) for _ in range(100)], r) / (
                100 * 1024
            )
            print(f"  {name:<28}{n / t / 1e6:>12.2f}{t / floor:>9.1f}×{1 / small / 1e6:>16.2f}")
    print("target: ≥ 1.00 M samples/s for every sampler")


if __name__ == "__main__":
    main()
