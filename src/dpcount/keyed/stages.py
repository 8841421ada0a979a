"""The stages every runner schedules, as pure functions of their inputs in the shape of
a combine: bound and sum one input partition (:func:`bound_partition`, split into shards
of contiguous key chunks by :func:`prepare_split`), merge partial sums and finish the
unit bounds (:func:`merge_partials`), place an open key set's keys and regroup a shard by
position, select the keys of a shard, and release consecutive key chunks of a shard
(:meth:`~dpcount.keyed.engine.KeyedMechanism.release_with_state`: every noise sample a pure
function of (secret, configuration, key, position), never of a partition or a worker).

A shard is ``(contributions, drop report)`` of the keys between two of
:func:`shard_edges`' edges. The runners differ only in where these run and how their
results travel (:mod:`dpcount.keyed.runners.dask`, :mod:`dpcount.keyed.runners.spark`).
Every stage reads a :class:`KeyedJob` (a run's spec, secret and window), defined here
beside them; :mod:`dpcount.keyed.job` builds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.bounds import RunBound, UnitLedger, bound_units_run, rank_pairs, unit_pairs
from dpcount.keyed.engine import KeyedMechanism, chunk_bounds, exact_running
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    StepWindow,
    TimeBuckets,
    bound_units,
    check_running,
    clip_events,
    map_events,
    parse_times,
    partial_sums,
    to_contributions,
)
from dpcount.keyed.prf import PRFKey
from dpcount.keyed.secret import Label, MacLabel, RunSecret
from dpcount.keyed.selection import SelectionPlan, select_keys
from dpcount.keyed.spec import KeyedSpec

_T = TypeVar("_T")


class _FromSpec(Generic[_T]):
    """A read-only attribute of a :class:`KeyedJob`: its spec's attribute of the same name."""

    name: str

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, job: None, owner: type) -> _FromSpec[_T]: ...
    @overload
    def __get__(self, job: KeyedJob, owner: type) -> _T: ...
    def __get__(self, job: KeyedJob | None, owner: type) -> _T | _FromSpec[_T]:
        if job is None:
            return self
        value: _T = getattr(job.spec, self.name)
        return value


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

    columns = _FromSpec[EventColumns]()
    universe = _FromSpec[KeyUniverse]()
    buckets = _FromSpec[TimeBuckets]()
    mechanism = _FromSpec[KeyedMechanism]()
    max_weight = _FromSpec[float]()
    max_keys = _FromSpec[int | None]()
    run_bound = _FromSpec[RunBound | None]()
    """A unit's bound over the whole run (``Bounds(scope="run")``; None: per step)."""
    selection = _FromSpec[SelectionPlan | None]()
    """Private key selection (open key set; :mod:`dpcount.keyed.selection`)."""
    late = _FromSpec[str]()
    """What events of already released steps do (:mod:`dpcount.keyed.watermark`)."""

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


class Carry(Protocol):
    """What :func:`hand_out` fills of a :class:`dpcount.keyed.job.Carry`: each key's
    noise state after the window (None: the mechanism keeps none)."""

    @property
    def buffers(self) -> NDArray[Any] | None: ...


__all__ = [
    "NOT_COUNTED",
    "WIRE_TYPES",
    "KeyedJob",
    "Narrowed",
    "bound_partition",
    "check_shard",
    "concat_shards",
    "first_steps",
    "hand_out",
    "join_placed",
    "merge_partials",
    "narrowed",
    "pair_spans",
    "place_split",
    "plan_release",
    "prepare_split",
    "rank_span",
    "release_chunks",
    "release_task",
    "renumber",
    "scan_partition",
    "select_shard",
    "shard_edges",
    "shard_first_steps",
]


