"""Reproductions of correlated-input-perturbation (Dharangutte, Gao, Gong, Wang), §4.2, App. C.

* ``ranges-all`` (Fig. 4): err_{W,2} (Def. 3.11, exact) and err_{W,∞} (Def. 3.13,
  Monte Carlo with exact per-draw maxima over all n(n+1)/2 ranges) for every range
  mechanism, next to the paper's own estimator (5000 sampled ranges, 10 runs) and the
  exact err^∞_W (Def. 3.12).
* ``ranges-levels`` (Fig. 5): the variance of every tree node's answer by level, exact,
  with the paper's 500-run empirical variances beside it.
* ``ranges-nodes`` (Fig. 6, App. C.1): the errors of the 2n − 1 node queries
  (Theorem 3.20 for the correlated mechanism).
* ``ranges-random`` (Fig. 7, App. C.2): the errors of 2500 random dense queries.

Every error is data independent (additive noise), so the exact values need no data;
the Monte Carlo runs release the paper's data (uniform on 1..1000) and subtract the truth.

References:
    * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
      Queries with Correlated Input Perturbation". 2024.
      https://arxiv.org/abs/2402.07066
    * M. Hay, V. Rastogi, G. Miklau, D. Suciu. "Boosting the accuracy of
      differentially private histograms through consistency". PVLDB 3(1–2), 2010.
      https://arxiv.org/abs/0904.0942
    * X. Xiao, G. Wang, J. Gehrke. "Differential privacy via wavelet
      transforms". ICDE 2010 (journal version IEEE TKDE 2011).
      https://doi.org/10.1109/ICDE.2010.5447831, https://arxiv.org/abs/0909.5530
    * C. Li, G. Miklau. "An adaptive mechanism for accurate query answering
      under differential privacy". PVLDB 5(6), 2012. (no link)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.experiments._framework import Comparison, ExperimentConfig, Summary, write_csv
from dpcount.experiments._plotting import figure, label_axes, legend
from dpcount.experiments._ranges_common import (
    COLORS,
    DELTA,
    EPSILON,
    LABELS,
    MARKERS,
    BoolArray,
    FloatArray,
    eigen_limit,
    mechanisms_for,
    uniform_data,
)
from dpcount.privacy.calibration import paper_gaussian_sigma
from dpcount.ranges import (
    AllRanges,
    DenseWorkload,
    HistogramRelease,
    RangeMechanism,
    TreeRelease,
    expected_worst_case_error,
    max_query_variance,
    nodal_level_variances,
    nodal_ranges,
    paper_monte_carlo_errors,
    precision_max_diag,
    query_variances,
    random_dense_queries,
    total_squared_error,
    worst_case_expected_error,
)
from dpcount.ranges.baselines.tree import maximal_nodes
from dpcount.ranges.cascade import level_profile

__all__ = [
    "RangeSweep",
    "RangesLevels",
    "compute_ranges_all",
    "compute_ranges_levels",
    "compute_ranges_nodes",
    "compute_ranges_random",
    "dense_worst_case",
]


_Z_REJECT = 5.5  # |z| beyond which an exact value is rejected by a Monte Carlo estimate


@dataclass(frozen=True)
class _Row:
    """One (n, mechanism) point of an error sweep."""

    n: int
    mechanism: str
    sigma: float
    l2_sensitivity: float
    err2: float  # Def. 3.11, exact
    err_expected: float  # Def. 3.12, exact
    mc_mean: float  # Def. 3.13, Monte Carlo
    mc_stderr: float
    extra: dict[str, float] = field(default_factory=dict)


def _sizes(config: ExperimentConfig) -> list[int]:
    """n = 2^6 ... 2^15 (the paper's range); --quick: 2^6 ... 2^11."""
    return [2**k for k in range(6, 12 if config.quick else 16)]


def _draws(config: ExperimentConfig) -> int:
    """Monte Carlo draws for err_{W,∞} (the paper used 10 runs)."""
    return 80 if config.quick else 100


def _z(mean: float, stderr: float, exact: float) -> float:
    return (mean - exact) / stderr if stderr > 0 else (0.0 if mean == exact else math.inf)


def _at(rows: Sequence[_Row], n: int, mechanism: str) -> _Row:
    for r in rows:
        if r.n == n and r.mechanism == mechanism:
            return r
    raise KeyError((n, mechanism))


def _order(rows: Sequence[_Row], n: int, attr: str) -> str:
    """Mechanisms at n sorted by an error, smallest first (EigenDesign only if present)."""
    here = sorted((getattr(r, attr), r.mechanism) for r in rows if r.n == n)
    return " < ".join(m for _, m in here)


@dataclass(frozen=True)
class RangeSweep:
    """The numbers of one error sweep (Figs 4, 6, 7): one row per (n, mechanism).

    ``draws`` is the number of Monte Carlo releases behind err_{W,∞}; ``params`` holds
    the experiment's other sizes (e.g. the paper estimator's runs, the query count).
    ``name`` is the experiment's (its text: :data:`_SWEEP_TEXT`).
    """

    rows: tuple[_Row, ...]
    sizes: tuple[int, ...]
    draws: int
    eigen_limit: int
    name: str
    params: dict[str, int] = field(default_factory=dict)

    def at(self, n: int, mechanism: str) -> _Row:
        return _at(self.rows, n, mechanism)

    def order(self, n: int, attr: str) -> str:
        return _order(self.rows, n, attr)

    @property
    def eigen_n(self) -> int:
        """Largest n with an EigenDesign row (0: none)."""
        return max((r.n for r in self.rows if r.mechanism == "eigen"), default=0)


def _plot_sweep_panel(ax: Any, rows: Sequence[_Row], name: str, which: str, paper: bool) -> None:
    """One mechanism's curve: err_{W,2} (``which="err2"``) or err_{W,∞} with its exact
    lower value err^∞_W dotted."""
    rs = [r for r in rows if r.mechanism == name]
    ns = np.array([r.n for r in rs], dtype=float)
    color, marker = COLORS[name], MARKERS[name]
    # Equal errors (e.g. Gaussian and Hierarchical on node queries) would hide a curve:
    # the later a mechanism in the registry, the narrower its line and marker.
    rank = list(COLORS).index(name)
    lw, ms = 2.6 - 0.3 * rank, 6.5 - 0.6 * rank
    if which == "err2":
        err2 = [r.err2 for r in rs]
        ax.plot(ns, err2, "-", marker=marker, ms=ms, lw=lw, color=color, label=LABELS[name])
        if paper:
            mean = np.array([r.extra["err2_paper_mean"] for r in rs])
            sd = np.array([r.extra["err2_paper_sd"] for r in rs])
            ax.errorbar(
                ns * 1.06, mean, yerr=0.25 * sd, fmt="none", ecolor=color, alpha=0.6, capsize=2
            )
        return
    mean = np.array([r.mc_mean for r in rs])
    se = np.array([r.mc_stderr for r in rs])
    ax.errorbar(
        ns, mean, yerr=2 * se, fmt="-", marker=marker, ms=ms, lw=lw, color=color, capsize=2,
        label=LABELS[name],
    )  # fmt: skip
    ax.plot(ns, [r.err_expected for r in rs], ":", lw=lw, color=color, alpha=0.7)


#: per sweep: the figure and queries its title names (formatted with its params) and
#: what one draw's err_{W,∞} is beyond the plain maximum; Fig. 4 also plots the paper's
#: estimator
_SWEEP_TEXT = {
    "ranges-all": ("Fig. 4: all n(n+1)/2 ranges", ",\nexact max over all ranges per draw"),
    "ranges-nodes": ("Fig. 6: node queries (2n − 1)", ""),
    "ranges-random": ("Fig. 7: {count} random dense queries (App. C.2)", ""),
}


def _plot_sweep(sweep: RangeSweep, path: Path) -> None:
    """Two panels like the paper's Figs 4, 6, 7: err_{W,2} and err_{W,∞} against n."""
    workload, mc_note = _SWEEP_TEXT[sweep.name]
    title = (
        f"correlated-input-perturbation {workload.format(**sweep.params)}, ε={EPSILON:g}, "
        f"δ={DELTA:g}, data uniform on 1..1000 (synthetic)"
    )
    mc_label = f"Monte Carlo, {sweep.draws} draws{mc_note}"
    paper_estimates = sweep.name == "ranges-all"
    rows = sweep.rows
    names = list(dict.fromkeys(r.mechanism for r in rows))
    with figure(path, ncols=2, size=(6.5, 4.8), title=title) as (_, axes):
        ax2, axinf = axes[0]
        for name in names:
            _plot_sweep_panel(ax2, rows, name, "err2", paper_estimates)
            _plot_sweep_panel(axinf, rows, name, "errinf", paper_estimates)
        axinf.plot([], [], ":", color="0.3", label="err^∞_W (Def. 3.12, exact)")
        err2_note = ": exact; bars = paper's estimator ±0.25 sd" if paper_estimates else ": exact"
        for ax, ylabel, panel in (
            (ax2, "err_{W,2} = E‖We‖² (exact)", f"err_{{W,2}} (Def. 3.11){err2_note}"),
            (axinf, "err_{W,∞} = E max|We|", f"err_{{W,∞}} (Def. 3.13): {mc_label} ±2 SE"),
        ):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            label_axes(ax, xlabel="n (number of cells)", ylabel=ylabel, title=panel, grid=True)
        legend(axinf, "outside", fontsize=8)


def _sweep_csv(sweep: RangeSweep, out: Path) -> Path:
    """NAME.csv: one row per (n, mechanism), the exact errors and the Monte Carlo ones."""
    rows = sweep.rows
    extra_keys = list(dict.fromkeys(k for r in rows for k in r.extra))
    header = [
        "n",
        "mechanism",
        "sigma",
        "l2_sensitivity",
        "err2_exact",
        "err_expected_exact",
        "errinf_mc_mean",
        "errinf_mc_stderr",
        *extra_keys,
    ]
    return write_csv(
        out / f"{sweep.name}.csv",
        header,
        (
            [
                r.n,
                r.mechanism,
                r.sigma,
                r.l2_sensitivity,
                r.err2,
                r.err_expected,
                r.mc_mean,
                r.mc_stderr,
                *(r.extra.get(k, float("nan")) for k in extra_keys),
            ]
            for r in rows
        ),
    )


#: the three sweeps (Figs 4, 6, 7) share one writer and one plotter
write_ranges_all = write_ranges_nodes = write_ranges_random = _sweep_csv
plot_ranges_all = plot_ranges_nodes = plot_ranges_random = _plot_sweep


def _sweep_key(sweep: RangeSweep, n: int) -> dict[str, float]:
    """err_{W,2}, err_{W,∞} and its standard error of every mechanism at n."""
    key: dict[str, float] = {}
    for prefix, attr in (("err2", "err2"), ("errinf", "mc_mean"), ("errinf_se", "mc_stderr")):
        for r in sweep.rows:
            if r.n == n:
                key[f"{prefix}_{r.mechanism}"] = getattr(r, attr)
    return key


def _sigma_comparison(n: int) -> Comparison:
    """σ of the correlated mechanism: Thm 3.8's bound vs the exact analytic σ we use."""
    from dpcount.ranges import CorrelatedPerturbation

    ours = CorrelatedPerturbation(n, epsilon=EPSILON, delta=DELTA, rng=0)
    paper = paper_gaussian_sigma(math.sqrt(ours.precision_max_diag), EPSILON, DELTA)
    return Comparison(
        f"σ of the correlated mechanism at n=2^{int(math.log2(n))} (ε=0.1, δ=1e-9)",
        round(paper, 3),
        round(ours.sigma, 3),
        f"paper: Thm 3.8 bound; ours: exact analytic Gaussian σ (erratum) — the paper's "
        f"variances are {(paper / ours.sigma) ** 2:.3f}× ours",
    )


# ---- ranges-all (Fig. 4) -------------------------------------------------------------------


def _ranges_all_row(
    n: int, m: RangeMechanism, x: FloatArray, draws: int, check_runs: int, rng: np.random.Generator
) -> _Row:
    """Exact errors, the Monte Carlo err_{W,∞} and the paper's estimator for one mechanism."""
    samples, runs = 5000, 10
    paper = paper_monte_carlo_errors(m, samples, check_runs, rng, x=x)
    mc = expected_worst_case_error(m, None, draws, rng)
    err2 = total_squared_error(m)
    p2, pinf = paper.total_squared_error, paper.worst_case_error
    check_mean = float(p2.mean())
    check_se = float(p2.std(ddof=1)) / math.sqrt(check_runs)
    return _Row(
        n,
        m.name,
        m.sigma,
        m.l2_sensitivity,
        err2,
        worst_case_expected_error(m),
        mc.mean,
        mc.stderr,
        {
            "max_variance": max_query_variance(m),
            "err2_paper_mean": float(p2[:runs].mean()),
            "err2_paper_sd": float(p2[:runs].std(ddof=1)),
            "err2_paper_check_mean": check_mean,
            "err2_paper_check_z": _z(check_mean, check_se, err2),
            "err2_paper_check_z_if_doubled": _z(check_mean, check_se, 2 * err2),
            "errinf_paper_mean": float(pinf[:runs].mean()),
            "errinf_paper_sd": float(pinf[:runs].std(ddof=1)),
        },
    )


def compute_ranges_all(config: ExperimentConfig) -> RangeSweep:
    """Fig. 4's numbers: every mechanism over all ranges, n = 2^6..2^15 (--quick: 2^11).

    The paper's estimator (§4.2, App. C.4) uses 5000 uniform ranges per run and 10 runs.
    Its per-run values are skewed (few dominant noise modes), so a 10-run standard error
    is unreliable: its unbiasedness is checked over ``check_runs`` runs, the first 10 of
    which are the paper's 10.
    """
    rng = np.random.default_rng(config.seed)
    sizes, draws = _sizes(config), _draws(config)
    check_runs = 100 if config.quick else 200
    rows: list[_Row] = []
    for n in config.progress(sizes, "ranges-all"):
        x = uniform_data(n, rng)
        for m in mechanisms_for(n, config, rng):
            rows.append(_ranges_all_row(n, m, x, draws, check_runs, rng))
    params = {"check_runs": check_runs, "runs": 10, "samples": 5000}
    return RangeSweep(tuple(rows), tuple(sizes), draws, eigen_limit(config), "ranges-all", params)


def _ranges_all_summary(sweep: RangeSweep) -> dict[str, float]:
    """The checks of Fig. 4: the paper's estimator, Prop. 3.14, Lemma 3.17, Prop 3.14 (2nd)."""
    rows, hi_n = sweep.rows, sweep.sizes[-1]
    paper_dev = [abs(r.extra["err2_paper_mean"] / r.err2 - 1) for r in rows]
    paper_inf = [r.extra["errinf_paper_mean"] / r.mc_mean for r in rows if r.n == hi_n]
    m_all = [AllRanges(r.n).count for r in rows]
    # Lemma 3.15/3.17: max range variance of the correlated mechanism ≤ (2K − 2)σ², Θ(K).
    lemma = [
        r.extra["max_variance"] / r.sigma**2 / (2 * math.log2(r.n) - 2)
        for r in rows
        if r.mechanism == "correlated"
    ]
    return {
        "paper_estimator_max_abs_z": max(abs(r.extra["err2_paper_check_z"]) for r in rows),
        "paper_estimator_10run_max_rel_dev": max(paper_dev),
        "worst_dev_index": float(max(range(len(rows)), key=lambda i: paper_dev[i])),
        "paper_errinf_estimator_min_ratio": min(paper_inf),
        "paper_errinf_estimator_max_ratio": max(paper_inf),
        "paper_estimator_min_abs_z_doubled": min(
            abs(r.extra["err2_paper_check_z_if_doubled"]) for r in rows
        ),
        # Prop. 3.14 as corrected (its √(err2/m) ≤ err^∞_W fails for equal variances):
        # √(err2/m) ≤ max sd = √(π/2)·err^∞_W.
        "prop314_corrected_max_ratio": max(
            math.sqrt(r.err2 / m) / (math.sqrt(math.pi / 2) * r.err_expected)
            for r, m in zip(rows, m_all, strict=True)
        ),
        "prop314_paper_max_ratio": max(
            math.sqrt(r.err2 / m) / r.err_expected for r, m in zip(rows, m_all, strict=True)
        ),
        "lemma317_max_ratio": max(lemma),
        "mc_minus_expected_min_z": min((r.mc_mean - r.err_expected) / r.mc_stderr for r in rows),
    }


def _ranges_all_comparisons(sweep: RangeSweep, s: dict[str, float]) -> list[Comparison]:
    lo_n, hi_n = sweep.sizes[0], sweep.sizes[-1]
    k_hi = int(math.log2(hi_n))
    corr, wav = sweep.at(hi_n, "correlated"), sweep.at(hi_n, "wavelet")
    ident, hier = sweep.at(hi_n, "identity"), sweep.at(hi_n, "hierarchical")
    ident_lo, corr_lo = sweep.at(lo_n, "identity"), sweep.at(lo_n, "correlated")
    worst = sweep.rows[int(s["worst_dev_index"])]
    return [
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: ours / Wavelet",
            "> 1, marginally (Wavelet smallest)",
            round(corr.err2 / wav.err2, 4),
            f"exact; smallest first: {sweep.order(hi_n, 'err2')}",
        ),
        Comparison(
            f"err_{{W,∞}} at n=2^{k_hi}: ours / Wavelet",
            "> 1, marginally",
            round(corr.mc_mean / wav.mc_mean, 4),
            f"Monte Carlo ({sweep.draws} draws); smallest first: {sweep.order(hi_n, 'mc_mean')}",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: Hierarchical / ours",
            "≈ 1 (close behind Wavelet)",
            round(hier.err2 / corr.err2, 4),
            "exact",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: Gaussian / ours",
            "≫ 1 (Gaussian variance linear in n)",
            round(ident.err2 / corr.err2, 2),
            "exact",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{int(math.log2(lo_n))}: Gaussian / ours",
            "≈ 1 (as good as the others for small n)",
            round(ident_lo.err2 / corr_lo.err2, 3),
            "exact",
        ),
        Comparison(
            "paper's err_{W,2} estimator (5000 ranges × 10 runs): max |relative error|",
            "'sufficiently accurate'",
            round(s["paper_estimator_10run_max_rel_dev"], 3),
            f"vs exact, worst at n={worst.n}, {worst.mechanism}; unbiased: over "
            f"{sweep.params['check_runs']} runs max |z| = {s['paper_estimator_max_abs_z']:.2f} "
            f"(2× exact: min |z| = {s['paper_estimator_min_abs_z_doubled']:.0f})",
        ),
        Comparison(
            f"paper's err_{{W,∞}} estimator (max of 5000 ranges) / ours, n=2^{k_hi}",
            "'sufficiently accurate'",
            round(s["paper_errinf_estimator_min_ratio"], 3),
            f"min over mechanisms (max {s['paper_errinf_estimator_max_ratio']:.3f}); ours: exact "
            "max over all ranges per draw — a sampled max underestimates",
        ),
        Comparison(
            "largest n for EigenDesign",
            2**10,
            sweep.eigen_n,
            "dense n×n eigendecomposition"
            + (" (--quick: smaller)" if sweep.eigen_limit < 2**10 else ""),
        ),
        _sigma_comparison(hi_n),
    ]


