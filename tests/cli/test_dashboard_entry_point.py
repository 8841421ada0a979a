"""Issue 22 through the installed ``dpcount`` script (``run_done``/``run_entry`` of
test_first_contact: the entry point next to the Python running the tests, with this
checkout's ``src`` first on ``PYTHONPATH``): integer output for integer noise
(item 3), and the items whose other tests call ``dpcount.cli.main`` in-process: the
auto choice and plan's command (item 4), the monotone fit's bias (item 5), a small
count's imports (item 7), and the smaller items 10 (checkpoint message, stdin row
numbers, histogram top count, ``--digits`` of count and keyed, keyed's line numbers).

Each assertion of those is the in-process test's (test_auto_choice, test_dashboard,
test_startup), run through the script.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcount.analysis.choice import choose
from dpcount.counting import KaryTree, UnboundedCounter
from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget, PrivacyWarning
from tests.cli.test_auto_choice import check_gaussian_bounds
from tests.cli.test_first_contact import ENTRY, run_done, run_entry
from tests.cli.test_startup import HEAVY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ENTRY.exists(), reason="the dpcount script is not installed"),
]


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _flat(text: str) -> str:
    return " ".join(text.split())


# -- item 3: integer noise, integer output ------------------------------------------------------

ROUNDED = (
    "honaker's estimate (an exact weighted average of integer-noised sums) is rounded to whole "
    "numbers, ties to even (post-processing: the guarantee is unchanged); the {std} column is "
    "the exact error of the unrounded estimate, and rounding moves each value by at most 0.5"
)


def _integers(cells: list[str]) -> NDArray[np.int64]:
    """The cells, each printed as an integer (no fraction, no exponent)."""
    assert all(c.lstrip("-").isdigit() for c in cells), cells
    return np.array(cells, dtype=np.int64)


def test_the_live_default_releases_whole_numbers(tmp_path: Path) -> None:
    """Before: the live default (doubling blocks of Honaker's estimator, discrete
    Laplace) printed fractions, here 4.333333333333333 at step 3. Now each release is
    the library's estimate rounded half to even; the std is the unrounded estimate's,
    and the run says so."""
    rows = [i % 3 for i in range(40)]
    argv = ["count", "-", "--epsilon", "1", "--seed", "0", "--digits", "17"]
    proc = run_entry(*argv, stdin=subprocess.PIPE)
    out, err = proc.communicate("".join(f"{v}\n" for v in rows), timeout=300)
    assert proc.returncode == 0, err
    counter = UnboundedCounter(
        inner="honaker", budget=Budget(epsilon=1.0, noise="discrete-laplace"), rng=0
    )
    stream = counter.stream()
    estimate = np.array([stream.update(v) for v in rows], dtype=np.float64)
    assert (estimate != np.round(estimate)).sum() > 20  # what the old run printed
    released = _integers([r["private_count"] for r in _rows(out)])
    np.testing.assert_array_equal(released, np.rint(estimate))
    assert np.abs(released - estimate).max() <= 0.5
    assert [float(r["std"]) for r in _rows(out)] == [counter.std_at(t) for t in range(1, 41)]
    assert ROUNDED.format(std="std") in _flat(err)
    assert "UnboundedCounter(inner=honaker" in err  # the default is Honaker's


def test_a_named_honaker_rounds_with_integer_noise_only(tmp_path: Path) -> None:
    """A file with --mechanism honaker and discrete Gaussian noise: whole numbers (the
    raw column too, under --clamp; the note names raw_std), also in a durable run
    (which releases step by step); with --noise gaussian the estimate stays a float
    and no note is given."""
    x = np.array([i % 4 for i in range(30)])
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{v}\n" for v in x))
    argv = ["count", str(src), "--mechanism", "honaker", "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--seed", "5", "--clamp"]
    status, out, err = run_done(*argv)
    assert status == 0, err
    budget = Budget(epsilon=1.0, delta=1e-6, noise="discrete-gaussian")
    estimate = build_mechanism("honaker", horizon=30, budget=budget, rng=5).release(x)
    assert (estimate != np.round(estimate)).any()
    table = _rows(out)
    np.testing.assert_array_equal(_integers([r["raw_private_count"] for r in table]),
                                  np.rint(estimate))  # fmt: skip
    np.testing.assert_array_equal(_integers([r["private_count"] for r in table]),
                                  np.maximum(np.rint(estimate), 0))  # fmt: skip
    assert ROUNDED.format(std="raw_std") in _flat(err)
    durable = tmp_path / "durable.csv"
    status, _, err = run_done(*argv, "--checkpoint", str(tmp_path / "ck"), "--output", str(durable))
    assert status == 0, err
    stream = build_mechanism("honaker", horizon=30, budget=budget, rng=5).stream()
    streamed = np.array([stream.update(v) for v in x.tolist()], dtype=np.float64)
    assert (streamed != np.round(streamed)).any()
    raw = [r["raw_private_count"] for r in _rows(durable.read_text())]
    np.testing.assert_array_equal(_integers(raw), np.rint(streamed))
    status, out, err = run_done(*argv, "--noise", "gaussian")
    assert status == 0, err
    # continuous noise: not rounded by dpcount (float-safe values are multiples of each
    # step's power-of-two grid, #30 item 4, which may be whole numbers)
    assert "rounded to whole numbers" not in _flat(err)


# -- item 4: the auto choice and plan's copy-paste line -----------------------------------------


def test_auto_with_delta_names_the_integer_rule_and_the_best_rows_cost(tmp_path: Path) -> None:
    T = 1000
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(T)))
    status, _, err = run_done(
        "count", str(src), "--epsilon", "1", "--delta", "1e-6", "--output", str(out)
    )
    assert status == 0, err
    err = _flat(err)
    assert "ranked first" not in err
    assert "the best by exact MSE among the mechanisms that take integer noise" in err
    check_gaussian_bounds(err, T, Budget(epsilon=1.0, delta=1e-6))


def test_plans_copy_paste_line_for_whole_numbers_is_the_integer_noise_command(
    tmp_path: Path,
) -> None:
    T = 300
    status, out, err = run_done("plan", "--horizon", str(T), "--epsilon", "1")
    assert status == 0, err
    line = next(x for x in out.splitlines() if "whole-number data (counts):" in x)
    command = line.split("dpcount count INPUT ", 1)[1].split()
    assert "--noise" in command and command[command.index("--noise") + 1] == "discrete-laplace"
    fractional = next(x for x in out.splitlines() if "fractional data:" in x)
    assert "--noise laplace" in fractional
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 4}\n" for i in range(T)))
    exact = ["--digits", "17"]  # every bit of the std
    status, a, err = run_done("count", str(src), *command, *exact)
    assert status == 0, err
    status, b, err = run_done("count", str(src), "--epsilon", "1", *exact)
    assert status == 0, err
    std_a = [float(r["std"]) for r in _rows(a)]
    np.testing.assert_array_equal(std_a, [float(r["std"]) for r in _rows(b)])
    choice = choose(T, budget=Budget(epsilon=1.0))
    assert choice.auto is not None
    np.testing.assert_allclose(np.mean(np.square(std_a)), choice.auto.mse, rtol=1e-12)


# -- item 5: --monotone states its bias --------------------------------------------------------


def test_monotone_states_its_bias_and_which_std_is_exact(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{int(i % 7 == 0)}\n" for i in range(40)))
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", "3"]
    status, out, err = run_done(*argv, "--monotone")
    assert status == 0, err
    err = _flat(err)
    assert "raw_std is the exact error of raw_private_count only" in err
    assert "no exact per-step error" in err and "bias" in err
    assert _rows(out)[0].keys() == {"t", "private_count", "raw_private_count", "raw_std"}
    status, help_text, _ = run_done("count", "--help")
    assert status == 0 and "BIASED per step" in _flat(help_text)


# -- item 6: dpcount.frame.private_counts is dpcount count --------------------------------------

_DAYS = ["2024-03-02", "2024-03-02", "2024-03-05", "2024-03-03", "2024-03-07", "2024-03-07"]
_CASES = [1, 2, 1, 4, 1, 3]
_BUCKETS = ["--column", "cases", "--time-column", "day", "--step", "1D"]
_FRAME_BUCKETS = {"value": "cases", "time": "day", "step": "1D"}
_PUBLIC = ["--start", "2024-03-01", "--horizon", "9"]


@pytest.mark.parametrize(
    ("rows", "argv", "kwargs"),
    [
        pytest.param(  # fractional data: continuous noise and its note; the fit's note
            {"x": [0.5 * (i % 5) for i in range(40)]},
            ["--column", "x", "--monotone", "--clamp", "--round"],
            {"value": "x", "monotone": True, "clamp": True, "round": True},
            id="fractional-monotone-clamp-round",
        ),
        pytest.param(  # step bucketing, a named Honaker: whole numbers and the rounding note
            {"day": _DAYS, "cases": _CASES},
            [*_BUCKETS, *_PUBLIC, "--mechanism", "honaker", "--clamp"],
            {**_FRAME_BUCKETS, "start": "2024-03-01", "horizon": 9, "mechanism": "honaker",
             "clamp": True},
            id="step-honaker-clamp",
        ),
        pytest.param(  # step bucketing with the start and horizon read off the data
            {"day": _DAYS, "cases": _CASES},
            [*_BUCKETS, "--delta", "1e-6"],
            {**_FRAME_BUCKETS, "budget": Budget(epsilon=1.0, delta=1e-6)},
            id="step-derived-delta",
        ),
    ],
)  # fmt: skip
def test_private_counts_is_the_cli(
    tmp_path: Path, rows: dict[str, list[object]], argv: list[str], kwargs: dict[str, object]
) -> None:
    """The same data and options through the installed script and through
    ``private_counts``: the same choice (mechanism and how auto chose), the same notes
    and warnings, the same columns and values."""
    pd = pytest.importorskip("pandas")
    from dpcount.frame import private_counts

    frame = pd.DataFrame(rows)
    src = tmp_path / "in.csv"
    frame.to_csv(src, index=False)
    status, out, err = run_done("count", str(src), "--epsilon", "1", "--seed", "6",
                                "--digits", "17", *argv)  # fmt: skip
    assert status == 0, err
    kwargs = {"budget": Budget(epsilon=1.0), **kwargs}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = private_counts(frame, rng=6, **kwargs)
    cli = _rows(out)
    # columns and values
    assert [c for c in cli[0] if c != "t"] == list(result.columns)
    for name in result.columns:
        got = result[name].tolist()  # with step=, the days are datetimes (issue 34 item 3)
        want = [pd.Timestamp(r[name]) if name == "day" else float(r[name]) for r in cli]
        assert got == want, name
    # the choice
    flat = _flat(err)
    assert f"mechanism {result.attrs['mechanism']}" in flat
    if result.attrs["choice"] is None:
        assert "chosen by" not in flat
    else:
        assert f"(chosen by --mechanism auto: {result.attrs['choice']})" in flat
    # the notes: each of the frame's is the CLI's, and the CLI has no other
    notes = [n.replace("step_sensitivity", "--sensitivity") for n in result.attrs["notes"]]
    assert flat.count("note: ") == len(notes)
    assert all(f"note: {n}" in flat or f"note: --monotone: {n}" in flat for n in notes)
    # the warnings: the CLI's stderr lines (the CLI spells the parameters as flags)
    assert {type(w.message) for w in caught} <= {PrivacyWarning}
    assert flat.count("warning: ") + flat.count("(floating-point noise") == len(caught)
    for w in caught:
        assert str(w.message).split(" (floating-point")[0] in flat.replace("--", "")
    assert notes or caught  # each case has something to say


# -- item 8: a fresh clone runs every test: the test extra and the shipped DPBench pieces -------

ROOT = Path(__file__).resolve().parents[2]


def test_the_test_extra_installs_what_the_tests_import() -> None:
    """``pip install -e '.[test]'`` is what CI runs: the optional libraries the tests
    import (frames, keyed engines, accounting) are in the ``test`` extra."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11+")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {re.split(r"[\[<>=!~ ]", req, maxsplit=1)[0] for req in extras["test"]}
    assert {"polars", "pandas", "pyarrow", "dask", "dp-accounting"} <= names
    assert any(req.startswith("dask[distributed]") for req in extras["test"])


