"""The public configuration of a keyed run (the job): buckets, key universe, bounds and
calibration, fixed before any data is read; shared by the embedded and Dask engines."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.engine import KeyedMechanism, choose_mechanism, chunk_bounds, exact_running
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    TimeBuckets,
    bound_units,
    check_max_weight,
    check_running,
    clip_events,
    map_events,
    partial_sums,
    read_keys,
    to_contributions,
)
from dpcount.keyed.mark import ReleaseGuard, input_digest
from dpcount.keyed.secret import RunSecret, UnsafeTestingSecret
from dpcount.keyed.state import RunState
from dpcount.privacy.budget import NoiseKind

__all__ = [
    "Carry",
    "KeyedJob",
    "SecretArg",
    "begin_release",
    "continue_from",
    "load_base",
    "make_job",
    "save_state",
]

#: what ``secret=`` accepts: a secret file path, a loaded RunSecret, or a testing secret
SecretArg = RunSecret | UnsafeTestingSecret | str | os.PathLike[str]

Progress = Callable[[int, int], None]


def _event_level(max_weight: float) -> str:
    return (
        f"event-level: logs differ in one event of weight <= {max_weight:g} (one key, one "
        f"step); per-step sensitivity across keys l1 = l2 = {max_weight:g}"
    )


def _unit_level(max_keys: int, max_weight: float) -> str:
    return (
        f"unit-step level: logs differ in one privacy unit's events within ONE step "
        f"(a unit active at n steps is protected at n times this budget, by composition; "
        f"not across the run); each unit keeps <= {max_keys} keys per step and "
        f"<= {max_weight:g} per key; per-step sensitivity across keys "
        f"l1 = {max_keys * max_weight:g}, l2 = sqrt({max_keys})*{max_weight:g}"
    )


@dataclass(frozen=True)
class KeyedJob:
    """Everything a worker needs to bound and release: public configuration + secret."""

    columns: EventColumns
    universe: KeyUniverse
    buckets: TimeBuckets
    mechanism: KeyedMechanism
    max_weight: float
    max_keys: int | None
    secret: RunSecret
    #: the steps this run releases (a later run continues from a stored state)
    first: int = 1
    last: int | None = None
    #: whether the run stores a state (then releases return the noise state at ``until``)
    keep_state: bool = False

    @property
    def until(self) -> int:
        return self.mechanism.horizon if self.last is None else self.last

    def window(self, first: int, last: int | None) -> KeyedJob:
        """This job releasing steps first..last (default: to the horizon)."""
        last = self.mechanism.horizon if last is None else last
        for name, value in (("until", last), ("first step", first)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, got {value!r}")
        if last > self.mechanism.horizon:
            raise ValueError(
                f"until={last} is beyond the horizon {self.mechanism.horizon} fixed at the "
                "first run (the tree's height and the budget depend on it)"
            )
        if last < 1:
            raise ValueError(f"until must be >= 1, got {last}")
        if last < first:
            raise ValueError(
                f"until={last}: steps 1..{first - 1} are already released (stored state); "
                f"until must be >= {first}"
            )
        return dataclasses.replace(self, first=first, last=last)

    @property
    def integer(self) -> bool:
        return self.mechanism.noise.is_discrete

    @property
    def hash_key(self) -> str:
        """16-character SipHash key for the unit-bounding rank, derived from the secret."""
        digest = hmac.new(self.secret.secret, b"unit-rank", hashlib.sha256).hexdigest()
        return digest[:16]

    def prepare(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, DropReport]:
        """Map one partition of events and sum it partially (clipping events first)."""
        m = self.mechanism
        rows, report = map_events(
            frame,
            self.columns,
            self.universe,
            self.buckets,
            m.horizon,
            integer=self.integer,
            first=self.first,
            last=self.last,
        )
        if self.max_keys is None:
            rows, clipped = clip_events(rows, self.max_weight)
            report = report + clipped
        return partial_sums(rows, by_unit=self.max_keys is not None), report

    def finish(self, partials: Sequence[pd.DataFrame]) -> tuple[Contributions, DropReport]:
        """Combine partial sums (any partitioning gives the same result for integers)."""
        rows = pd.concat(list(partials), ignore_index=True) if partials else None
        dtype = np.int64 if self.integer else np.float64
        if rows is None or rows.empty:
            empty = np.zeros(0, dtype=np.int64)
            return Contributions(empty, empty, np.zeros(0, dtype=dtype)), DropReport()
        report = DropReport()
        if self.max_keys is not None:
            rows, report = bound_units(
                rows, max_keys=self.max_keys, max_weight=self.max_weight, hash_key=self.hash_key
            )
        return to_contributions(rows, dtype, self.universe.keys), report

    def release(
        self,
        contributions: Contributions,
        lo: int,
        hi: int,
        base: NDArray[Any] | None = None,
        buffers: NDArray[Any] | None = None,
    ) -> tuple[NDArray[Any], NDArray[Any] | None]:
        """Releases of keys [lo, hi) at this job's steps, and (when the run keeps a state)
        their noise state after them. ``buffers``: their noise state after step
        first − 1 (:meth:`KeyedMechanism.release_with_state`; None: replayed)."""
        return self.mechanism.release_with_state(
            self.secret.prf_key,
            contributions,
            lo,
            hi,
            first=self.first,
            last=self.until,
            base=base,
            noise_state=buffers,
            keep_state=self.keep_state,
        )

    def totals(self, contributions: Contributions, base: NDArray[Any], chunk: int) -> NDArray[Any]:
        """Exact running counts of every key at step ``until`` (for the stored state),
        added in the same order as the release's (:func:`exact_running`)."""
        out = np.array(base, copy=True)
        m = self.mechanism
        for lo, hi in chunk_bounds(m.n_keys, chunk):
            counts = m.counts(contributions, lo, hi, self.first, self.until)
            out[lo:hi] = exact_running(counts, base[lo:hi])[-1]
        return out

    def with_secret(self, secret: SecretArg) -> tuple[KeyedJob, bool]:
        """This job with the run secret for its configuration (loaded, or created if absent)."""
        run_secret, created = _resolve_secret(secret, self.config())
        return dataclasses.replace(self, secret=run_secret), created

    def config(self) -> dict[str, Any]:
        return {
            **self.mechanism.config(),
            "keys_sha256": self.universe.digest(),
            **self.buckets.describe(),
            "max_weight": self.max_weight,
            "max_keys": self.max_keys,
        }


