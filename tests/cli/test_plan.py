"""``dpcount plan`` and ``dpcount count`` with every mechanism."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.analysis import compare
from dpcount.cli import main
from dpcount.counting.registry import MECHANISMS, build_mechanism
from dpcount.privacy import Budget


def test_plan_prints_ranking_and_recommendation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--horizon", "100000", "--epsilon", "0.5", "--delta", "1e-8"]) == 0
    out = capsys.readouterr().out
    best = compare(100000, budget=Budget(epsilon=0.5, delta=1e-8))[0]
    assert "ranked by MSE" in out
    assert f"Recommendation: {best.label}" in out
    assert f"dpcount count INPUT {best.command()}" in out
    for label in ("honaker", "smooth-binary", "input", "binary"):
        assert label in out


@pytest.mark.parametrize("delta", [None, "1e-8"])
def test_plan_says_what_count_auto_takes_for_whole_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], delta: str | None
) -> None:
    """The plan's line for whole-number data names the mechanism count --mechanism auto
    then runs (its stderr summary), from the one choice function."""
    budget = ["--epsilon", "0.5"] + ([] if delta is None else ["--delta", delta])
    assert main(["plan", "--horizon", "500", *budget]) == 0
    out = " ".join(capsys.readouterr().out.split())
    label, rest = out.split("`dpcount count --mechanism auto` takes ")[1].split(" with ", 1)
    noise = rest.split(" noise")[0]
    assert noise.startswith("discrete-")
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(500)))
    assert main(["count", str(src), *budget, "--output", str(tmp_path / "o.csv")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    row = next(
        r
        for r in compare(500, budget=Budget(epsilon=0.5, delta=None if delta is None else 1e-8))
        if r.label == label
    )
    name = {"kary": "KaryTree", "binary": "BinaryTree", "honaker": "Honaker"}[row.mechanism]
    assert f"mechanism {name}(" in err and "chosen by --mechanism auto" in err
    assert f"noise={noise})" in err
    if row.k is not None:
        assert f"k={row.k}" in err


def test_plan_linf_pure(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--horizon", "1000", "--epsilon", "1", "--metric", "linf"]
    assert main([*argv, "--format", "csv"]) == 0
    table = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert {r["noise"] for r in table} == {"Laplace"}  # pure DP: no Gaussian row
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bound on the largest error" in out


def test_plan_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--horizon", "0", "--epsilon", "1"]) == 2
    assert "horizon must be >= 1, got 0" in capsys.readouterr().err
    assert main(["plan", "--horizon", "10", "--epsilon", "1", "--delta", "2"]) == 2
    assert "delta must be in (0, 1), got 2.0" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["sqrt", "honaker", "smooth-binary", "input"])
def test_count_with_every_new_mechanism(name: str, tmp_path: Path) -> None:
    assert name in MECHANISMS
    src = tmp_path / "in.csv"
    src.write_text("x\n" + "".join(f"{i % 2}\n" for i in range(64)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", name, "--epsilon", "0.5", "--delta", "1e-6"]
    argv += ["--noise", "gaussian", "--seed", "4", "--digits", "17", "--output", str(out)]
    assert main(argv) == 0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    mech = build_mechanism(
        name,
        budget=Budget(
            epsilon=0.5, delta=1e-6, noise="gaussian", step_sensitivity=1.0, calibration=None
        ),
        horizon=64,
        rng=0,
        k=19,
        subtract=True,
    )
    std = np.array([float(r["std"]) for r in rows])
    np.testing.assert_allclose(std, np.sqrt(mech.variances()), rtol=1e-15)


def test_count_stdin_with_sqrt_writes_plain_floats() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpcount",
            "count",
            "-",
            "--horizon",
            "5",
            "--mechanism",
            "sqrt",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--noise",
            "gaussian",
            "--calibration",
            "analytic",
        ],
        input="1\n0\n1\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "t,private_count,std"
    for i, line in enumerate(lines[1:], start=1):
        t, value, std = line.split(",")
        assert int(t) == i
        float(value), float(std)  # no "np.float64(...)" reprs


def test_plan_shows_certificate_ratios_for_gaussian_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--horizon", "1024", "--epsilon", "1", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    rows = compare(1024, budget=Budget(epsilon=1.0, delta=1e-6))
    blt = next(r for r in rows if r.label == "blt")
    assert blt.certificate is not None
    assert "vs best" in out and "vs limit" in out and "n/a" in out
    assert f"{blt.certificate.ratio_to_best:.2f}" in out  # 1.07: BLT vs the dense optimum
    assert "dense mean optimum" in out and "not a bound at this T" in out
    assert main(["plan", "--horizon", "1024", "--epsilon", "1"]) == 0
    assert "vs best" not in capsys.readouterr().out  # pure DP: Laplace rows only


# -- issue 34, item 5: never cut, exported, plain column names ---------------------------------

PLAN = ["plan", "--horizon", "1024", "--epsilon", "1", "--delta", "1e-6"]


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, str]:
    assert main([*PLAN, *extra]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_plan_csv_parses_into_the_numbers_of_json(capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import json

    pd = pytest.importorskip("pandas")
    csv_out, csv_err = _plan(capsys, "--format", "csv")
    table = pd.read_csv(io.StringIO(csv_out))
    body = json.loads(_plan(capsys, "--format", "json")[0])
    from_json = pd.DataFrame(body["rows"], columns=[c["name"] for c in body["columns"]])
    pd.testing.assert_frame_equal(table, from_json, check_dtype=False)  # bit for bit
    assert list(table.columns[:7]) == ["rank", "mechanism", "noise", "calibration", "rmse",
                                       "max_std", "max_error"]  # fmt: skip
    rows = compare(1024, budget=Budget(epsilon=1.0, delta=1e-6))
    assert table["rmse"].tolist() == [float(np.sqrt(r.mse)) for r in rows]  # full precision
    assert table["loss_vs_best"].isna().tolist() == [r.certificate is None for r in rows]
    assert "Recommendation:" in csv_err and "Recommendation:" not in csv_out  # notes aside
    assert all(c["description"] for c in body["columns"][4:])  # a legend for every figure
    assert body["recommendation"][0].startswith("Recommendation: ")


def test_plan_table_is_never_cut_in_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: 13 cells cut to '…' (one a number, 1.697e+…) in an 80-column terminal
    or a file. Every value of the ranking is printed whole, every line fits (but a
    command to copy), and every column is explained."""
    import json

    monkeypatch.setenv("COLUMNS", "80")
    out, _ = _plan(capsys)
    assert "…" not in out
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines if "dpcount count INPUT" not in line)
    body = json.loads(_plan(capsys, "--format", "json")[0])
    from dpcount._cli._report import Column, Kind, shown

    columns = [Column(c["name"], c["header"], Kind.TEXT) for c in body["columns"]]
    kinds = {"rank": Kind.INT, "mechanism": Kind.TEXT, "noise": Kind.TEXT}
    for c in columns:
        if c.name.startswith("loss_vs"):
            continue  # ratios: checked below
        kind = kinds.get(c.name, Kind.TEXT if c.name == "calibration" else Kind.NUMBER)
        for row in body["rows"]:
            assert shown(Column(c.name, c.header, kind), row[c.name]) in out, (c.name, row)
    for c in body["columns"][4:]:
        assert f"{c['header']}: " in " ".join(lines)  # the legend
    assert "÷" not in "".join(line[:20] for line in lines)  # no jargon headers


