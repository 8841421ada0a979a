"""Incremental keyed runs over a directory of arriving files, with exactly-once output.

``run_incremental(input_dir, state=S, output=O, ...)`` (``dpcount keyed --input-dir D
--state S``) is meant to be started again and again (say by cron): each run

1. lists the event files of ``input_dir`` (``*.csv``, ``*.parquet``; names starting
   with ``.`` are skipped) and takes those not consumed by an earlier run — the *new*
   files, in name order;
2. places every event at its event-time step (:mod:`dpcount.keyed.watermark`):
   events of released steps in new files are late (refused, or moved to the next
   open step: ``late=``); events of steps not yet complete wait — the file is read
   again by the run that releases their step (only its events of that run's steps).
   When no new step is complete, nothing is consumed: the new files stay new (their
   latest event time still counts for the watermark of the next run);
3. releases the steps that are now complete — up to ``until=`` (a public schedule),
   or by the watermark, the latest event time of the consumed files, less
   ``allowed_lateness`` — continuing the run's state (:mod:`dpcount.keyed.state`)
   and its released-up-to mark (:mod:`dpcount.keyed.mark`);
4. appends the new steps' rows to ``output``: a ``.csv`` file grows by the rows of
   each release (the header once), a path without an extension is a directory with
   one ``steps-FIRST-LAST/`` folder of Parquet parts per release.

Files must appear complete (written elsewhere, then moved into ``input_dir``): a
file read while it is still being written would be consumed half, and refused as
changed by the next run. One incremental run of a state at a time (a lock,
``<state>.inputs.lock``).

**Consumed files** are recorded in ``<state>.inputs`` (JSON, mode 0600, replaced
atomically): name, SHA-256, size, modification time and the last step of its events,
plus the watermark and the steps released. A consumed file that changes (its size
or time differ and its SHA-256 too) is refused: its events were counted as they
were; put corrections in a new file. A consumed file may be deleted once its steps
are all released. A new file that repeats a consumed file or another new file — the
same bytes under another name, or a symlink to it — is refused naming both: its
events would be counted twice.

**The record is authenticated and bound to the release mark.** Which files a run
reads follows from the record, so a deleted or restored record would read consumed
files again and count their events twice (with ``late="next-step"``, moved into the
next open step: twice the sensitivity the guarantee is calibrated for). The record
carries an HMAC-SHA256 under a key derived from the run secret
(:func:`dpcount.keyed.mark.body_mac`, as the mark's), and every release binds the
MAC of the record it leaves into the released-up-to mark
(:attr:`dpcount.keyed.mark.Release.inputs`, through
:class:`~dpcount.keyed.mark.ReleaseCompanion`). A run accepts a record only if it
authenticates and is the one the mark binds — the record of the mark's last release,
or that record with the release in progress (or, before any release, the empty
record with the first release pending); it refuses a record that is missing while
steps were released, forged, older than the mark (a restored backup), or left by a
release that was not an incremental run's.

**Exactly once.** Before the release — after the mark's checks, just before the mark
records it in progress — the run records it *pending* in the inputs file (its
steps, its new files and the output's length). A run killed at any point
leaves that record; the next run first completes exactly that release — the same
files, the same steps, hence (the noise being a function of the secret and the
position) the same bits: a CSV output is cut back to its recorded length and the
rows appended again, a parts directory keeps the parts already written — and only
then picks up files that arrived since. So the output after a crash and a rerun is
byte-identical to the output of runs that were never interrupted. (Readers may see
a partial last release in a CSV while a killed run waits for its rerun.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.durable.atomic import read_private_json, write_atomic
from dpcount.durable.lock import FileLock
from dpcount.keyed.events import EventColumns, TimeBuckets, parse_times, row_name
from dpcount.keyed.io import PartsDir, read_events, release_rows, write_csv
from dpcount.keyed.job import KeyedJob
from dpcount.keyed.mark import Begun, ReleaseMark, SecretLike, body_mac, mark_path
from dpcount.keyed.run import KeyedResult, keyed_counts
from dpcount.keyed.secret import MacLabel, RunSecret
from dpcount.keyed.spec import from_keywords
from dpcount.keyed.state import RunState
from dpcount.keyed.watermark import check_late, complete_through, parse_lateness

__all__ = ["INPUTS_FORMAT", "IncrementalResult", "inputs_path", "run_incremental"]

INPUTS_FORMAT = "dpcount-keyed-inputs/2"
_SUFFIXES = (".csv", ".parquet", ".pq")


def inputs_path(state: str | os.PathLike[str]) -> Path:
    """The record of consumed files of the state file ``state``: ``<state>.inputs``."""
    p = Path(state)
    return p.with_name(p.name + ".inputs")


@dataclass(frozen=True)
class Consumed:
    """A consumed input file: its digest, size, modification time, last event step."""

    sha256: str
    size: int
    mtime_ns: int
    last_step: int


#: the MAC label of the inputs record (a key derived from the run secret)
INPUTS_MAC = MacLabel.INPUTS
#: an inputs record of many thousand files is a few MB; anything much larger is not one
MAX_INPUTS_BYTES = 1 << 28


@dataclass
class Inputs:
    """The contents of ``<state>.inputs``: the steps released, the watermark, the
    consumed files, and a release begun (``pending``: its steps, new files, watermark
    and the output's length before it)."""

    released: int = 0
    watermark: Any = None  # the latest event time read: int, or ISO text
    files: dict[str, Consumed] = field(default_factory=dict)
    pending: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        return {
            "format": INPUTS_FORMAT,
            "released": self.released,
            "watermark": self.watermark,
            "files": {name: dataclasses.asdict(c) for name, c in sorted(self.files.items())},
            "pending": self.pending,
        }

    def settled(self) -> Inputs:
        """The record once its pending release is done (itself if none is)."""
        pending = self.pending
        if pending is None:
            return self
        files = {**self.files, **{n: Consumed(**c) for n, c in pending["new"].items()}}
        return Inputs(int(pending["until"]), pending["watermark"], files, None)

    def without_pending(self) -> Inputs:
        """The record as the last completed release left it."""
        return dataclasses.replace(self, pending=None)

    def mac(self, secret: SecretLike) -> str:
        """HMAC-SHA256 of the record under the run secret (:func:`body_mac`)."""
        return body_mac(secret, INPUTS_MAC, self.body())

    @classmethod
    def load(cls, path: Path, secret: SecretLike) -> Inputs:
        """Read ``path`` and check its MAC under ``secret`` (not yet its freshness:
        :func:`_check_bound`)."""
        body = read_private_json(path, "keyed inputs record", MAX_INPUTS_BYTES)
        if body.get("format") == "dpcount-keyed-inputs/1":
            raise ValueError(
                f"inputs record {path} has format dpcount-keyed-inputs/1 (dpcount 0.4.0), "
                "which is not authenticated: which files it lists as consumed cannot be "
                "trusted. Start a new run (a new secret file and state)"
            )
        if body.get("format") != INPUTS_FORMAT:
            raise ValueError(f"{path} is not a dpcount keyed inputs record")
        mac = body.pop("mac", None)
        if not isinstance(mac, str) or not hmac.compare_digest(
            mac, body_mac(secret, INPUTS_MAC, body)
        ):
            raise ValueError(
                f"inputs record {path} fails its authentication check: it was changed, or "
                "it belongs to another secret"
            )
        return _parse_inputs(body, path)

    def save(self, path: Path, secret: SecretLike) -> None:
        """Replace ``path`` atomically (mode 0600) with this record and its MAC."""
        body = self.body()
        body["mac"] = self.mac(secret)
        write_atomic(path, [(json.dumps(body, sort_keys=True, indent=1) + "\n").encode()])


def _parse_inputs(body: dict[str, Any], path: Path) -> Inputs:
    """The fields of an authenticated record, checked (a damaged one: ValueError)."""
    damaged = ValueError(f"inputs record {path} is damaged")
    if set(body) != {"format", "released", "watermark", "files", "pending"}:
        raise damaged
    pending = body["pending"]
    if pending is not None:
        keys = {"first", "until", "new", "watermark", "output_size"}
        if not isinstance(pending, dict) or set(pending) != keys:
            raise damaged
        first, until = pending["first"], pending["until"]
        if not (_count(first) and _count(until) and 1 <= first <= until):
            raise damaged
        if not _count(pending["output_size"]) or not _watermark(pending["watermark"]):
            raise damaged
        _files(pending["new"], damaged)
    if not _count(body["released"]) or not _watermark(body["watermark"]):
        raise damaged
    return Inputs(body["released"], body["watermark"], _files(body["files"], damaged), pending)


def _files(value: object, damaged: ValueError) -> dict[str, Consumed]:
    if not isinstance(value, dict):
        raise damaged
    out = {}
    fields = {"sha256", "size", "mtime_ns", "last_step"}
    for name, seen in value.items():
        plain = isinstance(name, str) and name and "/" not in name and "\0" not in name
        if not plain or name in (".", "..") or not isinstance(seen, dict) or set(seen) != fields:
            raise damaged
        sha, size, mtime, last = (seen[f] for f in ("sha256", "size", "mtime_ns", "last_step"))
        numbers = _count(size) and _count(last) and _count(mtime, signed=True)
        if not (numbers and isinstance(sha, str) and len(sha) == 64):
            raise damaged
        out[name] = Consumed(sha, size, mtime, last)
    return out


def _count(value: object, *, signed: bool = False) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (signed or value >= 0)
        and abs(value) < 1 << 63
    )


