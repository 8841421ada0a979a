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

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import DropReport, EventColumns, TimeBuckets
from dpcount.keyed.io import PartsDir, from_polars, is_polars, sink_for, universe_of, write_frames
from dpcount.keyed.job import KeyedJob, SecretArg
from dpcount.keyed.mark import ReleaseCompanion
from dpcount.keyed.runners import Ran, RunPlan, run_on
from dpcount.keyed.selection import KeySelection, SelectionOutcome
from dpcount.keyed.session import RunSession, check_secret_arg, secret_file
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
    if isinstance(keys.universe, (str, os.PathLike)):  # a keys file, read once here
        keys = dataclasses.replace(keys, universe=universe_of(keys.universe, runner))
    with RunSession(secret, window.state, companion) as session:  # held until the mark is final
        if is_polars(events):
            events = from_polars(events, columns)
        path = output.path
        parts = (
            None
            if path is None or not output.parts
            else PartsDir(Path(path), output.chunk_keys, output.time_label)
        )
        plan = RunPlan(columns, keys, steps, counting, bounds, window, output, session, parts)
        ran = run_on(runner, events, plan)
        result = _emit(ran, plan, session)
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


def _emit(ran: Ran, plan: RunPlan, session: RunSession) -> KeyedResult:
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
    out = plan.output
    write: Any = out.sink  # a Sink (dpcount.keyed.io), or a caller's function
    if write is None:
        write = sink_for(out.path, out.on_chunk, plan.parts, out.time_label, out.std_digits)
    released = write(job, ran.chunks)
    if isinstance(released, pd.DataFrame):
        result.frame = released
    else:
        result.output = released
    # only once the whole output is out: the state, then the mark made final
    result.state = session.commit(job, ran.carry)
    return result
