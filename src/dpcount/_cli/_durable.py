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
import io
import math
import sys
from collections.abc import Iterable
from typing import IO, Any

from dpcount._cli._counting import (
    build,
    build_unbounded,
    finished,
    header,
    postprocessed,
    row_line,
    summary,
    summary_unbounded,
)
from dpcount._cli.common import err_console, escape
from dpcount._events import outside_note
from dpcount.counting.base import CountingMechanism, CountingStream
from dpcount.counting.checkpoint import CheckpointMismatchError, load_stream, save_stream
from dpcount.counting.unbounded import (
    UnboundedCounter,
    UnboundedStream,
    load_unbounded,
    save_unbounded,
)
from dpcount.durable.output import MAX_BATCH, DurableOutput, OutputBatch, chain_digest
from dpcount.io import SeriesReader

__all__ = ["MAX_BATCH", "chain_digest", "run_durable"]

#: the output header of a run without --time-column, --round or --clamp
HEADER = "t,private_count,std\n"
#: how the library's messages name the flags and the writer
_SPELLING = {
    "output": "--output",
    "checkpoint": "--checkpoint",
    "every": "--checkpoint-every",
    "seconds": "--checkpoint-seconds",
    "writer": "dpcount count --checkpoint",
}

Rows = Iterable[tuple[str | None, float]]


def _deliver(out: IO[str], lines: list[str]) -> None:
    """Write released lines to the output (after the checkpoint holding them is durable)."""
    out.write("".join(lines))
    out.flush()


class _CountOutput(DurableOutput):
    """The library's durable output, delivering through :func:`_deliver` (the step
    the SIGKILL tests of tests/cli/test_count_checkpoint.py interrupt)."""

    def deliver(self, out: IO[str], lines: list[str]) -> None:
        _deliver(out, lines)


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


def _read_input(args: argparse.Namespace) -> tuple[Rows, list[float] | None, int | None]:
    """The input rows ``(label, value)``, the values when known in advance (a file:
    the noise default) and the horizon (None: live stdin without --horizon, the
    unbounded doubling counter)."""
    if args.input == "-":
        reader = SeriesReader(
            sys.stdin, args.column, source="stdin", time_column=args.time_column,
            missing=args.missing,
        )  # fmt: skip
        return ((time, v) for _, time, v in reader.records()), None, args.horizon
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
    if horizon < len(values):  # rows after the horizon: dropped and reported (count.run)
        args.dropped_rows = len(values) - horizon
        del rows[horizon:], values[horizon:]
    return rows, values, horizon


