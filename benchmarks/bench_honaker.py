"""Honaker Online with exact discrete noise: time as a ratio to floors measured in the
same run.

Floors: the same release with continuous Laplace noise (float arithmetic, not exact),
and drawing the discrete Laplace samples alone (what any exact release must do).
Compared: the exact release as shipped (node values in int64 under a checked bound,
one rounding per step by error-free float transformations) and the same release on
Python ints only (the fallback; how every batch ran before).

Usage: python benchmarks/bench_honaker.py [--horizon T] [--repeats R]
"""

from __future__ import annotations

import argparse

import numpy as np

import dpcount.counting.honaker as honaker
from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import Honaker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--horizon", type=int, default=2**20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    T, R = args.horizon, args.repeats
    x = np.random.default_rng(0).integers(0, 2, size=T)
    exact = Honaker(T, epsilon=1.0, noise="discrete-laplace", rng=1)
    draws = sum(T >> j for j in range(T.bit_length()))
    floor_float = best_of(lambda: Honaker(T, epsilon=1.0, rng=1).release(x), R)
    floor_draw = best_of(lambda: exact.sampler.sample(np.random.default_rng(1), draws), R)
    shipped = best_of(lambda: exact.release(x), R)
    bound = getattr(honaker, "_INT64_BOUND", None)  # None: a version before the int64 path
    honaker._INT64_BOUND = 0  # type: ignore[attr-defined]  # every batch on Python ints
    try:
        python_ints = best_of(lambda: exact.release(x), R)
    finally:
        honaker._INT64_BOUND = bound  # type: ignore[attr-defined]
    print(f"T = {T:,}: floors: float Laplace release {floor_float:.3f} s, "
          f"{draws:,} discrete Laplace draws {floor_draw:.3f} s")  # fmt: skip
    print(f"{'exact discrete release':<34}{'s':>8}{'÷ float':>10}{'÷ draws':>10}")
    for label, t in (
        ("int64 + error-free rounding", shipped),
        ("Python ints (fallback)", python_ints),
    ):
        print(f"{label:<34}{t:>8.3f}{t / floor_float:>9.1f}×{t / floor_draw:>9.1f}×")
    print(f"speed-up of the int64 path over Python ints: {python_ints / shipped:.2f}×")


if __name__ == "__main__":
    main()
