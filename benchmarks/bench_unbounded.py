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

Counters without a horizon (``--horizon-free``): the horizon-free BLT, the default
counter (the growing BLT as block 0), the horizon-free square root and the doubling
counter, their variance at t = 1, 2, 3 and 2^2 … 2^32 against the plain square root told
t, and the state each holds per coordinate; then the default's largest ratio over every
t ≤ 4096 (t = 1 is ν(1)², its whole first column). ``--vector-memory``: the
horizon-free BLT over a d = 10^3 stream of 2^20 steps, its state and traced peak memory;
``--growing-memory``: the same for the default counter without a horizon (the growing
BLT), with the process's resident set too.

Usage: python benchmarks/bench_unbounded.py [--steps N] [--repeats R] [--skip-error]
[--forever-max E] [--horizon-free] [--vector-memory] [--growing-memory]
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BLT, UnboundedCounter
from dpcount.counting.registry import MECHANISMS

BUDGET = {"epsilon": 1.0, "delta": 1e-6, "noise": "gaussian"}
INNERS = ("binary", "kary", "honaker", "sqrt", "blt")


def _known(inner: str, horizon: int) -> Any:
    return MECHANISMS[inner](horizon=horizon, rng=1, k=19, subtract=True, **BUDGET)


def _plain_sqrt_unit(steps: list[int]) -> dict[int, float]:
    """F(t) = Σ_{k<t} f(k)² (f the square root's coefficients): the plain square root
    told the horizon t has variance F(t)² in units of σ² per unit sensitivity². Summed
    directly to 2^24; beyond, F(t) = (ln t + γ + 4 ln 2)/π − 1/(4πt) + O(t⁻²) (matches the
    direct sum to 5e-10 at 2^24)."""
    from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients

    direct = [t for t in steps if t <= 1 << 24]
    f = sqrt_coefficients(max(direct))
    F = np.cumsum(f * f)
    out = {t: float(F[t - 1]) for t in direct}
    for t in steps:
        if t > 1 << 24:
            out[t] = (math.log(t) + 0.5772156649015329 + 4 * math.log(2)) / math.pi - 1 / (
                4 * math.pi * t
            )
    return out


def horizon_free_table(largest: int = 24, beyond: int = 32) -> None:
    """Counters without a horizon against the plain square root told the horizon t (its
    variance at step t, the same budget): the horizon-free BLT alone (``HorizonFreeBLT``),
    the default ``UnboundedCounter(inner="horizon-free-blt")`` (the growing BLT with its
    head factors below 2^25, then doubling Honaker blocks; exact ``variance_at``), the
    horizon-free square root (every z kept) and the doubling counter with Honaker
    inside. Exact variances. State columns, floats held per coordinate after step t:
    the BLT's n buffers and running sum; at least the t z's the square root has drawn
    (with its computed, unreleased noise t to 3t, by ``live_count()``); log2(t) + 1 for
    the doubling counter (its Honaker stream's partial sums, at most 13 below 2^14 by
    ``live_count()``, plus the carried total). Past 2^24 (to 2^beyond) the square root
    is not computed."""
    from dpcount.counting import HorizonFreeBLT
    from dpcount.counting.factorization.blt import blt_losses

    blt = HorizonFreeBLT(1 << 53, rng=1, **BUDGET)
    default = UnboundedCounter(inner="horizon-free-blt", rng=1, **BUDGET)
    free = UnboundedCounter(inner="horizon-free-sqrt", rng=1, **BUDGET)
    doubling = UnboundedCounter(inner="honaker", rng=1, **BUDGET)
    n = len(blt.buffer_decay)
    steps = [1, 2, 3, *(2**e for e in range(2, beyond + 1))]
    F = _plain_sqrt_unit(steps)
    print("counters without a horizon vs the plain square root told t (variance at step t)")
    print(f"{'t':>6}{'sqrt(t)':>10}{'free BLT':>10}{'default':>10}{'free sqrt':>11}"
          f"{'doubling':>10}{'BLT/sqrt':>10}{'dflt/sqrt':>10}{'fsqrt/sqrt':>11}{'dbl/sqrt':>10}"
          f"{'state BLT':>11}{'state fsqrt':>13}{'state dbl':>11}")  # fmt: skip
    for t in steps:
        e = t.bit_length() - 1
        label = str(t) if t < 4 else f"2^{e}"
        plain = blt.sampler.variance / blt.privacy.l2_sensitivity**2 * F[t] ** 2
        v_blt = (
            blt.sampler.variance
            * blt_losses(blt.buffer_decay, blt.output_scale, t, blt.inverse).max_variance
        )
        v_free = free.variance_at(t) if e <= largest else math.nan
        v_dbl = doubling.variance_at(t)
        v_def = default.variance_at(t)
        print(f"{label:>6}{plain:>10.2f}{v_blt:>10.2f}{v_def:>10.2f}{v_free:>11.2f}"
              f"{v_dbl:>10.2f}{v_blt / plain:>10.4f}{v_def / plain:>10.4f}"
              f"{v_free / plain:>11.4f}{v_dbl / plain:>10.4f}"
              f"{n + 1:>11}{'>=' + str(t):>13}{e + 1:>11}", flush=True)  # fmt: skip
    default_small_t(default)


def default_small_t(default: Any, largest: int = 4096) -> None:
    """The default counter's ratio to the plain square root told t at every t ≤
    ``largest`` (exact ``variance_at``): t = 1 (ν(1)², its whole first column) and the
    largest."""
    F = _plain_sqrt_unit(list(range(1, largest + 1)))
    mech = default.block_mechanism(0)
    unit = mech.sampler.variance / mech.privacy.l2_sensitivity**2
    r = np.array([default.variance_at(t) / (unit * F[t] ** 2) for t in range(1, largest + 1)])
    print(f"default / sqrt: t = 1 {r[0]:.4f}, t = 2 {r[1]:.4f}; largest over t = 1 … "
          f"{largest}: {r.max():.4f} at t = {1 + int(r.argmax())}")  # fmt: skip


