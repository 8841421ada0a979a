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

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.engine import KeyedMechanism, chunk_bounds, keyed_budget
from dpcount.keyed.events import DropReport, EventColumns, TimeBuckets, parse_times
from dpcount.keyed.io import (
    PartsDir,
    check_std_digits,
    from_polars,
    is_polars,
    read_events,
    read_keys,
    sink_for,
    write_frames,
)
from dpcount.keyed.job import KeyedJob, SecretArg, make_job
from dpcount.keyed.mark import ReleaseCompanion
from dpcount.keyed.selection import KeySelection, SelectionOutcome
from dpcount.keyed.session import Carry, EngineRun, RunSession, check_secret_arg, secret_file
from dpcount.keyed.watermark import check_late
from dpcount.privacy.budget import Budget, NoiseKind
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


def keyed_counts(
    events: pd.DataFrame | str | os.PathLike[str] | Any,
    *,
    keys: Sequence[Any] | str | os.PathLike[str] | None,
    time_column: str,
    key_column: str,
    step: int | str,
    secret: SecretArg,
    budget: Budget | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    noise: NoiseKind | str | None = None,
    calibration: str | None = None,
    weight_column: str | None = None,
    unit_column: str | None = None,
    max_weight: float = 1,
    max_keys: int | None = None,
    start: Any = None,
    horizon: int | None = None,
    k: int | None = None,
    subtract: bool | None = None,
    mechanism: str = "auto",
    chunk_keys: int = 2048,
    engine: str = "embedded",
    partitions: int | None = None,
    scheduler: Any = None,
    workers: int = 2,
    master: Any = None,
    output: str | os.PathLike[str] | None = None,
    state: str | os.PathLike[str] | None = None,
    until: int | None = None,
    late: str = "refuse",
    allowed_lateness: Any = None,
    time_label: str = "time",
    progress: Progress | None = None,
    on_chunk: Callable[[int, NDArray[Any]], None] | None = None,
    selection: KeySelection | None = None,
    unit_scope: str = "step",
    max_steps: int | None = None,
    min_separation: int | None = None,
    sink: Callable[[KeyedJob, Iterable[tuple[int, NDArray[Any]]]], Path] | None = None,
    std_digits: int | None = None,
) -> KeyedResult:
    """Private running counts per key at every step: every key of a public universe
    (``keys``), or the keys selected privately from the data (``selection``).

    Args:
        events: a pandas or polars DataFrame (or polars LazyFrame; the ``polars``
            extra), a CSV/Parquet path, or (``engine="dask"``) a Dask DataFrame, with
            columns time, key[, weight][, unit].
        keys: the public key universe: a sequence (a ``range`` of integers is kept as
            a range: O(1) memory at any size, where 10^7 keys in a list take ~360 MiB in
            every process), or a text file (one key a line); None for an open key set,
            with ``selection``.
        time_column, key_column, weight_column, unit_column: column names.
        step: bucket width: an integer for integer times, or a duration such as
            ``"1D"``, ``"1h"`` or a calendar step (``"MS"``, ``"QS"``, ``"YS"``,
            ``"W-MON"``, binned and labelled as pandas' ``resample``;
            :mod:`dpcount._time`) for ISO dates/timestamps. Step numbers
            count from 1; the count of step s covers all events in steps 1..s.
        budget: the :class:`~dpcount.privacy.Budget` (ε, δ, noise kind, calibration
            rule; without a noise kind exact discrete Laplace, the keyed default). Its
            step sensitivity is left at 1 and it has no participation schema: a keyed
            run derives the step's ℓ₁/ℓ₂ bounds from ``max_weight`` and ``max_keys``.
        epsilon, delta, noise, calibration: the budget's fields given loose
            (deprecated, DeprecationWarning; removed in 0.5): pass ``budget=``.
        secret: the run secret file (created from operating-system entropy if absent,
            mode 0600; as sensitive as the raw data), or a :class:`RunSecret` loaded
            from one. Beside it live ``<secret>.lock``, held for the whole run (a second
            run of the secret at once is refused), and ``<secret>.released``, the
            released-up-to mark (:mod:`dpcount.keyed.mark`): a release of already
            released steps from other data — a restored or copied state, a killed
            run's rerun on changed events — is refused. Raw bytes are refused (no
            place for the mark); tests and examples may pass
            :func:`~dpcount.keyed.secret.unsafe_testing_secret`.
        max_weight: bound on one event's weight (event level) or one unit's total
            per key and step (with ``unit_column``); excess is cut and reported.
        max_keys: keys per unit and step (with ``unit_column``).
        start, horizon: the first bucket's start and the number of steps T
            (default: from the data, which is not private; see the module docstring).
        mechanism: ``"auto"`` (default: the mechanism ``dpcount plan`` ranks first for
            the horizon, budget, noise and sensitivity), or any counting mechanism of
            the registry (:data:`dpcount.counting.registry.MECHANISMS`: ``"kary"``,
            ``"binary"``, ``"honaker"``, ``"sqrt"``, ``"normalized-sqrt"``,
            ``"blt"``, ``"toeplitz"``, ``"dense-optimum"`` (T ≤ 2048), …) with the
            noise kinds it accepts, or ``"tree"`` (the k-ary tree, binary unless ``k``
            is given). See :mod:`dpcount.keyed.engine`.
        k: the k-ary tree's branching factor (``"kary"``/``"tree"`` only).
        subtract: the k-ary tree with subtraction (offset digits; fewer nodes per
            release for k ≥ 3, count-on-your-elders Alg. 3).
        chunk_keys: keys per chunk (memory ≈ a few T × chunk_keys arrays).
        engine: ``"embedded"`` (in-process), ``"dask"`` or ``"spark"``.
        partitions, scheduler, workers: Dask options (see :mod:`dpcount.keyed.dask`);
            ``partitions`` also sets the Spark engine's input splits.
        master: the Spark master URL (default ``"local[2]"``) or a ``SparkSession``
            (``engine="spark"`` only; see :mod:`dpcount.keyed.spark`).
        output: write to this CSV/Parquet file (atomically) instead of returning a frame;
            a path without an extension is a resumable directory of Parquet parts
            (one per key chunk): a rerun after a crash computes only the missing parts.
        state: resume across time. A file holding the run's exact running sums per
            key after its last released step (see :mod:`dpcount.keyed.state`; as
            sensitive as the raw data, mode 0600). If it exists, this run continues
            from it: it releases steps last+1..``until`` from events of those steps
            only (events of released steps are refused) and equals, bit for bit with
            discrete noise, one run over all the steps. Written (atomically) once the
            output is complete. Needs explicit ``start``, ``horizon`` and ``until``.
        until: the last step to release (default: the horizon; with ``state``,
            ``until`` or ``allowed_lateness`` is required). Events of later steps are
            dropped and counted in ``report.later_steps``.
        late: what happens to a late event, one of an already released step (with
            ``state``): ``"refuse"`` (default: a ValueError naming its row) or
            ``"next-step"`` (counted in the first step this run releases, bounded
            with it, and reported in ``report.late_moved``); see
            :mod:`dpcount.keyed.watermark`.
        allowed_lateness: instead of ``until``, release the steps that are complete
            by the watermark — the latest event time — less this wait (a duration
            such as ``"2h"`` for dates, a whole number for integer times, or 0).
            Not private: which steps are released depends on the data (listed in
            ``data_derived``). Either engine (Dask reads the latest event time off
            every partition).
        time_label: name of the output column holding each step's bucket start.
        progress: called with (keys done, keys total) after each chunk.
        on_chunk: instead of building a frame or a file, call this with
            (first key index, running counts of shape (T, keys in chunk)) per chunk.
        selection: private key selection for an open key set (``keys=None``): a
            :class:`~dpcount.keyed.selection.KeySelection` (ε_s, δ_s). A key is released
            from the first step its noisy selection count reaches a threshold (earlier
            steps withheld); the run is then (ε + ε_s, δ + δ_s)-DP, the released key set
            included (see :mod:`dpcount.keyed.selection` for the theorem and proof).
            Either engine; discrete noise, a frame or an output file. With
            ``state`` (either engine) the key table, selection steps and selection
            noise state persist (resumes equal one run).
        unit_scope: ``"step"`` (default: ``max_keys`` per unit and step, the guarantee
            per step) or ``"run"``: a unit's bound over the whole run — ``max_keys``
            keys, ``max_steps`` steps per key at least ``min_separation`` apart,
            ``max_weight`` per key and step — with user-level privacy over the run
            (:mod:`dpcount.keyed.bounds`). Needs ``unit_column``; with ``state`` each
            unit's use of its bound persists (:class:`~dpcount.keyed.bounds.UnitLedger`).
        max_steps, min_separation: see ``unit_scope="run"`` (default: every step, 1).
        sink: instead of ``output``, call this with the job and the chunks (as
            ``on_chunk`` gets them) to write the output itself, before the state is
            saved and the release marked done; it returns the output's path (used by
            :mod:`dpcount.keyed.incremental` to append). A sink that is also a
            :class:`~dpcount.keyed.mark.ReleaseCompanion` records the release pending
            in a record of its own, whose digest the release mark binds.
        std_digits: significant digits of the std column in a CSV ``output`` (1..17;
            ``dpcount keyed --digits``, default 4 there); None (default) writes every
            bit. The frame and Parquet outputs keep the float.

    Returns:
        A :class:`KeyedResult`: frame with columns key, step, ``time_label``,
        private_count, std; the drop report; the mechanism and its guarantee.
    """
    loose = {
        name: value
        for name, value in (
            ("epsilon", epsilon), ("delta", delta), ("noise", noise), ("calibration", calibration)
        )
        if value is not None
    }  # fmt: skip
    resolved = keyed_budget(
        Budget.resolve(budget, loose, owner="keyed_counts", deprecated=True), "keyed_counts"
    )
    if state is not None and (start is None or horizon is None):
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
    late = check_late(late)
    if late == "next-step" and state is None:
        raise ValueError(
            "late='next-step' needs state=: without a stored state no step was released "
            "before this run, so no event can be late"
        )
    if allowed_lateness is not None and until is not None:
        raise ValueError(
            "give until= (a release schedule fixed in advance) or allowed_lateness= (the "
            "steps complete by the latest event time), not both"
        )
    if state is not None and until is None and allowed_lateness is None:
        raise ValueError(
            "state= needs until= (the last step to release now) or allowed_lateness=: "
            "releasing to the horizon by default would use up the steps that later runs "
            "are meant to release"
        )
    check_secret_arg(secret)
    check_std_digits(std_digits)
    _check_engine_options(engine, master, scheduler)
    _check_open(keys, selection, output, on_chunk)
    _check_output(output, on_chunk, sink, secret, chunk_keys)
    _check_files(secret, state)
    if state is not None and secret_file(secret) is None:
        raise ValueError(
            "state= needs a secret file: the released-up-to mark that refuses a second "
            "release of the same steps is kept beside it (a testing secret has none)"
        )
    # a sink that keeps a record of its own (an incremental run's consumed files) binds
    # it into the release mark (:class:`~dpcount.keyed.mark.ReleaseCompanion`)
    companion = sink if isinstance(sink, ReleaseCompanion) else None
    with RunSession(secret, state, companion) as session:  # held until the mark is final
        guard = session.guard
        columns = EventColumns(time_column, key_column, weight_column, unit_column)
        if is_polars(events):
            events = from_polars(events, columns)
        common: dict[str, Any] = dict(
            keys=read_keys(keys) if isinstance(keys, (str, os.PathLike)) else keys,
            columns=columns,
            step=step,
            budget=resolved,
            max_weight=max_weight,
            max_keys=max_keys,
            start=start,
            horizon=horizon,
            k=k,
            subtract=subtract,
            mechanism=mechanism,
            selection=selection,
            unit_scope=unit_scope,
            max_steps=max_steps,
            min_separation=min_separation,
            late=late,
        )
        parts = (
            PartsDir(Path(output), chunk_keys, time_label)
            if output is not None and not Path(output).suffix
            else None
        )
        # the options of the Dask and Spark runners alike
        distributed: dict[str, Any] = {
            "parts": parts, "time_label": time_label, "chunk_keys": chunk_keys,
            "partitions": partitions, "progress": progress, "state": state, "until": until,
            "guard": guard, "allowed_lateness": allowed_lateness,
        }  # fmt: skip
        if engine == "dask":
            from dpcount.keyed.dask import run_dask

            ran = run_dask(
                events, common, secret, scheduler=scheduler, workers=workers, **distributed
            )
        elif engine == "spark":
            from dpcount.keyed.spark import run_spark

            ran = run_spark(events, common, secret, master=master, **distributed)
        elif engine == "embedded":
            ran = _run_embedded(
                events,
                common,
                secret,
                parts=parts,
                chunk_keys=chunk_keys,
                progress=progress,
                until=until,
                session=session,
                allowed_lateness=allowed_lateness,
            )
        else:
            raise ValueError(f"engine must be 'embedded', 'dask' or 'spark', got {engine!r}")
        job, created, derived, report, chunks, carry, outcome = ran
        result = _emit(
            job,
            created,
            derived,
            report,
            chunks,
            output,
            time_label,
            on_chunk,
            parts,
            session,
            carry,
            sink,
            std_digits,
        )
        result.selection, result.key_selection = outcome, selection
        return result


