"""A keyed run's job: its public configuration (:class:`~dpcount.keyed.spec.KeyedSpec`),
its secret and the steps it releases, with the bounding and release every runner
(embedded, Dask, Spark) calls. The run's lifecycle (secret, stored state, mark, state
saving) is :mod:`dpcount.keyed.session`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
)
from dpcount.keyed.secret import MacLabel, RunSecret, UnsafeTestingSecret
from dpcount.keyed.selection import KeySelection, SelectionPlan
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
from dpcount.privacy.budget import Budget, refuses_loose_budget

__all__ = [
    "OPEN_KEY_BLOCK",
    "KeyedJob",
    "SecretArg",
    "job_of",
    "make_job",
    "open_universe",
    "place_keys",
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
        return self.secret.mac(MacLabel.UNIT_RANK).hash_key()

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

    def config(self) -> dict[str, Any]:
        """The run's public configuration, as its secret file records it."""
        return self.spec.config()


@refuses_loose_budget()
def make_job(
    *,
    times: pd.Series,
    keys: Sequence[Any] | None,
    columns: EventColumns,
    step: int | str,
    budget: Budget,
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
) -> tuple[KeyedJob, list[str]]:
    """:func:`~dpcount.keyed.spec.build_spec` from its groups' fields given loose, as a
    job (``times``: all event times, for omitted start/horizon). The job's secret is a
    placeholder until :func:`dpcount.keyed.session.with_secret`."""
    resolved = keyed_budget(Budget.check(budget, owner="make_job"), "make_job")
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
    """The job of ``spec``, its secret a placeholder until
    :func:`dpcount.keyed.session.with_secret`."""
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