def test_dpbench_pieces_ship_and_run_through_dpcount_ranges(tmp_path: Path) -> None:
    """Every DPBench file the tests load is in tests/data/dpbench (listed in its
    README), and the installed script releases one: the exact answers' z-scores are
    within 6 and the released total's std is the mechanism's σ."""
    from tests.conftest import DPBENCH

    used = set()
    for test_file in (ROOT / "tests").rglob("test_*.py"):
        used |= set(re.findall(r'dpbench_dir / "(\w+)" / "([\w.]+)"', test_file.read_text()))
    assert ("1D", "SEARCHLOGS.n4096.npy") in used  # the scan finds the tests' files
    readme = (DPBENCH / "README.md").read_text()
    for folder, name in sorted(used):
        assert (DPBENCH / folder / name).is_file(), (folder, name)
        assert f"{folder}/{name}" in readme
    piece = DPBENCH / "1D" / "SEARCHLOGS.n4096.npy"
    queries, answers, out = tmp_path / "q.csv", tmp_path / "a.csv", tmp_path / "out.csv"
    queries.write_text("lo,hi\n0,4095\n100,2047\n")
    status, _, err = run_done("ranges", str(piece), "--epsilon", "0.1", "--delta", "1e-9",
                              "--queries", str(queries), "--answers", str(answers),
                              "--output", str(out), "--seed", "0")  # fmt: skip
    assert status == 0, err
    x = np.load(piece)
    assert len(_rows(out.read_text())) == x.size == 4096
    table = _rows(answers.read_text())
    truth = [x.sum(), x[100:2048].sum()]
    z = [(float(r["answer"]) - t) / float(r["std"]) for r, t in zip(table, truth, strict=True)]
    assert max(abs(v) for v in z) < 6
    from dpcount.ranges import CorrelatedPerturbation

    # whole-number counts: exact integer noise by default
    sigma = CorrelatedPerturbation(4096, epsilon=0.1, delta=1e-9, noise="discrete-gaussian").sigma
    assert float(table[0]["std"]) == pytest.approx(sigma, rel=1e-12)


