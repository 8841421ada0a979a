"""A keyed run's I/O: reading events and keys, and writing a release through one sink.

**Readers.** :func:`read_events` reads the event columns of a CSV or Parquet file (the
format from its extension), :func:`from_polars` those of a polars frame, and
:func:`read_keys` a key universe from a text file. Every engine reads CSV with the same
options (:func:`csv_options`: keys and units as text, ``"007"`` stays ``"007"``; only an
empty field is missing), so a file is the same events whichever engine reads it.

**Rows.** A release is computed chunk by chunk of keys (first key position, counts of
shape steps × keys). :class:`ChunkRows` turns a chunk into the output's rows
``(key, step, time, private_count, std)``, key-major — as a pandas frame (the step's
label as text: CSV files and returned frames) or as an Arrow table (the step's start as
a timestamp or an integer: Parquet); :func:`chunk_table` is the one function for a
single chunk. :func:`release_rows` hands out a release's rows in output order
(:mod:`dpcount.keyed.order`), at least one (empty) piece when no key is released.

**Sinks.** Where a release goes is a :class:`Sink`: called once with the job and its
chunks, it writes them and returns what the run's result shows — the frame
(:class:`FrameSink`), the file written (:class:`FileSink`: CSV or Parquet, atomically),
the folder of Parquet parts (:class:`PartsDir`, resumable), or nothing
(:class:`CallbackSink`: each chunk handed to a function). A chunk whose counts are None
was written where it was computed (a Dask worker or a Spark executor writes its own
parts). :func:`sink_for` picks the sink of ``keyed_counts``' ``output=`` and
``on_chunk=``; an incremental run's appender is a sink of its own
(:mod:`dpcount.keyed.incremental`).

Every file is written atomically (a temporary file renamed into place) with the usual
permissions: a rerun with the same secret and data writes identical bytes, and a
killed run leaves no partial output.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.durable.atomic import PUBLIC, atomic_file, write_atomic
from dpcount.keyed.engine import chunk_bounds
from dpcount.keyed.events import LINE, EventColumns
from dpcount.keyed.job import KeyedJob
from dpcount.keyed.order import released_blocks, row_mask

__all__ = [
    "COLUMNS",
    "CallbackSink",
    "ChunkRows",
    "FileSink",
    "FrameSink",
    "PartWriter",
    "PartsDir",
    "Sink",
    "check_std_digits",
    "chunk_table",
    "csv_options",
    "from_polars",
    "is_polars",
    "line_numbers",
    "read_events",
    "read_keys",
    "release_rows",
    "sink_for",
    "universe_of",
    "write_csv",
    "write_frames",
    "write_json_atomic",
]


# --------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------
def csv_options(columns: EventColumns) -> dict[str, Any]:
    """The ``pandas.read_csv`` options every engine reads an events CSV with: only the
    event columns; keys and units as text (a key file is text, and ``"007"`` must stay
    ``"007"``); only an empty field is missing (``"NA"`` is a key like any other)."""
    dtype = {columns.key: str, **({columns.unit: str} if columns.unit else {})}
    return {"usecols": columns.names(), "dtype": dtype, "keep_default_na": False, "na_values": [""]}


def _file_format(path: Path, what: str) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".txt"):
        return "csv"
    raise ValueError(f"{what} {path} must end in .csv or .parquet")


def read_events(path: str | os.PathLike[str], columns: EventColumns) -> pd.DataFrame:
    """The event columns of a CSV or Parquet file (format from the extension).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a file that cannot be read as events, naming it (and the line where
            the reader tells it): empty, not UTF-8, a damaged Parquet file, an
            unterminated quote, a missing column.
    """
    p = Path(path)
    fmt = _file_format(p, "events file")
    if not p.is_file():
        raise FileNotFoundError(f"events file {p} not found")
    try:
        return _read_events(p, fmt, columns)
    except UnicodeDecodeError as err:
        raise ValueError(
            f"events file {p}: not UTF-8 text ({_bad_text_line(p)}: {err.reason}, byte "
            f"0x{err.object[err.start]:02x}); save it as UTF-8"
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"events file {p} is empty (not even a header line)") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"events file {p}: {_parser_message(err)}") from None
    except OSError as err:
        if isinstance(err, (FileNotFoundError, PermissionError)):
            raise
        raise ValueError(f"events file {p} cannot be read as {fmt}: {err}") from None
    except Exception as err:
        if type(err).__module__.split(".")[0] != "pyarrow":
            raise
        raise ValueError(f"events file {p} cannot be read as {fmt}: {err}") from None


def _read_events(p: Path, fmt: str, columns: EventColumns) -> pd.DataFrame:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        columns.check(pq.read_schema(p).names, str(p))
        return pd.read_parquet(p, columns=columns.names())
    header = pd.read_csv(p, nrows=0)
    columns.check(list(header.columns), str(p))
    frame = pd.read_csv(p, **csv_options(columns))
    lines = line_numbers(p, len(frame))
    if lines is not None:
        frame.index = pd.Index(lines, name=LINE)
    return frame


def _bad_text_line(path: Path) -> str:
    """``line N`` of the first line of ``path`` that is not UTF-8 (for a message)."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return f"line {number}"
    return "a line"  # a character split across pandas' read blocks: not found per line