def _watermark(value: object) -> bool:
    """None, an integer time or an ISO timestamp (the text pandas reads back)."""
    if value is None or _count(value, signed=True):
        return True
    if not isinstance(value, str) or len(value) > 64:
        return False
    try:
        pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        return False
    return True


@dataclass
class IncrementalResult:
    """What one call did: the release (None when no step was complete), the files it
    consumed, and whether it first completed a release a killed run had begun."""

    result: KeyedResult | None
    new_files: list[str]
    released: tuple[int, int] | None
    completed_interrupted: bool = False


def _digest(path: Path) -> tuple[str, int, int]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    st = os.stat(path)
    return h.hexdigest(), st.st_size, st.st_mtime_ns


def _existing_secret(secret: object) -> RunSecret | None:
    """The run secret of ``secret=`` if its file exists (None: a first run creates it;
    a testing secret has no file, and ``keyed_counts`` refuses it with a state). Its
    configuration is checked by the release (``keyed_counts``); here it keys the MACs."""
    if isinstance(secret, RunSecret):
        return secret if secret.path is not None else None
    if not isinstance(secret, (str, os.PathLike)) or not os.path.exists(secret):
        return None
    try:
        config = json.loads(Path(secret).read_text(encoding="utf-8"))["config"]
        if not isinstance(config, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError, OSError):
        config = {}  # not a secret file: RunSecret.load says so
    return RunSecret.load(secret, config)


