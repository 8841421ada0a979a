"""``dpcount plan --ranges`` (issue 13, item 6): range mechanisms ranked by exact error."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.ranges import MECHANISMS, RangeWorkload, build_mechanism, total_squared_error


def table_rows(text: str) -> list[tuple[str, float]]:
    """(mechanism, RMSE) per printed row, in order."""
    found = re.findall(r"^\s*\d+\s+([\w-]+)\s+([\d.e+-]+)\s", text, flags=re.M)
    return [(name, float(rmse)) for name, rmse in found]


def test_plan_ranges_ranks_by_exact_total_squared_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    n = 309
    assert main(["plan", "--ranges", "--size", str(n), "--epsilon", "1", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    count = n * (n + 1) // 2
    expected = sorted(
        (total_squared_error(build_mechanism(m, n, epsilon=1.0, delta=1e-6)), m) for m in MECHANISMS
    )
    assert [name for name, _ in rows] == [m for _, m in expected]
    for (_, rmse), (total, _) in zip(rows, expected, strict=True):
        assert rmse == pytest.approx(math.sqrt(total / count), rel=1e-3)
    assert rows[0][0] == "eigen" and rows[0][1] < dict(rows)["correlated"]
    assert "--mechanism eigen --epsilon 1 --delta 1e-06" in out


def test_plan_ranges_workload_file_and_2d(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = tmp_path / "q.csv"
    q.write_text("lo,hi\n0,9\n10,19\n0,63\n")
    argv = ["plan", "--ranges", "--size", "64", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--workload", str(q)]) == 0
    rows = table_rows(capsys.readouterr().out)
    w = RangeWorkload(64, np.array([0, 10, 0]), np.array([9, 19, 63]))
    totals = {m: total_squared_error(build_mechanism(m, 64, epsilon=1.0, delta=1e-6), w)
              for m in MECHANISMS}  # fmt: skip
    assert [name for name, _ in rows] == sorted(totals, key=lambda m: (totals[m], m))
    assert main(["plan", "--ranges", "--size", "8x16", "--epsilon", "1", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "all rectangles" in out and len(table_rows(out)) >= 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ranges", "--size", "64", "--epsilon", "1"], "--ranges needs --delta"),
        (["--ranges", "--epsilon", "1", "--delta", "1e-6"], "--ranges needs --size"),
        (["--ranges", "--size", "0", "--epsilon", "1", "--delta", "1e-6"], "--size must be N"),
        (["--size", "64", "--epsilon", "1", "--horizon", "5"], "--size needs --ranges"),
        (["--epsilon", "1"], "--horizon is required"),
    ],
)
def test_plan_ranges_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["plan", *argv]) == 2
    assert message in capsys.readouterr().err


def test_plan_ranges_workload_errors_name_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = tmp_path / "q.csv"
    q.write_text("0,9\n0,64\n")
    argv = ["plan", "--ranges", "--size", "64", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--workload", str(q)]) == 2
    assert "q.csv: line 2: hi = 64 is outside 0..63" in capsys.readouterr().err
