"""Bad input to the CSV reader and every CLI subcommand.

In-process through ``dpcount.cli.main([...])``: bad input returns exit status 2 with
exactly one line ``dpcount: error: ...`` on stderr (naming the option, or the file and
line), and no traceback. A few runs through a subprocess prove the same for a user.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpcount.cli import SUBCOMMANDS, main
from dpcount.counting import KaryTree
from dpcount.io import Condition, CSVError, SeriesReader, parse_where
from tests.properties_support import assert_rejects

COVERED = {
    "dpcount.io": {
        "CSVError",
        "SeriesReader",
        "csv_rows",
        "parse_number",
        "starts_like_number",
        "Condition",
        "parse_where",
    },
    # run_experiment: through `dpcount reproduce` and directly below
    "dpcount.experiments": {"run_experiment"},
}

#: every subcommand gets at least one bad-input case below (checked by a test)
CLI_COVERED = {"count", "demo", "plan", "histogram", "ranges", "reproduce"}
CLI_COVERED |= {"keyed"}  # bad-input cases in tests/keyed/test_cli.py
CLI_COVERED |= {"sample"}  # bad-input cases in tests/cli/test_dashboard.py


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``main(argv)``; assert exit 2 and a single ``dpcount: error:`` line; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("dpcount: error: "), err
    assert "Traceback" not in err
    return lines[0]


# -- the CSV reader ---------------------------------------------------------------------------


@st.composite
def csv_column(draw: st.DrawFn) -> tuple[str, list[int], bool]:
    """A valid one-column CSV with random formatting; returns (text, values, has header)."""
    values = draw(st.lists(st.integers(-(2**53), 2**53), min_size=1, max_size=12))
    header = draw(st.booleans())
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    lines = ["count"] if header else []
    for v in values:
        cell = draw(
            st.sampled_from([str(v), f'"{v}"', f" {v} ", f"{v}.0" if abs(v) < 2**50 else str(v)])
        )
        lines.append(cell)
        if draw(st.integers(0, 4)) == 0:
            lines.append("")  # blank lines are skipped
    text = newline.join(lines) + newline
    if draw(st.booleans()):
        text = "\ufeff" + text  # a byte-order mark (Excel) is not part of the first cell
    return text, values, header


@settings(max_examples=40)
@given(column=csv_column())
def test_valid_csv_is_read_exactly(column: tuple[str, list[int], bool]) -> None:
    text, values, _ = column
    read = [v for _, v in SeriesReader(io.StringIO(text, newline=""), source="in.csv")]
    assert read == [float(v) for v in values]
    assert all(float(v) == v for v in values)  # every value is exact in float64


MALFORMED = {
    "non-numeric": ("abc", r"could not read 'abc' as a number"),
    "nan": ("nan", r"missing value 'nan' in column .*--missing skip"),
    "inf": ("-inf", r"value '-inf' is not finite"),
    "overflow": ("1e400", r"value '1e400' is not finite"),
    "extra field": ("1,2", r"found 2 fields, expected 1"),
    "quoted comma": ('"1,000"', r"could not read '1,000' as a number"),
    "beyond 2^53": ("9007199254740993", r"integer 9007199254740993 is beyond 2\^53"),
    "empty quoted": ('" "', None),  # a blank record: skipped, not an error
}


@settings(max_examples=40)
@given(
    values=st.lists(st.integers(-1000, 1000), min_size=1, max_size=10),
    kind=st.sampled_from(sorted(MALFORMED)),
    position=st.integers(0, 10),
    header=st.booleans(),
)
@example(values=[1, 2], kind="extra field", position=0, header=False)
@example(values=[1, 2], kind="non-numeric", position=0, header=False)
@example(values=[1, 2], kind="quoted comma", position=0, header=False)
def test_a_malformed_line_is_named(
    values: list[int], kind: str, position: int, header: bool
) -> None:
    lines = [str(v) for v in values]
    position = min(position, len(lines))
    bad, message = MALFORMED[kind]
    lines.insert(position, bad)
    if header:
        lines.insert(0, "count")
    text = "\n".join(lines) + "\n"
    line_number = position + 1 + header
    reader = SeriesReader(io.StringIO(text, newline=""), source="in.csv")
    if message is None:
        assert [v for _, v in reader] == [float(v) for v in values]
        return
    if position == 0 and not header:  # the malformed line is the first line
        if kind == "non-numeric":  # a word first is a header, not an error
            assert [v for _, v in reader] == [float(v) for v in values]
            return
        if kind == "extra field":
            message = r"found 2 columns; choose one with --column"
    err = assert_rejects(lambda: list(reader), CSVError, rf"in.csv: line {line_number}: {message}")
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("12a\n1\n", None, r"line 1: could not read '12a' as a number \(a header must not"),
        ('"1,000"\n2\n', None, r"line 1: could not read '1,000'"),
        ("a,b\n1,2\n", None, r"line 1: found 2 columns; choose one with --column"),
        ("a,b\n1,2\n", "c", r"line 1: no column named 'c'"),
        ("a,b\n1,2\n3\n", "b", r"line 3: no field for column 'b'"),
        ("x\n" + "1" * 200_000 + "\n", None, r"line 2: malformed CSV \(field larger"),
        ("x\ny\n1\n", None, r"line 2: could not read 'y'"),
    ],
)
def test_malformed_csv_structure_is_named(text: str, column: str | None, message: str) -> None:
    """Before: a first line '12a' or '"1,000"' was silently taken as a header (its value lost),
    a BOM made the first value a header, and a huge field raised csv.Error (a traceback)."""
    reader = SeriesReader(io.StringIO(text, newline=""), column, source="in.csv")
    assert_rejects(lambda: list(reader), CSVError, rf"in.csv: {message}")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (3, TypeError, r"--where must be COLUMN=VALUE, .* \(a string\), got 3"),
        ("weather", ValueError, r"--where must be COLUMN=VALUE, COLUMN!=VALUE, 'COLUMN in"),
        ("weather in ", ValueError, r"--where must be COLUMN=VALUE"),
        (" = rain", ValueError, r"--where ' = rain' names no column"),
        ("!=sun", ValueError, r"--where '!=sun' names no column"),
    ],
)
def test_where_conditions_are_validated(text: object, error: type[Exception], message: str) -> None:
    assert_rejects(lambda: parse_where(text), error, message)


_WORD = (
    st.text("abcxyz_ 0123", min_size=1, max_size=6)
    .map(str.strip)
    .filter(lambda w: w and " in " not in f" {w} " and w not in ("not", "in"))
)


@settings(max_examples=30)
@given(column=_WORD, values=st.lists(_WORD, min_size=1, max_size=3), negate=st.booleans())
def test_where_conditions_read_back_their_own_text(
    column: str, values: list[str], negate: bool
) -> None:
    """``Condition.text()`` is the ``--where`` spelling that parses to the same condition;
    a cell passes iff it is (or, negated, is not) one of the values."""
    condition = Condition(column, tuple(values), negate)
    assert parse_where(condition.text()) == condition
    assert condition.matches(values[0]) is not negate
    assert condition.matches(values[0] + "!") is negate


def test_undecodable_bytes_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"x\n1\n\xe9\n")
    with path.open(encoding="utf-8", newline="") as fh:
        assert_rejects(
            lambda: list(SeriesReader(fh, source="latin1.csv")), CSVError, r"latin1.csv: not UTF-8"
        )


# -- count --------------------------------------------------------------------------------------


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=csv_column(), seed=st.integers(0, 2**32))
def test_count_releases_exactly_what_the_library_releases(
    tmp_path: Path, column: tuple[str, list[int], bool], seed: int
) -> None:
    text, values, _ = column
    src = tmp_path / "in.csv"
    src.write_bytes(text.encode("utf-8"))
    out = tmp_path / "out.csv"
    assert (
        main(["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", str(seed),
              "--output", str(out)]) == 0
    )  # fmt: skip
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    released = np.array([float(r["private_count"]) for r in rows])
    # Whole-number data: the CLI's default is discrete Laplace noise (the safe path).
    expected = KaryTree(len(values), epsilon=1.0, noise="discrete-laplace", rng=seed).release(
        np.array(values, dtype=np.float64)
    )
    np.testing.assert_array_equal(released, expected)


COUNT_ERRORS = [
    ("1\n12a\n", [], r"line 2: could not read '12a'"),
    ("x\n9007199254740993\n", [], r"line 2: integer 9007199254740993 is beyond 2\^53"),
    ("x\n0.5\n", ["--noise", "discrete-laplace"], r"x must hold whole numbers.*step 1 holds 0.5"),
    ("1\n", ["--epsilon", "abc"], r"argument --epsilon: expected a number, got 'abc'"),
    ("1\n", ["--k", "1.5"], r"argument --k: invalid int value: '1.5'"),
    ("1\n", ["--mechanism", "bogus"], r"argument --mechanism: invalid choice: 'bogus'"),
    (
        "1\n",
        ["--epsilon", "1e-320", "--noise", "laplace"],
        r"--epsilon must be at least 2\.2250738585072014e-308 \(a normal float\), got 1e-320",
    ),
    # auto ranks with the closed forms first, which name the scale that leaves the float range
    ("1\n", ["--epsilon", "1e-320"], r"--epsilon must be at least .* \(a normal float\)"),
    ("1\n", ["--epsilon", "nan"], r"epsilon must not be NaN, got nan"),
    ("1\n", ["--delta", "1"], r"delta must be in \(0, 1\), got 1.0"),
    ("1\n", ["--sensitivity", "0"], r"error: --sensitivity must be > 0, got 0.0"),
    ("1\n", ["--seed", "-1"], r"error: --seed must be >= 0, got -1"),
    ("1\n", ["--calibration", "bogus", "--noise", "laplace"], r"calibration must be .*'bogus'"),
    (
        "1\n",
        ["--noise", "discrete-laplace", "--sensitivity", "0.5"],
        r"--sensitivity must be a whole number for --noise discrete-laplace",
    ),
    ("", [], r"no data rows"),
]


@pytest.mark.parametrize(("content", "extra", "message"), COUNT_ERRORS)
def test_count_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, extra: list[str], message: str
) -> None:
    src = tmp_path / "in.csv"
    src.write_text(content)
    argv = ["count", str(src), "--epsilon", "1"]
    line = one_line_error(capsys, [*argv, *extra])
    assert re.search(message, line), line


def test_count_stdin_errors_name_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\ufeff1\n2\nabc\n"))
    line = one_line_error(capsys, ["count", "-", "--epsilon", "1", "--horizon", "5"])
    assert "stdin: line 3: could not read 'abc'" in line


# -- the other subcommands --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--horizon", "0", "--epsilon", "1"], r"horizon must be >= 1, got 0"),
        (["plan", "--horizon", "x", "--epsilon", "1"], r"argument --horizon: invalid int"),
        (["plan", "--horizon", "10", "--epsilon", "1", "--beta", "2"], r"beta must be in \(0, 1\)"),
        (
            ["plan", "--horizon", "10", "--epsilon", "1", "--metric", "x"],
            r"--metric: invalid choice",
        ),
        (
            ["plan", "--horizon", str(10**23), "--epsilon", "1"],
            r"horizon must be <= 9007199254740992",
        ),
        (["demo", "--epsilon", "0", "--replicates", "2"], r"epsilon must be > 0, got 0.0"),
        (["demo", "--replicates", "1"], r"replicates must be >= 2, got 1"),
        (["demo", "--replicates", "2", "--seed", "-1"], r"error: --seed must be >= 0, got -1"),
        (["reproduce", "bogus"], r"unknown experiment 'bogus'"),
        (["reproduce", "elders-constants", "--seed", "-1"], r"seed must be >= 0, got -1"),
        (["reproduce", "--seed", "x"], r"argument --seed: invalid int value: 'x'"),
        (["bogus"], r"argument COMMAND: invalid choice: 'bogus'"),
        ([], r"the following arguments are required: COMMAND"),
    ],
)
def test_subcommand_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    """Before: usage errors printed the usage block and raised SystemExit (no return value)."""
    monkeypatch.chdir(tmp_path)  # were a check missing, nothing would be written here
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line


def test_help_and_version_return_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["count", "--help"]) == 0
    assert "usage:" in capsys.readouterr().out


EVENTS = "t,item\n0,a\n1,b\n2,a\n"


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("\ufefft,item\n0,c\n", [], r"line 2: item 'c' is not in the universe"),
        ("t,item\n0,a,extra\n", [], r"line 2: found 3 fields, the header has 2"),
        ("t,item\n0\n", [], r"line 2: too few fields \(1\)"),
        ('t,item\n"0,a"\n', [], r"line 2: too few fields \(1\)"),
        ("t,item\nx,a\n", [], r"line 2: could not read 'x' as a time"),
        ("t,item\nnan,a\n", [], r"line 2: missing time 'nan' \(pass --missing skip"),
        ("t,item\ninf,a\n", [], r"line 2: time 'inf' is not finite"),
        ("t,item\n1e300,a\n", [], r"line 2: time 1e300 falls more than 1e\+12 steps"),
        ("time,item\n0,a\n", [], r"line 1: no column named 't'"),
        ("", [], r"no header row"),
        (EVENTS, ["--step-width", "0"], r"--step-width must be > 0, got '0'"),
        (EVENTS, ["--step-width", "-1"], r"--step-width must be > 0, got '-1'"),
        (EVENTS, ["--start", "nan"], r"--start: time 'nan' is not finite"),
        (EVENTS, ["--horizon", "0"], r"--horizon must be >= 1, got 0"),
        (EVENTS, ["--items", "a,a"], r"item 'a' is listed twice"),
        (EVENTS, ["--k", "1"], r"k must be >= 2, got 1"),
    ],
)
def test_histogram_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, extra: list[str], message: str
) -> None:
    """Before: a BOM hid the header's first column, an extra field was ignored silently,
    --step-width 0 raised ZeroDivisionError and a far time raised OverflowError/MemoryError."""
    src = tmp_path / "events.csv"
    src.write_text(content, encoding="utf-8")
    argv = [
        "histogram",
        str(src),
        "--time-column",
        "t",
        "--item-column",
        "item",
        "--items",
        "a,b",
        "--epsilon",
        "1",
        "--output",
        str(tmp_path / "out.csv"),
    ]
    line = one_line_error(capsys, [*argv, *extra])
    assert re.search(message, line), line


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        ("lo,hi\n0.5,3\n", r"line 2: bounds must be integers"),
        (
            "1.5,3\n0,1\n",
            r"line 1: bounds must be integers",
        ),  # not a header: it starts like a query
        ("a,b\nx,y\n0,1\n", r"line 2: bounds must be integers, got \['x', 'y'\]"),
        ("lo,hi\n99999999999999999999,1\n", r"line 2: bounds out of range"),
        ("lo,hi\n0\n", r"line 2: expected 2 fields, found 1"),
        ("lo,hi\n0,8\n", r"q.csv: line 2: hi = 8 is outside 0..7"),
        ("lo,hi\n3,1\n", r"q.csv: line 2: lo = 3 is after hi = 1"),
        ("lo,hi\n", r"no queries"),
    ],
)
def test_ranges_query_errors_are_one_line_and_release_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queries: str, message: str
) -> None:
    """Before: a malformed first query was skipped as a header, any number of leading
    non-integer lines were skipped, a huge bound raised OverflowError, and bad bounds were
    found only after the histogram had been released and written."""
    np.save(tmp_path / "x.npy", np.arange(8.0))
    (tmp_path / "q.csv").write_text(queries)
    out = tmp_path / "released.csv"
    argv = [
        "ranges",
        str(tmp_path / "x.npy"),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--queries",
        str(tmp_path / "q.csv"),
        "--output",
        str(out),
    ]
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line
    assert not out.exists()  # nothing was released


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("not an npy"), r"x.npy: not a .npy file of numbers"),
        (lambda p: np.save(p, np.array([1, None], dtype=object), allow_pickle=True), r"not a .npy"),
        (lambda p: np.save(p, np.ones((2, 2, 2))), r"expected a non-empty 1-D or 2-D array"),
        (lambda p: np.save(p, np.array(["a", "b"])), r"x must hold real numbers"),
        (
            lambda p: np.save(p, np.array([1.0, np.nan])),
            r"x must be finite; index \(1,\) holds nan",
        ),
        (lambda p: np.save(p, np.array([2**60, 1])), r"x must hold integers of magnitude <= 2\^53"),
    ],
)
def test_ranges_bad_histograms_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    path = tmp_path / "x.npy"
    make(path)
    argv = ["ranges", str(path), "--epsilon", "1", "--delta", "1e-6", "--output", "-"]
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line


@pytest.mark.parametrize("level", ["0", "1", "nan", "1.5"])
def test_ranges_level_is_checked_even_without_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    np.save(tmp_path / "x.npy", np.arange(8.0))
    argv = [
        "ranges",
        str(tmp_path / "x.npy"),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--level",
        level,
        "--output",
        str(tmp_path / "o.npy"),
    ]
    assert "level must" in one_line_error(capsys, argv)


def test_every_subcommand_has_bad_input_cases() -> None:
    assert set(SUBCOMMANDS) <= CLI_COVERED, set(SUBCOMMANDS) - CLI_COVERED


def test_run_experiment_validates_its_arguments(tmp_path: Path) -> None:
    """Before: a negative or fractional seed was passed on to the experiment."""
    from dpcount.experiments import run_experiment

    def run(**kw: Any) -> Any:
        return run_experiment(**{"name": "elders-constants", "quick": True, "out": tmp_path, **kw})

    assert_rejects(lambda: run(name="bogus"), ValueError, r"experiment must be one of")
    assert_rejects(lambda: run(seed=-1), ValueError, r"seed must be >= 0, got -1")
    assert_rejects(lambda: run(seed=1.5), TypeError, r"seed must be an integer, got 1.5")
    assert_rejects(lambda: run(quick=1), TypeError, r"quick must be a bool, got 1")


# -- through a subprocess: what a user sees --------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        (["count", "-", "--epsilon", "1", "--horizon", "3"], "1\n2\n12a\n", "stdin: line 3"),
        (["count", "-", "--epsilon", "abc"], "", "argument --epsilon"),
        (["plan", "--horizon", "10", "--epsilon", "1", "--delta", "2"], "", "delta must be in"),
    ],
)
def test_no_traceback_reaches_the_user(argv: list[str], stdin: str, message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpcount", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("dpcount: error: ") and message in lines[0]
    assert "Traceback" not in proc.stderr
