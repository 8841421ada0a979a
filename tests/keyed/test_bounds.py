"""Unit bounds over the whole run (unit_scope="run"): enforcement by brute force, and
the calibration against the single-stream mechanism and a brute-force sensitivity."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.counting.registry import MECHANISMS
from dpcount.keyed.bounds import RunBound, bound_units_run, greedy_separated, pair_rank
from dpcount.keyed.events import EventColumns
from dpcount.privacy import Budget, Participation
from tests.keyed._budget import make_job

HASH = "0123456789abcdef"


def naive_greedy(steps: list[int], k: int | None, b: int) -> list[int]:
    kept: list[int] = []
    for s in sorted(steps):
        if (k is None or len(kept) < k) and (not kept or s - kept[-1] >= b):
            kept.append(s)
    return kept


def test_greedy_separated_equals_the_loop() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        groups = rng.integers(1, 5)
        rows = sorted(
            set(
                zip(
                    rng.integers(0, groups, 25).tolist(),
                    rng.integers(1, 30, 25).tolist(),
                    strict=True,
                )
            )
        )
        group = np.array([g for g, _ in rows], dtype=np.int64)
        step = np.array([s for _, s in rows], dtype=np.int64)
        k = [None, 1, 3][int(rng.integers(0, 3))]
        b = int(rng.integers(1, 6))
        keep = greedy_separated(group, step, k, b)
        for g in set(group.tolist()):
            mine = step[(group == g) & keep].tolist()
            assert mine == naive_greedy(step[group == g].tolist(), k, b)


def _random_rows(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unit": rng.choice(["u", "v", "w", "x"], n),
            "step": rng.integers(1, 13, n),
            "key": rng.integers(0, 6, n),
            "weight": rng.integers(0, 4, n).astype(np.float64),
        }
    )


def naive_bound(
    rows: pd.DataFrame, m: int, k: int | None, b: int, c: float, hash_key: str = HASH
) -> dict[tuple[int, int], float]:
    """The run-level rule unit by unit, in plain loops: a unit's first m keys in time
    (first step, then the keyed hash of the names, then key), per key the greedy
    steps, each (unit, key, step) total cut to c."""
    totals = rows.groupby(["unit", "key", "step"])["weight"].sum()
    expect: dict[tuple[int, int], float] = {}
    for unit, part in totals.groupby(level=0):
        keys = sorted({kk for _, kk, _ in part.index})
        first = {kk: min(s for (_, k2, s) in part.index if k2 == kk) for kk in keys}
        texts = np.array([str(unit)] * len(keys), dtype=object)
        rank = pair_rank(texts, np.array([str(kk) for kk in keys], dtype=object), hash_key)
        ordered = sorted(
            zip(keys, rank.tolist(), strict=True), key=lambda p: (first[p[0]], p[1], p[0])
        )
        for kk, _ in ordered[:m]:
            steps = [s for (_, k2, s) in part.index if k2 == kk]
            for s in naive_greedy(steps, k, b):
                value = min(float(totals[(unit, kk, s)]), c)
                expect[(kk, s)] = expect.get((kk, s), 0.0) + value
    return expect


@pytest.mark.parametrize(("m", "k", "b"), [(2, 3, 2), (1, None, 1), (3, 2, 4)])
def test_enforced_data_satisfy_the_bound(m: int, k: int | None, b: int) -> None:
    """Brute force on small data: every unit keeps <= m keys (its first m in time, ties
    by keyed hash), per key the greedy steps (<= k, >= b apart), each <= c; every
    unit of weight removed is reported; and the same rows bounded in three runs (the
    ledger carried from run to run) keep exactly the same."""
    rng = np.random.default_rng(m * 10 + b)
    rows = _random_rows(rng, 120)
    c = 2
    bound = RunBound(max_keys=m, max_steps=k, min_separation=b, max_weight=c)
    kept, report, _ = bound_units_run(rows, bound, hash_key=HASH)
    totals = rows.groupby(["unit", "key", "step"])["weight"].sum()
    expect = naive_bound(rows, m, k, b, c)
    got = kept.groupby(["key", "step"])["weight"].sum().to_dict()
    assert {key: v for key, v in got.items()} == pytest.approx(expect)
    removed = report.unit_dropped_weight + report.unit_dropped_steps_weight + report.clipped_weight
    assert kept["weight"].sum() + removed == pytest.approx(rows["weight"].sum())
    assert report.unit_dropped_keys + report.unit_dropped_steps + len(kept) == len(totals)
    # split into three runs: the ledger continues each unit's bound
    ledger, pieces, dropped = None, [], 0
    for lo, hi in ((1, 4), (5, 9), (10, 12)):
        part = rows[(rows["step"] >= lo) & (rows["step"] <= hi)]
        piece, rep, ledger = bound_units_run(part, bound, hash_key=HASH, ledger=ledger)
        pieces.append(piece)
        dropped += rep.unit_dropped_keys + rep.unit_dropped_steps
    split = pd.concat(pieces).groupby(["key", "step"])["weight"].sum().to_dict()
    assert split == got and dropped == report.unit_dropped_keys + report.unit_dropped_steps
    assert ledger is not None and len(ledger.units) <= 4
    assert all(np.bincount(ledger.unit) <= m)
    assert k is None or ledger.steps.max() <= k


def _job(**kw: Any) -> Any:
    base: dict[str, Any] = dict(
        times=pd.Series([1]),
        keys=["a", "b", "c"],
        columns=EventColumns("t", "key", None, "user"),
        step=1,
        epsilon=1.0,
        delta=None,
        noise="discrete-laplace",
        calibration=None,
        max_weight=2,
        max_keys=3,
        start=1,
        horizon=16,
        unit_scope="run",
        max_steps=4,
        min_separation=3,
    )
    base.update(kw)
    return make_job(**base)[0]


@pytest.mark.parametrize(
    ("mechanism", "noise", "delta"),
    [("kary", "discrete-laplace", None), ("sqrt", "gaussian", 1e-6)],
)
def test_std_is_the_single_stream_mechanisms_under_the_same_participation(
    mechanism: str, noise: str, delta: float | None
) -> None:
    job = _job(mechanism=mechanism, noise=noise, delta=delta)
    m, c = 3, 2
    gaussian = noise == "gaussian"
    single = MECHANISMS[mechanism](
        horizon=16,
        budget=Budget(
            epsilon=1.0,
            delta=delta,
            noise=noise,
            step_sensitivity=math.sqrt(m) * c if gaussian else m * c,
            step_l2_sensitivity=None if gaussian else math.sqrt(m) * c,
            participation=Participation(4, 3),
        ),
        **({"k": 19, "subtract": True} if mechanism == "kary" else {}),
    )
    assert np.array_equal(job.mechanism.std(), np.sqrt(single.variances()))
    # and the schema matters: one participation would give less noise
    alone = _job(
        mechanism=mechanism,
        noise=noise,
        delta=delta,
        unit_scope="step",
        max_steps=None,
        min_separation=None,
    )
    assert (alone.mechanism.std() < job.mechanism.std()).all()


def test_calibrated_sensitivity_bounds_the_brute_force_over_neighbours() -> None:
    """The sqrt factorization's encoder C (T = 6): the largest ‖C·Δ‖ over every
    neighbour of two keys (each key: <= 2 steps >= 2 apart, ±c per step — the extreme
    points of the convex set) is what the keyed mechanism calibrated to."""
    T, m, c, k, b = 6, 2, 1, 2, 2
    options: dict[str, Any] = dict(
        mechanism="sqrt",
        noise="gaussian",
        delta=1e-6,
        horizon=T,
        max_keys=m,
        max_weight=c,
        max_steps=k,
        min_separation=b,
    )
    job = _job(**options)
    counting = job.mechanism.counting
    _, encoder = counting.dense_factorization()
    columns = []
    for size in range(1, k + 1):
        for pattern in itertools.combinations(range(T), size):
            if any(j - i < b for i, j in itertools.pairwise(pattern)):
                continue
            for signs in itertools.product((-c, c), repeat=size):
                delta = np.zeros(T)
                delta[list(pattern)] = signs
                columns.append(encoder @ delta)
    one = np.array(columns)
    l2 = max(
        math.sqrt(float(one[i] @ one[i] + one[j] @ one[j]))
        for i in range(len(one))
        for j in range(len(one))
    )
    l1 = max(
        float(np.abs(one[i]).sum() + np.abs(one[j]).sum())
        for i in range(len(one))
        for j in range(len(one))
    )
    assert job.mechanism.privacy.l2_sensitivity == pytest.approx(l2, rel=1e-9)
    # l1 (Laplace noise; the Gaussian calibration reads only l2)
    laplace = _job(**{**options, "noise": "laplace", "delta": None})
    assert laplace.mechanism.privacy.l1_sensitivity == pytest.approx(l1, rel=1e-9)


def test_bad_run_bounds_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        _job(max_steps=0)
    with pytest.raises(ValueError, match="min_separation=3 needs max_steps"):
        _job(max_steps=None)
    with pytest.raises(ValueError, match="max_participations=9"):
        _job(max_steps=9, horizon=16)
    with pytest.raises(ValueError, match="min_separation"):
        _job(min_separation=0)


def test_a_public_universe_with_run_bounds_continues_across_runs(tmp_path: Any) -> None:
    """keys= given, unit_scope="run", state=: two runs release the bits of one run, and a
    unit's keys used in the first run count against max_keys in the second."""
    import json

    from dpcount.keyed.secret import unsafe_testing_secret
    from tests.keyed._budget import keyed_counts

    rng = np.random.default_rng(3)
    events = pd.DataFrame(
        {
            "t": rng.integers(1, 9, 300),
            "key": rng.choice(list("abcd"), 300),
            "user": rng.integers(0, 40, 300),
        }
    )
    kw: dict[str, Any] = dict(
        keys=list("abcd"), time_column="t", key_column="key", unit_column="user", step=1,
        start=1, horizon=8, epsilon=1.0, unit_scope="run", max_keys=2, max_steps=3,
    )  # fmt: skip
    runs = []
    for lo, hi in ((1, 4), (5, 8)):
        part = events[(events["t"] >= lo) & (events["t"] <= hi)]
        secret = str(tmp_path / "run.key")
        runs.append(keyed_counts(part, secret=secret, state=tmp_path / "s", until=hi, **kw))
    body = json.loads((tmp_path / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    one = keyed_counts(events, secret=twin, **kw)
    both = pd.concat([r.frame for r in runs], ignore_index=True)
    both = both.sort_values(["key", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(both, one.frame, check_dtype=False, check_categorical=False)
    dropped = sum(r.report.unit_dropped_keys for r in runs)
    assert dropped == one.report.unit_dropped_keys > runs[0].report.unit_dropped_keys


def test_the_input_digest_covers_the_open_keys_and_the_ledger() -> None:
    """The release mark's identical-retry test: a stored key table or unit ledger that
    differs makes a different input digest (a retry from it is not identical)."""
    from dpcount.keyed.bounds import UnitLedger
    from dpcount.keyed.events import Contributions
    from dpcount.keyed.mark import input_digest
    from dpcount.keyed.secret import RunSecret
    from dpcount.keyed.state import OpenKeys, extras_digest

    secret = RunSecret.in_memory(b"d" * 32, {})
    none = np.zeros(0, dtype=np.int64)
    empty = Contributions(none, none, none)
    one = np.ones(1, dtype=np.int64)
    ledger = UnitLedger(("u",), one * 0, one * 0, one, one)
    digests = {
        input_digest(secret, 2, 3, empty, None, None, extras_digest(opened, units))
        for opened in (None, OpenKeys(("a",), one * 9), OpenKeys(("b",), one * 9))
        for units in (None, ledger, UnitLedger(("v",), one * 0, one * 0, one, one))
    }
    assert len(digests) == 9