def summarize_ranges_all(sweep: RangeSweep) -> Summary:
    s = _ranges_all_summary(sweep)
    lemma = [
        r.extra["max_variance"] / r.sigma**2 / (2 * math.log2(r.n) - 2)
        for r in sweep.rows
        if r.mechanism == "correlated"
    ]
    notes = [
        f"exact err_{{W,2}} over all ranges, exact err^∞_W; err_{{W,∞}} by {sweep.draws} draws "
        "with the maximum over all ranges exact per draw (no sampled ranges)",
        f"Prop. 3.14 as printed (√(err_{{W,2}}/m) ≤ err^∞_W): max ratio "
        f"{s['prop314_paper_max_ratio']:.3f}; corrected (≤ √(π/2)·err^∞_W): max ratio "
        f"{s['prop314_corrected_max_ratio']:.3f}",
        "Lemma 3.17: correlated max range variance / ((2K−2)σ²) = "
        + ", ".join(f"{v:.3f}" for v in lemma),
    ]
    hi_n, lo_n = sweep.sizes[-1], sweep.sizes[0]
    keys = [k for k in s if k not in ("worst_dev_index", "paper_errinf_estimator_min_ratio")]
    return Summary(
        comparisons=_ranges_all_comparisons(sweep, s),
        key={
            "n_max": float(hi_n),
            **_sweep_key(sweep, hi_n),
            **{f"err2_small_{r.mechanism}": r.err2 for r in sweep.rows if r.n == lo_n},
            **{k: s[k] for k in keys},
            "eigen_n_max": float(sweep.eigen_n),
        },
        notes=notes,
    )


