"""The public configuration of a keyed run, from frozen option groups.

A keyed run is configured by a few frozen groups, each validated on its own, which
:func:`~dpcount.keyed.run.keyed_counts` and ``dpcount keyed`` build alike (Apache
Beam's ``PipelineOptions`` groups; scikit-learn's declared parameter constraints):

* :class:`~dpcount.keyed.events.EventColumns` — the event columns (time, key, weight,
  unit);
* :class:`Keys` — a public key universe, or an open key set with its private
  :class:`~dpcount.keyed.selection.KeySelection`;
* :class:`Steps` — the time buckets (step width, start of step 1, horizon T);
* :class:`Bounds` — the contribution bounds (per event, or per unit within one step or
  over the whole run: :class:`UnitScope`);
* :class:`Counting` — the budget and the counting mechanism;
* :class:`Window` — the steps this run releases (a stored state, ``until`` or an allowed
  lateness, and what a :class:`Late` event does);
* :class:`Output` — where the release goes (a frame, a file, a directory of parts, a
  callback or a sink) and its key chunks;
* the runner: :class:`Embedded`, :class:`Dask` or :class:`Spark` (:class:`Engine`), each
  with only its own options.

:func:`build_spec` turns the public groups (and, when ``start`` or ``horizon`` is
omitted, the event times: not private) into the :class:`KeyedSpec` — key universe, time
buckets, unit bounds, the counting mechanism calibrated to the run's per-step
sensitivity (:func:`choose_mechanism` for ``"auto"``, called
here and nowhere else) and its key block — before any secret exists. The
sensitivities are those of :mod:`dpcount.keyed.engine` (event level Δ₁ = Δ₂ = w; unit
within one step Δ₁ = m·w, Δ₂ = √m·w; unit over the run: :mod:`dpcount.keyed.bounds`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dpcount.keyed.bounds import RunBound
from dpcount.keyed.engine import KeyedMechanism, keyed_budget
from dpcount.keyed.events import EventColumns, KeyUniverse, TimeBuckets, check_max_weight
from dpcount.keyed.ids import open_keys
from dpcount.keyed.selection import KeySelection, SelectionPlan
from dpcount.keyed.watermark import check_late
from dpcount.privacy.budget import (
    Budget,
    Participation,
    _Choice,
    accept_participation,
    refuses_loose_budget,
)

__all__ = [
    "OPEN_KEY_BLOCK",
    "Bounds",
    "Counting",
    "Dask",
    "Embedded",
    "Engine",
    "EventColumns",
    "KeyedSpec",
    "Keys",
    "Late",
    "Output",
    "Runner",
    "Spark",
    "Steps",
    "UnitScope",
    "Window",
    "build_spec",
    "choose_mechanism",
    "from_keywords",
    "to_keywords",
]

#: the PRF key block of an open key set: fixed (the table grows from run to run, and a
#: key's noise must not depend on how many keys there are)
OPEN_KEY_BLOCK = 1024


class Engine(_Choice):
    """Where a keyed run computes: in process, on Dask or on Spark."""

    EMBEDDED = "embedded"
    DASK = "dask"
    SPARK = "spark"


class Late(_Choice):
    """What happens to an event of an already released step (with a stored state):
    refused (a ValueError naming its row), or counted in the first step this run
    releases (:mod:`dpcount.keyed.watermark`)."""

    REFUSE = "refuse"
    NEXT_STEP = "next-step"


class UnitScope(_Choice):
    """What ``max_keys`` bounds: a unit's keys within one step, or over the whole run
    (with ``max_steps`` and ``min_separation``; :mod:`dpcount.keyed.bounds`)."""

    STEP = "step"
    RUN = "run"


def _optional_int(name: str, value: object, least: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value!r}")


@dataclass(frozen=True)
class Keys:
    """The released keys: every key of a public ``universe`` (a sequence — a ``range``
    stays a range — or a text file, one key a line), or an open key set (``universe``
    None) whose keys are selected privately from the data by ``selection``."""

    universe: Sequence[Any] | str | os.PathLike[str] | None = None
    selection: KeySelection | None = None

    def __post_init__(self) -> None:
        if self.selection is not None and not isinstance(self.selection, KeySelection):
            raise TypeError(
                f"selection must be a KeySelection, got {type(self.selection).__name__}"
            )
        if isinstance(self.universe, (bytes, bytearray)):
            raise TypeError("keys must be a sequence of keys or a file path, not bytes")

    @property
    def open(self) -> bool:
        return self.universe is None


@dataclass(frozen=True)
class Steps:
    """The time buckets: ``step`` (an integer for integer times, or a duration or
    calendar step for dates, :mod:`dpcount._time`), the start of step 1 and the number
    of steps T (None: read off the events, which is not private)."""

    step: int | str
    start: Any = None
    horizon: int | None = None


@dataclass(frozen=True)
class Bounds:
    """A contribution's bounds: ``max_weight`` per event (event level) or per unit, key
    and step (with a unit column); ``max_keys`` keys per unit within one step
    (``scope`` STEP) or over the run (RUN, with ``max_steps`` steps per key at least
    ``min_separation`` apart)."""

    max_weight: float = 1
    max_keys: int | None = None
    scope: UnitScope = UnitScope.STEP
    max_steps: int | None = None
    min_separation: int | None = None

    def __post_init__(self) -> None:
        scope = UnitScope.parse("unit_scope", self.scope)
        object.__setattr__(self, "scope", scope)
        if scope is UnitScope.STEP and (
            self.max_steps is not None or self.min_separation is not None
        ):
            flag = "max_steps" if self.max_steps is not None else "min_separation"
            raise ValueError(f"{flag} bounds a unit over the whole run: it needs unit_scope='run'")


@dataclass(frozen=True)
class Counting:
    """The counting mechanism — ``"auto"`` (the plan's best), a registry name or
    ``"tree"`` — and its budget (:class:`~dpcount.privacy.Budget`, keyword-only;
    without a noise kind exact discrete Laplace); ``k`` and ``subtract``: the k-ary
    tree's options."""

    mechanism: str = "auto"
    _: KW_ONLY
    budget: Budget
    k: int | None = None
    subtract: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.budget, Budget):
            raise TypeError(f"budget must be a Budget, got {type(self.budget).__name__}")
        if not isinstance(self.mechanism, str):
            raise TypeError(f"mechanism must be a name, got {self.mechanism!r}")
        if self.mechanism == "auto" and (self.k is not None or self.subtract is not None):
            raise ValueError(
                "k and subtract are options of the k-ary tree: pass mechanism='kary' with them "
                "(mechanism='auto' chooses the mechanism and its options)"
            )


