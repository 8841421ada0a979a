"""Timing reproductions of correlated-input-perturbation (Dharangutte, Gao, Gong, Wang).

* ``cascade-speed`` (§4.1, Fig. 3): Cascade Sampling (Alg. 1) against
  ``scipy.stats.multivariate_normal`` with the dense C_k of Definition 3.1, and the
  log-log slopes of both.
* ``ranges-runtime`` (App. C.3, Fig. 8): seconds to build each mechanism, release a
  histogram and answer the workloads of Figs 4, 6 and 7.

Times are wall-clock on a shared machine (best of a few repeats where cheap); the
paper's were measured on an M1 laptop, so only ratios and slopes compare.

References:
    [references: dggw24]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dpcount.experiments._framework import (
    Comparison,
    ExperimentConfig,
    Summary,
    comparisons,
    write_csv,
)
from dpcount.experiments._plotting import figure, label_axes, legend
from dpcount.experiments._ranges_common import (
    COLORS,
    DELTA,
    EPSILON,
    LABELS,
    MARKERS,
    FloatArray,
    eigen_limit,
    uniform_data,
)
from dpcount.privacy._statements import cite
from dpcount.ranges import (
    MECHANISMS,
    AllRanges,
    DenseWorkload,
    build_mechanism,
    cascade_sample,
    nodal_ranges,
    random_dense_queries,
)

__doc__ = cite(__doc__)

__all__ = [
    "CascadeSpeed",
    "RangesRuntime",
    "compute_cascade_speed",
    "compute_ranges_runtime",
    "definition_3_1",
    "loglog_slope",
]


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


@dataclass(frozen=True)
class CascadeSpeed:
    """Seconds per draw of N(0, C_k) by n: Cascade Sampling (``ours``) and scipy."""

    ours: dict[int, float]
    scipy: dict[int, float]
    stop_reason: str  # why scipy's sizes stopped
    rounds: int
    fit_from: int  # our slope is fitted over n ≥ fit_from

    @property
    def big(self) -> list[int]:
        return [n for n in self.ours if n >= self.fit_from]

    @property
    def slope(self) -> float:
        return loglog_slope(self.big, [self.ours[n] for n in self.big])

    @property
    def coef(self) -> float:
        """Intercept of the fit: log t = coef + slope·log n."""
        last = self.big[-1]
        return math.log(self.ours[last]) - self.slope * math.log(last)

    @property
    def scipy_slope(self) -> float:
        s_fit = [n for n in sorted(self.scipy) if n >= 2**6][-4:]  # ≥ 2^6, 2^7 (always run)
        return loglog_slope(s_fit, [self.scipy[n] for n in s_fit])

    def ours_at(self, n: int) -> tuple[float, str]:
        if n in self.ours:
            return self.ours[n], "measured"
        t = math.exp(self.coef + self.slope * math.log(n))
        return t, "extrapolated from the fit (--quick)"

    def scipy_at(self, n: int) -> tuple[float, str]:
        if n in self.scipy:
            return self.scipy[n], "measured"
        last = max(self.scipy)
        t = self.scipy[last] * (n / last) ** 3
        return t, f"not run ({self.stop_reason}); n³-extrapolated from n=2^{int(math.log2(last))}"


def _scipy_times(time_cap: float, rng: np.random.Generator) -> tuple[dict[int, float], str]:
    """scipy's seconds per draw, n = 2^3, 2^4, ... while the caps allow; and why it stopped.

    scipy factorizes the dense C_k (an O(n³) eigendecomposition) at every call. Its n
    doubles until the next draw is predicted (8× the last: cubic) to exceed the time cap,
    or C_k itself would exceed the memory cap (always up to 2^7, for a slope).
    """
    from scipy.stats import multivariate_normal

    memory_cap = 1 << 30  # bytes of the dense C_k (8n²): n ≤ 2^13
    times: dict[int, float] = {}
    k = 3
    while True:
        n = 1 << k
        if 8 * n * n > memory_cap:
            return times, f"the dense C_k at n=2^{k} would exceed {memory_cap / 2**30:g} GiB"
        if n > 2**7 and 8 * times[n // 2] > time_cap:
            return times, (
                f"a draw at n=2^{k} is predicted to take {8 * times[n // 2]:.0f} s "
                f"> the {time_cap:g} s cap"
            )
        cov = definition_3_1(k)
        start = time.perf_counter()
        multivariate_normal.rvs(mean=np.zeros(n), cov=cov, random_state=rng)
        times[n] = time.perf_counter() - start
        del cov
        k += 1


def compute_cascade_speed(config: ExperimentConfig) -> CascadeSpeed:
    """Fig. 3's timings: ours for n = 2^3..2^26 (--quick: 2^24), scipy while it is feasible."""
    rng = np.random.default_rng(config.seed)
    ours_k = list(range(3, 25 if config.quick else 27))
    # Interleaved rounds over all sizes, best per size: a transient load on the shared
    # machine then slows one round of every size rather than a run of consecutive sizes.
    rounds = 3
    ours = dict.fromkeys((1 << k for k in ours_k), math.inf)
    for _ in config.progress(range(rounds), "cascade-speed (ours)"):
        for n in ours:
            ours[n] = min(ours[n], _best_time(partial(cascade_sample, n, rng=rng), 1))
    scipy_times, stop_reason = _scipy_times(2.0 if config.quick else 300.0, rng)
    # ours: below 2^22 (32 MiB of output, the L3 cache here) fixed costs and cache effects
    # dominate; the slope is fitted above, where every size streams through memory.
    return CascadeSpeed(ours, scipy_times, stop_reason, rounds, fit_from=2**22)