# ---- ranges-levels (Fig. 5) ----------------------------------------------------------------


@dataclass(frozen=True)
class RangesLevels:
    """Fig. 5's numbers per (n, mechanism): exact and empirical variance by depth (root
    first), σ, the largest deviation of a node from σ², and the CSV ``table``."""

    sizes: tuple[int, ...]
    runs: int
    exact: dict[tuple[int, str], FloatArray]
    empirical: dict[tuple[int, str], FloatArray]
    sigma: dict[tuple[int, str], float]
    spread: dict[tuple[int, str], float]
    z_max: float
    z_wrong_min: float
    table: tuple[tuple[Any, ...], ...]

    def ratio(self, name: str) -> float:
        ex = self.exact[(self.sizes[-1], name)]
        return float(ex.max() / ex.min())

    def argmin_level(self, name: str, n: int) -> int:
        ex = self.exact[(n, name)]
        return int(ex.size - 1 - np.argmin(ex))


_LEVELS_HEADER = [
    "n",
    "mechanism",
    "level",
    "depth",
    "nodes",
    "sigma",
    "variance_exact_mean",
    "variance_exact_min",
    "variance_exact_max",
    "variance_empirical",
    "empirical_stderr",
    "z",
]


def _level_runs(
    m: RangeMechanism, n: int, runs: int, rng: np.random.Generator
) -> tuple[list[FloatArray], FloatArray, FloatArray, NDArray[np.int64]]:
    """Exact per-node variances by depth, and the empirical level means and SEs of ``runs``
    releases of uniform data (with the node count per depth)."""
    nodes = nodal_ranges(n)
    assert nodes.depth is not None
    depth = int(nodes.depth.max())
    per_node = nodal_level_variances(m)
    x = uniform_data(n, rng)
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    truth = prefix[nodes.hi + 1] - prefix[nodes.lo]
    per_run = np.empty((runs, depth + 1))
    counts = np.bincount(nodes.depth, minlength=depth + 1)
    for r in range(runs):
        err = m.release(x).query(nodes.lo, nodes.hi) - truth
        per_run[r] = np.bincount(nodes.depth, weights=err**2, minlength=depth + 1) / counts
    se = per_run.std(axis=0, ddof=1) / math.sqrt(runs)
    return per_node, per_run.mean(axis=0), se, counts