def bound_partition(
    job: KeyedJob, frame: pd.DataFrame, source: str | None = None
) -> tuple[pd.DataFrame, DropReport]:
    """Stage 1 (map): one partition of events mapped to (key index, step) — late events
    refused or moved, events outside the window dropped and reported — clipped per event
    (event level), and summed per (key, step), or per (unit, step, key) for unit bounds
    (``source``: its file, for error messages)."""
    m = job.mechanism
    rows, report = map_events(
        frame,
        job.columns,
        job.universe,
        job.buckets,
        StepWindow(m.horizon, job.first, job.last, job.late),
        integer=job.integer,
        source=source,
    )
    if job.max_keys is None:
        rows, clipped = clip_events(rows, job.max_weight)
        report = report + clipped
    return partial_sums(rows, by_unit=job.max_keys is not None), report


def merge_partials(
    job: KeyedJob, partials: Sequence[pd.DataFrame], ranks: pd.DataFrame | None = None
) -> tuple[Contributions, DropReport, UnitLedger | None]:
    """Stage 2 (combine): partial sums of any partitioning merged (integer sums do not
    depend on it) and the unit bounds finished — per step, or over the run continuing
    ``job.ledger`` — into the contributions, their report and the unit ledger after this
    run's steps (None without run-level bounds). A unit's keys must be merged together.
    ``ranks``: run-level bounds' tie-breaks of every (unit, key) pair, ranked by key
    span where the names are (:func:`rank_span`); None: ranked here."""
    rows = pd.concat(list(partials), ignore_index=True) if partials else None
    dtype = np.int64 if job.integer else np.float64
    ledger = None if job.run_bound is None else (job.ledger or UnitLedger.empty())
    if rows is None or rows.empty:
        empty = np.zeros(0, dtype=np.int64)
        return Contributions(empty, empty, np.zeros(0, dtype=dtype)), DropReport(), ledger
    report = DropReport()
    if job.run_bound is not None:
        rows, report, ledger = bound_units_run(
            rows,
            job.run_bound,
            hash_key=job.hash_key,
            keys=job.universe.keys,
            ledger=job.ledger,
            ranks=ranks,
        )
    elif job.max_keys is not None:
        rows, report = bound_units(
            rows, max_keys=job.max_keys, max_weight=job.max_weight, hash_key=job.hash_key
        )
    return to_contributions(rows, dtype, job.universe.keys), report, ledger


def pair_spans(partial: pd.DataFrame, cuts: Sequence[int]) -> list[pd.DataFrame]:
    """Run-level bounds, the ranking of a keys file's pairs (map): one partition's
    distinct (unit, key) pairs (:func:`~dpcount.keyed.bounds.unit_pairs`) split by the
    key spans between ``cuts``."""
    pairs = unit_pairs(partial)
    span = np.searchsorted(np.asarray(cuts[1:-1]), pairs["key"].to_numpy(), side="right")
    return [pairs[span == s] for s in range(len(cuts) - 1)]


def rank_span(job: KeyedJob, *pieces: pd.DataFrame) -> pd.DataFrame:
    """Run-level bounds, the ranking of a keys file's pairs (reduce): the pairs of one
    key span from every partition, each with its tie-break rank
    (:func:`~dpcount.keyed.bounds.rank_pairs`; the names of the span's keys read from
    the file's blocks holding them — never the whole file in one task)."""
    if not pieces:
        pairs = unit_pairs(pd.DataFrame({"unit": [], "key": []}))
    else:
        pairs = pd.concat(list(pieces), ignore_index=True).drop_duplicates(ignore_index=True)
    return rank_pairs(pairs, job.universe.keys, job.hash_key)


#: :func:`first_steps` of a key without a counted contribution
NOT_COUNTED = np.iinfo(np.int64).max


def first_steps(contributions: Contributions, lo: int, hi: int) -> NDArray[np.int64]:
    """Stage 3 (select, its placement): the step of the first counted contribution of
    each key lo..hi − 1 (of a universe index; :data:`NOT_COUNTED` for none)."""
    out = np.full(hi - lo, NOT_COUNTED, dtype=np.int64)
    part = contributions.for_keys(lo, hi)
    np.minimum.at(out, part.key - lo, part.step)
    return out


