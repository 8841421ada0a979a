"""Reproductions of the three papers' tables and figures (``dpcount reproduce``).

Each experiment is a function ``(ExperimentConfig) -> ExperimentResult`` that
writes a CSV and a PNG into ``config.out`` and lists the paper's stated numbers
next to ours. ``EXPERIMENTS`` groups them by paper (count-on-your-elders,
correlated-input-perturbation, constant-matters); the papers are cited in full in
:mod:`dpcount.experiments.elders`, :mod:`dpcount.experiments.ranges` and
:mod:`dpcount.experiments.fhu`.

Inside, every experiment is split in three: ``compute_NAME(config)`` draws the noise
and returns a frozen dataclass of numbers (it writes nothing), a writer turns it into
the CSV and a plotter into the PNG (through the shared helpers of ``_plotting``:
labelled panels, legends clear of the data, titles that name the data).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dpcount._validate import check_bool, check_integer
from dpcount.experiments._framework import Comparison, ExperimentConfig, ExperimentResult
from dpcount.experiments.dpbench import ranges_dpbench
from dpcount.experiments.elders import (
    elders_constants,
    elders_lowerbound,
    elders_mse,
    elders_ratio,
    elders_threshold,
)
from dpcount.experiments.fhu import fhu_cbnorm, fhu_error, fhu_snr, fhu_top1
from dpcount.experiments.ranges import ranges_all, ranges_levels, ranges_nodes, ranges_random
from dpcount.experiments.ranges_speed import cascade_speed, ranges_runtime

__all__ = ["EXPERIMENTS", "Comparison", "ExperimentConfig", "ExperimentResult", "run_experiment"]

#: experiment name -> function, grouped by paper
EXPERIMENTS: dict[str, Callable[[ExperimentConfig], ExperimentResult]] = {
    # count-on-your-elders
    "elders-constants": elders_constants,
    "elders-mse": elders_mse,
    "elders-threshold": elders_threshold,
    "elders-ratio": elders_ratio,
    "elders-lowerbound": elders_lowerbound,
    # correlated-input-perturbation
    "cascade-speed": cascade_speed,
    "ranges-all": ranges_all,
    "ranges-levels": ranges_levels,
    "ranges-nodes": ranges_nodes,
    "ranges-random": ranges_random,
    "ranges-runtime": ranges_runtime,
    "ranges-dpbench": ranges_dpbench,
    # constant-matters
    "fhu-error": fhu_error,
    "fhu-snr": fhu_snr,
    "fhu-top1": fhu_top1,
    "fhu-cbnorm": fhu_cbnorm,
}


def run_experiment(
    name: str,
    *,
    quick: bool = False,
    out: str | Path = "reproduction",
    seed: int = 0,
    show_progress: bool = False,
) -> ExperimentResult:
    """Run one experiment by name (see ``EXPERIMENTS``)."""
    check_integer("seed", seed, ge=0)
    check_bool("quick", quick)
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {tuple(EXPERIMENTS)}, got {name!r}")
    return EXPERIMENTS[name](
        ExperimentConfig(quick=quick, out=Path(out), seed=seed, show_progress=show_progress)
    )