def _parser_message(err: Exception) -> str:
    """pandas' CSV error with its row (0-based, header = row 0) as a file line."""
    import re

    text = str(err).replace("Error tokenizing data. C error: ", "")
    found = re.search(r"EOF inside string starting at row (\d+)", text)
    if found is not None:
        return f"a quote opened on line {int(found.group(1)) + 1} is never closed"
    return text


def line_numbers(path: Path, n: int) -> NDArray[np.int64] | None:
    """The file line (header = line 1, as ``dpcount count`` numbers them) on which each
    of the ``n`` data records of a CSV starts; None if they cannot be matched to the
    records pandas read (messages then give 1-based data rows).

    One newline count when the file has no blank lines and no multi-line fields, else
    a scan with the csv module (pandas skips blank and whitespace-only lines)."""
    with path.open("rb") as fh:
        newlines, last = 0, b""
        while block := fh.read(1 << 20):
            newlines += block.count(b"\n")
            last = block[-1:]
    if newlines + (last not in (b"\n", b"")) == n + 1:
        return np.arange(2, n + 2, dtype=np.int64)
    starts = []
    with path.open(newline="", encoding="utf-8-sig") as text:
        reader = csv.reader(text)
        before = 0
        for record in reader:
            if len(record) > 1 or (record and record[0].strip()):
                starts.append(before + 1)
            before = reader.line_num
    return np.array(starts[1:], dtype=np.int64) if len(starts) == n + 1 else None


def is_polars(frame: Any) -> bool:
    """A polars DataFrame (or LazyFrame), without importing polars."""
    return type(frame).__module__.split(".")[0] == "polars" and type(frame).__name__ in (
        "DataFrame",
        "LazyFrame",
    )


def from_polars(frame: Any, columns: EventColumns) -> pd.DataFrame:
    """The event columns of a polars DataFrame/LazyFrame as a pandas frame (via Arrow).

    Only the named columns are converted; a LazyFrame is collected. Row order and
    values are kept, so the run equals the run on the same rows as pandas.
    """
    names = list(frame.collect_schema().names())
    columns.check(names, "the events")
    picked = frame.select(columns.names())
    if type(picked).__name__ == "LazyFrame":
        picked = picked.collect()
    out: pd.DataFrame = picked.to_pandas()
    return out


