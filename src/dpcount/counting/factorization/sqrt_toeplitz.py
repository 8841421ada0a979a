"""The square-root Toeplitz factorization of the counting matrix: closed forms and convolution.

Fichtenberger, Henzinger, Upadhyay, "Constant Matters" (ICML 2023), Algorithm 1:
the all-ones lower-triangular T×T matrix A factors as A = L·R with
L = R = the lower-triangular Toeplitz matrix of f(k) = f(k−1)(2k−1)/(2k), f(0) = 1
(the same matrix as √A in Henzinger–Upadhyay–Upadhyay, SODA 2023).

Notation (paper → code):

==================  ==============================================================
f(k)                :func:`sqrt_coefficients` — f(k) = C(2k, k)/4^k = Γ(k+½)/(√π·Γ(k+1))
‖R‖₁→₂² = ‖L‖₂→∞²   :func:`sqrt_l2_norm_squared` — S(T) = Σ_{k<T} f(k)²
‖R‖₁→₁              :func:`sqrt_l1_norm` — Σ_{k<T} f(k) = (2T − 1)·f(T − 1)
Var_t / σ²          S(t) (prefix sums of f²); its mean over t ≤ T is
                    :func:`sqrt_mean_variance_coefficient`
Ψ(T)                :func:`psi_bound` — eq. (4), the paper's upper bound on S(T)
==================  ==============================================================

Erratum to the paper's Theorem 1.1 / Lemma 3.3 (checked numerically): Ψ(T) is
*below* S(T) (e.g. T = 2^16: Ψ = 4.396, S = 4.596) because f(1)² = 1/4 > 1/(2π);
calibrate with S(T), never with Ψ(T).

References: H. Fichtenberger, M. Henzinger, J. Upadhyay, "Constant Matters:
Fine-grained Error Bound on Differentially Private Continual Observation", ICML 2023,
https://arxiv.org/abs/2202.11205; M. Henzinger, J. Upadhyay, S. Upadhyay, "Almost
tight error bounds on differentially private continual counting", SODA 2023,
https://doi.org/10.1137/1.9781611977554.ch183.

Exactness. For k < 1024 every value is the correctly rounded float of an exact
rational (Python integers: C(2k, k)/4^k and Σ C(2k, k)²/16^k). Beyond, f(k) comes
from the asymptotic series of ln Γ(k+½) − ln Γ(k+1) (Bernoulli numbers) and the
sums from the series f(k)² = (1/(πk))·Σ_m d_m k^{−m} summed exactly with digamma /
Hurwitz zeta; truncation errors are below 10^−24 relative at k ≥ 1024, so the
results are accurate to a few units in the last place. Tests check both against
mpmath.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_integer

__all__ = [
    "causal_convolution",
    "psi_bound",
    "sqrt_coefficient_block",
    "sqrt_coefficients",
    "sqrt_l1_norm",
    "sqrt_l2_norm_squared",
    "sqrt_mean_variance_coefficient",
]

#: below this index every value is an exactly rounded rational
_EXACT = 1024

# ln f(k) = −½ ln(πk) + Σ_n c_n k^−n: c_n = (−1)^{n+1}(B_{n+1}(½) − B_{n+1}(1))/(n(n+1)),
# i.e. (2^−n − 2)·B_{n+1}/(n(n+1)) for odd n (zero for even n).
_LOG_F_SERIES = ((1, -1 / 8), (3, 1 / 192), (5, -1 / 640), (7, 17 / 14336))

# π k f(k)² = Σ_m d_m k^−m (the exponential of twice the series above).
_F2_SERIES = (
    Fraction(1),
    Fraction(-1, 4),
    Fraction(1, 32),
    Fraction(1, 128),
    Fraction(-5, 2048),
    Fraction(-23, 8192),
    Fraction(53, 65536),
    Fraction(593, 262144),
    Fraction(-5165, 8388608),
)


def _tables_to(
    n: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_exact_tables` for the indices below n ≤ 1024: the smallest power of two
    ≥ n (at least 128) entries, the prefix of the full tables bit for bit (big-integer
    work grows as the square of the size: a small horizon needs a fraction of it)."""
    return _exact_tables(min(_EXACT, max(128, 1 << max(n - 1, 0).bit_length())))