def vector_memory(dim: int = 1000, steps: int = 1 << 20, chunk: int = 256) -> None:
    """A d-coordinate stream of the horizon-free BLT over ``steps`` steps: the state it
    holds, the peak of Python-traced allocations during the run (tracemalloc; the
    caller's chunk of data included) and the CPU time per step against drawing d
    normals (the floor, same run; tracemalloc slows the run itself). The horizon-free
    square root refuses this stream."""
    import time
    import tracemalloc

    from dpcount.counting import HorizonFreeBLT, HorizonFreeSqrt

    est = HorizonFreeSqrt.memory_estimate(steps, dim=dim)
    print(f"\nhorizon-free sqrt, d = {dim}: declared stream state {est.stream / 2**30:.1f} GiB "
          "for 2^20 steps (refused above the memory limit)")  # fmt: skip
    mech = HorizonFreeBLT(1 << 53, rng=1, **BUDGET)
    stream = mech.stream()
    x = np.ones((chunk, dim))
    rng = np.random.default_rng(0)
    tracemalloc.start()
    start = time.process_time()  # CPU time: the machine is shared
    for _ in range(steps // chunk):
        stream.update_many(x)
    run = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = time.process_time()
    for _ in range(steps // chunk):
        rng.standard_normal((chunk, dim))
    floor = time.process_time() - start
    n = len(mech.buffer_decay)
    print(f"horizon-free BLT, d = {dim}, {steps:,} steps in chunks of {chunk}: state "
          f"{(n + 1) * dim * 8 / 1024:.0f} KiB ((n + 1)·d floats, n = {n}); traced peak "
          f"{peak / 2**20:.1f} MiB (the {chunk}×{dim} data chunk and its output included); "
          f"{run / steps * 1e6:.1f} µs CPU per step, {run / floor:.2f}× d normals")  # fmt: skip


def _rss_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: now; VmHWM: the peak since the last
    reset)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def growing_vector_memory(
    dim: int = 1000, steps: int = 1 << 20, chunk: int = 256, trace: bool = True
) -> None:
    """The default counter without a horizon (``UnboundedCounter(inner="horizon-free-blt")``,
    block 0 the growing BLT for these steps) over a d-coordinate stream of ``steps`` steps
    in chunks: the noise state it holds (``live_count()`` values per coordinate), the peak
    of Python-traced allocations (tracemalloc: numpy arrays included, the caller's chunk
    of data and its output too), the process's resident set (RSS before the run and its
    peak during it, from /proc/self/status after resetting the peak; the interpreter and
    libraries included), and the CPU time per step against drawing d normals (the floor,
    same run; tracemalloc slows the run itself; ``trace=False``: the RSS alone)."""
    import time
    import tracemalloc

    counter = UnboundedCounter(inner="horizon-free-blt", rng=1, **BUDGET)
    stream = counter.stream()
    x = np.ones((chunk, dim))
    rng = np.random.default_rng(0)
    rss0 = _rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS (Linux)
    if trace:
        tracemalloc.start()
    start = time.process_time()  # CPU time: the machine is shared
    for _ in range(steps // chunk):
        stream.update_many(x)
    run = time.process_time() - start
    held, peak = tracemalloc.get_traced_memory() if trace else (0, 0)
    tracemalloc.stop()
    hwm = _rss_kib("VmHWM")
    start = time.process_time()
    for _ in range(steps // chunk):
        rng.standard_normal((chunk, dim))
    floor = time.process_time() - start
    live = stream.live_count()
    print(f"default counter without a horizon (block 0: {counter.block_mechanism(0)!r:.40}), "
          f"d = {dim}, {steps:,} steps in chunks of {chunk}: noise state {live} values per "
          f"coordinate ({live * dim * 8 / 1024:.0f} KiB); "
          + (f"traced peak {peak / 2**20:.1f} MiB ({held / 2**20:.2f} MiB held at the end); "
             if trace else "not traced; ")
          + f"RSS {rss0 / 1024:.1f} MiB before, peak "
          f"{hwm / 1024:.1f} MiB during the run (+{(hwm - rss0) / 1024:.1f} MiB); "
          f"{run / steps * 1e6:.1f} µs CPU per step, {run / floor:.2f}× d normals")  # fmt: skip


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
        "--vector-memory", action="store_true", help="only the d = 10^3 x 2^20 memory run"
    )
    parser.add_argument(
        "--growing-memory",
        action="store_true",
        help="only the default counter's (growing BLT) d = 10^3 memory run",
    )
    parser.add_argument(
        "--memory-steps", type=int, default=2**20, help="steps of the --growing-memory run"
    )
    parser.add_argument(
        "--no-trace", action="store_true", help="--growing-memory: the RSS only (faster)"
    )
    parser.add_argument(
        "--forever-max", type=int, default=22, help="last 2^e of the BLT-forever table (O(t))"
    )
    args = parser.parse_args()
    if args.horizon_free:
        horizon_free_table()
        return
    if args.vector_memory:
        vector_memory()
        return
    if args.growing_memory:
        growing_vector_memory(steps=args.memory_steps, trace=not args.no_trace)
        return
    if not args.skip_error:
        error_table(args.forever_max)
    speed(args.steps, args.repeats)


if __name__ == "__main__":
    main()