def read_keys(path: str | os.PathLike[str]) -> list[str]:
    """The key universe from a text file (one key per line, blank lines ignored)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"keys file {p} not found") from None
    keys = [line.strip() for line in text.splitlines() if line.strip()]
    if not keys:
        raise ValueError(f"keys file {p} holds no keys")
    return keys


def universe_of(path: str | os.PathLike[str], runner: object) -> Any:
    """A keys file's universe for ``runner``: the list of its keys
    (:func:`read_keys`) in process, or on Dask and Spark the file itself
    (:class:`~dpcount.keyed.keys.FileUniverse`: the workers join the events' keys to
    it, and no process holds all of them). The same key positions and digest either
    way."""
    from dpcount.keyed.spec import Dask, Spark

    if isinstance(runner, (Dask, Spark)):
        from dpcount.keyed.keys import FileUniverse

        return FileUniverse.open(path)
    return read_keys(path)


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------
#: a release's columns in order (``"time"``: the run's ``time_label``)
COLUMNS = ("key", "step", "time", "private_count", "std")


class ChunkRows:
    """The output rows ``(key, step, time, private_count, std)`` of a release's chunks,
    key-major, as pandas frames (:meth:`frame`) or Arrow tables (:meth:`table`).

    ``times``: one per released step — for frames the step labels (text, the column a
    categorical of them), for tables each step's start
    (:meth:`~dpcount.keyed.events.TimeBuckets.label_times`: a timestamp, or an integer
    for integer times), stored as values. ``std``: each step's exact std.

    The columns that repeat per key (key codes, step, time, std) are built once per
    chunk width and shared by the chunks (numpy arrays, and Arrow arrays, which are
    immutable): 10 ms instead of 47 ms to build each table of 2048 keys × 1000 steps,
    measured over 20 tables (7 ms of the 10 is the key-major copy of the counts,
    :func:`_key_major`). Key and time are codes into the chunk's keys and the steps,
    so building a chunk creates no Python object per row.
    """

    def __init__(
        self,
        std: NDArray[np.float64],
        times: NDArray[Any] | Sequence[Any],
        time_label: str = "time",
        first_step: int = 1,
    ) -> None:
        self.std = std
        self.times = times
        self.time_label = time_label
        self.first_step = first_step
        self._width = -1  # one width at a time: the last chunk may be narrower
        self._codes: tuple[NDArray[Any], ...] = ()
        self._arrow: tuple[Any, ...] | None = None

    def _columns(self, n: int) -> tuple[NDArray[Any], ...]:
        """Key codes, step index (from 0), step and std of every row of ``n`` keys."""
        if n != self._width:
            horizon = self.std.shape[0]
            at = _per_key(np.arange(horizon, dtype=np.int32), n, horizon)
            codes = _per_key(np.arange(n, dtype=np.int32)[:, None], n, horizon)
            steps = np.arange(self.first_step, self.first_step + horizon, dtype=np.int64)
            step = _per_key(steps, n, horizon)
            self._codes = (codes, at, step, _per_key(self.std, n, horizon))
            self._width, self._arrow = n, None
        return self._codes

    def _check(self, values: NDArray[Any], keys: Sequence[Any]) -> None:
        horizon, n = values.shape
        if horizon != self.std.shape[0] or len(keys) != n:
            raise ValueError(f"a chunk of {horizon} steps × {n} keys for {len(keys)} keys")

    def frame(self, values: NDArray[Any], keys: Sequence[Any]) -> pd.DataFrame:
        """The rows of one chunk as a frame: ``values`` (steps × keys) of ``keys``; key
        and time label are categorical columns."""
        self._check(values, keys)
        codes, at, step, std = self._columns(values.shape[1])
        return pd.DataFrame(
            {
                "key": pd.Categorical.from_codes(
                    codes, categories=pd.Index(list(keys), dtype=object)
                ),
                "step": step,
                self.time_label: pd.Categorical.from_codes(at, categories=self.times),
                "private_count": _key_major(values),
                "std": std,
            }
        )

    def table(self, values: NDArray[Any], keys: Sequence[Any]) -> Any:
        """The rows of one chunk as an Arrow table, with the schema
        :func:`write_frames` writes (int32 key codes, required columns)."""
        import pyarrow as pa

        self._check(values, keys)
        codes, at, step, std = self._columns(values.shape[1])
        if self._arrow is None:
            times = np.asarray(self.times)[at]
            self._arrow = tuple(pa.array(c) for c in (codes, step, times, std))
        key_codes, steps, times, stds = self._arrow
        columns = {
            "key": pa.DictionaryArray.from_arrays(key_codes, pa.array(list(keys))),
            "step": steps,
            self.time_label: times,
            "private_count": pa.array(_key_major(values)),
            "std": stds,
        }
        return _required(pa.table(columns))


def chunk_table(
    values: NDArray[Any],
    std: NDArray[np.float64],
    keys: Sequence[Any],
    times: NDArray[Any] | Sequence[Any],
    key_lo: int,
    time_label: str = "time",
    first_step: int = 1,
    *,
    frame: bool = False,
) -> Any:
    """The output rows of one chunk (:class:`ChunkRows`): ``values`` (steps first_step..
    × keys key_lo..) of the key table ``keys``; a pandas frame with ``frame`` (``times``:
    the step labels), else an Arrow table (``times``: the steps' starts)."""
    rows = ChunkRows(std, times, time_label, first_step)
    own = keys[key_lo : key_lo + values.shape[1]]
    return rows.frame(values, own) if frame else rows.table(values, own)


def _per_key(column: NDArray[Any], n: int, horizon: int) -> NDArray[Any]:
    """``column`` broadcast to (n keys, horizon steps), flattened key by key."""
    out = np.empty((n, horizon), dtype=column.dtype)
    out[...] = column
    return out.reshape(-1)


def _key_major(values: NDArray[Any], rows: int = 32) -> NDArray[Any]:
    """``values`` (steps × keys) flattened key by key: ``values.T.reshape(-1)``, copied
    ``rows`` steps at a time (a whole-array transposing copy strides through memory;
    blocks of 32 steps took 0.6× its time on a 1000 × 2048 part)."""
    steps, n = values.shape
    out = np.empty((n, steps), dtype=values.dtype)
    for lo in range(0, steps, rows):
        out[:, lo : lo + rows] = values[lo : lo + rows].T
    return out.reshape(-1)


def release_rows(
    job: KeyedJob,
    chunks: Iterable[tuple[int, NDArray[Any]]],
    time_label: str,
    *,
    frame: bool,
) -> Iterator[Any]:
    """The release's rows in output order (:mod:`dpcount.keyed.order`: an open key set's
    by key name, never by its key table's order), as frames (``frame``) or Arrow
    tables; the rows before a key's selection step are withheld. When no key is
    released (an open key set that selected none yet) one piece of no rows, with the
    columns and types of a piece with rows (so runs concatenate without turning a
    column into objects): a CSV then holds its header, which ``pandas.read_csv`` reads
    as a table of no rows (an empty file is refused by it), and a Parquet file its
    columns and types."""
    std = job.mechanism.std()[job.first - 1 : job.until]
    if frame:
        rows = ChunkRows(std, job.buckets.labels(job.until)[job.first - 1 :], time_label, job.first)
    else:
        rows = ChunkRows(std, job.buckets.label_times(job.first, job.until), time_label, job.first)
    empty = True
    for keys, values, since in released_blocks(job.universe.keys, chunks, job.selected, job.until):
        empty = False
        if frame:
            out = rows.frame(values, keys)
            if since is not None:
                yield out[row_mask(since, values.shape[0], job.first)].reset_index(drop=True)
                continue
            yield out
            continue
        table = rows.table(values, keys)
        if since is not None:
            import pyarrow as pa

            table = table.filter(pa.array(row_mask(since, values.shape[0], job.first)))
        yield table
    if empty:  # one key's rows, none kept (an open key set holds at least one key)
        one = np.zeros((len(std), 1), dtype=np.int64 if job.integer else np.float64)
        if frame:
            yield _no_key(rows.frame(one, job.universe.keys[:1]).iloc[:0])
        else:
            yield _no_key(rows.table(one, job.universe.keys[:1]).slice(0, 0))


def _no_key(piece: Any) -> Any:
    """A piece of no rows without the key it was built from: the key column's categories
    (frame) or dictionary (Arrow) emptied, so no unselected key's name is carried."""
    if isinstance(piece, pd.DataFrame):
        return piece.assign(key=piece["key"].cat.remove_unused_categories())
    import pyarrow as pa

    kind = piece.schema.field("key").type
    keys = pa.DictionaryArray.from_arrays(
        pa.array([], type=kind.index_type), pa.array([], type=kind.value_type)
    )
    at = piece.schema.get_field_index("key")
    return piece.set_column(at, piece.schema.field(at), keys)


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------
def csv_frame(frame: pd.DataFrame, digits: int | None) -> pd.DataFrame:
    """``frame`` with its std column as text of ``digits`` significant digits, as
    ``dpcount count --digits`` prints it (None: the frame unchanged, every bit)."""
    if digits is None or frame.empty:
        return frame
    # one std per step, repeated for every key: format each distinct value once
    values, at = np.unique(frame["std"].to_numpy(np.float64), return_inverse=True)
    text = np.array([f"{v:.{digits}g}" for v in values], dtype=object)
    return frame.assign(std=text[at.reshape(-1)])


def check_std_digits(digits: int | None) -> None:
    if digits is not None and not (isinstance(digits, int) and 1 <= digits <= 17):
        raise ValueError(f"std_digits must be between 1 and 17 or None, got {digits!r}")


def write_csv(
    frames: Iterable[pd.DataFrame], fh: IO[bytes], digits: int | None, *, header: bool = True
) -> None:
    """The frames as CSV text (UTF-8, ``\\n`` line ends; the header before the first
    when ``header``; the std column as :func:`csv_frame` formats it) into the binary
    file ``fh``, flushed, ``fh`` left open."""
    text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
    for frame in frames:
        csv_frame(frame, digits).to_csv(text, header=header, index=False, lineterminator="\n")
        header = False
    text.flush()
    text.detach().flush()  # the caller closes the file


def write_frames(
    frames: Iterable[Any], path: str | os.PathLike[str], std_digits: int | None = None
) -> Path:
    """Write the frames to CSV or Parquet (by extension) atomically: temp file + rename.

    ``frames``: pandas DataFrames (or, for Parquet, Arrow tables from :func:`chunk_table`).
    ``std_digits``: significant digits of the std column in a CSV (:func:`csv_frame`;
    None: every bit); Parquet keeps the float.

    A rerun with the same secret and data writes identical bytes; a killed run
    leaves no partial output (only a temp file that the next run ignores).
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"output {out} must end in .csv or .parquet")
    # a released file: the usual permissions (0666 minus the umask), not 0600
    with atomic_file(out, mode=PUBLIC) as fh:
        if suffix == ".csv":
            write_csv(frames, fh, std_digits)
        else:
            _write_parquet(frames, fh)
    return out


def _write_parquet(frames: Iterable[Any], fh: IO[bytes]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    try:
        for frame in frames:
            table = (
                frame
                if isinstance(frame, pa.Table)
                else _stable_table(pa.Table.from_pandas(frame, preserve_index=False))
            )
            if writer is None:
                writer = pq.ParquetWriter(fh, table.schema, **_parquet_encodings(table))
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _parquet_encodings(table: Any) -> dict[str, Any]:
    """The ParquetWriter options for a table of counts: a dictionary for the key column
    (and any text column), DELTA_BINARY_PACKED for integers and times (steps and
    times repeat per key with a fixed stride; integer counts are small), and
    BYTE_STREAM_SPLIT for floating point (counts and the std). Measured on one part of
    2048 keys × 1000 steps (``benchmarks/bench_keyed.py``'s job): 0.10 s CPU and 4.0 MB
    for integer counts against 0.18 s and 5.9 MB with dictionaries for every column but
    the counts (building and hashing the dictionaries of the step, time and std
    columns was most of the write); 0.12 s against 0.15 s for floating-point counts.
    Every reader of Parquet 2 encodings (pyarrow, pandas, polars, DuckDB, Spark ≥ 3)
    reads these; the values are the same, only their layout in the file changes."""
    import pyarrow as pa

    dictionary: list[str] = []
    encoding: dict[str, str] = {}
    for column in table.schema:
        kind = column.type
        if pa.types.is_dictionary(kind):
            dictionary.append(column.name)
        elif pa.types.is_integer(kind) or pa.types.is_temporal(kind):
            encoding[column.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(kind):
            encoding[column.name] = "BYTE_STREAM_SPLIT"
        else:
            dictionary.append(column.name)
    return {"use_dictionary": dictionary, "column_encoding": encoding}


# --------------------------------------------------------------------------------------
# Sinks
# --------------------------------------------------------------------------------------
class Sink(Protocol):
    """Where a release goes: called once with the job and its chunks (first key position,
    counts of shape (steps first..until) × keys, in key-table order; None counts: the
    chunk was written where it was computed), it writes them and returns what the
    run's result shows — a frame, the path written, or None."""

    def __call__(
        self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]
    ) -> Path | pd.DataFrame | None: ...


@dataclass(frozen=True)
class FrameSink:
    """The release as one pandas frame (key and time as plain values)."""

    time_label: str = "time"

    def __call__(self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]) -> pd.DataFrame:
        rows = release_rows(job, chunks, self.time_label, frame=True)
        frame = pd.concat(list(rows), ignore_index=True)
        for column in ("key", self.time_label):  # plain values, whatever the chunking
            frame[column] = frame[column].astype(object)
        return frame