def _load_record(run: _Setup) -> Inputs:
    """The consumed-files record, authenticated under the run secret and bound to its
    released-up-to mark: refused when missing while steps were released, forged, or
    other than the record the mark's last release left (a restored backup, or the
    record of a release not made by an incremental run)."""
    record, secret, state = run.record, run.secret, run.state
    mark: ReleaseMark | None = None
    if secret is not None and secret.path is not None and mark_path(secret.path).exists():
        mark = ReleaseMark.load(mark_path(secret.path), secret)
    if not record.exists():
        released = mark is not None and (mark.released > 0 or mark.pending is not None)
        if os.path.exists(state) or released:
            raise ValueError(
                f"inputs record {record} is missing, but steps were released with this "
                f"state ({state}) and secret: which files were consumed cannot be told, "
                "and reading them again would count their events twice; refused. Start a "
                "new run (a new secret file and state)"
            )
        return Inputs()
    if secret is None:
        raise ValueError(
            f"inputs record {record} exists but the secret file {run.options.get('secret')} "
            "does not: the record belongs to the run of another secret"
        )
    inputs = Inputs.load(record, secret)
    _check_bound(inputs, mark, secret, record)
    return inputs


def _check_bound(
    inputs: Inputs, mark: ReleaseMark | None, secret: SecretLike, record: Path
) -> None:
    """Refuse an authentic record that is not the one the mark binds: the record of the
    mark's last release (or of the release in progress), or, before any release, the
    empty record with the first release pending."""
    if mark is None:
        raise ValueError(
            f"inputs record {record} exists but the released-up-to mark of its secret is "
            "missing: which steps and files were released cannot be told; refused. Start "
            "a new run (a new secret file and state)"
        )
    accepted = mark.bound_inputs()
    if mark.last is None:
        accepted.add(Inputs().mac(secret))  # nothing released yet: nothing consumed
    found = {inputs.without_pending().mac(secret)}
    if inputs.pending is not None:
        found.add(inputs.settled().mac(secret))
    if found & accepted:
        return
    last = "none" if mark.last is None else mark.last.describe()
    raise ValueError(
        f"inputs record {record} is not the one the released-up-to mark of this secret "
        f"binds (steps 1..{mark.released} released; last release: {last}): it is a "
        "restored backup or a copy, or the last release was not made by an incremental "
        "run. Taking its files as consumed or not would count events twice or never; "
        "refused. Start a new run (a new secret file and state)"
    )


