"""One keyed run: events in, private running counts per (key, step) out.

:func:`keyed_counts` is the library entry point behind ``dpcount keyed``. The run's
public configuration (mechanism, budget, key universe, time buckets, bounds) is
fixed first, then the secret is loaded (or created) for exactly that configuration,
then the events are mapped, bounded and counted, chunk by chunk over keys.

Public parameters taken from the data. With ``start`` or ``horizon`` omitted, the
first time bucket and the number of steps are read off the events (their earliest
and latest times), which is *not* differentially private; the result lists them
in ``data_derived`` and the CLI prints a warning. Pass both for a fully private run.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.durable.atomic import PUBLIC, atomic_file, write_atomic
from dpcount.keyed.engine import KeyedMechanism, chunk_bounds, chunk_frame
from dpcount.keyed.events import DropReport, EventColumns, TimeBuckets, from_polars, is_polars
from dpcount.keyed.job import KeyedJob, SecretArg, check_secret_arg, save_state, secret_file
from dpcount.keyed.mark import ReleaseCompanion, ReleaseGuard
from dpcount.keyed.order import released_blocks, row_mask
from dpcount.keyed.runners import Ran, RunPlan, run_on
from dpcount.keyed.selection import KeySelection, SelectionOutcome
from dpcount.keyed.spec import (
    Bounds,
    Counting,
    Dask,
    Embedded,
    Keys,
    Output,
    Runner,
    Spark,
    Steps,
    Window,
)
from dpcount.privacy.notes import delta_warning

__all__ = ["KeyedJob", "KeyedResult", "keyed_counts", "write_frames"]

Progress = Callable[[int, int], None]


@dataclass
class KeyedResult:
    """The outcome of a run (``frame`` is None when written to ``output``).

    ``report`` and the summary's event counts are exact, not private: they are for
    whoever runs the job, not for publication.
    """

    frame: pd.DataFrame | None
    report: DropReport
    mechanism: KeyedMechanism
    buckets: TimeBuckets
    run_id: str
    secret_created: bool
    output: Path | None = None
    data_derived: list[str] = field(default_factory=list)
    #: the steps released by this run (first, last); 1..T unless resumed across time
    steps: tuple[int, int] | None = None
    state: Path | None = None
    #: the run's public configuration (what its secret file records)
    config: dict[str, Any] = field(default_factory=dict)
    #: key selection (open key set): candidate and selected counts (exact, not private)
    selection: SelectionOutcome | None = None
    #: the key selection's budget (ε_s, δ_s) of an open key set (None: public keys)
    key_selection: KeySelection | None = None

    @property
    def released(self) -> tuple[int, int]:
        return (1, self.mechanism.horizon) if self.steps is None else self.steps

    @property
    def std(self) -> NDArray[np.float64]:
        """Exact std of the released steps' counts (the same for every key)."""
        first, last = self.released
        return self.mechanism.std()[first - 1 : last]

    def summary(self) -> list[str]:
        m, r = self.mechanism, self.report
        std = self.std
        lines = [
            f"keys: {m.n_keys}, steps: {m.horizon} ({self.buckets.describe()['step']} from "
            f"{self.buckets.describe()['start']}), " + m.structure,
            f"released steps: {self.released[0]}..{self.released[1]}"
            + (f"; state saved to {self.state}" if self.state is not None else ""),
            f"events (exact, not private): {r.events} read, {r.kept_events} counted; "
            f"dropped: {r.unknown_key} "
            f"unknown key, {r.out_of_range} outside the steps, {r.later_steps} after the "
            f"released steps"
            + (
                f"; {r.late_moved} late events moved to step {self.released[0]}"
                if r.late_moved
                else ""
            )
            + f"; cut: {r.clipped_events} "
            f"contributions above max_weight (weight {r.clipped_weight:g}), "
            f"{r.unit_dropped_keys} unit keys above max_keys (weight {r.unit_dropped_weight:g})"
            + (
                f", {r.unit_dropped_steps} unit steps above max_steps or closer than "
                f"min_separation (weight {r.unit_dropped_steps_weight:g})"
                if r.unit_dropped_steps
                else ""
            ),
            self.guarantee(),
            *([] if self.selection is None else [self.selection.summary()]),
            f"exact error: std per count {std.min():.4g} .. {std.max():.4g} "
            f"(rms {math.sqrt(float(np.mean(std * std))):.4g})",
            f"run id: {self.run_id}{' (new secret)' if self.secret_created else ''}",
        ]
        if not m.noise.is_discrete:
            lines.append(
                f"note: {m.noise} noise is continuous (floating point): every count is "
                "snapped to a power-of-two grid and the guarantee above includes the "
                "float-safety delta (Mironov 2012; dpcount.privacy.float_safe); discrete "
                "noise is exact and needs no such term"
            )
        if self.data_derived:
            lines.append(
                f"warning: {' and '.join(self.data_derived)} taken from the data (not private); "
                "pass them explicitly for a fully private release"
            )
        return lines

    def guarantee(self) -> str:
        """The summary's ``guarantee:`` line: the run's whole guarantee — with key
        selection (ε_s, δ_s) and counting (ε_c, δ_c), (ε_s + ε_c, δ_s + δ_c)-DP by basic
        composition (:mod:`dpcount.keyed.selection`) — with the large-δ warning of
        :func:`~dpcount.privacy.notes.delta_warning` on the total δ, then the counting
        mechanism's own guarantee."""
        m, chosen = self.mechanism, self.key_selection
        if chosen is None:
            return f"guarantee: {m.describe()}"
        delta_c = 0.0 if m.delta is None else m.delta
        epsilon, delta = chosen.epsilon + m.epsilon, chosen.delta + delta_c
        warning = delta_warning(delta, parameter="total delta")
        return (
            f"guarantee: ({epsilon:g}, {delta:.3g})-DP in total for logs that differ in one "
            f"unit (one event at event level): key selection (epsilon {chosen.epsilon:g}, "
            f"delta {chosen.delta:.3g}) + counting (epsilon {m.epsilon:g}, delta "
            f"{delta_c:.3g}), basic composition"
            + ("" if warning is None else f". WARNING: {warning}")
            + f"; counting: {m.describe()}"
        )