def test_plan_next_row_is_said_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "(next: …, 1× worse by this metric)" for a 0.04% difference."""
    from dpcount._cli.plan import _how_much_worse

    assert _how_much_worse(1.0004) == "0.04% larger"
    assert _how_much_worse(1.25) == "25% larger"
    assert _how_much_worse(3.471) == "3.47 times as large"
    out, _ = _plan(capsys)
    assert "× worse" not in out and "  next: " in out


def test_plan_markdown_is_a_pipe_table(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _plan(capsys, "--format", "markdown")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    rows = compare(1024, budget=Budget(epsilon=1.0, delta=1e-6))
    assert len(table) == 2 + len(rows)  # header, alignment, one line per row
    assert table[0].startswith("| # | mechanism | noise | calibration | RMSE | largest std |")
    assert f"| 1 | {rows[0].label} |" in out and "- vs best: " in out


def _count_max_std(command: str, T: int, tmp_path: Path) -> float:
    """Run ``dpcount count INPUT <command>`` on T rows; the largest std it prints."""
    src = tmp_path / "in.csv"
    src.write_text("x\n" + "".join(f"{i % 3}\n" for i in range(T)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), *command.split(), "--seed", "3", "--digits", "17"]
    assert main([*argv, "--output", str(out)]) == 0
    with out.open() as fh:
        return max(float(r["std"]) for r in csv.DictReader(fh))


def test_plan_max_metric_ranks_the_max_presets_and_their_command_reproduces_them(
    tmp_path: Path,
) -> None:
    """By a max metric the BLT family's max-objective presets are ranked (issue 33
    item 2), each row's copy-paste command builds it: its largest std is the row's."""
    T = 300
    budget = Budget(epsilon=1.0, delta=1e-6)
    rows = compare(T, budget=budget, metric="max_variance", certificates=False)
    by_label = {r.label: r for r in rows}
    for name in ("blt", "normalized-blt", "row-scaled-blt"):  # all three differ at 300
        assert by_label[f"{name} (max)"].objective == "max"
        assert by_label[name].objective is None
        assert by_label[f"{name} (max)"].max_variance != by_label[name].max_variance
    mean, best = by_label["row-scaled-blt"], by_label["row-scaled-blt (max)"]
    assert best.max_variance < mean.max_variance
    assert "--mechanism row-scaled-blt --objective max" in best.command()
    got = _count_max_std(best.command(), T, tmp_path)
    assert got == pytest.approx(np.sqrt(best.max_variance), rel=1e-13)
    assert got != pytest.approx(np.sqrt(mean.max_variance), rel=1e-6)  # not the mean preset


@pytest.mark.slow
def test_plan_recommends_the_max_row_scaled_blt_at_16384(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The issue's figure: at 16384 the max metric's best is the row-scaled BLT's max
    preset (max loss 14.921; the column-normalized BLT it used to recommend: 15.646), and
    the printed command reproduces its largest std."""
    argv = ["plan", "--horizon", "16384", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--metric", "max_variance"]) == 0
    out = capsys.readouterr().out
    assert "Recommendation: row-scaled-blt (max)" in out and "max loss 14.921" in out
    line = next(x for x in out.splitlines() if "dpcount count INPUT" in x)
    command = line.split("dpcount count INPUT", 1)[1]
    largest = float(out.split("largest std ", 1)[1].split(",")[0])
    assert _count_max_std(command, 16384, tmp_path) == pytest.approx(largest, rel=1e-3)
    mse_labels = {r.label for r in compare(1024, budget=Budget(epsilon=1.0, delta=1e-6))}
    assert not any(label.endswith("(max)") for label in mse_labels)  # by MSE: not listed
    # the column-normalized BLT ships one parameter set for both objectives at 16384:
    # no repeated row
    assert "normalized-blt (max)" not in out and "normalized-blt " in out