def _check_consumed(folder: Path, inputs: Inputs) -> None:
    """Refuse a consumed file that changed; a missing one only if still needed."""
    for name, seen in inputs.files.items():
        path = folder / name
        if not path.exists():
            if seen.last_step > inputs.released:
                raise FileNotFoundError(
                    f"input file {path} was consumed by an earlier run and holds events of "
                    f"steps not yet released (up to step {seen.last_step}); it must stay "
                    "until they are"
                )
            continue
        st = os.stat(path)
        if (st.st_size, st.st_mtime_ns) == (seen.size, seen.mtime_ns):
            continue
        if _digest(path)[0] != seen.sha256:
            raise ValueError(
                f"input file {path} was consumed by an earlier run and has changed since "
                "(its SHA-256 differs): its events were counted as they were; put "
                "corrections in a new file"
            )


def _check_duplicates(
    folder: Path, inputs: Inputs, digests: dict[str, tuple[str, int, int]]
) -> None:
    """Refuse a new file that holds the events of a consumed file or of another new
    file — a symlink to it, or a byte-identical copy (the same SHA-256) — naming both:
    its events would be counted twice. ``digests``: the new files' (in name order)."""
    owner = {seen.sha256: name for name, seen in sorted(inputs.files.items())}
    real = Path(os.path.realpath(folder))
    for name, (sha, _, _) in digests.items():
        path = folder / name
        other = owner.get(sha)
        target = Path(os.path.realpath(path))
        linked = target.parent == real and target.name != name
        if path.is_symlink() and linked and (target.name in inputs.files or target.name in digests):
            other = target.name if other is None else other
        if other is not None:
            what = (
                "consumed by an earlier run"
                if other in inputs.files
                else "another new file of this run"
            )
            how = (
                f"a symlink to {folder / target.name}"
                if path.is_symlink() and target == real / other
                else f"a byte-identical copy of {folder / other}"
            )
            raise ValueError(
                f"input file {path} is {how} ({what}): its events would be counted twice. "
                "Remove it (each event goes in one file; put corrections in a new file "
                "with other contents)"
            )
        owner[sha] = name


def _listing(folder: Path) -> list[str]:
    if not folder.is_dir():
        raise FileNotFoundError(f"input directory {folder} not found")
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in _SUFFIXES
    )


def _read(
    folder: Path, names: Iterable[str], columns: EventColumns, buckets: TimeBuckets
) -> dict[str, tuple[pd.DataFrame, NDArray[np.int64], pd.Series]]:
    """Each file's events (index: "FILE line N"), their steps and times."""
    out = {}
    for name in names:
        frame = read_events(folder / name, columns)
        frame.index = pd.Index([f"{name} {row_name(frame.index, i)}" for i in range(len(frame))])
        times = parse_times(frame[columns.time], columns.time)
        out[name] = (frame, buckets.steps(times), times)
    return out


