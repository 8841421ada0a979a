"""A keyed run's job: its public configuration (:class:`~dpcount.keyed.spec.KeyedSpec`),
its secret and the steps it releases, with the bounding and release every runner
(embedded, Dask, Spark) calls."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import RunBound, UnitLedger
from dpcount.keyed.engine import KeyedMechanism, chunk_bounds, exact_running, keyed_budget
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    TimeBuckets,
    check_running,
)
from dpcount.keyed.ids import canonical_text
from dpcount.keyed.mark import ReleaseGuard, input_digest
from dpcount.keyed.secret import RunSecret, UnsafeTestingSecret
from dpcount.keyed.selection import (
    KeySelection,
    SelectionOutcome,
    SelectionPlan,
    select_keys,
    selection_secret,
)
from dpcount.keyed.spec import (
    OPEN_KEY_BLOCK,
    Bounds,
    Counting,
    KeyedSpec,
    Keys,
    Late,
    Steps,
    UnitScope,
    build_spec,
    open_universe,
)
from dpcount.keyed.stages import (
    NOT_COUNTED,
    bound_partition,
    first_steps,
    merge_partials,
    renumber,
)
from dpcount.keyed.state import OpenKeys, RunState, extras_digest
from dpcount.keyed.watermark import complete_through, parse_lateness
from dpcount.privacy.budget import Budget, BudgetFields

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "OPEN_KEY_BLOCK",
    "Carry",
    "KeyedJob",
    "SecretArg",
    "begin_release",
    "continue_from",
    "job_of",
    "load_stored",
    "make_job",
    "open_universe",
    "place_keys",
    "release_window",
    "save_state",
    "settle",
    "stored_keys",
    "with_stored",
]

#: what ``secret=`` accepts: a secret file path, a loaded RunSecret, or a testing secret
SecretArg = RunSecret | UnsafeTestingSecret | str | os.PathLike[str]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class KeyedJob:
    """What a worker needs to bound and release: the run's public configuration (its
    :class:`~dpcount.keyed.spec.KeyedSpec`), its secret, the steps it releases and what
    it continues (an open key set's selection steps, a unit ledger)."""

    spec: KeyedSpec
    secret: RunSecret
    #: the steps this run releases (a later run continues from a stored state)
    first: int = 1
    last: int | None = None
    #: each key's selection step (T + 1: never), once selected; rows before it are withheld
    selected: NDArray[np.int64] | None = field(default=None, compare=False)
    #: whether the run stores a state (then releases return the noise state at ``until``)
    keep_state: bool = False
    #: what the units used of a run-level bound in the steps before ``first`` (stored)
    ledger: UnitLedger | None = field(default=None, compare=False)

    @property
    def columns(self) -> EventColumns:
        return self.spec.columns

    @property
    def universe(self) -> KeyUniverse:
        return self.spec.universe

    @property
    def buckets(self) -> TimeBuckets:
        return self.spec.buckets

    @property
    def mechanism(self) -> KeyedMechanism:
        return self.spec.mechanism

    @property
    def max_weight(self) -> float:
        return self.spec.max_weight

    @property
    def max_keys(self) -> int | None:
        return self.spec.max_keys

    @property
    def run_bound(self) -> RunBound | None:
        """A unit's bound over the whole run (``Bounds(scope="run")``; None: per step)."""
        return self.spec.run_bound

    @property
    def selection(self) -> SelectionPlan | None:
        """Private key selection (open key set; :mod:`dpcount.keyed.selection`)."""
        return self.spec.selection

    @property
    def late(self) -> str:
        """What events of already released steps do (:mod:`dpcount.keyed.watermark`)."""
        return self.spec.late

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

    def prepare(
        self, frame: pd.DataFrame, source: str | None = None
    ) -> tuple[pd.DataFrame, DropReport]:
        """:func:`~dpcount.keyed.stages.bound_partition` of this job."""
        return bound_partition(self, frame, source)

    def finish(self, partials: Sequence[pd.DataFrame]) -> tuple[Contributions, DropReport]:
        """Combine partial sums (any partitioning gives the same result for integers)."""
        contributions, report, _ = merge_partials(self, partials)
        return contributions, report

    def finish_run(
        self, partials: Sequence[pd.DataFrame]
    ) -> tuple[Contributions, DropReport, UnitLedger | None]:
        """:func:`~dpcount.keyed.stages.merge_partials` of this job."""
        return merge_partials(self, partials)

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
        """The run's public configuration, as its secret file records it."""
        return self.spec.config()


def make_job(
    *,
    times: pd.Series,
    keys: Sequence[Any] | str | os.PathLike[str] | None,
    columns: EventColumns,
    step: int | str,
    budget: Budget | None = None,
    max_weight: float,
    max_keys: int | None,
    start: Any,
    horizon: int | None,
    k: int | None = None,
    subtract: bool | None = None,
    mechanism: str = "auto",
    key_values: pd.Series | None = None,
    selection: KeySelection | None = None,
    unit_scope: str = "step",
    max_steps: int | None = None,
    min_separation: int | None = None,
    late: str = "refuse",
    prior_keys: Sequence[Any] = (),
    **fields: Unpack[BudgetFields],
) -> tuple[KeyedJob, list[str]]:
    """:func:`~dpcount.keyed.spec.build_spec` from its groups' fields given loose, as a
    job (``times``: all event times, for omitted start/horizon). The job's secret is a
    placeholder until :meth:`KeyedJob.with_secret`. ``**fields``: the budget's fields
    given loose (``epsilon=``, ``delta=``, ``noise=``, ``calibration=``; deprecated,
    DeprecationWarning; removed in 0.5)."""
    resolved = keyed_budget(
        Budget.resolve(budget, fields, owner="make_job", deprecated=True), "make_job"
    )
    spec = build_spec(
        columns,
        Keys(keys, selection),
        Steps(step, start, horizon),
        counting=Counting(mechanism, budget=resolved, k=k, subtract=subtract),
        bounds=Bounds(
            max_weight,
            max_keys,
            UnitScope.parse("unit_scope", unit_scope),
            max_steps,
            min_separation,
        ),
        late=Late.parse("late", late),
        times=times,
        key_values=key_values,
        prior_keys=prior_keys,
    )
    return job_of(spec), list(spec.derived)


def job_of(spec: KeyedSpec) -> KeyedJob:
    """The job of ``spec``, its secret a placeholder until :meth:`KeyedJob.with_secret`."""
    return KeyedJob(spec, RunSecret.in_memory(b"\0" * 32, {}))


def place_keys(
    job: KeyedJob,
    contributions: Contributions,
    ledger: UnitLedger | None,
    n_prior: int,
) -> tuple[KeyedJob, Contributions, UnitLedger | None]:
    """An open key set's noise positions: the ``n_prior`` keys of earlier runs keep
    theirs; the keys first counted in this run follow, ordered by the step of their
    first bounded contribution, then by name (the universe's order). A key is placed
    when it is first counted, never later moved, so runs split anywhere place every
    key where one run over all the steps does. The noise is i.i.d. over positions and
    the placement does not look at it, so a data-dependent placement does not change
    its law. Returns the job over the key table (its universe, ``n_keys``), the
    contributions and the ledger with keys renamed to positions."""
    position = key_positions(first_steps(contributions, 0, len(job.universe)), n_prior)
    out = placed_job(job, position)
    placed = renumber(contributions, position)
    return out, placed, None if ledger is None else ledger.remap_keys(position)


def key_positions(first_step: NDArray[np.int64], n_prior: int) -> NDArray[np.int64]:
    """Each universe key's position in the key table (−1: not counted, not placed), from
    every key's :func:`first_steps` (:func:`place_keys`)."""
    new = np.flatnonzero(first_step[n_prior:] < NOT_COUNTED) + n_prior
    new = new[np.lexsort((new, first_step[new]))]
    position = np.full(len(first_step), -1, dtype=np.int64)
    position[:n_prior] = np.arange(n_prior)
    position[new] = n_prior + np.arange(len(new))
    return position


def placed_job(job: KeyedJob, position: NDArray[np.int64]) -> KeyedJob:
    """The job over the key table of :func:`key_positions` (its universe, ``n_keys``)."""
    placed = np.flatnonzero(position >= 0)
    table = [job.universe.keys[i] for i in placed[np.argsort(position[placed])]]
    if not table:
        raise ValueError(
            f"keys=None: no key has a counted event in steps {job.first}..{job.until}, so "
            "there is no key to select from; release these steps with the next run"
        )
    size = len(table)
    mech = dataclasses.replace(job.mechanism, n_keys=size)
    plan = None if job.selection is None else job.selection.with_keys(size, mech.key_block)
    spec = dataclasses.replace(
        job.spec, universe=KeyUniverse(table), mechanism=mech, selection=plan
    )
    return dataclasses.replace(job, spec=spec)


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
    return RunSecret.open_or_generate(secret, config)  # written by begin_release


def begin_release(
    guard: ReleaseGuard | None,
    job: KeyedJob,
    created: bool,
    contributions: Contributions,
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    state: str | os.PathLike[str] | None,
    stored: RunState | None = None,
) -> None:
    """Before any output: every running sum is exact (below 2^53, else ValueError naming
    the key and step), and the guard's mark accepts releasing ``job``'s steps from this
    input (:meth:`~dpcount.keyed.mark.ReleaseGuard.begin`) and records it in progress.
    A new secret (``created``) is written to its file here, not before.
    ``stored``: the state it continues (its open key set and unit ledger are input too)."""
    check_running(contributions, base, job.universe.keys, job.first, job.until)
    if created and job.secret.path is not None and not job.secret.path.exists():
        # only now, everything validated: a refused run leaves no secret file (and mark)
        # bound to its configuration behind
        job.secret.write()
    if guard is None:
        return
    extra = b"" if stored is None else extras_digest(stored.open, stored.ledger)
    digest = input_digest(job.secret, job.first, job.until, contributions, base, buffers, extra)
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


def release_window(
    job: KeyedJob,
    state: str | os.PathLike[str] | None,
    until: int | None,
    times: pd.Series,
    lateness: Any,
    derived: list[str],
) -> KeyedJob:
    """:func:`continue_from`, releasing up to ``until`` — or, with an allowed ``lateness``
    (:func:`~dpcount.keyed.watermark.parse_lateness`), up to the last step complete by
    the latest event time (the max of ``times``) less ``lateness``, noted in ``derived``
    as taken from the data."""
    if lateness is not None:
        wait = parse_lateness(lateness, job.buckets)
        first = continue_from(job, state, None).first
        if len(times) == 0:
            raise ValueError("allowed_lateness: no events, so no watermark (pass until=)")
        latest = times.max()
        until = complete_through(job.buckets, job.mechanism.horizon, latest, wait)
        if until < first:
            raise ValueError(
                f"no new complete step: the latest event time {latest} less the allowed "
                f"lateness {lateness} is before the end of step {first}, the next to release"
            )
        derived.append("the released steps (from the latest event time)")
    return continue_from(job, state, until)


def load_stored(job: KeyedJob, state: str | os.PathLike[str] | None) -> RunState | None:
    """The authenticated state of step ``job.first − 1`` (None: start from zero), with
    its open key set (``job.selection``) and unit ledger (``job.run_bound``). For an
    open key set its key table must be the universe's first keys (read before it was
    authenticated, :meth:`RunState.peek_keys`)."""
    if state is None or (job.first == 1 and not os.path.exists(state)):
        return None
    m = job.mechanism
    open_keys = job.selection is not None
    stored = RunState.load(
        state,
        job.secret,
        None if open_keys else m.n_keys,
        m.noise_layout(job.first - 1),
        selection_layout=(
            None if job.selection is None else job.selection.noise_layout(job.first - 1)
        ),
        open_keys=open_keys,
        units=job.run_bound is not None,
    )
    if stored.step != job.first - 1:
        raise ValueError(f"state file {state} changed during the run (step {stored.step})")
    dtype = np.int64 if job.integer else np.float64
    if stored.sums.dtype != dtype:
        raise ValueError(f"state file {state} holds {stored.sums.dtype} sums, not {dtype}")
    if stored.open is not None and [canonical_text(k) for k in stored.open.keys] != [
        canonical_text(k) for k in job.universe.keys[: len(stored.open.keys)]
    ]:
        raise ValueError(f"state file {state} changed during the run (its key table)")
    return stored


def extend_noise_state(
    mechanism: KeyedMechanism,
    prf_key: bytes,
    buffers: NDArray[np.uint64] | None,
    n_keys: int,
    first: int,
    chunk_keys: int,
) -> NDArray[np.uint64] | None:
    """``buffers`` (the noise state after step first − 1 of the first keys) with the
    noise state of keys len..n_keys − 1 appended, keys first counted in this run: their
    noise of steps 1..first − 1, computed from the PRF at their positions (nothing of
    it was released: those positions held no key). The engine computes whole key
    blocks, so stored keys sharing a block with new ones have their values of those
    steps computed again alongside (the same bits, pure functions of the position)
    and discarded: nothing of it is released or added to another count."""
    if buffers is None or buffers.shape[1] == n_keys:
        return buffers
    out = np.zeros((buffers.shape[0], n_keys), dtype=np.uint64)
    done = buffers.shape[1]
    out[:, :done] = buffers
    none = np.zeros(0, dtype=np.int64)
    empty = Contributions(none, none, np.zeros(0, dtype=np.int64))
    for lo in range(done, n_keys, chunk_keys):
        hi = min(lo + chunk_keys, n_keys)
        _, ends = mechanism.release_with_state(
            prf_key, empty, lo, hi, first=1, last=first - 1, keep_state=True
        )
        assert ends is not None
        out[:, lo:hi] = ends
    return out


@dataclass
class Carry:
    """What the next run needs: the exact running sums at ``until`` (computed before the
    release) and the per-key noise state there (filled in chunk by chunk; None when the
    mechanism keeps none, :meth:`KeyedMechanism.noise_layout`)."""

    sums: NDArray[Any]
    buffers: NDArray[Any] | None
    #: an open key set's table, selection steps and selection noise state at ``until``
    open: OpenKeys | None = None
    #: the unit ledger after ``until`` (run-level bounds)
    ledger: UnitLedger | None = None

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
    open_keys: OpenKeys | None = None,
    ledger: UnitLedger | None = None,
) -> None:
    """Record that steps 1..until are released, with the exact sums (and the per-key noise
    state) at ``until``, and an open key set's and a unit ledger's state."""
    s = job.secret
    layout = job.mechanism.noise_layout(job.until) if buffers is not None else None
    RunState(s.run_id, s.fingerprint, job.until, totals, buffers, layout, open_keys, ledger).save(
        state, s
    )