def iter_frames(
    job: KeyedJob,
    chunks: Iterable[tuple[int, NDArray[Any]]],
    time_label: str,
) -> Iterator[pd.DataFrame]:
    """The release's rows as frames, in output order (:mod:`dpcount.keyed.order`: an open
    key set's by key name, never by its key table's order)."""
    std = job.mechanism.std()[job.first - 1 : job.until]
    labels = job.buckets.labels(job.until)[job.first - 1 :]
    for keys, values, since in released_blocks(job.universe.keys, chunks, job.selected, job.until):
        frame = chunk_frame(values, std, keys, labels, 0, time_label, job.first)
        if since is not None:  # rows before a key's selection step are withheld
            frame = frame[row_mask(since, values.shape[0], job.first)].reset_index(drop=True)
        yield frame


def chunk_table(
    values: NDArray[Any],
    std: NDArray[np.float64],
    keys: Sequence[Any],
    times: NDArray[Any],
    key_lo: int,
    time_label: str = "time",
    first_step: int = 1,
) -> Any:
    """:func:`~dpcount.keyed.engine.chunk_frame` as an Arrow table, built directly (no
    pandas frame in between) with the schema :func:`write_frames` writes. ``times``:
    each step's start (:meth:`~dpcount.keyed.events.TimeBuckets.times`), stored as a
    timestamp (or an integer for integer times), not as text."""
    n = values.shape[1]
    return ChunkTables(std, times, time_label, first_step).table(values, keys[key_lo : key_lo + n])


