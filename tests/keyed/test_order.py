"""The order of an open key set's released rows reveals nothing the release withholds
(issue #30, item 1): rows by key name, whatever the key table's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.incremental import run_incremental
from dpcount.keyed.order import name_order, released_blocks
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import KeySelection
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts

pytest.importorskip("pyarrow")


def two_logs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two logs that differ only in the step of one event of key "b", before b's
    selection: b is first counted at step 2 in one (the key table: a, b — a tie,
    then name) and at step 1 in the other (b, a). Both keys have 12 events by step 3."""
    a = [2] * 12
    later = [3] * 11
    one = pd.DataFrame({"t": [*a, 2, *later], "key": ["a"] * 12 + ["b"] * 12})
    other = pd.DataFrame({"t": [*a, 1, *later], "key": ["a"] * 12 + ["b"] * 12})
    return one, other


def zero_noise(**kw: Any) -> dict[str, Any]:
    """An open key set over 4 integer steps without noise (ε = 100 for both parts, τ = 2),
    so the two logs' releases are equal value for value, and their rows differ only if
    their order does.

    The incremental runs of :func:`releases` draw from a fresh secret file each, so
    "without noise" is a probability. At ε = 50 and δ = 1e-6 (before): the tree's scale
    0.06 made each of its ≤ 14 released nodes ≠ 0 w.p. 1.2e-7, and ρ's scale 0.071 put
    τ + ρ at 1 w.p. 8.3e-7 a log (b, one event, then selected at step ≤ 2): 3.3e-6 a
    run. At ε = 100 and δ = 1e-12: 14·6.7e-15 and 1.4e-12 (release_profile, exact)."""
    base: dict[str, Any] = dict(
        keys=None,
        selection=KeySelection(epsilon=100.0, delta=1e-12),
        time_column="t",
        key_column="key",
        step=1,
        start=1,
        horizon=4,
        budget=Budget(epsilon=100.0),
        mechanism="tree",
        secret=unsafe_testing_secret(b"row-order".ljust(32, b".")),
    )
    base.update(kw)
    return base


def releases(tmp_path: Path, name: str, log: pd.DataFrame, **engine: Any) -> dict[str, bytes]:
    """Every output form of one log's release: a frame (as CSV text), a CSV file, a
    Parquet file, and the CSV an incremental run appends (two releases)."""
    work = tmp_path / name
    work.mkdir()
    frame = keyed_counts(log, **zero_noise(**engine)).frame
    assert frame is not None
    keyed_counts(log, output=work / "out.csv", **zero_noise(**engine))
    keyed_counts(log, output=work / "out.parquet", **zero_noise(**engine))
    (work / "in").mkdir()
    files = dict(secret=str(work / "run.key"), state=work / "run.state", output=work / "inc.csv")
    kw = {**zero_noise(**engine), **files}
    for part, until in (("one.csv", 2), ("two.csv", 4)):
        piece = log[log["t"] <= 2] if until == 2 else log[log["t"] > 2]
        piece.to_csv(work / "in" / part, index=False)
        run_incremental(work / "in", until=until, **kw)
    return {
        "frame": frame.to_csv(index=False).encode(),
        "csv": (work / "out.csv").read_bytes(),
        "parquet": (work / "out.parquet").read_bytes(),
        "incremental": (work / "inc.csv").read_bytes(),
    }


def check_order_reveals_nothing(tmp_path: Path, **engine: Any) -> None:
    one, other = two_logs()
    got = releases(tmp_path, "one", one, **engine)
    again = releases(tmp_path, "other", other, **engine)
    for form, data in got.items():
        assert data == again[form], form  # byte for byte
    rows = pd.read_csv(tmp_path / "one" / "out.csv")
    assert rows["key"].tolist() == ["a"] * 3 + ["b"] * 2  # a from step 2, b from 3
    assert rows["private_count"].tolist() == [12, 12, 12, 12, 12]
    both = pd.read_csv(tmp_path / "one" / "inc.csv")
    pairs = [["a", 2], ["a", 3], ["a", 4], ["b", 3], ["b", 4]]
    assert both[["key", "step"]].to_numpy().tolist() == pairs


def test_row_order_does_not_reveal_events_before_a_keys_selection(tmp_path: Path) -> None:
    check_order_reveals_nothing(tmp_path)


def test_released_blocks_order_by_name_keep_positions_as_noise_index() -> None:
    """Chunks in table order (positions 0..4, any arrival order of the chunks) come out
    by name, each column the one computed at the key's position; unselected keys have
    none."""
    keys = ["d", 3, "b", "a", 1]
    values = np.arange(2 * 5).reshape(2, 5) * 10  # column p: the counts of position p
    selected = np.array([1, 1, 9, 2, 1], dtype=np.int64)  # "b" not selected by step 2
    chunks = [(3, values[:, 3:5]), (0, values[:, 0:3])]
    blocks = list(released_blocks(keys, chunks, selected, until=2))
    assert [list(b.keys) for b in blocks] == [[1, 3, "a", "d"]]
    (block,) = blocks
    assert np.array_equal(block.values, values[:, [4, 1, 3, 0]])
    assert block.since is not None and block.since.tolist() == [1, 1, 2, 1]
    assert name_order(["b", 2, "a", 10]).tolist() == [1, 3, 2, 0]
    public = list(released_blocks(keys, [(0, values)], None, until=2))
    assert [list(b.keys) for b in public] == [keys] and public[0].since is None
