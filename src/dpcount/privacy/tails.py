"""High-probability bounds on noise: the one home of dpcount's tail closed forms.

Numbers in, numbers out (no mechanism classes): counting mechanisms
(:meth:`~dpcount.counting.CountingMechanism.linf_bound`), range releases and the
apps' confidence intervals all call these.

Every counting mechanism releases S_t + N_t with N_t = Σ_s a_{t,s} ζ_s, ζ_s
i.i.d. (Gaussian or Laplace). The ℓ∞ bounds hold simultaneously for all t ≤ T
with probability ≥ 1 − β by a union bound over the T steps and both signs.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from dpcount._validate import check_integer, check_real

__all__ = [
    "check_beta",
    "gaussian_linf_bound",
    "gaussian_two_sided_quantile",
    "laplace_linf_bound",
    "log_ndtr",
]


def log_ndtr(x: float) -> float:
    """log Φ(x), the standard normal log-CDF: :func:`scipy.special.log_ndtr` itself (the
    same compiled ufunc, so the same double for every x), loaded without the rest of
    ``scipy.special`` when that is not imported yet (:func:`_log_ndtr_ufunc`).

    Why not a pure-Python log Φ: the analytic Gaussian calibration bisects on log σ
    until the bracket is a few ulp wide, so its last steps evaluate δ(σ) where the
    exact excess over the target is below the rounding error of any log Φ; which way
    they go depends on the last bits of scipy's evaluation. Measured over 288
    calibrations (ε from 0.01 to 16, δ from 1e-12 to 0.1, six sensitivities): a log Φ
    from :func:`math.erfc` gives σ with the same bits in 178, and 261 have a step whose
    excess lies within 10⁻¹⁴·|log δ| of zero (where no error bound could decide it
    without scipy). Seeded and keyed releases need the same σ bits, so the function
    stays scipy's; only its import is made cheap (~1 ms against ~0.2 s).
    """
    return float(_log_ndtr_ufunc()(x))


@lru_cache(maxsize=1)
def _log_ndtr_ufunc() -> Callable[[float], Any]:
    """The ufunc ``scipy.special.log_ndtr``: from ``scipy.special`` when imported, else
    from its compiled module alone (:func:`_special_ufuncs_alone`), else (any failure
    there: another scipy layout) by importing ``scipy.special``."""
    if "scipy.special" not in sys.modules:
        try:
            return _special_ufuncs_alone().log_ndtr  # type: ignore[no-any-return]
        except Exception:  # any failure: the ordinary import below
            pass
    from scipy.special import log_ndtr as ufunc

    return ufunc  # type: ignore[no-any-return]


#: the compiled module that defines ``scipy.special.log_ndtr`` (scipy ≥ 1.14)
_SPECIAL_UFUNCS = "scipy.special._special_ufuncs"


def _special_ufuncs_alone() -> types.ModuleType:
    """``scipy.special._special_ufuncs`` loaded from its file, without importing
    ``scipy`` or ``scipy.special`` (:func:`dpcount._scipy.compiled_alone`; their
    ``__init__`` modules cost ~0.2 s, this ~1 ms). A later ``import scipy.special``
    reuses it: ``scipy.special.log_ndtr`` is then the same object (tested)."""
    from dpcount._scipy import compiled_alone

    return compiled_alone(_SPECIAL_UFUNCS)


def check_beta(beta: float) -> float:
    """A failure probability β ∈ (0, 1)."""
    b = check_real("beta", beta)
    if not 0.0 < b < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {beta!r}")
    return b


def gaussian_two_sided_quantile(log_beta: float) -> float:
    """The z with P(|N(0, 1)| > z) = β, from log β (accurate for β down to ~1e-300000).

    Solves log 2 + log Φ(−z) = log β by Brent's method on [0, z_C], where
    z_C = √(2(ln 2 − ln β)) is the Chernoff bound (2e^{−z²/2} ≥ 2Φ(−z)), and
    returns the upper end of the final bracket, raised by a relative 1e-12 (a larger
    z is conservative). Working from log β keeps it exact where β/(2T) underflows.
    """
    return _two_sided_quantile(check_real("log_beta", log_beta, lt=0))


@lru_cache(maxsize=256)
def _two_sided_quantile(lb: float) -> float:
    """:func:`gaussian_two_sided_quantile` of a checked log β. Cached: a deterministic
    function of one float, asked for by every Gaussian row of ``compare`` at a horizon
    (the same β/T)."""
    from dpcount._scipy import brent_root as brentq  # scipy's brentq, without scipy.optimize

    upper = math.sqrt(2.0 * (math.log(2.0) - lb))

    def f(z: float) -> float:
        return float(math.log(2.0) + log_ndtr(-z) - lb)

    root = brentq(f, 0.0, upper, xtol=1e-14, rtol=1e-14)
    return float(min(upper, root * (1.0 + 1e-12) + 1e-12))


def gaussian_linf_bound(max_variance: float, horizon: int, beta: float) -> float:
    """b with P(max_{t≤T} |N_t| > b) ≤ β for Gaussian N_t of variance ≤ ``max_variance``.

    b = σ_max·z with P(|N(0,1)| > z) = β/T (:func:`gaussian_two_sided_quantile`): each
    |N_t| exceeds b with probability 2Φ̄(b/σ_t) ≤ 2Φ̄(b/σ_max) = β/T, and the union
    bound over the T steps gives β. Holds whatever the correlation between steps.
    """
    v = check_real("max_variance", max_variance, ge=0)
    T = check_integer("horizon", horizon, ge=1)
    b = check_beta(beta)
    return math.sqrt(v) * gaussian_two_sided_quantile(math.log(b) - math.log(T))


def laplace_linf_bound(
    scale: float,
    coefficient_l2_squared: float,
    horizon: int,
    beta: float,
    max_coefficient: float = 1.0,
) -> float:
    """b with P(max_{t≤T} |N_t| > b) ≤ β for N_t = Σ_s a_{t,s}ζ_s, ζ_s ~ Laplace(λ) i.i.d.

    Chernoff bound. With E e^{θaζ} = 1/(1 − θ²λ²a²) for |θaλ| < 1 and
    −ln(1 − u) ≤ u/(1 − u_max) for u ≤ u_max < 1:
    ln E e^{θN_t} ≤ θ²λ²·A/(1 − θ²λ²a_max²), where A ≥ Σ_s a_{t,s}² for every t and
    a_max ≥ max |a_{t,s}|. Writing x = θλa_max ∈ (0, 1), r = A/a_max² and
    ℓ = ln(2T/β), setting 2T·P(N_t > b) = β gives
    b = λ·a_max·(ℓ/x + r·x/(1 − x²)), minimized in closed form at
    x² = 2ℓ/((2ℓ + r) + √(r(r + 8ℓ))).

    Args:
        scale: λ of the Laplace noise.
        coefficient_l2_squared: A, an upper bound on Σ_s a_{t,s}² over all t
            (Var_t / (2λ²) at the worst step).
        horizon: T, the number of steps in the union bound.
        beta: failure probability β ∈ (0, 1).
        max_coefficient: a_max ≥ max_{t,s} |a_{t,s}| (1 for every counting
            mechanism in dpcount).
    """
    lam = check_real("scale", scale, gt=0)
    A = check_real("coefficient_l2_squared", coefficient_l2_squared, gt=0)
    T = check_integer("horizon", horizon, ge=1)
    b = check_beta(beta)
    a_max = check_real("max_coefficient", max_coefficient, gt=0)
    ell = math.log(2.0 * T / b)
    r = A / (a_max * a_max)
    y = 2.0 * ell / ((2.0 * ell + r) + math.sqrt(r * (r + 8.0 * ell)))
    x = math.sqrt(y)
    return lam * a_max * (ell / x + r * x / (1.0 - y))
