"""Shared test configuration: a derandomized Hypothesis profile and data paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: the DPBench pieces the tests use, shipped in the repository (tests/data/dpbench/README.md)
DPBENCH = Path(__file__).resolve().parent / "data" / "dpbench"


@pytest.fixture
def dpbench_dir() -> Path:
    """The DPBench pieces shipped with the tests (four real histograms)."""
    return DPBENCH


@pytest.fixture(scope="session")
def experiment_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every reproduction run once in --quick mode (seed 0), shared by the test files."""
    from dpcount.experiments import EXPERIMENTS, dpbench, run_experiment

    out = tmp_path_factory.mktemp("reproduction")
    # ranges-dpbench reads the DPBench pieces shipped with the tests, not a folder
    # outside the repository
    saved = dpbench._CANDIDATES
    dpbench._CANDIDATES = (DPBENCH,)
    try:
        return {name: run_experiment(name, quick=True, out=out, seed=0) for name in EXPERIMENTS}
    finally:
        dpbench._CANDIDATES = saved
