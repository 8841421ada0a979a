"""Output a user can use as-is (issue 13, items 1-3 and 15): the input's time column
in the output, ISO dates bucketed by ``--step``, ``--missing``, post-processing with
an honest std, and ``--plot``."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpcount
from dpcount.cli import main
from dpcount.counting import KaryTree
from dpcount.postprocess import clamp, isotonic_pav, monotone, round_half_even

SRC = str(Path(dpcount.__file__).resolve().parents[1])
ENTRY = Path(sys.executable).parent / "dpcount"


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def kary(argv: list[str]) -> list[str]:
    return [*argv, "--mechanism", "kary", "--epsilon", "1", "--seed", "5"]


# -- the time column ------------------------------------------------------------------------------


def test_count_keeps_the_time_column_under_its_name(tmp_path: Path) -> None:
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("YEAR,SUNACTIVITY\n1700,5\n1701,11\n1702,16\n1703,23\n")
    argv = kary(["count", str(src), "--column", "SUNACTIVITY", "--time-column", "YEAR"])
    assert main([*argv, "--output", str(out)]) == 0
    got = rows(out)
    assert list(got[0]) == ["t", "YEAR", "private_count", "std"]
    assert [r["YEAR"] for r in got] == ["1700", "1701", "1702", "1703"]
    # the release is the one without the time column (same seed)
    plain = tmp_path / "p.csv"
    argv = kary(["count", str(src), "--column", "SUNACTIVITY", "--output", str(plain)])
    assert main(argv) == 0
    assert [r["private_count"] for r in rows(plain)] == [r["private_count"] for r in got]


def test_iso_dates_are_bucketed_by_step(tmp_path: Path) -> None:
    """Installed entry point: daily buckets, a missing day is a step of 0, a step's value
    is the sum of its rows; times are ISO dates in the output."""
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("date,n\n2012-01-01,2\n2012-01-01T18:00:00,1\n2012-01-02,4\n2012-01-04,1\n")
    cmd = [str(ENTRY)] if ENTRY.exists() else [sys.executable, "-m", "dpcount"]
    argv = kary(["count", str(src), "--column", "n", "--time-column", "date", "--step", "1D"])
    argv += ["--sensitivity", "4"]  # each row is one event: bounded by --sensitivity
    done = subprocess.run(
        [*cmd, *argv, "--output", str(out)],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = rows(out)
    assert [r["date"] for r in got] == ["2012-01-01", "2012-01-02", "2012-01-03", "2012-01-04"]
    mech = KaryTree(4, epsilon=1.0, noise="discrete-laplace", step_sensitivity=4, rng=5)
    expected = mech.release(np.array([3, 4, 0, 1]))
    assert [int(r["private_count"]) for r in got] == expected.tolist()


def test_hourly_steps_and_numeric_steps(tmp_path: Path) -> None:
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("ts,n\n2012-01-01T08:10:00Z,1\n2012-01-01T10:59:59Z,1\n")
    argv = kary(["count", str(src), "--column", "n", "--time-column", "ts", "--step", "1h"])
    assert main([*argv, "--output", str(out)]) == 0
    assert [r["ts"] for r in rows(out)] == [  # pandas' bins: whole hours from midnight
        "2012-01-01T08:00:00", "2012-01-01T09:00:00", "2012-01-01T10:00:00"
    ]  # fmt: skip
    src.write_text("sec,n\n0,1\n25,1\n7,1\n")
    argv = kary(["count", str(src), "--column", "n", "--time-column", "sec", "--step", "10"])
    assert main([*argv, "--start", "0", "--output", str(out)]) == 0
    assert [r["sec"] for r in rows(out)] == ["0", "10", "20"]


def test_histogram_accepts_iso_dates_and_keeps_them(tmp_path: Path) -> None:
    src, out = tmp_path / "e.csv", tmp_path / "o.csv"
    src.write_text("date,weather\n2012-01-01,rain\n2012-01-02,sun\n2012-01-04,rain\n")
    argv = ["histogram", str(src), "--time-column", "date", "--item-column", "weather"]
    argv += ["--items", "rain,sun", "--step-width", "1D", "--epsilon", "1", "--seed", "1"]
    assert main([*argv, "--output", str(out)]) == 0
    got = rows(out)
    assert list(got[0])[:3] == ["t", "date", "std"]
    assert [r["date"] for r in got] == ["2012-01-01", "2012-01-02", "2012-01-03", "2012-01-04"]


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("d,n\n2012-01-01,1\n12,1\n", ["--step", "1D"], "line 3: time '12' mixes ISO dates"),
        (
            "d,n\n2012-01-01,1\n",
            ["--step", "3"],
            "ISO times need a duration or a calendar step for --step",
        ),
        ("d,n\n1,1\n", ["--step", "1D"], "numeric times need a plain number for --step"),
        ("d,n\n2012-13-01,1\n", ["--step", "1D"], "line 2: could not read '2012-13-01' as a time"),
        ("d,n\n1,1\n", ["--step", "0"], "--step must be > 0, got '0'"),
        (
            "d,n\n1,1\n",
            ["--step", "1 fortnight"],
            "--step must be a number, a duration (1D, 6h, 15min, 30s) or a calendar step",
        ),
    ],
)
def test_time_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: list[str], message: str
) -> None:
    src = tmp_path / "x.csv"
    src.write_text(text)
    argv = kary(["count", str(src), "--column", "n", "--time-column", "d", *extra])
    assert main(argv) == 2
    assert message in capsys.readouterr().err


DAYS = "date,n\n" + "".join(f"2020-01-{d:02d},{d % 4}\n" for d in range(1, 31) if d != 7)


@pytest.mark.parametrize(
    "flags",
    [
        ["--monotone"],
        ["--step", "1D"],
        ["--step", "1D", "--monotone", "--round"],
    ],
)
def test_whole_series_options_read_stdin_to_its_end(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
) -> None:
    """stdin with --monotone/--step is read to its end and gives the file's output (same
    seed); the horizon defaults to its steps (29 rows; with --step 1D 30 days, the
    missing 7th a step of 0)."""
    import io

    src = tmp_path / "x.csv"
    src.write_text(DAYS)
    argv = kary(["--column", "n", "--time-column", "date", *flags])
    assert main(["count", str(src), *argv]) == 0
    from_file = capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(DAYS))
    assert main(["count", "-", *argv]) == 0
    from_stdin = capsys.readouterr().out
    assert from_stdin == from_file
    lines = from_file.splitlines()
    assert len(lines) == 1 + (30 if "--step" in flags else 29)
    if "--monotone" in flags:
        shown = [float(line.split(",")[2]) for line in lines[1:]]
        assert shown == sorted(shown) and "raw_private_count" in lines[0]
    if "--step" in flags:
        assert lines[7].split(",")[:2] == ["7", "2020-01-07"]


def test_plot_reads_stdin_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    import io

    png = tmp_path / "p.png"
    monkeypatch.setattr(sys, "stdin", io.StringIO(DAYS))
    argv = kary(
        ["count", "-", "--column", "n", "--plot", str(png), "--output", str(tmp_path / "o")]
    )
    assert main(argv) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(rows(tmp_path / "o")) == 29


@pytest.mark.parametrize(
    ("flag", "reason"),
    [
        (["--monotone"], "the isotonic fit of a step changes with later rows"),
        (["--step", "1D"], "a step's sum is only known once the input is past it"),
        (["--plot", "p.png"], "the plot needs the true series of the whole input"),
    ],
)
def test_whole_series_options_are_refused_with_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str], reason: str
) -> None:
    src = tmp_path / "x.csv"
    src.write_text(DAYS)
    argv = kary(["count", str(src), "--column", "n", "--time-column", "date", *flag])
    ck, out = tmp_path / "ck", tmp_path / "o.csv"
    assert main([*argv, "--checkpoint", str(ck), "--output", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{flag[0]} is not available with --checkpoint: {reason}" in err
    assert not ck.exists() and not out.exists()


# -- missing values ----------------------------------------------------------------------------


def test_missing_values_error_skip_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("day,n\n1,3\n2,\n3,NA\n4,2\n")
    argv = kary(["count", str(src), "--column", "n", "--time-column", "day"])
    assert main([*argv, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "line 3: missing value '' in column 'n' (pass --missing skip" in err
    assert main([*argv, "--missing", "skip", "--output", str(out)]) == 0
    assert [r["day"] for r in rows(out)] == ["1", "4"]
    assert "2 row(s) with a missing value skipped" in capsys.readouterr().err
    assert main([*argv, "--missing", "zero", "--output", str(out)]) == 0
    expected = KaryTree(4, epsilon=1.0, noise="discrete-laplace", rng=5).release(
        np.array([3, 0, 0, 2])
    )
    assert [int(r["private_count"]) for r in rows(out)] == expected.tolist()
    assert "2 missing value(s) read as 0" in capsys.readouterr().err


# -- post-processing -----------------------------------------------------------------------------


def test_pav_equals_scipy_and_brute_force() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 40, 500):
        y = rng.normal(size=n) * 5 + np.arange(n) * 0.3
        fit = isotonic_pav(y)
        np.testing.assert_allclose(fit, monotone(y), rtol=0, atol=1e-9)
        assert (np.diff(fit) >= -1e-12).all()
        # optimality (KKT): each constant block of the fit holds the mean of its values
        blocks = np.split(np.arange(n), np.flatnonzero(np.diff(fit) > 1e-12) + 1)
        for b in blocks:
            assert fit[b[0]] == pytest.approx(y[b].mean(), abs=1e-9)
    assert isotonic_pav([3.0, 1.0, 2.0]).tolist() == [2.0, 2.0, 2.0]
    assert isotonic_pav([1.0, 3.0, 2.0]).tolist() == [1.0, 2.5, 2.5]


def test_monotone_fit_never_increases_the_l2_error_for_a_nondecreasing_truth() -> None:
    """For every draw (not on average): ‖P(r) − s‖₂ ≤ ‖r − s‖₂ when s is non-decreasing;
    and the fit usually helps a lot on a noisy tree release (checked against the raw
    error over 200 releases)."""
    rng = np.random.default_rng(1)
    T = 200
    mech = KaryTree(T, epsilon=0.5, noise="laplace", rng=rng)
    raw_err, fit_err = [], []
    for _ in range(200):
        x = rng.integers(0, 3, size=T)
        s = np.cumsum(x).astype(float)
        r = mech.release(x)
        e_raw = float(np.linalg.norm(r - s))
        e_fit = float(np.linalg.norm(monotone(r) - s))
        e_clamp = np.abs(clamp(r) - s)
        assert e_fit <= e_raw * (1 + 1e-12)
        assert (e_clamp <= np.abs(r - s) + 1e-12).all()
        raw_err.append(e_raw)
        fit_err.append(e_fit)
    assert np.mean(fit_err) < np.mean(raw_err)
    # and not for a truth that decreases: the guarantee needs non-negative steps
    s = np.array([5.0, 0.0])
    r = s.copy()
    assert np.linalg.norm(monotone(r) - s) > np.linalg.norm(r - s)


def test_round_is_within_half() -> None:
    y = np.array([-1.5, -0.5, 0.49, 2.5, 3.51])
    assert round_half_even(y).tolist() == [-2, 0, 0, 2, 4]
    with pytest.raises(ValueError, match="below 2\\^53"):
        round_half_even([2.0**60])


def test_count_post_processing_keeps_the_raw_release_and_its_std(tmp_path: Path) -> None:
    src, out, raw_out = tmp_path / "x.csv", tmp_path / "o.csv", tmp_path / "r.csv"
    src.write_text("n\n" + "".join(f"{i % 2}\n" for i in range(60)))
    argv = ["count", str(src), "--mechanism", "kary", "--noise", "laplace", "--epsilon", "0.2"]
    argv += ["--seed", "9"]
    assert main([*argv, "--output", str(raw_out)]) == 0
    post = ["--monotone", "--clamp", "--round"]
    assert main([*argv, *post, "--output", str(out)]) == 0
    got, raw = rows(out), rows(raw_out)
    assert list(got[0]) == ["t", "private_count", "raw_private_count", "raw_std"]
    r = np.array([float(x["private_count"]) for x in raw])
    assert [float(x["raw_private_count"]) for x in got] == r.tolist()
    assert [x["raw_std"] for x in got] == [x["std"] for x in raw]
    shown = np.array([int(x["private_count"]) for x in got])
    np.testing.assert_array_equal(shown, round_half_even(clamp(monotone(r))))
    assert (np.diff(shown) >= 0).all() and (shown >= 0).all()


def test_live_round_and_clamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("d,n\nmon,0\ntue,0\nwed,1\n"))
    argv = ["count", "-", "--column", "n", "--time-column", "d", "--horizon", "3"]
    argv += ["--mechanism", "binary", "--noise", "laplace", "--epsilon", "0.1", "--seed", "2"]
    assert main([*argv, "--clamp", "--round"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "t,d,private_count,raw_private_count,raw_std"
    for line in lines[1:]:
        _, _, shown, raw, _ = line.split(",")
        assert int(shown) == max(0, round(float(raw)))


# -- the plot --------------------------------------------------------------------------------------


def test_count_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    src, png = tmp_path / "x.csv", tmp_path / "p.png"
    src.write_text("date,n\n" + "".join(f"2020-01-{d:02d},{d % 4}\n" for d in range(1, 31)))
    argv = kary(["count", str(src), "--column", "n", "--time-column", "date", "--step", "1D"])
    assert main([*argv, "--monotone", "--plot", str(png), "--output", str(tmp_path / "o")]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "for the data owner, not for publication" in capsys.readouterr().err


def test_histogram_missing_time_or_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "e.csv", tmp_path / "o.csv"
    src.write_text("t,item\n0.5,a\n,b\n1.5,NA\n2.5,b\n")
    argv = ["histogram", str(src), "--time-column", "t", "--item-column", "item"]
    argv += ["--items", "a,b", "--epsilon", "1", "--seed", "1", "--output", str(out)]
    assert main(argv) == 2
    assert "line 3: missing time '' (pass --missing skip" in capsys.readouterr().err
    assert main([*argv, "--missing", "skip"]) == 0
    assert "2 events with a missing value skipped" in " ".join(capsys.readouterr().err.split())
    assert len(rows(out)) == 3


def test_checkpointed_count_takes_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("n\n1\n\n2\nNA\n1\n")  # the blank line is no row; NA is a missing value
    argv = kary(["count", str(src), "--column", "n", "--checkpoint", str(tmp_path / "ck")])
    assert main([*argv, "--output", str(out)]) == 2
    assert "line 5: missing value 'NA'" in capsys.readouterr().err
    (tmp_path / "ck").unlink(missing_ok=True)
    out.unlink(missing_ok=True)
    assert main([*argv, "--missing", "zero", "--output", str(out)]) == 0
    assert len(rows(out)) == 4
