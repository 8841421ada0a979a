"""Sparse-vector key selection: the release bound against mpmath and simulation, the
guarantee brute-forced on tiny logs, the schedules, the plan and the CLI."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pandas as pd
import pytest

import dpcount.keyed.selection as selection_module
from dpcount.keyed.events import TimeBuckets
from dpcount.keyed.selection import KeySelection, Selector, check_steps, plan_open_keys
from dpcount.keyed.sparse_vector import (
    SparseVectorCalibration,
    calibrate,
    least_offset,
    release_bound,
)
from tests.keyed.test_selection import _one_unit_keys, _open_run

pytest.importorskip("pyarrow")


# ----------------------------------------------------------------------------------
# Independent computations
# ----------------------------------------------------------------------------------
def mp_bound(x: int, n: int, t_rho: Fraction, t_nu: Fraction, width: int = 300) -> Any:
    """B(x) = 1 − E_ρ[(1 − P[ν ≥ x + ρ])^n] by direct summation at 50 digits (the mass
    of |ρ| > width, below 1e-25 for the scales ≤ 10 here, is added: an upper bound by
    that much)."""
    with mpmath.workdps(50):
        qr = mpmath.exp(-1 / mpmath.mpf(t_rho.numerator) * t_rho.denominator)
        qn = mpmath.exp(-1 / mpmath.mpf(t_nu.numerator) * t_nu.denominator)

        def tail(y: int) -> Any:  # P[ν ≥ y]
            return qn**y / (1 + qn) if y >= 1 else 1 - qn ** (1 - y) / (1 + qn)

        total = mpmath.mpf(0)
        for z in range(-width, width + 1):
            p = (1 - qr) / (1 + qr) * qr ** abs(z)
            total += p * (1 - (1 - tail(x + z)) ** n)
        return total + 2 * qr ** (width + 1) / (1 + qr)


SPLITS = [(1, 5), (1, 2), (4, 5)]


@pytest.mark.parametrize(
    ("n", "share"),
    [
        (3, (1, 5)),
        *[
            pytest.param(n, share, marks=pytest.mark.slow)  # 0.7 s each
            for n, share in [(1, (1, 2)), (10, (4, 5)), (24, (1, 2))]
        ],
    ],
)
def test_release_bound_is_a_tight_upper_bound_of_direct_summation(
    n: int, share: tuple[int, int]
) -> None:
    eps = Fraction(1)
    e1 = eps * Fraction(*share)
    t_rho, t_nu = 1 / e1, 1 / (eps - e1)
    for x in (0, 4, 12):
        exact = mp_bound(x, n, t_rho, t_nu)
        bound = release_bound(x, n, t_rho, t_nu)
        assert mpmath.mpf(bound) >= exact, (n, share, x)
        assert bound <= float(exact) * (1 + 1e-6), (n, share, x)


@pytest.mark.slow  # 0.5 s: T = 1461 checks at the default calibration, 50 digits
def test_release_bound_at_the_default_calibration() -> None:
    """The τ of T = 1461, select-ε 1, select-δ 1e-6: the library's bound on B(τ − 1)
    is at least the direct sum, within 1e-6, and below p₁; one less is above p₁."""
    sv = calibrate(epsilon=1.0, key_delta=1e-6, checks=1461, per_key_total=1, max_keys=1)
    x = sv.threshold - 1
    exact = mp_bound(x, 1461, sv.rho_scale, sv.nu_scale, width=150)
    assert exact <= mpmath.mpf(sv.bound) <= exact * (1 + 1e-6) and sv.bound <= 1e-6
    assert mp_bound(x - 1, 1461, sv.rho_scale, sv.nu_scale, width=150) > 1e-6


@pytest.mark.slow  # 2 s of mpmath sums
def test_least_offset_is_the_least_within_key_delta() -> None:
    """x* meets p₁ and x* − 1 does not, both by direct summation."""
    for n, (a, b) in itertools.product((2, 12), SPLITS):
        e1 = Fraction(a, b)
        t_rho, t_nu = 2 / e1, 2 / (1 - e1)  # m·C = 2
        x = least_offset(n, t_rho, t_nu, 1e-3)
        assert mp_bound(x, n, t_rho, t_nu) <= 1e-3 < mp_bound(x - 1, n, t_rho, t_nu)


@pytest.mark.slow  # 0.6 s: 99 calibrations
def test_calibration_picks_the_least_threshold_over_the_splits() -> None:
    sv = calibrate(epsilon=1.0, key_delta=1e-3, checks=12, per_key_total=2, max_keys=1)
    assert sv.rho_scale == 2 / sv.rho_share and sv.nu_scale == 2 / (1 - sv.rho_share)
    for i in (1, 10, 30, 50, 70, 99):
        e1 = Fraction(i, 100)
        assert 2 + least_offset(12, 2 / e1, 2 / (1 - e1), 1e-3) >= sv.threshold
    assert sv.bound <= sv.key_delta == 1e-3


# ----------------------------------------------------------------------------------
# The guarantee, brute-forced: exact output distributions of tiny logs
# ----------------------------------------------------------------------------------
def _dl(t: Fraction, width: int) -> tuple[np.ndarray, np.ndarray]:
    q = math.exp(-1 / float(t))
    z = np.arange(-width, width + 1)
    return z, (1 - q) / (1 + q) * q ** np.abs(z)


def _tail(t: Fraction, y: np.ndarray) -> np.ndarray:
    q = math.exp(-1 / float(t))
    return np.where(
        y >= 1, q ** np.maximum(y, 1) / (1 + q), 1 - q ** (1 - np.minimum(y, 0)) / (1 + q)
    )


def key_law(counts: list[int], first: int, sv: SparseVectorCalibration, checks: list[int]) -> dict:
    """P[σ = s] of one key (σ = 0: never) from the definition: eligible from its first
    counted step ``first`` (None: never a candidate), one ρ, fresh ν per checked step."""
    if first is None:
        return {0: 1.0}
    z, pz = _dl(sv.rho_scale, 200)
    stay = np.ones_like(pz)
    out = {}
    for s in checks:
        if s < first:
            continue
        cross = _tail(sv.nu_scale, sv.threshold + z - counts[s - 1])
        out[s] = float((pz * stay * cross).sum())
        stay = stay * (1 - cross)
    out[0] = float((pz * stay).sum())
    return out


def output_law(log: list[tuple[int, int]], keys: int, horizon: int, sv: Any) -> dict:
    """The joint law of (σ_key) for a log of (key, step) events: keys independent."""
    checks = list(range(1, horizon + 1))
    laws = []
    for k in range(keys):
        steps = sorted(s for key, s in log if key == k)
        counts = [sum(1 for t in steps if t <= s) for s in range(1, horizon + 1)]
        laws.append(key_law(counts, steps[0] if steps else None, sv, checks))
    out = {}
    for combo in itertools.product(*(law.items() for law in laws)):
        out[tuple(o for o, _ in combo)] = math.prod(p for _, p in combo)
    return out


def hockey(p: dict, q: dict, epsilon: float) -> float:
    """max_S P[S] − e^ε·Q[S] = Σ_o max(0, P(o) − e^ε·Q(o))."""
    return sum(max(0.0, v - math.exp(epsilon) * q.get(o, 0.0)) for o, v in p.items())


def _firsts(log: list[tuple[int, int]]) -> dict[int, int]:
    return {k: min(s for key, s in log if key == k) for k, _ in log}


def worst_delta(
    sv: Any, unit_events: list[list[tuple[int, int]]], epsilon: float
) -> tuple[float, float]:
    """The largest δ(ε) over neighbours D, D + u (D every log of ≤ 2 events on 2 keys ×
    3 steps, u every unit contribution in ``unit_events``), and the largest over the
    pairs whose keys keep their first counted steps (there the selection is pure ε)."""
    cells = list(itertools.product(range(2), range(1, 4)))
    logs = [list(c) for r in range(3) for c in itertools.combinations_with_replacement(cells, r)]
    worst, pure = 0.0, 0.0
    for log in logs:
        base = output_law(log, 2, 3, sv)
        for u in unit_events:
            other = output_law(log + u, 2, 3, sv)
            d = max(hockey(base, other, epsilon), hockey(other, base, epsilon))
            worst = max(worst, d)
            if _firsts(log) == _firsts(log + u):
                pure = max(pure, d)
    return worst, pure


def _swap(sv: SparseVectorCalibration, **change: Any) -> SparseVectorCalibration:
    from dataclasses import replace

    return replace(sv, **change)


@pytest.mark.parametrize("level", ["event", pytest.param("run", marks=pytest.mark.slow)])
def test_guarantee_brute_forced_on_tiny_logs(level: str) -> None:
    """(ε_s, δ_s) for the selection on every pair of neighbouring tiny logs: event level
    (u = one event) and run level (u = one event in each of up to m = 2 keys); a
    threshold one too low, or ν's scale halved (τ recalibrated), breaks it."""
    eps_s, delta_s = 1.0, 0.2
    cells = list(itertools.product(range(2), range(1, 4)))
    if level == "event":
        m, units = 1, [[c] for c in cells]
    else:
        m = 2
        units = [[a, b] for a in cells for b in cells if a[0] == 0 and b[0] == 1]
        units += [[c] for c in cells]
    sv = calibrate(epsilon=eps_s, key_delta=delta_s / m, checks=3, per_key_total=1, max_keys=m)
    worst, pure = worst_delta(sv, units, eps_s)
    assert worst <= delta_s + 1e-12 and pure <= 1e-12
    assert worst > 0.9 * delta_s  # the bound is nearly tight here (a one-unit key)
    assert worst_delta(_swap(sv, threshold=sv.threshold - 1), units, eps_s)[0] > delta_s
    # half of ν's scale Δ/ε₂ (τ recalibrated for the δ part): the pure ε part fails
    nu = sv.nu_scale / 2
    thin = _swap(sv, threshold=1 + least_offset(3, sv.rho_scale, nu, delta_s / m), nu_scale=nu)
    assert worst_delta(thin, units, eps_s)[1] > 1e-6
    if m > 1:  # per-key scales without the split over a unit's m keys (C/ε, not m·C/ε)
        rho, nu = sv.rho_scale / m, sv.nu_scale / m
        alone = _swap(
            sv, threshold=1 + least_offset(3, rho, nu, delta_s), rho_scale=rho, nu_scale=nu
        )
        assert worst_delta(alone, units, eps_s)[1] > 1e-6


