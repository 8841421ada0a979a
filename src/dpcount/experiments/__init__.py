"""Reproductions of the three papers' tables and figures (``dpcount reproduce``).

Each experiment is a function ``(ExperimentConfig) -> ExperimentResult`` that
writes a CSV and a PNG into ``config.out`` and lists the paper's stated numbers
next to ours. ``EXPERIMENTS`` keeps them in the order of the issue.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dpcount._validate import check_bool, check_integer
from dpcount.experiments._framework import Comparison, ExperimentConfig, ExperimentResult
from dpcount.experiments.elders import elders_constants, elders_lowerbound

__all__ = ["EXPERIMENTS", "Comparison", "ExperimentConfig", "ExperimentResult", "run_experiment"]

_ORDER = (
    "elders-constants",
    "elders-mse",
    "elders-threshold",
    "elders-ratio",
    "elders-lowerbound",
    "cascade-speed",
    "ranges-all",
    "ranges-levels",
    "ranges-nodes",
    "ranges-random",
    "ranges-runtime",
    "ranges-dpbench",
    "fhu-error",
    "fhu-snr",
    "fhu-top1",
    "fhu-cbnorm",
)

_REGISTERED: dict[str, Callable[[ExperimentConfig], ExperimentResult]] = {
    # count-on-your-elders
    "elders-constants": elders_constants,
    "elders-lowerbound": elders_lowerbound,
}

#: experiment name -> function, in the order of issue #6
EXPERIMENTS: dict[str, Callable[[ExperimentConfig], ExperimentResult]] = {
    name: _REGISTERED[name] for name in _ORDER if name in _REGISTERED
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
