"""Every reproduction runs in --quick mode; its key numbers are asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcount.cli import main
from dpcount.experiments import EXPERIMENTS, ExperimentResult


@pytest.fixture
def results(experiment_results: dict[str, ExperimentResult]) -> dict[str, ExperimentResult]:
    return experiment_results


def test_experiment_names_and_order() -> None:
    """The names of issue #6, in its order (each family registers its own)."""
    expected = [
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
    ]
    assert [name for name in expected if name in EXPERIMENTS] == list(EXPERIMENTS)


def test_every_experiment_writes_csv_and_png(results: dict[str, ExperimentResult]) -> None:
    for r in results.values():
        assert r.csv.stat().st_size > 0
        assert r.figure is not None and r.figure.stat().st_size > 5_000
        assert r.runtime > 0


def test_elders_constants(results: dict[str, ExperimentResult]) -> None:
    key = results["elders-constants"].key
    assert (key["thm9_k"], round(key["thm9_constant"], 3)) == (17, 0.234)
    assert (key["cor15_k"], round(key["cor15_constant"], 4)) == (19, 0.1236)
    assert (key["cor30_k"], round(key["cor30_constant"], 3)) == (20, 0.124)


def test_elders_lowerbound(results: dict[str, ExperimentResult]) -> None:
    key = results["elders-lowerbound"].key
    # Max error grows at least linearly in log(T)/ε (Thm 4); the trees grow faster.
    assert key["slope_kary"] > 1.0 and key["slope_binary"] > 1.0
    assert key["min_ratio_to_shape"] > 1.0


def test_reproduce_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "--list"]) == 0
    assert "elders-constants" in capsys.readouterr().out
    assert main(["reproduce", "elders-constants", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0.1236" in out and "runtime" in out
    assert main(["reproduce", "nope"]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err