# ----------------------------------------------------------------------------------
# The release rate through the engine (PRF noise)
# ----------------------------------------------------------------------------------
def test_simulated_release_rate_of_one_unit_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """4000 keys of one event at step 1 (count C = 1 at each of the 6 checks): the
    released fraction matches the exact B(τ − C) within 5 standard errors and stays
    below the library's bound; with τ one too low (a bound computed too low) it
    exceeds p₁."""
    n = 4000
    events = _one_unit_keys(n, 1)
    kw: dict[str, Any] = dict(horizon=6, selection=KeySelection(epsilon=1.0, delta=0.05))
    result = _open_run(events, b"sv-sim-1".ljust(32, b"."), **kw)
    sv = result.selection.plan.sparse
    exact = float(mp_bound(sv.threshold - 1, 6, sv.rho_scale, sv.nu_scale))
    rate = result.frame["key"].nunique() / n
    se = math.sqrt(exact * (1 - exact) / n)
    assert abs(rate - exact) <= 5 * se and exact <= sv.bound <= sv.key_delta
    assert rate <= sv.bound + 5 * se
    original = selection_module.calibrate

    def too_low(**kw: Any) -> SparseVectorCalibration:
        return _swap(original(**kw), threshold=original(**kw).threshold - 1)

    monkeypatch.setattr(selection_module, "calibrate", too_low)
    bad = _open_run(events, b"sv-sim-2".ljust(32, b"."), **kw)
    assert bad.frame["key"].nunique() / n > sv.key_delta + 5 * math.sqrt(sv.key_delta / n)