def _refuse_late(
    read: dict[str, tuple[pd.DataFrame, NDArray[np.int64], pd.Series]],
    first: int,
    columns: EventColumns,
) -> None:
    """ValueError naming the first event of a released step in the new files."""
    for frame, steps, _ in read.values():
        late = (steps >= 1) & (steps < first)
        if late.any():
            i = int(np.flatnonzero(late)[0])
            raise ValueError(
                f"late event at {frame.index[i]} (time {frame[columns.time].iloc[i]}) is in "
                f"step {int(steps[i])}, already released: this run continues from step "
                f"{first}; remove it, or place late events in the next open step with "
                f"late='next-step' ({int(late.sum())} events refused)"
            )


def _watermark_value(times: pd.Series) -> Any:
    value = times.max()
    return value.isoformat() if isinstance(value, pd.Timestamp) else int(value)


def _later(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, str):
        return max(pd.Timestamp(a), pd.Timestamp(b)).isoformat()
    return max(int(a), int(b))


@dataclass(eq=False)
class _Appender:
    """Appends a release's rows: to a CSV file from ``size`` bytes on (cut back to it
    first: a killed attempt's partial rows go; the header only into an empty file), or
    as a folder of Parquet parts in a directory (parts a killed attempt wrote are
    rewritten with the same bytes); ``digits``: a CSV's std digits. It keeps the
    release's ``inputs`` record (saved to ``record``) under the mark's protocol
    (:class:`~dpcount.keyed.mark.ReleaseCompanion`); ``committed``: the release done."""

    path: Path
    size: int
    time_label: str
    chunk_keys: int
    digits: int | None
    inputs: Inputs
    record: Path
    committed: bool = field(default=False, init=False)

    def digest(self, secret: SecretLike) -> str:
        """The MAC of the inputs record once this release is done (the mark binds it)."""
        return self.inputs.settled().mac(secret)

    def begin(self, release: Begun) -> None:
        """Record the release pending in the inputs record, under the run secret (the
        mark's checks passed; the mark records it in progress next)."""
        self.inputs.save(self.record, release.secret)

    def commit(self, release: Begun) -> None:
        """Record the release done in the inputs record (the mark records it first)."""
        _finish(self.inputs, self.record, release.secret)
        self.committed = True

    def __call__(self, job: KeyedJob, chunks: Iterable[tuple[int, NDArray[Any]]]) -> Path:
        if self.path.suffix.lower() != ".csv":
            parts = PartsDir(self.path, self.chunk_keys, self.time_label)
            parts.for_job(job).open(job)
            return parts(job, chunks)
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        created = not self.path.exists()
        fd = os.open(self.path, flags, 0o666)
        try:
            os.ftruncate(fd, self.size)
            os.lseek(fd, self.size, os.SEEK_SET)
            rows = release_rows(job, chunks, self.time_label, frame=True)
            with os.fdopen(fd, "wb", closefd=False) as fh:  # buffered: written in full
                write_csv(rows, fh, self.digits, header=self.size == 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created and os.name == "posix":  # the new file's name is durable too
            folder = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        return self.path


def run_incremental(
    input_dir: str | os.PathLike[str],
    *,
    state: str | os.PathLike[str],
    output: str | os.PathLike[str],
    until: int | None = None,
    allowed_lateness: Any = None,
    late: str = "refuse",
    time_label: str = "time",
    **options: Any,
) -> IncrementalResult:
    """Consume the new files of ``input_dir`` and append the newly complete steps.

    Args:
        input_dir: the folder where event files (CSV/Parquet) arrive.
        state: the run's state file (:func:`~dpcount.keyed.run.keyed_counts`
            ``state=``); the consumed files are recorded beside it (``.inputs``).
        output: a ``.csv`` file (appended) or a directory (one folder of Parquet parts
            per release).
        until: release up to this step (a public schedule), or
        allowed_lateness: release the steps complete by the watermark (the latest
            event time of all consumed files) less this wait (not private).
        late: ``"refuse"`` or ``"next-step"`` (:mod:`dpcount.keyed.watermark`).
        **options: the other arguments of :func:`~dpcount.keyed.run.keyed_counts`
            (``keys``, ``time_column``, ``key_column``, ``step``, ``start``,
            ``horizon``, ``budget``, ``secret``, ...); ``start`` and ``horizon`` are
            required.

    Returns:
        An :class:`IncrementalResult`. See the module docstring for the guarantees.
    """
    late = check_late(late)
    if (until is None) == (allowed_lateness is None):
        raise ValueError(
            "give until= (the last step to release, a public schedule) or allowed_lateness= "
            "(the steps complete by the latest event time), exactly one"
        )
    for name in ("start", "horizon"):
        if options.get(name) is None:
            raise ValueError(
                f"an incremental run needs an explicit {name}= (fixed at the first run)"
            )
    for name in ("events", "output", "until", "allowed_lateness", "sink", "on_chunk"):
        if name in options:
            raise TypeError(f"run_incremental() got an unexpected keyword argument {name!r}")
    out = _check_output(Path(output), options)
    folder = Path(input_dir)
    record = inputs_path(state)
    if not record.parent.is_dir():  # before the lock and the record are created there
        raise FileNotFoundError(f"state file {state}: folder {record.parent} does not exist")
    columns = EventColumns(
        options["time_column"],
        options["key_column"],
        options.get("weight_column"),
        options.get("unit_column"),
    )
    buckets = TimeBuckets.make(options["step"], options["start"])
    wait = None if allowed_lateness is None else parse_lateness(allowed_lateness, buckets)
    lock = _inputs_lock(record, state)
    lock.acquire()  # one incremental run of this state at a time (the record, the output)
    secret = _existing_secret(options.get("secret"))
    run = _Setup(folder, record, state, out, late, time_label, columns, buckets, options, secret)
    try:
        return _run_locked(run, until, wait)
    finally:
        if record.exists():
            lock.release()
        else:  # a refused first run: no record, no lock file left behind either
            lock.discard()


def _check_output(out: Path, options: dict[str, Any]) -> Path:
    """An output an incremental run can append to: a .csv file, or a directory of parts
    (not with an open key set)."""
    suffix = out.suffix.lower()
    if suffix in (".parquet", ".pq"):
        raise ValueError(
            f"output {out}: a Parquet file cannot be appended to; give a .csv file or a "
            "directory (no extension: one folder of Parquet parts per release)"
        )
    if suffix not in ("", ".csv"):
        raise ValueError(f"output {out} must end in .csv or be a directory (no extension)")
    if suffix == "" and options.get("keys", ()) is None:
        raise ValueError(
            f"output {out}: a directory of parts is not available with selection= (an open "
            "key set); give a .csv file"
        )
    return out


def _inputs_lock(record: Path, state: str | os.PathLike[str]) -> FileLock:
    """The lock of the inputs record (``<state>.inputs.lock``): one incremental run of a
    state at a time (:class:`~dpcount.durable.lock.FileLock`)."""
    path = record.with_name(record.name + ".lock")
    return FileLock(
        path,
        lambda holder: (
            f"another incremental run of state {state} (process {holder}) holds the lock "
            f"{path}: one incremental run of a state at a time; wait for it, then rerun"
        ),
    )


@dataclass(frozen=True)
class _Setup:
    """What every step of an incremental run reads (fixed by its arguments)."""

    folder: Path
    record: Path
    state: str | os.PathLike[str]
    out: Path
    late: str
    time_label: str
    columns: EventColumns
    buckets: TimeBuckets
    options: dict[str, Any]
    #: the run secret (None: no secret file yet, a first run creates it)
    secret: RunSecret | None = None


def _run_locked(run: _Setup, until: int | None, wait: int | None) -> IncrementalResult:
    folder, out, columns, buckets = (
        run.folder,
        run.out,
        run.columns,
        run.buckets,
    )
    late, options = run.late, run.options
    horizon = int(options["horizon"])
    suffix = out.suffix.lower()
    inputs = _load_record(run)
    completed = False
    if inputs.pending is not None:
        completed = True
        _complete_pending(run, inputs)
    _check_consumed(folder, inputs)
    new = [n for n in _listing(folder) if n not in inputs.files]
    digests = {n: _digest(folder / n) for n in new}
    _check_duplicates(folder, inputs, digests)
    read = _read(folder, new, columns, buckets)
    watermark = inputs.watermark
    for _, _, times in read.values():
        if len(times):
            watermark = _later(watermark, _watermark_value(times))
    first = inputs.released + 1
    if until is not None:
        last = min(until, horizon)
    elif watermark is None:
        last = 0
    else:
        assert wait is not None
        mark = pd.Timestamp(watermark) if isinstance(watermark, str) else watermark
        last = complete_through(buckets, horizon, mark, wait)
    files = {  # the last step a file's events still count in (none beyond the horizon)
        n: Consumed(*digests[n], last_step=int(steps.clip(0, horizon).max()) if len(steps) else 0)
        for n, (_, steps, _) in read.items()
    }
    if late == "refuse":
        _refuse_late(read, first, columns)
    if last < first or first > horizon:  # nothing complete: the new files wait, unconsumed
        return IncrementalResult(None, new, None, completed)
    inputs.pending = {  # recorded with the mark (_Appender.begin): nothing written yet
        "first": first,
        "until": last,
        "new": {n: dataclasses.asdict(c) for n, c in files.items()},
        "watermark": watermark,
        "output_size": out.stat().st_size if suffix == ".csv" and out.exists() else 0,
    }
    result = _release(run, inputs)
    if wait is not None:
        result.data_derived.append("the released steps (from the latest event time)")
    return IncrementalResult(result, new, (first, last), completed)


def _complete_pending(run: _Setup, inputs: Inputs) -> None:
    """Finish the release a killed run began (the same files and steps)."""
    folder, record, state = run.folder, run.record, run.state
    pending = inputs.pending
    assert pending is not None
    done = RunState.peek_step(state) if os.path.exists(state) else 0
    if done == pending["until"]:  # released and saved; only this record was not updated
        assert run.secret is not None  # a record exists: so does its secret (_load_record)
        _finish(inputs, record, run.secret)
        return
    if done != pending["first"] - 1:
        raise ValueError(
            f"inputs record {record} has a release of steps {pending['first']}.."
            f"{pending['until']} pending, but state file {state} records step {done}"
        )
    for name, seen in pending["new"].items():
        if not (folder / name).exists() or _digest(folder / name)[0] != seen["sha256"]:
            raise ValueError(
                f"input file {folder / name} was read by an interrupted run and has changed "
                "or gone since: that release can only be completed from the same files"
            )
    _release(run, inputs)


def _release(run: _Setup, inputs: Inputs) -> KeyedResult:
    """The pending release: new files whole, open earlier files from its first step."""
    folder, state, out, columns, buckets = run.folder, run.state, run.out, run.columns, run.buckets
    late, time_label, options = run.late, run.time_label, run.options
    pending = inputs.pending
    assert pending is not None
    first, last = int(pending["first"]), int(pending["until"])
    new = sorted(pending["new"])
    reread = sorted(
        n for n, c in inputs.files.items() if c.last_step >= first and n not in pending["new"]
    )
    frames = []
    for name, (frame, steps, _) in sorted(_read(folder, new + reread, columns, buckets).items()):
        frames.append(frame if name in pending["new"] else frame[steps >= first])
    if frames:
        events = pd.concat(frames)
    else:  # no file holds events of these steps: a release of zero contributions
        events = pd.DataFrame({c: pd.Series([], dtype=object) for c in columns.names()})
        kind = np.int64 if buckets.width.kind == "number" else "datetime64[ns]"
        events[columns.time] = pd.Series([], dtype=kind)
    record = inputs_path(state)
    sink = _Appender(
        out,
        int(pending["output_size"]),
        time_label,
        options.get("chunk_keys", 2048),
        options.get("std_digits"),
        inputs,
        record,
    )
    # refused before the mark's checks passed: this release never began, and the
    # record on disk is as it was (a killed attempt's pending release stays pending)
    given = dict(state=state, until=last, late=late, time_label=time_label, sink=sink)
    result = keyed_counts(events, **from_keywords(**options, **given))
    assert sink.committed  # the guard began and committed it (a secret file's run)
    return result


def _finish(inputs: Inputs, record: Path, secret: SecretLike) -> None:
    """Record the pending release as done (after the output, the state and the mark)."""
    done = inputs.settled()
    done.save(record, secret)
    inputs.released, inputs.watermark, inputs.files = done.released, done.watermark, done.files
    inputs.pending = None
