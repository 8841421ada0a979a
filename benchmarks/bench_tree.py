"""Tree mechanisms at T = 10^7: time as a ratio to floors measured in the same run.

Floors: drawing T Laplace samples with numpy (``rng.laplace``) for the batch
release; the batch release itself for ``update_many``. Targets (issue #2):
batch ≤ 2.5× floor, ``update`` ≥ 300k calls/s, ``update_many`` in chunks of 10^4
≤ 2× batch.

Usage: python benchmarks/bench_tree.py [--horizon T] [--repeats R]
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BinaryTree, KaryTree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--horizon", type=int, default=10**7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--updates", type=int, default=10**6, help="update() calls to time")
    args = parser.parse_args()
    T, R = args.horizon, args.repeats
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=T).astype(np.float64)

    floor = best_of(lambda: rng.laplace(0.0, 1.0, T), R)
    print(f"T = {T:,}; floor: {T:,} numpy Laplace samples in {floor:.3f} s")
    print(
        f"{'mechanism':<28}{'batch s':>10}{'÷ floor':>10}{'update/s':>12}"
        f"{'many s':>10}{'÷ batch':>10}"
    )
    for mech in (
        KaryTree(T, epsilon=1.0, k=19, subtract=True, rng=1),
        BinaryTree(T, epsilon=1.0, rng=1),
    ):
        batch = best_of(lambda m=mech: m.release(x), R)

        def updates(m=mech) -> None:
            s = m.stream()
            for _ in range(min(args.updates, T)):
                s.update(1.0)

        per_update = best_of(updates, 1) / min(args.updates, T)

        def chunked(m=mech) -> None:
            s = m.stream()
            for i in range(0, T, 10_000):
                s.update_many(x[i : i + 10_000])

        many = best_of(chunked, R)
        name = f"{mech.name} (h={mech.height})"
        print(
            f"{name:<28}{batch:>10.3f}{batch / floor:>9.2f}×{1 / per_update:>12,.0f}"
            f"{many:>10.3f}{many / batch:>9.2f}×"
        )
    print("targets: batch ≤ 2.5× floor; update ≥ 300,000/s; update_many ≤ 2× batch")


if __name__ == "__main__":
    main()
