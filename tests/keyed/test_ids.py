"""Canonical unit ids and keys across files, types and runs (issue #30, item 2).

A unit read as "7" from a CSV, 7 from an int64 Parquet column and 7.0 from a float64
one is one unit, bounded once; keys likewise are one key when equal as numbers or as
their canonical text (:mod:`dpcount.keyed.ids`)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.events import KeyUniverse
from dpcount.keyed.ids import canonical_text, key_texts, open_keys, unit_ids, unit_text
from dpcount.keyed.incremental import run_incremental
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import KeySelection
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts


def _common(**kw: Any) -> dict[str, Any]:
    base = dict(
        time_column="t", key_column="k", step=1, start=1, horizon=4, budget=Budget(epsilon=1.0)
    )  # fmt: skip
    return {**base, **kw}


def test_canonical_text_of_numbers_and_text() -> None:
    for value in (7, 7.0, np.int8(7), np.uint64(7), np.float32(7), "7", Decimal("7.000")):
        assert canonical_text(value) == "7", value
    assert canonical_text(1e20) == "100000000000000000000"  # exact, never "1e+20"
    assert canonical_text(7.5) == canonical_text(Decimal("7.50")) == "7.5"
    assert canonical_text(-0.0) == "0" and canonical_text(True) == "True"
    for text in ("007", "7.0", "1.10", " 7"):  # a key written as text is itself
        assert canonical_text(text) == text


def test_unit_text_reads_numbers_written_as_text() -> None:
    for value in ("7", "7.0", "+7", "007", "7e0", "0.7e1", 7, 7.0):
        assert unit_text(value) == "7", value
    assert unit_text("7.50") == unit_text(7.5) == "7.5"
    assert unit_text(True) == unit_text(1) == "1"  # one unit, as 0.4 grouped them
    for text in ("abc", "7a", "1e999999", "nan", "inf", ""):  # not (finite) numbers: text
        assert unit_text(text) == text
    # an integer column stays int64 (no conversion); other forms become the same text
    assert unit_ids(pd.Series([7, 8])).dtype == np.int64
    assert unit_ids(pd.Series([7.0, 8.0])).tolist() == [7, 8]
    assert unit_ids(pd.Series(["7", 7, 7.0, "7.0", "x"], dtype=object)).tolist() == (
        ["7", "7", "7", "7", "x"]
    )
    # the vectorized path of a text column (Arrow's RE2) agrees with unit_text value by value
    texts = ["7", "7.0", "+7", "-0", "0", "-7", "007", ".5", "5.", "1e3", "1E+3", "7e", "e7",
             "abc", "", " 7", "7 ", "1.10", "--7", "12345678901234567890", "7\n", "٣"]  # fmt: skip
    assert unit_ids(pd.Series(texts, dtype=object)).tolist() == [unit_text(t) for t in texts]
    assert unit_ids(pd.Series(texts, dtype="str")).tolist() == [unit_text(t) for t in texts]
    assert key_texts(pd.Series(["7", 7, 7.0, "7.0"], dtype=object)).tolist() == (
        ["7", "7", "7", "7.0"]  # a key "7.0" written as text stays "7.0"
    )


def test_step_scope_one_unit_across_csv_and_parquet(tmp_path: Path) -> None:
    """The audit's reproducer: unit "7" (CSV) and 7 (Parquet) in one input folder,
    --max-keys 1: one unit, so one of its two keys is dropped (0.4: two units, none)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    pd.DataFrame({"t": [1], "k": ["a"], "u": ["7"]}).to_csv(inbox / "a.csv", index=False)
    pd.DataFrame({"t": [1], "k": ["b"], "u": [7]}).to_parquet(inbox / "b.parquet")
    ran = run_incremental(
        inbox,
        state=tmp_path / "s.state",
        output=tmp_path / "out.csv",
        until=1,
        secret=tmp_path / "s.key",
        **_common(keys=["a", "b"], unit_column="u", max_keys=1),
    )
    assert ran.result is not None
    report = ran.result.report
    assert report.unit_dropped_keys == 1 and report.kept_events == 2


def test_run_scope_ledger_across_int_and_float_files(tmp_path: Path) -> None:
    """--unit-scope run, --max-steps 1: unit 7 (int64) at step 1, then 7.0 (float64)
    and "7.0" (text) at later steps share one ledger: both later steps are dropped
    (0.4: a fresh ledger for "7.0", so the unit counted at two steps)."""
    kw = _common(
        keys=["a"], unit_column="u", unit_scope="run", max_keys=1, max_steps=1,
        state=tmp_path / "r.state", secret=tmp_path / "r.key",
    )  # fmt: skip
    keyed_counts(pd.DataFrame({"t": [1], "k": ["a"], "u": [7]}), until=1, **kw)
    floats = keyed_counts(pd.DataFrame({"t": [2], "k": ["a"], "u": [7.0]}), until=2, **kw)
    assert floats.report.unit_dropped_steps == 1
    text = keyed_counts(pd.DataFrame({"t": [3], "k": ["a"], "u": ["7.0"]}), until=3, **kw)
    assert text.report.unit_dropped_steps == 1