# -- item 7: a small count imports no scipy ----------------------------------------------------


def test_a_small_count_imports_no_heavy_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script's own process, with ``-X importtime`` (PYTHONPROFILEIMPORTTIME):
    every imported module is listed on stderr."""
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "".join(f"{i % 3}\n" for i in range(100)))
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    out = tmp_path / "out.csv"
    status, _, err = run_done("count", str(data), "--epsilon", "1", "--output", str(out))
    assert status == 0, err
    imported = {
        line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import ")
    }
    assert "dpcount.cli" in imported and "numpy" in imported  # the listing is complete
    assert sorted(m for m in HEAVY if m in imported) == []
    assert not any(m == "scipy" or m.startswith("scipy.") for m in imported)
    assert out.read_text().count("\n") == 101  # header + 100 steps


def test_a_small_count_with_delta_imports_no_scipy_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --delta, auto ranks the Gaussian rows too: the normalized BLT's variances
    ran scipy.signal.lfilter (which imports scipy.stats, about 3 s of a 10 s run on a
    busy machine); its first-order recursion now runs without scipy, bit for bit
    (tests/test_scipy.py). On this whole-number job auto skips the Gaussian rows
    altogether, so no scipy module is imported (tests/cli/test_startup.py)."""
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "".join(f"{i % 3}\n" for i in range(100)))
    out = tmp_path / "out.csv"
    argv = ["count", str(data), "--epsilon", "1", "--delta", "1e-6", "--digits", "17"]
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    status, _, err = run_done(*argv, "--output", str(out))
    assert status == 0, err
    imported = {
        line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import ")
    }
    assert "dpcount.cli" in imported and "numpy" in imported  # the listing is complete
    assert not any(m.startswith("scipy") for m in imported)
    choice = choose(100, budget=Budget(epsilon=1.0, delta=1e-6))
    assert choice.auto is not None
    std = np.sqrt(choice.build(rng=0).variances())
    assert [float(r["std"]) for r in _rows(out.read_text())] == std.tolist()