def compute_ranges_levels(config: ExperimentConfig) -> RangesLevels:
    """Fig. 5's numbers: per-level variances at n = 2^5 and 2^15 (--quick: 2^10)."""
    rng = np.random.default_rng(config.seed)
    sizes = [2**5, 2**10] if config.quick else [2**5, 2**15]
    runs = 100 if config.quick else 500
    rows: list[tuple[Any, ...]] = []
    exact: dict[tuple[int, str], FloatArray] = {}
    empirical: dict[tuple[int, str], FloatArray] = {}
    sigma: dict[tuple[int, str], float] = {}
    spread: dict[tuple[int, str], float] = {}
    z_max, z_wrong_min = 0.0, math.inf
    # EigenDesign (small n only) is built for the node workload of this figure.
    tasks = [(n, m) for n in sizes for m in mechanisms_for(n, config, rng, nodal_ranges(n))]
    for n, m in config.progress(tasks, "ranges-levels"):
        per_node, emp, se, counts = _level_runs(m, n, runs, rng)
        level_mean = np.array([v.mean() for v in per_node])  # by depth, root first
        # Deviation of every node from σ² (the correlated mechanism's Theorem 3.3).
        spread[(n, m.name)] = max(float(np.max(np.abs(v / m.sigma**2 - 1.0))) for v in per_node)
        z = (emp - level_mean) / se
        z_max = max(z_max, float(np.max(np.abs(z))))
        z_wrong_min = min(z_wrong_min, float(np.max(np.abs((emp - 2 * level_mean) / se))))
        exact[(n, m.name)], empirical[(n, m.name)] = level_mean, emp
        sigma[(n, m.name)] = m.sigma
        depth = len(per_node) - 1
        for d in range(depth + 1):
            lo, hi = float(per_node[d].min()), float(per_node[d].max())
            row = (n, m.name, depth - d, d, int(counts[d]), m.sigma, level_mean[d], lo, hi)
            rows.append((*row, emp[d], se[d], z[d]))
    return RangesLevels(
        tuple(sizes), runs, exact, empirical, sigma, spread, z_max, z_wrong_min, tuple(rows)
    )


