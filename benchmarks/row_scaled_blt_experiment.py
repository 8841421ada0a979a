"""Experiment (issue 20, mean at T = 1024): a BLT encoder scaled by rows and columns.

The column-normalized BLT (:mod:`dpcount.counting.factorization.normalized_blt`) stops at a mean
loss of 8.938 at T = 1024 whatever its buffer count (L-BFGS-B from the shipped 8-buffer
entry, and from least-squares fits of the square root's coefficients with 9 and 12
buffers, all end at 8.9380), 2.3 % above the dense optimum 8.7347. Scaling the rows as
well, as :mod:`dpcount.counting.factorization.row_scaled_sqrt` does for the square root,

    C′ = diag(w)·C·diag(1/n),  n_j = ‖diag(w)·C[:, j]‖,  B′ = A·diag(n)·C⁻¹·diag(1/w),

keeps every column of C′ at norm 1 (sensitivity 1) and the stream bounded: the noise is
the running sum of n_t·(C⁻¹(z/w))_t, C⁻¹ a BLT, so n + 1 values per coordinate plus the
scalars w_t, n_t. This script computes the mean loss ‖B′‖²_F/T from dense T × T
matrices (checked against
:func:`~dpcount.counting.factorization.normalized_blt.normalized_blt_losses`
at w = 1), with ln w a Chebyshev series of degree 8 in y = 2(t + ½)/T − 1 (as the
row-scaled square root), and fits the series by L-BFGS-B for the shipped mean-optimized
BLT at T, then the BLT parameters and the series together.

Measured at T = 1024 (loaded 2-core machine, about 1 + 8 minutes): rows only 8.7462,
BLT and rows together 8.7451, 0.12 % above the dense optimum (target ≤ 8.822). Not a
dpcount mechanism yet: it needs the exact column norms and variances in O(T·n²),
multi-participation sensitivities and shipped parameters per horizon.

``--toeplitz`` first checks that column normalization alone cannot get there: it
optimizes every coefficient c_1 … c_{T−1} of a general lower-triangular Toeplitz encoder
for the column-normalized mean loss (jax gradients, L-BFGS-B), from the shipped BLT's
coefficients and from the square root's. At T = 1024 both runs end at 8.937505 (the same
to 14 digits, about 45 s each), 0.006 % below the shipped normalized BLT's 8.93805: no
column-normalized Toeplitz encoder, BLT or not, comes near 8.822 (a local search from
two starts, not a proof).

Run: ``PYTHONPATH=src python benchmarks/row_scaled_blt_experiment.py [T] [--toeplitz]``
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev
from numpy.typing import NDArray
from scipy.optimize import minimize

from dpcount.counting.factorization.blt import (
    blt_inverse,
    check_blt_parameters,
    encoder_coefficients,
)
from dpcount.counting.factorization.normalized_blt import (
    normalized_blt_losses,
    shipped_normalized_blt_parameters,
)
from dpcount.counting.factorization.optimize import _pack, _unpack

Array = NDArray[np.float64]


def mean_loss(theta: Array, omega: Array, log_weights: Array, T: int) -> float:
    """‖B′‖²_F / T for C′ = diag(w)·C·diag(1/n) (every column of C′ has norm 1)."""
    lag = np.arange(T)[:, None] - np.arange(T)[None, :]
    lower, idx = lag >= 0, np.clip(lag, 0, None)
    c = encoder_coefficients(theta, omega, T)
    inv = blt_inverse(theta, omega)
    g = np.ones(T)  # C⁻¹ = BLT(λ, ω′): g_0 = 1, g_k = Σ_i ω′_i λ_i^{k−1}
    k = np.arange(1, T)
    g[1:] = (inv.decay[None, :] ** (k[:, None] - 1)) @ inv.scale
    y = 2 * (np.arange(T) + 0.5) / T - 1
    w = np.exp(chebyshev.chebval(y, np.concatenate([[0.0], log_weights])))
    scaled = np.where(lower, c[idx], 0.0) * w[:, None]
    n = np.sqrt(np.einsum("ij,ij->j", scaled, scaled))
    B = np.cumsum(n[:, None] * np.where(lower, g[idx], 0.0) / w[None, :], axis=0)
    return float(np.einsum("ij,ij->", B, B)) / T


def best_normalized_toeplitz(T: int, start: Array) -> float:
    """Smallest column-normalized mean loss found over general Toeplitz encoders c
    (c_0 = 1, the rest free) by L-BFGS-B from ``start``. The loss is
    S(T)·‖A·diag(e)·C⁻¹‖²_F/T with S(m) = Σ_{k<m} c_k², e_j = √(S(T − j)/S(T))."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    jax.config.update("jax_enable_x64", True)
    lag = np.arange(T)[:, None] - np.arange(T)[None, :]
    lower, idx = jnp.asarray(lag >= 0), jnp.asarray(np.clip(lag, 0, None))

    def log_loss(tail: Any) -> Any:
        c = jnp.concatenate([jnp.ones(1), tail])
        g = solve_triangular(jnp.where(lower, c[idx], 0.0), jnp.eye(T)[:, 0], lower=True)
        S = jnp.cumsum(c * c)
        e = jnp.sqrt(S[::-1] / S[-1])
        B = jnp.cumsum(e[:, None] * jnp.where(lower, g[idx], 0.0), axis=0)
        return jnp.log(S[-1] * jnp.sum(B * B) / T)

    value_and_grad = jax.jit(jax.value_and_grad(log_loss))

    def f(x: Array) -> tuple[float, Array]:
        v, g = value_and_grad(jnp.asarray(x))
        return float(v), np.asarray(g)

    options = {"maxiter": 5000, "maxfun": 8000, "ftol": 1e-15, "gtol": 1e-12, "maxcor": 30}
    res = minimize(f, start[1:], jac=True, method="L-BFGS-B", options=options)
    return math.exp(float(res.fun))


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--toeplitz"]
    T = int(args[0]) if args else 1024
    theta, omega = check_blt_parameters(*shipped_normalized_blt_parameters(T, "mean"))
    if "--toeplitz" in sys.argv:
        k = np.arange(1, T)
        sqrt_c = np.concatenate([[1.0], np.exp(np.cumsum(np.log((2 * k - 1) / (2 * k))))])
        for name, start in (("BLT", encoder_coefficients(theta, omega, T)), ("sqrt", sqrt_c)):
            best = best_normalized_toeplitz(T, start)
            print(f"best column-normalized Toeplitz encoder from the {name}'s: {best:.6f}")
    shipped = normalized_blt_losses(theta.tolist(), omega.tolist(), T)[0]
    at_one = mean_loss(theta, omega, np.zeros(8), T)
    assert abs(at_one / shipped - 1) < 1e-9, (at_one, shipped)  # the dense oracle agrees
    print(f"T = {T}: column-normalized BLT (shipped) {shipped:.5f}")

    start = time.perf_counter()
    rows = minimize(
        lambda a: math.log(mean_loss(theta, omega, a, T)),
        np.zeros(8),
        method="L-BFGS-B",
        jac="2-point",
        options={"maxiter": 200},
    )
    print(
        f"rows scaled too: {math.exp(rows.fun):.5f} ({time.perf_counter() - start:.0f} s); "
        f"Chebyshev coefficients of ln w: {rows.x.tolist()}"
    )

    def joint(v: Array) -> float:
        try:
            th, om = _unpack(v[:-8])
            return math.log(mean_loss(th, om, v[-8:], T))
        except ValueError:  # left the BLT domain
            return 1e6

    start = time.perf_counter()
    both = minimize(
        joint,
        np.concatenate([_pack(theta, omega), rows.x]),
        method="L-BFGS-B",
        jac="2-point",
        options={"maxiter": 150},
    )
    th, om = _unpack(both.x[:-8])
    print(
        f"BLT and rows together: {math.exp(both.fun):.5f} ({time.perf_counter() - start:.0f} s)"
        f"; buffer_decay {th.tolist()}, output_scale {om.tolist()}, ln w {both.x[-8:].tolist()}"
    )


if __name__ == "__main__":
    main()
