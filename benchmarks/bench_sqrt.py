"""Square-root factorization (and the other new baselines): time as ratios to floors.

Floors, measured in the same run:

* batch: one real-FFT convolution of two length-T arrays,
  ``irfft(rfft(a, n) * rfft(b, n), n)[:T]`` with n = next_fast_len(2T − 1).
  Target (issue #3): ``release`` at T = 2^24 in ≤ 2.5× this floor.
* stream: the batch release at the stream's horizon. Target: 2^20 ``update``
  calls in < 10× the batch time.
* baselines (Honaker, smooth binary, input perturbation): drawing T Laplace
  samples with numpy, as in ``bench_tree.py`` (no target in the issue; reported).

Usage: python benchmarks/bench_sqrt.py [--horizon T] [--stream-horizon T] [--repeats R]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.fft as sfft

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import Honaker, InputPerturbation, SmoothBinary, SqrtFactorization


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--horizon", type=int, default=2**24, help="batch horizon (2^24)")
    parser.add_argument("--stream-horizon", type=int, default=2**20, help="stream horizon (2^20)")
    parser.add_argument("--baseline-horizon", type=int, default=2**22)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    R = args.repeats
    rng = np.random.default_rng(0)

    # -- batch vs one real-FFT convolution ----------------------------------------------
    T = args.horizon
    a, b = rng.normal(size=T), rng.normal(size=T)
    n = sfft.next_fast_len(2 * T - 1, real=True)
    floor = best_of(lambda: sfft.irfft(sfft.rfft(a, n) * sfft.rfft(b, n), n)[:T], R)
    x = rng.integers(0, 2, size=T).astype(np.float64)
    mech = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=1)
    start = time.perf_counter()
    mech.release(x)  # first call also computes f(0..T-1)
    cold = time.perf_counter() - start
    warm = best_of(lambda: mech.release(x), R)
    print(f"T = {T:,}: one real-FFT convolution (n = {n:,}) {floor:.3f} s")
    print(f"  sqrt release, first call (incl. f): {cold:.3f} s = {cold / floor:.2f}× floor")
    print(f"  sqrt release, later calls:          {warm:.3f} s = {warm / floor:.2f}× floor")
    print("  target: ≤ 2.5× floor")

    # -- stream vs batch at the stream horizon ---------------------------------------------
    Ts = args.stream_horizon
    xs = x[:Ts] if Ts <= T else rng.integers(0, 2, size=Ts).astype(np.float64)
    smech = SqrtFactorization(Ts, epsilon=1.0, delta=1e-6, rng=2)
    smech.release(xs)  # compute f once
    batch = best_of(lambda: smech.release(xs), R)
    values = xs.tolist()

    def updates() -> None:
        s = smech.stream()
        for v in values:
            s.update(v)

    def chunked() -> None:
        s = smech.stream()
        for i in range(0, Ts, 10_000):
            s.update_many(xs[i : i + 10_000])

    upd = best_of(updates, R)
    many = best_of(chunked, R)
    print(f"T = {Ts:,}: sqrt batch release {batch:.3f} s")
    print(f"  {Ts:,} update() calls: {upd:.3f} s = {upd / batch:.2f}× batch ({Ts / upd:,.0f}/s)")
    print(f"  update_many in chunks of 10^4: {many:.3f} s = {many / batch:.2f}× batch")
    print("  target: update() stream < 10× batch")

    # -- the other baselines ----------------------------------------------------------------
    Tb = args.baseline_horizon
    xb = rng.integers(0, 2, size=Tb).astype(np.float64)
    lap_floor = best_of(lambda: rng.laplace(0.0, 1.0, Tb), R)
    print(f"T = {Tb:,}: floor {Tb:,} numpy Laplace samples {lap_floor:.3f} s")
    print(f"{'mechanism':<16}{'batch s':>10}{'÷ floor':>10}{'update/s':>12}")
    for m in (
        Honaker(Tb, epsilon=1.0, rng=3),
        SmoothBinary(Tb, epsilon=1.0, delta=1e-6, rng=3),
        InputPerturbation(Tb, epsilon=1.0, rng=3),
    ):
        t_batch = best_of(lambda m=m: m.release(xb), R)
        steps = min(Tb, 10**6)

        def per_step(m=m, steps=steps) -> None:  # type: ignore[no-untyped-def]
            s = m.stream()
            for _ in range(steps):
                s.update(1.0)

        rate = steps / best_of(per_step, 1)
        print(f"{m.name:<16}{t_batch:>10.3f}{t_batch / lap_floor:>9.2f}×{rate:>12,.0f}")


if __name__ == "__main__":
    main()