def plot_ranges_levels(r: RangesLevels, path: Path) -> None:
    """One panel per n: exact level variances (lines) and the empirical ones (markers)."""
    title = (
        f"correlated-input-perturbation Fig. 5: variance of node queries by tree level, "
        f"ε={EPSILON:g}, δ={DELTA:g}, data uniform on 1..1000 (synthetic)"
    )
    with figure(path, ncols=len(r.sizes), size=(6.0, 4.6), title=title) as (_, axes):
        for ax, n in zip(axes[0], r.sizes, strict=True):
            for (nn, name), ex in r.exact.items():
                if nn != n:
                    continue
                levels = np.arange(ex.size)[::-1]  # level 0 = leaves, K = root
                # Flat mechanisms can coincide (e.g. σ² per node): dashes show both.
                ls = "--" if name in ("tree", "correlated") else "-"
                ax.plot(levels, ex, ls, color=COLORS[name], label=LABELS[name])
                emp = r.empirical[(nn, name)]
                ax.plot(levels, emp, MARKERS[name], color=COLORS[name], ms=4, mfc="none")
            ax.plot([], [], "ko", ms=4, mfc="none", label=f"markers: {r.runs} releases")
            ax.set_yscale("log")
            label_axes(
                ax,
                xlabel="level (0 = leaves, top = root)",
                ylabel="variance of a node query",
                title=f"n = 2^{int(math.log2(n))}: exact (lines), {r.runs} runs (markers)",
                grid=True,
            )
        # The first panel (smallest n) has every mechanism, EigenDesign included.
        legend(axes[0][-1], "outside", fontsize=8, source=axes[0][0])


def _ranges_levels_comparisons(r: RangesLevels) -> list[Comparison]:
    big = r.sizes[-1]
    wav, hier = r.exact[(big, "wavelet")], r.exact[(big, "hierarchical")]
    k_big = int(math.log2(big))
    out = [
        Comparison(
            f"Correlated: max/min node variance, n=2^{k_big}",
            "1 (equal at all levels)",
            round(1 + r.spread[(big, "correlated")], 15),
            "exact; every node = σ² (Thm 3.3)",
        ),
        Comparison(
            f"Binary Tree: max/min level variance, n=2^{k_big}",
            "1 (equal)",
            round(r.ratio("tree"), 12),
            "exact",
        ),
        Comparison(
            f"Gaussian: root/leaf variance, n=2^{k_big}",
            "increasing with level",
            round(r.ratio("identity")),
            f"= n = 2^{k_big}: variance doubles per level",
        ),
        Comparison(
            f"Wavelet: root/leaf variance, n=2^{k_big}",
            "small low, sharp rise at top",
            round(float(wav[0] / wav[-1]), 3),
            "exact (3/(1 + 2·4^-K) → 3)",
        ),
        Comparison(
            f"Hierarchical: level of the smallest variance, n=2^{k_big}",
            "U-shape (interior minimum)",
            r.argmin_level("hierarchical", big),
            f"of levels 0..{k_big}; leaves {hier[-1] / hier.min():.2f}×, root "
            f"{hier[0] / hier.min():.2f}× the minimum",
        ),
        Comparison(
            f"Hierarchical / ours, smallest level variance, n=2^{k_big}",
            "Hierarchical smallest in magnitude",
            round(float(hier.min() / r.exact[(big, "correlated")].min()), 3),
            "exact",
        ),
    ]
    eig = r.exact.get((r.sizes[0], "eigen"))
    if eig is not None:
        out.append(
            Comparison(
                "EigenDesign: root/leaf variance, n=2^5",
                "increasing with level",
                round(float(eig[0] / eig[-1]), 3),
                "exact (node workload)",
            )
        )
    return out


