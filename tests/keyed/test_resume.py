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


@pytest.mark.parametrize(
    "keys", [tuple(f"k{i}" for i in range(40)), tuple(range(40)), tuple(np.arange(40))]
)
def test_arrow_tables_hold_the_frame_paths_values_with_timestamps(
    tmp_path: Path, keys: tuple
) -> None:
    """Parts are built as Arrow tables directly: the values of the pandas route, with
    the step times stored as timestamps (not text)."""
    import pyarrow.parquet as pq

    from dpcount.keyed.engine import chunk_frame
    from dpcount.keyed.run import ChunkTables, _key_major, chunk_table, write_frames

    rng = np.random.default_rng(0)
    tall = rng.integers(-9, 9, (70, 3))  # the counts are copied 32 steps at a time
    assert np.array_equal(_key_major(tall), tall.T.reshape(-1))
    std = np.sqrt(np.arange(1.0, 31.0))
    labels = [f"2024-01-{i:02d}" for i in range(1, 31)]
    times = pd.to_datetime(labels).to_numpy("datetime64[ns]")
    for values in (rng.integers(-5, 50, (30, 20)), rng.normal(size=(30, 20))):
        a = write_frames([chunk_frame(values, std, keys, labels, 10, "day", 3)], tmp_path / "a.pq")
        b = write_frames([chunk_table(values, std, keys, times, 10, "day", 3)], tmp_path / "b.pq")
        assert str(pq.read_schema(b).field("day").type) == "timestamp[ns]"
        # no value can be missing: required columns (the key's nullability as it was)
        for path in (a, b):
            assert [f.nullable for f in pq.read_schema(path)] == [True] + [False] * 4
        tables = ChunkTables(std, times, "day", 3)  # one builder, two widths in turn
        for width in (20, 7, 20):
            got = tables.table(values[:, :width], keys[10 : 10 + width])
            assert got.equals(chunk_table(values[:, :width], std, keys, times, 10, "day", 3))
        # the layout write_frames chooses (_parquet_encodings): a dictionary for the
        # keys, deltas for integers and times, byte-stream split for floats
        meta = pq.ParquetFile(b).metadata.row_group(0)
        encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(5)}
        assert "RLE_DICTIONARY" in encodings["key"]
        assert all("DELTA_BINARY_PACKED" in encodings[c] for c in ("step", "day"))
        assert "BYTE_STREAM_SPLIT" in encodings["std"]
        count = "DELTA_BINARY_PACKED" if values.dtype.kind == "i" else "BYTE_STREAM_SPLIT"
        assert count in encodings["private_count"]
        want = pd.read_parquet(a)
        want["day"] = pd.to_datetime(want["day"].astype(str)).astype("datetime64[ns]")
        pd.testing.assert_frame_equal(pd.read_parquet(b), want, check_categorical=False)
