"""The scaled BLT presets' level powers: 50-digit pairs, the same on every platform."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dpcount.counting import registry
from dpcount.counting.factorization import blt, normalized_blt, row_scaled_blt
from dpcount.counting.factorization._precision import SCALED_BLT_LONG_HORIZON, decay_power_pairs


def test_the_presets_limits_are_the_long_forms_on_every_platform() -> None:
    assert SCALED_BLT_LONG_HORIZON == 1 << 24
    for name in ("normalized-blt", "row-scaled-blt"):
        assert blt.FLOAT_MODEL_HORIZONS[name]["block"] == SCALED_BLT_LONG_HORIZON
        assert registry.max_horizon(name) == SCALED_BLT_LONG_HORIZON
    assert normalized_blt.NORMALIZED_BLT_MAX_HORIZON == SCALED_BLT_LONG_HORIZON
    assert row_scaled_blt.ROW_SCALED_BLT_MAX_HORIZON == SCALED_BLT_LONG_HORIZON


def _worst(d: np.ndarray, c: int, up: np.ndarray, up_lo: np.ndarray) -> tuple[float, float]:
    """Largest relative error of the pairs (hi + lo) and of hi alone against mpmath's
    60-digit λ^{c·(j+1)} (entries 0 in ``up`` skipped)."""
    pair, high = 0.0, 0.0
    with mpmath.workdps(60):
        for i, di in enumerate(d):
            lam = 1 - mpmath.mpf(float(di))
            for j in range(up.shape[1]):
                if up[i, j] == 0.0:
                    continue
                exact = lam ** (c * (j + 1))
                hi, lo = mpmath.mpf(float(up[i, j])), mpmath.mpf(float(up_lo[i, j]))
                pair = max(pair, float(abs((hi + lo) / exact - 1)))
                high = max(high, float(abs(hi / exact - 1)))
    return pair, high


@pytest.mark.parametrize("c", [64, 64 * 32**3])
def test_the_level_powers_are_pairs_to_2_pow_minus_104(c: int) -> None:
    """``_exact_level_matrices``' ``up``/``up_lo`` for the shipped 2^24 decays against
    mpmath's powers (an independent 60-digit computation): relative error ≤ 2^-104,
    where the pairs of the long double powers used before were off by up to ~2^-56
    (80-bit) and a double's powers by ~(1 + |log ρ|)·2^-53. The high part alone is a
    double's rounding (> 2^-60 somewhere): the test can fail."""
    params = normalized_blt.NormalizedBLT.shipped_parameters(1 << 24)
    d = blt.blt_inverse(params["buffer_decay"], params["output_scale"]).one_minus_decay
    _, _, up, up_lo, _ = normalized_blt._exact_level_matrices(d, c)
    assert (up > 0).sum() >= 64  # powers above 2^-600 of at least two buffers
    pair, high = _worst(d, c, up, up_lo)
    assert pair <= 2.0**-104, pair
    assert high > 2.0**-60, high


def test_power_pairs_of_nonpositive_decays_and_exponent_zero() -> None:
    """λ ≤ 0 (d ≥ 1) takes the integer power; k = 0 is 1 exactly; the pairs are the
    exact rational powers' nearest doubles."""
    hi, lo = decay_power_pairs([1.0, 1.5, 0.25, 2.0**-40], [0, 1, 2, 3, 7])
    assert hi[:, 0].tolist() == [1.0] * 4 and lo[:, 0].tolist() == [0.0] * 4
    assert hi[0, 1:].tolist() == [0.0] * 4  # λ = 0
    assert hi[1, 1:].tolist() == [(-0.5) ** k for k in (1, 2, 3, 7)]  # exact
    assert lo[1, 1:].tolist() == [0.0] * 4
    assert hi[2, 1:].tolist() == [0.75**k for k in (1, 2, 3, 7)]  # exact in doubles
    with mpmath.workdps(60):
        for j, k in enumerate((1, 2, 3, 7), start=1):
            exact = (1 - mpmath.mpf(2) ** -40) ** k
            assert hi[3, j] == float(exact)
            assert abs(mpmath.mpf(hi[3, j]) + mpmath.mpf(lo[3, j]) - exact) <= exact * 2.0**-105
    with pytest.raises(ValueError, match="exponents"):
        decay_power_pairs([0.5], [-1])
