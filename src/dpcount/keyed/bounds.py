"""User-level contribution bounds over the whole run (``unit_scope="run"``).

The unit-step relation of :mod:`dpcount.keyed.events` protects one unit's events of
*one* step. Here two event logs differ in **all** the events of one privacy unit,
over the whole run, and each unit's contribution is bounded before counting:

* at most ``max_keys`` = m keys over the whole run: its first m keys in time (by the
  first step of each (unit, key), ties broken by a keyed hash of the unit and key
  names) — a choice that depends on the unit's own events only, not on row order,
  and on no later event, so a run split into several runs keeps the same keys;
* per (unit, key), at most ``max_steps`` = k steps, any two at least
  ``min_separation`` = b steps apart (the earliest steps, greedily: a step is kept if
  it is at least b after the last kept one; None: every step, k = T, b = 1);
* per (unit, key, step), at most ``max_weight`` = c (the excess is cut).

Across runs (``state=``, incremental runs) the rule continues where the last run
stopped: a :class:`UnitLedger` records, per unit, the (unit, key) pairs it kept, and
per pair the steps kept and the last of them, and is stored in the run's state
(:mod:`dpcount.keyed.state`: owner-only, authenticated, covered by the release mark).
Both rules are causal (a step's decision reads earlier steps only), so the runs
keep exactly what one run over all the steps keeps.

Every removed contribution is counted in the :class:`~dpcount.keyed.events.DropReport`
(``unit_dropped_keys``, ``unit_dropped_steps``, ``clipped_events``, with their weights).
Bounding is per unit, so adding or removing one unit never changes what is kept of
another's events (what the neighbouring relation needs).

Sensitivity (what :func:`run_sensitivity` returns and the mechanisms calibrate to).
For a linear mechanism with encoder C (T′ × T, the same for every key) the perturbed
matrix is C·X, X the (T × keys) matrix of contributions. A unit changes X by
Δ = Σ_{j∈K_u} Δ_j e_jᵀ over |K_u| ≤ m keys, and each column Δ_j is a scalar stream
that differs in ≤ k steps b apart, each by ≤ c: a neighbour of the single-stream
(k, b)-participation relation (:class:`~dpcount.privacy.Participation`) scaled by c.
With s₁, s₂ the mechanism's own ℓ₁, ℓ₂ sensitivities under that schema for unit
steps (never below the truth; :mod:`dpcount.counting.participation`):

* ℓ₁: ‖CΔ‖₁ = Σ_j ‖CΔ_j‖₁ ≤ m·c·s₁;
* ℓ₂ (Frobenius): ‖CΔ‖₂² = Σ_j ‖CΔ_j‖₂² ≤ m·c²·s₂², so ‖CΔ‖₂ ≤ √m·c·s₂.

These are exactly the values the single-stream mechanism calibrates to with the
schema (k, b), ``step_sensitivity`` m·c and ``step_l2_sensitivity`` √m·c (its
calibration multiplies its schema sensitivities by the step bounds), so the keyed
engine runs the registry mechanism with those settings and no norm is re-derived here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount._validate import check_integer
from dpcount.keyed.events import I64, DropReport, _clip, partial_sums
from dpcount.keyed.ids import ids_as_text, key_texts, unit_ids, unit_texts
from dpcount.keyed.keys import KeyNames
from dpcount.privacy.budget import Participation

__all__ = [
    "RunBound",
    "UnitLedger",
    "bound_units_run",
    "greedy_separated",
    "rank_pairs",
    "unit_pairs",
]


@dataclass(frozen=True)
class RunBound:
    """A unit's contribution bound over the whole run.

    Attributes:
        max_keys: m ≥ 1, keys per unit over the whole run.
        max_steps: k ≥ 1 steps per (unit, key), or None for every step (k = T).
        min_separation: b ≥ 1, the least gap between two kept steps of a (unit, key).
        max_weight: c > 0, a unit's total per (unit, key, step).
    """

    max_keys: int
    max_steps: int | None
    min_separation: int
    max_weight: float

    def __post_init__(self) -> None:
        check_integer("max_keys", self.max_keys, ge=1)
        if self.max_steps is not None:
            check_integer("max_steps", self.max_steps, ge=1)
        check_integer("min_separation", self.min_separation, ge=1)
        if self.max_steps is None and self.min_separation != 1:
            raise ValueError(
                f"min_separation={self.min_separation} needs max_steps (without it a unit "
                "may contribute to every step of a key)"
            )

    def participation(self, horizon: int) -> Participation:
        """The per-key schema (k, b); k = T when ``max_steps`` is None."""
        schema = Participation(
            horizon if self.max_steps is None else self.max_steps, self.min_separation
        )
        schema.check_horizon(horizon)
        return schema

    def per_key_total(self, horizon: int) -> float:
        """The most one unit adds to one key's running count over the run: k·c."""
        return self.participation(horizon).max_participations * self.max_weight

    def step_bounds(self) -> tuple[float, float]:
        """(ℓ₁, ℓ₂) bound of one step's change across keys: (m·c, √m·c)."""
        return self.max_keys * self.max_weight, math.sqrt(self.max_keys) * self.max_weight

    def describe(self, horizon: int) -> str:
        schema = self.participation(horizon)
        l1, l2 = self.step_bounds()
        return (
            f"user-level over the whole run: logs differ in all the events of one privacy "
            f"unit; each unit keeps <= {self.max_keys} keys over the run, <= "
            f"{schema.max_participations} steps per key at least {schema.min_separation} "
            f"apart, <= {self.max_weight:g} per key and step; per key the "
            f"({schema.max_participations}, {schema.min_separation})-participation schema "
            f"with step bounds l1 = {l1:g}, l2 = sqrt({self.max_keys})*{self.max_weight:g}"
            f" = {l2:.6g} across keys"
        )

    def config(self) -> dict[str, object]:
        return {
            "unit_scope": "run",
            "max_steps": self.max_steps,
            "min_separation": self.min_separation,
        }