def test_no_noise_selects_at_the_first_checked_crossing() -> None:
    """ε_s = 400 with a fixed testing secret (deterministic; with a fresh one the ν
    samples are 0 but w.p. ~e^-100, while ρ's scale stays near its calibrated floor,
    nonzero w.p. ~7e-4 a key): a key is released from the first checked step (every 3
    steps and the last) at which its running count reaches τ = C + 1 = 2."""
    events = pd.DataFrame({"t": [1, 2, 4, 7, 8], "key": ["a", "a", "b", "b", "c"]})
    kw: dict[str, Any] = dict(horizon=8, selection=KeySelection(epsilon=400.0, delta=1e-3, every=3))
    result = _open_run(events, b"sv-zero".ljust(32, b"."), **kw)
    assert result.selection.plan.threshold == 2
    first = result.frame.groupby("key")["step"].min().to_dict()
    assert first == {"a": 3, "b": 8}


# ----------------------------------------------------------------------------------
# Schedules, the plan, the selector option, the CLI
# ----------------------------------------------------------------------------------
def test_check_steps() -> None:
    assert check_steps(None, 4).tolist() == [1, 2, 3, 4]
    assert check_steps(3, 8).tolist() == [3, 6, 8]
    days = TimeBuckets.make("1D", "2012-01-01")
    assert check_steps("MS", 62, days).tolist() == [31, 60, 62]
    # pandas' W-MON: weeks ending on Monday (2012-01-02, 01-09 and 01-16 are Mondays)
    assert check_steps("W-MON", 16, days).tolist() == [2, 9, 16]
    with pytest.raises(ValueError, match="needs dated times"):
        check_steps("MS", 8, TimeBuckets.make(1, 1))
    with pytest.raises(ValueError, match="every must be >= 1"):
        KeySelection(epsilon=1.0, delta=1e-6, every=0)
    with pytest.raises(ValueError, match="schedule of the sparse-vector"):
        KeySelection(epsilon=1.0, delta=1e-6, selector="tree", every=7)
    with pytest.raises(ValueError, match="selector must be one of"):
        KeySelection(epsilon=1.0, delta=1e-6, selector="trees")


