"""`dpcount count` / `dpcount plan`: --participations K and --min-separation B."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting import SqrtFactorization
from dpcount.privacy import Participation


def test_count_calibrates_to_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(30)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", "sqrt", "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--noise", "gaussian", "--participations", "3", "--min-separation", "7"]
    assert main([*argv, "--seed", "2", "--output", str(out)]) == 0
    with out.open() as fh:
        std = np.array([float(r["std"]) for r in csv.DictReader(fh)])
    schema = Participation(max_participations=3, min_separation=7)
    mech = SqrtFactorization(30, epsilon=1.0, delta=1e-6, noise="gaussian", participation=schema)
    single = SqrtFactorization(30, epsilon=1.0, delta=1e-6, noise="gaussian")
    np.testing.assert_allclose(std, np.sqrt(mech.variances()), rtol=1e-15)
    assert std[-1] > np.sqrt(single.max_variance()) * 1.5  # the schema costs noise
    err = capsys.readouterr().err
    assert "user-level (3, 7)-participation" in err and "l2 exact" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--participations", "0"], "argument --participations: expected a whole number >= 1"),
        (["--min-separation", "x"], "argument --min-separation: expected a whole number >= 1"),
        (
            ["--mechanism", "binary", "--participations", "4", "--min-separation", "4"],
            "--participations 4 with --min-separation 4 do not fit in 10 steps (at most 3",
        ),
        (["--participations", "2"], "--mechanism auto ranks the mechanisms for one participation"),
        (
            ["--mechanism", "binary", "--participations", "2", "--delta", "1e-6",
             "--noise", "laplace", "--calibration", "pld"],
            "--calibration pld is computed for one participation's sensitivity profile",
        ),
    ],
)  # fmt: skip
def test_count_flag_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("1\n" * 10)
    assert main(["count", str(src), "--epsilon", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error:") and message in err


def test_plan_takes_the_flags_and_says_what_it_cannot_rank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "--horizon", "64", "--epsilon", "1"]
    assert main([*argv, "--participations", "1", "--min-separation", "9"]) == 0
    capsys.readouterr()
    assert main([*argv, "--participations", "2", "--min-separation", "9"]) == 2
    assert "--participations > 1: the ranking" in capsys.readouterr().err
    assert main([*argv, "--participations", "9", "--min-separation", "9"]) == 2
    assert "do not fit in 64 steps" in capsys.readouterr().err
