"""Column-normalized square root: exact-variance cost vs T, stream cost vs the sqrt stream.

* construction: ``NormalizedSqrtFactorization(T, ...)`` (weights, kernel, calibration)
  and the first ``max_variance()`` (the O(T²) exact per-step variances), per T;
  the ratio column is the time over T² (ns per row entry), which should stay flat.
* blocks (``block_ratio=1.1``, the default beyond 2^14): the first ``max_variance()``
  (one FFT correlation per block boundary, O(m·T log T)) per T up to
  ``--max-log2-blocks``; the ratio column is the time over m·T·log2 T (ns), which
  should stay flat. ``NORMALIZED_SQRT_BLOCK_MAX_HORIZON`` (2^22) is where this passes
  ~40 s on the loaded 2-core development machine.
* stream (floor measured in the same run): T scalar ``update`` calls and one
  ``update_many`` of T steps, per column and with blocks, each as a ratio to the
  square root's stream
  (:class:`~dpcount.counting.SqrtFactorization`, the same FFT block machinery
  without the weighted running sum) at the same T.

Usage: python benchmarks/bench_normalized_sqrt.py [--max-log2 14] [--max-log2-blocks 20]
       [--stream-horizon T] [--repeats R]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import CountingMechanism, NormalizedSqrtFactorization, SqrtFactorization


def stream_steps(mech: CountingMechanism, T: int) -> None:
    s = mech.stream()
    update = s.update
    for _ in range(T):
        update(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-log2", type=int, default=14, help="largest log2 T (14)")
    parser.add_argument("--max-log2-blocks", type=int, default=20, help="largest log2 T (20)")
    parser.add_argument("--stream-horizon", type=int, default=2**14)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    R = args.repeats

    print("construction and exact variances (first max_variance(), O(T^2)):")
    print(f"{'T':>7} {'construct s':>12} {'variances s':>12} {'ns per T^2':>11}")
    for log2 in range(10, args.max_log2 + 1):
        T = 1 << log2
        start = time.perf_counter()
        mech = NormalizedSqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=0)
        built = time.perf_counter() - start
        start = time.perf_counter()
        mech.max_variance()
        exact = time.perf_counter() - start
        print(f"{T:>7} {built:>12.4f} {exact:>12.3f} {exact / T**2 * 1e9:>11.2f}")

    print("\nblocks, ratio 1.1 (first max_variance(), O(m T log T)):")
    print(f"{'T':>8} {'blocks':>7} {'construct s':>12} {'variances s':>12} {'ns/(m T lgT)':>13}")
    for log2 in range(14, args.max_log2_blocks + 1):
        T = 1 << log2
        start = time.perf_counter()
        mech = NormalizedSqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=0, block_ratio=1.1)
        built = time.perf_counter() - start
        start = time.perf_counter()
        mech.max_variance()
        exact = time.perf_counter() - start
        m = len(mech.block_starts())
        unit = exact / (m * T * log2) * 1e9
        print(f"{T:>8} {m:>7} {built:>12.4f} {exact:>12.3f} {unit:>13.3f}")

    T = args.stream_horizon
    nsqrt = NormalizedSqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=1)
    blocked = NormalizedSqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=1, block_ratio=1.1)
    sqrt = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=1)
    x = np.ones(T)
    print(f"\nstream, T = {T:,} (best of {R}):")
    floor_steps = best_of(lambda: stream_steps(sqrt, T), R)
    steps = best_of(lambda: stream_steps(nsqrt, T), R)
    print(
        f"  {T} update calls: sqrt {floor_steps:.4f} s, normalized-sqrt {steps:.4f} s "
        f"= {steps / floor_steps:.2f}x sqrt ({steps / T * 1e6:.2f} us per step)"
    )
    steps_b = best_of(lambda: stream_steps(blocked, T), R)
    print(
        f"  {T} update calls: blocks {steps_b:.4f} s = {steps_b / floor_steps:.2f}x sqrt "
        f"({steps_b / T * 1e6:.2f} us per step)"
    )
    floor_batch = best_of(lambda: sqrt.stream().update_many(x), R)
    batch = best_of(lambda: nsqrt.stream().update_many(x), R)
    batch_b = best_of(lambda: blocked.stream().update_many(x), R)
    print(
        f"  one update_many of {T}: sqrt {floor_batch:.4f} s, normalized-sqrt "
        f"{batch:.4f} s = {batch / floor_batch:.2f}x sqrt, blocks {batch_b:.4f} s = "
        f"{batch_b / floor_batch:.2f}x sqrt"
    )


if __name__ == "__main__":
    main()