def summarize_ranges_levels(r: RangesLevels) -> Summary:
    big = r.sizes[-1]
    key: dict[str, float] = {
        "runs": float(r.runs),
        "empirical_max_abs_z": r.z_max,
        "empirical_min_abs_z_doubled": r.z_wrong_min,
    }
    for (n, name), ex in r.exact.items():
        key[f"spread_{name}_{n}"] = r.spread[(n, name)]
        key[f"ratio_{name}_{n}"] = float(ex.max() / ex.min())
        key[f"root_over_leaf_{name}_{n}"] = float(ex[0] / ex[-1])
        key[f"argmin_level_{name}_{n}"] = float(r.argmin_level(name, n))
        key[f"sigma2_{name}_{n}"] = r.sigma[(n, name)] ** 2
    key["hier_min_over_corr"] = float(
        r.exact[(big, "hierarchical")].min() / r.exact[(big, "correlated")].min()
    )
    return Summary(
        comparisons=_ranges_levels_comparisons(r),
        key=key,
        notes=[
            f"exact per-node variances (lines) and {r.runs} releases of uniform data (markers); "
            f"empirical vs exact: max |z| = {r.z_max:.2f} (2× exact rejected: min max|z| = "
            f"{r.z_wrong_min:.0f})",
            "EigenDesign (n ≤ 2^10 only) is built for the node workload of this figure",
        ],
    )


def write_ranges_levels(r: RangesLevels, out: Path) -> Path:
    """ranges-levels.csv."""
    return write_csv(out / "ranges-levels.csv", _LEVELS_HEADER, r.table)


# ---- ranges-nodes (Fig. 6, App. C.1) -------------------------------------------------------


def compute_ranges_nodes(config: ExperimentConfig) -> RangeSweep:
    """Fig. 6's numbers: the errors of the 2n − 1 node queries, every mechanism and n."""
    rng = np.random.default_rng(config.seed)
    sizes, draws = _sizes(config), _draws(config)
    rows: list[_Row] = []
    for n in config.progress(sizes, "ranges-nodes"):
        nodes = nodal_ranges(n)
        for m in mechanisms_for(n, config, rng, nodes):
            mc = expected_worst_case_error(m, nodes, draws, rng)
            rows.append(
                _Row(
                    n,
                    m.name,
                    m.sigma,
                    m.l2_sensitivity,
                    total_squared_error(m, nodes),
                    worst_case_expected_error(m, nodes),
                    mc.mean,
                    mc.stderr,
                )
            )
    return RangeSweep(tuple(rows), tuple(sizes), draws, eigen_limit(config), "ranges-nodes")


def _ranges_nodes_summary(sweep: RangeSweep) -> dict[str, float]:
    """Theorem 3.20's identities for the correlated mechanism and App. C.1's σ² coefficient."""
    hi_n = sweep.sizes[-1]
    corr = [r for r in sweep.rows if r.mechanism == "correlated"]
    c = sweep.at(hi_n, "correlated")
    return {
        "thm320_err2_max_rel_dev": max(
            abs(r.err2 / (r.sigma**2 * (2 * r.n - 1)) - 1) for r in corr
        ),
        "thm320_expected_max_rel_dev": max(
            abs(r.err_expected / (r.sigma * math.sqrt(2 / math.pi)) - 1) for r in corr
        ),
        "prop314_paper_ratio": math.sqrt(c.err2 / (2 * hi_n - 1)) / c.err_expected,
        # σ² coefficients the paper compares in App. C.1: Thm 3.8's 2‖diag C⁻¹‖ vs the tree.
        "sigma2_coefficient": 2 * precision_max_diag([level_profile(hi_n)]),
        "n_max": float(hi_n),
    }