@dataclass(frozen=True)
class FileSink:
    """The release as one CSV or Parquet file (by its extension), written atomically
    (:func:`write_frames`); ``std_digits``: the CSV's std column (:func:`csv_frame`)."""

    path: Path
    time_label: str = "time"
    std_digits: int | None = None

    def __call__(self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]) -> Path:
        if self.path.suffix.lower() in (".parquet", ".pq"):
            return write_frames(release_rows(job, chunks, self.time_label, frame=False), self.path)
        rows = release_rows(job, chunks, self.time_label, frame=True)
        return write_frames(rows, self.path, self.std_digits)


@dataclass(frozen=True)
class CallbackSink:
    """Each chunk handed to ``on_chunk(first key position, counts)`` as it is released,
    in key-table order (nothing kept)."""

    on_chunk: Callable[[int, NDArray[Any]], None]

    def __call__(self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]) -> None:
        for lo, values in chunks:
            self.on_chunk(lo, values)


class PartsDir:
    """A resumable output directory: one Parquet part per key chunk, written atomically.

    ``_run.json`` records the run id, the configuration fingerprint and the chunk
    size; a directory from another run is refused. Parts already present are not
    recomputed: noise is a pure function of (secret, position), so a part written
    before a crash is exactly what the resumed run would write. As a :class:`Sink` it
    writes the chunks it is given (a chunk without counts was written by the worker or
    executor that computed it).
    """

    def __init__(self, path: Path, chunk_keys: int, time_label: str = "time") -> None:
        self.path = path
        self.chunk_keys = chunk_keys
        self.time_label = time_label

    def for_job(self, job: KeyedJob) -> PartsDir:
        """A run that releases only some steps writes to ``steps-FIRST-LAST/`` inside."""
        if (job.first, job.until) == (1, job.mechanism.horizon):
            return self
        sub = self.path / f"steps-{job.first:06d}-{job.until:06d}"
        return PartsDir(sub, self.chunk_keys, self.time_label)

    def part(self, lo: int) -> Path:
        return self.path / f"part-{lo:012d}.parquet"

    def writer(self, job: KeyedJob, time_label: str | None = None) -> PartWriter:
        label = self.time_label if time_label is None else time_label
        times = job.buckets.label_times(job.first, job.until)
        std = job.mechanism.std()[job.first - 1 : job.until]
        return PartWriter(self.path, times, std, label, job.first)

    def open(self, job: KeyedJob) -> set[int]:
        """Check or write the manifest; the first key of every chunk already written."""
        import json

        manifest = {
            "run_id": job.secret.run_id,
            "fingerprint": job.secret.fingerprint,
            "chunk_keys": self.chunk_keys,
        }
        self.path.mkdir(parents=True, exist_ok=True)
        mpath = self.path / "_run.json"
        if mpath.exists():
            found = json.loads(mpath.read_text(encoding="utf-8"))
            if found != manifest:
                raise ValueError(
                    f"output directory {self.path} holds another run's parts "
                    f"(run id {found.get('run_id')}, chunk_keys {found.get('chunk_keys')})"
                )
        else:
            write_json_atomic(mpath, manifest)
        lows = {lo for lo, _ in chunk_bounds(job.mechanism.n_keys, self.chunk_keys)}
        return {lo for lo in lows if self.part(lo).exists()}

    def __call__(self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]) -> Path:
        parts = self.for_job(job)
        writer = parts.writer(job)
        keys = job.universe.keys
        for lo, values in chunks:
            if values is not None:  # None: the worker or executor wrote the part itself
                writer.write(lo, values, keys[lo : lo + values.shape[1]])
        return parts.path


