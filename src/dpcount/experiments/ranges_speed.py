"""Timing reproductions of correlated-input-perturbation (Dharangutte, Gao, Gong, Wang).

* ``cascade-speed`` (§4.1, Fig. 3): Cascade Sampling (Alg. 1) against
  ``scipy.stats.multivariate_normal`` with the dense C_k of Definition 3.1, and the
  log-log slopes of both.
* ``ranges-runtime`` (App. C.3, Fig. 8): seconds to build each mechanism, release a
  histogram and answer the workloads of Figs 4, 6 and 7.

Times are wall-clock on a shared machine (best of a few repeats where cheap); the
paper's were measured on an M1 laptop, so only ratios and slopes compare.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.experiments._framework import (
    Comparison,
    ExperimentConfig,
    ExperimentResult,
    figure,
    progress_iter,
    timed,
    write_csv,
)
from dpcount.experiments._ranges_common import (
    COLORS,
    DELTA,
    EPSILON,
    LABELS,
    MARKERS,
    eigen_limit,
    uniform_data,
)
from dpcount.ranges import (
    MECHANISMS,
    AllRanges,
    DenseWorkload,
    build_mechanism,
    cascade_sample,
    nodal_ranges,
    random_dense_queries,
)

__all__ = ["cascade_speed", "definition_3_1", "loglog_slope", "ranges_runtime"]

FloatArray = NDArray[np.float64]


def definition_3_1(k: int) -> FloatArray:
    """The dense C_k of Definition 3.1 (2^k × 2^k), for the scipy baseline.

    Unrolling the recursion, leaves i ≠ j whose labels first differ at bit p (counted
    from the least significant, p = ⌊log₂(i XOR j)⌋) have covariance −2^{−2p−1}; the
    diagonal is 1.
    """
    n = 1 << k
    idx = np.arange(n)
    _, exponent = np.frexp((idx[:, None] ^ idx[None, :]).astype(np.float64))
    cov = -np.ldexp(1.0, -2 * exponent + 1)  # frexp's exponent is p + 1
    np.fill_diagonal(cov, 1.0)
    return np.asarray(cov, dtype=np.float64)


def loglog_slope(sizes: Any, seconds: Any) -> float:
    """Least-squares slope of log(time) against log(n)."""
    return float(np.polyfit(np.log(np.asarray(sizes, float)), np.log(np.asarray(seconds)), 1)[0])


def _best_time(fn: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@timed
def cascade_speed(config: ExperimentConfig) -> ExperimentResult:
    """Fig. 3: Cascade Sampling vs scipy's multivariate normal (dense C_k), time vs n."""
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(config.seed)
    ours_k = list(range(3, 25 if config.quick else 27))
    # scipy factorizes the dense C_k (an O(n³) eigendecomposition) at every call. Its n
    # doubles until the next draw is predicted (8× the last: cubic) to exceed the time cap,
    # or C_k itself would exceed the memory cap (always up to 2^7, for a slope).
    time_cap = 2.0 if config.quick else 300.0
    memory_cap = 1 << 30  # bytes of the dense C_k (8n²): n ≤ 2^13
    # ours: below 2^22 (32 MiB of output, the L3 cache here) fixed costs and cache effects
    # dominate; the slope is fitted above, where every size streams through memory.
    fit_from = 2**22
    # Interleaved rounds over all sizes, best per size: a transient load on the shared
    # machine then slows one round of every size rather than a run of consecutive sizes.
    rounds = 3
    ours = dict.fromkeys((1 << k for k in ours_k), math.inf)
    for _ in progress_iter(range(rounds), "cascade-speed (ours)", config.show_progress):
        for n in ours:
            ours[n] = min(ours[n], _best_time(partial(cascade_sample, n, rng=rng), 1))
    scipy_times: dict[int, float] = {}
    stop_reason = ""
    k = 3
    while True:
        n = 1 << k
        if 8 * n * n > memory_cap:
            stop_reason = f"the dense C_k at n=2^{k} would exceed {memory_cap / 2**30:g} GiB"
            break
        if n > 2**7 and 8 * scipy_times[n // 2] > time_cap:
            stop_reason = (
                f"a draw at n=2^{k} is predicted to take {8 * scipy_times[n // 2]:.0f} s "
                f"> the {time_cap:g} s cap"
            )
            break
        cov = definition_3_1(k)
        start = time.perf_counter()
        multivariate_normal.rvs(mean=np.zeros(n), cov=cov, random_state=rng)
        scipy_times[n] = time.perf_counter() - start
        del cov
        k += 1
    rows = [[n, ours[n], scipy_times.get(n, float("nan"))] for n in sorted(ours)]
    csv_path = write_csv(
        config.out / "cascade-speed.csv", ["n", "cascade_seconds", "scipy_seconds"], rows
    )
    big = [n for n in ours if n >= fit_from]
    slope = loglog_slope(big, [ours[n] for n in big])
    slope_all = loglog_slope(list(ours), list(ours.values()))
    s_ns = sorted(scipy_times)
    s_fit = [n for n in s_ns if n >= 2**6][-4:]  # at least 2^6 and 2^7 (always run)
    scipy_slope = loglog_slope(s_fit, [scipy_times[n] for n in s_fit])
    coef = math.log(ours[big[-1]]) - slope * math.log(big[-1])

    def ours_at(n: int) -> tuple[float, str]:
        if n in ours:
            return ours[n], "measured"
        return math.exp(coef + slope * math.log(n)), "extrapolated from the fit (--quick)"

    def scipy_at(n: int) -> tuple[float, str]:
        if n in scipy_times:
            return scipy_times[n], "measured"
        last = s_ns[-1]
        t = scipy_times[last] * (n / last) ** 3
        return t, f"not run ({stop_reason}); n³-extrapolated from n=2^{int(math.log2(last))}"

    fig_path = config.out / "cascade-speed.png"
    with figure(fig_path, ncols=2, size=(6.0, 4.5)) as (fig, axes):
        lin, log = axes[0]
        ns = np.array(sorted(ours), dtype=float)
        for ax, upto in ((lin, s_ns[-1]), (log, ns[-1])):
            shown = ns[ns <= upto]
            ax.plot(
                shown,
                [ours[int(n)] for n in shown],
                "o-",
                ms=3,
                color="tab:red",
                label="Cascade Sampling (ours)",
            )
            ax.plot(
                s_ns,
                [scipy_times[n] for n in s_ns],
                "s-",
                ms=3,
                color="tab:blue",
                label="scipy multivariate_normal (dense C_k)",
            )
            ax.set_xlabel("n (dimension)")
            ax.set_ylabel("seconds per draw")
            ax.grid(True, alpha=0.3)
        lin.set_title("original scale, up to scipy's largest n", fontsize=9)
        log.set_xscale("log", base=2)
        log.set_yscale("log")
        fit_n = np.array(big, dtype=float)
        log.plot(
            fit_n,
            np.exp(coef) * fit_n**slope,
            "k--",
            lw=1,
            label=f"fit n ≥ 2^22: slope {slope:.3f}",
        )
        log.set_title(f"log-log; scipy slope {scipy_slope:.2f} (top points)", fontsize=9)
        log.legend(fontsize=8)
        lin.legend(fontsize=8)
        fig.suptitle("Sampling N(0, C_k): Cascade Sampling vs scipy (Fig. 3)", fontsize=10)
    t17, how17 = ours_at(2**17)
    t25, how25 = ours_at(2**25)
    s14, how14 = scipy_at(2**14)
    s15, how15 = scipy_at(2**15)
    common = [n for n in s_ns if n in ours]
    speedup = min(scipy_times[n] / ours[n] for n in common)
    comparisons = [
        Comparison("Cascade Sampling, n=2^17 (s)", "< 1", round(t17, 4), how17),
        Comparison("Cascade Sampling, n=2^25 (s)", "< 540", round(t25, 3), how25),
        Comparison(
            "log-log slope of Cascade Sampling time",
            1.05,
            round(slope, 3),
            f"fit over n ≥ 2^22 (paper: all n ≥ 8); over all our n: {slope_all:.3f} "
            "(fixed costs dominate small n)",
        ),
        Comparison("scipy, n=2^14 (s)", "> 1680", round(s14, 1), how14),
        Comparison("scipy, n=2^15 (s)", "> 10800", round(s15, 1), how15),
        Comparison(
            "scipy / Cascade time, smallest over common n",
            "> 1 ('consistently longer')",
            round(speedup, 2),
            f"common n = 2^3..2^{int(math.log2(common[-1]))}",
        ),
    ]
    return ExperimentResult(
        name="cascade-speed",
        title="Fig. 3: Cascade Sampling vs scipy's multivariate normal",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "slope_ours": slope,
            "slope_ours_all": slope_all,
            "slope_scipy": scipy_slope,
            "scipy_n_max": float(s_ns[-1]),
            "ours_n_max": float(max(ours)),
            "min_speedup": speedup,
            "seconds_2^17": t17,
        },
        notes=[
            f"ours: best of {rounds} interleaved rounds over all n; scipy: one draw per n (the "
            f"factorization of C_k is part of every call), C_k built beforehand (not timed); "
            f"scipy stopped: "
            f"{stop_reason}",
        ],
    )


