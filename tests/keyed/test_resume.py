"""A run killed midway resumes from its written parts; the result equals an uninterrupted run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.keyed._budget import keyed_counts

KEYS = [f"k{i}" for i in range(50)]


def _kw(tmp_path: Path) -> dict[str, object]:
    rng = np.random.default_rng(2)
    events = pd.DataFrame({"t": rng.integers(0, 30, 3000), "key": rng.choice(KEYS, 3000)})
    return dict(
        events=events, keys=KEYS, time_column="t", key_column="key", step=3, start=0,
        horizon=10, epsilon=1.0, secret=tmp_path / "run.key", chunk_keys=8,
    )  # fmt: skip


class Killed(Exception):
    pass


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_killed_run_resumes_to_the_uninterrupted_output(tmp_path: Path) -> None:
    kw = _kw(tmp_path)
    events = kw.pop("events")
    calls: list[int] = []

    def die_after_two(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 2:
            raise Killed

    with pytest.raises(Killed):
        keyed_counts(events, output=tmp_path / "out", progress=die_after_two, **kw)
    parts = sorted(p.name for p in (tmp_path / "out").glob("part-*"))
    assert parts == ["part-000000000000.parquet", "part-000000000008.parquet"]
    resumed: list[int] = []
    keyed_counts(events, output=tmp_path / "out", progress=lambda d, t: resumed.append(d), **kw)
    assert resumed == [24, 32, 40, 48, 50]  # only the 5 missing chunks were computed
    keyed_counts(events, output=tmp_path / "fresh", **kw)
    assert _files(tmp_path / "out") == _files(tmp_path / "fresh")
    whole = keyed_counts(events, **kw).frame
    assert whole is not None
    back = pd.read_parquet(tmp_path / "out")
    assert back["private_count"].tolist() == whole["private_count"].tolist()
    assert back["key"].tolist() == whole["key"].tolist()


def test_output_directory_of_another_run_is_refused(tmp_path: Path) -> None:
    kw = _kw(tmp_path)
    events = kw.pop("events")
    keyed_counts(events, output=tmp_path / "out", **kw)
    kw["secret"] = tmp_path / "other.key"
    with pytest.raises(ValueError, match="holds another run's parts"):
        keyed_counts(events, output=tmp_path / "out", **kw)
