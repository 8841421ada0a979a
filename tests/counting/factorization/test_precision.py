"""The scaled BLT presets' long forms need a long double wider than a double."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dpcount.counting import registry
from dpcount.counting.factorization import _precision, blt, normalized_blt, row_scaled_blt
from dpcount.counting.factorization._precision import (
    EXTENDED_LONG_DOUBLE,
    SCALED_BLT_LONG_HORIZON,
    scaled_blt_limit,
)


def test_without_an_extended_long_double_the_presets_stop_at_their_plain_forms() -> None:
    assert scaled_blt_limit(1 << 16, extended=False) == 1 << 16
    assert scaled_blt_limit(1 << 17, extended=False) == 1 << 17
    assert scaled_blt_limit(1 << 16, extended=True) == SCALED_BLT_LONG_HORIZON == 1 << 24
    assert (np.finfo(np.longdouble).nmant >= 63) == _precision.EXTENDED_LONG_DOUBLE
    # every statement of the limits follows the platform's long double
    plain = {"normalized-blt": 1 << 16, "row-scaled-blt": 1 << 17}
    for name, limit in plain.items():
        assert blt.FLOAT_MODEL_HORIZONS[name]["block"] == scaled_blt_limit(limit)
        assert registry.max_horizon(name) == scaled_blt_limit(limit)
    assert scaled_blt_limit(plain["normalized-blt"]) == normalized_blt.NORMALIZED_BLT_MAX_HORIZON
    assert scaled_blt_limit(plain["row-scaled-blt"]) == row_scaled_blt.ROW_SCALED_BLT_MAX_HORIZON


@pytest.mark.skipif(not EXTENDED_LONG_DOUBLE, reason="the long forms are refused here")
def test_the_level_powers_carry_a_long_doubles_accuracy() -> None:
    """The pair hi + lo of each level power ρ = λ^{c·k} (``_exact_level_matrices``'s
    ``up``/``up_lo``) against 50-digit powers of the shipped 2^24 decays from the
    accurate 1 − λ: relative error ≤ (1 + |log ρ|)·2^-62, the accuracy of e^{k·c·log1p(−d)}
    in a 64-bit long double, with which the long forms' float model was measured. A
    plain double's powers are off by up to ~(1 + |log ρ|)·2^-53 (checked below on the
    high part alone, which is such a rounding: the test can fail)."""
    params = normalized_blt.NormalizedBLT.shipped_parameters(1 << 24)
    d = blt.blt_inverse(params["buffer_decay"], params["output_scale"]).one_minus_decay
    c = 64
    _, _, up, up_lo, _ = normalized_blt._exact_level_matrices(1.0 - d, d, c)
    mpmath.mp.dps = 50
    pair, high = 0.0, 0.0
    for i, di in enumerate(d):
        lam = 1 - mpmath.mpf(float(di))
        for j in range(up.shape[1]):
            if up[i, j] == 0.0:
                continue
            exact = lam ** (c * (j + 1))
            scale = 1 + abs(float(mpmath.log(exact)))
            hi, lo = mpmath.mpf(float(up[i, j])), mpmath.mpf(float(up_lo[i, j]))
            pair = max(pair, float(abs((hi + lo) / exact - 1)) / scale)
            high = max(high, float(abs(hi / exact - 1)) / scale)
    assert pair <= 2.0**-62, pair
    assert high > 2.0**-62, high
