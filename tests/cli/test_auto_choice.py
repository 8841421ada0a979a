"""``count --mechanism auto`` and ``plan`` print the library's choice, truthfully
(issue 22 item 4), and no CLI module decides by reading an error message (issue 19)."""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.analysis import compare
from dpcount.analysis.choice import choose
from dpcount.cli import main
from dpcount.privacy import Budget

CLI = Path(__file__).resolve().parents[2] / "src" / "dpcount" / "_cli"


def _std(path: Path) -> list[float]:
    with path.open() as fh:
        return [float(r["std"]) for r in csv.DictReader(fh)]


#: the line of ``auto``'s reason when plan's first row needs Gaussian noise and ``auto``
#: bounded its RMSE without building the Gaussian rows (issue 33)
GAUSSIAN_FIRST = re.compile(
    r"dpcount plan ranks a mechanism with gaussian noise first, with RMSE between "
    r"([0-9.]+) \(a lower bound for every mechanism with gaussian noise\) and ([0-9.]+) "
    r"\(blt's\)"
)


def check_gaussian_bounds(err: str, horizon: int, budget: Budget) -> None:
    """The printed bounds hold for plan's first row (a Gaussian one) and the upper one
    is blt's RMSE rounded up (within 0.1%: a loose bound would fail)."""
    rows = compare(horizon, budget=budget, certificates=False)
    found = GAUSSIAN_FIRST.search(err)
    assert found is not None, err
    low, high = float(found[1]), float(found[2])
    assert rows[0].noise == "gaussian"
    assert low <= math.sqrt(rows[0].mse) <= high
    blt = next(r for r in rows if r.label == "blt")
    assert math.sqrt(blt.mse) <= high < math.sqrt(blt.mse) * 1.001


def test_auto_with_delta_names_the_integer_rule_and_the_best_rows_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "ranked first by exact MSE by dpcount plan" for what plan ranked fifth.
    Plan's first row needs Gaussian noise here: ``auto`` says so with bounds on its RMSE
    (without building the Gaussian rows, issue 33)."""
    T = 1000
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(T)))
    argv = ["count", str(src), "--epsilon", "1", "--delta", "1e-6", "--output", str(out)]
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "ranked first" not in err
    assert "the best by exact MSE among the mechanisms that take integer noise" in err
    check_gaussian_bounds(err, T, Budget(epsilon=1.0, delta=1e-6))


def test_plans_copy_paste_line_for_whole_numbers_is_the_integer_noise_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--noise laplace`` on whole-number data. The printed command, run,
    releases what ``count --mechanism auto`` releases."""
    T = 300
    assert main(["plan", "--horizon", str(T), "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "whole-number data (counts):" in x)
    command = line.split("dpcount count INPUT ", 1)[1].split()
    assert "--noise" in command and command[command.index("--noise") + 1] == "discrete-laplace"
    fractional = next(x for x in out.splitlines() if "fractional data:" in x)
    assert "--noise laplace" in fractional
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 4}\n" for i in range(T)))
    exact = ["--digits", "17"]  # every bit of the std
    assert main(["count", str(src), *command, *exact, "--output", str(tmp_path / "a.csv")]) == 0
    argv = ["count", str(src), "--epsilon", "1", *exact, "--output", str(tmp_path / "b.csv")]
    assert main(argv) == 0
    capsys.readouterr()
    np.testing.assert_array_equal(_std(tmp_path / "a.csv"), _std(tmp_path / "b.csv"))
    choice = choose(T, budget=Budget(epsilon=1.0))
    assert choice.auto is not None
    np.testing.assert_allclose(
        np.mean(np.square(_std(tmp_path / "a.csv"))), choice.auto.mse, rtol=1e-12
    )


def test_no_cli_module_decides_by_reading_an_error_message() -> None:
    """Typed errors (MissingDeltaError, NotWholeNumberError, CheckpointMismatchError,
    ParticipationUnsupportedError) carry what the CLI needs."""
    pattern = re.compile(r"\bin str\(\w+\)|str\(\w+\)\s*(==|\.startswith|\.endswith)")
    offenders = [
        f"{path.name}:{i}"
        for path in sorted(CLI.glob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert not offenders


def test_a_fractional_live_row_under_integer_noise_still_gets_the_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0.5\n"))
    assert main(["count", "-", "--epsilon", "1", "--horizon", "4"]) == 2
    err = capsys.readouterr().err
    assert "the default noise for integer data is integer noise: pass --noise laplace" in err
