"""Max loss of the column-normalized square root at a large horizon (default 2^20).

:func:`dpcount.analysis.certificates.normalized_sqrt_losses` computes every step's loss
exactly in O(T²), which is too slow at T = 2^20. One step's loss is one correlation,
loss_t = Σ_{j≤t} (Σ_{s=j}^{t} g_{s−j} √S(T − s))², O(T log T) by FFT (rounding about
1e-12 relative). This script finds the step with the largest loss by a golden-section
search over t ∈ [0.3 T, 0.9 T] (it assumes loss_t is unimodal there — not proven;
the search agrees with the exact maximum at T = 4096, checked on every run, and at
T = 16384), then takes the largest of the last bracket's steps. The value printed is
an exact step's loss, so it is a lower bound on the max loss if the assumption fails.
Prints the max loss, its step, and ratios to the square root's max loss and to
(0.846 + ln T/π)² (Henzinger–Kalinin–Upadhyay 2025, arXiv:2509.14334).

Run: ``PYTHONPATH=src python benchmarks/normalized_sqrt_max.py [LOG2_T]`` (≈ 5 s at 2^20).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import numpy as np
from scipy.signal import fftconvolve

from dpcount.analysis.certificates import normalized_sqrt_losses
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients, sqrt_l2_norm_squared


def row_loss(T: int) -> Callable[[int], float]:
    f = sqrt_coefficients(T)
    weight = np.sqrt(np.cumsum(f * f))[::-1]
    g = np.ones(T)
    k = np.arange(1, T, dtype=np.float64)
    g[1:] = np.cumprod((k - 1.5) / k)
    cache: dict[int, float] = {}

    def loss(t: int) -> float:
        if t not in cache:
            r = fftconvolve(weight[: t + 1][::-1], g[: t + 1])[: t + 1]
            cache[t] = float(r @ r)
        return cache[t]

    return loss


def search_max(T: int) -> tuple[int, float, int]:
    loss = row_loss(T)
    a, b = int(0.3 * T), int(0.9 * T) - 1
    phi = (math.sqrt(5) - 1) / 2
    while b - a > 8:
        c, d = int(b - phi * (b - a)), int(a + phi * (b - a))
        if loss(c) > loss(d):
            b = d
        else:
            a = c
    t = max(range(a, b + 1), key=loss)
    return t, loss(t), a


def main() -> None:
    log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    check = 4096
    _, exact_max = normalized_sqrt_losses(check)
    t, found, _ = search_max(check)
    if abs(found - exact_max) > 1e-9 * exact_max:
        raise SystemExit(f"self-check failed at T = {check}: {found} vs {exact_max}")
    print(f"self-check T = {check}: search max {found:.9f} = exact {exact_max:.9f}")
    T = 2**log2
    start = time.perf_counter()
    t, best, _ = search_max(T)
    seconds = time.perf_counter() - start
    sqrt_max = sqrt_l2_norm_squared(T) ** 2
    hku = (0.846 + math.log(T) / math.pi) ** 2
    print(
        f"T = 2^{log2}: column-normalized sqrt max loss {best:.6f} at t = {t + 1} "
        f"({(t + 1) / T:.3f} T), {seconds:.1f} s; sqrt {sqrt_max:.6f} (ratio "
        f"{best / sqrt_max:.4f}); (0.846 + ln T/pi)^2 = {hku:.6f} (ratio {best / hku:.4f})"
    )


if __name__ == "__main__":
    main()
