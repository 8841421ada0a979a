"""The public configuration of a keyed run (the job): buckets, key universe, bounds and
calibration, fixed before any data is read; shared by the embedded and Dask engines.
The run's lifecycle (secret, stored state, mark, state saving) is
:mod:`dpcount.keyed.session`."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import RunBound, UnitLedger, bound_units_run
from dpcount.keyed.engine import (
    KeyedMechanism,
    choose_mechanism,
    chunk_bounds,
    exact_running,
    keyed_budget,
)
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    StepWindow,
    TimeBuckets,
    bound_units,
    check_max_weight,
    clip_events,
    map_events,
    partial_sums,
    to_contributions,
)
from dpcount.keyed.ids import open_keys
from dpcount.keyed.secret import Label, MacLabel, RunSecret, UnsafeTestingSecret
from dpcount.keyed.selection import (
    KeySelection,
    SelectionPlan,
)
from dpcount.privacy.budget import Budget, BudgetFields

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "KeyedJob",
    "SecretArg",
    "make_job",
    "place_keys",
]

#: what ``secret=`` accepts: a secret file path, a loaded RunSecret, or a testing secret
SecretArg = RunSecret | UnsafeTestingSecret | str | os.PathLike[str]

Progress = Callable[[int, int], None]

#: the PRF key block of an open key set: fixed (the table grows from run to run, and a
#: key's noise must not depend on how many keys there are)
OPEN_KEY_BLOCK = 1024


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
    #: a unit's bound over the whole run (``unit_scope="run"``; None: per step)
    run_bound: RunBound | None = None
    #: private key selection (open key set; :mod:`dpcount.keyed.selection`)
    selection: SelectionPlan | None = None
    #: each key's selection step (T + 1: never), once selected; rows before it are withheld
    selected: NDArray[np.int64] | None = field(default=None, compare=False)
    #: what happens to events of already released steps (:mod:`dpcount.keyed.watermark`)
    late: str = "refuse"
    #: whether the run stores a state (then releases return the noise state at ``until``)
    keep_state: bool = False
    #: what the units used of a run-level bound in the steps before ``first`` (stored)
    ledger: UnitLedger | None = field(default=None, compare=False)

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
        """Map one partition of events (``source``: its file, for error messages) and
        sum it partially (clipping events first)."""
        m = self.mechanism
        rows, report = map_events(
            frame,
            self.columns,
            self.universe,
            self.buckets,
            StepWindow(m.horizon, self.first, self.last, self.late),
            integer=self.integer,
            source=source,
        )
        if self.max_keys is None:
            rows, clipped = clip_events(rows, self.max_weight)
            report = report + clipped
        return partial_sums(rows, by_unit=self.max_keys is not None), report

    def finish(self, partials: Sequence[pd.DataFrame]) -> tuple[Contributions, DropReport]:
        """Combine partial sums (any partitioning gives the same result for integers)."""
        contributions, report, _ = self.finish_run(partials)
        return contributions, report

    def finish_run(
        self, partials: Sequence[pd.DataFrame]
    ) -> tuple[Contributions, DropReport, UnitLedger | None]:
        """:meth:`finish`, and the unit ledger after this run's steps (run-level bounds,
        continuing :attr:`ledger`; None without them)."""
        rows = pd.concat(list(partials), ignore_index=True) if partials else None
        dtype = np.int64 if self.integer else np.float64
        ledger = None if self.run_bound is None else (self.ledger or UnitLedger.empty())
        if rows is None or rows.empty:
            empty = np.zeros(0, dtype=np.int64)
            return Contributions(empty, empty, np.zeros(0, dtype=dtype)), DropReport(), ledger
        report = DropReport()
        if self.run_bound is not None:
            rows, report, ledger = bound_units_run(
                rows,
                self.run_bound,
                hash_key=self.hash_key,
                keys=self.universe.keys,
                ledger=self.ledger,
            )
        elif self.max_keys is not None:
            rows, report = bound_units(
                rows, max_keys=self.max_keys, max_weight=self.max_weight, hash_key=self.hash_key
            )
        return to_contributions(rows, dtype, self.universe.keys), report, ledger

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
            self.secret.prf(Label.NOISE),
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

    def config(self) -> dict[str, Any]:
        # an open key set's table grows from run to run: its size is not configuration
        size = {} if self.selection is None else {"n_keys": "open"}
        return {
            **self.mechanism.config(),
            **size,
            "keys_sha256": "open" if self.selection is not None else self.universe.digest(),
            **self.buckets.describe(),
            "max_weight": self.max_weight,
            "max_keys": self.max_keys,
            **({} if self.run_bound is None else self.run_bound.config()),
            **({} if self.selection is None else self.selection.config()),
        }


def _key_block(n_keys: int) -> int:
    return 1 << min(10, max(0, (n_keys - 1).bit_length()))


def make_job(
    *,
    times: pd.Series,
    keys: Sequence[Any] | None,
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
    """Fix the public configuration (``times``: all event times, for omitted start/horizon).

    ``mechanism``: a registry name, ``"tree"``, or ``"auto"`` (the plan's best for the
    horizon, budget and sensitivity: :func:`~dpcount.keyed.engine.choose_mechanism`).
    The job's secret is a placeholder until :func:`dpcount.keyed.session.with_secret`.

    ``keys=None`` with ``selection``: an open key set, the candidates taken from
    ``key_values`` (the events' key column; :mod:`dpcount.keyed.selection`) after the
    ``prior_keys`` of earlier runs (their key table, positions kept).
    ``unit_scope="run"``: the unit bound over the whole run (``max_keys``,
    ``max_steps``, ``min_separation``; :mod:`dpcount.keyed.bounds`).
    ``budget``: as :func:`~dpcount.keyed.run.keyed_counts` takes it (noise default
    exact discrete Laplace, step sensitivity 1, no participation schema: the run's
    bounds give them); ``**fields``: its fields given loose (``epsilon=``, ``delta=``,
    ``noise=``, ``calibration=``; deprecated, DeprecationWarning; removed in 0.5).
    """
    resolved = keyed_budget(
        Budget.resolve(budget, fields, owner="make_job", deprecated=True), "make_job"
    )
    kind = resolved.noise
    assert kind is not None  # keyed_budget gives it its default
    if keys is None:
        universe = open_universe(selection, key_values, prior_keys)
    else:
        if selection is not None:
            raise ValueError(
                "selection= chooses the released keys from the data: with a public key "
                "universe (keys=) every key is released; pass keys=None for an open key set"
            )
        universe = KeyUniverse(keys)
    if unit_scope not in ("step", "run"):
        raise ValueError(f"unit_scope must be 'step' or 'run', got {unit_scope!r}")
    if unit_scope == "step" and (max_steps is not None or min_separation is not None):
        flag = "max_steps" if max_steps is not None else "min_separation"
        raise ValueError(f"{flag} bounds a unit over the whole run: it needs unit_scope='run'")
    derived = []
    if start is None:
        buckets = TimeBuckets.from_data(step, times)
        derived.append("start")
    else:
        buckets = TimeBuckets.make(step, start)
    if horizon is None:
        horizon = max(buckets.last_step(times), 1)
        derived.append("horizon")
    buckets.check_horizon(horizon)
    weight = check_max_weight(max_weight, kind.is_discrete)
    if max_keys is not None and columns.unit is None:
        raise ValueError("max_keys needs a unit column (unit_column=...)")
    if unit_scope == "run" and columns.unit is None:
        raise ValueError("unit_scope='run' needs a unit column (unit_column=...)")
    run_bound, schema, per_key_total, units = None, None, float(weight), 1
    if columns.unit is not None:
        if max_keys is None:
            raise ValueError("a unit column needs max_keys (keys per unit and step)")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be a positive integer, got {max_keys!r}")
        if unit_scope == "run":
            run_bound = RunBound(
                max_keys, max_steps, 1 if min_separation is None else min_separation, weight
            )
            schema = run_bound.participation(int(horizon))
            per_key_total, units = run_bound.per_key_total(int(horizon)), max_keys
            l1, l2 = run_bound.step_bounds()
            relation = run_bound.describe(int(horizon))
        else:
            if selection is not None:
                raise ValueError(
                    "selection= needs a bound on each unit's keys over the whole run: pass "
                    "unit_scope='run' (max_keys then counts keys over the run, not per step)"
                )
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
            int(horizon),
            budget=resolved.replace(participation=schema),
            l1_step=l1,
            l2_step=l2,
        )
        if resolved.calibration is None and rule is not None:
            resolved = resolved.replace(calibration=rule)
    mech = KeyedMechanism(
        n_keys=len(universe),
        horizon=int(horizon),
        mechanism=mechanism,
        budget=resolved.replace(participation=schema),
        l1_step=float(l1),
        l2_step=float(l2),
        neighbouring=relation,
        key_block=OPEN_KEY_BLOCK if keys is None else _key_block(len(universe)),
        **options,
    )
    mech.counting  # noqa: B018  (validates the budget before a secret file is created)
    plan = None
    if selection is not None:
        plan = SelectionPlan.make(
            selection, mech, per_key_total=per_key_total, max_keys=units, buckets=buckets
        )
    placeholder = RunSecret.in_memory(b"\0" * 32, {})
    job = KeyedJob(
        columns,
        universe,
        buckets,
        mech,
        weight,
        max_keys,
        placeholder,
        run_bound=run_bound,
        selection=plan,
        late=late,
    )
    return job, derived


def open_universe(
    selection: KeySelection | None, key_values: pd.Series | None, prior: Sequence[Any] = ()
) -> KeyUniverse:
    """The universe of an open key set while its events are read: the key table of the
    earlier runs (``prior``), then the other distinct keys of the events, sorted so that
    it does not depend on row order. Keys are one key when equal as numbers or as
    their canonical text (:func:`dpcount.keyed.ids.open_keys`: integers while every
    key column and the stored table are integers, else canonical text). The keys that
    get a bounded contribution then get their noise positions (:func:`place_keys`)."""
    if selection is None:
        raise ValueError(
            "keys: give the public key universe, or keys=None with "
            "selection=KeySelection(epsilon=..., delta=...) for an open key set"
        )
    if key_values is None:
        raise ValueError("an open key set (keys=None) needs the events' key column")
    table, distinct = open_keys(key_values, tuple(prior))
    known = set(table)
    new = sorted(v for v in distinct if v not in known)
    if not new and not table:
        raise ValueError("keys=None: the events hold no key to select from")
    return KeyUniverse([*table, *new])


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


#: :func:`first_steps` of a key without a counted contribution
NOT_COUNTED = np.iinfo(np.int64).max


def first_steps(contributions: Contributions, lo: int, hi: int) -> NDArray[np.int64]:
    """The step of the first counted contribution of each key lo..hi − 1 (of a universe
    index; :data:`NOT_COUNTED` for none)."""
    out = np.full(hi - lo, NOT_COUNTED, dtype=np.int64)
    part = contributions.for_keys(lo, hi)
    np.minimum.at(out, part.key - lo, part.step)
    return out


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
    return dataclasses.replace(job, universe=KeyUniverse(table), mechanism=mech, selection=plan)


def renumber(contributions: Contributions, position: NDArray[np.int64]) -> Contributions:
    """The contributions with each key renamed to its ``position``, sorted by (key, step)."""
    key = position[contributions.key]
    order = np.lexsort((contributions.step, key))
    return Contributions(key[order], contributions.step[order], contributions.value[order])
