"""EigenDesign (Li & Miklau 2012, "An adaptive mechanism for accurate query answering
under differential privacy"), Gaussian noise, for n ≤ 1024.

The strategy queries are the eigenvectors q_i of the workload's Gram matrix
WᵀW = Σ λ_i q_i q_iᵀ, scaled by weights √u_i: A = diag(√u) Qᵀ. Answering y = Ax + N(0, σ²I)
and estimating x̂ = (AᵀA)⁻¹Aᵀy = Q diag(1/√u) y gives a consistent histogram whose
noise has covariance σ²·Q diag(1/u) Qᵀ, so the workload's total squared error is
σ²·Σ λ_i/u_i. The weights minimize it under the sensitivity constraint
max_j ‖A e_j‖₂² = max_j Σ_i u_i Q_ji² ≤ 1 — the eigen-design program (convex). It is
solved through its concave dual, max_{μ≥0} 2Σ_i √(λ_i (Mᵀμ)_i) − Σ_j μ_j with
M_ji = Q_ji² (L-BFGS-B), whose maximizer gives u_i = √(λ_i/(Mᵀμ)_i); the weights are
then rescaled so that the constraint is tight. Privacy never depends on the solver:
σ is calibrated to the ℓ₂ sensitivity of the final A, computed exactly.
The release is computed in the equivalent form x̂ = x + Q diag(1/√u)·N (same law:
Q diag(1/√u)·A = I), so the data enter only through one exact addition per cell.
Eigenvalues below 1e-10·λ_max are raised to that floor so that A is invertible.

Guarantee: (ε, δ)-DP for histograms differing by at most 1 in one cell.

``noise="discrete-gaussian"`` (whole-number cells): the strategy is snapped, once and
publicly, to the grid γ = 2^-g (``grid_bits=g``, default 20): M = round(A/γ), an
integer matrix, and the mechanism measures the integer vector Mx — computed exactly in
integer arithmetic — plus i.i.d. N_Z(0, σ_g²) (Canonne, Kamath, Steinke 2020, Alg. 3).
This is the granularity idea of Mironov 2012 (snapping) and of the Google DP library's
secure noise: here the *public* strategy is put on the grid, so the data need no
rounding at all and nothing is biased. A neighbour shifts Mx by ±M e_i, an integer
vector, so the release is ρ-zCDP with ρ = max_i ‖M e_i‖₂²/(2σ_g²) (CKS Thm 14; (ε, δ)
by Cor. 13), with ‖M e_i‖₂² computed exactly in integers. The estimate
x̂ = (γM)⁻¹·γ(Mx + η) = x + γM⁻¹η is post-processing of the noisy integers; its noise
covariance γ²·Var N_Z(0, σ_g²)·M⁻¹M⁻ᵀ is exact up to the float inversion. Snapping moves
each entry of A by at most γ/2, so the sensitivity and the error change by a relative
O(√n·γ) (below 1e-4 for n ≤ 1024 at the default g = 20).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.linalg import eigh
from scipy.optimize import minimize

from dpcount._validate import check_integer
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.ranges._models import DenseCovariance
from dpcount.ranges.mechanism import FloatArray, RangeMechanism
from dpcount.ranges.release import HistogramRelease
from dpcount.ranges.workloads import AllRanges, as_workload

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EigenDesignMechanism", "eigen_weights"]

MAX_CELLS = 1024
_EIGEN_FLOOR = 1e-10


def eigen_weights(eigenvalues: FloatArray, squares: FloatArray) -> FloatArray:
    """Weights u ≥ 0 minimizing Σ λ_i/u_i subject to max_j Σ_i u_i·squares[j, i] = 1.

    ``squares[j, i]`` = Q_ji² (rows: cells, columns: eigenvectors).
    """
    lam = eigenvalues / eigenvalues.max()
    m = squares

    def negative_dual(mu: FloatArray) -> tuple[float, FloatArray]:
        s = np.maximum(m.T @ mu, 1e-300)
        root = np.sqrt(lam * s)
        value = 2.0 * root.sum() - mu.sum()
        grad = m @ np.sqrt(lam / s) - 1.0
        return -value, -grad

    n = lam.size
    start = np.full(n, float(np.sqrt(lam).sum()) ** 2 / n)  # optimal for uniform rows
    result = minimize(
        negative_dual,
        start,
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * n,
        options={"maxiter": 2000, "ftol": 1e-13, "gtol": 1e-10},
    )
    s = np.maximum(m.T @ result.x, 1e-300)
    u = np.sqrt(lam / s)
    return np.asarray(u / np.max(m @ u), dtype=np.float64)


class EigenDesignMechanism(RangeMechanism):
    """Eigen-design strategy for a workload (default: all ranges); 1-D, n ≤ 1024.

    Args:
        shape, epsilon, delta, calibration, rng: as for the other mechanisms.
        workload: an :class:`~dpcount.ranges.AllRanges`, ``RangeWorkload`` or
            ``DenseWorkload`` over the same n (default ``AllRanges(n)``).
        noise: ``"gaussian"`` (default) or ``"discrete-gaussian"`` (strategy snapped to
            the grid 2^-grid_bits; see the module docstring).
        grid_bits: g in [8, 26] for the discrete strategy grid γ = 2^-g (default 20).

    Formal guarantee:
        Neighbouring relation: histograms x, x' that differ by at most 1 in one
        cell, ‖x − x'‖₁ ≤ 1 (one record added or removed).

        The strategy A = diag(√u) Qᵀ (eigenvectors of WᵀW, weights from the
        eigen-design program) is measured with i.i.d. noise; a neighbour changes Ax by
        A e_j, so the ℓ₂ sensitivity is max_j ‖A e_j‖₂, computed exactly from the final
        A (privacy never depends on the solver). The estimate x̂ is post-processing.

        * ``"gaussian"`` (default): (ε, δ)-DP, continuous N(0, σ²) noise with σ
          for ℓ₂ sensitivity max_j ‖A e_j‖₂ by the analytic Gaussian mechanism (Balle & Wang
          2018, Theorem 8; ``calibration="analytic"``, default, exact for every ε),
          the tail bound of correlated-input-perturbation Thm 3.7 (``"paper"``,
          ε ≤ 1) or the classic bound (``"classic"``, Dwork & Roth 2014, Thm A.1).
        * ``"discrete-gaussian"`` (whole-number cells): ρ-zCDP with
          ρ = max_i ‖M e_i‖₂²/(2σ_g²) for the snapped integer strategy
          M = round(A/γ), computed exactly in integers (Canonne, Kamath, Steinke
          2020, Thm 14), reported as (ε, δ)-DP by their Corollary 13
          (``calibration="zcdp"``).

        Exact variance: x̂ − x has covariance σ²·Q diag(1/u) Qᵀ, so the workload's total
        squared error is σ²·Σ λ_i/u_i and every query's variance is exact (for the
        discrete Gaussian: γ²·Var N_Z(0, σ_g²)·M⁻¹M⁻ᵀ, exact up to the float
        inversion).

    References:
        * C. Li, G. Miklau. "An adaptive mechanism for accurate query answering
          under differential privacy". PVLDB 5(6), 2012. (no link)
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530
        * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
          Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
        * I. Mironov. "On significance of the least significant bits for
          differential privacy". ACM CCS 2012. (no link)
        * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
          Foundations and Trends in Theoretical Computer Science 9(3–4), 2014.
          https://doi.org/10.1561/0400000042
    """

    name = "eigen"
    supports_discrete_noise = True

    def __init__(
        self,
        shape: int | tuple[int, ...],
        *,
        workload: Any = None,
        grid_bits: int = 20,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        budget = Budget.resolve(budget, fields, owner="EigenDesignMechanism")
        self.shape = self._check_shape(shape, self.max_dims)
        n = self.shape[0]
        if n > MAX_CELLS:
            raise ValueError(
                f"shape must be at most {MAX_CELLS} cells for EigenDesign (a dense n×n "
                f"eigendecomposition), got n={n}"
            )
        self.workload = AllRanges(n) if workload is None else as_workload(workload, n)
        eigenvalues, vectors = eigh(self.workload.gram())
        eigenvalues = np.maximum(eigenvalues, _EIGEN_FLOOR * eigenvalues.max())
        self.weights = eigen_weights(eigenvalues, vectors**2)
        self._vectors = vectors
        self.strategy = np.sqrt(self.weights)[:, None] * vectors.T
        columns = self.strategy
        self.grid_bits = check_integer("grid_bits", grid_bits, ge=8, le=26)
        if budget.noise == "discrete-gaussian":
            self._snap_strategy()
            columns = self._integer_strategy.astype(np.float64)
        super().__init__(
            self.shape,
            budget=budget,
            rng=rng,
            l2_sensitivity=float(np.sqrt(np.max(np.sum(columns**2, axis=0)))),
            l1_sensitivity=float(np.max(np.sum(np.abs(columns), axis=0))),
        )
        if self.discrete:  # report σ in the units of the strategy answers, like Gaussian
            self.sigma = self.sigma * 2.0**-self.grid_bits

    def _snap_strategy(self) -> None:
        """M = round(A·2^g) (int64), its exact column norms and the inverse of γM."""
        m = np.rint(np.ldexp(self.strategy, self.grid_bits)).astype(np.int64)
        snapped = np.ldexp(m.astype(np.float64), -self.grid_bits)  # γM, exact
        if np.linalg.cond(snapped) > 1e12:
            raise ValueError(
                f"grid_bits={self.grid_bits} is too coarse for this workload's strategy "
                "(the snapped strategy is singular); use a larger grid_bits"
            )
        self._integer_strategy = m
        # |M| ≤ 2^26, so every square ≤ 2^52 and a column sum of ≤ 1024 of them fits int64.
        self._column_squares = int(np.max(np.sum(m * m, axis=0)))
        self._snapped_inverse = np.linalg.inv(snapped)

    def _l2_squared(self) -> Fraction:
        """max_i ‖M e_i‖₂², exact (integers)."""
        return Fraction(self._column_squares)

    def _release(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        if self.discrete:
            return self._release_discrete(x, rng)
        # x̂ = Q diag(1/√u)(Ax + N) = x + Q diag(1/√u) N exactly, since
        # Q diag(1/√u) A = QQᵀ = I. Computing it as x + (noise term) keeps the data out of
        # every floating-point matrix product: the only operation on x is one addition
        # per cell (Ax in float64 would round data-dependently, so neighbours could move
        # the computed strategy answers by more than the column norm of A).
        noise = self._sampler.sample(rng, self.shape[0])
        values = self._vectors @ (noise / np.sqrt(self.weights))
        values += x
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _release_discrete(self, x: FloatArray, rng: np.random.Generator) -> HistogramRelease:
        """x̂ = (γM)⁻¹·γ(Mx + η): only the noisy integers Mx + η enter floats."""
        answers = self._exact_answers(x)
        noise = self._sampler.sample(rng, self.shape[0]).tolist()
        # Python ints: Mx + η exactly; float() then rounds the noisy integers only.
        noisy = np.array([float(a + b) for a, b in zip(answers, noise, strict=True)])
        scaled = np.ldexp(noisy, -self.grid_bits)
        values = self._snapped_inverse @ scaled
        return HistogramRelease(values, self.noise_model, self.privacy, self.name)

    def _exact_answers(self, x: FloatArray) -> list[int]:
        """Mx exactly, as Python ints: x = 2^26·hi + lo, two int64 products.

        Bounds: |M| ≤ 2^26 and lo < 2^26, so |M·lo| < n·2^52 ≤ 2^62; Σ|x| ≤ 2^53 (checked
        by ``release``) gives Σ|hi| ≤ 2^27 + n, so |M·hi| < 2^54. No int64 overflow.
        """
        xi = x.astype(np.int64)
        lo = xi & ((1 << 26) - 1)
        hi = xi >> 26
        m = self._integer_strategy
        high, low = (m @ hi).tolist(), (m @ lo).tolist()
        return [(h << 26) + v for h, v in zip(high, low, strict=True)]

    def _build_model(self) -> DenseCovariance:
        if self.discrete:
            inv = self._snapped_inverse
            scale = self._sampler.variance * 4.0**-self.grid_bits
            return DenseCovariance(inv @ inv.T * scale)
        q = self._vectors
        covariance = (q / self.weights) @ q.T * self._sampler.variance
        return DenseCovariance(covariance)
