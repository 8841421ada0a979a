"""The lifecycle of one keyed run: :class:`RunSession`, and the steps it is made of.

A keyed run's state between its configuration (:class:`~dpcount.keyed.job.KeyedJob`)
and its output lives here, in one object: the lock and released-up-to mark of its
secret (and an incremental run's consumed-files record, the mark's companion:
:class:`~dpcount.keyed.mark.ReleaseGuard`), the secret (loaded, or generated and
written only when the release begins), the authenticated stored state
(:class:`~dpcount.keyed.state.RunState`: sums, noise state and its layout, an open key
set's key table, the unit ledger), the input digest the mark records, and what the
next run needs (:class:`Carry`). The release goes through the one exactly-once
protocol (:mod:`dpcount.durable.once`): :meth:`RunSession.begin` records it pending
(mark, record) before any output, :meth:`RunSession.commit` saves the state and
records it done.

The API a runner (embedded, Dask, Spark) uses, in this order::

    with RunSession(secret, state, companion) as session:  # the lock, held to the end
        prior = session.prior_keys(open_keys)     # an open key set's stored key table
        job = make_job(..., prior_keys=prior)     # the public configuration
        job = session.window(job, until, times, lateness, derived)  # steps to release
        ...                                       # validate the events (no secret yet)
        job = session.bind(job)                   # the secret; the stored state
        ...                                       # bound: contributions, ledger
        job, contributions, base, buffers = session.begin(
            job, contributions, ledger, chunk_keys
        )                                         # keys placed, selected; mark pending
        ...                                       # release and write, filling
        ...                                       #   session.carry.buffers chunk by chunk
        session.commit(job)                       # the state saved, then the mark done

Every runner goes through this object (:func:`dpcount.keyed.runners.drive`); a
distributed runner that places and selects an open key set's keys on its workers
begins the release with :meth:`RunSession.begin_placed` instead of :meth:`begin`. The
free functions below are the steps one by one.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import Contributions, check_running
from dpcount.keyed.ids import canonical_text
from dpcount.keyed.job import KeyedJob, SecretArg, place_keys
from dpcount.keyed.mark import ReleaseCompanion, ReleaseGuard, input_digest, write_secret
from dpcount.keyed.prf import PRFKey
from dpcount.keyed.secret import Label, RunSecret, UnsafeTestingSecret
from dpcount.keyed.selection import SelectionOutcome, select_keys
from dpcount.keyed.state import OpenKeys, RunState, extras_digest
from dpcount.keyed.watermark import complete_through, parse_lateness

__all__ = [
    "Carry",
    "RunSession",
    "begin_release",
    "check_secret_arg",
    "continue_from",
    "load_stored",
    "release_window",
    "save_state",
    "secret_file",
    "settle",
    "with_secret",
    "with_stored",
]


class RunSession:
    """The lifecycle state of one keyed run (the module docstring: its API).

    Args:
        secret: ``secret=`` of the run (a file path, a RunSecret of a file, or a
            testing secret).
        state: the state file (None: the run keeps none).
        companion: a record kept with the release under the mark's protocol (an
            incremental run's consumed files; :class:`~dpcount.keyed.mark.ReleaseCompanion`).
    """

    def __init__(
        self,
        secret: SecretArg,
        state: str | os.PathLike[str] | None = None,
        companion: ReleaseCompanion | None = None,
    ) -> None:
        check_secret_arg(secret)
        self.secret_arg = secret
        self.state = state
        #: the lock and the mark (and the companion), :class:`ReleaseGuard`
        self.guard = ReleaseGuard(secret_file(secret), companion)
        #: whether the secret is new (written when the release begins)
        self.created = False
        #: the authenticated stored state this run continues (None: from step 1)
        self.stored: RunState | None = None
        #: what the next run needs (None: no state kept), set by :meth:`begin`
        self.carry: Carry | None = None
        #: the key selection's outcome (None: no open key set), set by :meth:`begin`
        self.outcome: SelectionOutcome | None = None

    def __enter__(self) -> RunSession:
        self.guard.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.guard.__exit__(*exc)

    @property
    def digest(self) -> str | None:
        """The input digest of the release begun (recorded in the mark; None: none
        begun, or a testing secret, which has no mark)."""
        pending = self.guard.pending
        return None if pending is None else pending.digest

    def prior_keys(self, open_keys: bool) -> tuple[Any, ...]:
        """An open key set's key table of the stored state (the universe starts with it;
        read before the secret is loaded, authenticated by :func:`with_stored`); () for a
        public key universe (``open_keys`` False) or a first run."""
        state = self.state
        if open_keys and state is not None and os.path.exists(state):
            return RunState.peek_keys(state)
        return ()

    def window(
        self, job: KeyedJob, until: int | None, times: pd.Series, lateness: Any, derived: list[str]
    ) -> KeyedJob:
        """The job releasing the steps after the stored state (:func:`release_window`)."""
        return release_window(job, self.state, until, times, lateness, derived)

    def bind(self, job: KeyedJob) -> KeyedJob:
        """The job with its run secret (:func:`with_secret`) and the stored state's unit
        ledger (:func:`with_stored`); the stored state kept in :attr:`stored`."""
        job, self.created = with_secret(job, self.secret_arg)
        job, self.stored = with_stored(job, self.state)
        return job

    def begin(
        self,
        job: KeyedJob,
        contributions: Contributions,
        ledger: UnitLedger | None,
        chunk_keys: int,
    ) -> tuple[KeyedJob, Contributions, NDArray[Any] | None, NDArray[Any] | None]:
        """Settle and begin the release (:func:`settle`): returns the job (keys placed,
        selected), its contributions, and the sums and noise state it continues."""
        job, contributions, base, buffers, self.carry, self.outcome = settle(
            job,
            self.created,
            self.stored,
            contributions,
            ledger,
            chunk_keys,
            self.guard,
            self.state,
        )
        return job, contributions, base, buffers

    def begin_placed(self, job: KeyedJob, contributions: Contributions) -> None:
        """Begin the release of a run from step 1 whose keys were placed and selected
        where they lie (a distributed runner): the mark records it pending with the input
        digest of every contribution (:func:`begin_release`)."""
        begin_release(self.guard, job, self.created, contributions, None, None, None)

    def commit(self, job: KeyedJob, carry: Carry | None = None) -> Path | None:
        """Once the whole output is out: save the state (``carry``, default
        :attr:`carry`), then record the release done (the mark, then the companion).
        Returns the state file (None: none kept)."""
        carry = self.carry if carry is None else carry
        path = None
        if self.state is not None:
            assert carry is not None
            save_state(job, self.state, carry.sums, carry.buffers, carry.open, carry.ledger)
            path = Path(self.state)
        self.guard.finish()
        return path


def with_secret(job: KeyedJob, secret: SecretArg) -> tuple[KeyedJob, bool]:
    """``job`` with the run secret for its configuration (loaded, or generated if
    absent: written when the release begins, :func:`begin_release`); and whether it is new."""
    run_secret, created = _resolve_secret(secret, job.config())
    return dataclasses.replace(job, secret=run_secret), created


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
        return RunSecret.for_testing(secret, config), False
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
        write_secret(job.secret)
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
    prf: PRFKey,
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
            prf, empty, lo, hi, first=1, last=first - 1, keep_state=True
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
    noise = job.secret.prf(Label.NOISE)
    counting = extend_noise_state(job.mechanism, noise, buffers, n, job.first, chunk_keys)
    picked = extend_noise_state(
        job.selection.mechanism,
        job.secret.prf(Label.SELECTION),
        stored.open.buffers,
        n,
        job.first,
        chunk_keys,
    )
    return grown, counting, picked
