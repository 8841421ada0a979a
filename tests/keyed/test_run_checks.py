"""A keyed run's refusals and edge outputs (issue #30, items 7, 8, 10, 11): integer times
beyond int64 refused by file and line; the total δ warned about and stated; a refused
run leaves no file behind; a release that selects no key still writes a readable
file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.cli import main
from dpcount.keyed.events import TimeBuckets
from dpcount.keyed.incremental import run_incremental
from dpcount.keyed.io import ChunkRows
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import KeySelection
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts
from tests.keyed.test_cli import one_line_error


def _argv(events: Path, tmp_path: Path, *more: str) -> list[str]:
    return [
        "keyed", str(events), "--time-column", "t", "--key-column", "k", "--step", "1",
        "--start", "1", "--horizon", "4", "--epsilon", "1", "--secret",
        str(tmp_path / "run.key"), *more,
    ]  # fmt: skip


def _tiny(tmp_path: Path, rows: str = "1,a\n2,b\n", name: str = "ev.csv") -> Path:
    path = tmp_path / name
    path.write_text("t,k\n" + rows)
    return path


# -- item 7: integer times beyond int64 --------------------------------------------------
def test_integer_time_beyond_int64_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _tiny(tmp_path, f"1,a\n{2**70},b\n")
    (tmp_path / "keys.txt").write_text("a\nb\n")
    argv = _argv(events, tmp_path, "--keys", str(tmp_path / "keys.txt"), "--output")
    line = one_line_error(capsys, [*argv, str(tmp_path / "out.csv")])
    assert f"integer time {2**70} in column 't' (line 3 of {events})" in line
    assert "64-bit range" in line
    unsigned = tmp_path / "u.parquet"
    pd.DataFrame({"t": np.array([1, 2**63], dtype=np.uint64), "k": ["a", "b"]}).to_parquet(
        unsigned
    )  # an unsigned column would wrap to a negative time
    argv = _argv(unsigned, tmp_path, "--keys", str(tmp_path / "keys.txt"), "--output")
    line = one_line_error(capsys, [*argv, str(tmp_path / "out.csv")])
    assert f"integer time {2**63} in column 't' (data row 2 of {unsigned})" in line
    assert not (tmp_path / "run.key").exists() and not (tmp_path / "out.csv").exists()


def test_integer_time_beyond_int64_in_a_frame_names_column_and_row() -> None:
    kw: dict[str, Any] = dict(
        keys=["a"], time_column="t", key_column="k", step=1, start=1, horizon=4,
        budget=Budget(epsilon=1.0), secret=unsafe_testing_secret(b"k" * 32),
    )  # fmt: skip
    frame = pd.DataFrame({"t": [1, 2**64, 3], "k": "a"})  # object column of Python ints
    with pytest.raises(ValueError, match=r"time 18446744073709551616 in column 't' \(data row 2\)"):
        keyed_counts(frame, **kw)
    with pytest.raises(ValueError, match=r"start 18446744073709551616 is outside the 64-bit"):
        keyed_counts(frame.iloc[[0]], **{**kw, "start": 2**64})
    with pytest.raises(ValueError, match=r"horizon 12 x step 1 = 9223372036854775810 is beyond"):
        keyed_counts(frame.iloc[[0]], **{**kw, "start": 2**63 - 10, "horizon": 12})
    # times 2^63 or more from the start wrap in int64: placed outside the steps, never in
    buckets = TimeBuckets.make(1, 2**63 - 1)
    times = pd.Series([-(2**63), 2**63 - 1], dtype=np.int64)
    assert buckets.steps(times).tolist() == [0, 1]
    far = TimeBuckets.make(1, -10).steps(pd.Series([2**63 - 1, -10, -11], dtype=np.int64))
    assert far.tolist() == [2**63 - 1, 1, 0]


# -- item 8: the total delta ----------------------------------------------------------------
def test_select_delta_is_warned_and_the_guarantee_states_the_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _tiny(tmp_path)
    argv = _argv(events, tmp_path, "--select-epsilon", "0.5", "--select-delta", "0.5")
    assert main([*argv, "--output", str(tmp_path / "out.csv")]) == 0
    err = capsys.readouterr().err
    assert "dpcount: warning: --select-delta 0.5 is above 0.001" in err
    guarantee = next(line for line in err.splitlines() if line.startswith("guarantee:"))
    assert guarantee.startswith("guarantee: (1.5, 0.5)-DP in total")
    assert "key selection (epsilon 0.5, delta 0.5) + counting (epsilon 1, delta 0)" in guarantee
    assert "WARNING: total delta=0.5 is above 0.001" in guarantee
    # both parts small, their sum above the threshold: warned once, on the total
    argv = _argv(events, tmp_path, "--noise", "discrete-gaussian", "--delta", "8e-4", "--mechanism")
    argv.append("tree")  # (auto would compare the mechanisms for discrete Gaussian noise: 1 s)
    more = ["--select-epsilon", "0.5", "--select-delta", "8e-4", "--secret"]
    assert main([*argv, *more, str(tmp_path / "g.key"), "--output", str(tmp_path / "g.csv")]) == 0
    err = capsys.readouterr().err
    assert err.count("dpcount: warning: --delta + --select-delta = 0.0016 is above") == 1
    assert "guarantee: (1.5, 0.0016)-DP in total" in err


def test_guarantee_without_selection_is_the_counting_one() -> None:
    result = keyed_counts(
        pd.DataFrame({"t": [1], "k": ["a"]}), keys=["a"], time_column="t", key_column="k",
        step=1, start=1, horizon=2, budget=Budget(epsilon=1.0),
        secret=unsafe_testing_secret(b"g" * 32),
    )  # fmt: skip
    assert result.guarantee() == f"guarantee: {result.mechanism.describe()}"
    assert "WARNING" not in result.guarantee()


# -- item 10: nothing behind a refused run ------------------------------------------------
def test_refused_run_leaves_no_file_and_the_corrected_rerun_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _tiny(tmp_path)
    before = set(os.listdir(tmp_path))
    argv = _argv(events, tmp_path, "--select-epsilon", "0.5", "--select-delta", "1e-6")
    line = one_line_error(capsys, [*argv, "--output", str(tmp_path / "bad.json")])
    assert "output" in line and "bad.json" in line
    assert set(os.listdir(tmp_path)) == before
    # refused after reading the events (a bad time): no secret, mark or lock either
    bad = _tiny(tmp_path, f"1,a\n2,b\n{2**70},b\n", name="bad.csv")
    before = set(os.listdir(tmp_path))
    out = str(tmp_path / "x.csv")
    assert "line 4 of" in one_line_error(capsys, [*argv[:1], str(bad), *argv[2:], "--output", out])
    assert set(os.listdir(tmp_path)) == before
    # the corrected run, with another configuration too, is not "another run's" secret
    argv = _argv(events, tmp_path, "--select-epsilon", "0.7", "--select-delta", "1e-6")
    assert main([*argv, "--output", str(tmp_path / "good.csv")]) == 0
    capsys.readouterr()
    assert {"run.key", "run.key.released", "good.csv"} <= set(os.listdir(tmp_path))


def test_library_refusals_before_any_file(tmp_path: Path) -> None:
    kw: dict[str, Any] = dict(
        keys=["a"], time_column="t", key_column="k", step=1, start=1, horizon=2,
        budget=Budget(epsilon=1.0), secret=tmp_path / "s.key",
    )  # fmt: skip
    frame = pd.DataFrame({"t": [1], "k": ["a"]})
    for bad, match in (
        (dict(output=tmp_path / "o.txt"), "must end in .csv or .parquet"),
        (dict(output=tmp_path / "o.csv", on_chunk=print), "not both"),
        (dict(output=tmp_path / "no" / "o.csv"), "does not exist"),
        (dict(chunk_keys=0), "chunk_keys"),
        (dict(secret=tmp_path / "no" / "s.key"), r"secret file .*s.key: folder .* does not"),
        (dict(state=tmp_path / "no" / "s.state", until=1), "state file .* does not exist"),
        (dict(time_column="when"), "time column 'when' not found"),
    ):
        with pytest.raises((ValueError, FileNotFoundError), match=match):
            keyed_counts(frame, **{**kw, **bad})
        assert os.listdir(tmp_path) == [], bad
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "_run.json").write_text("{}")
    with pytest.raises(ValueError, match="holds another run's parts"):
        keyed_counts(frame, **kw, output=parts)
    assert sorted(os.listdir(tmp_path)) == ["parts"]


def test_incremental_refused_first_run_leaves_nothing_and_empty_release_has_header(
    tmp_path: Path,
) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    pd.DataFrame({"t": [1, 2], "k": ["a", "b"]}).to_csv(inbox / "a.csv", index=False)
    kw: dict[str, Any] = dict(
        state=tmp_path / "s.state", output=tmp_path / "out.csv", until=2,
        secret=tmp_path / "s.key", keys=["a", "b"], time_column="t", key_column="k",
        step=1, start=1, horizon=4, budget=Budget(epsilon=1.0),
    )  # fmt: skip
    with pytest.raises(ValueError, match="max_keys needs a unit column"):
        run_incremental(inbox, **kw, max_keys=2)  # refused inside the release
    with pytest.raises(ValueError, match="key column 'when' not found in"):
        run_incremental(inbox, **{**kw, "key_column": "when"})  # refused reading the files
    assert os.listdir(tmp_path) == ["in"]
    ran = run_incremental(inbox, **{**kw, "budget": Budget(epsilon=2.0)})  # corrected
    assert ran.released == (1, 2)
    # (item 11) an open key set's release that selects no key: the header, readable.
    # A fresh secret file: a or b (one event each, checks 1-2) is selected w.p. 8.2e-7
    # at δ = 1e-6, 7.3e-11 at δ = 1e-10 (release_profile, exact)
    out = tmp_path / "open.csv"
    kw.update(output=out, state=tmp_path / "o.state", secret=tmp_path / "o.key", keys=None)
    ran = run_incremental(inbox, **kw, selection=KeySelection(epsilon=1.0, delta=1e-10))
    assert ran.result is not None and ran.result.selection is not None
    assert ran.result.selection.selected == 0
    back = pd.read_csv(out)
    assert list(back.columns) == ["key", "step", "time", "private_count", "std"] and back.empty


# -- item 11: no key selected, a readable file ---------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_no_key_selected_writes_a_readable_file(tmp_path: Path, suffix: str) -> None:
    # a testing secret: with a fresh secret file a or b (one event each, 4 and 3
    # checks) was selected w.p. 1.7e-6 a run (release_profile, exact)
    out = tmp_path / f"out{suffix}"
    result = keyed_counts(
        pd.DataFrame({"t": [1, 2], "k": ["unselected-a", "unselected-b"]}), keys=None,
        selection=KeySelection(epsilon=1.0, delta=1e-6), time_column="t", key_column="k",
        step=1, start=1, horizon=4, budget=Budget(epsilon=1.0),
        secret=unsafe_testing_secret(b"no key selected".ljust(32, b".")), output=out,
    )  # fmt: skip
    assert result.selection is not None and result.selection.selected == 0
    back = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(back.columns) == ["key", "step", "time", "private_count", "std"]
    assert len(back) == 0
    assert b"unselected" not in out.read_bytes()  # no key name, not even in a dictionary


def test_the_empty_piece_carries_no_key_name() -> None:
    """The piece of no rows is built from the key table's first key (for the columns'
    types): its categories (frame) and dictionary (Arrow) hold no key."""
    from dpcount.keyed.io import _no_key

    rows = ChunkRows(np.ones(2), ["d1", "d2"])
    one = np.zeros((2, 1), dtype=np.int64)
    frame = rows.frame(one, ["private-name"]).iloc[:0]
    assert list(frame["key"].cat.categories) == ["private-name"]  # what _no_key removes
    assert list(_no_key(frame)["key"].cat.categories) == []
    table = ChunkRows(np.ones(2), np.array([1, 2])).table(one, ["private-name"]).slice(0, 0)
    assert table.column("key").chunk(0).dictionary.to_pylist() == ["private-name"]
    empty = _no_key(table)
    assert empty.schema == table.schema and empty.num_rows == 0
    assert empty.column("key").chunk(0).dictionary.to_pylist() == []


def test_no_key_selected_gives_a_frame_with_the_released_types(tmp_path: Path) -> None:
    """An empty release as a frame has the columns and types of one with rows (before
    0.5.0 every column was object, so concatenating runs turned the steps into objects)."""
    kw: dict[str, Any] = dict(
        keys=None, time_column="t", key_column="k", step=1, start=1, horizon=4,
        budget=Budget(epsilon=1.0), secret=unsafe_testing_secret(b"e" * 32),
    )  # fmt: skip
    few = pd.DataFrame({"t": [1, 2], "k": ["a", "b"]})
    many = pd.DataFrame({"t": [1] * 400, "k": ["a"] * 400})
    none = keyed_counts(few, selection=KeySelection(epsilon=1.0, delta=1e-6), **kw)
    some = keyed_counts(many, selection=KeySelection(epsilon=1.0, delta=1e-6), **kw)
    assert none.frame is not None and some.frame is not None
    assert len(none.frame) == 0 and len(some.frame) == 4
    assert none.frame.dtypes.to_dict() == some.frame.dtypes.to_dict()
    assert none.frame.dtypes["step"] == np.int64