def renumber(contributions: Contributions, position: NDArray[np.int64]) -> Contributions:
    """The contributions with each key renamed to its ``position``, sorted by (key, step)."""
    key = position[contributions.key]
    order = np.lexsort((contributions.step, key))
    return Contributions(key[order], contributions.step[order], contributions.value[order])


def release_task(
    mechanism: KeyedMechanism,
    secret: PRFKey,
    contributions: Contributions,
    lo: int,
    hi: int,
    window: tuple[int, int],
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    keep_state: bool,
    writer: Any = None,
    keys: Sequence[Any] = (),
) -> tuple[NDArray[Any] | None, NDArray[Any] | None]:
    """One key chunk. The task carries the mechanism, the secret, the chunk's noise state
    (``buffers``) and (to write its own part file) the chunk's keys — never the whole key
    universe. Returns the counts (or None after writing them with ``writer``;
    ``writer=False``: not written) and the chunk's noise state after the window (None
    unless ``keep_state`` and the mechanism keeps one)."""
    first, last = window
    values, ends = mechanism.release_with_state(
        secret,
        contributions,
        lo,
        hi,
        first=first,
        last=last,
        base=base,
        noise_state=buffers,
        keep_state=keep_state,
    )
    if writer is None:
        return values, ends
    if writer is not False:
        writer.write(lo, values, keys)
    return None, ends


#: the integer types released counts travel in from a worker, narrowest first
WIRE_TYPES: tuple[type[np.signedinteger[Any]], ...] = (np.int8, np.int16, np.int32)


@dataclass(frozen=True)
class Narrowed:
    """Integer counts in the narrowest of :data:`WIRE_TYPES` that holds every one of
    them (``values``), and their own type (``dtype``): what a release task sends back to
    the client or driver instead of the counts themselves. The counts of 10^5 keys x
    10^3 steps are 800 MB as int64; a tree's discrete Laplace counts fit int16 (200 MB),
    and moving the bytes (pickling, the socket, unpickling) was half of a Dask run's
    CPU when the counts went to the client. Lossless: :meth:`widened` gives back the
    same values in the same type."""

    values: NDArray[np.signedinteger[Any]]
    dtype: np.dtype[Any]

    def widened(self) -> NDArray[Any]:
        """The counts in their own type."""
        return self.values.astype(self.dtype)


def narrowed(values: NDArray[Any] | None) -> NDArray[Any] | Narrowed | None:
    """``values`` as :class:`Narrowed` when they are integers that a narrower type of
    :data:`WIRE_TYPES` holds (one pass each for the least and the greatest); otherwise
    (None, floating-point counts, empty, or too wide) unchanged."""
    if values is None or values.dtype.kind != "i" or values.size == 0:
        return values
    least, greatest = int(values.min()), int(values.max())
    for wire in WIRE_TYPES:
        info = np.iinfo(wire)
        if info.bits >= 8 * values.itemsize:
            break
        if info.min <= least and greatest <= info.max:
            return Narrowed(values.astype(wire), values.dtype)
    return values