def _key_block(n_keys: int) -> int:
    return 1 << min(10, max(0, (n_keys - 1).bit_length()))


def make_job(
    *,
    times: pd.Series,
    keys: Sequence[Any] | str | os.PathLike[str],
    columns: EventColumns,
    step: int | str,
    epsilon: float,
    delta: float | None,
    noise: NoiseKind | str,
    calibration: str | None,
    max_weight: float,
    max_keys: int | None,
    start: Any,
    horizon: int | None,
    k: int | None = None,
    subtract: bool | None = None,
    mechanism: str = "auto",
) -> tuple[KeyedJob, list[str]]:
    """Fix the public configuration (``times``: all event times, for omitted start/horizon).

    ``mechanism``: a registry name, ``"tree"``, or ``"auto"`` (the plan's best for the
    horizon, budget and sensitivity: :func:`~dpcount.keyed.engine.choose_mechanism`).
    The job's secret is a placeholder until :meth:`KeyedJob.with_secret`.
    """
    kind = NoiseKind.parse("noise", noise)
    universe = KeyUniverse(read_keys(keys) if isinstance(keys, (str, os.PathLike)) else keys)
    derived = []
    if start is None:
        buckets = TimeBuckets.from_data(step, times)
        derived.append("start")
    else:
        buckets = TimeBuckets.make(step, start)
    if horizon is None:
        horizon = max(buckets.last_step(times), 1)
        derived.append("horizon")
    weight = check_max_weight(max_weight, kind.is_discrete)
    if max_keys is not None and columns.unit is None:
        raise ValueError("max_keys needs a unit column (unit_column=...)")
    if columns.unit is not None:
        if max_keys is None:
            raise ValueError("a unit column needs max_keys (keys per unit and step)")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be a positive integer, got {max_keys!r}")
        l1, l2 = max_keys * weight, math.sqrt(max_keys) * weight
        relation = _unit_level(max_keys, weight)
    else:
        l1 = l2 = float(weight)
        relation = _event_level(weight)
    options: dict[str, Any] = {"k": k, "subtract": subtract}
    if mechanism == "auto":
        if k is not None or subtract is not None:
            raise ValueError(
                "k and subtract are options of the k-ary tree: pass mechanism='kary' with them "
                "(mechanism='auto' chooses the mechanism and its options)"
            )
        mechanism, options, rule = choose_mechanism(
            int(horizon), epsilon=epsilon, delta=delta, noise=kind, l1_step=l1, l2_step=l2
        )
        calibration = rule if calibration is None else calibration
    mech = KeyedMechanism(
        n_keys=len(universe),
        horizon=int(horizon),
        mechanism=mechanism,
        noise=kind,
        epsilon=float(epsilon),
        delta=delta,
        calibration=calibration,
        l1_step=float(l1),
        l2_step=float(l2),
        neighbouring=relation,
        key_block=_key_block(len(universe)),
        **options,
    )
    mech.counting  # noqa: B018  (validates the budget before a secret file is created)
    placeholder = RunSecret.in_memory(b"\0" * 32, {})
    return KeyedJob(columns, universe, buckets, mech, weight, max_keys, placeholder), derived