@dataclass(frozen=True)
class Window:
    """The steps this run releases: from the step after the stored ``state`` (None: from
    step 1) up to ``until`` (a public schedule) or to the last step complete by the
    latest event time less ``allowed_lateness`` (not private); ``late``: what an event
    of an already released step does."""

    state: str | os.PathLike[str] | None = None
    until: int | None = None
    late: Late = Late.REFUSE
    allowed_lateness: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "late", Late(check_late(self.late)))

    def check(self) -> None:
        """Refuse a window that cannot be released (checked by the run, after the
        state's start and horizon)."""
        if self.late is Late.NEXT_STEP and self.state is None:
            raise ValueError(
                "late='next-step' needs state=: without a stored state no step was released "
                "before this run, so no event can be late"
            )
        if self.allowed_lateness is not None and self.until is not None:
            raise ValueError(
                "give until= (a release schedule fixed in advance) or allowed_lateness= (the "
                "steps complete by the latest event time), not both"
            )
        if self.state is not None and self.until is None and self.allowed_lateness is None:
            raise ValueError(
                "state= needs until= (the last step to release now) or allowed_lateness=: "
                "releasing to the horizon by default would use up the steps that later runs "
                "are meant to release"
            )


#: a sink: called with the job and its chunks, returns the output's path
Sink = Callable[[Any, Any], Path]