@dataclass(frozen=True)
class UnitLedger:
    """What each unit has used of its run-level bound in the released steps.

    One row per kept (unit, key) pair: ``unit`` (index into ``units``, the units' names
    as text), ``key`` (key index, the key's position in the run), ``steps`` (steps kept
    so far), ``last`` (the last kept step). A unit's used keys are its pairs.
    """

    units: tuple[str, ...]
    unit: I64
    key: I64
    steps: I64
    last: I64

    @classmethod
    def empty(cls) -> UnitLedger:
        none = np.zeros(0, dtype=np.int64)
        return cls((), none, none, none, none)

    def __len__(self) -> int:
        return len(self.unit)

    def frame(self) -> pd.DataFrame:
        names = np.asarray(self.units, dtype=object)
        return pd.DataFrame(
            {
                "utext": names[self.unit] if len(self.unit) else np.zeros(0, dtype=object),
                "key": self.key,
                "steps": self.steps,
                "last": self.last,
            }
        )

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> UnitLedger:
        """From columns utext, key, steps, last (sorted by unit name, then key)."""
        frame = frame.sort_values(["utext", "key"], kind="stable")
        units, unit = np.unique(
            frame["utext"].to_numpy(dtype=object).astype(str), return_inverse=True
        )
        return cls(
            tuple(str(u) for u in units),
            np.asarray(unit, dtype=np.int64).reshape(-1),
            frame["key"].to_numpy(np.int64),
            frame["steps"].to_numpy(np.int64),
            frame["last"].to_numpy(np.int64),
        )

    def canonical(self) -> UnitLedger:
        """The ledger with every unit under its canonical id (:func:`dpcount.keyed.ids.
        unit_text`): itself when they already are (every ledger this version writes); a
        ledger of dpcount 0.4 may hold ``"7"`` and ``"7.0"`` as two units. Units that
        become one are merged conservatively — the union of their keys (possibly more
        than ``max_keys``: no new key then), per key the sum of their steps (at least
        the merged unit's) and the latest last step — so the bound can only tighten."""
        names = np.asarray(self.units, dtype=object)
        texts = unit_texts(names) if len(names) else names
        if np.array_equal(texts, names):
            return self
        frame = self.frame()
        frame["utext"] = texts[self.unit] if len(self.unit) else frame["utext"]
        merged = frame.groupby(["utext", "key"], as_index=False, sort=False).agg(
            steps=("steps", "sum"), last=("last", "max")
        )
        return UnitLedger.from_frame(merged)

    def remap_keys(self, position: I64) -> UnitLedger:
        """The ledger with key index i renamed ``position``[i]."""
        return UnitLedger(self.units, self.unit, position[self.key], self.steps, self.last)


def _key_texts(values: Any) -> NDArray[Any]:
    """Key names as their canonical text (:mod:`dpcount.keyed.ids`): the tie-break
    hashes the same name whatever type a key was read as."""
    return key_texts(pd.Series(values, dtype=object))