def _ranges_nodes_comparisons(sweep: RangeSweep, s: dict[str, float]) -> list[Comparison]:
    hi_n = sweep.sizes[-1]
    k_hi = int(math.log2(hi_n))
    c = sweep.at(hi_n, "correlated")
    at = {r.mechanism: r for r in sweep.rows if r.n == hi_n}
    others = [at[k].mc_mean for k in ("correlated", "hierarchical", "wavelet")]
    out = [
        Comparison(
            f"Thm 3.20: err_{{W,2}}/σ² (correlated, n=2^{k_hi})",
            2 * hi_n - 1,
            c.err2 / c.sigma**2,
            f"= 2n − 1 for every n (max rel. dev. {s['thm320_err2_max_rel_dev']:.1e})",
        ),
        Comparison(
            "Thm 3.20: err^∞_W/σ (correlated)",
            round(math.sqrt(2 / math.pi), 6),
            round(c.err_expected / c.sigma, 6),
            f"every n (max rel. dev. {s['thm320_expected_max_rel_dev']:.1e})",
        ),
        Comparison(
            f"Thm 3.20: err_{{W,∞}}/(σ·√(2 ln(2n−1))), n=2^{k_hi}",
            "O(1)",
            round(c.mc_mean / (c.sigma * math.sqrt(2 * math.log(2 * hi_n - 1))), 3),
            f"Monte Carlo, {sweep.draws} draws",
        ),
        Comparison(
            "Prop. 3.14: √(err_{W,2}/m) / err^∞_W (correlated, nodes)",
            "≤ 1",
            round(s["prop314_paper_ratio"], 6),
            "erratum: equal variances give √(π/2) > 1; the bound holds with √(π/2)",
        ),
        Comparison(
            f"App. C.1: σ² coefficient of ours, 2‖diag C⁻¹‖_∞ (n=2^{k_hi})",
            f"2 + (2/3)·log n = {2 + 2 * k_hi / 3:g}",
            s["sigma2_coefficient"],
            "Thm 3.8's σ²·ε²/ln(2/δ)",
        ),
        Comparison(
            f"App. C.1: Binary Tree squared ℓ₂ sensitivity (n=2^{k_hi})",
            f"log n = {k_hi}",
            float(k_hi + 1),
            "K + 1 levels (the paper's 'log n' omits the root level)",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: Wavelet and ours smallest",
            "Wavelet, ours smallest",
            round(at["correlated"].err2 / at["wavelet"].err2, 4),
            f"ours / Wavelet; smallest first: {sweep.order(hi_n, 'err2')}",
        ),
        Comparison(
            f"err_{{W,∞}} at n=2^{k_hi}: Gaussian / ours",
            "significantly worse",
            round(at["identity"].mc_mean / at["correlated"].mc_mean, 2),
            f"smallest first: {sweep.order(hi_n, 'mc_mean')}",
        ),
        Comparison(
            f"err_{{W,∞}} at n=2^{k_hi}: Binary Tree / best of the rest",
            "slightly larger",
            round(at["tree"].mc_mean / min(others), 3),
            "rest: ours, Hierarchical, Wavelet",
        ),
        _sigma_comparison(hi_n),
    ]
    if sweep.eigen_n:
        e, o = sweep.at(sweep.eigen_n, "eigen"), sweep.at(sweep.eigen_n, "correlated")
        out.append(
            Comparison(
                f"err_{{W,∞}} at n=2^{int(math.log2(sweep.eigen_n))}: EigenDesign / ours",
                "significantly worse",
                round(e.mc_mean / o.mc_mean, 3),
                "Monte Carlo",
            )
        )
    return out


def summarize_ranges_nodes(sweep: RangeSweep) -> Summary:
    s = _ranges_nodes_summary(sweep)
    key = {**s, **_sweep_key(sweep, sweep.sizes[-1])}
    eig_n = sweep.eigen_n
    for r in sweep.rows:
        if r.mechanism == "eigen" and r.n == eig_n:
            key |= {"err2_eigen": r.err2, "errinf_eigen": r.mc_mean, "errinf_se_eigen": r.mc_stderr}
        if r.n == eig_n:
            key[f"errinf_at_eigen_n_{r.mechanism}"] = r.mc_mean
    return Summary(
        comparisons=_ranges_nodes_comparisons(sweep, s),
        key=key,
        notes=[f"EigenDesign (n ≤ {sweep.eigen_limit}) is built for the node workload"],
    )


# ---- ranges-random (Fig. 7, App. C.2) ------------------------------------------------------