class ChunkTables:
    """:func:`chunk_table` for many chunks of one release: the columns that repeat per
    key (key codes, step, time, std) are built once per chunk width and shared by the
    tables (Arrow arrays are immutable): 10 ms instead of 47 ms to build each table of
    2048 keys × 1000 steps, measured over 20 tables (7 ms of the 10 is the key-major
    copy of the counts, :func:`_key_major`)."""

    def __init__(
        self,
        std: NDArray[np.float64],
        times: NDArray[Any],
        time_label: str = "time",
        first_step: int = 1,
    ) -> None:
        self.std = std
        self.times = np.asarray(times)
        self.time_label = time_label
        self.first_step = first_step
        self._repeated: dict[int, tuple[Any, ...]] = {}

    def _columns(self, n: int) -> tuple[Any, ...]:
        import pyarrow as pa

        if n not in self._repeated:
            horizon = self.std.shape[0]
            steps = np.arange(self.first_step, self.first_step + horizon, dtype=np.int64)
            self._repeated = {  # one width at a time: the last chunk may be narrower
                n: (
                    pa.array(_per_key(np.arange(n, dtype=np.int32)[:, None], n, horizon)),
                    pa.array(_per_key(steps, n, horizon)),
                    pa.array(_per_key(self.times, n, horizon)),
                    pa.array(_per_key(self.std, n, horizon)),
                )
            }
        return self._repeated[n]

    def table(self, values: NDArray[Any], keys: Sequence[Any]) -> Any:
        """The table of one chunk: ``values`` (steps × keys) of ``keys``."""
        import pyarrow as pa

        horizon, n = values.shape
        if horizon != self.std.shape[0] or len(keys) != n:
            raise ValueError(f"a chunk of {horizon} steps × {n} keys for {len(keys)} keys")
        codes, step, time, std = self._columns(n)
        columns = {
            "key": pa.DictionaryArray.from_arrays(codes, pa.array(list(keys))),
            "step": step,
            self.time_label: time,
            "private_count": pa.array(_key_major(values)),
            "std": std,
        }
        return _required(pa.table(columns))


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


def iter_tables(
    job: KeyedJob,
    chunks: Iterable[tuple[int, NDArray[Any]]],
    time_label: str,
) -> Iterator[Any]:
    """:func:`iter_frames` as Arrow tables (:func:`chunk_table`), in the same order."""
    std = job.mechanism.std()[job.first - 1 : job.until]
    tables = ChunkTables(std, job.buckets.label_times(job.first, job.until), time_label, job.first)
    for keys, values, since in released_blocks(job.universe.keys, chunks, job.selected, job.until):
        table = tables.table(values, keys)
        if since is not None:  # rows before a key's selection step are withheld
            import pyarrow as pa

            table = table.filter(pa.array(row_mask(since, values.shape[0], job.first)))
        yield table


def or_header(frames: Iterable[pd.DataFrame], time_label: str) -> Iterator[pd.DataFrame]:
    """``frames``, or one frame of no rows with the output's columns when there are none
    (a release of an open key set that selected no key yet): a CSV then holds its
    header, which ``pandas.read_csv`` reads as a table of no rows (an empty file is
    refused by it)."""
    empty = True
    for frame in frames:
        empty = False
        yield frame
    if empty:
        names = ("key", "step", time_label, "private_count", "std")
        yield pd.DataFrame({name: pd.Series([], dtype=object) for name in names})


def _or_schema(tables: Iterable[Any], job: KeyedJob, time_label: str) -> Iterator[Any]:
    """:func:`or_header` for Arrow tables: a table of no rows with the schema of the
    run's tables (a Parquet file then has its columns and types)."""
    empty = True
    for table in tables:
        empty = False
        yield table
    if empty:
        std = job.mechanism.std()[job.first - 1 : job.until]
        times = job.buckets.times(job.first, job.until)
        one = np.zeros((len(std), 1), dtype=np.int64 if job.integer else np.float64)
        table = ChunkTables(std, times, time_label, job.first).table(one, job.universe.keys[:1])
        yield table.slice(0, 0)


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
            text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
            first = True
            for frame in frames:
                csv_frame(frame, std_digits).to_csv(
                    text, header=first, index=False, lineterminator="\n"
                )
                first = False
            text.flush()
            text.detach()  # the atomic writer closes the file
        else:
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
    return out


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


