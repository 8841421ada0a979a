"""A keyed run's job (:class:`~dpcount.keyed.stages.KeyedJob`: its public configuration,
:class:`~dpcount.keyed.spec.KeyedSpec`, its secret and the steps it releases, defined
beside the stages that read it) built from loose options, and an open key set's key
placement. The run's lifecycle (secret, stored state, mark, state
saving) is :mod:`dpcount.keyed.session`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.engine import keyed_budget
from dpcount.keyed.events import (
    Contributions,
    EventColumns,
    KeyUniverse,
)
from dpcount.keyed.secret import RunSecret, UnsafeTestingSecret
from dpcount.keyed.selection import KeySelection
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
from dpcount.keyed.stages import NOT_COUNTED, KeyedJob, first_steps, renumber
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