def _check_engine_options(engine: str, master: object, scheduler: object) -> None:
    """Refuse an engine's options given to another engine (which would ignore them)."""
    if master is not None and engine != "spark":
        raise ValueError(f"master= is a Spark option: it needs engine='spark', not {engine!r}")
    if scheduler is not None and engine != "dask":
        raise ValueError(f"scheduler= is a Dask option: it needs engine='dask', not {engine!r}")


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


def _check_output(
    output: str | os.PathLike[str] | None,
    on_chunk: object,
    sink: object,
    secret: SecretArg,
    chunk_keys: int,
) -> None:
    """Refuse a bad output before any file is written: a refused run must leave no
    secret file, mark or output behind (a secret bound to a refused configuration
    would refuse the corrected rerun)."""
    given = [name for name, v in (("output", output), ("on_chunk", on_chunk)) if v is not None]
    if sink is not None and given:
        raise ValueError(f"give sink= alone, without {' or '.join(given)}=")
    if len(given) == 2:
        raise ValueError("give either output= or on_chunk=, not both")
    if isinstance(chunk_keys, bool) or not isinstance(chunk_keys, int):
        raise TypeError(f"chunk_keys must be a positive integer, got {chunk_keys!r}")
    if chunk_keys < 1:
        raise ValueError(f"chunk_keys must be a positive integer, got {chunk_keys!r}")
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