def plot_cascade_speed(r: CascadeSpeed, path: Path) -> None:
    """Seconds per draw against n: original scale up to scipy's n, and log-log with the fit."""
    title = "correlated-input-perturbation Fig. 3: sampling N(0, C_k), Cascade Sampling vs scipy"
    s_ns = sorted(r.scipy)
    ns = np.array(sorted(r.ours), dtype=float)
    with figure(path, ncols=2, size=(6.0, 4.5), title=title) as (_, axes):
        lin, log = axes[0]
        for ax, upto in ((lin, s_ns[-1]), (log, ns[-1])):
            shown = ns[ns <= upto]
            ours = [r.ours[int(n)] for n in shown]
            ax.plot(shown, ours, "o-", ms=3, color="tab:red", label="Cascade Sampling (ours)")
            ax.plot(
                s_ns,
                [r.scipy[n] for n in s_ns],
                "s-",
                ms=3,
                color="tab:blue",
                label="scipy multivariate_normal (dense C_k)",
            )
        log.set_xscale("log", base=2)
        log.set_yscale("log")
        fit_n = np.array(r.big, dtype=float)
        fit_label = f"fit n ≥ 2^22: slope {r.slope:.3f}"
        log.plot(fit_n, np.exp(r.coef) * fit_n**r.slope, "k--", lw=1, label=fit_label)
        for ax, panel in (
            (lin, "original scale, up to scipy's largest n"),
            (log, f"log-log; scipy slope {r.scipy_slope:.2f} (top points)"),
        ):
            label_axes(
                ax, xlabel="n (dimension)", ylabel="seconds per draw", title=panel, grid=True
            )
            legend(ax, "best", fontsize=8)


def _cascade_speed_comparisons(r: CascadeSpeed) -> list[Comparison]:
    t17, how17 = r.ours_at(2**17)
    t25, how25 = r.ours_at(2**25)
    s14, how14 = r.scipy_at(2**14)
    s15, how15 = r.scipy_at(2**15)
    common = [n for n in sorted(r.scipy) if n in r.ours]
    slope_all = loglog_slope(list(r.ours), list(r.ours.values()))
    return [
        Comparison("Cascade Sampling, n=2^17 (s)", "< 1", round(t17, 4), how17),
        Comparison("Cascade Sampling, n=2^25 (s)", "< 540", round(t25, 3), how25),
        Comparison(
            "log-log slope of Cascade Sampling time",
            1.05,
            round(r.slope, 3),
            f"fit over n ≥ 2^22 (paper: all n ≥ 8); over all our n: {slope_all:.3f} "
            "(fixed costs dominate small n)",
        ),
        Comparison("scipy, n=2^14 (s)", "> 1680", round(s14, 1), how14),
        Comparison("scipy, n=2^15 (s)", "> 10800", round(s15, 1), how15),
        Comparison(
            "scipy / Cascade time, smallest over common n",
            "> 1 ('consistently longer')",
            round(min(r.scipy[n] / r.ours[n] for n in common), 2),
            f"common n = 2^3..2^{int(math.log2(common[-1]))}",
        ),
    ]


