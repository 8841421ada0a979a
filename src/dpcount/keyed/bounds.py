"""User-level contribution bounds over the whole run (``unit_scope="run"``).

The unit-step relation of :mod:`dpcount.keyed.events` protects one unit's events of
*one* step. Here two event logs differ in **all** the events of one privacy unit,
over the whole run, and each unit's contribution is bounded before counting:

* at most ``max_keys`` = m keys over the whole run (those of smallest keyed hash of
  (unit, key): a choice that depends on the unit's own events only, not on row order);
* per (unit, key), at most ``max_steps`` = k steps, any two at least
  ``min_separation`` = b steps apart (the earliest steps, greedily: a step is kept if
  it is at least b after the last kept one; None: every step, k = T, b = 1);
* per (unit, key, step), at most ``max_weight`` = c (the excess is cut).

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
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount._validate import check_integer
from dpcount.keyed.events import DropReport, _clip, _unit_rank, partial_sums
from dpcount.privacy.budget import Participation

__all__ = ["RunBound", "bound_units_run", "greedy_separated"]


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


def greedy_separated(
    group: NDArray[np.int64], step: NDArray[np.int64], k: int | None, b: int
) -> NDArray[np.bool_]:
    """Rows kept by the greedy rule, for rows sorted by (group, step), steps distinct
    within a group: a group's first row is kept, then each next row whose step is at
    least ``b`` after the last kept one, up to ``k`` rows (None: no limit).

    Vectorized by pointer jumping: ``nxt[i]`` is the first row of i's group with step
    ≥ step[i] + b; the kept rows of a group are its first row, nxt of it, and so on.
    """
    n = len(step)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    span = int(step.max()) + b + 1
    code = group.astype(np.int64) * span + step
    nxt = np.searchsorted(code, code + b, side="left")
    inside = nxt < n
    same = np.zeros(n, dtype=bool)
    same[inside] = group[nxt[inside]] == group[inside]
    nxt = np.where(same, nxt, -1)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    cur = starts
    rounds = 0
    while len(cur) and (k is None or rounds < k):
        keep[cur] = True
        cur = nxt[cur]
        cur = cur[cur >= 0]
        rounds += 1
    return keep


def bound_units_run(
    per: pd.DataFrame, bound: RunBound, *, hash_key: str
) -> tuple[pd.DataFrame, DropReport]:
    """Apply a :class:`RunBound` to (unit, step, key, weight) rows of the whole run.

    ``per`` may hold several partial sums of one (unit, step, key); they are added
    first. Returns (key, step, weight) rows and the report of what was removed:
    ``unit_dropped_keys`` (rows of keys beyond ``max_keys``), ``unit_dropped_steps``
    (rows beyond ``max_steps`` or closer than ``min_separation``), ``clipped_events``.
    """
    per = partial_sums(per, by_unit=True)
    report = DropReport()
    if per.empty:
        return pd.DataFrame({"key": [], "step": [], "weight": []}), report
    per["rank"] = _unit_rank(per, hash_key)
    # 1. keys: per unit the max_keys distinct keys of smallest (rank, key)
    pairs = per[["unit", "key", "rank"]].drop_duplicates(["unit", "key"])
    pairs = pairs.sort_values(["unit", "rank", "key"], kind="stable")
    pairs["order"] = pairs.groupby("unit", sort=False).cumcount().to_numpy()
    per = per.merge(pairs[["unit", "key", "order"]], on=["unit", "key"], how="left")
    far = per["order"].to_numpy() >= bound.max_keys
    report.unit_dropped_keys = int(far.sum())
    report.unit_dropped_weight = float(per["weight"].to_numpy()[far].sum())
    per = per[~far]
    # 2. steps: per (unit, key) the greedy earliest steps, b apart, at most k
    per = per.sort_values(["unit", "order", "step"], kind="stable").reset_index(drop=True)
    pair_id = per.groupby(["unit", "order"], sort=False).ngroup().to_numpy(np.int64)
    steps = per["step"].to_numpy(np.int64)
    kept = greedy_separated(pair_id, steps, bound.max_steps, bound.min_separation)
    report.unit_dropped_steps = int((~kept).sum())
    report.unit_dropped_steps_weight = float(per["weight"].to_numpy()[~kept].sum())
    per = per[kept]
    # 3. weight per (unit, key, step)
    w, n, excess = _clip(per["weight"].to_numpy(), bound.max_weight)
    report.clipped_events, report.clipped_weight = n, excess
    rows = pd.DataFrame({"key": per["key"].to_numpy(), "step": per["step"].to_numpy(), "weight": w})
    return rows, report