class _PartsDir:
    """A resumable output directory: one Parquet part per key chunk, written atomically.

    ``_run.json`` records the run id, the configuration fingerprint and the chunk
    size; a directory from another run is refused. Parts already present are not
    recomputed: noise is a pure function of (secret, position), so a part written
    before a crash is exactly what the resumed run would write.
    """

    def __init__(self, path: Path, chunk_keys: int) -> None:
        self.path = path
        self.chunk_keys = chunk_keys

    def for_job(self, job: KeyedJob) -> _PartsDir:
        """A run that releases only some steps writes to ``steps-FIRST-LAST/`` inside."""
        if (job.first, job.until) == (1, job.mechanism.horizon):
            return self
        sub = self.path / f"steps-{job.first:06d}-{job.until:06d}"
        return _PartsDir(sub, self.chunk_keys)

    def part(self, lo: int) -> Path:
        return self.path / f"part-{lo:012d}.parquet"

    def writer(self, job: KeyedJob, time_label: str) -> PartWriter:
        m = job.mechanism
        times = job.buckets.label_times(job.first, job.until)
        std = m.std()[job.first - 1 : job.until]
        return PartWriter(self.path, times, std, time_label, job.first)

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


@dataclass(frozen=True)
class PartWriter:
    """Writes one key chunk's part file; small enough to ship to a Dask worker."""

    path: Path
    times: NDArray[Any]
    std: NDArray[np.float64]
    time_label: str
    first_step: int = 1
    tables: ChunkTables = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tables = ChunkTables(self.std, self.times, self.time_label, self.first_step)
        object.__setattr__(self, "tables", tables)

    def write(self, lo: int, values: NDArray[Any], keys: Sequence[Any]) -> Path:
        """``keys``: the chunk's own keys (key indices lo .. lo + values.shape[1] − 1)."""
        return write_frames(
            [self.tables.table(values, keys)], self.path / f"part-{lo:012d}.parquet"
        )


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


#: the groups' defaults (frozen: shared safely by every call)
_BOUNDS, _WINDOW, _EMBEDDED, _OUTPUT = (
    Bounds(),
    Window(),
    Embedded(),
    Output(),
)


def keyed_counts(
    events: pd.DataFrame | str | os.PathLike[str] | Any,
    columns: EventColumns,
    keys: Keys,
    steps: Steps,
    *,
    secret: SecretArg,
    counting: Counting,
    bounds: Bounds = _BOUNDS,
    window: Window = _WINDOW,
    runner: Runner = _EMBEDDED,
    output: Output = _OUTPUT,
) -> KeyedResult:
    """Private running counts per key at every step: every key of a public universe
    (:class:`~dpcount.keyed.spec.Keys`), or the keys selected privately from the data.

    Each count is ``exact running count + noise`` of the run's counting mechanism with
    the keys as its noise process's trailing axis (:mod:`dpcount.keyed.engine`): for
    the neighbouring relation of ``bounds`` (one event; one unit within one step; one
    unit over the run) the release is (ε, δ)-DP by the mechanism's own calibration to
    the per-step sensitivity across keys (Δ₁ = Δ₂ = w per event; Δ₁ = m·w, Δ₂ = √m·w
    per unit and step; :mod:`dpcount.keyed.bounds` over the run), and with key
    selection (ε + ε_s, δ + δ_s)-DP by basic composition (:mod:`dpcount.keyed.selection`;
    Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*,
    Theorem 3.16). Noise is a pure function of (secret, configuration, key, step): the
    output's bytes are the same on every runner, chunking, resume and partitioning.

    Args:
        events: a pandas or polars DataFrame (or polars LazyFrame; the ``polars``
            extra), a CSV/Parquet path, or (on :class:`~dpcount.keyed.spec.Dask`) a Dask
            DataFrame, with columns time, key[, weight][, unit].
        columns: the event columns (:class:`~dpcount.keyed.events.EventColumns`).
        keys: the public key universe, or an open key set with its
            :class:`~dpcount.keyed.selection.KeySelection` (:class:`~dpcount.keyed.spec.Keys`).
        steps: the time buckets (:class:`~dpcount.keyed.spec.Steps`); an omitted start
            or horizon is read off the events (not private: listed in ``data_derived``).
        secret: the run secret file (created from operating-system entropy if absent,
            mode 0600; as sensitive as the raw data), or a :class:`RunSecret` loaded
            from one. Beside it live ``<secret>.lock``, held for the whole run, and
            ``<secret>.released``, the released-up-to mark (:mod:`dpcount.keyed.mark`):
            a release of already released steps from other data is refused. Raw bytes
            are refused; tests and examples may pass
            :func:`~dpcount.keyed.secret.unsafe_testing_secret`.
        counting: the budget and the counting mechanism
            (:class:`~dpcount.keyed.spec.Counting`; default ``"auto"``, the plan's best).
        bounds: the contribution bounds (:class:`~dpcount.keyed.spec.Bounds`).
        window: the steps released (:class:`~dpcount.keyed.spec.Window`): with a stored
            ``state``, the steps after it up to ``until`` (or those complete by the
            latest event time less ``allowed_lateness``); a resumed run equals, bit for
            bit with discrete noise, one run over all the steps. Needs an explicit
            start and horizon.
        runner: :class:`~dpcount.keyed.spec.Embedded` (default),
            :class:`~dpcount.keyed.spec.Dask` or :class:`~dpcount.keyed.spec.Spark`.
        output: where the release goes (:class:`~dpcount.keyed.spec.Output`): a frame
            (default), a CSV/Parquet file written atomically, a resumable directory of
            Parquet parts, ``on_chunk`` or a ``sink``.

    Returns:
        A :class:`KeyedResult`: frame with columns key, step, ``output.time_label``,
        private_count, std; the drop report; the mechanism and its guarantee.

    Raises:
        TypeError: a group of the wrong type.
        ValueError: a configuration that cannot run (named by its parameter), before
            any file is written.
    """
    _check_groups(columns, keys, steps, counting, bounds, window, runner, output)
    _check_window(window, steps, secret)
    check_secret_arg(secret)
    _check_open(keys.universe, keys.selection, output.path, output.on_chunk)
    _check_output(output.path, secret)
    _check_files(secret, window.state)
    if window.state is not None and secret_file(secret) is None:
        raise ValueError(
            "state= needs a secret file: the released-up-to mark that refuses a second "
            "release of the same steps is kept beside it (a testing secret has none)"
        )
    # a sink that keeps a record of its own (an incremental run's consumed files) binds
    # it into the release mark (:class:`~dpcount.keyed.mark.ReleaseCompanion`)
    sink = output.sink
    companion = sink if isinstance(sink, ReleaseCompanion) else None
    with ReleaseGuard(secret_file(secret), companion) as guard:  # held until the mark is final
        if is_polars(events):
            events = from_polars(events, columns)
        path = output.path
        parts = (
            None if path is None or not output.parts else _PartsDir(Path(path), output.chunk_keys)
        )
        plan = RunPlan(columns, keys, steps, counting, bounds, window, output, secret, guard, parts)
        ran = run_on(runner, events, plan)
        result = _emit(ran, plan)
        result.selection, result.key_selection = ran.outcome, keys.selection
        return result