@lru_cache(maxsize=8)
def _exact_tables(
    size: int = _EXACT,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Correctly rounded f(k), S(k+1), W(k+1) = Σ_{j≤k} j f(j)², Σ_{j≤k} f(j) for k < size."""
    f = np.empty(size)
    s = np.empty(size)
    w = np.empty(size)
    l1 = np.empty(size)
    a = b = c = 0  # Σ_{j≤k} C(2j,j)²·16^{k−j}, the same weighted by j, Σ C(2j,j)·4^{k−j}
    binom, four, sixteen = 1, 1, 1  # C(2k, k), 4^k, 16^k: exact integers, updated per k
    for k in range(size):
        if k:  # C(2k, k) = C(2k − 2, k − 1)·2k(2k − 1)/k², exactly (no math.comb per k)
            binom = binom * (2 * k) * (2 * k - 1) // (k * k)
            four <<= 2
            sixteen <<= 4
        square = binom * binom
        a = (a << 4) + square
        b = (b << 4) + k * square
        c = (c << 2) + binom
        f[k] = binom / four  # int / int: correctly rounded
        s[k] = a / sixteen
        w[k] = b / sixteen
        l1[k] = c / four
    return f, s, w, l1


def _log_f_tail(k: NDArray[np.float64]) -> NDArray[np.float64]:
    """ln f(k) + ½ ln(πk) for k ≥ 1024: the odd series in 1/k (truncation error < 1e-29)."""
    x = 1.0 / k
    x2 = x * x
    acc = np.zeros_like(k)
    for _, coef in reversed(_LOG_F_SERIES):  # Horner in x² over the odd powers
        acc = acc * x2 + coef
    out: NDArray[np.float64] = x * acc
    return out


def _f_tail(k: NDArray[np.float64]) -> NDArray[np.float64]:
    """f(k) for k ≥ 1024 as e^u/√(πk), u = the series above (|u| < 1.3e-4).

    e^u by its Taylor polynomial to u⁴ (remainder < u⁵/120 < 4e-22).
    """
    u = _log_f_tail(k)
    e = 1.0 + u * (1.0 + u * (0.5 + u * (1.0 / 6.0 + u * (1.0 / 24.0))))
    out: NDArray[np.float64] = e / np.sqrt(np.pi * k)
    return out


def sqrt_coefficients(n: int) -> NDArray[np.float64]:
    """f(0), …, f(n − 1) of constant-matters Algorithm 1 (relative error < 2e-15).

    f(0) = 1 and f(k) = f(k − 1)(2k − 1)/(2k), i.e. f(k) = C(2k, k)/4^k. Correctly
    rounded below k = 1024 and from the asymptotic series of ln Γ(k+½) − ln Γ(k+1)
    above (the running product would accumulate ~k rounding errors).
    """
    n = check_integer("n", n, ge=0)
    exact = _tables_to(n)[0]
    if n <= _EXACT:
        out: NDArray[np.float64] = exact[:n].copy()
        return out
    out = np.empty(n)
    out[:_EXACT] = exact
    step = 1 << 15  # cache-sized pieces: the series costs ~20 passes over its input
    for a in range(_EXACT, n, step):
        b = min(n, a + step)
        out[a:b] = _f_tail(np.arange(a, b, dtype=np.float64))
    return out


def sqrt_coefficient_block(a: int, b: int) -> NDArray[np.float64]:
    """f(a), …, f(b − 1): ``sqrt_coefficients(b)[a:b]`` bit for bit, in O(b − a) memory."""
    a = check_integer("a", a, ge=0)
    b = check_integer("b", b, ge=a)
    out = np.empty(b - a)
    split = min(max(a, _EXACT), b)  # [a, split) from the exact table, [split, b) the series
    out[: split - a] = _tables_to(split)[0][a:split]
    if split < b:
        out[split - a :] = _f_tail(np.arange(split, b, dtype=np.float64))
    return out


def _f_at(k: int) -> float:
    if k < _EXACT:
        return float(_tables_to(k + 1)[0][k])
    return float(_f_tail(np.array([float(k)]))[0])


def _power_sums(a: int, b: int, shift: int) -> float:
    """(1/π) Σ_{k=a}^{b−1} k^shift · Σ_m d_m k^{−1−m}, i.e. the tail of Σ k^shift f(k)²."""
    from scipy.special import psi as digamma  # here: small horizons never reach the tail
    from scipy.special import zeta

    total = 0.0
    # Sum the smallest terms first.
    for m in range(len(_F2_SERIES) - 1, -1, -1):
        p = 1 + m - shift  # power of 1/k in this term
        if p == 0:
            part = float(b - a)
        elif p == 1:
            part = float(digamma(b) - digamma(a))
        else:
            part = float(zeta(p, a) - zeta(p, b))
        total += float(_F2_SERIES[m]) * part
    return total / math.pi


def sqrt_l2_norm_squared(horizon: int) -> float:
    """S(T) = Σ_{k<T} f(k)² = ‖L‖²₂→∞ = ‖R‖²₁→₂ of the T×T square-root factorization.

    This is the squared ℓ₂ sensitivity of R·x for a unit change at one step (the
    first column of R), and the largest per-step noise variance in units of the
    noise variance. Exact to ~1 ulp (see the module docstring); O(1).
    """
    T = check_integer("horizon", horizon, ge=1)
    s = _tables_to(T)[1]
    if T <= _EXACT:
        return float(s[T - 1])
    return float(s[-1]) + _power_sums(_EXACT, T, 0)


def _weighted_sum(horizon: int) -> float:
    """W(T) = Σ_{k<T} k·f(k)²."""
    w = _tables_to(horizon)[2]
    if horizon <= _EXACT:
        return float(w[horizon - 1])
    return float(w[-1]) + _power_sums(_EXACT, horizon, 1)


def sqrt_mean_variance_coefficient(horizon: int) -> float:
    """(1/T)·Σ_{t=1}^{T} S(t) = S(T) − W(T)/T: the MSE in units of the noise variance.

    Var_t = σ²·S(t) with S(t) = Σ_{k<t} f(k)², so the mean over t is
    Σ_{k<T} (1 − k/T) f(k)². O(1).
    """
    T = check_integer("horizon", horizon, ge=1)
    return sqrt_l2_norm_squared(T) - _weighted_sum(T) / T


def sqrt_l1_norm(horizon: int) -> float:
    """‖R‖₁→₁ = Σ_{k<T} f(k) = (2T − 1)·f(T − 1), the ℓ₁ sensitivity of R·x.

    The identity Σ_{k≤n} C(2k, k)/4^k = (2n + 1)·C(2n, n)/4^n follows by induction
    from f(n + 1) = f(n)(2n + 1)/(2n + 2). O(1).
    """
    T = check_integer("horizon", horizon, ge=1)
    if T <= _EXACT:
        return float(_tables_to(T)[3][T - 1])
    return (2 * T - 1) * _f_at(T - 1)


def psi_bound(horizon: int) -> float:
    """Ψ(T) = 1 − (1 − γ)/π + ln(T)/π + 2/T, constant-matters eq. (4).

    The paper's Theorem 1.1 / Lemma 3.3 claim ‖L‖₂→∞·‖R‖₁→₂ = S(T) ≤ Ψ(T); this is
    false for every T ≥ 11 (S(T) > Ψ(T), e.g. 4.596 vs 4.396 at T = 2^16; the gap
    tends to 0.2009). Reported as the paper's figure only; γ is the
    Euler–Mascheroni constant.
    """
    T = check_integer("horizon", horizon, ge=1)
    return 1.0 - (1.0 - float(np.euler_gamma)) / math.pi + math.log(T) / math.pi + 2.0 / T


# Largest number of float64 elements per FFT pass when convolving many columns.
_COLUMN_BUDGET = 1 << 23


#: a kernel spectrum of an FFT length up to this is kept in a ``spectra`` cache: 2 MiB
#: each; a stream's doubling blocks and a batch release at most ~7 MiB in all
_SPECTRUM_LENGTH = 1 << 18


def causal_convolution(
    kernel: NDArray[np.float64],
    signal: NDArray[np.float64],
    start: int,
    stop: int,
    *,
    spectra: dict[tuple[int, int], NDArray[np.complex128]] | None = None,
) -> NDArray[np.float64]:
    """out[i] = Σ_{j=0}^{i} kernel[i − j]·signal[j] for start ≤ i < stop (along axis 0).

    One real FFT of length n ≥ 2·stop − start − 1 (``scipy.fft.next_fast_len``), the
    smallest circular length whose wrap-around misses outputs ≥ start. ``signal``
    may be 2-D (steps × columns); columns are convolved in groups that keep each
    pass within a fixed memory budget.

    Args:
        kernel: at least ``stop`` values (only the first ``stop`` are used).
        signal: at least ``stop`` rows (only the first ``stop`` are used).
        start, stop: the output range, 0 ≤ start < stop.
        spectra: optional cache of the kernel's spectra by (stop, n), kept by the
            kernel's owner for the kernel (the same transform of the same values: the
            same floats); read, and filled for FFT lengths up to :data:`_SPECTRUM_LENGTH`.
    """
    if not 0 <= start < stop:
        raise ValueError(f"need 0 <= start < stop, got start={start}, stop={stop}")
    import scipy.fft as sfft  # here: the closed forms of this module need no FFT

    n = sfft.next_fast_len(2 * stop - start - 1, real=True)
    spectrum = None if spectra is None else spectra.get((stop, n))
    if spectrum is None:
        spectrum = sfft.rfft(kernel[:stop], n)
        if spectra is not None and n <= _SPECTRUM_LENGTH:
            spectrum.setflags(write=False)
            spectra[(stop, n)] = spectrum
    if signal.ndim == 1:
        out: NDArray[np.float64] = sfft.irfft(sfft.rfft(signal[:stop], n) * spectrum, n)
        return out[start:stop]
    d = signal.shape[1]
    result = np.empty((stop - start, d))
    group = max(1, _COLUMN_BUDGET // n)
    for c0 in range(0, d, group):
        c1 = min(d, c0 + group)
        z = sfft.rfft(signal[:stop, c0:c1], n, axis=0)
        z *= spectrum[:, None]
        result[:, c0:c1] = sfft.irfft(z, n, axis=0)[start:stop]
    return result
