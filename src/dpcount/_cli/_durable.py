"""``dpcount count --checkpoint``: a run that survives being killed, releasing no step twice.

The protocol (docs/durable-streams.md). A release is final once its line may have
reached the output; releasing step t again — after a crash, with possibly
different data — would add the *same* noise to different data and reveal the
difference. So, per batch of steps (``--checkpoint-every N`` steps exactly; by
default a batch ends when ``--checkpoint-seconds`` (1 s) have passed since the
last save, when live input has nothing waiting, or at :data:`MAX_BATCH` steps,
whichever comes first: the cost of saving stays bounded for fast input, and a
slow live stream is still delivered row by row):

1. compute the releases (the stream's state moves on in memory only);
2. fsync the output (the previous batch's lines are now on disk), then save the
   checkpoint atomically: the stream after the batch, the batch's output lines
   ("pending"), a running SHA-256 of the consumed input values (and time labels,
   with --time-column), and the options (with those that shape the lines:
   --time-column, --round, --clamp);
3. write the batch's lines to the output and flush.

A crash before 2 loses only unreleased work (the old checkpoint predates the
batch, and its lines were never written). A crash after 2 leaves the lines in the
checkpoint; on restart they are appended to the output if missing (a partial
last line is cut off; the ``t`` column tells which lines are there, so none is
written twice). On restart the input is read from the beginning (a file, or stdin
re-sent by the producer); the rows already consumed are skipped, and their
digest must equal the saved one, otherwise the run is refused.

The checkpoint is kept when the run ends. At the horizon it is complete: running
the command again only re-delivers missing output lines and releases nothing. If
the input ended earlier, running again with a longer input continues the stream
(pass ``--horizon`` for a file that grows). Stdin without ``--horizon`` runs the
unbounded doubling counter, checkpointed by :func:`~dpcount.counting.unbounded.save_unbounded`;
it is never complete. Deleting the checkpoint while the
output holds released lines does not allow a fresh start: the run refuses to
overwrite released lines.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import math
import os
import struct
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

from dpcount._cli._counting import (
    build,
    build_unbounded,
    header,
    postprocessed,
    row_line,
    summary,
    summary_unbounded,
)
from dpcount._cli.common import err_console, escape
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.checkpoint import CheckpointMismatchError, load_stream, save_stream
from dpcount.counting.unbounded import (
    UnboundedCounter,
    UnboundedStream,
    load_unbounded,
    save_unbounded,
)
from dpcount.durable.atomic import PUBLIC, write_atomic
from dpcount.io import SeriesReader

__all__ = ["run_durable"]

#: the output header of a run without --time-column, --round or --clamp
HEADER = "t,private_count,std\n"
#: default cadence without --checkpoint-every: save when this many steps are pending,
#: when --checkpoint-seconds have passed since the last save, or when live input pauses
MAX_BATCH = 10_000
_DIGEST_START = hashlib.sha256(b"dpcount count input v1").hexdigest()
_EXTRA_KEYS = frozenset({"complete", "input_digest", "options", "pending", "tool"})
_TOOL = "dpcount count"


def chain_digest(digest: bytes, value: float, label: str | None = None) -> bytes:
    """The running input digest after one more row: SHA-256(digest ‖ value as float64),
    and with a time label (--time-column) SHA-256(digest ‖ value ‖ length ‖ label as
    UTF-8), the length (uint64) keeping the encoding unambiguous."""
    data = digest + struct.pack("<d", value)
    if label is not None:
        text = label.encode("utf-8")
        data += struct.pack("<Q", len(text)) + text
    return hashlib.sha256(data).digest()


def _deliver(out: IO[str], lines: list[str]) -> None:
    """Write released lines to the output (after the checkpoint holding them is durable)."""
    out.write("".join(lines))
    out.flush()


@contextlib.contextmanager
def _locked(checkpoint: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<checkpoint>.lock`` (POSIX), so that one checkpoint is
    never resumed by two processes at once (they would release the same noise).

    The lock file is removed when the run ends (normally or by an error), while the
    lock is still held; a process that opened the old file meanwhile sees, once it
    holds the lock, that the path no longer names its file, and starts over on the
    new one (so two processes never hold "the" lock at once). A lock file left by a
    killed run is harmless: its lock died with the process.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks, documented
        yield
        return
    path = checkpoint + ".lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(
                f"checkpoint {checkpoint} is in use by another process (lock {path} is held)"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed it as we opened it: lock the current file
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _input_idle(live: bool) -> bool:
    """Whether live input has nothing waiting to be read (POSIX ``select``): the held-back
    lines are then saved and delivered at once, not after the next row arrives."""
    if not live:
        return False
    try:
        import select

        ready, _, _ = select.select([sys.stdin], [], [], 0)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (tests)
        return False
    return not bool(ready)


def _check_fresh_output(path: str, checkpoint: str, head_line: str) -> None:
    """Without a checkpoint the output may hold at most the header (nothing released)."""
    if not os.path.exists(path):
        return
    with open(path, "rb") as fh:
        head = fh.read(len(head_line.encode()) + 1)
    if not head_line.encode().startswith(head):
        raise ValueError(
            f"--output {path} already holds data but checkpoint {checkpoint} does not exist: "
            "refusing to release the stream again (a second release with fresh noise spends "
            "the privacy budget twice); delete the output to start over"
        )


def _tail_lines(fh: IO[bytes], end: int, count: int) -> tuple[list[bytes], bool]:
    """Up to ``count`` last complete lines of the first ``end`` bytes (which end in a
    newline), oldest first, and whether they reach the start of the file."""
    block = 1 << 16
    start = end
    data = b""
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


def _line_t(line: bytes, path: str) -> int:
    field = line.split(b",", 1)[0]
    try:
        return int(field)
    except ValueError:
        raise ValueError(
            f"--output {path}: line {line[:60]!r} is not a dpcount count line"
        ) from None


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


def _reconcile(path: str, pending: list[str], step: int, head_line: str) -> int:
    """Bring the output in line with a checkpoint at ``step`` holding ``pending`` (the
    lines of steps step − len(pending) + 1 .. step): cut a partial last line, check the
    lines present, append the missing ones, fsync. Returns how many were appended.
    ``head_line``: the output's header line for this run's options."""
    first = step - len(pending) + 1
    with open(path, "ab"):
        pass  # create it if it is missing (recoverable when pending starts at step 1)
    with open(path, "r+b") as fh:
        end = _complete_end(fh, fh.seek(0, os.SEEK_END))
        fh.truncate(end)  # a line cut short by the crash is in pending
        present: list[bytes] = []
        if end == 0:
            fh.seek(0)
            fh.write(head_line.encode())
            end = len(head_line.encode())
        else:
            present, at_start = _tail_lines(fh, end, len(pending) + 1)
            if at_start:
                if present[0] != head_line.encode():
                    raise ValueError(
                        f"--output {path} does not start with the header {head_line!r}"
                    )
                present = present[1:]
        last_t = _line_t(present[-1], path) if present else 0
        if not first - 1 <= last_t <= step:
            raise ValueError(
                f"--output {path} ends at step {last_t}, but checkpoint holds the lines of "
                f"steps {first}..{step} only: "
                + (
                    "the output has lines the checkpoint never released (a different run?)"
                    if last_t > step
                    else f"lines {last_t + 1}..{first - 1} are lost and cannot be recomputed"
                )
            )
        for line in present:
            t = _line_t(line, path)
            if first <= t <= last_t and line.decode() != pending[t - first]:
                raise ValueError(
                    f"--output {path}: the line of step {t} differs from the checkpoint's "
                    "(the output belongs to a different run)"
                )
        missing = pending[last_t - first + 1 :]
        fh.seek(end)
        fh.write("".join(missing).encode())
        fh.flush()
        os.fsync(fh.fileno())
    return len(missing)


def _check_extra(stream: CountingStream | UnboundedStream, checkpoint: str) -> dict[str, Any]:
    extra = stream.extra
    if not isinstance(extra, dict) or set(extra) != _EXTRA_KEYS or extra["tool"] != _TOOL:
        raise ValueError(f"checkpoint {checkpoint} was not written by {_TOOL} --checkpoint")
    pending = extra["pending"]
    if (
        not isinstance(pending, list)
        or not all(isinstance(line, str) and line.endswith("\n") for line in pending)
        or len(pending) > stream.step
    ):
        raise ValueError(f"checkpoint {checkpoint}: corrupt pending output lines")
    return extra


def run_durable(args: argparse.Namespace) -> int:
    """``dpcount count ... --checkpoint FILE --output OUT`` (see the module docstring)."""

    checkpoint, output = args.checkpoint, args.output
    if output is None or output == "-":
        raise ValueError(
            "--checkpoint needs --output FILE (the output is checked and completed on restart)"
        )
    every: int | None = args.checkpoint_every
    if every is not None and every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {every}")
    seconds: float = args.checkpoint_seconds
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"--checkpoint-seconds must be a number >= 0, got {seconds}")
    if os.path.abspath(output) == os.path.abspath(checkpoint):
        raise ValueError(f"--output and --checkpoint must be different files, got {output!r}")
    live = args.input == "-"
    values: list[float] | None = None  # known in advance for a file (the noise default)
    horizon: int | None
    if live:
        horizon = args.horizon  # None: the unbounded doubling counter
        reader = SeriesReader(
            sys.stdin,
            args.column,
            source="stdin",
            time_column=args.time_column,
            missing=args.missing,
        )
        rows: Any = ((time, v) for _, time, v in reader.records())
    else:
        with open(args.input, encoding="utf-8", newline="") as fh:
            reader = SeriesReader(
                fh, args.column, source=args.input, time_column=args.time_column,
                missing=args.missing,
            )  # fmt: skip
            rows = [(time, v) for _, time, v in reader.records()]
        values = [v for _, v in rows]
        if not values:
            raise ValueError(f"{args.input}: no data rows")
        horizon = len(values) if args.horizon is None else args.horizon
        if horizon < len(values):
            raise ValueError(
                f"--horizon {horizon} is smaller than the {len(values)} rows of {args.input}"
            )
    options: dict[str, Any] = {"column": args.column, "seed": args.seed}
    # Options that shape the output lines (absent when not used, so a checkpoint of
    # an earlier version without them resumes): a resumed run must write the same.
    post = bool(args.round or args.clamp)
    if args.time_column is not None:
        options["time_column"] = args.time_column
    if post:
        options["round"], options["clamp"] = bool(args.round), bool(args.clamp)
    head_line = ",".join(header(args, post)) + "\n"
    con = err_console()
    with _locked(checkpoint):
        mech: CountingMechanism | UnboundedCounter
        stream: CountingStream | UnboundedStream
        mech = build_unbounded(args) if horizon is None else build(args, horizon, values)
        if os.path.exists(checkpoint):
            try:
                if isinstance(mech, UnboundedCounter):
                    stream = load_unbounded(checkpoint, expect=mech)
                else:
                    stream = load_stream(checkpoint, expect=mech)
            except CheckpointMismatchError as err:
                if "horizon" in err.fields and not live and args.horizon is None:
                    raise ValueError(
                        f"{err}; the horizon defaults to the rows of {args.input}: a file "
                        "that grows needs the same explicit --horizon in every run"
                    ) from None
                raise
            extra = _check_extra(stream, checkpoint)
            if extra["options"] != options:
                raise ValueError(
                    f"checkpoint {checkpoint} was made with {extra['options']}, this run has "
                    f"{options}: refusing to continue with different options"
                )
            skip, digest = stream.step, bytes.fromhex(_DIGEST_START)
            pending: list[str] = extra["pending"]
            of = "no horizon" if horizon is None else f"horizon {horizon}"
            con.print(
                f"checkpoint {escape(checkpoint)}: {skip} steps already released, continuing "
                f"at step {skip + 1} ({of})"
            )
            resumed = True
        else:
            _check_fresh_output(output, checkpoint, head_line)
            stream = mech.stream()
            skip, digest, pending, resumed = 0, bytes.fromhex(_DIGEST_START), [], False
            # the one atomic writer: never through a planted symlink or temp name
            write_atomic(output, [head_line.encode("utf-8")], mode=PUBLIC)
        mech = stream.counter if isinstance(stream, UnboundedStream) else stream.mechanism
        # The exact std of steps skip + 1, skip + 2, …: one at a time, so memory does
        # not grow with the horizon (a resumed run starts at the checkpoint's step).
        variances = mech.iter_variances(skip + 1)
        it = iter(rows)
        for consumed in range(skip):
            row = next(it, None)
            if row is None:
                raise ValueError(
                    f"the input has {consumed} rows, but checkpoint {checkpoint} has consumed "
                    f"{skip}: it is not the input the checkpoint was made with"
                )
            digest = chain_digest(digest, row[1], row[0])
        if skip and digest.hex() != extra["input_digest"]:
            raise ValueError(
                f"the first {skip} input rows differ from those checkpoint {checkpoint} consumed: "
                "refusing to continue (the same noise on different data would leak it)"
            )
        if resumed:
            appended = _reconcile(output, pending, skip, head_line)
            if appended:
                con.print(f"completed the output with {appended} released line(s)")
        batch: list[str] = []
        last_save = time.monotonic()

        def due() -> bool:
            if every is not None:
                return len(batch) >= every
            return (
                len(batch) >= MAX_BATCH
                or time.monotonic() - last_save >= seconds
                or _input_idle(live)
            )

        with open(output, "a", encoding="utf-8", newline="") as out:

            def commit() -> None:
                nonlocal last_save
                out.flush()
                os.fsync(out.fileno())  # the lines of earlier batches are on disk
                saved = {
                    "tool": _TOOL,
                    "options": options,
                    "pending": batch,
                    "input_digest": digest.hex(),
                    "complete": stream.step == horizon,
                }
                if isinstance(stream, UnboundedStream):
                    save_unbounded(stream, checkpoint, extra=saved)
                else:
                    save_stream(stream, checkpoint, extra=saved)
                lines = batch.copy()
                batch.clear()  # saved: a failed write is completed on restart, never retried here
                _deliver(out, lines)
                last_save = time.monotonic()

            try:
                for label, value in it:
                    if horizon is not None and stream.step >= horizon:
                        raise ValueError(f"the input has more than --horizon {horizon} rows")
                    release = stream.update(value)
                    digest = chain_digest(digest, value, label)
                    std = math.sqrt(next(variances))
                    # --round/--clamp: per-row post-processing of this release alone
                    # (the same lines as a plain live run with the same seed)
                    shown = postprocessed(args, [release]) if post else None
                    batch.append(
                        row_line(stream.step, label, release, std, digits=args.digits)
                        if shown is None
                        else row_line(stream.step, label, shown[0], std, release, args.digits)
                    )
                    if due():
                        commit()
            finally:
                if batch:
                    commit()
                out.flush()
                os.fsync(out.fileno())
    if skip == horizon:
        con.print(f"checkpoint {escape(checkpoint)} is complete: all {horizon} steps were released")
    if isinstance(mech, UnboundedCounter):
        summary_unbounded(mech, stream.step, args)
    else:
        summary(mech, stream.step, args)
    return 0