_GROUPS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("columns", EventColumns),
    ("keys", Keys),
    ("steps", Steps),
    ("counting", Counting),
    ("bounds", Bounds),
    ("window", Window),
    ("runner", (Embedded, Dask, Spark)),
    ("output", Output),
)


def _check_groups(*groups: object) -> None:
    """Each group of :func:`keyed_counts` of its type (TypeError naming it)."""
    for (name, kind), value in zip(_GROUPS, groups, strict=True):
        if not isinstance(value, kind):
            raise TypeError(
                f"{name} must be a {getattr(kind, '__name__', 'runner')} option group "
                f"(dpcount.keyed.spec), got {type(value).__name__}"
            )


def _check_window(window: Window, steps: Steps, secret: SecretArg) -> None:
    """A stored state needs a fixed start and horizon and continues only its own secret."""
    state = window.state
    if state is not None and (steps.start is None or steps.horizon is None):
        raise ValueError(
            "state= needs an explicit start and horizon (fixed at the first run, the same "
            "in every later one)"
        )
    if (
        state is not None
        and Path(state).exists()
        and isinstance(secret, (str, os.PathLike))
        and not Path(secret).exists()
    ):
        raise FileNotFoundError(
            f"state file {state} exists but secret file {secret} does not: a state "
            "continues only the run of its own secret (not creating a new one)"
        )
    window.check()


