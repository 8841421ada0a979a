"""What `dpcount` says besides the numbers: public parameters read off the data, a
meaningless δ (issue 18, items 9 and 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcount.cli import main

EVENTS = "day,cases\n2024-03-02,1\n2024-03-02,2\n2024-03-05,1\n"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([], "--start and --horizon"),
        (["--start", "2024-03-01"], "--horizon"),
        (["--horizon", "9"], "--start"),
    ],
)
def test_step_without_start_or_horizon_warns_that_they_come_from_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    src = tmp_path / "events.csv"
    src.write_text(EVENTS)
    argv = ["count", str(src), "--column", "cases", "--time-column", "day", "--step", "1D"]
    assert main([*argv, "--epsilon", "1", "--output", str(tmp_path / "o.csv"), *extra]) == 0
    err = capsys.readouterr().err
    assert f"warning: {named} taken from the data (not private)" in err


def test_step_with_start_and_horizon_is_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "events.csv"
    src.write_text(EVENTS)
    argv = ["count", str(src), "--column", "cases", "--time-column", "day", "--step", "1D"]
    argv += ["--start", "2024-03-01", "--horizon", "9", "--epsilon", "1"]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 0
    assert "taken from the data" not in capsys.readouterr().err


def test_histogram_iso_times_without_start_or_horizon_warn_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "events.csv"
    src.write_text("t,item\n2024-03-02,a\n2024-03-04,b\n")
    argv = ["histogram", str(src), "--time-column", "t", "--item-column", "item"]
    argv += ["--items", "a,b", "--step-width", "1D", "--epsilon", "1"]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 0
    assert "warning: --start and --horizon taken from the data" in capsys.readouterr().err


@pytest.mark.parametrize(("delta", "in_guarantee"), [("0.5", True), ("0.01", False)])
def test_a_large_delta_is_warned_about_in_the_cli_and_the_guarantee(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], delta: str, in_guarantee: bool
) -> None:
    """The guarantee repeats it when the release is (ε, δ)-DP with that δ; at δ = 0.01
    the pure discrete Laplace scale is the smaller one, so the release is ε-DP."""
    src = tmp_path / "in.csv"
    src.write_text("1\n0\n2\n")
    argv = ["count", str(src), "--epsilon", "1", "--delta", delta]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"dpcount: warning: --delta {delta} is above 0.001")
    assert "much smaller than 1 / (the number of people" in err
    privacy = next(line for line in err.splitlines() if line.startswith("privacy"))
    assert ("WARNING: delta=" in privacy) is in_guarantee
    assert ("epsilon=1-DP," in privacy) is not in_guarantee


def test_plan_warns_about_a_large_delta_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--horizon", "8", "--epsilon", "1", "--delta", "0.1"]) == 0
    assert "dpcount: warning: --delta 0.1 is above 0.001" in capsys.readouterr().err


def test_a_usual_delta_is_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("1\n0\n2\n")
    argv = ["count", str(src), "--epsilon", "1", "--delta", "1e-3"]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 0
    assert "warning" not in capsys.readouterr().err.lower()
