"""``dpcount count --step`` on an event log: each row is one event, bounded by
--sensitivity (issue 30 item 5); ``--where`` in-lists and negations (issue 34 item 4);
rows outside steps 1..T dropped and reported, the rule of ``dpcount keyed`` too
(issue 34 item 6). Zero noise is not a CLI option: releases are checked against the
library with the same seed (same mechanism, same noise)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting import KaryTree

#: daily rain in mm: two days in January, one in February, one row far above 1 mm
RAIN = (
    "date,mm,weather\n"
    "2012-01-01,0.5,drizzle\n2012-01-01,55.9,rain\n2012-01-02,0,sun\n"
    "2012-02-10,3.2,rain\n2012-02-11,-0.2,fog\n"
)


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], text: str = RAIN
) -> tuple[list[dict[str, str]], str]:
    src, out = tmp_path / "rain.csv", tmp_path / "out.csv"
    src.write_text(text)
    status = main(["count", str(src), "--time-column", "date", "--epsilon", "1", "--seed", "3",
                   "--mechanism", "kary", "--output", str(out), *argv])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert status == 0, err
    return list(csv.DictReader(io.StringIO(out.read_text()))), err


def _kary(sums: list[float], **kw: object) -> list[float]:
    mech = KaryTree(len(sums), epsilon=1.0, k=19, rng=3, **kw)  # type: ignore[arg-type]
    out: list[float] = mech.release(np.array(sums)).tolist()
    return out


def test_each_row_is_cut_to_the_sensitivity_and_the_run_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: monthly sums of 55.9 mm were released under "epsilon=1" for a bound of 1,
    with no word; now each row is cut to [-1, 1], the cut is reported (exact, not
    private) and the guarantee names the per-event bound."""
    rows, err = _run(tmp_path, capsys, ["--column", "mm", "--step", "MS", "--noise", "laplace"])
    assert [r["date"] for r in rows] == ["2012-01-01", "2012-02-01"]
    got = [float(r["private_count"]) for r in rows]
    assert got == _kary([0.5 + 1.0 + 0.0, 1.0 - 0.2], noise="laplace")
    assert "cut: 2 row(s) above --sensitivity 1 in absolute value (weight 57.1)" in err
    assert "each row is one event, its value cut to at most 1 in absolute value" in err


def test_a_row_above_the_bound_can_be_refused_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "rain.csv"
    src.write_text(RAIN)
    argv = ["count", str(src), "--time-column", "date", "--column", "mm", "--step", "1D"]
    assert main([*argv, "--epsilon", "1", "--noise", "laplace", "--above-bound", "error"]) == 2
    err = capsys.readouterr().err
    assert "rain.csv: line 3: value 55.9 is above --sensitivity 1 in absolute value" in err
    assert main([*argv[:2], "--column", "mm", "--epsilon", "1", "--above-bound", "cut"]) == 2
    assert "--above-bound needs --step" in capsys.readouterr().err
    assert main([*argv, "--epsilon", "1", "--sensitivity", "-1", "--above-bound", "error"]) == 2
    assert "--sensitivity must be finite and > 0, got -1.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("where", "sums"),
    [
        (["weather in rain,drizzle"], [2, 1]),
        (["weather!=sun"], [2, 2]),
        (["weather not in sun,fog"], [2, 1]),
        (["weather!=sun", "weather!=fog"], [2, 1]),
    ],
)
def test_where_takes_a_list_and_a_negation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: list[str], sums: list[int]
) -> None:
    flags = [f for w in where for f in ("--where", w)]
    rows, err = _run(tmp_path, capsys, ["--step", "MS", *flags])
    assert [int(r["private_count"]) for r in rows] == _kary(sums, noise="discrete-laplace")
    assert f"row(s) not matching --where '{where[0]}'" in err or "--where weather!=" in err


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("weather", "--where must be COLUMN=VALUE, COLUMN!=VALUE, 'COLUMN in V1,V2'"),
        ("=rain", "--where '=rain' names no column"),
        ("colour in red,blue", "no --where column named 'colour'"),
        ("weather in hail,snow", "no row matches --where 'weather in hail,snow'"),
    ],
)
def test_where_errors_name_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, message: str
) -> None:
    src = tmp_path / "rain.csv"
    src.write_text(RAIN)
    argv = ["count", str(src), "--time-column", "date", "--step", "1D", "--epsilon", "1"]
    assert main([*argv, "--where", where]) == 2
    assert message in capsys.readouterr().err


def test_rows_outside_the_steps_are_dropped_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule (keyed's): rows before --start or after --horizon are dropped and
    counted. Before: "time is before --start" and "--horizon 2 is smaller than"."""
    argv = ["--step", "1D", "--start", "2012-01-02", "--horizon", "2"]
    rows, err = _run(tmp_path, capsys, argv)
    assert [r["date"] for r in rows] == ["2012-01-02"]
    assert [int(r["private_count"]) for r in rows] == _kary([1], noise="discrete-laplace")
    assert "dropped: 4 row(s) outside steps 1..2, before --start or after --horizon 2" in err
    rows, err = _run(
        tmp_path, capsys, ["--column", "n", "--horizon", "2"], "date,n\n1,1\n2,0\n3,1\n"
    )
    assert [r["date"] for r in rows] == ["1", "2"]
    assert "dropped: 1 row(s) after --horizon 2 (exact, not private)" in err