def release_chunks(
    job: KeyedJob,
    shard: tuple[Contributions, DropReport],
    chunks: Sequence[tuple[int, int, bool]],
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    writer: Any = None,
    *,
    wire: bool = False,
) -> list[tuple[int, NDArray[Any] | Narrowed | None, NDArray[Any] | None]]:
    """The embedded engine on consecutive key chunks of one shard, on the worker that
    holds the shard: for each chunk (lo, hi, write), (lo, counts or None once written by
    ``writer``, its noise state after the window). ``write`` False: computed for its
    noise state only (its part exists). ``base``, ``buffers``: of the keys from the
    first chunk's lo to the last chunk's hi. ``wire``: the counts go to another process,
    each chunk's :func:`narrowed` as soon as it is released (:func:`hand_out` widens
    them)."""
    contributions = shard[0]
    origin = chunks[0][0]
    noise_key = job.secret.prf(Label.NOISE)  # derived once per task, not per chunk
    out: list[tuple[int, NDArray[Any] | Narrowed | None, NDArray[Any] | None]] = []
    for lo, hi, write in chunks:
        own = slice(lo - origin, hi - origin)
        values, ends = release_task(
            job.mechanism,
            noise_key,
            contributions.for_keys(lo, hi),
            lo,
            hi,
            (job.first, job.until),
            None if base is None else base[own],
            None if buffers is None else buffers[:, own],
            job.keep_state,
            *((False,) if not write else ()),  # its counts are not handed out
            *((writer, job.universe.keys[lo:hi]) if writer is not None and write else ()),
        )
        out.append((lo, narrowed(values) if wire else values, ends))
    return out


