"""calibrate as a table keyed by (NoiseKind, CalibrationRule) (issue 33 item 6): the same
samplers, guarantees, citations and refusals, bit for bit, as the if-chain it replaced,
over a grid recorded from that function (``data/calibration_grid.json``: noise kinds,
ε, δ (None included), (Δ₁, Δ₂) and every rule name plus a bogus one; 1248 requests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpcount.privacy.budget import CalibrationRule, NoiseKind
from dpcount.privacy.guarantee import CALIBRATIONS, calibrate

GRID = json.loads((Path(__file__).parent / "data" / "calibration_grid.json").read_text())


def _record(noise: str, eps: float, delta: float | None, d1: float, d2: float, rule: Any) -> Any:
    """As the grid was recorded (the same fields, floats in hex)."""
    try:
        c = calibrate(
            noise,
            epsilon=eps,
            delta=delta,
            l1_sensitivity=d1,
            l2_sensitivity=d2,
            calibration=rule,
            neighbouring="n",
        )
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}
    s, p = c.sampler, c.privacy
    return {
        "sampler": type(s).__name__,
        "params": {k: repr(v) for k, v in sorted(vars(s).items())},
        "scale": float(c.scale).hex(),
        "privacy": [
            float(p.epsilon).hex(),
            float(p.delta).hex(),
            p.noise,
            p.calibration,
            float(p.l1_sensitivity).hex(),
            float(p.l2_sensitivity).hex(),
            None if p.rho is None else float(p.rho).hex(),
        ],
        "citation": p.citation,
    }


def test_the_table_calibrates_as_the_if_chain_did() -> None:
    assert len(GRID) == 1248
    errors = sum("error" in want for *_, want in GRID)
    assert 0 < errors < len(GRID)  # refusals and calibrations both recorded
    for *request, want in GRID:
        got, want = _record(*request), json.loads(json.dumps(want))
        if "_variance" in want.get("params", {}):
            # the discrete Gaussian's exact variance is a sum (np.exp, np.dot) whose last
            # bits follow the machine's SIMD kernels, not the table: a few ulps apart
            a = float(got.get("params", {}).pop("_variance", "nan"))
            b = float(want["params"].pop("_variance"))
            assert abs(a - b) <= 1e-14 * b, request
        assert got == want, request


def test_every_entry_is_a_rule_of_its_noise_with_its_guarantee_and_citation() -> None:
    for (noise, rule), entry in CALIBRATIONS.items():
        assert isinstance(noise, NoiseKind) and isinstance(rule, CalibrationRule)
        assert entry.guarantee and entry.citation
        assert entry.with_delta or rule is CalibrationRule.PURE
        assert entry.with_delta == noise.is_gaussian or not noise.is_gaussian
    # every noise kind has a default rule with δ, and the Laplace kinds one without
    for noise in NoiseKind:
        assert any(k is noise and e.with_delta for (k, _), e in CALIBRATIONS.items())
        assert noise.is_gaussian or any(
            k is noise and not e.with_delta for (k, _), e in CALIBRATIONS.items()
        )


def test_a_wrong_table_would_fail_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid compares bits: the classic rule's entry pointed at the analytic one's
    calibration changes recorded rows."""
    from dpcount.privacy import guarantee

    table = dict(guarantee.CALIBRATIONS)
    classic = (NoiseKind.GAUSSIAN, CalibrationRule.CLASSIC)
    analytic = table[NoiseKind.GAUSSIAN, CalibrationRule.ANALYTIC]
    table[classic] = type(analytic)(True, "x", "x", lambda q: analytic.calibrate(
        type(q)(q.noise, q.epsilon, q.delta, q.l1, q.l2, CalibrationRule.ANALYTIC,
                q.neighbouring, q.profile)))  # fmt: skip
    monkeypatch.setattr(guarantee, "CALIBRATIONS", table)
    rows = [r for r in GRID if r[0] == "gaussian" and r[5] == "classic" and "error" not in r[6]]
    assert rows and any(_record(*r[:6]) != r[6] for r in rows)