def stored_keys(common: dict[str, Any], state: str | os.PathLike[str] | None) -> tuple[Any, ...]:
    """An open key set's key table of the stored ``state`` (the universe starts with it;
    read before the secret is loaded, authenticated by :func:`with_stored`); () for a
    public key universe or a first run."""
    if common.get("keys") is None and state is not None and os.path.exists(state):
        return RunState.peek_keys(state)
    return ()


def with_stored(
    job: KeyedJob, state: str | os.PathLike[str] | None
) -> tuple[KeyedJob, RunState | None]:
    """The authenticated stored state this run continues (:func:`load_stored`; None:
    from step 1), and the job with its unit ledger (run-level bounds continue it)."""
    stored = load_stored(job, state)
    if stored is not None:
        job = dataclasses.replace(job, ledger=stored.ledger)
    return job, stored


def settle(
    job: KeyedJob,
    created: bool,
    stored: RunState | None,
    contributions: Contributions,
    ledger: UnitLedger | None,
    chunk_keys: int,
    guard: ReleaseGuard | None,
    state: str | os.PathLike[str] | None,
) -> tuple[
    KeyedJob,
    Contributions,
    NDArray[Any] | None,
    NDArray[Any] | None,
    Carry | None,
    SelectionOutcome | None,
]:
    """What both engines do on the client between bounding and release, given all the
    run's bounded ``contributions`` and the unit ``ledger`` after them: an open key set's
    keys placed after the ``stored`` key table (:func:`place_keys`), the stored sums and
    noise states extended to them (:func:`extend_stored`) and the keys selected continuing the
    stored selection (:func:`select_keys`); the release begun (:func:`begin_release`);
    and what the next run needs (a :class:`Carry` with the key table and the ledger;
    None without ``state``). Returns the job (placed, with its selection steps), the
    contributions (keys renamed to positions), the running sums and counting noise
    state the release continues from, the carry and the selection outcome."""
    base = None if stored is None else stored.sums
    buffers = None if stored is None else stored.buffers
    outcome, opened = None, None
    if job.selection is not None:
        n_prior = 0 if stored is None or stored.open is None else len(stored.open.keys)
        job, contributions, ledger = place_keys(job, contributions, ledger, n_prior)
        base, buffers, picked = extend_stored(job, stored, base, buffers, chunk_keys)
        selected, outcome, ends = select_keys(
            job,
            contributions,
            chunk_keys,
            base=base,
            noise_state=picked,
            selected=None if stored is None or stored.open is None else stored.open.selected,
            n_prior=n_prior,
        )
        job = dataclasses.replace(job, selected=selected)
        layout = None if ends is None else job.selection.noise_layout(job.until)  # type: ignore[union-attr]
        opened = OpenKeys(tuple(job.universe.keys), selected, ends, layout)  # a tuple already
    begin_release(guard, job, created, contributions, base, buffers, state, stored)
    carry = None if state is None else Carry.start(job, contributions, base, chunk_keys)
    if carry is not None:
        carry.open, carry.ledger = opened, ledger
    return job, contributions, base, buffers, carry, outcome


def extend_stored(
    job: KeyedJob,
    stored: RunState | None,
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    chunk_keys: int,
) -> tuple[NDArray[Any] | None, NDArray[Any] | None, NDArray[np.uint64] | None]:
    """An open key set continuing a stored state: the sums (zero), the counting noise
    state and the selection counter's noise state of the keys new in this run appended
    to the stored keys' (:func:`extend_noise_state`)."""
    if stored is None or stored.open is None:
        return base, buffers, None
    n = job.mechanism.n_keys
    assert base is not None and job.selection is not None
    grown = np.zeros(n, dtype=base.dtype)
    grown[: len(base)] = base
    prf = job.secret.prf_key
    counting = extend_noise_state(job.mechanism, prf, buffers, n, job.first, chunk_keys)
    picked = extend_noise_state(
        job.selection.mechanism,
        selection_secret(prf),
        stored.open.buffers,
        n,
        job.first,
        chunk_keys,
    )
    return grown, counting, picked