def test_float_unit_ids_beyond_2_53_are_refused() -> None:
    """2^53 + 1 has no float: a float column cannot hold such an id exactly, so its unit
    could not be matched with the same id written as an integer elsewhere."""
    kw = _common(keys=["a"], unit_column="u", max_keys=1, secret=unsafe_testing_secret(b"u" * 32))
    frame = pd.DataFrame({"t": [1, 2], "k": ["a", "a"], "u": [7.0, 2.0**60]})
    with pytest.raises(ValueError, match=r"unit id 1.15\d*e\+18 in column 'u' \(data row 2\)"):
        keyed_counts(frame, **kw)
    keyed_counts(frame.assign(u=[7.0, 2.0**53]), **kw)  # up to 2^53: exact


def test_ledger_of_mixed_forms_merges_conservatively() -> None:
    """A 0.4 ledger may hold "7" and "7.0" as two units: read as one, with the union of
    their keys, the sum of their steps and the latest last step."""
    old = UnitLedger.from_frame(
        pd.DataFrame(
            {"utext": ["7", "7.0", "7.0", "x"], "key": [0, 0, 1, 0], "steps": [1, 2, 1, 1],
             "last": [1, 5, 3, 2]}
        )
    )  # fmt: skip
    merged = old.canonical().frame().sort_values(["utext", "key"]).reset_index(drop=True)
    assert merged.to_dict("list") == {
        "utext": ["7", "7", "x"], "key": [0, 1, 0], "steps": [3, 1, 1], "last": [5, 3, 2]
    }  # fmt: skip
    fresh = UnitLedger.from_frame(merged)
    assert fresh.canonical() is fresh  # already canonical: unchanged


def test_key_universe_matches_by_canonical_text() -> None:
    text = KeyUniverse(["7", "8", "007"])  # a keys file: text
    events = pd.Series([7.0, 8.0, 9.0])  # a float64 Parquet column
    assert text.indices(events).tolist() == [0, 1, -1]
    ints = KeyUniverse([7, 8])
    assert ints.indices(pd.Series(["7", "007", "8.0", "8"])).tolist() == [0, -1, -1, 1]
    assert KeyUniverse(range(5, 10)).indices(pd.Series(["7", 7.5, 9.0])).tolist() == [2, -1, 4]
    big = [0, 2**63 - 1, -(2**63)]  # "-0" is not 0's text; 20 digits checked exactly
    texts = ["0", "-0", str(2**63 - 1), str(2**63), str(-(2**63)), None, "x"]
    assert KeyUniverse(big).indices(pd.Series(texts, dtype=object)).tolist() == (
        [0, -1, 1, -1, 2, -1, -1]
    )
    assert KeyUniverse([10**18, 5]).indices(pd.Series([1e18, 5.0, 2.0**60])).tolist() == (
        [0, 1, -1]  # beyond 2^53 a float is its shortest text: 1e18 is 10^18
    )
    with pytest.raises(ValueError, match=r"7 and '7' are one key"):
        KeyUniverse([7, "7"])
    with pytest.raises(ValueError, match="appears more than once"):
        KeyUniverse(["a", "a"])


def test_open_key_set_one_key_across_csv_and_parquet(tmp_path: Path) -> None:
    """An open key set over a folder with key "7" in a CSV and 7 in a Parquet file: one
    candidate key (0.4: two, both written as 7)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    pd.DataFrame({"t": [1, 2], "k": ["7", "8"]}).to_csv(inbox / "a.csv", index=False)
    pd.DataFrame({"t": [1, 2], "k": [7, 8]}).to_parquet(inbox / "b.parquet")
    ran = run_incremental(
        inbox,
        state=tmp_path / "s.state",
        output=tmp_path / "out.csv",
        until=2,
        secret=tmp_path / "s.key",
        selection=KeySelection(epsilon=1.0, delta=1e-6),
        **_common(keys=None),
    )
    assert ran.result is not None and ran.result.selection is not None
    assert ran.result.selection.candidates == 2


def test_open_table_turns_to_text_when_text_arrives() -> None:
    assert open_keys(pd.Series([8, 7, 8]), (5,)) == ([5], [8, 7])
    table, new = open_keys(pd.Series(["7", "9"]), (7, 5))
    assert table == ["7", "5"] and new == ["7", "9"]
    with pytest.raises(ValueError, match="one key"):
        open_keys(pd.Series(["1"]), (7, "7"))
