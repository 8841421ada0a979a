"""``ranges-dpbench``: the range mechanisms on the DPBench histograms.

DPBench: M. Hay, A. Machanavajjhala, G. Miklau, Y. Chen, D. Zhang, "Principled
evaluation of differentially private algorithms using DPBench", SIGMOD 2016,
https://arxiv.org/abs/1512.04817.

Not in the paper, which uses synthetic uniform data only. Every mechanism here adds
data-independent noise, so its exact errors (Defs 3.11, 3.12) are the same on every
dataset of a given shape; what the data changes is the error *relative to the data*
(DPBench's scaled error: root mean squared range error / total count). For each file
we release the real histogram, measure the error on sampled ranges (the paper's
estimator, App. C.4) and check it against the exact value.

1-D: every n = 4096 file, all mechanisms but EigenDesign (n ≤ 1024). 2-D: the 256×256
files with the mechanisms that support 2-D (correlated, Alg. 3; Gaussian), over all
rectangles. A uniform synthetic dataset (the paper's, 1..1000) is always included, so
the experiment runs (and says so) when the DPBench folder is absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpcount.experiments._framework import ExperimentConfig, Summary, write_csv
from dpcount.experiments._plotting import figure, label_axes, legend
from dpcount.experiments._ranges_common import COLORS, DELTA, EPSILON, LABELS, MARKERS, FloatArray
from dpcount.ranges import (
    MECHANISMS,
    AllRanges,
    RangeMechanism,
    build_mechanism,
    paper_monte_carlo_errors,
    total_squared_error,
    worst_case_expected_error,
)

__all__ = [
    "DpBench",
    "compute_ranges_dpbench",
    "dpbench_title",
    "find_dpbench",
]


#: where the DPBench folder is looked for: from the working directory (a checkout's
#: root) and from this source file's checkout
_CANDIDATES = (
    Path("..") / "shared" / "data" / "dpbench",
    Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "dpbench",
)

_SAMPLES = 5000  # ranges (or rectangles) per release, as the paper's estimator


def find_dpbench() -> Path | None:
    """The DPBench data folder (the first of ``_CANDIDATES`` holding a ``1D`` folder), or None."""
    for path in _CANDIDATES:
        if (path / "1D").is_dir():
            return path.resolve()
    return None


def _datasets(
    folder: Path | None, quick: bool, rng: np.random.Generator
) -> tuple[list[tuple[str, FloatArray]], list[tuple[str, FloatArray]]]:
    one = [("uniform 1..1000 (synthetic)", rng.integers(1, 1001, size=4096).astype(float))]
    two = [("uniform 1..1000 (synthetic)", rng.integers(1, 1001, size=(256, 256)).astype(float))]
    if folder is not None:
        files1 = sorted((folder / "1D").glob("*.npy"))
        files2 = sorted((folder / "2D").glob("*.npy"))
        if quick:  # a few files suffice to exercise the path
            files1, files2 = files1[:3], files2[:1]
        one += [(f.stem, np.load(f).astype(np.float64)) for f in files1]
        two += [(f.stem, np.load(f).astype(np.float64)) for f in files2]
    return one, two


def _measure_2d(
    mechanism: RangeMechanism, x: FloatArray, runs: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """Per run: (#rectangles)·mean(E²) and max|E| over sampled rectangles of one release."""
    n1, n2 = x.shape
    rows, cols = AllRanges(n1), AllRanges(n2)
    count = rows.count * cols.count
    prefix = np.zeros((n1 + 1, n2 + 1))
    prefix[1:, 1:] = x.cumsum(axis=0).cumsum(axis=1)
    total, worst = np.empty(runs), np.empty(runs)
    for r in range(runs):
        release = mechanism.release(x)
        r0, r1 = rows.sample(_SAMPLES, rng)
        c0, c1 = cols.sample(_SAMPLES, rng)
        truth = prefix[r1 + 1, c1 + 1] - prefix[r0, c1 + 1] - prefix[r1 + 1, c0] + prefix[r0, c0]
        err = release.query(np.stack([r0, c0], axis=1), np.stack([r1, c1], axis=1)) - truth
        total[r] = count * float(np.mean(err**2))
        worst[r] = float(np.max(np.abs(err)))
    return total, worst


_HEADER = [
    "dims",
    "dataset",
    "shape",
    "mechanism",
    "total_count",
    "sigma",
    "err2_exact",
    "err_expected_exact",
    "rmse_per_range_exact",
    "scaled_rmse",
    "err2_measured_mean",
    "err2_measured_stderr",
    "errinf_sampled_mean",
]


@dataclass(frozen=True)
class DpBench:
    """The numbers of ranges-dpbench: one CSV row per (dataset, mechanism), the pooled
    z-scores per (dims, mechanism), and the exact errors per shape and mechanism."""

    real_data: bool  # False: the DPBench folder was not found (synthetic data only)
    runs: int
    datasets: dict[int, tuple[str, ...]]  # dims -> dataset names, synthetic first
    names: dict[int, tuple[str, ...]]  # dims -> mechanisms
    table: tuple[tuple[Any, ...], ...]
    scaled: dict[tuple[int, str, str], float]  # (dims, dataset, mechanism) -> scaled RMSE
    exact: dict[tuple[int, str], tuple[float, float, int]]  # err2, err^∞, ranges
    z: tuple[float, ...]  # pooled measured vs exact err_{W,2}, per (dims, mechanism)
    z_doubled: tuple[float, ...]  # the same against 2× the exact value


def _dpbench_row(
    dim: int, dname: str, x: FloatArray, m: RangeMechanism, exact: tuple[float, float, int],
    runs: int, rng: np.random.Generator,
) -> tuple[tuple[Any, ...], FloatArray]:  # fmt: skip
    """One CSV row (exact and measured errors of one release series) and the per-run
    err_{W,2} estimates."""
    err2, err_exp, count = exact
    if dim == 1:
        est = paper_monte_carlo_errors(m, _SAMPLES, runs, rng, x=x)
        total, worst = est.total_squared_error, est.worst_case_error
    else:
        total, worst = _measure_2d(m, x, runs, rng)
    se = float(total.std(ddof=1)) / math.sqrt(runs)
    scale = float(x.sum())
    rmse = math.sqrt(err2 / count)
    shape = "x".join(map(str, x.shape))
    row = (dim, dname, shape, m.name, scale, m.sigma, err2, err_exp, rmse, rmse / scale)
    return (*row, float(total.mean()), se, float(worst.mean())), total


def _exact_errors(dim: int, m: RangeMechanism, shape: tuple[int, ...]) -> tuple[float, float, int]:
    """err_{W,2}, err^∞_W (exact, data independent) and the number of ranges/rectangles."""
    count = (
        AllRanges(shape[0]).count
        if dim == 1
        else AllRanges(shape[0]).count * AllRanges(shape[1]).count
    )
    return total_squared_error(m), worst_case_expected_error(m), count


def compute_ranges_dpbench(config: ExperimentConfig) -> DpBench:
    """Release every dataset through every mechanism ``runs`` times; pool per shape."""
    rng = np.random.default_rng(config.seed)
    runs = 10
    folder = find_dpbench()
    one, two = _datasets(folder, config.quick, rng)
    names_1d = [m for m in MECHANISMS if m != "eigen"]
    names_2d = [m for m in MECHANISMS if MECHANISMS[m].max_dims >= 2]
    tasks: list[tuple[int, str, FloatArray, str]] = [
        (1, d, x, m) for d, x in one for m in names_1d
    ] + [(2, d, x, m) for d, x in two for m in names_2d]
    rows: list[tuple[Any, ...]] = []
    pooled: dict[tuple[int, str], list[FloatArray]] = {}
    exact: dict[tuple[int, str], tuple[float, float, int]] = {}
    for dim, dname, x, name in config.progress(tasks, "ranges-dpbench"):
        m = build_mechanism(name, x.shape, epsilon=EPSILON, delta=DELTA, rng=rng)
        if (dim, name) not in exact:  # data independent: once per shape and mechanism
            exact[(dim, name)] = _exact_errors(dim, m, x.shape)
        row, total = _dpbench_row(dim, dname, x, m, exact[(dim, name)], runs, rng)
        rows.append(row)
        pooled.setdefault((dim, name), []).append(total)
    # The noise does not depend on the data, so the per-run estimates of all datasets of
    # one shape are draws of one distribution: pooled, they test the exact value (a
    # 10-run z per dataset would be unreliable: the estimates are skewed).
    zs, zs_wrong = [], []
    for (dim, name), parts in pooled.items():
        values = np.concatenate(parts)
        err2 = exact[(dim, name)][0]
        se = float(values.std(ddof=1)) / math.sqrt(values.size)
        zs.append(abs((float(values.mean()) - err2) / se))
        zs_wrong.append(abs((float(values.mean()) - 2 * err2) / se))
    return DpBench(
        real_data=folder is not None,
        runs=runs,
        datasets={1: tuple(d for d, _ in one), 2: tuple(d for d, _ in two)},
        names={1: tuple(names_1d), 2: tuple(names_2d)},
        table=tuple(rows),
        scaled={(int(r[0]), str(r[1]), str(r[3])): float(r[9]) for r in rows},
        exact=exact,
        z=tuple(zs),
        z_doubled=tuple(zs_wrong),
    )


def dpbench_title(r: DpBench) -> str:
    """The figure's title: which data it shows (DPBench only when the files were found)."""
    data = (
        "DPBench histograms and uniform 1..1000 (synthetic)"
        if r.real_data
        else "uniform 1..1000 only (synthetic; DPBench data not found)"
    )
    return f"Range mechanisms on {data}, ε={EPSILON:g}, δ={DELTA:g}"


def plot_ranges_dpbench(r: DpBench, path: Path) -> None:
    """Scaled error per dataset (rows) and mechanism (markers), 1-D and 2-D."""
    with figure(path, ncols=2, size=(6.5, 5.0), title=dpbench_title(r)) as (_, axes):
        for ax, dim in zip(axes[0], (1, 2), strict=True):
            labels = list(r.datasets[dim])
            ypos = np.arange(len(labels))
            names = r.names[dim]
            for i, name in enumerate(names):
                values = [r.scaled[(dim, d, name)] for d in labels]
                # Nearly equal errors would hide each other's markers: one sub-row each.
                shift = 0.12 * (i - (len(names) - 1) / 2)
                ax.plot(values, ypos + shift, MARKERS[name], color=COLORS[name], label=LABELS[name])
            ax.set_yticks(ypos, labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xscale("log")
            shape = "4096 cells, all ranges" if dim == 1 else "256×256, all rectangles"
            label_axes(
                ax,
                xlabel="scaled error: RMSE per range / total count (exact)",
                ylabel="dataset",
                title=f"{dim}-D: {shape}",
                grid=True,
            )
            legend(ax, "below", ncol=3)


def _dpbench_notes(r: DpBench) -> list[str]:
    notes = [
        "errors are data independent: the exact err_{W,2} is one number per mechanism and "
        f"shape; measured on real releases ({r.runs} per dataset × {_SAMPLES} sampled ranges "
        f"or rectangles, pooled over the datasets) it agrees: max |z| = {max(r.z):.2f} over "
        f"mechanisms (2× exact: min |z| = {min(r.z_doubled):.0f})",
        "2-D: correlated (Alg. 3, calibrated with the product of the axes' max diag C⁻¹, which "
        "the paper leaves open) and Gaussian; the tree baselines here are 1-D only",
    ]
    if not r.real_data:
        notes.insert(
            0,
            "DPBench data not found (looked for ../shared/data/dpbench): skipped the real "
            "datasets, synthetic uniform data only",
        )
    return notes


def summarize_ranges_dpbench(r: DpBench) -> Summary:
    key: dict[str, float] = {
        "dpbench_files_1d": float(len(r.datasets[1]) - 1),
        "dpbench_files_2d": float(len(r.datasets[2]) - 1),
        "measured_max_abs_z": max(r.z),
        "measured_min_abs_z_doubled": min(r.z_doubled),
    }
    for (dim, name), (err2, err_exp, _) in r.exact.items():
        key[f"err2_{dim}d_{name}"] = err2
        key[f"err_expected_{dim}d_{name}"] = err_exp
    return Summary(
        comparisons=[],
        key=key,
        notes=_dpbench_notes(r),
    )


def write_ranges_dpbench(r: DpBench, out: Path) -> Path:
    """ranges-dpbench.csv."""
    return write_csv(out / "ranges-dpbench.csv", _HEADER, r.table)
