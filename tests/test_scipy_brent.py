"""``dpcount._scipy.brent_root``: scipy's Brent solver in Python floats, the same double
as :func:`scipy.optimize.brentq` (so the Gaussian tail quantile and every bound built on
it are unchanged without ``import scipy.optimize``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import log_ndtr

from dpcount import _scipy
from dpcount._scipy import brent_root


def _functions(rng: np.random.Generator) -> list[tuple[Callable[[float], float], float, float]]:
    out: list[tuple[Callable[[float], float], float, float]] = []
    for _ in range(60):  # cubics with one real root, in [lo, hi]
        c = rng.normal(size=4)
        root = float(rng.uniform(-3, 3))

        def cubic(x: float, c: np.ndarray = c, r: float = root) -> float:
            return float(c[0] * (x - r) * ((x - c[1]) ** 2 + abs(c[2]) + 0.1))

        out.append((cubic, root - float(rng.uniform(0.1, 5)), root + float(rng.uniform(0.1, 5))))
    for lb in np.concatenate([-np.geomspace(1e-3, 5e4, 40), [-math.log(2) * 0.999]]):
        # the tail quantile's function (dpcount.privacy.tails)
        def tail(z: float, lb: float = float(lb)) -> float:
            return float(math.log(2.0) + log_ndtr(-z) - lb)

        out.append((tail, 0.0, math.sqrt(2.0 * (math.log(2.0) - lb))))
    out.append((lambda x: math.exp(x) - 2.0, -4.0, 4.0))
    out.append((lambda x: x**3, -1.0, 2.0))  # a triple root: many bisections
    out.append((lambda x: math.atan(x - 0.3), -1e6, 10.0))
    return out


def test_brent_root_is_scipys_brentq_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    for f, a, b in _functions(rng):
        for xtol, rtol in ((2e-12, 8.881784197001252e-16), (1e-14, 1e-14), (1e-3, 1e-6)):
            for lo, hi in ((a, b), (b, a)):
                try:
                    want = brentq(f, lo, hi, xtol=xtol, rtol=rtol)
                except RuntimeError:  # scipy's "failed to converge": ours too
                    with pytest.raises(RuntimeError, match="did not converge"):
                        brent_root(f, lo, hi, xtol=xtol, rtol=rtol)
                    continue
                got = brent_root(f, lo, hi, xtol=xtol, rtol=rtol)
                assert math.copysign(1.0, got) == math.copysign(1.0, want) and got == want


def test_brent_root_errors_and_exact_ends() -> None:
    with pytest.raises(ValueError, match="different signs"):
        brent_root(lambda x: x * x + 1.0, -1.0, 1.0)
    with pytest.raises(RuntimeError, match="did not converge"):
        brent_root(lambda x: x**3, -1.0, 2.0, maxiter=3)
    assert brent_root(lambda x: x, 0.0, 1.0) == 0.0
    assert brent_root(lambda x: x - 1.0, 0.0, 1.0) == 1.0
    f = np.polynomial.Polynomial([-0.5, 0.0, 0.0, 2.0])  # numpy floats in, a float out
    assert _scipy.brentq(f, 0.0, 1.0, xtol=1e-300, maxiter=400) == brentq(
        f, 0.0, 1.0, xtol=1e-300, maxiter=400
    )
