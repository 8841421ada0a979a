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
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import (
    Contributions,
    DropReport,
    EventColumns,
    KeyUniverse,
    TimeBuckets,
    bound_units,
    check_max_weight,
    clip_events,
    map_events,
    partial_sums,
    read_keys,
    to_contributions,
)
from dpcount.keyed.secret import RunSecret
from dpcount.privacy.budget import NoiseKind

__all__ = ["KeyedJob", "make_job"]

Progress = Callable[[int, int], None]


def _event_level(max_weight: float) -> str:
    return (
        f"event-level: logs differ in one event of weight <= {max_weight:g} (one key, one "
        f"step); per-step sensitivity across keys l1 = l2 = {max_weight:g}"
    )


def _unit_level(max_keys: int, max_weight: float) -> str:
    return (
        f"unit-step level: logs differ in one privacy unit's events within one step; "
        f"each unit keeps <= {max_keys} keys per step and <= {max_weight} per key; "
        f"per-step sensitivity across keys l1 = {max_keys * max_weight:g}, "
        f"l2 = sqrt({max_keys})*{max_weight:g}"
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
            frame, self.columns, self.universe, self.buckets, m.horizon, integer=self.integer
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
        return to_contributions(rows, dtype), report

    def release(self, contributions: Contributions, lo: int, hi: int) -> NDArray[Any]:
        return self.mechanism.release(self.secret.secret, contributions, lo, hi)

    def with_secret(
        self, secret: RunSecret | bytes | str | os.PathLike[str]
    ) -> tuple[KeyedJob, bool]:
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
    k: int,
    subtract: bool = False,
) -> tuple[KeyedJob, list[str]]:
    """Fix the public configuration (``times``: all event times, for omitted start/horizon).

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
    mech = KeyedMechanism(
        n_keys=len(universe),
        horizon=int(horizon),
        k=k,
        noise=kind,
        epsilon=float(epsilon),
        delta=delta,
        calibration=calibration,
        l1_step=float(l1),
        l2_step=float(l2),
        neighbouring=relation,
        key_block=_key_block(len(universe)),
        subtract=subtract,
    )
    mech.calibrated  # noqa: B018  (validates the budget before a secret file is created)
    placeholder = RunSecret.in_memory(b"\0" * 32, {})
    return KeyedJob(columns, universe, buckets, mech, weight, max_keys, placeholder), derived


def _resolve_secret(
    secret: RunSecret | bytes | str | os.PathLike[str], config: dict[str, Any]
) -> tuple[RunSecret, bool]:
    if isinstance(secret, RunSecret):
        if secret.config != config:
            raise ValueError("secret belongs to another run (its configuration differs)")
        return secret, False
    if isinstance(secret, bytes):
        return RunSecret.in_memory(secret, config), False
    if isinstance(secret, (str, os.PathLike)):
        return RunSecret.open_or_create(secret, config)
    raise TypeError(f"secret must be a path, bytes or RunSecret, got {type(secret).__name__}")