# ---- ranges-runtime (App. C.3, Fig. 8) -----------------------------------------------------


def _workloads(n: int, rng: np.random.Generator) -> dict[str, Any]:
    """The three workloads of Figs 4, 6, 7 at n (ranges: the paper's 5000 sampled ones)."""
    lo, hi = AllRanges(n).sample(5000, rng)
    nodes = nodal_ranges(n)
    rows = max(1, (1 << 22) // n)
    blocks = [
        random_dense_queries(n, min(rows, 2500 - s), rng).weights for s in range(0, 2500, rows)
    ]
    return {"ranges": (lo, hi), "nodes": (nodes.lo, nodes.hi), "random": blocks}


@timed
def ranges_runtime(config: ExperimentConfig) -> ExperimentResult:
    """App. C.3 (Fig. 8): seconds to build, release and answer each workload, per mechanism."""
    rng = np.random.default_rng(config.seed)
    sizes = [2**6, 2**8, 2**10] if config.quick else [2**6, 2**8, 2**10, 2**12, 2**14]
    rows: list[list[Any]] = []
    total: dict[tuple[str, int, str], float] = {}
    own: dict[tuple[str, int, str], float] = {}  # build + release: the mechanism's own cost
    tasks = [(n, w) for n in sizes for w in ("ranges", "nodes", "random")]
    data = {n: uniform_data(n, rng) for n in sizes}
    loads = {n: _workloads(n, rng) for n in sizes}
    for n, wname in progress_iter(tasks, "ranges-runtime", config.show_progress):
        load = loads[n][wname]
        for name in MECHANISMS:
            if name == "eigen" and n > eigen_limit(config):
                continue
            options: dict[str, Any] = {}
            if name == "eigen":
                options["workload"] = (
                    None
                    if wname == "ranges"
                    else nodal_ranges(n)
                    if wname == "nodes"
                    else _dense(load)
                )
            best = (math.inf, math.inf, math.inf)
            spent = 0.0
            for _ in range(7):  # best of up to 7 repeats, while they take < 0.5 s in all
                t0 = time.perf_counter()
                m = build_mechanism(name, n, EPSILON, DELTA, rng=rng, **options)
                t1 = time.perf_counter()
                release = m.release(data[n])
                t2 = time.perf_counter()
                if wname == "random":
                    for block in load:
                        release.answer(block)  # type: ignore[attr-defined]
                else:
                    release.query(*load)
                t3 = time.perf_counter()
                times = (t1 - t0, t2 - t1, t3 - t2)
                if sum(times) < sum(best):
                    best = times
                spent += sum(times)
                if spent > 0.5:
                    break
            total[(wname, n, name)] = sum(best)
            own[(wname, n, name)] = best[0] + best[1]
            rows.append([wname, n, name, *best, sum(best)])
    csv_path = write_csv(
        config.out / "ranges-runtime.csv",
        ["workload", "n", "mechanism", "build_s", "release_s", "answer_s", "total_s"],
        rows,
    )
    fig_path = config.out / "ranges-runtime.png"
    wnames = ("ranges", "nodes", "random")
    titles = {
        "ranges": "5000 sampled ranges (Fig. 4)",
        "nodes": "2n − 1 node queries (Fig. 6)",
        "random": "2500 random dense queries (Fig. 7)",
    }
    with figure(fig_path, ncols=3, size=(5.0, 4.3)) as (fig, axes):
        for ax, wname in zip(axes[0], wnames, strict=True):
            for name in MECHANISMS:
                pts = [(n, total[(wname, n, name)]) for n in sizes if (wname, n, name) in total]
                ax.plot(
                    *zip(*pts, strict=True),
                    "-",
                    marker=MARKERS[name],
                    ms=4,
                    color=COLORS[name],
                    label=LABELS[name],
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("n")
            ax.set_ylabel("seconds (build + release + answer)")
            ax.set_title(titles[wname], fontsize=9)
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.suptitle("Runtime per mechanism and workload (App. C.3, Fig. 8)", fontsize=10)
    configs = sorted({(w, n) for (w, n, _) in total})
    fastest = [
        min((total[(w, n, m)], m) for m in MECHANISMS if (w, n, m) in total)[1] for w, n in configs
    ]
    fast_share = sum(m in ("identity", "wavelet") for m in fastest) / len(fastest)
    big = sizes[-1]

    # Answering is the same product W·values for every consistent mechanism; the
    # mechanisms differ in building and releasing the noisy histogram (median over the
    # three workloads' independent timings).
    def own_median(name: str) -> float:
        return float(np.median([own[(w, big, name)] for w in wnames]))

    hier_over_ours = own_median("hierarchical") / own_median("correlated")
    ours_over_fast = own_median("correlated") / min(own_median("identity"), own_median("wavelet"))
    eig_configs = [(w, n) for w, n in configs if (w, n, "eigen") in total]
    eig_slowest = sum(
        max((total[(w, n, m)], m) for m in MECHANISMS if (w, n, m) in total)[1] == "eigen"
        for w, n in eig_configs
    ) / max(1, len(eig_configs))
    k_big = int(math.log2(big))
    comparisons = [
        Comparison(
            "share of configurations where Gaussian or Wavelet is fastest",
            "'typically the fastest'",
            round(fast_share, 3),
            f"{len(configs)} configurations (3 workloads × {len(sizes)} n)",
        ),
        Comparison(
            f"ours / faster of Gaussian, Wavelet at n=2^{k_big}",
            "'competitive'",
            round(ours_over_fast, 2),
            "build + release seconds (answering W·values is common to all)",
        ),
        Comparison(
            f"Hierarchical / ours at n=2^{k_big}",
            "> 1 (ours faster)",
            round(hier_over_ours, 2),
            "build + release seconds",
        ),
        Comparison(
            "share of configurations with EigenDesign where it is slowest",
            "'typically the longest'",
            round(eig_slowest, 3),
            f"{len(eig_configs)} configurations (n ≤ {eigen_limit(config)})",
        ),
    ]
    return ExperimentResult(
        name="ranges-runtime",
        title="App. C.3 (Fig. 8): runtime of the mechanisms per workload",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "fast_share": fast_share,
            "hier_over_ours": hier_over_ours,
            "ours_over_fast": ours_over_fast,
            "eigen_slowest_share": eig_slowest,
            "configurations": float(len(configs)),
        },
        notes=[
            "each time is the best of up to 7 repeats of build (calibration; EigenDesign: "
            "its eigen-strategy for the workload) + release of uniform data + answering the "
            "workload; the paper states no numbers for Fig. 8, only these orderings",
        ],
    )


def _dense(blocks: list[FloatArray]) -> DenseWorkload:
    return DenseWorkload(np.concatenate(blocks))
