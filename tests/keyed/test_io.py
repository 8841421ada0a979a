"""A keyed run's I/O (dpcount.keyed.io): readers, the rows of a release, one sink protocol."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.io import (
    COLUMNS,
    CallbackSink,
    ChunkRows,
    FileSink,
    FrameSink,
    PartsDir,
    _key_major,
    chunk_table,
    read_events,
    release_rows,
    sink_for,
    write_csv,
    write_frames,
)
from dpcount.keyed.secret import unsafe_testing_secret
from tests.keyed._budget import keyed_counts

KEYS = [f"k{i}" for i in range(30)]


def _kw(**extra: Any) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    events = pd.DataFrame({"t": rng.integers(0, 40, 600), "key": rng.choice(KEYS, 600)})
    return {
        "events": events, "keys": KEYS, "time_column": "t", "key_column": "key", "step": 4,
        "start": 0, "horizon": 10, "epsilon": 1.0, "chunk_keys": 8,
        "secret": unsafe_testing_secret(b"i" * 32), **extra,
    }  # fmt: skip


def test_the_frame_rows_are_the_chunk_key_major() -> None:
    """Frame rows against a direct construction (np.repeat / np.tile): key-major, key and
    label categorical, every value and dtype as written before the two builders were one."""
    rng = np.random.default_rng(1)
    values = rng.integers(-5, 50, (6, 9))
    std = np.sqrt(np.arange(1.0, 7.0))
    labels = [f"2024-01-{i:02d}" for i in range(3, 9)]
    keys = [f"k{i}" for i in range(20)]
    got = chunk_table(values, std, keys, labels, 4, "day", 3, frame=True)
    want = pd.DataFrame(
        {
            "key": pd.Categorical.from_codes(
                np.repeat(np.arange(9, dtype=np.int32), 6),
                categories=pd.Index(keys[4:13], dtype=object),
            ),
            "step": np.tile(np.arange(3, 9, dtype=np.int64), 9),
            "day": pd.Categorical.from_codes(
                np.tile(np.arange(6, dtype=np.int32), 9), categories=labels
            ),
            "private_count": values.T.reshape(-1),
            "std": np.tile(std, 9),
        }
    )
    pd.testing.assert_frame_equal(got, want)
    rows = ChunkRows(std, labels, "day", 3)  # one builder, widths in turn
    for width in (9, 2, 9):
        pd.testing.assert_frame_equal(
            rows.frame(values[:, :width], keys[4 : 4 + width]),
            chunk_table(values[:, :width], std, keys, labels, 4, "day", 3, frame=True),
        )
    with pytest.raises(ValueError, match="a chunk of 6 steps × 9 keys for 8 keys"):
        rows.frame(values, keys[:8])


@pytest.mark.parametrize(
    "keys", [tuple(f"k{i}" for i in range(40)), tuple(range(40)), tuple(np.arange(40))]
)
def test_arrow_tables_hold_the_frame_paths_values_with_timestamps(
    tmp_path: Path, keys: tuple
) -> None:
    """Parts are built as Arrow tables directly: the values of the pandas route, with
    the step times stored as timestamps (not text)."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    tall = rng.integers(-9, 9, (70, 3))  # the counts are copied 32 steps at a time
    assert np.array_equal(_key_major(tall), tall.T.reshape(-1))
    std = np.sqrt(np.arange(1.0, 31.0))
    labels = [f"2024-01-{i:02d}" for i in range(1, 31)]
    times = pd.to_datetime(labels).to_numpy("datetime64[ns]")
    for values in (rng.integers(-5, 50, (30, 20)), rng.normal(size=(30, 20))):
        frame = chunk_table(values, std, keys, labels, 10, "day", 3, frame=True)
        a = write_frames([frame], tmp_path / "a.pq")
        b = write_frames([chunk_table(values, std, keys, times, 10, "day", 3)], tmp_path / "b.pq")
        assert str(pq.read_schema(b).field("day").type) == "timestamp[ns]"
        # no value can be missing: required columns (the key's nullability as it was)
        for path in (a, b):
            assert [f.nullable for f in pq.read_schema(path)] == [True] + [False] * 4
        tables = ChunkRows(std, times, "day", 3)  # one builder, two widths in turn
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