def _run_embedded(
    events: pd.DataFrame | str | os.PathLike[str],
    common: dict[str, Any],
    secret: SecretArg,
    *,
    parts: PartsDir | None,
    chunk_keys: int,
    progress: Progress | None,
    until: int | None,
    session: RunSession,
    allowed_lateness: Any = None,
) -> EngineRun:
    """In-process bounding and summing, then the release chunk by chunk (lazily)."""
    columns: EventColumns = common["columns"]
    frame = events if isinstance(events, pd.DataFrame) else read_events(events, columns)
    columns.check(list(frame.columns), "the events")
    source = None if isinstance(events, pd.DataFrame) else str(events)
    times = parse_times(frame[columns.time], columns.time, source)
    prior = session.prior_keys(common)
    job, derived = make_job(times=times, key_values=frame[columns.key], prior_keys=prior, **common)
    job = session.window(job, until, times, allowed_lateness, derived)
    partial, report = job.prepare(frame, source)  # validates the events before a secret is created
    job = session.bind(job)
    contributions, bound_report, ledger = job.finish_run([partial])
    report = report + bound_report
    job, contributions, base, buffers = session.begin(job, contributions, ledger, chunk_keys)
    carry, outcome, created = session.carry, session.outcome, session.created
    parts = None if parts is None else parts.for_job(job)
    done = set() if parts is None else parts.open(job)

    def chunks() -> Iterator[tuple[int, NDArray[Any]]]:
        n = job.mechanism.n_keys
        for lo, hi in chunk_bounds(n, chunk_keys):
            need_state = carry is not None and carry.buffers is not None
            if lo in done and not need_state:
                continue
            withheld = job.selected is not None and not (job.selected[lo:hi] <= job.until).any()
            if withheld and not need_state:
                continue  # no key of the chunk is selected: nothing of it is released
            values, ends = job.release(
                contributions.for_keys(lo, hi),
                lo,
                hi,
                None if base is None else base[lo:hi],
                None if buffers is None else buffers[:, lo:hi],
            )
            if carry is not None and carry.buffers is not None:
                assert ends is not None
                carry.buffers[:, lo:hi] = ends
            if lo in done or withheld:  # computed for its noise state only
                continue
            yield lo, values
            if progress is not None:
                progress(hi, n)

    return job, created, derived, report, chunks(), carry, outcome


def _emit(
    job: KeyedJob,
    created: bool,
    derived: list[str],
    report: DropReport,
    chunks: Iterable[tuple[int, NDArray[Any]]],
    output: str | os.PathLike[str] | None,
    time_label: str,
    on_chunk: Callable[[int, NDArray[Any]], None] | None,
    parts: PartsDir | None = None,
    session: RunSession | None = None,
    carry: Carry | None = None,
    sink: Callable[[KeyedJob, Iterable[tuple[int, NDArray[Any]]]], Path] | None = None,
    std_digits: int | None = None,
) -> KeyedResult:
    result = KeyedResult(
        None,
        report,
        job.mechanism,
        job.buckets,
        job.secret.run_id,
        created,
        None,
        derived,
        (job.first, job.until),
        config=job.secret.config,
    )
    if sink is not None and (parts is not None or on_chunk is not None or output is not None):
        raise ValueError("give sink= alone, without output= or on_chunk=")
    write = sink_for(output, on_chunk, parts, time_label, std_digits) if sink is None else sink
    released = write(job, chunks)
    if isinstance(released, pd.DataFrame):
        result.frame = released
    else:
        result.output = released
    if session is not None:  # only once the whole output is out: the state, then the mark
        result.state = session.commit(job, carry)
    return result
