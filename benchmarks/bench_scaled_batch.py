"""Batch release of every BLT variant as a multiple of drawing the normals (issue 33 item 3).

For ``blt``, ``normalized-blt`` and ``row-scaled-blt`` with their shipped parameters
(objective "mean" and "max") at each horizon (default 2^16, 2^17, 2^18 and 2^20; ``--T``
takes horizons that are not powers of two, e.g. 10^7; those above a mechanism's largest
horizon are skipped: the scaled presets' float-model limit is 2^24) and each
step width (scalar, and ``--dims`` vector widths), prints:

* build: CPU time of ``optimized(T)`` plus the first release (the per-horizon tables
  computed there and kept: column weights, row weights, chunk matrices) — one-time;
* release: the least and the median process CPU time and wall-clock time of
  ``release(zeros)`` over ``--repeats``, interleaved with drawing the same number of
  normals (``rng.standard_normal(T·d)``, the floor, least and median likewise), and the
  ratios release ÷ floor (least/least and median/median) of each clock. The bar: ≤ 2.5×
  for every variant, least and median, process CPU and wall; a last table gives each
  variant's worst ratios.

Process CPU time counts every thread of the process (an OpenBLAS worker spinning after
a threaded product too: ~0.1 s of it followed a scaled BLT's build at 2^17 before its
long products were cut into single-threaded blocks, ``blt._long_times``; the column
"other threads" gives their CPU time over the timed repeats, Linux only); wall-clock
counts the time other users' work takes the core. The development machine is shared
(2 cores, ~8 users): ratios are from the same run only. The releases measured are a
long-running process's: ``scipy.signal`` is imported first (:mod:`dpcount._scipy` runs
short first-order filters in Python until 2^18 steps in a process, then scipy's C; the
plain BLT's filters across its chunks measured ~6× instead of ~2.8× at 2^16 while in
Python).

``--digests FILE`` writes sha256 digests of seeded releases of both scaled presets
(module :func:`digests`: batch releases scalar and vector, whole and partial, at the
accurate and the plain horizons, and streams); ``--compare BEFORE AFTER`` compares two
such files (run ``--digests`` with ``PYTHONPATH`` at each tree's ``src``): a speed
change must leave every released value bit-identical.

``--stages NAME:log2T[:DIM]`` prints instead the least process CPU time of each stage of
a release over ``--repeats`` as multiples of the floor (indented stages are parts of the
one above them; log2T above 40 is T itself, e.g. ``blt:10000000:4``). A scaled preset:
the draw, w = G z in chunks, the buffers across the chunks, the running sum, the
triangular products within the chunks (parts of both w = G z and the running sum), the
vector sums moved into the (T, d) output; in the long forms w = G z as pairs, the
buffers across the levels of chunks and e·w by TwoProduct; adding the data's sums with
the float-safe snap and the snap alone, the input check, the noise source and process.
``blt``: the draw, the noise from it (its scalar or vector chunks; of the vector chunks
the filters across the chunks and the three products; the rest of them is moving the
steps into rows and the noise back into the (T, d) output), the sums and the snap.

Run: ``PYTHONPATH=src python benchmarks/bench_scaled_batch.py [--horizons 16 17]
[--T 10000000] [--names blt normalized-blt] [--dims 4] [--repeats 7]
[--profile NAME:log2T:OBJECTIVE] [--stages NAME:log2T:DIM] [--digests FILE]
[--compare BEFORE AFTER]``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import scipy.signal  # noqa: F401  # a long-running process's filters (module docstring)

from dpcount.counting.factorization.blt import BLT
from dpcount.counting.factorization.normalized_blt import NormalizedBLT
from dpcount.counting.factorization.row_scaled_blt import RowScaledBLT
from dpcount.privacy import Budget

CLASSES = {"blt": BLT, "normalized-blt": NormalizedBLT, "row-scaled-blt": RowScaledBLT}
#: the classes ``--stages`` times (their noise process's own stages)
SCALED = ("normalized-blt", "row-scaled-blt")
BAR = 2.5


def _cpu(f: object) -> float:
    start = time.process_time()
    f()  # type: ignore[operator]
    return time.process_time() - start


def _other_threads() -> float:
    """CPU seconds of this process's threads other than the main one (Linux
    /proc/self/task/*/schedstat; 0 elsewhere): OpenBLAS's worker, when a product was
    threaded or it still spins after one (~0.1 s)."""
    total = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            if int(tid) != os.getpid():
                total += int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
    except OSError:
        return 0.0
    return total * 1e-9


def _both(f: object) -> tuple[float, float]:
    """(process CPU, wall-clock) seconds of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    f()  # type: ignore[operator]
    return time.process_time() - cpu, time.perf_counter() - wall


def _horizon(text: str) -> int:
    """A ``--stages`` horizon: log2 T (up to 40), else T itself (10000000)."""
    value = int(text)
    return 1 << value if value <= 40 else value


def _label(T: int) -> str:
    """2^k for a power of two, else T itself (``--T``)."""
    return f"2^{T.bit_length() - 1}" if T & (T - 1) == 0 else str(T)


def measure(
    name: str, T: int, objective: str, dim: int | None, repeats: int
) -> tuple[str, tuple[float, float, float, float] | None]:
    """The report line and the ratios (least, median) of process CPU, then of
    wall-clock (None: refused)."""
    cls = CLASSES[name]
    shape = (T,) if dim is None else (T, dim)
    zeros = np.zeros(shape)
    rng = np.random.default_rng(3)
    start = time.process_time()
    try:
        mech = cls.optimized(T, objective=objective, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
    except ValueError as err:  # a horizon above the mechanism's largest
        return f"{name:<15} T={_label(T)}: refused ({str(err)[:60]}...), skipped", None
    mech.release(zeros)
    build = time.process_time() - start
    hot, floor = [], []
    threads = _other_threads()
    for _ in range(repeats):
        floor.append(_both(lambda: rng.standard_normal(shape)))
        hot.append(_both(lambda: mech.release(zeros)))
    threads = _other_threads() - threads
    h, f = np.array(hot), np.array(floor)  # columns: process CPU, wall-clock
    lo = h.min(axis=0) / f.min(axis=0)
    med = np.median(h, axis=0) / np.median(f, axis=0)
    ok = "met" if max(lo.max(), med.max()) <= BAR else "NOT met"
    width = "scalar" if dim is None else f"d={dim}"
    line = (
        f"{name:<15} {objective:<4} T={_label(T):<4} {width:<6} build+first "
        f"{build:5.2f} s | release min {h[:, 0].min() * 1e3:6.2f} ms med "
        f"{np.median(h[:, 0]) * 1e3:6.2f} ms | floor min {f[:, 0].min() * 1e3:6.2f} ms | "
        f"cpu ratio min {lo[0]:.2f}x med {med[0]:.2f}x | wall min {lo[1]:.2f}x "
        f"med {med[1]:.2f}x | other threads {threads * 1e3:.0f} ms ({ok})"
    )
    return line, (float(lo[0]), float(med[0]), float(lo[1]), float(med[1]))


def profile(spec: str) -> None:
    name, k, objective = spec.split(":")
    T = 1 << int(k)
    mech = CLASSES[name].optimized(T, objective=objective, budget=Budget(epsilon=1.0, delta=1e-6))
    zeros = np.zeros(T)
    mech.release(zeros)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3):
        mech.release(zeros)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


def stages(spec: str, repeats: int) -> None:
    """The least CPU time of each stage of a release (module docstring), × the floor."""
    import collections

    import dpcount.counting._steps as steps
    import dpcount.counting.base as base
    from dpcount.counting.factorization import blt
    from dpcount.counting.factorization import normalized_blt as nb
    from dpcount.privacy.source import NoiseSource

    name, k, *rest = spec.split(":")
    if name not in CLASSES:
        raise SystemExit(f"--stages times a release's stages: one of {list(CLASSES)}")
    T, dim = _horizon(k), int(rest[0]) if rest else None
    spent: dict[str, float] = collections.defaultdict(float)

    def timed(owner: object, attr: str, label: str) -> None:
        inner = getattr(owner, attr)

        def call(*args: object, **kwargs: object) -> object:
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] += time.process_time() - start

        setattr(owner, attr, call)

    Stage = tuple[object, str, str]
    # printed in this order; indented stages are parts of the one above
    head: tuple[Stage, ...] = (
        (base, "check_stream_array", "input check"),
        (NoiseSource, "generator", "noise source"),
        (CLASSES[name], "noise_process", "noise process"),
    )
    tail: tuple[Stage, ...] = (
        (base, "add_running_sums", "sums + float-safe snap"),
        (steps, "_combine", "  float-safe snap"),
    )
    process = nb.NormalizedBLTNoiseProcess
    middle: tuple[Stage, ...] = (
        (process, "_compute", "noise (all)"),
        (process, "_draw", "  draw (+ row weights)"),
        (process, "_chunked_w", "  w = G z (scalar)"),
        (process, "_vector_block", "  vector block (all)"),
        (process, "_long_w", "  w = G z (long forms)"),
        (nb, "across_levels", "    buffers across levels"),
        (nb, "_add_product_error", "  e·w TwoProduct (long forms)"),
        (nb, "across_chunks", "    buffers across chunks"),
        (nb, "_block_sums", "    running sum"),
        (nb, "_upper_times", "    triangular products (both)"),
        (nb, "_copy_transposed", "    sums into (T, d)"),
    )
    if name == "blt":  # the plain BLT's process: chunks, filters across them, products
        plain = blt.BLTNoiseProcess
        middle = (
            (NoiseSource, "sample", "draw"),
            (plain, "_fill", "noise from the draws (all)"),
            (plain, "_scalar_chunks", "  scalar chunks"),
            (plain, "_vector_chunks", "  vector chunks (all)"),
            (blt._Recursion, "run", "    buffers across chunks"),
            (blt, "_rows_times", "    products (rows·Pᵀ, rows·Bᵀ, prev·Fᵀ)"),
        )
    table = head + middle + tail
    for owner, attr, label in table:
        if hasattr(owner, attr):  # (an older tree may lack a stage)
            timed(owner, attr, label)
    shape = (T,) if dim is None else (T, dim)
    mech = CLASSES[name].optimized(T, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
    zeros = np.zeros(shape)
    mech.release(zeros)
    rng = np.random.default_rng(3)
    best: dict[str, float] = collections.defaultdict(lambda: float("inf"))
    for _ in range(repeats):
        best["floor"] = min(best["floor"], _cpu(lambda: rng.standard_normal(shape)))
        spent.clear()
        spent["release (all)"] = _cpu(lambda: mech.release(zeros))
        for label, value in spent.items():
            best[label] = min(best[label], value)
    floor = best.pop("floor")
    print(f"{name} T={_label(T)} dim={dim}: floor {floor * 1e3:.3f} ms, load {os.getloadavg()}")
    for label in [row[2] for row in table] + ["release (all)"]:
        if label in best:
            value = best[label]
            print(f"  {label:<30} {value * 1e3:8.3f} ms {value / floor:6.2f}x")


def _digest(a: object) -> str:
    arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    return hashlib.sha256(arr.tobytes()).hexdigest()[:20]


def _preset_digests(out: dict[str, str], name: str, objective: str, seed: int) -> None:
    """Batch releases (scalar steps of zeros, 0/1, fractional and large whole numbers;
    a partial release; vector steps) and streams of one preset, 3 seeds."""
    cls = CLASSES[name]
    r = np.random.default_rng(100 + seed)
    budget = Budget(epsilon=1.0, delta=1e-6)
    horizons = [1000, 1 << 15, (1 << 15) + 7, 32800, 40000, 1 << 16]  # 32800: 1025 chunks
    if name == "row-scaled-blt":
        horizons += [(1 << 16) + 33, 1 << 17]
    for T in horizons:
        m = cls.optimized(T, objective=objective, budget=budget, rng=seed)
        key = f"{name} {objective} T={T} s{seed}"
        for kind, x in (
            ("zeros", np.zeros(T)),
            ("bits", r.integers(0, 2, T).astype(float)),
            ("frac", r.normal(0, 1, T)),
            ("big", np.concatenate([[2.0**50], r.integers(-3, 4, T - 1).astype(float)])),
            ("partial", r.integers(0, 3, T - T // 3 - 5).astype(float)),
        ):
            out[f"{key} batch {kind}"] = _digest(m.release(x))
        for d in (1, 4, 8) if T in (1000, 1 << 16, 1 << 17) else (3,):
            vec = r.integers(-1, 3, (T - 17, d)).astype(float)
            out[f"{key} batch d={d}"] = _digest(m.release(vec))
        if T in (40000, 1 << 16):
            s = m.stream()
            vals = [s.update(float(v)) for v in r.integers(0, 3, 5000)]
            vals += list(s.update_many(r.normal(0, 1, 9000)))
            out[f"{key} stream"] = _digest(vals)


def digests() -> dict[str, str]:
    """Every digest of :func:`_preset_digests`, keyed by what was released."""
    out: dict[str, str] = {}
    for name in SCALED:
        for objective in ("mean", "max"):
            for seed in (1, 2, 3):
                _preset_digests(out, name, objective, seed)
    return out


def compare(before: str, after: str) -> None:
    old, new = (json.loads(Path(f).read_text()) for f in (before, after))
    differ = sorted(k for k in old if old[k] != new.get(k))
    print(f"{len(old)} digests compared, {len(differ)} differ")
    for key in differ:
        print("  differs:", key)
    sys.exit(1 if differ or set(old) != set(new) else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="+", help="log2 T (default 16 17 18 20)")
    parser.add_argument("--T", type=int, nargs="+", default=[], help="horizons (10000000)")
    parser.add_argument("--dims", type=int, nargs="*", default=[4])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--objectives", nargs="+", default=["mean", "max"])
    parser.add_argument("--names", nargs="+", default=list(CLASSES))
    parser.add_argument("--profile", help="NAME:log2T:OBJECTIVE: cProfile 3 releases instead")
    parser.add_argument("--stages", help="NAME:log2T[:DIM]: each stage's least time instead")
    parser.add_argument("--digests", metavar="FILE", help="write release digests instead")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    opts = parser.parse_args()
    if opts.compare:
        compare(*opts.compare)
        return
    if opts.digests:
        found = digests()
        Path(opts.digests).write_text(json.dumps(found, indent=0, sort_keys=True))
        print(f"{len(found)} digests")
        return
    if opts.profile:
        profile(opts.profile)
        return
    if opts.stages:
        stages(opts.stages, opts.repeats)
        return
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores", flush=True)
    worst: dict[str, list[float]] = {}
    logs = opts.horizons if opts.horizons is not None else [] if opts.T else [16, 17, 18, 20]
    for T in [1 << k for k in logs] + opts.T:
        for name in opts.names:
            for objective in opts.objectives:
                for dim in (None, *opts.dims):
                    line, ratio = measure(name, T, objective, dim, opts.repeats)
                    print(line, flush=True)
                    if ratio is not None:
                        w = worst.setdefault(name, [0.0] * 4)
                        w[:] = [max(a, b) for a, b in zip(w, ratio, strict=True)]
    print(f"load average at end: {os.getloadavg()}")
    for name, (lo, med, wlo, wmed) in worst.items():
        ok = "met" if max(lo, med, wlo, wmed) <= BAR else "NOT met"
        print(
            f"{name:<15} worst ratio: cpu min {lo:.2f}x med {med:.2f}x, wall min {wlo:.2f}x "
            f"med {wmed:.2f}x: bar {BAR}x {ok}"
        )


if __name__ == "__main__":
    main()