@dataclass(frozen=True)
class Output:
    """Where the release goes: a frame (``path`` None), a CSV/Parquet file, a resumable
    directory of Parquet parts (a path without an extension), ``on_chunk`` (called
    with each chunk's first key and counts) or a ``sink``; ``chunk_keys`` keys per
    chunk; ``std_digits``: significant digits of a CSV's std column; ``progress``:
    called with (keys done, keys total)."""

    path: str | os.PathLike[str] | None = None
    time_label: str = "time"
    chunk_keys: int = 2048
    std_digits: int | None = None
    on_chunk: Callable[[int, Any], None] | None = None
    sink: Sink | None = None
    progress: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        given = [
            n for n, v in (("output", self.path), ("on_chunk", self.on_chunk)) if v is not None
        ]
        if self.sink is not None and given:
            raise ValueError(f"give sink= alone, without {' or '.join(given)}=")
        if len(given) == 2:
            raise ValueError("give either output= or on_chunk=, not both")
        k = self.chunk_keys
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"chunk_keys must be a positive integer, got {k!r}")
        if k < 1:
            raise ValueError(f"chunk_keys must be a positive integer, got {k!r}")
        d = self.std_digits
        if d is not None and not (isinstance(d, int) and 1 <= d <= 17):
            raise ValueError(f"std_digits must be between 1 and 17 or None, got {d!r}")

    @property
    def parts(self) -> bool:
        """Whether the output is a directory of Parquet parts."""
        return self.path is not None and not Path(self.path).suffix


@dataclass(frozen=True)
class Embedded:
    """The in-process runner."""

    @property
    def engine(self) -> Engine:
        return Engine.EMBEDDED


@dataclass(frozen=True)
class Dask:
    """The Dask runner (:mod:`dpcount.keyed.runners.dask`): ``scheduler`` None starts a
    LocalCluster of ``workers`` processes; an address or a ``distributed.Client``
    joins a cluster; ``partitions``: the input's partitions (default: its own)."""

    scheduler: Any = None
    workers: int = 2
    partitions: int | None = None

    def __post_init__(self) -> None:
        _optional_int("workers", self.workers, 1)
        _optional_int("partitions", self.partitions, 1)

    @property
    def engine(self) -> Engine:
        return Engine.DASK


@dataclass(frozen=True)
class Spark:
    """The Spark runner (:mod:`dpcount.keyed.runners.spark`): ``master`` a master URL
    (default ``"local[2]"``) or a ``SparkSession``; ``partitions``: input splits."""

    master: Any = None
    partitions: int | None = None

    def __post_init__(self) -> None:
        _optional_int("partitions", self.partitions, 1)

    @property
    def engine(self) -> Engine:
        return Engine.SPARK


Runner = Embedded | Dask | Spark


@dataclass(frozen=True)
class KeyedSpec:
    """A run's public configuration: what its secret file records, fixed before any
    secret exists (:func:`build_spec`). ``derived``: the parameters read off the events
    (not private)."""

    columns: EventColumns
    universe: KeyUniverse
    buckets: TimeBuckets
    mechanism: KeyedMechanism
    max_weight: float
    max_keys: int | None
    run_bound: RunBound | None = None
    selection: SelectionPlan | None = None
    late: Late = Late.REFUSE
    derived: tuple[str, ...] = field(default=(), compare=False)

    def config(self) -> dict[str, Any]:
        """What the run's secret file records (a secret serves one configuration)."""
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


# --- policy: the mechanism of "auto" ------------------------------------------------

#: the owner name for Budget.resolve (messages; the choice calibrates to a participation
#: schema: the keyed counting mechanism is a registry mechanism calibrated to it)
_CHOOSE = "keyed.spec.choose_mechanism"
accept_participation(_CHOOSE)


@refuses_loose_budget()
def choose_mechanism(
    horizon: int, *, budget: Budget, l1_step: float, l2_step: float
) -> tuple[str, dict[str, Any], str | None]:
    """The plan's best mechanism for a keyed run: (registry name, options, calibration).

    The library's one choice, :func:`dpcount.analysis.choice.choose` (``auto``, as
    ``dpcount count`` and :func:`dpcount.frame.private_counts` resolve it), for
    ``budget`` (its noise kind, default exact discrete Laplace; its participation
    schema) with the step sensitivity that noise family is calibrated to (Δ₂ =
    ``l2_step`` for the Gaussian kinds, Δ₁ = ``l1_step`` for the Laplace kinds): within
    one family every candidate's MSE scales with that Δ² (at unit-step level with
    Laplace noise and a δ, Theorem 3 also reads Δ₂, so the ranking is that of Δ₁ = Δ₂
    — the chosen mechanism is then calibrated exactly). The choice reads only public
    parameters.
    """
    from dpcount.analysis.choice import choose

    resolved = keyed_budget(Budget.check(budget, owner=_CHOOSE), _CHOOSE)
    assert resolved.noise is not None
    step = l2_step if resolved.noise.is_gaussian else l1_step
    # the choice as before 0.4: for the kind's step sensitivity, without a calibration rule
    choice = choose(horizon, budget=resolved.replace(step_sensitivity=step, calibration=None))
    rule = choice.budget.calibration
    return choice.mechanism, dict(choice.options), None if rule is None else str(rule)


