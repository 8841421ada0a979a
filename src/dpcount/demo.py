"""``dpcount demo``: a real time series through the best tree and the binary tree.

Streams SEARCHLOGS (4096 steps of search counts, shipped with the package) through
the k-ary tree with the lowest exact MSE for this horizon and through the binary
tree, both ε-DP with Laplace noise, and compares each mechanism's exact error with
the error measured over many independent releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_integer, check_real
from dpcount.analysis.advisor import best_k
from dpcount.counting.tree import BinaryTree, KaryTree
from dpcount.data import load_searchlogs
from dpcount.privacy import Budget
from dpcount.privacy.rng import RNGLike, as_generator

__all__ = ["DemoRow", "demo_rows", "plot_demo"]


@dataclass(frozen=True)
class DemoRow:
    """One mechanism's exact and measured error on the demo series."""

    mechanism: KaryTree
    release: NDArray[np.float64]  # one streamed release
    exact_mse: float
    measured_mse: float
    measured_se: float  # standard error of measured_mse
    max_std: float
    coverage: float  # fraction of (replicate, step) pairs within ±2 exact σ of the truth


def demo_rows(
    epsilon: float = 1.0, replicates: int = 200, rng: RNGLike = None
) -> tuple[NDArray[np.int64], list[DemoRow]]:
    """Run the demo; returns the series and one row per mechanism."""
    epsilon = check_real("epsilon", epsilon, gt=0)
    replicates = check_integer("replicates", replicates, ge=2)
    gen = as_generator(rng)
    x = load_searchlogs()
    T = len(x)
    truth = np.cumsum(x).astype(np.float64)
    choice = best_k(T, budget=Budget(epsilon=epsilon))
    mechanisms: list[KaryTree] = [
        KaryTree(T, epsilon=epsilon, k=choice.k, subtract=choice.subtract, rng=gen),
        BinaryTree(T, epsilon=epsilon, rng=gen),
    ]
    rows = []
    for m in mechanisms:
        stream = m.stream()
        released = np.array([stream.update(float(v)) for v in x])
        # Replicates as independent vector coordinates: one vectorized release.
        reps = m.release(np.repeat(x[:, None].astype(np.float64), replicates, axis=1))
        per_rep = ((reps - truth[:, None]) ** 2).mean(axis=0)
        std = np.sqrt(m.variances())
        rows.append(
            DemoRow(
                mechanism=m,
                release=released,
                exact_mse=m.mse(),
                measured_mse=float(per_rep.mean()),
                measured_se=float(per_rep.std(ddof=1) / math.sqrt(replicates)),
                max_std=float(std.max()),
                # over all replicates, as the table's heading says: one release's steps
                # are correlated, so its own fraction strays far from the typical one
                coverage=float(np.mean(np.abs(reps - truth[:, None]) <= 2 * std[:, None])),
            )
        )
    return x, rows


def plot_demo(x: NDArray[np.int64], rows: list[DemoRow], path: str | Path) -> Path:
    """Top: the true running count and the best mechanism's release over the whole
    series (at this scale the two coincide); middle: a 120-step window where every
    release can be told apart from the truth; bottom: each release's error with its
    exact ±2σ band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    truth = np.cumsum(x)
    t = np.arange(1, len(x) + 1)
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), height_ratios=(1.3, 1.3, 1.4))
    colours = ["tab:blue", "tab:orange"]
    best = rows[0]
    axes[0].plot(t, truth, color="black", lw=2.2, alpha=0.35, label="true running count")
    axes[0].plot(t, best.release, color=colours[0], lw=0.8,
                 label=f"private ({best.mechanism.name})")  # fmt: skip
    axes[0].set_ylabel("count")
    axes[0].set_xlabel("step t")
    axes[0].legend(loc="upper left", fontsize=8)
    lo = len(x) // 2
    window = slice(lo, min(lo + 120, len(x)))
    axes[0].axvspan(t[window][0], t[window][-1], color="grey", alpha=0.15)
    axes[1].plot(t[window], truth[window], color="black", lw=1.4, label="true running count")
    for row, colour in zip(rows, colours, strict=False):
        axes[1].plot(t[window], row.release[window], color=colour, lw=0.9, marker=".",
                     ms=3, label=f"private ({row.mechanism.name})")  # fmt: skip
    axes[1].set_ylabel("count")
    axes[1].set_xlabel(f"step t (zoom on steps {t[window][0]}-{t[window][-1]}, shaded above)")
    axes[1].legend(loc="upper left", fontsize=8)
    # Draw the noisier mechanism first so the better one stays visible on top.
    for row, colour in reversed(list(zip(rows, colours, strict=False))):
        std = np.sqrt(row.mechanism.variances())
        name = row.mechanism.name
        axes[2].fill_between(
            t, -2 * std, 2 * std, color=colour, alpha=0.18, lw=0, label=f"±2σ exact ({name})"
        )
        axes[2].plot(t, row.release - truth, color=colour, lw=0.6, label=f"error ({name})")
    eps = rows[0].mechanism.privacy.epsilon if rows[0].mechanism.privacy else float("nan")
    axes[0].set_title(f"SEARCHLOGS running count, ε = {eps:g} (pure DP, Laplace noise)")
    axes[2].axhline(0, color="black", lw=0.6)
    axes[2].set_ylabel("private − true")
    axes[2].set_xlabel("step t")
    axes[2].legend(loc="upper left", fontsize=7, ncol=2)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
