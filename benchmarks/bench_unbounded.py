"""UnboundedCounter (doubling over blocks): error and speed as ratios to the same inner
mechanism with the horizon known in advance, measured in the same run.

Error (exact, no sampling): for t = 2^10, 2^16, 2^20, the doubling counter's
variance at step t, and its mean variance over steps 1..t, divided by the inner
mechanism built for horizon T = t (its ``variance_at(t)`` and ``mse()``). Then, for
the trade-off in docs/unbounded.md, a BLT run forever: the BLT with the shipped
parameters for 2^20 calibrated at horizon 2^50 (its sensitivity there equals the
infinite-horizon one, sqrt(Σ_t c_t²), to float rounding: every decay is < 1), whose
variance at step t is compared with the doubling counter's.

Speed: ``update()`` per step over n steps, the doubling stream divided by the inner
mechanism's own stream for horizon n (the floor); the doubling stream starts a new
inner mechanism at every power of two.

The horizon-free square root (``--horizon-free``): its variance at t = 2^4 … 2^24
against the row-scaled square root told t (t ≤ 2^14) and the plain square root told t.

Usage: python benchmarks/bench_unbounded.py [--steps N] [--repeats R] [--skip-error]
[--forever-max E] [--horizon-free]
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BLT, UnboundedCounter
from dpcount.counting.registry import MECHANISMS

BUDGET = {"epsilon": 1.0, "delta": 1e-6, "noise": "gaussian"}
INNERS = ("binary", "kary", "honaker", "sqrt", "blt")


def _known(inner: str, horizon: int) -> Any:
    return MECHANISMS[inner](horizon=horizon, rng=1, k=19, subtract=True, **BUDGET)


def horizon_free_table(largest: int = 24) -> None:
    """The horizon-free square root (``UnboundedCounter(inner="horizon-free-sqrt")``)
    and today's doubling default (Honaker inside) against mechanisms told the horizon
    t: R(t), the row-scaled square root's variance at step t (T = t ≤ 2^14, its limit),
    and the plain square root's (every t). Exact variances, same budget."""
    from dpcount.counting import RowScaledSqrtFactorization, SqrtFactorization

    free = UnboundedCounter(inner="horizon-free-sqrt", rng=1, **BUDGET)
    doubling = UnboundedCounter(inner="honaker", rng=1, **BUDGET)
    print("horizon-free sqrt vs known-horizon mechanisms told t (variance at step t)")
    print(f"{'t':>6}{'free':>10}{'doubling':>10}{'R(t)':>10}{'sqrt(t)':>10}"
          f"{'free/R':>8}{'free/sqrt':>10}{'dbl/R':>8}{'dbl/free':>9}")  # fmt: skip
    for e in range(4, largest + 1):
        t = 2**e
        v, d = free.variance_at(t), doubling.variance_at(t)
        s = SqrtFactorization(t, rng=1, **BUDGET).variance_at(t)
        r = RowScaledSqrtFactorization(t, rng=1, **BUDGET).variance_at(t) if e <= 14 else None
        rs = "" if r is None else f"{r:>10.2f}"
        ratio_r = "" if r is None else f"{v / r:>8.3f}"
        dbl_r = "" if r is None else f"{d / r:>8.3f}"
        print(f"{'2^' + str(e):>6}{v:>10.2f}{d:>10.2f}{rs:>10}{s:>10.2f}"
              f"{ratio_r:>8}{v / s:>10.3f}{dbl_r:>8}{d / v:>9.3f}", flush=True)  # fmt: skip


def error_table(forever_max: int) -> None:
    print("exact error, Gaussian noise, epsilon = 1, delta = 1e-6")
    print(f"{'inner':<9}{'t':>9}{'Var(t) doubling':>17}{'known T=t':>12}{'ratio':>8}"
          f"{'mean doubling':>15}{'known T=t':>12}{'ratio':>8}")  # fmt: skip
    for inner in INNERS:
        counter = UnboundedCounter(inner=inner, rng=1, **BUDGET)
        for e in (10, 16, 20):
            t = 2**e
            known = _known(inner, t)
            v, kv = counter.variance_at(t), known.variance_at(t)
            it = counter.iter_variances()
            mean = float(np.mean([next(it) for _ in range(t)]))
            km = known.mse()
            print(f"{inner:<9}{'2^' + str(e):>9}{v:>17.1f}{kv:>12.1f}{v / kv:>8.3f}"
                  f"{mean:>15.1f}{km:>12.1f}{mean / km:>8.3f}")  # fmt: skip
    forever = BLT.optimized(2**20, rng=1, **BUDGET)
    forever = BLT(
        2**50,
        buffer_decay=forever.buffer_decay,
        output_scale=forever.output_scale,
        rng=1,
        **BUDGET,
    )
    doubling = UnboundedCounter(inner="honaker", rng=1, **BUDGET)
    print("\nBLT run forever (2^20 parameters, sensitivity at 2^50) vs doubling(honaker)")
    print(f"{'t':>9}{'std BLT forever':>17}{'std doubling':>14}{'ratio':>8}")
    for e in (10, 16, 20, *range(22, forever_max + 1)):
        t = 2**e
        b, d = forever.variance_at(t) ** 0.5, doubling.variance_at(t) ** 0.5
        print(f"{'2^' + str(e):>9}{b:>17.2f}{d:>14.2f}{b / d:>8.3f}")


def speed(steps: int, repeats: int) -> None:
    print(f"\nupdate() per step over n = {steps:,} steps (floor: the inner stream, horizon n)")
    print(f"{'inner':<9}{'floor µs':>10}{'doubling µs':>13}{'ratio':>8}")
    for inner in INNERS:
        known = _known(inner, steps)
        counter = UnboundedCounter(inner=inner, rng=1, **BUDGET)

        def run(stream: Any) -> None:
            for _ in range(steps):
                stream.update(1.0)

        floor = best_of(lambda k=known: run(k.stream()), repeats) / steps
        ours = best_of(lambda c=counter: run(c.stream()), repeats) / steps
        print(f"{inner:<9}{floor * 1e6:>10.2f}{ours * 1e6:>13.2f}{ours / floor:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2**16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-error", action="store_true")
    parser.add_argument("--horizon-free", action="store_true", help="only the horizon-free table")
    parser.add_argument(
        "--forever-max", type=int, default=22, help="last 2^e of the BLT-forever table (O(t))"
    )
    args = parser.parse_args()
    if args.horizon_free:
        horizon_free_table()
        return
    if not args.skip_error:
        error_table(args.forever_max)
    speed(args.steps, args.repeats)


if __name__ == "__main__":
    main()