# --- building the spec ------------------------------------------------------------


def _universe(keys: Keys, key_values: pd.Series | None, prior: Sequence[Any]) -> KeyUniverse:
    if keys.universe is None:
        return open_universe(keys.selection, key_values, prior)
    if keys.selection is not None:
        raise ValueError(
            "selection= chooses the released keys from the data: with a public key "
            "universe (keys=) every key is released; pass keys=None for an open key set"
        )
    u = keys.universe
    if isinstance(u, KeyUniverse):  # a keys file's, without its keys (keyed.keys)
        return u
    if isinstance(u, (str, os.PathLike)):  # keyed_counts reads a keys file once, on entry
        raise TypeError(f"keys: read the keys file {u} first (dpcount.keyed.io.read_keys)")
    return KeyUniverse(u)


def open_universe(
    selection: KeySelection | None, key_values: pd.Series | None, prior: Sequence[Any] = ()
) -> KeyUniverse:
    """The universe of an open key set while its events are read: the key table of the
    earlier runs (``prior``), then the other distinct keys of the events, sorted so that
    it does not depend on row order. Keys are one key when equal as numbers or as
    their canonical text (:func:`dpcount.keyed.ids.open_keys`: integers while every
    key column and the stored table are integers, else canonical text). The keys that
    get a bounded contribution then get their noise positions
    (:func:`~dpcount.keyed.job.place_keys`)."""
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


def _buckets(steps: Steps, times: pd.Series) -> tuple[TimeBuckets, int, list[str]]:
    """The time buckets and the horizon (from ``times`` where omitted: ``derived``)."""
    derived = []
    if steps.start is None:
        buckets = TimeBuckets.from_data(steps.step, times)
        derived.append("start")
    else:
        buckets = TimeBuckets.make(steps.step, steps.start)
    horizon = steps.horizon
    if horizon is None:
        horizon = max(buckets.last_step(times), 1)
        derived.append("horizon")
    buckets.check_horizon(horizon)
    return buckets, int(horizon), derived


@dataclass(frozen=True)
class _Sensitivity:
    """One step's sensitivity (ℓ₁, ℓ₂ across keys), the neighbouring relation, the
    participation schema and a key's total (for key selection)."""

    l1: float
    l2: float
    relation: str
    run_bound: RunBound | None = None
    schema: Participation | None = None
    per_key_total: float = 1.0
    units: int = 1


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


def _check_units(bounds: Bounds, columns: EventColumns) -> None:
    if bounds.max_keys is not None and columns.unit is None:
        raise ValueError("max_keys needs a unit column (unit_column=...)")
    if bounds.scope is UnitScope.RUN and columns.unit is None:
        raise ValueError("unit_scope='run' needs a unit column (unit_column=...)")
    if columns.unit is None:
        return
    m = bounds.max_keys
    if m is None:
        raise ValueError("a unit column needs max_keys (keys per unit and step)")
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"max_keys must be a positive integer, got {m!r}")


def _sensitivity(
    bounds: Bounds, columns: EventColumns, weight: float, horizon: int, selecting: bool
) -> _Sensitivity:
    """The per-step sensitivity of the bounds (:mod:`dpcount.keyed.engine`'s module
    docstring; over the run: :meth:`~dpcount.keyed.bounds.RunBound.step_bounds`)."""
    _check_units(bounds, columns)
    m = bounds.max_keys
    if columns.unit is None or m is None:
        return _Sensitivity(
            float(weight), float(weight), _event_level(weight), per_key_total=weight
        )
    if bounds.scope is UnitScope.RUN:
        gap = 1 if bounds.min_separation is None else bounds.min_separation
        bound = RunBound(m, bounds.max_steps, gap, weight)
        l1, l2 = bound.step_bounds()
        return _Sensitivity(
            l1,
            l2,
            bound.describe(horizon),
            bound,
            bound.participation(horizon),
            bound.per_key_total(horizon),
            m,
        )
    if selecting:
        raise ValueError(
            "selection= needs a bound on each unit's keys over the whole run: pass "
            "unit_scope='run' (max_keys then counts keys over the run, not per step)"
        )
    return _Sensitivity(
        m * weight, math.sqrt(m) * weight, _unit_level(m, weight), per_key_total=weight
    )