def _check_open(
    keys: object,
    selection: KeySelection | None,
    output: str | os.PathLike[str] | None,
    on_chunk: object,
) -> None:
    """Refuse what key selection does not support."""
    if keys is None or selection is not None:
        if on_chunk is not None:
            raise ValueError(
                "on_chunk= receives every key's counts at every step, also those key "
                "selection withholds: not available with selection="
            )
        if output is not None and not Path(output).suffix:
            raise ValueError(
                f"output={str(output)!r}: a directory of parts is not available with "
                "selection= (write a .csv or .parquet file, or return a frame)"
            )


def _check_output(output: str | os.PathLike[str] | None, secret: SecretArg) -> None:
    """Refuse a bad output path before any file is written: a refused run must leave no
    secret file, mark or output behind (a secret bound to a refused configuration
    would refuse the corrected rerun)."""
    if output is None:
        return
    out = Path(output)
    if out.suffix and out.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise ValueError(
            f"output {out} must end in .csv or .parquet (or have no extension: a directory "
            "of Parquet parts)"
        )
    if out.suffix and out.is_dir():
        raise ValueError(f"output {out} is a directory, not a file")
    if not out.suffix and out.exists() and not out.is_dir():
        raise ValueError(f"output {out} is a file: a path without an extension is a directory")
    path = secret_file(secret)
    if not out.suffix and (out / "_run.json").exists() and path is not None and not path.exists():
        raise ValueError(
            f"output directory {out} holds another run's parts (its _run.json), and secret "
            f"file {path} is new: give another directory"
        )
    if out.suffix and not out.parent.is_dir():
        raise FileNotFoundError(f"output {out}: folder {out.parent} does not exist")


def _check_files(secret: SecretArg, state: str | os.PathLike[str] | None) -> None:
    """The secret's and the state's folders exist and the state is no directory, checked
    before any file is written (a missing folder found when the state is saved would
    come after the output: a release without its state)."""
    given = secret if isinstance(secret, (str, os.PathLike)) else secret_file(secret)
    for what, file in (("secret file", given), ("state file", state)):
        if file is None:
            continue
        p = Path(file)
        if not p.parent.is_dir():
            raise FileNotFoundError(f"{what} {file}: folder {p.parent} does not exist")
        if p.is_dir():
            raise ValueError(f"{what} {file} is a directory")


def _emit(ran: Ran, plan: RunPlan) -> KeyedResult:
    """The released chunks to the output, then the state, then the mark made final."""
    job = ran.job
    result = KeyedResult(
        None,
        ran.report,
        job.mechanism,
        job.buckets,
        job.secret.run_id,
        ran.created,
        None,
        ran.derived,
        (job.first, job.until),
        config=job.secret.config,
    )
    result.output, result.frame = _write(ran, plan)
    state, carry, guard = plan.window.state, ran.carry, plan.guard
    if state is not None:  # only once the whole output is out
        assert carry is not None
        save_state(job, state, carry.sums, carry.buffers, carry.open, carry.ledger)
        result.state = Path(state)
    if guard is not None:  # only now: the output (and state) are complete
        guard.finish()
    return result


def _write(ran: Ran, plan: RunPlan) -> tuple[Path | None, pd.DataFrame | None]:
    """The release written where ``plan.output`` says: (the output's path, the frame)."""
    job, chunks, out = ran.job, ran.chunks, plan.output
    label = out.time_label
    if out.sink is not None:
        return out.sink(job, chunks), None
    if plan.parts is not None:
        parts = plan.parts.for_job(job)
        writer = parts.writer(job, label)
        keys = job.universe.keys
        for lo, values in chunks:
            if values is not None:  # None: a worker wrote the part itself
                writer.write(lo, values, keys[lo : lo + values.shape[1]])
        return parts.path, None
    if out.on_chunk is not None:
        for lo, values in chunks:
            out.on_chunk(lo, values)
        return None, None
    frames = iter_frames(job, chunks, label)
    if out.path is None:
        frame = pd.concat(list(or_header(frames, label)), ignore_index=True)
        for column in ("key", label):  # plain values, whatever the chunking
            frame[column] = frame[column].astype(object)
        return None, frame
    if Path(out.path).suffix.lower() in (".parquet", ".pq"):
        tables = iter_tables(job, chunks, label)
        return write_frames(_or_schema(tables, job, label), out.path), None
    # no key selected (yet): the header alone, a file every CSV reader reads
    return write_frames(or_header(frames, label), out.path, out.std_digits), None