# -- item 10 -------------------------------------------------------------------------------------


def test_the_checkpoint_message_counts_released_steps(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1", "--seed", "0"]
    argv += ["--horizon", "4", "--checkpoint", str(tmp_path / "ck")]
    argv += ["--output", str(tmp_path / "o.csv")]
    status, _, err = run_done(*argv)
    assert status == 0, err
    src.write_text("1\n0\n1\n1\n")
    status, _, err = run_done(*argv)
    assert status == 0, err
    assert "3 steps already released, continuing at step 4 (horizon 4)" in _flat(err), err


def test_stdin_row_numbers_start_at_one() -> None:
    proc = run_entry("count", "-", "--horizon", "2", "--epsilon", "1", stdin=subprocess.PIPE)
    out, err = proc.communicate("1\n0\n", timeout=300)
    assert proc.returncode == 0, err
    assert [r["t"] for r in _rows(out)] == ["1", "2"]


def test_histogram_top_count_is_printed_like_its_column(tmp_path: Path) -> None:
    src = tmp_path / "events.csv"
    src.write_text("t,item\n0.5,a\n1.5,b\n2.5,a\n")
    argv = ["histogram", str(src), "--time-column", "t", "--item-column", "item"]
    status, out, err = run_done(*argv, "--items", "a,b", "--epsilon", "1", "--seed", "0")
    assert status == 0, err
    rows = _rows(out)
    assert rows and all(r["top1_count"] == r[r["top1_item"]] for r in rows)
    assert all(str(int(r["top1_count"])) == r["top1_count"] for r in rows)  # integer noise
    assert all(len(r["std"].replace(".", "").lstrip("0")) <= 4 for r in rows)


def test_std_has_four_significant_digits_by_default(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", "0"]
    status, out, err = run_done(*argv)
    assert status == 0, err
    std = np.sqrt(KaryTree(3, epsilon=1.0, k=19, noise="discrete-laplace").variances())
    assert [r["std"] for r in _rows(out)] == [f"{s:.4g}" for s in std]
    status, out, err = run_done(*argv, "--digits", "17")
    assert status == 0, err
    assert [float(r["std"]) for r in _rows(out)] == std.tolist()


# -- item 10: keyed numbers lines like count, and has --digits -----------------------------------


def _keyed_argv(tmp_path: Path, events: Path, output: Path, *extra: str) -> list[str]:
    keys = tmp_path / "keys.txt"
    keys.write_text("a\nb\n")
    return ["keyed", str(events), "--time-column", "day", "--key-column", "product",
            "--keys", str(keys), "--step", "1D", "--epsilon", "1",
            "--secret", str(tmp_path / "run.key"), "--output", str(output), *extra]  # fmt: skip


def test_keyed_names_the_file_line_as_count_does(tmp_path: Path) -> None:
    """Before: "(row 1)" for the second data row, where count says "line 3". A blank
    line before it moves it to line 4 (pandas skips blank lines; the number does not)."""
    out = tmp_path / "o.csv"
    bad = tmp_path / "bad.csv"
    bad.write_text("day,product,qty\n2024-01-01,a,1\nyesterday,b,2\n")
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out))
    assert status == 2
    assert "unparseable time 'yesterday' in column 'day' (line 3 of " in _flat(err), err
    bad.write_text("day,product,qty\n2024-01-01,a,1\n\n2024-01-02,b,-2\n")
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out, "--weight-column", "qty"))
    assert status == 2
    assert "negative weight -2.0 in column 'qty' (line 4" in _flat(err), err
    # count numbers the same file's lines the same way
    bad.write_text("day,product,qty\n2024-01-01,a,1\n\nyesterday,b,2\n")
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out))
    assert status == 2
    assert "unparseable time 'yesterday' in column 'day' (line 4 of " in _flat(err), err
    argv = ["count", str(bad), "--column", "qty", "--time-column", "day", "--step", "1D"]
    status, _, err = run_done(*argv, "--epsilon", "1")
    assert status == 2 and "line 4" in err and "yesterday" in err, err


