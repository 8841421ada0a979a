"""Multi-participation: the loss of each mechanism under (k, b)-participation, in one run.

Loss (issue 11's units) = per-step variance / the variance of a sensitivity-1 Gaussian
at the same (ε, δ), i.e. the noise coefficients Σ_j L[t, j]² times the squared ℓ₂
sensitivity of the encoder under the schema. For each mechanism: the mean and max
loss with the schema's sensitivity (``participation=``), the baseline k × the
single-participation sensitivity (what dpcount could do before), and the ratio of
each to the issue's target (jax_privacy's 512-banded Toeplitz: mean 47.40, max
64.37). The time of the sensitivity computation is printed against a floor measured
in the same run: one dense T×T Gram product CᵀC (what any dense method needs).

Usage: python benchmarks/bench_participation.py [--horizon T] [--k K] [--b B]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BLT, BinaryTree, CountingMechanism, SqrtFactorization
from dpcount.privacy import Participation, gaussian_sigma

TARGET_MEAN, TARGET_MAX = 47.40, 64.37


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--horizon", type=int, default=2048)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--b", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    T, eps, delta = args.horizon, 1.0, 1e-6
    schema = Participation(max_participations=args.k, min_separation=args.b)
    unit_var = gaussian_sigma(1.0, eps, delta) ** 2
    gauss = {"epsilon": eps, "delta": delta, "noise": "gaussian", "rng": 0}
    builders = {
        "sqrt": lambda **kw: SqrtFactorization(T, **kw),
        "blt (optimized)": lambda **kw: BLT.optimized(T, **kw),
        "binary tree": lambda **kw: BinaryTree(T, **kw),
    }
    rng = np.random.default_rng(0)
    dense = rng.random((T, T))
    floor = best_of(lambda: dense.T @ dense, args.repeats)
    print(f"T = {T}, k = {args.k}, b = {args.b}, epsilon = {eps}, delta = {delta}, Gaussian")
    print(f"floor: one dense {T}x{T} Gram product: {floor * 1e3:.1f} ms")
    header = (
        f"{'mechanism':16} {'mean':>8} {'max':>8} {'k x single':>17} {'/target':>13} "
        f"{'sens^2':>9} {'how':>30} {'time':>9} {'/floor':>7}"
    )
    print(header)
    for name, build in builders.items():
        mech: CountingMechanism = build(participation=schema, **gauss)
        single = build(**gauss)
        assert mech.participation_sensitivities is not None and single.privacy is not None
        _, s2 = mech.participation_sensitivities
        coef = mech.noise_coefficients()
        loss = coef * s2.value**2
        # The same loss from the calibrated variances: σ² = unit_var · sens² exactly.
        check = mech.variances() / unit_var
        if not np.allclose(loss, check, rtol=1e-9):
            raise AssertionError(f"{name}: loss units disagree")
        base = coef * (args.k * single.privacy.l2_sensitivity) ** 2
        seconds = best_of(lambda m=mech: m._schema_sensitivities(schema), args.repeats)
        how = f"{'exact' if s2.exact else 'bound'} ({s2.method})"
        print(
            f"{name:16} {loss.mean():8.3f} {loss.max():8.3f} "
            f"{base.mean():8.2f}/{base.max():8.2f} "
            f"{loss.mean() / TARGET_MEAN:6.3f}/{loss.max() / TARGET_MAX:6.3f} "
            f"{s2.value**2:9.4f} {how:>30} {seconds * 1e3:7.1f}ms {seconds / floor:7.2f}"
        )
    print(
        f"targets: mean <= {TARGET_MEAN}, max <= {TARGET_MAX} (met by the 512-banded optimized "
        "Toeplitz factorization: benchmarks/bench_frontier.py); the k x single column is "
        "the issue's baseline"
    )
    print(f"(run at {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC)")


if __name__ == "__main__":
    main()