def _random_chunks(n: int, count: int, rng: np.random.Generator) -> list[BoolArray]:
    """App. C.2's workload in row blocks of ≤ 2^22 cells (boolean, to bound memory)."""
    rows = max(1, (1 << 22) // n)
    out = []
    for start in range(0, count, rows):
        block = random_dense_queries(n, min(rows, count - start), rng)
        out.append(block.weights.astype(bool))
    return out


@dataclass(frozen=True)
class DenseWorstCase:
    """Monte Carlo over ``draws`` releases: E max_q |e_q| and E Σ_q e_q² with standard errors."""

    worst_mean: float
    worst_stderr: float
    total_mean: float
    total_stderr: float
    draws: int


def dense_worst_case(
    mechanism: RangeMechanism, chunks: Sequence[BoolArray], draws: int
) -> DenseWorstCase:
    """err_{W,∞} (Def. 3.13) and err_{W,2} of a 0/1 workload given in row blocks, by Monte Carlo.

    ``draws`` releases of x = 0 through the mechanism's own sampler and Generator; all
    blocks are answered for the same draws (one matrix product per block), so each
    draw's maximum is over the whole workload. Consistent releases answer W·values; the
    binary tree sums the noisy counts of each query's maximal covered nodes.
    """
    n = mechanism.shape[0]
    releases = [mechanism.release(np.zeros(n)) for _ in range(draws)]
    worst = np.zeros(draws)
    total = np.zeros(draws)
    first = releases[0]
    if isinstance(first, TreeRelease):
        depth = first.depth
        levels = [
            np.stack([r.node_values[1 << d : 2 << d] for r in releases], axis=1)  # type: ignore[attr-defined]
            for d in range(depth + 1)
        ]

        def answers(block: FloatArray) -> FloatArray:
            out = np.zeros((block.shape[0], draws))
            for d, mask in enumerate(maximal_nodes(depth, block)):
                out += mask.astype(np.float64) @ levels[d]
            return out
    elif isinstance(first, HistogramRelease):
        values = np.stack([r.values for r in releases], axis=1)  # type: ignore[attr-defined]

        def answers(block: FloatArray) -> FloatArray:
            return np.asarray(block @ values, dtype=np.float64)
    else:  # pragma: no cover - every range mechanism releases one of the two
        raise TypeError(f"unsupported release {type(first).__name__}")
    for chunk in chunks:
        ans = answers(chunk.astype(np.float64))
        worst = np.maximum(worst, np.abs(ans).max(axis=0))
        total += (ans**2).sum(axis=0)
    root = math.sqrt(draws)
    return DenseWorstCase(
        float(worst.mean()),
        float(worst.std(ddof=1) / root),
        float(total.mean()),
        float(total.std(ddof=1) / root),
        draws,
    )


def _random_row(n: int, m: RangeMechanism, chunks: Sequence[BoolArray], draws: int) -> _Row:
    """Exact err_{W,2} and err^∞_W of the random workload, and their Monte Carlo estimates."""
    variances = np.concatenate(
        [query_variances(m, DenseWorkload(c.astype(np.float64))) for c in chunks]
    )
    mc = dense_worst_case(m, chunks, draws)
    err2 = float(variances.sum())
    return _Row(
        n,
        m.name,
        m.sigma,
        m.l2_sensitivity,
        err2,
        math.sqrt(2 / math.pi) * math.sqrt(float(variances.max())),
        mc.worst_mean,
        mc.worst_stderr,
        {
            "err2_mc_mean": mc.total_mean,
            "err2_mc_stderr": mc.total_stderr,
            "err2_mc_z": _z(mc.total_mean, mc.total_stderr, err2),
            "err2_mc_z_if_doubled": _z(mc.total_mean, mc.total_stderr, 2 * err2),
        },
    )


def compute_ranges_random(config: ExperimentConfig) -> RangeSweep:
    """Fig. 7's numbers: one workload of 2500 random dense queries per n, every mechanism."""
    rng = np.random.default_rng(config.seed)
    sizes, draws = _sizes(config), _draws(config)
    count = 2500
    rows: list[_Row] = []
    for n in config.progress(sizes, "ranges-random"):
        chunks = _random_chunks(n, count, rng)
        eigen_workload = (
            DenseWorkload(np.concatenate(chunks).astype(np.float64))
            if n <= eigen_limit(config)
            else None
        )
        for m in mechanisms_for(n, config, rng, eigen_workload):
            rows.append(_random_row(n, m, chunks, draws))
    params = {"count": count}
    return RangeSweep(
        tuple(rows), tuple(sizes), draws, eigen_limit(config), "ranges-random", params
    )


def _ranges_random_comparisons(sweep: RangeSweep) -> list[Comparison]:
    hi_n = sweep.sizes[-1]
    k_hi = int(math.log2(hi_n))
    at = {r.mechanism: r for r in sweep.rows if r.n == hi_n}
    out = [
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: best mechanism",
            "Gaussian (with EigenDesign)",
            round(at["identity"].err2 / min(r.err2 for r in at.values()), 4),
            f"Gaussian / best; smallest first: {sweep.order(hi_n, 'err2')}",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: largest mechanism",
            "Binary Tree",
            round(at["tree"].err2 / max(r.err2 for r in at.values()), 4),
            "Binary Tree / largest",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: ours / Wavelet",
            "≈ 1 (similar)",
            round(at["correlated"].err2 / at["wavelet"].err2, 3),
            "exact",
        ),
        Comparison(
            f"err_{{W,2}} at n=2^{k_hi}: Hierarchical / ours",
            "≈ 1 (similar)",
            round(at["hierarchical"].err2 / at["correlated"].err2, 3),
            "exact",
        ),
        Comparison(
            f"err_{{W,∞}} at n=2^{k_hi}: Gaussian / ours",
            "< 1 (Gaussian best)",
            round(at["identity"].mc_mean / at["correlated"].mc_mean, 3),
            f"smallest first: {sweep.order(hi_n, 'mc_mean')}",
        ),
    ]
    eig_n = sweep.eigen_n
    if eig_n:
        e, g = sweep.at(eig_n, "eigen"), sweep.at(eig_n, "identity")
        out.append(
            Comparison(
                f"err_{{W,2}} at n=2^{int(math.log2(eig_n))}: EigenDesign / Gaussian",
                "≈ 1 (both best)",
                round(e.err2 / g.err2, 4),
                f"smallest first: {sweep.order(eig_n, 'err2')}",
            )
        )
    return out


def summarize_ranges_random(sweep: RangeSweep) -> Summary:
    count, draws = sweep.params["count"], sweep.draws
    z = [abs(r.extra["err2_mc_z"]) for r in sweep.rows]
    z_wrong = [abs(r.extra["err2_mc_z_if_doubled"]) for r in sweep.rows]
    hi_n, eig_n = sweep.sizes[-1], sweep.eigen_n
    key: dict[str, float] = {
        "n_max": float(hi_n),
        "mc_err2_max_abs_z": max(z),
        "mc_err2_min_abs_z_doubled": min(z_wrong),
        **_sweep_key(sweep, hi_n),
    }
    for r in sweep.rows:
        if eig_n and r.n == eig_n:
            key[f"err2_at_eigen_n_{r.mechanism}"] = r.err2
    return Summary(
        comparisons=_ranges_random_comparisons(sweep),
        key=key,
        notes=[
            f"one workload of {count} queries per n (k uniform in {{⌊n/4⌋..n}} distinct cells); "
            f"err_{{W,2}} exact, and by Monte Carlo over the same {draws} draws as err_{{W,∞}}: "
            f"max |z| = {max(z):.2f} (2× exact: min |z| = {min(z_wrong):.0f})",
            f"EigenDesign (n ≤ {sweep.eigen_limit}) is built for each n's random workload",
        ],
    )
