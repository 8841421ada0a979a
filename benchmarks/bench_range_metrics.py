"""Exact range metrics and query answering, as ratios to floors measured in the same run.

Targets (issue #4): the exact total squared error over all n(n+1)/2 ranges at
n = 2^20 in under 1 s; answering 10^6 ranges in under 0.1 s. Floors: one O(n) pass
(``np.cumsum`` of n floats) for the metrics, and 2·10^6 random gathers from the prefix
sums (what answering costs at least) for the queries.

Usage: python benchmarks/bench_range_metrics.py [--log2n 20] [--queries 1000000]
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.ranges import (
    CorrelatedPerturbation,
    HierarchicalMechanism,
    TreeMechanism,
    WaveletMechanism,
    max_query_variance,
    total_squared_error,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log2n", type=int, default=20)
    parser.add_argument("--queries", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, q, r = 1 << args.log2n, args.queries, args.repeats
    rng = np.random.default_rng(0)
    data = rng.integers(0, 100, n).astype(np.float64)  # a histogram of counts

    floor = best_of(lambda: np.cumsum(data), r)
    print(f"n = 2^{args.log2n}; floor: cumsum of n floats in {floor * 1e3:.2f} ms")
    print(f"{'exact metric over all ranges':<46}{'seconds':>9}{'÷ floor':>10}")
    for label, size in (("", n), (" (n − 3)", n - 3)):
        mechs = [CorrelatedPerturbation(size, epsilon=1.0, delta=1e-9)]
        if not label:
            mechs += [
                HierarchicalMechanism(size, epsilon=1.0, delta=1e-9),
                WaveletMechanism(size, epsilon=1.0, delta=1e-9),
                TreeMechanism(size, epsilon=1.0, delta=1e-9),
            ]
        for mech in mechs:
            name = type(mech).__name__.replace("Mechanism", "")
            t = best_of(lambda m=mech: total_squared_error(m), r)
            print(f"{'total squared error, ' + name + label:<46}{t:>9.3f}{t / floor:>9.0f}×")
        t = best_of(lambda m=mechs[0]: max_query_variance(m), 1)
        print(f"{'max variance (worst case), Correlated' + label:<46}{t:>9.3f}{t / floor:>9.0f}×")

    mech = CorrelatedPerturbation(n, epsilon=1.0, delta=1e-9, rng=1)
    release = mech.release(data)
    lo = rng.integers(0, n, q)
    hi = np.minimum(lo + rng.integers(0, n, q), n - 1)
    prefix = np.concatenate(([0.0], np.cumsum(data)))
    gather = best_of(lambda: prefix[hi + 1] - prefix[lo], r)
    print(f"\n{q:,} random ranges; floor: 2 gathers from the prefix sums {gather * 1e3:.1f} ms")
    for name, fn in (
        ("query (validated, O(1) each)", lambda: release.query(lo, hi)),
        ("range_variance (exact, O(log n) each)", lambda: release.range_variance(lo, hi)),
        ("interval (answer ± z·sd)", lambda: release.interval(lo, hi)),
    ):
        t = best_of(fn, r)
        print(f"{name:<46}{t:>9.3f}{t / gather:>9.1f}×")
    print("targets: total squared error at n = 2^20 < 1 s; 10^6 queries < 0.1 s")


if __name__ == "__main__":
    main()
