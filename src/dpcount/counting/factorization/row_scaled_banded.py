"""The row-scaled, column-normalized banded Toeplitz factorization, for multi-participation.

Under (k, b)-participation (each user contributes to at most k steps, any two at
least b apart) a banded encoder with at most b bands has an exact sensitivity: the
columns a user touches are at least b apart, so their supports are disjoint and
Δ₂² = Σ_{i∈π} ‖C[:, i]‖² (Choquette-Choo et al. 2023, arXiv:2306.08153, §4 on
b-banded matrices). The optimized banded Toeplitz encoder (jax_privacy's and
:meth:`dpcount.counting.ToeplitzFactorization.optimized` with ``bands=b``) leaves two
things on the table: its last b − 1 columns are truncated (norm < 1), and its rows
are all treated alike. This module scales both, as
:mod:`dpcount.counting.factorization.row_scaled_sqrt` does for the square root:

    C′ = diag(w)·C·diag(ν/n),   n_j = ‖diag(w)·C[:, j]‖,
    B′ = A·diag(n/ν)·C⁻¹·diag(1/w),

with C the lower-triangular Toeplitz matrix of c_0, …, c_{n−1} (n ≤ b bands),
w_i = exp(Σ_m a_m·T_m(y_i)), y_i = 2(i + ½)/T − 1, and ν the column norms, constant
on m blocks of columns (``column_scales``; 1 by default). Then B′·C′ = A, C′ keeps
the n bands and column j of C′ has norm ν_j, so with n ≤ b the squared sensitivity
is max_π Σ_{i∈π} ν_i² over participation patterns — exact, computed by the dynamic
program of :func:`~dpcount.counting.participation.max_pattern_weight` (k with unit
columns), for scalar and vector steps. With blocks of b columns a pattern holds at
most one column per block, which lets the early blocks have larger norms.

Shipped parameters (``dpcount/data/row_scaled_banded_parameters.json``, made by
``benchmarks/make_row_scaled_banded.py``: L-BFGS on the exact mean loss over c and a
(12, then 24 Chebyshev terms), started from the optimized banded Toeplitz, then the
four block norms by Nelder-Mead with the max loss kept ≤ 59.8): T = 2048, b = 512,
under (4, 512)-participation mean loss 44.848 and max loss 59.798 (the 512-banded
Toeplitz optimum: 47.398 / 64.366; its max-optimized version: max 62.918). For other
(T, b), :meth:`RowScaledBandedToeplitz.optimized` takes the mean-optimized banded
Toeplitz coefficients (computed on the fly, T ≤ 2^16) with w = 1 and ν = 1, i.e. only
the column normalization (46.549 / 57.791 at 2048, (4, 512)).

Release and exact variances are those of :class:`RowScaledSqrtFactorization` with
these coefficients (one FFT per stream, O(T²) exact variances, T ≤ 8192).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcount._validate import as_array, check_integer
from dpcount.counting.factorization.row_scaled_sqrt import (
    _SENSITIVITY_MARGIN,
    RowScaledSqrtFactorization,
)
from dpcount.counting.factorization.scaled import Base, Rows, Scaling, block_values
from dpcount.counting.factorization.toeplitz import _optimized_cached, check_toeplitz_coefficients
from dpcount.counting.participation import (
    Sensitivity,
    SensitivityMethod,
    max_pattern_weight,
    multiplied,
)
from dpcount.data import load_table
from dpcount.privacy._statements import cited
from dpcount.privacy.budget import Budget, BudgetFields, Participation
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ROW_SCALED_BANDED_MAX_HORIZON", "RowScaledBandedToeplitz", "shipped_row_scaled_banded"]

#: most column blocks ``column_scales`` may hold
_MAX_BLOCKS = 64


def _shipped() -> dict[str, Any]:
    return load_table("row_scaled_banded_parameters.json")


def shipped_row_scaled_banded(horizon: int, bands: int) -> dict[str, Any] | None:
    """The shipped entry for (``horizon``, ``bands``): ``coefficients``,
    ``log_weights``, the ``participations`` it was optimized for and its exact
    ``mean_loss``/``max_loss`` under them; None when not shipped."""
    entry = _shipped()["entries"].get(f"{horizon}/{bands}")
    return None if entry is None else dict(entry)


#: largest horizon: the noise (an FFT convolution with the banded encoder's inverse,
#: then a running sum) is measured within a quarter of the float model's κ up to 2^13
#: (≤ 36 over three seeds; 84 at 2^14: benchmarks/float_model_long.py, the float-safe
#: release's model of :mod:`dpcount.privacy.float_safe`)
ROW_SCALED_BANDED_MAX_HORIZON = 1 << 13


@cited
class RowScaledBandedToeplitz(RowScaledSqrtFactorization):
    """The row-scaled, column-normalized banded Toeplitz factorization (module
    docstring), T ≤ 8192 (:data:`ROW_SCALED_BANDED_MAX_HORIZON`): the
    :class:`~dpcount.counting.factorization.scaled.Scaled` preset of a banded Toeplitz
    encoder with Chebyshev row weights.

    Formal guarantee:
        Neighbouring relation: event level — two streams that differ at one step by at
        most Δ = ``step_sensitivity`` in ℓ₂ norm; or, with a participation schema in
        the budget, in at most k steps at least b apart (each by at most Δ). The
        release A x + B′z equals the post-processing B′(C′x + z) because B′·C′ = A;
        column j of C′ has ℓ₂ norm ν_j (times 1 + 10⁻⁹, covering the rounding of n),
        so one participation has sensitivity Δ·max ν. With at most b bands the
        columns of a participation pattern have disjoint supports, so the ℓ₂
        sensitivity is Δ·(max_π Σ_{i∈π} ν_i²)^{1/2}·(1 + 10⁻⁹), exact
        (Choquette-Choo et al. 2023, §4); with more bands than b, the dense
        computation of :mod:`dpcount.counting.participation` (T ≤ 2048) or k × the
        single value. Gaussian z calibrated to it gives (ε, δ)-DP (analytic Gaussian
        mechanism, Balle & Wang 2018, Thm 8, by default). Gaussian noise only.

        Exact variance: Var_t = σ²·‖B′[t, :]‖² (an O(T²) sum, cached).

    References:
        * C. A. Choquette-Choo, A. Ganesh, R. McKenna, H. B. McMahan, K. Rush,
          A. Thakurta, Z. Xu. "(Amplified) Banded Matrix Factorization: A unified
          approach to private training". NeurIPS 2023. https://arxiv.org/abs/2306.08153
        [references: hku25, bw18]

    Args:
        horizon: T in [1, 8192].
        coefficients: c_0 > 0, c_1, …, c_{n−1} of the Toeplitz encoder (n ≤ T bands).
        log_weights: Chebyshev coefficients a_1.. of ln w (1 to 32 finite values,
            |a_m| ≤ 5); (0.0,) gives w = 1 (column normalization only).
        column_scales: None (every column of C′ has norm 1) or m ≤ 64 numbers in
            [0.1, 10]: column j of C′ has norm ``column_scales[⌊j·m/T⌋]``.
        budget, rng: as for :class:`~dpcount.counting.SqrtFactorization` (Gaussian
            noise only).

    Raises:
        ValueError: a horizon outside [1, 8192], bad ``coefficients`` or
            ``log_weights``, or a noise kind other than Gaussian (naming them).
    """

    name = "row-scaled-banded"
    scaling = Scaling(Base.BANDED_TOEPLITZ, Rows.CHEBYSHEV)

    def __init__(
        self,
        horizon: int,
        *,
        coefficients: Any,
        log_weights: Any = (0.0,),
        column_scales: Any = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        T = check_integer("horizon", horizon, ge=1, le=ROW_SCALED_BANDED_MAX_HORIZON)
        c = check_toeplitz_coefficients(coefficients, T)
        nonzero = np.flatnonzero(c)
        self.bands = int(nonzero[-1]) + 1
        self.coefficients: tuple[float, ...] = tuple(float(v) for v in c[: self.bands])
        self._coefficients = self.coefficients
        self.column_scales: tuple[float, ...] | None = None
        if column_scales is not None:
            v = as_array("column_scales", column_scales)
            if v.ndim != 1 or not 1 <= len(v) <= min(T, _MAX_BLOCKS):
                raise ValueError(
                    f"column_scales must hold 1 to min(horizon, {_MAX_BLOCKS}) numbers, got "
                    f"shape {v.shape}"
                )
            scales = np.asarray(v, dtype=np.float64)
            if not (np.isfinite(scales).all() and np.all(scales >= 0.1) and np.all(scales <= 10)):
                raise ValueError("column_scales must be finite numbers in [0.1, 10]")
            self.column_scales = tuple(float(x) for x in scales)
        self._column_scales = self.column_scales
        super().__init__(horizon, log_weights=log_weights, budget=budget, rng=rng, **fields)

    @classmethod
    def optimized(
        cls,
        horizon: int,
        *,
        bands: int | None = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> RowScaledBandedToeplitz:
        """The mechanism for ``horizon`` with ``bands`` bands (None: the budget's
        schema's minimum separation b when b < T, else T): the shipped parameters
        when (T, bands) is shipped, else the mean-optimized banded Toeplitz
        coefficients (:meth:`~dpcount.counting.ToeplitzFactorization.optimized`,
        computed on the fly) with w = 1.

        Raises:
            ValueError: ``horizon`` outside [1, 8192] or ``bands`` outside [1, T].
        """
        T = check_integer("horizon", horizon, ge=1, le=ROW_SCALED_BANDED_MAX_HORIZON)
        resolved = Budget.resolve(budget, fields, owner=cls.__name__)
        if bands is None:
            schema = resolved.participation
            sep = None if schema is None else schema.min_separation
            n = T if sep is None or sep >= T else sep
        else:
            n = check_integer("bands", bands, ge=1, le=T)
        entry = shipped_row_scaled_banded(T, n)
        if entry is not None:
            return cls(
                T,
                coefficients=entry["coefficients"],
                log_weights=entry["log_weights"],
                column_scales=entry.get("column_scales"),
                budget=resolved,
                rng=rng,
            )
        coefficients = list(_optimized_cached(T, "mean", n if n < T else None))
        return cls(T, coefficients=coefficients, budget=resolved, rng=rng)

    def _config_kwargs(self) -> dict[str, Any]:
        kwargs = {**super()._config_kwargs(), "coefficients": list(self.coefficients)}
        if self.column_scales is not None:
            kwargs["column_scales"] = list(self.column_scales)
        return kwargs

    def _base_options(self) -> dict[str, Any]:
        """c_0, …, c_{n−1}, the :class:`~dpcount.counting.ToeplitzFactorization` this
        preset scales."""
        return {"coefficients": list(self.coefficients)}

    def _repr_fields(self) -> dict[str, object]:
        return {"bands": self.bands}

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        """At most b bands: the columns of a pattern have disjoint supports, so
        Δ₂² = max_π Σ_{i∈π} ν_i² (ν_i the norm of column i: its block's scale, 1 without
        ``column_scales``), exact, by the dynamic program of
        :func:`~dpcount.counting.participation.max_pattern_weight` (√k with unit
        columns), times (1 + 10⁻⁹); ℓ₁: k × the largest column ℓ₁ norm (certified).
        More bands: the default (dense for T ≤ 2048, else k × single)."""
        if self.bands > schema.min_separation or schema.is_single:
            return super()._schema_sensitivities(schema)
        l1, _ = self._unit_sensitivities()
        nu = block_values(self.horizon, self.column_scales)
        weight, _ = max_pattern_weight(nu * nu, schema)
        l2 = Sensitivity(
            math.sqrt(weight) * (1.0 + _SENSITIVITY_MARGIN),
            True,
            SensitivityMethod.DISJOINT_COLUMNS,
        )
        return multiplied(l1, schema), l2
