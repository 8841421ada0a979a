"""``dpcount ranges``: files in, histogram and answers out, exact metrics, one-line errors."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.ranges import CorrelatedPerturbation, TreeMechanism, total_squared_error


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_npy_with_queries_and_csv_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.arange(20)
    np.save(tmp_path / "h.npy", x)
    (tmp_path / "q.csv").write_text("lo,hi\n0,19\n3,5\n\n7,7\n")
    out = tmp_path / "out.csv"
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--queries", str(tmp_path / "q.csv"), "--seed", "4", "--output", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    answers = list(csv.DictReader(captured.out.splitlines()))
    assert [(a["lo"], a["hi"]) for a in answers] == [("0", "19"), ("3", "5"), ("7", "7")]
    # whole-number counts: exact integer noise by default, no note
    mech = CorrelatedPerturbation(20, epsilon=1.0, delta=1e-6, noise="discrete-gaussian")
    assert "note:" not in captured.err and "discrete Gaussian" in captured.err
    for a in answers:
        lo, hi = int(a["lo"]), int(a["hi"])
        assert float(a["std"]) == pytest.approx(np.sqrt(mech.range_variance(lo, hi)))
        assert float(a["ci_low"]) < float(a["answer"]) < float(a["ci_high"])
    rows = read_csv(out)
    assert len(rows) == 20
    values = np.array([float(r["noisy_count"]) for r in rows])
    # Consistency: answers are sums of the released histogram.
    assert float(answers[1]["answer"]) == pytest.approx(values[3:6].sum())
    assert float(rows[0]["std"]) == pytest.approx(mech.sigma)
    assert "total squared error" in captured.err
    assert f"{total_squared_error(mech):.6g}" in captured.err.replace("\n", "")
    assert "Mahalanobis" in captured.err


def test_csv_input_2d_npy_and_answers_file(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text("day,count\n1,5\n2,7\n3,0\n4,2\n5,1\n")
    out = tmp_path / "o.npy"
    argv = ["ranges", str(tmp_path / "h.csv"), "--column", "count", "--epsilon", "0.5"]
    argv += ["--delta", "1e-5", "--mechanism", "tree", "--output", str(out)]
    assert main(argv) == 0
    assert np.load(out).shape == (5,)
    np.save(tmp_path / "m.npy", np.ones((6, 5)))
    (tmp_path / "q.csv").write_text("0,0,5,4\n2,1,3,3\n")
    answers = tmp_path / "a.csv"
    argv = ["ranges", str(tmp_path / "m.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--queries", str(tmp_path / "q.csv"), "--answers", str(answers)]
    argv += ["--output", str(tmp_path / "o2.csv"), "--level", "0.9"]
    assert main(argv) == 0
    rows = read_csv(answers)
    assert [r["row_hi"] for r in rows] == ["5", "3"]
    mech = CorrelatedPerturbation((6, 5), epsilon=1.0, delta=1e-6)
    assert float(rows[1]["std"]) == pytest.approx(np.sqrt(mech.range_variance([2, 1], [3, 3])))
    assert len(read_csv(tmp_path / "o2.csv")) == 30


@pytest.mark.parametrize(
    ("data", "extra", "noise", "why"),
    [
        (np.arange(8), [], "discrete-gaussian", None),
        (np.arange(8) + 0.5, [], "gaussian", "not whole numbers"),
        (np.arange(8), ["--noise", "gaussian"], "gaussian", None),
        (np.arange(8), ["--calibration", "analytic"], "gaussian", "--calibration analytic"),
        (np.ones((4, 4)), [], "gaussian", "2-D correlated"),
        (np.arange(8), ["--mechanism", "wavelet"], "discrete-gaussian", None),
    ],
)
def test_noise_default_is_integer_noise_on_whole_numbers(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: np.ndarray,
    extra: list[str],
    noise: str,
    why: str | None,
) -> None:
    """As ``dpcount count``: exact integer noise where the mechanism has it and the
    counts are whole numbers; otherwise continuous noise and a note naming why."""
    np.save(tmp_path / "h.npy", data)
    out = tmp_path / "o.npy"
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, *extra, "--seed", "1", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert np.load(out).shape == data.shape
    assert re.search(rf"noise={noise}[,)]", err)  # the mechanism line names the noise used
    assert ("discrete Gaussian, rho-zCDP" in err) == (noise == "discrete-gaussian")
    assert ("note: continuous Gaussian noise" in err) == (
        why is not None and "--noise" not in extra
    )
    if why is not None:
        assert why in err.replace("\n", " ")


def test_tree_std_column_matches_leaf_variance(tmp_path: Path) -> None:
    np.save(tmp_path / "h.npy", np.zeros(9))
    out = tmp_path / "o.csv"
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--mechanism", "tree", "--noise", "gaussian", "--output", str(out)]) == 0
    std = np.array([float(r["std"]) for r in read_csv(out)])
    np.testing.assert_allclose(std, TreeMechanism(9, epsilon=1.0, delta=1e-6).sigma, rtol=1e-12)


@pytest.mark.parametrize(
    ("files", "extra", "message"),
    [
        (
            {},
            ["--calibration", "paper", "--epsilon", "2"],
            "--epsilon must be <= 1 for --calibration paper",
        ),
        ({"q.csv": "0,1\n2\n"}, ["--queries", "{queries}"], "line 2: expected 2 fields, found 1"),
        ({"q.csv": "lo,hi\n0,x\n"}, ["--queries", "{queries}"], "line 2: bounds must be integers"),
        ({"q.csv": "5,2\n"}, ["--queries", "{queries}"], "q.csv: line 1: lo = 5 is after hi = 2"),
        (
            {"q.csv": "0,30\n"},
            ["--queries", "{queries}"],
            "q.csv: line 1: hi = 30 is outside 0..19",
        ),
        ({}, ["--delta", "2"], r"delta must be in (0, 1), got 2.0"),
        ({}, ["--mechanism", "eigen", "--input-big"], ""),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    extra: list[str],
    message: str,
) -> None:
    if "--input-big" in extra:
        np.save(tmp_path / "h.npy", np.zeros(2000))
        extra = ["--mechanism", "eigen"]
        message = "at most 1024 cells for EigenDesign"
    else:
        np.save(tmp_path / "h.npy", np.arange(20))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    extra = [e.format(queries=tmp_path / "q.csv") for e in extra]
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--output", str(tmp_path / "o.csv"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error:") and message in err
    assert "Traceback" not in err


def test_bad_npy_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "h.npy", np.zeros((2, 2, 2)))
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6", "--output", "-"]
    assert main(argv) == 2
    assert "expected a non-empty 1-D or 2-D array, got shape (2, 2, 2)" in capsys.readouterr().err