def check_secret_arg(secret: object) -> None:
    """Refuse what ``secret=`` cannot be, before any work (raw bytes: see the message)."""
    if isinstance(secret, (bytes, bytearray, memoryview)):
        raise TypeError(
            "secret must be a secret file path, not bytes: raw secret bytes have no place "
            "for the run id and the released-up-to mark, so nothing would stop a second "
            "release of the same steps from other data — whose difference is the exact "
            "difference of the data. Pass a file path (created from operating-system "
            "entropy if absent); in tests and examples only, "
            "dpcount.keyed.secret.unsafe_testing_secret(b'...')"
        )
    if isinstance(secret, RunSecret) and secret.path is None:
        raise TypeError(
            "secret: a RunSecret that is not a file's (RunSecret.in_memory) has no "
            "released-up-to mark; pass the secret file path (tests: unsafe_testing_secret)"
        )
    if not isinstance(secret, (RunSecret, UnsafeTestingSecret, str, os.PathLike)):
        raise TypeError(f"secret must be a path or a RunSecret, got {type(secret).__name__}")


def secret_file(secret: SecretArg) -> Path | None:
    """The secret file of ``secret`` (beside it: the lock and the mark); None for a
    testing secret."""
    if isinstance(secret, RunSecret):
        return secret.path
    if isinstance(secret, UnsafeTestingSecret):
        return None
    return Path(os.path.realpath(secret))  # a symlink to it shares its lock and mark


def _resolve_secret(secret: SecretArg, config: dict[str, Any]) -> tuple[RunSecret, bool]:
    check_secret_arg(secret)
    if isinstance(secret, RunSecret):
        if secret.config != config:
            raise ValueError("secret belongs to another run (its configuration differs)")
        return secret, False
    if isinstance(secret, UnsafeTestingSecret):
        made = RunSecret.in_memory(secret.secret, config)
        if secret.run_id is not None:
            made = dataclasses.replace(made, run_id=secret.run_id)
        return made, False
    return RunSecret.open_or_create(secret, config)


def begin_release(
    guard: ReleaseGuard | None,
    job: KeyedJob,
    created: bool,
    contributions: Contributions,
    base: NDArray[Any] | None,
    buffers: NDArray[np.float64] | None,
    state: str | os.PathLike[str] | None,
) -> None:
    """Before any output: every running sum is exact (below 2^53, else ValueError naming
    the key and step), and the guard's mark accepts releasing ``job``'s steps from this
    input (:meth:`~dpcount.keyed.mark.ReleaseGuard.begin`) and records it in progress."""
    check_running(contributions, base, job.universe.keys, job.first, job.until)
    if guard is None:
        return
    digest = input_digest(job.secret, job.first, job.until, contributions, base, buffers)
    guard.begin(job.secret, created, job.first, job.until, digest, state=state)


def continue_from(
    job: KeyedJob, state: str | os.PathLike[str] | None, until: int | None
) -> KeyedJob:
    """The job releasing the steps after those of the stored ``state`` (if the file
    exists; else from step 1) up to ``until`` (default: the horizon)."""
    first = 1
    if state is not None and os.path.exists(state):
        first = RunState.peek_step(state) + 1
        if first > job.mechanism.horizon:
            raise ValueError(
                f"state file {state}: all {job.mechanism.horizon} steps (the horizon) are "
                "already released"
            )
    return dataclasses.replace(job.window(first, until), keep_state=state is not None)


def load_base(
    job: KeyedJob, state: str | os.PathLike[str] | None
) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
    """The authenticated running sums and per-key noise state (None: not kept, the noise
    is replayed) of step ``job.first − 1`` (None, None: start from zero)."""
    if state is None or (job.first == 1 and not os.path.exists(state)):
        return None, None
    m = job.mechanism
    stored = RunState.load(state, job.secret, m.n_keys, m.noise_layout(job.first - 1))
    if stored.step != job.first - 1:
        raise ValueError(f"state file {state} changed during the run (step {stored.step})")
    dtype = np.int64 if job.integer else np.float64
    if stored.sums.dtype != dtype:
        raise ValueError(f"state file {state} holds {stored.sums.dtype} sums, not {dtype}")
    return stored.sums, stored.buffers


@dataclass
class Carry:
    """What the next run needs: the exact running sums at ``until`` (computed before the
    release) and the per-key noise state there (filled in chunk by chunk; None when the
    mechanism keeps none, :meth:`KeyedMechanism.noise_layout`)."""

    sums: NDArray[Any]
    buffers: NDArray[Any] | None

    @classmethod
    def start(
        cls,
        job: KeyedJob,
        contributions: Contributions,
        base: NDArray[Any] | None,
        chunk_keys: int,
    ) -> Carry:
        m = job.mechanism
        zero = np.zeros(m.n_keys, dtype=np.int64 if job.integer else np.float64)
        sums = job.totals(contributions, zero if base is None else base, chunk_keys)
        layout = m.noise_layout(job.until)
        noise = None if layout is None else np.zeros((layout.rows, m.n_keys), dtype=np.uint64)
        return cls(sums, noise)


def save_state(
    job: KeyedJob,
    state: str | os.PathLike[str],
    totals: NDArray[Any],
    buffers: NDArray[Any] | None = None,
) -> None:
    """Record that steps 1..until are released, with the exact sums (and the per-key noise
    state) at ``until``."""
    s = job.secret
    layout = job.mechanism.noise_layout(job.until) if buffers is not None else None
    RunState(s.run_id, s.fingerprint, job.until, totals, buffers, layout).save(state, s)