def test_sink_for_picks_one_sink_per_output(tmp_path: Path) -> None:
    parts = PartsDir(tmp_path / "out", 8, "day")
    assert sink_for(None, None, parts) is parts
    assert isinstance(sink_for(None, print, None), CallbackSink)
    assert sink_for(None, None, None, "day") == FrameSink("day")
    assert sink_for(tmp_path / "a.csv", None, None, "day", 3) == FileSink(
        tmp_path / "a.csv", "day", 3
    )
    for output, folder in ((tmp_path / "a.csv", None), (None, parts)):
        with pytest.raises(ValueError, match="give either output= or on_chunk=, not both"):
            sink_for(output, print, folder)


def test_every_sink_writes_the_same_release(tmp_path: Path) -> None:
    """The frame, the CSV, the Parquet file, the parts and the chunks handed to a
    callback or to a sink of one's own are one release."""
    frame = keyed_counts(**_kw()).frame
    assert list(frame.columns) == [*COLUMNS[:2], "time", *COLUMNS[3:]]
    seen: list[tuple[int, np.ndarray]] = []
    keyed_counts(**_kw(on_chunk=lambda lo, v: seen.append((lo, v.copy()))))
    assert [lo for lo, _ in seen] == [0, 8, 16, 24]
    counts = np.concatenate([v for _, v in seen], axis=1)  # steps × keys
    assert np.array_equal(counts.T.reshape(-1), frame["private_count"].to_numpy())
    csv = keyed_counts(**_kw(output=tmp_path / "a.csv")).output
    assert csv is not None
    pd.testing.assert_frame_equal(pd.read_csv(csv, dtype={"key": object, "time": object}), frame)
    single = pd.read_parquet(keyed_counts(**_kw(output=tmp_path / "a.parquet")).output)
    parts = keyed_counts(**_kw(output=tmp_path / "parts")).output
    assert parts is not None and len(list(parts.glob("part-*.parquet"))) == 4
    for got in (single, pd.read_parquet(parts)):
        assert got["key"].astype(object).tolist() == frame["key"].tolist()
        assert np.array_equal(got["private_count"].to_numpy(), frame["private_count"].to_numpy())

    class Own:  # a sink of one's own: called once with the job and the chunks
        def __call__(self, job: Any, chunks: Any) -> Path:
            out = tmp_path / "own.csv"
            return write_frames(release_rows(job, chunks, "time", frame=True), out)

    own = keyed_counts(**_kw(sink=Own())).output
    assert own is not None and own.read_bytes() == csv.read_bytes()


def test_csv_appends_without_a_second_header() -> None:
    a = pd.DataFrame({"key": ["a"], "std": [0.123456]})
    fh = io.BytesIO()
    write_csv([a], fh, 3)
    write_csv([a, a], fh, None, header=False)
    assert fh.getvalue() == b"key,std\na,0.123\na,0.123456\na,0.123456\n"


def test_no_released_key_writes_the_columns_alone(tmp_path: Path) -> None:
    """An open key set that selected no key yet: a CSV of the header alone, a Parquet
    file of no rows with the run's column types."""
    from dpcount.keyed.selection import KeySelection

    few = _kw(keys=None, selection=KeySelection(epsilon=1.0, delta=1e-6))
    few["events"] = few["events"].head(3)
    csv = keyed_counts(**few, output=tmp_path / "e.csv").output
    assert csv is not None and csv.read_text() == "key,step,time,private_count,std\n"
    pq = keyed_counts(**few, output=tmp_path / "e.parquet").output
    got = pd.read_parquet(pq)
    assert got.empty and got.dtypes.astype(str).tolist()[1:] == [
        "int64",
        "int64",
        "int64",
        "float64",
    ]


def test_events_csv_keys_are_text(tmp_path: Path) -> None:
    """Keys read as text ("007" stays "007", "NA" is a key); only an empty field is missing."""
    from dpcount.keyed.events import EventColumns

    path = tmp_path / "e.csv"
    path.write_text("t,key\n1,007\n2,NA\n3,\n")
    got = read_events(path, EventColumns("t", "key"))
    assert got["key"].tolist()[:2] == ["007", "NA"] and pd.isna(got["key"].iloc[2])
    assert got.index.tolist() == [2, 3, 4]  # file lines, header = line 1