def shard_edges(n_keys: int, chunk_keys: int, shards: int) -> list[int]:
    """Key edges of ``shards`` contiguous shards made of whole key chunks.

    A shard is a function of the key index alone (never of the input partition): its
    keys' noise is computed where the shard lies, by the same pure function of (secret,
    configuration, key, position) as anywhere else. Contiguous ranges of whole chunks
    rather than a hash of each key: the PRF computes noise for aligned blocks of
    ``key_block`` keys, so scattering a block's keys over shards would make every
    worker compute every block."""
    starts = [lo for lo, _ in chunk_bounds(n_keys, chunk_keys)]
    count = max(1, min(shards, len(starts)))
    # ``count`` shards whose chunk counts differ by at most one (49 chunks in 8 shards:
    # 6 or 7 each; a fixed ceil(49 / 8) = 7 per shard made 7 shards, 4 on one worker of
    # two and 3 on the other, which then idled for a shard's time)
    return [*(starts[i * len(starts) // count] for i in range(count)), n_keys]


def prepare_split(
    job: KeyedJob, frame: pd.DataFrame, edges: Sequence[int]
) -> tuple[list[pd.DataFrame], DropReport]:
    """One input partition mapped, clipped and summed (:func:`bound_partition`), its
    partial sums split by shard (``edges``: the shards' key edges)."""
    rows, report = bound_partition(job, frame)
    if len(edges) == 2:
        return [rows], report
    shard = np.searchsorted(np.asarray(edges[1:-1]), rows["key"].to_numpy(), side="right")
    order = np.argsort(shard, kind="stable")
    cuts = np.searchsorted(shard[order], np.arange(1, len(edges) - 1))
    return [rows.iloc[part] for part in np.split(order, cuts)], report


def check_shard(
    job: KeyedJob, shard: tuple[Contributions, DropReport], base: NDArray[Any] | None
) -> None:
    """:func:`check_running` on one shard (no stored state: ``base`` is None)."""
    check_running(shard[0], base, job.universe.keys, job.first, job.until)


def shard_first_steps(
    shard: tuple[Contributions, DropReport], lo: int, hi: int
) -> NDArray[np.int64]:
    """The first counted step of each key [lo, hi) of one shard (8 bytes per key)."""
    return first_steps(shard[0], lo, hi)


def place_split(
    shard: tuple[Contributions, DropReport], position: NDArray[np.int64], edges: Sequence[int]
) -> list[Contributions]:
    """One shard's contributions with keys renamed to their positions in the key table
    (:func:`renumber`), split by the placed shards' key ``edges``."""
    placed = renumber(shard[0], position)
    cuts = np.searchsorted(placed.key, edges[1:-1])
    return [
        Contributions(k, s, v)
        for k, s, v in zip(
            np.split(placed.key, cuts),
            np.split(placed.step, cuts),
            np.split(placed.value, cuts),
            strict=True,
        )
    ]


def join_placed(*pieces: Contributions) -> tuple[Contributions, DropReport]:
    """One placed shard: its pieces from every shard, sorted by (key, step) (each key
    lies in one piece; the reports were gathered from the shards before placement)."""
    joined = concat_shards(pieces)
    order = np.lexsort((joined.step, joined.key))
    return Contributions(joined.key[order], joined.step[order], joined.value[order]), DropReport()


def select_shard(
    job: KeyedJob, shard: tuple[Contributions, DropReport], lo: int, hi: int, chunk_keys: int
) -> NDArray[np.int64]:
    """Key selection of the keys [lo, hi) of one placed shard: their selection steps
    (:func:`~dpcount.keyed.selection.select_keys` on the shard's contributions; the
    other keys have none, so it skips their chunks)."""
    selected, _, _ = select_keys(job, shard[0], chunk_keys)
    return selected[lo:hi]


def concat_shards(shards: Sequence[Contributions]) -> Contributions:
    """Shards in key order: the whole run's contributions, sorted by (key, step)."""
    return Contributions(
        np.concatenate([c.key for c in shards]),
        np.concatenate([c.step for c in shards]),
        np.concatenate([c.value for c in shards]),
    )


def scan_partition(
    frame: pd.DataFrame, time: str | None, key: str | None
) -> tuple[pd.Series, pd.Series]:
    """One partition's earliest and latest times (``time``) and distinct keys (``key``;
    an open key set's candidates), for what the job needs before the events are read."""
    times = pd.Series([], dtype=np.int64) if time is None else _time_extremes(frame, time)
    keys = pd.Series([], dtype=object) if key is None else pd.Series(pd.unique(frame[key]))
    return times, keys


def _time_extremes(frame: pd.DataFrame, column: str) -> pd.Series:
    times = parse_times(frame[column], column)
    return times.iloc[[int(times.argmin()), int(times.argmax())]] if len(times) else times


def plan_release(
    job: KeyedJob, parts: Any, carry: Carry | None, chunk_keys: int, time_label: str
) -> tuple[list[tuple[int, int, bool]], set[int], Any]:
    """The release's key chunks (lo, hi, write), the chunks not handed out, and the part
    writer (None: the counts go to the client or driver). A chunk is not written when its
    part exists (``parts``: the resumable output directory, or None) or no key of it is
    selected; it is then released for its noise state only, which a state needs
    (``carry``), and left out without one."""
    need_state = carry is not None and carry.buffers is not None
    parts = None if parts is None else parts.for_job(job)
    done = set() if parts is None else parts.open(job)

    def shown(lo: int, hi: int) -> bool:  # a key of the chunk is released
        return job.selected is None or bool((job.selected[lo:hi] <= job.until).any())

    chunks = [
        (lo, hi, lo not in done and shown(lo, hi))
        for lo, hi in chunk_bounds(job.mechanism.n_keys, chunk_keys)
        if need_state or (lo not in done and shown(lo, hi))
    ]
    quiet = {lo for lo, _, write in chunks if not write}
    writer = None if parts is None else parts.writer(job, time_label)
    return chunks, quiet, writer


def hand_out(
    got: Sequence[tuple[int, NDArray[Any] | Narrowed | None, NDArray[Any] | None]],
    n_keys: int,
    chunk_keys: int,
    carry: Carry | None,
    quiet: set[int],
    progress: Callable[[int, int], None] | None,
) -> Iterator[tuple[int, Any]]:
    """One release task's chunks (lo, counts or None once written, noise state) as the
    output takes them: each chunk's noise state into ``carry``; the chunks run for their
    noise state only (``quiet``) left out; ``progress`` called after each."""
    for lo, values, ends in got:
        hi = lo + min(chunk_keys, n_keys - lo)
        if carry is not None and carry.buffers is not None:
            carry.buffers[:, lo:hi] = ends
        if lo in quiet:  # run for its noise state only
            continue
        if isinstance(values, Narrowed):
            values = values.widened()
        yield lo, None if values is None else np.asarray(values)
        if progress is not None:
            progress(hi, n_keys)