@dataclass(frozen=True)
class PartWriter:
    """Writes one key chunk's part file; small enough to ship to a Dask worker."""

    path: Path
    times: NDArray[Any]
    std: NDArray[np.float64]
    time_label: str
    first_step: int = 1
    rows: ChunkRows = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = ChunkRows(self.std, self.times, self.time_label, self.first_step)
        object.__setattr__(self, "rows", rows)

    def write(self, lo: int, values: NDArray[Any], keys: Sequence[Any]) -> Path:
        """``keys``: the chunk's own keys (key indices lo .. lo + values.shape[1] − 1)."""
        return write_frames([self.rows.table(values, keys)], self.path / f"part-{lo:012d}.parquet")


def sink_for(
    output: str | os.PathLike[str] | None,
    on_chunk: Callable[[int, NDArray[Any]], None] | None,
    parts: PartsDir | None,
    time_label: str = "time",
    std_digits: int | None = None,
) -> Sink:
    """The sink of ``keyed_counts``' ``output=`` (a file, or ``parts``: the folder of
    parts it names) or ``on_chunk=``; neither: the frame."""
    if on_chunk is not None and (output is not None or parts is not None):
        raise ValueError("give either output= or on_chunk=, not both")
    if parts is not None:
        return parts
    if on_chunk is not None:
        return CallbackSink(on_chunk)
    if output is None:
        return FrameSink(time_label)
    return FileSink(Path(output), time_label, std_digits)


def write_json_atomic(path: Path, value: dict[str, Any]) -> None:
    import json

    write_atomic(path, [(json.dumps(value, sort_keys=True) + "\n").encode()], mode=PUBLIC)


def _stable_table(table: Any) -> Any:
    """Dictionary columns with int32 indices and no pandas metadata: one schema for all
    chunks (pandas picks int8/int16/int32 codes by the number of categories)."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, pa.dictionary(pa.int32(), f.type.value_type))
        if pa.types.is_dictionary(f.type)
        else f
        for f in table.schema
    ]
    return _required(table.cast(pa.schema(fields)).replace_schema_metadata(None))


def _required(table: Any) -> Any:
    """``table`` with its step, time, count and std columns declared non-nullable
    (Parquet ``required``): they are never missing, and a required column has no
    definition levels to encode — 0.100 s instead of 0.131 s CPU to write one part of
    2048 keys × 1000 steps (best of 15, interleaved; ``benchmarks/bench_keyed.py``'s
    job), the same
    values and encodings, and the same column types for every reader. The key column
    keeps its nullability (a public universe may hold a key that reads as missing), so
    every chunk of a run has the same schema whatever its data."""
    import pyarrow as pa

    fields = [f if f.name == "key" else f.with_nullable(False) for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))