def _bad_log(path: Path) -> None:
    """40 events, a blank line after the 5th, an unparseable time on file line 38."""
    rows = [f"2024-01-0{1 + i % 3},{'ab'[i % 2]}" for i in range(40)]
    rows[35] = "yesterday,a"
    path.write_text("day,product\n" + "\n".join(rows[:5]) + "\n\n" + "\n".join(rows[5:]) + "\n")


SMALL_BLOCKS = (
    "import dask.dataframe as dd, functools\n"
    "dd.read_csv = functools.partial(dd.read_csv, blocksize=128)\n"
)


def test_keyed_on_dask_names_the_file_line_in_every_partition(tmp_path: Path) -> None:
    """Before: a row of a partition after the first was named by its index within the
    partition ("index label 35" for file line 38). Now every engine names the file line:
    the embedded one, Dask with --partitions 3 (one read_csv partition split in three),
    and Dask with read_csv's own partitions (a 128-byte blocksize, set by a
    sitecustomize on the script's path: 4 partitions, each numbering its rows from 0)."""
    bad, out = tmp_path / "bad.csv", tmp_path / "o.csv"
    _bad_log(bad)
    want = "unparseable time 'yesterday' in column 'day' (line 38 of "
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out))
    assert status == 2 and want in _flat(err), err
    dask = ["--engine", "dask", "--workers", "1"]
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out, *dask, "--partitions", "3"))
    assert status == 2 and want in _flat(err), err
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SMALL_BLOCKS)
    status, _, err = run_done(*_keyed_argv(tmp_path, bad, out, *dask), extra_path=str(site))
    assert status == 2 and want in _flat(err), err
    # the worker's own log of the failed task shows the label; the error names the line
    message = next(x for x in err.splitlines() if x.startswith("dpcount: error:"))
    assert want in message and "index label" not in message


