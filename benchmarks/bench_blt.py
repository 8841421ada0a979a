"""BLT streams and releases: memory and time as ratios to floors, in one run.

* Vector stream, d = 10^5 (``--dim``), T = 4096 (``--steps``): the noise process's
  peak extra memory (tracemalloc, numpy reports its buffers) against
  (buffers + 2)·d·8 bytes; the median step time against drawing d normals with
  the same generator; the slowest step against the median. Also the whole
  ``CountingStream.update`` (which adds the running sum of the data and returns a
  new array). Targets (issue 11): memory ≤ 1×, step ≤ 2×, slowest ≤ 3× median;
  (issue 20, the fused step): median ≤ 1.3×, 99.9th percentile ≤ 2× median. Step
  times are also given in thread CPU time (``time.thread_time``), which a loaded
  machine does not inflate by preempting the process.
* Batch release, T = 10^7 scalar (``--batch``): against drawing T normals.
  Target ≤ 2×.
* The square-root stream with vector steps for comparison, at a smaller d
  (``--sqrt-dim``): its peak memory grows with t·d (every past z is needed).

* ``--numba``: the same step and batch recursion as one compiled loop per coordinate
  (numba, not a dpcount dependency: install it by hand to run this), against the same
  floors, to show what a compiled kernel would gain. Its step gives the same floats as
  dpcount's (checked here); its batch is the plain recursion (equal to rounding).

* ``--batch-only``: the batch release at T = ``--batch`` of ``blt``, ``normalized-blt``
  and ``row-scaled-blt`` (build, first release, then the least CPU time of a release
  interleaved with drawing T normals). Target (issue 33) ≤ 2.5× for every variant.

* ``--blt-ratios``: the plain ``blt`` batch release at T = 2^16, 2^18 and 2^20 (zeros,
  ε = 1, δ = 1e-6) against drawing T normals, interleaved (``--repeats`` pairs, at
  least 8): the least release ÷ the least draw, and the median of the pairs' ratios.
  ``scipy.signal`` is imported first (the steady state of a long process: below 2^18
  chunks a release's first-order filters run in Python until ``dpcount._scipy``'s
  budget is spent, then in scipy). Target (issue 33) ≤ 2.5×. ``--blt-dims 0 4 16``:
  also vector steps of d = 4 and 16 (against drawing T·d normals; 0 is scalar steps).

Usage: python benchmarks/bench_blt.py [--dim D] [--steps T] [--batch T] [--buffers N]
[--numba] [--batch-only] [--blt-ratios [--blt-dims 0 4 16]]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BLT, SqrtFactorization
from dpcount.counting.factorization.normalized_blt import NormalizedBLT
from dpcount.privacy.source import NoiseSource


def stream_figures(
    mech: BLT | SqrtFactorization | NormalizedBLT, dim: int, steps: int
) -> dict[str, float]:
    """Per-step times and peak traced memory of the noise process alone (its state
    included: memory is traced from before the process is made)."""
    times = np.empty(steps)
    cpu = np.empty(steps)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    process = mech.noise_process(
        NoiseSource.generator(mech.sampler, np.random.default_rng(1), dim), dim
    )
    peak_extra = tracemalloc.get_traced_memory()[1] - base
    for t in range(steps):
        tracemalloc.reset_peak()
        start, start_cpu = time.perf_counter(), time.thread_time()
        noise = process.next()
        times[t] = time.perf_counter() - start
        cpu[t] = time.thread_time() - start_cpu
        peak_extra = max(peak_extra, tracemalloc.get_traced_memory()[1] - base)
        del noise
    tracemalloc.stop()
    return {
        "p999": float(np.quantile(times, 0.999)),
        "median": float(np.median(times)),
        "slowest": float(times.max()),
        "slowest_after_first": float(times[1:].max()) if steps > 1 else float(times[0]),
        "peak": float(peak_extra),
        "cpu_median": float(np.median(cpu)),
        "cpu_p999": float(np.quantile(cpu, 0.999)),
    }


def batch_variants(B: int, repeats: int) -> None:
    """Batch release at T = B of ``blt``, ``normalized-blt`` and ``row-scaled-blt``: build
    and first release (per-horizon tables computed there and kept), then the least
    process CPU time of a release over ``repeats``, interleaved with drawing B normals
    (issue 33's bar: ≤ 2.5×)."""
    from dpcount.counting import RowScaledBLT
    from dpcount.privacy import Budget

    rng = np.random.default_rng(3)
    zeros = np.zeros(B)
    for name, cls in (
        ("blt", BLT),
        ("normalized-blt", NormalizedBLT),
        ("row-scaled-blt", RowScaledBLT),
    ):
        start = time.process_time()
        mech = cls.optimized(B, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
        built = time.process_time() - start
        start = time.process_time()
        mech.release(zeros)
        first = time.process_time() - start
        hot = floor = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            rng.standard_normal(B)
            floor = min(floor, time.process_time() - start)
            start = time.process_time()
            mech.release(zeros)
            hot = min(hot, time.process_time() - start)
        print(
            f"{name:<15} T = {B:,}: build {built:.2f} s CPU, first release {first:.2f} s; "
            f"release {hot:.3f} s = {hot / floor:.2f}× drawing T normals ({floor:.3f} s)",
            flush=True,
        )


def blt_ratios(repeats: int, dims: list[int]) -> None:
    """The plain BLT's batch release ÷ drawing T·d normals at T = 2^16, 2^18, 2^20, for
    scalar steps (d 0 in ``dims``) and vectors of each other d in ``dims``."""
    import scipy.signal  # noqa: F401  (the steady state: filters in scipy)

    from dpcount.privacy import Budget

    rng = np.random.default_rng(3)
    for e in (16, 18, 20):
        T = 1 << e
        mech = BLT.optimized(T, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
        for d in dims:
            shape = (T,) if d == 0 else (T, d)
            zeros = np.zeros(shape)
            mech.release(zeros)  # warm-up: tables, grids, chunk matrices
            hot, floor = [], []
            for _ in range(max(8, repeats)):
                start = time.process_time()
                rng.standard_normal(shape)
                floor.append(time.process_time() - start)
                start = time.process_time()
                mech.release(zeros)
                hot.append(time.process_time() - start)
            pairs = float(np.median(np.array(hot) / np.array(floor)))
            width = "scalar" if d == 0 else f"d = {d}"
            print(
                f"blt T = 2^{e} {width}: release {min(hot) * 1e3:.2f} ms, normals"
                f" {min(floor) * 1e3:.2f} ms: least ÷ least {min(hot) / min(floor):.2f}×,"
                f" median pair {pairs:.2f}×",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dim", type=int, default=10**5)
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=10**7)
    parser.add_argument("--buffers", type=int, default=None, help="shipped count (best if None)")
    parser.add_argument("--sqrt-dim", type=int, default=10**3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numba", action="store_true", help="also time a compiled kernel")
    parser.add_argument(
        "--batch-only", action="store_true", help="only the batch release of every BLT variant"
    )
    parser.add_argument(
        "--blt-ratios",
        action="store_true",
        help="only the plain blt batch release ÷ T normals at 2^16, 2^18, 2^20",
    )
    parser.add_argument(
        "--blt-dims",
        type=int,
        nargs="+",
        default=[0],
        help="with --blt-ratios: step widths (0: scalar steps; else vectors of d)",
    )
    args = parser.parse_args()
    if args.blt_ratios:
        blt_ratios(args.repeats, args.blt_dims)
        return
    if args.batch_only:
        batch_variants(args.batch, args.repeats)
        return
    d, T = args.dim, args.steps

    mech = BLT.optimized(T, buffers=args.buffers, epsilon=1.0, delta=1e-6, rng=0)
    n = len(mech.buffer_decay)
    loss = mech.losses().mean_loss
    print(f"BLT, {n} buffers (shipped, mean-optimized for T = {T}); mean loss {loss:.4f}")

    # -- vector stream ------------------------------------------------------------------
    # The floor: drawing d normals T times (a fresh array each, as a step does), so its
    # slowest/median ratio shows how much jitter the machine alone causes in this run.
    rng = np.random.default_rng(2)
    draws = np.empty(T)
    draws_cpu = np.empty(T)
    for i in range(len(draws)):
        start, start_cpu = time.perf_counter(), time.thread_time()
        rng.standard_normal(d)
        draws[i] = time.perf_counter() - start
        draws_cpu[i] = time.thread_time() - start_cpu
    draw = float(np.median(draws))
    draw_cpu = float(np.median(draws_cpu))
    floor_slowest = float(draws.max()) / draw
    floor_p999 = float(np.quantile(draws, 0.999)) / draw
    fig = stream_figures(mech, d, T)
    budget = (n + 2) * d * 8
    print(f"vector stream d = {d:,}, T = {T}:")
    print(
        f"  peak extra memory {fig['peak'] / 2**20:.1f} MiB = {fig['peak'] / budget:.3f}× "
        f"(buffers + 2)·d·8 = {budget / 2**20:.1f} MiB"
    )
    print(
        f"  median step {fig['median'] * 1e3:.2f} ms = {fig['median'] / draw:.2f}× drawing d "
        f"normals ({draw * 1e3:.2f} ms); slowest step = {fig['slowest'] / fig['median']:.2f}× "
        f"median ({fig['slowest_after_first'] / fig['median']:.2f}× after the first step); "
        f"99.9th percentile {fig['p999'] / fig['median']:.2f}× median"
    )
    print(
        f"  CPU time of this thread (not counting time other jobs hold the core): median "
        f"step {fig['cpu_median'] / draw_cpu:.2f}× drawing d normals; 99.9th percentile "
        f"{fig['cpu_p999'] / fig['cpu_median']:.2f}× median"
    )
    print(
        f"  floor (drawing d normals {T} times, same run): slowest {floor_slowest:.2f}× its "
        f"median, 99.9th percentile {floor_p999:.2f}×"
    )
    gc.disable()  # is the slowest step the garbage collector? (numpy frees eagerly)
    try:
        nogc = stream_figures(mech, d, T)
    finally:
        gc.enable()
    print(
        f"  with the garbage collector off: median {nogc['median'] / draw:.2f}× drawing d "
        f"normals, slowest {nogc['slowest_after_first'] / nogc['median']:.2f}× median (after "
        f"the first step), 99.9th percentile {nogc['p999'] / nogc['median']:.2f}×"
    )
    stream = mech.stream()
    x = np.ones(d)
    steps = min(T, 512)
    times = np.empty(steps)
    for t in range(steps):
        start = time.perf_counter()
        stream.update(x)
        times[t] = time.perf_counter() - start
    med = float(np.median(times))
    print(
        f"  whole CountingStream.update ({steps} steps, adds the data's running sum): "
        f"median {med * 1e3:.2f} ms = {med / draw:.2f}× drawing d normals, "
        f"slowest {times.max() / med:.2f}× median"
    )

    # -- batch release ------------------------------------------------------------------
    B = args.batch
    big = BLT.optimized(B, buffers=args.buffers, epsilon=1.0, delta=1e-6, rng=0)
    floor = best_of(lambda: np.random.default_rng(3).standard_normal(B), args.repeats)
    zeros = np.zeros(B)
    batch = best_of(lambda: big.release(zeros), args.repeats)
    floor_cpu = cpu_best_of(lambda: np.random.default_rng(3).standard_normal(B), args.repeats)
    batch_cpu = cpu_best_of(lambda: big.release(zeros), args.repeats)
    print(
        f"batch release T = {B:,} scalar: {batch:.3f} s = {batch / floor:.2f}× drawing T "
        f"normals ({floor:.3f} s); CPU time {batch_cpu / floor_cpu:.2f}×"
    )

    if args.numba:
        compiled_figures(mech, big, d, T, B, draw_cpu, floor_cpu)

    # -- the column-normalized BLT's vector stream (issue 20 item 1) ----------------------
    nb = NormalizedBLT.optimized(T, epsilon=1.0, delta=1e-6, rng=0)
    nfig = stream_figures(nb, d, min(T, 1024))
    nn = len(nb.buffer_decay)
    print(
        f"normalized BLT ({nn} buffers), d = {d:,}: peak extra memory "
        f"{nfig['peak'] / ((nn + 2) * d * 8):.3f}× (buffers + 2)·d·8; median step "
        f"{nfig['median'] / draw:.2f}× drawing d normals (CPU time "
        f"{nfig['cpu_median'] / draw_cpu:.2f}×)"
    )

    # -- square-root stream with vector steps, for comparison -----------------------------
    sd = args.sqrt_dim
    sq = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=0)
    sfig = stream_figures(sq, sd, T)
    blt_small = stream_figures(mech, sd, T)
    print(f"square-root stream d = {sd:,}, T = {T} (BLT at the same d in brackets):")
    print(
        f"  peak extra memory {sfig['peak'] / 2**20:.1f} MiB = {sfig['peak'] / (sd * 8):.0f}·d·8 "
        f"bytes [BLT {blt_small['peak'] / (sd * 8):.1f}·d·8]"
    )
    print(
        f"  slowest step {sfig['slowest'] * 1e3:.1f} ms = {sfig['slowest'] / sfig['median']:.0f}× "
        f"its median [BLT {blt_small['slowest'] / blt_small['median']:.1f}×]"
    )


def compiled_figures(
    mech: BLT, big: BLT, d: int, steps: int, B: int, draw_cpu: float, floor_cpu: float
) -> None:
    """Thread CPU time of one compiled loop per coordinate (numba): the vector step
    against drawing d normals and the batch noise against drawing T normals."""
    from numba import njit  # not a dependency of dpcount

    @njit(nogil=True)
    def step(q: np.ndarray, decay: np.ndarray, weight: np.ndarray, z: np.ndarray) -> None:
        n = q.shape[0] - 1  # z: one step's d values, q: (n + 1, d)
        for j in range(z.shape[0]):
            zj, acc = z[j], 0.0
            for i in range(n):
                v = q[i, j] * decay[i] + zj
                q[i, j] = v
                acc += weight[i] * v
            v = q[n, j] + zj
            q[n, j] = v
            z[j] = acc + weight[n] * v

    @njit(nogil=True)
    def steps_of(q: np.ndarray, decay: np.ndarray, weight: np.ndarray, z: np.ndarray) -> None:
        n = q.shape[0] - 1  # z: T scalar steps, q: (n + 1,)
        for t in range(z.shape[0]):
            zt, acc = z[t], 0.0
            for i in range(n):
                q[i] = q[i] * decay[i] + zt
                acc += weight[i] * q[i]
            q[n] += zt
            z[t] = acc + weight[n] * q[n]

    decay = np.append(mech.inverse.decay, 1.0)
    weight = np.append(mech.inverse.beta, mech.inverse.a)
    sigma = mech.sampler.sigma
    rng = np.random.default_rng(1)
    q = np.zeros((len(decay), d))
    process = mech.noise_process(
        NoiseSource.generator(mech.sampler, np.random.default_rng(1), d), d
    )
    for _ in range(3):  # compile, and check: the same floats as dpcount's step
        z = rng.standard_normal(d)
        z *= sigma
        step(q, decay, weight, z)
        assert np.array_equal(z, process.next()), "compiled step differs from dpcount's"
    cpu = np.empty(steps)
    for t in range(steps):
        start = time.thread_time()
        z = rng.standard_normal(d)
        z *= sigma
        step(q, decay, weight, z)
        cpu[t] = time.thread_time() - start
    bdecay = np.append(big.inverse.decay, 1.0)
    bweight = np.append(big.inverse.beta, big.inverse.a)

    def batch() -> None:
        z = np.random.default_rng(3).standard_normal(B)
        z *= big.sampler.sigma
        steps_of(np.zeros(len(bdecay)), bdecay, bweight, z)

    batch()
    batch_cpu = cpu_best_of(batch, 3)
    print(
        f"compiled loop (numba), CPU time: median step {np.median(cpu) / draw_cpu:.2f}× "
        f"drawing d normals; batch noise T = {B:,}: {batch_cpu / floor_cpu:.2f}× drawing T "
        "normals"
    )


def cpu_best_of(fn: Callable[[], object], repeats: int) -> float:
    """Smallest process CPU time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


if __name__ == "__main__":
    main()