def key_block(n_keys: int) -> int:
    """The PRF key block of a public universe of ``n_keys`` keys (at most 1024)."""
    return 1 << min(10, max(0, (n_keys - 1).bit_length()))


def _mechanism(
    counting: Counting, budget: Budget, horizon: int, s: _Sensitivity, n_keys: int, block: int
) -> KeyedMechanism:
    """The counting mechanism calibrated to ``s`` (``"auto"``: the plan's choice,
    :func:`choose_mechanism`)."""
    name = counting.mechanism
    options: dict[str, Any] = {"k": counting.k, "subtract": counting.subtract}
    scheduled = budget.replace(participation=s.schema)
    if name == "auto":
        name, options, rule = choose_mechanism(
            horizon, budget=scheduled, l1_step=s.l1, l2_step=s.l2
        )
        if budget.calibration is None and rule is not None:
            scheduled = scheduled.replace(calibration=rule)
    mech = KeyedMechanism(
        n_keys=n_keys,
        horizon=horizon,
        mechanism=name,
        budget=scheduled,
        l1_step=float(s.l1),
        l2_step=float(s.l2),
        neighbouring=s.relation,
        key_block=block,
        **options,
    )
    mech.counting  # noqa: B018  (validates the budget before a secret file is created)
    return mech


def build_spec(
    columns: EventColumns,
    keys: Keys,
    steps: Steps,
    *,
    counting: Counting,
    bounds: Bounds,
    late: Late = Late.REFUSE,
    times: pd.Series,
    key_values: pd.Series | None = None,
    prior_keys: Sequence[Any] = (),
) -> KeyedSpec:
    """The run's public configuration from its groups (``times``: every event time, or
    their extremes, for an omitted start or horizon; ``key_values``: an open key set's
    candidates; ``prior_keys``: the key table of earlier runs, positions kept)."""
    budget = keyed_budget(counting.budget, "keyed_counts")
    assert budget.noise is not None  # keyed_budget gives it its default
    universe = _universe(keys, key_values, prior_keys)
    buckets, horizon, derived = _buckets(steps, times)
    weight = check_max_weight(bounds.max_weight, budget.noise.is_discrete)
    s = _sensitivity(bounds, columns, weight, horizon, keys.selection is not None)
    block = OPEN_KEY_BLOCK if keys.open else key_block(len(universe))
    mech = _mechanism(counting, budget, horizon, s, len(universe), block)
    plan = None
    if keys.selection is not None:
        plan = SelectionPlan.make(
            keys.selection, mech, per_key_total=s.per_key_total, max_keys=s.units, buckets=buckets
        )
    return KeyedSpec(
        columns,
        universe,
        buckets,
        mech,
        weight,
        bounds.max_keys,
        s.run_bound,
        plan,
        Late.parse("late", late),
        tuple(derived),
    )


# --- the 0.4 keyword spelling ----------------------------------------------------

#: keyed_counts' 0.4 keywords of each group (not the Budget's fields given loose: 0.4
#: deprecated them, 0.5 removed them; ``budget=`` is required)
_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "columns": ("time_column", "key_column", "weight_column", "unit_column"),
    "keys": ("keys", "selection"),
    "steps": ("step", "start", "horizon"),
    "counting": ("budget", "mechanism", "k", "subtract"),
    "bounds": ("max_weight", "max_keys", "unit_scope", "max_steps", "min_separation"),
    "window": ("state", "until", "late", "allowed_lateness"),
    "output": ("output", "time_label", "chunk_keys", "std_digits", "on_chunk", "sink", "progress"),
    "runner": ("engine", "partitions", "scheduler", "workers", "master"),
}
_LOOSE_BUDGET = ("epsilon", "delta", "noise", "calibration")
_REQUIRED = ("keys", "time_column", "key_column", "step", "secret", "budget")