def pair_rank(unit_text: NDArray[Any], key_text: NDArray[Any], hash_key: str) -> NDArray[np.uint64]:
    """Keyed hash (SipHash under ``hash_key``, from the secret) of the (unit, key) names:
    the tie-break among a unit's keys first seen at one step (order-free, and the same
    whatever positions the keys have)."""
    frame = pd.DataFrame({"unit": unit_text, "key": key_text})
    out: NDArray[np.uint64] = pd.util.hash_pandas_object(
        frame, index=False, hash_key=hash_key
    ).to_numpy()
    return out


def unit_pairs(per: pd.DataFrame) -> pd.DataFrame:
    """The distinct (unit, key) pairs of (unit, step, key, weight) rows, the unit as
    its canonical text (utext) as :func:`bound_units_run` names it: what
    :func:`rank_pairs` ranks."""
    if per.empty:
        return pd.DataFrame({"utext": np.zeros(0, dtype=object), "key": np.zeros(0, np.int64)})
    utext = ids_as_text(np.asarray(unit_ids(per["unit"])))
    pairs = pd.DataFrame({"utext": utext, "key": per["key"].to_numpy(np.int64)})
    return pairs.drop_duplicates(ignore_index=True)


def rank_pairs(pairs: pd.DataFrame, keys: Any, hash_key: str) -> pd.DataFrame:
    """Each (utext, key) pair with its tie-break rank (:func:`pair_rank` of the unit's
    text and the key's name): ``keys`` the key names by index (None: the indices; a
    keys file's :class:`~dpcount.keyed.keys.KeyNames` reads only the blocks of the
    pairs' keys)."""
    key_idx = pairs["key"].to_numpy(np.int64)
    if keys is None:
        names: Any = key_idx
    elif isinstance(keys, KeyNames):
        names = keys.take(key_idx)
    else:
        names = np.asarray(keys, dtype=object)[key_idx]
    rank = pair_rank(pairs["utext"].to_numpy(), _key_texts(names), hash_key)
    return pd.DataFrame({"utext": pairs["utext"].to_numpy(), "key": key_idx, "rank": rank})


def greedy_separated(
    group: I64,
    step: I64,
    k: int | None,
    b: int,
    *,
    used: I64 | None = None,
    after: I64 | None = None,
) -> NDArray[np.bool_]:
    """Rows kept by the greedy rule, for rows sorted by (group, step), steps distinct
    within a group: a group's first row is kept, then each next row whose step is at
    least ``b`` after the last kept one, up to ``k`` rows (None: no limit).

    Continuing earlier runs (groups numbered 0..G−1): group g has already kept
    ``used``[g] steps and may keep only steps ≥ ``after``[g] (its last kept step + b).

    Vectorized by pointer jumping: ``nxt[i]`` is the first row of i's group with step
    ≥ step[i] + b; the kept rows of a group are its first allowed row, nxt of it, and
    so on.
    """
    n = len(step)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    top = int(step.max()) if after is None else max(int(step.max()), int(after.max()))
    span = top + b + 1
    code = group.astype(np.int64) * span + step
    nxt = np.searchsorted(code, code + b, side="left")
    inside = nxt < n
    same = np.zeros(n, dtype=bool)
    same[inside] = group[nxt[inside]] == group[inside]
    nxt = np.where(same, nxt, -1)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    if after is not None:
        g = group[starts]
        found = np.searchsorted(code, g * span + after[g], side="left")
        ok = found < n
        ok[ok] = group[found[ok]] == g[ok]
        starts = found[ok]
    cur = starts
    rounds = 0
    while len(cur):
        if k is not None:
            spent = rounds if used is None else rounds + used[group[cur]]
            cur = cur[spent < k]
            if not len(cur):
                break
        keep[cur] = True
        cur = nxt[cur]
        cur = cur[cur >= 0]
        rounds += 1
    return keep