def write_cascade_speed(r: CascadeSpeed, out: Path) -> Path:
    rows = [[n, r.ours[n], r.scipy.get(n, float("nan"))] for n in sorted(r.ours)]
    header = ["n", "cascade_seconds", "scipy_seconds"]
    return write_csv(out / "cascade-speed.csv", header, rows)


def summarize_cascade_speed(r: CascadeSpeed) -> Summary:
    common = [n for n in sorted(r.scipy) if n in r.ours]
    return Summary(
        comparisons=_cascade_speed_comparisons(r),
        key={
            "slope_ours": r.slope,
            "slope_ours_all": loglog_slope(list(r.ours), list(r.ours.values())),
            "slope_scipy": r.scipy_slope,
            "scipy_n_max": float(max(r.scipy)),
            "ours_n_max": float(max(r.ours)),
            "min_speedup": min(r.scipy[n] / r.ours[n] for n in common),
            "seconds_2^17": r.ours_at(2**17)[0],
        },
        notes=[
            f"ours: best of {r.rounds} interleaved rounds over all n; scipy: one draw per n (the "
            "factorization of C_k is part of every call), C_k built beforehand (not timed); "
            f"scipy stopped: {r.stop_reason}",
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


@dataclass(frozen=True)
class RangesRuntime:
    """Best-of-repeats seconds per (workload, n, mechanism): build, release, answer."""

    sizes: tuple[int, ...]
    eigen_limit: int
    times: dict[tuple[str, int, str], tuple[float, float, float]]

    def total(self, key: tuple[str, int, str]) -> float:
        return sum(self.times[key])

    def own(self, key: tuple[str, int, str]) -> float:
        """Build + release: the mechanism's own cost (answering is common to all)."""
        build, release, _ = self.times[key]
        return build + release


_WORKLOADS = ("ranges", "nodes", "random")


def _time_once(
    name: str, n: int, wname: str, load: Any, x: FloatArray, options: dict[str, Any],
    rng: np.random.Generator,
) -> tuple[float, float, float]:  # fmt: skip
    """Seconds to build the mechanism, release x and answer the workload, once."""
    t0 = time.perf_counter()
    m = build_mechanism(name, n, epsilon=EPSILON, delta=DELTA, rng=rng, **options)
    t1 = time.perf_counter()
    release = m.release(x)
    t2 = time.perf_counter()
    if wname == "random":
        for block in load:
            release.answer(block)  # type: ignore[attr-defined]
    else:
        release.query(*load)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2)


def _eigen_options(n: int, wname: str, load: Any) -> dict[str, Any]:
    """EigenDesign's workload: all ranges (None), the node queries or the dense queries."""
    if wname == "ranges":
        return {"workload": None}
    return {"workload": nodal_ranges(n) if wname == "nodes" else _dense(load)}


def compute_ranges_runtime(config: ExperimentConfig) -> RangesRuntime:
    """App. C.3's timings: best of up to 7 repeats while they take < 0.5 s in all."""
    rng = np.random.default_rng(config.seed)
    sizes = [2**6, 2**8, 2**10] if config.quick else [2**6, 2**8, 2**10, 2**12, 2**14]
    times: dict[tuple[str, int, str], tuple[float, float, float]] = {}
    tasks = [(n, w) for n in sizes for w in _WORKLOADS]
    data = {n: uniform_data(n, rng) for n in sizes}
    loads = {n: _workloads(n, rng) for n in sizes}
    for n, wname in config.progress(tasks, "ranges-runtime"):
        load = loads[n][wname]
        for name in MECHANISMS:
            if name == "eigen" and n > eigen_limit(config):
                continue
            options = _eigen_options(n, wname, load) if name == "eigen" else {}
            best = (math.inf, math.inf, math.inf)
            spent = 0.0
            for _ in range(7):
                once = _time_once(name, n, wname, load, data[n], options, rng)
                if sum(once) < sum(best):
                    best = once
                spent += sum(once)
                if spent > 0.5:
                    break
            times[(wname, n, name)] = best
    return RangesRuntime(tuple(sizes), eigen_limit(config), times)


def write_ranges_runtime(r: RangesRuntime, out: Path) -> Path:
    rows = [[w, n, m, *t, sum(t)] for (w, n, m), t in r.times.items()]
    header = ["workload", "n", "mechanism", "build_s", "release_s", "answer_s", "total_s"]
    return write_csv(out / "ranges-runtime.csv", header, rows)


def plot_ranges_runtime(r: RangesRuntime, path: Path) -> None:
    """Total seconds against n, one panel per workload."""
    titles = {
        "ranges": "5000 sampled ranges (Fig. 4)",
        "nodes": "2n − 1 node queries (Fig. 6)",
        "random": "2500 random dense queries (Fig. 7)",
    }
    title = (
        "correlated-input-perturbation Fig. 8 (App. C.3): runtime per mechanism and workload, "
        "data uniform on 1..1000 (synthetic)"
    )
    with figure(path, ncols=3, size=(5.0, 4.3), title=title) as (_, axes):
        for ax, wname in zip(axes[0], _WORKLOADS, strict=True):
            for name in MECHANISMS:
                pts = [
                    (n, r.total((wname, n, name))) for n in r.sizes if (wname, n, name) in r.times
                ]
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
            label_axes(
                ax,
                xlabel="n",
                ylabel="seconds (build + release + answer)",
                title=titles[wname],
                grid=True,
            )
        legend(axes[0][-1], "outside", fontsize=8, source=axes[0][0])


def _ranges_runtime_summary(r: RangesRuntime) -> dict[str, float]:
    configs = sorted({(w, n) for (w, n, _) in r.times})

    def ranked(w: str, n: int) -> list[tuple[float, str]]:
        return sorted((r.total((w, n, m)), m) for m in MECHANISMS if (w, n, m) in r.times)

    fastest = [ranked(w, n)[0][1] for w, n in configs]
    big = r.sizes[-1]

    # Answering is the same product W·values for every consistent mechanism; the
    # mechanisms differ in building and releasing the noisy histogram (median over the
    # three workloads' independent timings).
    def own_median(name: str) -> float:
        return float(np.median([r.own((w, big, name)) for w in _WORKLOADS]))

    eig_configs = [(w, n) for w, n in configs if (w, n, "eigen") in r.times]
    eig_slowest = sum(ranked(w, n)[-1][1] == "eigen" for w, n in eig_configs)
    fast = min(own_median("identity"), own_median("wavelet"))
    return {
        "fast_share": sum(m in ("identity", "wavelet") for m in fastest) / len(fastest),
        "hier_over_ours": own_median("hierarchical") / own_median("correlated"),
        "ours_over_fast": own_median("correlated") / fast,
        "eigen_slowest_share": eig_slowest / max(1, len(eig_configs)),
        "configurations": float(len(configs)),
        "eigen_configurations": float(len(eig_configs)),
    }


def _ranges_runtime_comparisons(r: RangesRuntime, s: dict[str, float]) -> list[Comparison]:
    k_big = int(math.log2(r.sizes[-1]))
    return comparisons(
        s,
        [
            (
                "share of configurations where Gaussian or Wavelet is fastest",
                "'typically the fastest'",
                "fast_share",
                3,
                f"{s['configurations']:.0f} configurations (3 workloads × {len(r.sizes)} n)",
            ),
            (
                f"ours / faster of Gaussian, Wavelet at n=2^{k_big}",
                "'competitive'",
                "ours_over_fast",
                2,
                "build + release seconds (answering W·values is common to all)",
            ),
            (
                f"Hierarchical / ours at n=2^{k_big}",
                "> 1 (ours faster)",
                "hier_over_ours",
                2,
                "build + release seconds",
            ),
            (
                "share of configurations with EigenDesign where it is slowest",
                "'typically the longest'",
                "eigen_slowest_share",
                3,
                f"{s['eigen_configurations']:.0f} configurations (n ≤ {r.eigen_limit})",
            ),
        ],
    )


def summarize_ranges_runtime(r: RangesRuntime) -> Summary:
    s = _ranges_runtime_summary(r)
    keys = ("fast_share", "hier_over_ours", "ours_over_fast", "eigen_slowest_share")
    return Summary(
        comparisons=_ranges_runtime_comparisons(r, s),
        key={**{k: s[k] for k in keys}, "configurations": s["configurations"]},
        notes=[
            "each time is the best of up to 7 repeats of build (calibration; EigenDesign: "
            "its eigen-strategy for the workload) + release of uniform data + answering the "
            "workload; the paper states no numbers for Fig. 8, only these orderings",
        ],
    )


def _dense(blocks: list[FloatArray]) -> DenseWorkload:
    return DenseWorkload(np.concatenate(blocks))
