"""Optimizers: the dense optimum and optimized (banded) Toeplitz factorizations.

Losses are in the units of ``dpcount.counting.factorization.optimize`` (variance over that of a
sensitivity-1 Gaussian at the same (ε, δ); the same at every (ε, δ)). Times are
printed beside a floor measured in the same run:

* ``optimize_dense`` (``--dense``, default T = 1024 2048): wall time against one
  dense T×T eigendecomposition (``scipy.linalg.eigh``, the per-iteration cost of the
  previous algorithm); loss, the certified lower bound and their gap. Target (issue
  11): T = 1024 in under 60 s. ``--before`` also runs the previous algorithm (dense
  eigh per iteration, kept below as ``previous_optimize_dense``) with at most
  ``--before-iterations`` iterations.
* ``optimize_toeplitz`` (``--toeplitz``, default T = 1024 16384): mean and max
  objectives, full Toeplitz; and banded (``--banded`` T b k, default 2048 512 4)
  with the (k, b)-participation loss. Time against one loss-and-gradient
  evaluation. Reference figures (issue 11 table): T = 1024 mean: dense optimum
  8.735, sqrt 9.671, BLT 9.347; T = 16384 mean: BLT 15.544; banded 2048/512/4:
  jax_privacy 47.40 (mean), 64.37 (max).

Usage: python benchmarks/bench_optimize.py [--dense T ...] [--toeplitz T ...]
       [--banded T b k] [--before] [--before-iterations N]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import scipy.linalg as sl

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting.factorization.optimize import optimize_dense
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients
from dpcount.counting.factorization.toeplitz import (
    _LogLoss,
    banded_participation_loss,
    optimize_toeplitz,
    toeplitz_losses,
)


def previous_optimize_dense(T: int, max_iterations: int) -> tuple[float, int, float]:
    """The previous optimize_dense (dpcount before this change): one dense eigh per
    fixed-point step, stop at a relative loss change below 1e-6. Returns (mean loss of
    the best normalized iterate, iterations, seconds)."""
    begin = time.perf_counter()
    idx = np.arange(T)
    gram = (T - np.maximum.outer(idx, idx)).astype(np.float64)
    v = np.ones(T)
    previous, best = math.inf, math.inf
    it = 0
    while it < max_iterations:
        it += 1
        s = np.sqrt(v)
        w, U = sl.eigh(s[:, None] * gram * s[None, :], driver="evd")
        X = (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T
        X /= s[:, None]
        X /= s[None, :]
        d = np.diag(X).copy()
        loss = float(np.sum(v * d)) * float(d.max()) / T
        best = min(best, loss)
        if abs(previous - loss) <= 1e-6 * loss:
            break
        previous = loss
        v *= d**3
    return best, it, time.perf_counter() - begin


def dense_rows(horizons: list[int], before: bool, before_iterations: int) -> None:
    print("optimize_dense (mean loss)")
    for T in horizons:
        idx = np.arange(T)
        gram = (T - np.maximum.outer(idx, idx)).astype(np.float64)
        floor = best_of(lambda g=gram: sl.eigh(g, driver="evd"), 1)
        r = optimize_dense(T)
        gap = r.loss / r.lower_bound - 1.0
        print(
            f"  T={T}: loss {r.loss:.6f}  lower bound {r.lower_bound:.6f}  gap {gap:.2e}  "
            f"iterations {r.iterations}  time {r.seconds:.2f} s = "
            f"{r.seconds / floor:.2f}x one dense eigh ({floor:.2f} s)"
        )
        if before:
            loss, it, seconds = previous_optimize_dense(T, before_iterations)
            print(
                f"  T={T} previous algorithm: loss {loss:.6f}  iterations {it}  time "
                f"{seconds:.2f} s = {seconds / floor:.2f}x one dense eigh; "
                f"speed-up {seconds / r.seconds:.1f}x"
            )


def toeplitz_rows(horizons: list[int], banded: tuple[int, int, int]) -> None:
    print("optimize_toeplitz (single participation)")
    for T in horizons:
        sq = toeplitz_losses(sqrt_coefficients(T), T)
        fun = _LogLoss(T, T, "mean")
        x0 = sqrt_coefficients(T)[1:]
        floor = best_of(lambda f=fun, x=x0: f(x), 3)
        for objective in ("mean", "max"):
            r = optimize_toeplitz(T, objective=objective)
            ref = sq.mean_loss if objective == "mean" else sq.max_loss
            print(
                f"  T={T} {objective}: loss {r.loss:.4f} (sqrt {ref:.4f}, ratio "
                f"{r.loss / ref:.4f})  iterations {r.iterations}  time {r.seconds:.2f} s = "
                f"{r.seconds / floor:.0f}x one evaluation ({floor * 1e3:.1f} ms)"
            )
    T, b, k = banded
    print(f"banded Toeplitz, T={T}, bands={b}, (k={k}, b={b})-participation")
    fun = _LogLoss(T, b, "mean")
    floor = best_of(lambda: fun(sqrt_coefficients(b)[1:]), 3)
    for objective in ("mean", "max"):
        r = optimize_toeplitz(T, objective=objective, bands=b)
        losses = {
            o: banded_participation_loss(
                r.coefficients, T, participations=k, min_separation=b, objective=o
            )
            for o in ("mean", "max")
        }
        print(
            f"  {objective}-optimized: mean loss {losses['mean']:.4f}  max loss "
            f"{losses['max']:.4f}  iterations {r.iterations}  time {r.seconds:.2f} s = "
            f"{r.seconds / floor:.0f}x one evaluation"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dense", type=int, nargs="*", default=[1024, 2048])
    parser.add_argument("--toeplitz", type=int, nargs="*", default=[1024, 16384])
    parser.add_argument("--banded", type=int, nargs=3, default=[2048, 512, 4])
    parser.add_argument("--before", action="store_true")
    parser.add_argument("--before-iterations", type=int, default=100)
    args = parser.parse_args()
    toeplitz_rows(args.toeplitz, tuple(args.banded))
    dense_rows(args.dense, args.before, args.before_iterations)


if __name__ == "__main__":
    main()
