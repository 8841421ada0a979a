"""Reproductions of the three papers' tables and figures (``dpcount reproduce``).

Each experiment is a function ``(ExperimentConfig) -> ExperimentResult`` that
writes a CSV and a PNG into ``config.out`` and lists the paper's stated numbers
next to ours. ``EXPERIMENTS`` groups them by paper (count-on-your-elders,
correlated-input-perturbation, constant-matters); the papers are cited in full in
:mod:`dpcount.experiments.elders`, :mod:`dpcount.experiments.ranges` and
:mod:`dpcount.experiments.fhu`.

Inside, every experiment is a record of :mod:`dpcount.experiments.registry` whose
steps are four functions of its paper's module: ``compute_NAME(config)`` draws the
noise and returns a frozen dataclass of numbers (it writes nothing), ``write_NAME``
turns it into the CSV, ``plot_NAME`` into the PNG (through the shared helpers of
``_plotting``: labelled panels, legends clear of the data, titles that name the data)
and ``summarize_NAME`` lists the paper's numbers beside ours.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dpcount._validate import check_bool, check_integer
from dpcount.experiments._framework import Comparison, ExperimentConfig, ExperimentResult
from dpcount.experiments.registry import REGISTERED

__all__ = ["EXPERIMENTS", "Comparison", "ExperimentConfig", "ExperimentResult", "run_experiment"]

#: experiment name -> the registered experiment (a callable record), grouped by paper
EXPERIMENTS: dict[str, Callable[[ExperimentConfig], ExperimentResult]] = {
    experiment.name: experiment for experiment in REGISTERED
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
