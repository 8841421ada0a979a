"""Every reproduction as a record: its name, title and ``--list`` line, in one table.

A row names a module and an experiment; :meth:`~dpcount.experiments._framework.
Experiment.of` finds its steps there by name (``compute_NAME`` draws the noise and
returns a frozen result, ``write_NAME`` writes ``NAME.csv``, ``plot_NAME`` draws
``NAME.png``, ``summarize_NAME`` puts the paper's numbers beside ours). Adding an
experiment is those four functions and one row.
"""

from __future__ import annotations

from typing import Any

from dpcount.experiments import dpbench, elders, fhu, ranges, ranges_speed
from dpcount.experiments._framework import Experiment

__all__ = ["REGISTERED"]

#: every experiment, grouped by paper (``dpcount reproduce --list`` shows this order)
REGISTERED: tuple[Experiment[Any], ...] = (
    # count-on-your-elders
    Experiment.of(
        elders,
        "elders-constants",
        "Leading constants vs k (Thm 9, Cor 15, Cor 30) and exact finite-T MSE",
        "Leading constants of Thm 9 / Cor 15 / Cor 30 and the exact finite-T MSE.",
    ),
    Experiment.of(
        elders,
        "elders-mse",
        "Exact MSE vs T of every counting mechanism, ε-DP and (ε, δ)-DP",
        "Exact MSE vs T of every mechanism, ε-DP and (ε, δ)-DP (Laplace and Gaussian).",
    ),
    Experiment.of(
        elders,
        "elders-threshold",
        "Thm 2: the δ threshold below which ε-DP Laplace trees beat Gaussian √A",
        "Thm 2 / Lemma 19: the δ below which the ε-DP tree beats Gaussian √A, exactly per T.",
    ),
    Experiment.of(
        elders,
        "elders-ratio",
        "Cor 22: Laplace (ℓ2, Lemma 21) vs Gaussian variance ratio",
        "Cor 22: Var(ℓ2 Laplace, Lemma 21) / Var(Gaussian) — bound, limit 2, exact ratios.",
    ),
    Experiment.of(
        elders,
        "elders-lowerbound",
        "Thm 4: max error on uniformly random inputs grows like log(T)/ε",
        "Thm 4: max error of ε-DP counting on Bernoulli(1/2) inputs vs log(T)/ε.",
    ),
    # correlated-input-perturbation
    Experiment.of(
        ranges_speed,
        "cascade-speed",
        "Fig. 3: Cascade Sampling vs scipy's multivariate normal",
        "Fig. 3: Cascade Sampling vs scipy's multivariate normal (dense C_k), time vs n.",
    ),
    Experiment.of(
        ranges,
        "ranges-all",
        "Fig. 4: err_{W,2} and err_{W,∞} for all ranges",
        "Fig. 4: err_{W,2} and err_{W,∞} over all ranges, n = 2^6..2^15, ε = 0.1, δ = 1e-9.",
    ),
    Experiment.of(
        ranges,
        "ranges-levels",
        "Fig. 5: variance of node queries by tree level",
        "Fig. 5: variance of the node queries by tree level, n = 2^5 and 2^15 (exact + 500 runs).",
    ),
    Experiment.of(
        ranges,
        "ranges-nodes",
        "Fig. 6 (App. C.1): errors for node queries",
        "Fig. 6 (App. C.1): err_{W,2} and err_{W,∞} for the 2n − 1 node queries.",
    ),
    Experiment.of(
        ranges,
        "ranges-random",
        "Fig. 7 (App. C.2): errors for random dense queries",
        "Fig. 7 (App. C.2): err_{W,2} and err_{W,∞} for 2500 random dense queries.",
    ),
    Experiment.of(
        ranges_speed,
        "ranges-runtime",
        "App. C.3 (Fig. 8): runtime of the mechanisms per workload",
        "App. C.3 (Fig. 8): seconds to build, release and answer each workload, per mechanism.",
    ),
    Experiment.of(
        dpbench,
        "ranges-dpbench",
        "Range mechanisms on the DPBench histograms (1-D and 2-D)",
        "The range mechanisms on the DPBench histograms (1-D n=4096, 2-D 256×256).",
    ),
    # constant-matters
    Experiment.of(
        fhu,
        "fhu-error",
        "Fig 1/3: ℓ∞ error over time, square root vs binary tree (Gaussian), T = 2^16",
        "Fig 1/3: ℓ∞ error and outputs over time, square root vs binary tree (Gaussian).",
    ),
    Experiment.of(
        fhu,
        "fhu-snr",
        "Table 2: average signal-to-noise ratio per sparsity level",
        "Table 2: average signal-to-noise ratio per sparsity p (definition stated in the notes).",
    ),
    Experiment.of(
        fhu,
        "fhu-top1",
        "Fig 4: private top-1 statistic on a Zipf stream, √A vs binary (Gaussian)",
        "Fig 4: private top-1 statistic on a Zipf stream (2048 items, universe 20).",
    ),
    Experiment.of(
        fhu,
        "fhu-cbnorm",
        "Fig 2: cb-norm bounds — Mathias, the paper's Ψ(T), the exact Σf(k)²",
        "Fig 2: Mathias' bounds on ‖M_count‖_cb vs the paper's Ψ(T) and the exact Σf(k)².",
    ),
)