def test_keyed_on_dask_ends_without_a_warning(tmp_path: Path) -> None:
    """Before: every successful run on a busy machine ended with distributed's
    "Worker process still alive after 4.0 seconds, killing" (the nanny gave each worker
    4 s to exit; one with pandas loaded takes longer under load)."""
    events, out = tmp_path / "events.csv", tmp_path / "o.csv"
    events.write_text("day,product\n2024-01-01,a\n2024-01-02,b\n2024-01-03,a\n")
    argv = _keyed_argv(tmp_path, events, out, "--engine", "dask", "--workers", "2")
    status, _, err = run_done(*argv, "--start", "2024-01-01", "--horizon", "3")
    assert status == 0, err
    assert len(_rows(out.read_text())) == 6  # 2 keys x 3 steps
    assert "WARNING" not in err and "still alive" not in err, err


def test_keyed_std_has_four_significant_digits_by_default(tmp_path: Path) -> None:
    events = tmp_path / "events.csv"
    events.write_text("day,product\n2024-01-01,a\n2024-01-02,b\n2024-01-03,a\n")
    out = tmp_path / "o.csv"
    status, _, err = run_done(*_keyed_argv(tmp_path, events, out))
    assert status == 0, err
    short = _rows(out.read_text())
    status, _, err = run_done(*_keyed_argv(tmp_path, events, out, "--digits", "17"))
    assert status == 0, err
    full = _rows(out.read_text())
    # the same secret: the same counts; only the std's printing differs
    assert [r["private_count"] for r in short] == [r["private_count"] for r in full]
    assert len({r["std"] for r in full}) > 1  # several distinct stds: a real check
    assert [r["std"] for r in short] == [f"{float(r['std']):.4g}" for r in full]
    assert any(len(r["std"]) > len(f"{float(r['std']):.4g}") for r in full)
    parquet = tmp_path / "o.parquet"
    status, _, err = run_done(*_keyed_argv(tmp_path, events, parquet))
    assert status == 0, err
    import pandas as pd

    assert pd.read_parquet(parquet)["std"].tolist() == [float(r["std"]) for r in full]
    status, _, err = run_done(*_keyed_argv(tmp_path, events, out, "--digits", "18"))
    assert status == 2 and "--digits must be between 1 and 17, got 18" in err