def test_plan_open_keys_threshold_and_outlook() -> None:
    plan = plan_open_keys(
        KeySelection(epsilon=1.0, delta=1e-6), horizon=1461, key_events=(20, 46, 200)
    )
    assert plan.threshold == 46 <= 55  # the issue's target; 0.4's tree: 359
    small, mid, big = plan.keys
    assert small.released < 0.01 < mid.released < big.released
    assert big.released > 0.999 and big.expected_delay is not None
    assert big.expected_step is not None and big.expected_count is not None
    assert big.expected_count == pytest.approx(46, abs=10)
    every = plan_open_keys(KeySelection(epsilon=1.0, delta=1e-6), horizon=60)
    fewer = plan_open_keys(KeySelection(epsilon=1.0, delta=1e-6, every=10), horizon=60)
    assert fewer.calibration.checks == 6 and fewer.threshold < every.threshold
    with pytest.raises(ValueError, match="sparse-vector selector"):
        plan_open_keys(KeySelection(epsilon=1.0, delta=1e-6, selector=Selector.TREE), horizon=8)


def test_cli_plan_open_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from dpcount.cli import main

    argv = ["plan", "--open-keys", "--horizon", "60", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--key-events", "200"]) == 0
    out = capsys.readouterr().out
    tau = plan_open_keys(KeySelection(epsilon=1.0, delta=1e-6), horizon=60).threshold
    assert f"Threshold τ = {tau}" in " ".join(out.split())
    assert main([*argv, "--key-events", "200", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["events"] == 200 and row["released"] > 0.9999
    assert main(["plan", "--horizon", "8", "--epsilon", "1", "--max-keys", "2"]) == 2
    assert "--max-keys needs --open-keys" in capsys.readouterr().err
    assert main([*argv, "--metric", "linf"]) == 2
    assert "--metric is not used with --open-keys" in capsys.readouterr().err


@pytest.mark.slow  # 2 s: the CLI over the library path tested above
def test_cli_default_split_and_selector(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from dpcount.cli import main
    from tests.keyed.test_selection import _mixed_events

    path = tmp_path / "events.csv"
    _mixed_events().to_csv(path, index=False)
    args = [
        "keyed", str(path), "--time-column", "t", "--key-column", "key", "--step", "1",
        "--start", "1", "--horizon", "8", "--epsilon", "2",
        "--secret", str(tmp_path / "run.key"), "--output", str(tmp_path / "o.csv"),
    ]  # fmt: skip
    assert main(args) == 2
    assert "needs a δ for key selection: give --delta" in capsys.readouterr().err
    assert main([*args, "--delta", "1e-6"]) == 0
    err = capsys.readouterr().err
    assert "key selection epsilon 1, delta 1e-06; counting epsilon 1" in err
    assert "threshold tau = " in err and "(2, 1e-06)-DP" in err
    assert main([*args, "--select-epsilon", "1"]) == 2
    assert "needs both --select-epsilon and --select-delta" in capsys.readouterr().err
    tree = [*args, "--delta", "1e-6", "--selector", "tree", "--secret", str(tmp_path / "t.key")]
    assert main(tree) == 0
    assert "binary tree" in capsys.readouterr().err


def test_selection_step_recomputed_from_the_keyed_noise() -> None:
    """The engine's selection step of a key equals the rule applied to ρ and ν drawn
    directly from the PRF at its position (HMAC of the run's PRF key with the sparse
    vector's label), and its rows start there; keys of one event are never released."""
    from dpcount.keyed.sparse_vector import SparseVectorNoise
    from tests.keyed._keys import noise_key, sub_key

    # "mid": 6 events a step, so its count crosses τ = 37 around step 6, by the noise
    mid = pd.DataFrame({"t": np.repeat(np.arange(1, 9), 6), "key": "mid"})
    events = pd.concat([mid, pd.DataFrame({"t": [2], "key": ["rare"]})], ignore_index=True)
    secret = b"sv-recompute".ljust(32, b".")
    result = _open_run(events, secret, horizon=8, selection=KeySelection(epsilon=1.0, delta=1e-6))
    plan = result.selection.plan
    noise = SparseVectorNoise(
        sub_key(noise_key(secret, result.config), b"dpcount/keyed/sparse-vector"),
        plan.mechanism.key_block,
        plan.sparse.rho_scale,
        plan.sparse.nu_scale,
    )
    counts = 6 * np.arange(1, 9)
    position = 0  # "mid" is first counted at step 1, before "rare" (step 2)
    steps = np.arange(1, 9)
    level = plan.threshold + noise.rho(position, position + 1)[0]
    crossed = counts + noise.nu(steps, position, position + 1)[:, 0] >= level
    assert crossed.any()
    sigma = int(steps[np.argmax(crossed)])
    assert plan.threshold == 37 and sigma > 1  # not decided by the count alone
    assert result.frame["step"].tolist() == list(range(sigma, 9))
    assert set(result.frame["key"]) == {"mid"}
