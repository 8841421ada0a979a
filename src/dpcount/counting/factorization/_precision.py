"""The level powers of the scaled BLT presets' long forms, the same doubles everywhere.

The long forms (:func:`~dpcount.counting.factorization.normalized_blt.
across_levels_exact`) carry the buffers across levels of chunks by the powers
ρ = λ^{c·k} of the decays, each as a pair of doubles hi + lo. :func:`decay_power_pairs`
computes them in Python's :mod:`decimal` at :data:`DIGITS` significant digits
(correctly rounded ``ln`` and ``exp``, General Decimal Arithmetic) from the accurate
d = 1 − λ, and rounds them to the pair by ``float(Decimal)`` (correctly rounded): the
pair's relative error is below 2^-104, and the pair is the same on every platform (the
rest of the long forms is double arithmetic, as every other mechanism's).

Until 2026-12-08 the powers came from numpy's long double (relative error
≤ (1 + |log ρ|)·2^-62 with x86-64's 80-bit one): a plain double on Windows and on macOS
with Apple silicon, where the presets then stopped at their plain forms' horizons
(2^16 / 2^17); now the long forms' limit, :data:`SCALED_BLT_LONG_HORIZON`, holds on every
platform (their float model measured with these powers: docs/safe-noise.md).
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["DIGITS", "SCALED_BLT_LONG_HORIZON", "decay_power_pairs"]

#: the largest horizon of the scaled BLT presets' long forms (measured:
#: blt.FLOAT_MODEL_HORIZONS)
SCALED_BLT_LONG_HORIZON = 1 << 24
#: significant decimal digits of the powers before their rounding to a pair of doubles
DIGITS = 50


def decay_power_pairs(
    one_minus_decay: Any, exponents: Any
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(hi, lo), each (len(d), len(k)): λ_i^{k_j} = hi + lo with λ_i = 1 − d_i exactly
    (``one_minus_decay`` d, doubles; ``exponents`` k, integers ≥ 0), hi the double
    nearest the power and lo the double nearest the rest; e^{k·ln λ} for λ > 0, the
    integer power otherwise, at :data:`DIGITS` digits: before the pair's rounding the
    relative error is ≲ (k + 2·|k·ln λ| + 1)·5·10^-50 (λ, ln λ, the product and exp each
    rounded once at 50 digits), ≤ 6·10^-41 for k ≤ 2^30 and |k·ln λ| ≤ 10^3, far below
    the pair's own ≤ 2^-105; below 2^-1074 both parts are 0."""
    d = np.asarray(one_minus_decay, dtype=np.float64).reshape(-1)
    k = [int(v) for v in np.asarray(exponents).reshape(-1)]
    if any(v < 0 for v in k):
        raise ValueError("exponents must be >= 0")
    hi, lo = np.empty((len(d), len(k))), np.empty((len(d), len(k)))
    with localcontext() as ctx:
        ctx.prec = DIGITS
        for i, di in enumerate(d.tolist()):
            lam = 1 - Decimal(di)  # exact: d's binary value, then one rounding at 50 digits
            log = lam.ln() if lam > 0 else None
            for j, kj in enumerate(k):
                if kj == 0:
                    power = Decimal(1)
                elif log is not None:
                    power = (kj * log).exp()
                else:
                    power = lam**kj
                high = float(power)
                hi[i, j], lo[i, j] = high, float(power - Decimal(high))
    return hi, lo