def bound_units_run(
    per: pd.DataFrame,
    bound: RunBound,
    *,
    hash_key: str,
    keys: Sequence[Any] | None = None,
    ledger: UnitLedger | None = None,
    ranks: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, DropReport, UnitLedger]:
    """Apply a :class:`RunBound` to (unit, step, key, weight) rows of the run's steps.

    ``per`` may hold several partial sums of one (unit, step, key); they are added
    first. ``keys``: the key names by key index (the tie-break hashes names; None: the
    indices). ``ledger``: what the units used in earlier runs (None: nothing).
    ``ranks``: the tie-break of every (unit, key) pair of ``per`` (columns utext, key,
    rank: :func:`unit_pairs` and :func:`rank_pairs`, computed elsewhere — by spans of
    a keys file, so that no task holds all its names); None: ranked here from ``keys``.
    Returns (key, step, weight) rows, the report of what was removed —
    ``unit_dropped_keys`` (rows of keys beyond ``max_keys``), ``unit_dropped_steps``
    (rows beyond ``max_steps`` or closer than ``min_separation``), ``clipped_events`` —
    and the ledger after these steps.
    """
    per = partial_sums(per.assign(unit=unit_ids(per["unit"])), by_unit=True)
    report = DropReport()
    ledger = UnitLedger.empty() if ledger is None else ledger.canonical()
    if per.empty:
        return pd.DataFrame({"key": [], "step": [], "weight": []}), report, ledger
    per["utext"] = ids_as_text(per["unit"].to_numpy())  # canonical ids already
    before = ledger.frame()
    # 1. keys: a unit's pairs of earlier runs stay; its new pairs fill the free slots in
    #    the order of their first step, then rank, then key (a causal rule)
    pairs = per.groupby(["utext", "key"], sort=False).agg(first=("step", "min")).reset_index()
    if ranks is None:
        pairs["rank"] = rank_pairs(pairs, keys, hash_key)["rank"].to_numpy()
    else:
        pairs = pairs.merge(ranks, on=["utext", "key"], how="left", validate="one_to_one")
        if pairs["rank"].isna().any():
            raise RuntimeError("a (unit, key) pair without its rank")
    pairs = pairs.merge(before, on=["utext", "key"], how="left")
    old = pairs["steps"].notna().to_numpy()
    used = before.groupby("utext").size()
    new = pairs[~old].sort_values(["utext", "first", "rank", "key"], kind="stable")
    slot = new.groupby("utext", sort=False).cumcount().to_numpy() + new["utext"].map(used).fillna(
        0
    ).to_numpy(np.int64)
    chosen = pd.concat([pairs[old], new[slot < bound.max_keys]], ignore_index=True)
    chosen["steps"] = chosen["steps"].fillna(0).astype(np.int64)
    chosen["last"] = chosen["last"].fillna(0).astype(np.int64)
    chosen["order"] = np.arange(len(chosen), dtype=np.int64)
    per = per.merge(chosen[["utext", "key", "order"]], on=["utext", "key"], how="left")
    far = per["order"].isna().to_numpy()
    report.unit_dropped_keys = int(far.sum())
    report.unit_dropped_weight = float(per["weight"].to_numpy()[far].sum())
    per = per[~far]
    # 2. steps: per (unit, key) the greedy earliest steps, b apart, at most k in all runs
    per = per.sort_values(["order", "step"], kind="stable").reset_index(drop=True)
    order = per["order"].to_numpy(np.int64)
    steps = per["step"].to_numpy(np.int64)
    prior_steps = chosen["steps"].to_numpy(np.int64)
    prior_last = chosen["last"].to_numpy(np.int64)
    after = np.where(prior_steps > 0, prior_last + bound.min_separation, 0)
    kept = greedy_separated(
        order, steps, bound.max_steps, bound.min_separation, used=prior_steps, after=after
    )
    report.unit_dropped_steps = int((~kept).sum())
    report.unit_dropped_steps_weight = float(per["weight"].to_numpy()[~kept].sum())
    # the ledger after these steps: every chosen pair with its kept steps added
    n_kept = np.bincount(order[kept], minlength=len(chosen))
    last_kept = np.zeros(len(chosen), dtype=np.int64)
    np.maximum.at(last_kept, order[kept], steps[kept])
    chosen["steps"] = prior_steps + n_kept
    chosen["last"] = np.maximum(prior_last, last_kept)
    untouched = before.merge(
        chosen[["utext", "key"]], on=["utext", "key"], how="left", indicator=True
    )
    untouched = untouched[untouched["_merge"] == "left_only"].drop(columns="_merge")
    after_ledger = UnitLedger.from_frame(
        pd.concat([untouched, chosen[["utext", "key", "steps", "last"]]], ignore_index=True)
    )
    per = per[kept]
    # 3. weight per (unit, key, step)
    w, n, excess = _clip(per["weight"].to_numpy(), bound.max_weight)
    report.clipped_events, report.clipped_weight = n, excess
    rows = pd.DataFrame({"key": per["key"].to_numpy(), "step": per["step"].to_numpy(), "weight": w})
    return rows, report, after_ledger