def _line_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options saved in the checkpoint. Those that shape the output lines are
    absent when not used (so a checkpoint of an earlier version without them
    resumes): a resumed run must write the same lines."""
    options: dict[str, Any] = {"column": args.column, "seed": args.seed}
    if args.time_column is not None:
        options["time_column"] = args.time_column
    if args.round or args.clamp:
        options["round"], options["clamp"] = bool(args.round), bool(args.clamp)
    return options


def _open_stream(
    args: argparse.Namespace, run: DurableOutput, mech: CountingMechanism | UnboundedCounter
) -> CountingStream | UnboundedStream:
    """The checkpoint's stream, checked against the options (or a new stream, the
    output checked and its header written)."""
    if not run.exists():
        run.create()
        return mech.stream()
    stream: CountingStream | UnboundedStream
    try:
        if isinstance(mech, UnboundedCounter):
            stream = load_unbounded(run.checkpoint, expect=mech)
        else:
            stream = load_stream(run.checkpoint, expect=mech)
    except CheckpointMismatchError as err:
        if "horizon" in err.fields and args.input != "-" and args.horizon is None:
            raise ValueError(
                f"{err}; the horizon defaults to the rows of {args.input}: a file "
                "that grows needs the same explicit --horizon in every run"
            ) from None
        raise
    run.load(stream.extra, step=stream.step)
    of = "no horizon" if run.horizon is None else f"horizon {run.horizon}"
    err_console().print(
        f"checkpoint {escape(run.checkpoint)}: {run.step} steps already released, "
        f"continuing at step {run.step + 1} ({of})"
    )
    return stream


def _release(
    args: argparse.Namespace,
    batch: OutputBatch,
    stream: CountingStream | UnboundedStream,
    rows: Rows,
    variances: Iterable[float],
) -> None:
    """Release the remaining rows, one line per step, into ``batch``."""
    post = bool(args.round or args.clamp)
    horizon, std_of = batch.run.horizon, iter(variances)
    for label, value in rows:
        if horizon is not None and stream.step >= horizon:
            args.beyond_horizon = True  # dropped, unread: the rule of count.run
            break
        release = finished(args, stream.update(value))
        std = math.sqrt(next(std_of))
        # --round/--clamp: per-row post-processing of this release alone
        # (the same lines as a plain live run with the same seed)
        shown = postprocessed(args, [release]) if post else None
        batch.append(
            row_line(stream.step, label, release, std, digits=args.digits)
            if shown is None
            else row_line(stream.step, label, shown[0], std, release, args.digits),
            value,
            label,
        )


def _save(stream: CountingStream | UnboundedStream, path: str, record: dict[str, Any]) -> None:
    if isinstance(stream, UnboundedStream):
        save_unbounded(stream, path, extra=record)
    else:
        save_stream(stream, path, extra=record)


def run_durable(args: argparse.Namespace) -> int:
    """``dpcount count ... --checkpoint FILE --output OUT`` (see the module docstring)."""
    if args.output is None or args.output == "-":
        raise ValueError(
            "--checkpoint needs --output FILE (the output is checked and completed on restart)"
        )
    live = args.input == "-"
    run = _CountOutput(
        output=args.output, checkpoint=args.checkpoint,
        header=",".join(header(args, bool(args.round or args.clamp))) + "\n",
        options=_line_options(args), every=args.checkpoint_every,
        seconds=args.checkpoint_seconds, idle=lambda: _input_idle(live), spelling=_SPELLING,
    )  # fmt: skip
    rows, values, run.horizon = _read_input(args)
    con = err_console()
    with run:
        mech: CountingMechanism | UnboundedCounter
        mech = build_unbounded(args) if run.horizon is None else build(args, run.horizon, values)
        stream = _open_stream(args, run, mech)
        skip = stream.step
        mech = stream.counter if isinstance(stream, UnboundedStream) else stream.mechanism
        # The exact std of steps skip + 1, skip + 2, …: one at a time, so memory does
        # not grow with the horizon (a resumed run starts at the checkpoint's step).
        variances = mech.iter_variances(skip + 1)
        rest = run.skip_input(rows)
        appended = run.reconcile()
        if appended:
            con.print(f"completed the output with {appended} released line(s)")
        with run.writing(lambda record: _save(stream, run.checkpoint, record)) as batch:
            _release(args, batch, stream, rest, variances)
    if skip == run.horizon:
        con.print(
            f"checkpoint {escape(run.checkpoint)} is complete: all {skip} steps were released"
        )
    if isinstance(mech, UnboundedCounter):
        summary_unbounded(mech, stream.step, args)
    else:
        summary(mech, stream.step, args)
    _report_beyond(args, run.horizon)
    return 0


def _report_beyond(args: argparse.Namespace, horizon: int | None) -> None:
    """Rows after --horizon: dropped and reported, as a plain run does."""
    if getattr(args, "dropped_rows", 0) and horizon is not None:
        text = outside_note(args.dropped_rows, horizon, "--horizon", None)
    elif getattr(args, "beyond_horizon", False):
        text = (
            f"dropped: the input continues after --horizon {horizon}: the rest is not read "
            "(exact, not private)"
        )
    else:
        return
    err_console().print(f"note: {escape(text)}", highlight=False)