def _runner(engine: object, partitions: Any, scheduler: Any, workers: Any, master: Any) -> Runner:
    """The runner of the 0.4 keywords (an engine's option given to another is refused)."""
    kind = Engine.parse("engine", engine)
    if master is not None and kind is not Engine.SPARK:
        raise ValueError(f"master= is a Spark option: it needs engine='spark', not {engine!r}")
    if scheduler is not None and kind is not Engine.DASK:
        raise ValueError(f"scheduler= is a Dask option: it needs engine='dask', not {engine!r}")
    if kind is Engine.DASK:
        return Dask(scheduler, 2 if workers is None else workers, partitions)
    if kind is Engine.SPARK:
        return Spark(master, partitions)
    return Embedded()


def from_keywords(**kw: Any) -> dict[str, Any]:
    """keyed_counts' groups from its 0.4 keywords (``keys=``, ``time_column=``, ...,
    ``engine=``, ``budget=``): a dict of ``secret`` and the groups, for
    ``keyed_counts(events, **from_keywords(...))``. An unknown keyword is a TypeError
    naming it; the budget's fields given loose (``epsilon=``, ...; removed in 0.5) are
    one naming ``budget=Budget(...)``."""
    Budget.refuse_loose("keyed_counts", {n: kw[n] for n in _LOOSE_BUDGET if n in kw})
    for name in _REQUIRED:
        if name not in kw:
            raise TypeError(f"keyed_counts() missing required keyword argument {name!r}")
    known = {name for names in _KEYWORDS.values() for name in names}
    unknown = sorted(set(kw) - known - {"secret"})
    if unknown:
        raise TypeError(f"keyed_counts() got an unexpected keyword argument {unknown[0]!r}")
    budget = Budget.check(kw["budget"], owner="keyed_counts")
    g = {name: {n: kw[n] for n in names if n in kw} for name, names in _KEYWORDS.items()}
    c = g["columns"]
    r = g["runner"]
    counting = {**g["counting"], "budget": budget}
    return {
        "columns": EventColumns(
            c["time_column"], c["key_column"], c.get("weight_column"), c.get("unit_column")
        ),
        "keys": Keys(g["keys"].get("keys"), g["keys"].get("selection")),
        "steps": Steps(**g["steps"]),
        "secret": kw["secret"],
        "counting": Counting(**counting),
        "bounds": Bounds(**{_BOUND_NAMES.get(n, n): v for n, v in g["bounds"].items()}),
        "window": Window(**g["window"]),
        "runner": _runner(
            r.get("engine", "embedded"),
            r.get("partitions"),
            r.get("scheduler"),
            r.get("workers"),
            r.get("master"),
        ),
        "output": Output(**{_OUTPUT_NAMES.get(n, n): v for n, v in g["output"].items()}),
    }


_BOUND_NAMES = {"unit_scope": "scope"}
_OUTPUT_NAMES = {"output": "path"}


def to_keywords(groups: Mapping[str, Any]) -> dict[str, Any]:
    """The 0.4 keywords of the groups (for :func:`~dpcount.keyed.incremental.run_incremental`,
    which takes them loose): the inverse of :func:`from_keywords`."""
    c: EventColumns = groups["columns"]
    keys: Keys = groups["keys"]
    steps: Steps = groups["steps"]
    counting: Counting = groups["counting"]
    bounds: Bounds = groups["bounds"]
    runner: Runner = groups["runner"]
    out: Output = groups["output"]
    return {
        "time_column": c.time, "key_column": c.key, "weight_column": c.weight,
        "unit_column": c.unit, "keys": keys.universe, "selection": keys.selection,
        "step": steps.step, "start": steps.start, "horizon": steps.horizon,
        "budget": counting.budget, "mechanism": counting.mechanism, "k": counting.k,
        "subtract": counting.subtract, "max_weight": bounds.max_weight,
        "max_keys": bounds.max_keys, "unit_scope": str(bounds.scope),
        "max_steps": bounds.max_steps, "min_separation": bounds.min_separation,
        "secret": groups["secret"], "engine": str(runner.engine),
        **{n: getattr(runner, n) for n in ("partitions", "scheduler", "workers", "master")
           if hasattr(runner, n)},
        "chunk_keys": out.chunk_keys, "std_digits": out.std_digits, "progress": out.progress,
    }  # fmt: skip
