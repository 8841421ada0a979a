"""Exactly-once output of a stream that survives being killed: :class:`DurableOutput`.

A release is final once its line may have reached the output. Releasing step t
again — after a crash, with possibly different data — would add the *same* noise
to different data and reveal the difference. :class:`DurableOutput` keeps the
output file and a checkpoint in step so that no step is ever released twice and
none is lost, for any stream whose state the caller can save (``dpcount count
--checkpoint`` saves a :class:`~dpcount.counting.CountingStream`; a service can do
the same without the command line). Nothing here knows what the stream is: the
caller saves its state, with the :class:`DurableOutput`'s record (a JSON-able
dict) beside it, and hands the record back on restart.

The protocol (docs/durable-streams.md), per batch of steps (``every`` steps
exactly; by default a batch ends when ``seconds`` have passed since the last save,
when ``idle()`` says the input has nothing waiting, or at :data:`MAX_BATCH` steps,
whichever comes first):

1. compute the releases (the stream's state moves on in memory only; the lines
   are held back, "pending");
2. fsync the output (the previous batch's lines are now on disk), then save the
   checkpoint atomically through the caller's ``save(record)``: the stream after
   the batch, and the record — the batch's lines, a running SHA-256 of the
   consumed input (:func:`chain_digest`), the options that shape the lines;
3. write the batch's lines to the output and flush.

A crash before 2 loses only unreleased work (the old checkpoint predates the
batch, and its lines were never written). A crash after 2 leaves the lines in the
checkpoint; on restart :meth:`DurableOutput.reconcile` appends them to the output
if missing (a partial last line is cut off; each line starts with its step
number, which tells which lines are there, so none is written twice). On restart
the input is read from the beginning; :meth:`DurableOutput.skip_input` consumes
the rows already consumed and checks their digest against the saved one, so the
saved noise is never applied to different data. Without a checkpoint the output
may hold at most the header (:meth:`DurableOutput.create`): deleting the
checkpoint does not allow a second release with fresh noise.

While a :class:`DurableOutput` is entered (``with``), it holds an exclusive lock
on ``<checkpoint>.lock`` (:class:`~dpcount.durable.lock.FileLock`, the keyed runs'
lock too): one checkpoint is never resumed by two processes at once.

Usage (the order matters; see :func:`dpcount._cli._durable.run_durable`)::

    run = DurableOutput(output=out, checkpoint=ck, header="t,value\\n", options={})
    with run:
        if run.exists():
            state = load(ck)                     # the caller's stream and its record
            run.load(state.record, step=state.step)
        else:
            run.create()                         # refuses an output with released lines
            state = fresh()
        rows = run.skip_input(rows)              # the consumed rows, digest checked
        run.reconcile()                          # the saved lines the output misses
        with run.writing(lambda record: save(state, ck, record)) as batch:
            for label, value in rows:
                batch.append(line_of(state.update(value)), value, label)
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

from dpcount.durable.atomic import PUBLIC, check_path, write_atomic
from dpcount.durable.lock import FileLock
from dpcount.durable.once import ExactlyOnce

__all__ = [
    "DIGEST_START",
    "MAX_BATCH",
    "DurableOutput",
    "OutputBatch",
    "chain_digest",
]

#: default cadence without ``every``: save when this many steps are pending, when
#: ``seconds`` have passed since the last save, or when the input is idle
MAX_BATCH = 10_000
#: the input digest before any row (hex; a domain separator fixed by the format)
DIGEST_START = hashlib.sha256(b"dpcount count input v1").hexdigest()
#: the keys of the record saved with each checkpoint
RECORD_KEYS = frozenset({"complete", "input_digest", "options", "pending", "tool"})


def chain_digest(digest: bytes, value: float, label: str | None = None) -> bytes:
    """The running input digest after one more row: SHA-256(digest ‖ value as float64),
    and with a time label SHA-256(digest ‖ value ‖ length ‖ label as UTF-8), the
    length (uint64) keeping the encoding unambiguous."""
    data = digest + struct.pack("<d", value)
    if label is not None:
        text = label.encode("utf-8")
        data += struct.pack("<Q", len(text)) + text
    return hashlib.sha256(data).digest()


def _tail_lines(fh: IO[bytes], end: int, count: int) -> tuple[list[bytes], bool]:
    """Up to ``count`` last complete lines of the first ``end`` bytes (which end in a
    newline), oldest first, and whether they reach the start of the file."""
    block = 1 << 16
    start = end
    while True:
        start = max(0, start - block)
        fh.seek(start)
        data = fh.read(end - start)
        lines = data.split(b"\n")[:-1]  # data ends with the newline at end - 1
        if start == 0:
            return [line + b"\n" for line in lines[-count:]], len(lines) <= count
        if len(lines) > count:  # lines[0] may be cut; the last count are complete
            return [line + b"\n" for line in lines[-count:]], False
        block *= 2


def _complete_end(fh: IO[bytes], size: int) -> int:
    """The length of the file up to and including its last newline (0 if none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - (1 << 16))
        fh.seek(start)
        cut = fh.read(pos - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


class DurableOutput:
    """An output file released exactly once, step by step, beside a checkpoint.

    Args:
        output: the output file (lines ``"<step>,...\\n"`` after ``header``).
        checkpoint: the caller's checkpoint file (its ``<checkpoint>.lock`` is held
            while the object is entered).
        header: the output's first line, ending in a newline.
        options: what shapes the lines (JSON-able); a checkpoint made with other
            options is refused.
        horizon: the last step, or None (no end); the record's ``complete`` says
            whether the horizon was reached.
        every: save every ``every`` steps exactly (None: by ``seconds``, ``idle`` and
            :data:`MAX_BATCH`).
        seconds: without ``every``, save when this many seconds have passed since
            the last save.
        idle: without ``every``, a function telling whether the input has nothing
            waiting: the held-back lines are then saved and delivered at once.
        tool: the writer's name, recorded in the checkpoint; a checkpoint of
            another writer is refused.
        spelling: how messages name ``"output"`` (default ``output``) and the
            ``"writer"`` (default ``tool``): a front end's spelling of them.

    Raises:
        ValueError: ``every`` < 1, ``seconds`` negative or not finite, ``output`` and
            ``checkpoint`` naming one file, or a header without its newline.
    """

    def __init__(
        self,
        *,
        output: str | os.PathLike[str],
        checkpoint: str | os.PathLike[str],
        header: str,
        options: Mapping[str, Any],
        horizon: int | None = None,
        every: int | None = None,
        seconds: float = 1.0,
        idle: Callable[[], bool] | None = None,
        tool: str = "dpcount count",
        spelling: Mapping[str, str] | None = None,
    ) -> None:
        self.output = check_path(output)
        self.checkpoint = check_path(checkpoint)
        names = {"output": "output", "writer": tool, **(spelling or {})}
        self._out_name, self._writer = names["output"], names["writer"]
        if every is not None and every < 1:
            raise ValueError(f"{names.get('every', 'every')} must be >= 1, got {every}")
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(
                f"{names.get('seconds', 'seconds')} must be a number >= 0, got {seconds}"
            )
        if os.path.abspath(self.output) == os.path.abspath(self.checkpoint):
            raise ValueError(
                f"{self._out_name} and {names.get('checkpoint', 'checkpoint')} must be "
                f"different files, got {self.output!r}"
            )
        if not header.endswith("\n"):
            raise ValueError(f"header must end with a newline, got {header!r}")
        self.header = header
        self.options = dict(options)
        self.horizon = horizon
        self.every, self.seconds, self.idle = every, seconds, idle
        self.tool = tool
        #: the steps released so far (the lines in the checkpoint and the batch included)
        self.step = 0
        self._digest = bytes.fromhex(DIGEST_START)
        self._saved_digest: str | None = None
        self._pending: list[str] = []
        lock = self.checkpoint + ".lock"
        self._lock = FileLock(
            lock,
            lambda holder: (
                f"checkpoint {self.checkpoint} is in use by another process (process "
                f"{holder}; lock {lock} is held)"
            ),
            required=False,
        )

    # -- the lock -------------------------------------------------------------------------
    def __enter__(self) -> DurableOutput:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        """Release the lock (its file removed), however the block ended."""
        self._lock.discard()

    def exists(self) -> bool:
        """Whether the checkpoint exists (resume it: :meth:`load`; else :meth:`create`)."""
        return os.path.exists(self.checkpoint)

    # -- starting -------------------------------------------------------------------------
    def create(self) -> None:
        """Start without a checkpoint: refuse an output holding more than the header
        (released lines: a fresh release would spend the budget twice), then write
        the header (atomically, never through a planted symlink or temporary name)."""
        head = self.header.encode()
        if os.path.exists(self.output):
            with open(self.output, "rb") as fh:
                start = fh.read(len(head) + 1)
            if not head.startswith(start):
                raise ValueError(
                    f"{self._out_name} {self.output} already holds data but checkpoint "
                    f"{self.checkpoint} does not exist: refusing to release the stream again "
                    "(a second release with fresh noise spends the privacy budget twice); "
                    "delete the output to start over"
                )
        write_atomic(self.output, [head], mode=PUBLIC)

    def load(self, record: Any, *, step: int) -> None:
        """Resume from a checkpoint at ``step`` whose saved record is ``record``:
        refuse another writer's checkpoint, corrupt pending lines and other options."""
        if not isinstance(record, dict) or set(record) != RECORD_KEYS:
            raise ValueError(f"checkpoint {self.checkpoint} was not written by {self._writer}")
        if record["tool"] != self.tool:
            raise ValueError(f"checkpoint {self.checkpoint} was not written by {self._writer}")
        pending = record["pending"]
        if (
            not isinstance(pending, list)
            or not all(isinstance(line, str) and line.endswith("\n") for line in pending)
            or len(pending) > step
        ):
            raise ValueError(f"checkpoint {self.checkpoint}: corrupt pending output lines")
        if record["options"] != self.options:
            raise ValueError(
                f"checkpoint {self.checkpoint} was made with {record['options']}, this run "
                f"has {self.options}: refusing to continue with different options"
            )
        self.step = step
        self._pending = list(pending)
        self._saved_digest = record["input_digest"]

    def skip_input(
        self, rows: Iterable[tuple[str | None, float]]
    ) -> Iterator[tuple[str | None, float]]:
        """Consume the rows the checkpoint already consumed (``(label, value)`` pairs,
        from the beginning of the input) and check their digest; return the rest.

        Raises:
            ValueError: the input is shorter, or its first rows differ from those the
                checkpoint consumed (the same noise on different data would leak it).
        """
        it = iter(rows)
        for consumed in range(self.step):
            row = next(it, None)
            if row is None:
                raise ValueError(
                    f"the input has {consumed} rows, but checkpoint {self.checkpoint} has "
                    f"consumed {self.step}: it is not the input the checkpoint was made with"
                )
            self._digest = chain_digest(self._digest, row[1], row[0])
        if self.step and self._digest.hex() != self._saved_digest:
            raise ValueError(
                f"the first {self.step} input rows differ from those checkpoint "
                f"{self.checkpoint} consumed: refusing to continue (the same noise on "
                "different data would leak it)"
            )
        return it

    def reconcile(self) -> int:
        """Bring the output in line with the loaded checkpoint (its pending lines are
        those of steps step − len(pending) + 1 .. step): cut a partial last line, check
        the lines present, append the missing ones, fsync. Returns how many were
        appended (0 without a loaded checkpoint).

        Raises:
            ValueError: the output has lines the checkpoint never released, lost lines
                the checkpoint no longer holds, or lines that differ from its.
        """
        if self._saved_digest is None:
            return 0
        pending, step, head = self._pending, self.step, self.header.encode()
        first = step - len(pending) + 1
        with open(self.output, "ab"):
            pass  # create it if it is missing (recoverable when pending starts at step 1)
        with open(self.output, "r+b") as fh:
            end = _complete_end(fh, fh.seek(0, os.SEEK_END))
            fh.truncate(end)  # a line cut short by the crash is in pending
            present: list[bytes] = []
            if end == 0:
                fh.seek(0)
                fh.write(head)
                end = len(head)
            else:
                present, at_start = _tail_lines(fh, end, len(pending) + 1)
                if at_start:
                    if present[0] != head:
                        raise ValueError(
                            f"{self._out_name} {self.output} does not start with the header "
                            f"{self.header!r}"
                        )
                    present = present[1:]
            last_t = self._line_step(present[-1]) if present else 0
            self._check_present(present, first, last_t)
            missing = pending[last_t - first + 1 :]
            fh.seek(end)
            fh.write("".join(missing).encode())
            fh.flush()
            os.fsync(fh.fileno())
        self._pending = []
        return len(missing)

    def _line_step(self, line: bytes) -> int:
        field = line.split(b",", 1)[0]
        try:
            return int(field)
        except ValueError:
            raise ValueError(
                f"{self._out_name} {self.output}: line {line[:60]!r} is not a {self.tool} line"
            ) from None

    def _check_present(self, present: list[bytes], first: int, last_t: int) -> None:
        """The output's last lines against the checkpoint's pending lines."""
        step = self.step
        if not first - 1 <= last_t <= step:
            raise ValueError(
                f"{self._out_name} {self.output} ends at step {last_t}, but checkpoint holds "
                f"the lines of steps {first}..{step} only: "
                + (
                    "the output has lines the checkpoint never released (a different run?)"
                    if last_t > step
                    else f"lines {last_t + 1}..{first - 1} are lost and cannot be recomputed"
                )
            )
        for line in present:
            t = self._line_step(line)
            if first <= t <= last_t and line.decode() != self._pending[t - first]:
                raise ValueError(
                    f"{self._out_name} {self.output}: the line of step {t} differs from the "
                    "checkpoint's (the output belongs to a different run)"
                )

    # -- releasing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, save: Callable[[dict[str, Any]], None]) -> Iterator[OutputBatch]:
        """The output opened for new lines: :meth:`OutputBatch.append` one line per
        step; a batch is committed when due and when the block ends (also by an error:
        the lines computed before it are released), then the output is fsynced.

        ``save(record)``: save the stream's state with ``record`` (a JSON-able dict,
        handed back to :meth:`load` on restart) atomically, replacing the checkpoint.
        """
        with open(self.output, "a", encoding="utf-8", newline="") as out:
            batch = OutputBatch(self, out, save)
            try:
                yield batch
            finally:
                if batch.lines:
                    batch.commit()
                out.flush()
                os.fsync(out.fileno())

    # The steps of one commit, in order (a subclass may observe them; the tests crash
    # between each pair).
    def sync_output(self, out: IO[str]) -> None:
        """Step 2a: the lines of earlier batches reach the disk."""
        out.flush()
        os.fsync(out.fileno())

    def save(self, save: Callable[[dict[str, Any]], None], lines: list[str]) -> None:
        """Step 2b: the checkpoint, holding ``lines`` as pending, replaces the old one."""
        save(
            {
                "tool": self.tool,
                "options": self.options,
                "pending": lines,
                "input_digest": self._digest.hex(),
                "complete": self.step == self.horizon,
            }
        )

    def deliver(self, out: IO[str], lines: list[str]) -> None:
        """Step 3: the saved lines go to the output."""
        out.write("".join(lines))
        out.flush()


class OutputBatch:
    """The lines held back until the checkpoint holding them is saved
    (:meth:`DurableOutput.writing`)."""

    def __init__(
        self, run: DurableOutput, out: IO[str], save: Callable[[dict[str, Any]], None]
    ) -> None:
        self.run, self.out = run, out
        self._once = ExactlyOnce([_CheckpointJournal(run, out, save)])
        self.lines: list[str] = []
        self.last_save = time.monotonic()

    def append(self, line: str, value: float, label: str | None = None) -> None:
        """The line of the next step, released from input row ``(label, value)``;
        committed when due."""
        run = self.run
        if run.horizon is not None and run.step >= run.horizon:
            raise ValueError(f"step {run.step + 1} is past the horizon {run.horizon}")
        run._digest = chain_digest(run._digest, value, label)
        run.step += 1
        self.lines.append(line)
        if self.due():
            self.commit()

    def due(self) -> bool:
        """Whether the batch is committed now (the cadence of :class:`DurableOutput`)."""
        run = self.run
        if run.every is not None:
            return len(self.lines) >= run.every
        return (
            len(self.lines) >= MAX_BATCH
            or time.monotonic() - self.last_save >= run.seconds
            or (run.idle is not None and run.idle())
        )

    def commit(self) -> None:
        """Fsync the output, save the checkpoint with the batch's lines, deliver them:
        the exactly-once protocol (:class:`~dpcount.durable.once.ExactlyOnce`) with the
        checkpoint as its journal."""
        lines = self.lines.copy()
        self._once.begin(lines)
        self.lines.clear()  # saved: a failed write is completed on restart, never retried
        self.run.deliver(self.out, lines)
        self._once.commit()
        self.last_save = time.monotonic()


class _CheckpointJournal:
    """The checkpoint as the journal of a batch: begin — the earlier lines reach the
    disk, then the checkpoint holding the batch's lines pending replaces the old one;
    commit — nothing (the next batch's begin records them delivered; a restart
    reconciles the output with them, :meth:`DurableOutput.reconcile`)."""

    def __init__(
        self, run: DurableOutput, out: IO[str], save: Callable[[dict[str, Any]], None]
    ) -> None:
        self.run, self.out, self._save = run, out, save

    def begin(self, release: list[str]) -> None:
        self.run.sync_output(self.out)
        self.run.save(self._save, release)

    def commit(self, release: list[str]) -> None:
        pass
