"""Certificates: how far a factorization's loss is from the best dpcount can compute.

Loss (McMahan et al. arXiv:2408.08868; Dvijotham et al. arXiv:2404.16706): the
per-step variance of a Gaussian release divided by the variance of a sensitivity-1
Gaussian at the same (ε, δ, calibration), i.e. for A = B·C,
loss_t = max_j ‖C[:, j]‖²·‖B[t, :]‖² — the ``"mean"`` loss averages it over
t ≤ T, the ``"max"`` loss is its largest value. Every Gaussian calibration in dpcount
is proportional to the ℓ₂ sensitivity, so the loss does not depend on (ε, δ).

Two yardsticks per horizon T and objective:

* :func:`best_known_loss` — the lowest loss among the factorizations dpcount can
  compute for that T (a :class:`Reference` names which one): the square root (closed
  forms), the column-normalized square root (:func:`normalized_sqrt_losses`; the
  mechanism is :class:`dpcount.counting.NormalizedSqrtFactorization`): one weight per
  column for T ≤ 16384 (exact in O(T²)), beyond it geometric blocks of ratio 1.1
  (exact in O(m·T log T): shipped for T = 2^15 … 2^22 in
  ``dpcount/data/normalized_sqrt_losses.json``, made by
  ``benchmarks/make_normalized_sqrt_losses.py``, computed on the fly for other
  T ≤ 2^21, ≈ 12 s at 2^21; max loss 27.95 at 2^20), the column-normalized BLT
  (:class:`dpcount.counting.NormalizedBLT` with the parameters shipped for each
  objective: losses shipped at T = 2^0 … 2^24 in
  ``dpcount/data/normalized_blt_parameters.json``, exact O(T·buffers) losses on the
  fly for other T ≤ 2^16; max loss 27.81 at 2^20), the row-scaled BLT
  (:class:`dpcount.counting.RowScaledBLT`, likewise from
  ``dpcount/data/row_scaled_blt_parameters.json``), every shipped optimized BLT
  (both objectives, every shipped buffer count, evaluated at T by the closed forms
  of :func:`dpcount.counting.factorization.blt.blt_losses`), for T ≤ 2^16 the full-band Toeplitz
  factorization optimized for the requested objective
  (:func:`dpcount.counting.factorization.toeplitz.optimize_toeplitz`, computed on the fly and
  cached: ~0.1 s at T = 2048, ~1.5 s at 16384; mean loss 9.3427 at T = 1024, 15.5135 at
  16384, below every shipped BLT),
  and for T ≤ 2048 the dense mean-loss optimum
  (:func:`dpcount.counting.factorization.optimize.optimize_dense`): its mean and max loss are
  shipped for T = 2^0 … 2^11 (``dpcount/data/factorization_optima.json``, made by
  ``benchmarks/make_factorization_optima.py``) and computed on the fly for other
  T ≤ 128; and for T = 2^0 … 2^11 the dense *max*-loss optimum
  (:func:`dpcount.counting.factorization.optimize_max.optimize_dense_max`, certified within 10⁻⁴
  relative of the optimum over all factorizations; shipped in
  ``dpcount/data/dense_max_optima.json``, made by
  ``benchmarks/make_dense_max_optima.py``; max loss 8.7711 at 1024), and for
  T = 2^0 … 2^14 the row-scaled square root
  (:class:`dpcount.counting.factorization.row_scaled_sqrt.RowScaledSqrtFactorization`'s exact
  losses, shipped in
  ``dpcount/data/row_scaled_sqrt_losses.json``, made by
  ``benchmarks/make_row_scaled_losses.py``; max 14.975 at 2^14). Each
  figure is achieved by a concrete factorization, so the reference is an upper bound
  on the true optimum and a ratio below 1 would mean a mechanism beats everything
  dpcount knows (the dense iteration stops at a relative change of 10⁻⁶, so its
  figures are within about that of the mean optimum, from above). The
  dense optimum is not a streaming mechanism in dpcount (its matrices can be given
  to ``FactorizationMechanism``); the column-normalized square root is
  (``NormalizedSqrtFactorization``, T ≤ 2^22). The reference says what is
  achievable, not what ``dpcount plan`` recommends.
* :func:`asymptotic_lower_bound` — (0.701 + ln T/π)², the asymptotic lower bound on
  the max loss of any factorization of the counting matrix, as quoted in dpcount's
  requirements from Henzinger, Kalinin, Upadhyay 2025 (arXiv:2509.14334). It is a
  **limit statement** (the max loss of every factorization is at least this up to a
  term that vanishes as T → ∞), not a bound at any finite T; dpcount could not check
  the constant 0.701 against the paper's text, so treat it as quoted. It is stated
  for the max loss; the mean loss has the same leading term (ln T/π)², and its
  ratio to this figure is a reference point, not a certified gap.

And a third, certified one: :func:`certified_lower_bound` — a lower bound on the loss
of *every* factorization at T (weak duality: for the max loss the γ₂ dual
‖diag(√u)·A·diag(√p)‖_*² at shipped or interpolated optimal weights, 14.657 at 2^14;
for the mean loss the dual of the dense mean optimum or (‖A‖_*/T)²), so
``loss / bound`` (:attr:`Certificate.ratio_to_lower_bound`) bounds how far a
mechanism is from optimal.

All yardsticks are for **single participation**. Under a (k, b)-participation
schema (k > 1) :func:`dpcount.analysis.compare` takes as reference the lowest loss
among its own candidates built for that schema (each with its exact or certified
schema sensitivity), and the certificate has no asymptotic bound (None): the dense
optimum and (0.701 + ln T/π)² are statements about one participation.

Only Gaussian noise is covered: the loss is an ℓ₂ notion, and no comparable optimum
or bound for ℓ₁-calibrated (Laplace) noise is computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

import numpy as np

from dpcount._validate import check_choice, check_integer, check_real
from dpcount.analysis._floor import NUCLEAR_NORM_MAX_HORIZON, counting_nuclear_norm
from dpcount.counting.factorization.blt import blt_losses, shipped_blt_parameters
from dpcount.counting.factorization.normalized_blt import (
    normalized_blt_losses,
    shipped_normalized_blt_parameters,
)
from dpcount.counting.factorization.normalized_sqrt import (
    DEFAULT_BLOCK_RATIO,
    NORMALIZED_SQRT_BLOCK_MAX_HORIZON,
    NORMALIZED_SQRT_MAX_HORIZON,
    normalized_sqrt_losses,
)
from dpcount.counting.factorization.optimize import optimize_dense
from dpcount.counting.factorization.optimize_max import (
    SHIPPED_MAX_LOG2,
    dense_max_factors,
    interpolate_weights,
    max_loss_lower_bound,
    shipped_beyond_max_optima,
    shipped_interpolated_max_bounds,
    shipped_max_optima,
    shipped_max_weights,
)
from dpcount.counting.factorization.sqrt_toeplitz import (
    sqrt_l2_norm_squared,
    sqrt_mean_variance_coefficient,
)
from dpcount.counting.factorization.toeplitz import (
    MAX_OPTIMIZED_HORIZON,
    optimized_coefficients,
    toeplitz_losses,
)
from dpcount.data import load_table

__all__ = [
    "ASYMPTOTIC_CONSTANT",
    "NORMALIZED_SQRT_MAX_HORIZON",
    "Certificate",
    "LowerBound",
    "Objective",
    "Reference",
    "asymptotic_lower_bound",
    "best_known_loss",
    "certified_lower_bound",
    "certify",
    "counting_nuclear_norm",
    "dense_max_optimum_losses",
    "normalized_sqrt_losses",
]

#: the additive constant of the asymptotic max-loss lower bound (0.701 + ln T/π)²
#: (Henzinger, Kalinin, Upadhyay 2025, arXiv:2509.14334; not re-checked against the paper)
ASYMPTOTIC_CONSTANT = 0.701
#: largest T whose blocked column-normalized square root losses are computed on the fly
#: when not shipped (≈ 12 s at 2^21 on the 2-core development machine)
NORMALIZED_SQRT_ON_THE_FLY = 1 << 21
#: largest T with a shipped dense optimum (2^11), and largest T computed on the fly
_DENSE_SHIPPED_MAX_LOG2 = 11
_DENSE_ON_THE_FLY = 128


class Objective(str, Enum):
    """Which loss: the mean over the horizon or the largest per-step one."""

    MEAN = "mean"
    MAX = "max"


@dataclass(frozen=True)
class Reference:
    """The best loss dpcount can compute for (horizon, objective).

    Attributes:
        horizon: T.
        objective: ``"mean"`` or ``"max"``.
        loss: the lowest loss found (achieved by a concrete factorization).
        source: which factorization achieves it (e.g. ``"dense mean optimum"``,
            ``"blt (8 buffers, max-optimized)"``, ``"sqrt"``).
    """

    horizon: int
    objective: str
    loss: float
    source: str


@dataclass(frozen=True)
class LowerBound:
    """A certified lower bound on the loss of *every* factorization of the counting
    matrix at a horizon (single participation), see :func:`certified_lower_bound`.

    Attributes:
        horizon: T.
        objective: ``"mean"`` or ``"max"``.
        value: the bound (no factorization has a smaller loss).
        source: how it was obtained.
    """

    horizon: int
    objective: str
    value: float
    source: str


@dataclass(frozen=True)
class Certificate:
    """A loss against the two yardsticks of its horizon.

    Attributes:
        loss: the certified mechanism's loss.
        reference: :func:`best_known_loss` for the same horizon and objective (under
            a participation schema: the best candidate for that schema).
        asymptotic_bound: :func:`asymptotic_lower_bound` (asymptotic, see module);
            None under a participation schema with k > 1 (the bound is for one
            participation).
    """

    loss: float
    reference: Reference
    asymptotic_bound: float | None
    lower_bound: LowerBound | None = None

    @property
    def ratio_to_lower_bound(self) -> float | None:
        """loss / certified lower bound (≥ 1 always; None without a bound)."""
        if self.lower_bound is None:
            return None
        return self.loss / self.lower_bound.value

    @property
    def ratio_to_best(self) -> float:
        """loss / best known loss (≥ 1 unless the mechanism beats every reference)."""
        return self.loss / self.reference.loss

    @property
    def ratio_to_asymptotic(self) -> float | None:
        """loss / (0.701 + ln T/π)² — asymptotic, not a finite-T bound (None without
        a bound: multi-participation)."""
        if self.asymptotic_bound is None:
            return None
        return self.loss / self.asymptotic_bound


def asymptotic_lower_bound(horizon: int) -> float:
    """(0.701 + ln T/π)²: the asymptotic max-loss lower bound for counting.

    Henzinger, Kalinin, Upadhyay 2025, "Normalized square root: sharper matrix
    factorization bounds for differentially private continual counting",
    arXiv:2509.14334, as quoted in dpcount's requirements (constant not re-checked against
    the paper). Asymptotic: every factorization's max loss is at least this up to a
    vanishing term as T → ∞; at a finite T it is a reference, not a bound.
    """
    T = check_integer("horizon", horizon, ge=1)
    return (ASYMPTOTIC_CONSTANT + math.log(T) / math.pi) ** 2


def _dense_table() -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = load_table("factorization_optima.json")[
        "dense_mean_optimum"
    ]
    return table


@lru_cache(maxsize=64)
def dense_optimum_losses(T: int) -> tuple[float, float] | None:
    """(mean, max) loss of the dense mean optimum at T (that of
    :meth:`~dpcount.counting.FactorizationMechanism.optimal`, the same deterministic
    computation): shipped for T = 2^0 … 2^11, computed for other T ≤ 128; None
    otherwise (not computed here: ~4-22 s for T in 1024..2048)."""
    k = T.bit_length() - 1
    if 1 << k == T and k <= _DENSE_SHIPPED_MAX_LOG2:
        row = _dense_table().get(str(k))
        if row is not None:
            return float(row["mean_loss"]), float(row["max_loss"])
    if T <= _DENSE_ON_THE_FLY:
        r = optimize_dense(T)
        sens2 = float(np.max(np.sum(r.encoder * r.encoder, axis=0)))
        return r.loss, sens2 * float(np.max(np.sum(r.decoder * r.decoder, axis=1)))
    return None


#: largest T whose dense max optimum's losses are computed on the fly when not shipped
#: (:func:`~dpcount.counting.factorization.optimize_max.dense_max_factors`, ≈ 0.2 s at 128)
DENSE_MAX_ON_THE_FLY = 128


@lru_cache(maxsize=64)
def dense_max_optimum_losses(T: int) -> tuple[float, float] | None:
    """(mean, max) loss of the dense max-loss optimum at T (that of
    ``FactorizationMechanism.optimal(T, objective="max")``, registry name
    ``dense-max-optimum``, the same deterministic factors): shipped for T = 2^0 … 2^11,
    computed from the factors for other T ≤ 128; None otherwise (≈ 1 min at 1000)."""
    k = T.bit_length() - 1
    if 1 << k == T and k <= SHIPPED_MAX_LOG2:
        row = shipped_max_optima()[k]
        return float(row["mean_loss"]), float(row["max_loss"])
    if T <= DENSE_MAX_ON_THE_FLY:
        B, C = dense_max_factors(T)
        sens2 = float(np.max(np.sum(C * C, axis=0)))
        rows = np.sum(B * B, axis=1)
        return sens2 * float(np.mean(rows)), sens2 * float(np.max(rows))
    return None


def _normalized_sqrt_table() -> dict[str, Any]:
    return load_table("normalized_sqrt_losses.json")


def _normalized_sqrt_candidate(T: int) -> tuple[str, float, float] | None:
    """(source, mean loss, max loss) of the column-normalized square root at T: one
    weight per column for T ≤ 2^14, else blocks of ratio 1.1 (shipped for powers of
    two up to 2^22, computed for other T ≤ 2^21), None beyond."""
    if T <= NORMALIZED_SQRT_MAX_HORIZON:
        return ("column-normalized sqrt", *normalized_sqrt_losses(T))
    source = f"column-normalized sqrt (blocks, ratio {DEFAULT_BLOCK_RATIO})"
    k = T.bit_length() - 1
    table = _normalized_sqrt_table()
    row = table["losses"].get(str(k)) if 1 << k == T else None
    if row is not None and float(table["block_ratio"]) == DEFAULT_BLOCK_RATIO:
        return (source, float(row["mean_loss"]), float(row["max_loss"]))
    if T <= NORMALIZED_SQRT_ON_THE_FLY <= NORMALIZED_SQRT_BLOCK_MAX_HORIZON:
        return (source, *normalized_sqrt_losses(T, block_ratio=DEFAULT_BLOCK_RATIO))
    return None


def _normalized_blt_candidates(T: int) -> list[tuple[str, float, float]]:
    """(source, mean loss, max loss) of the column-normalized and the row-scaled BLT
    with the parameters shipped for each objective: the shipped losses at powers of two,
    exact O(T·n) / O(T·n²) losses on the fly for other T ≤ 2^16, nothing beyond."""
    from dpcount.counting.factorization import row_scaled_blt as rsb

    kinds: tuple[tuple[str, str, Any, Any], ...] = (
        ("column-normalized blt", "normalized_blt_parameters.json",
         shipped_normalized_blt_parameters, normalized_blt_losses),
        ("row-scaled blt", "row_scaled_blt_parameters.json",
         rsb.shipped_row_scaled_blt_parameters, rsb.row_scaled_blt_losses),
    )  # fmt: skip
    out = []
    for name, table, shipped, losses in kinds:
        for objective in ("mean", "max"):
            source = f"{name} ({objective}-optimized)"
            entry = load_table(table)["objectives"][objective].get(str(T.bit_length() - 1))
            if entry is not None and T & (T - 1) == 0:
                out.append((source, float(entry["mean_loss"]), float(entry["max_loss"])))
            elif T <= 1 << 16:
                out.append((source, *losses(*shipped(T, objective), T)))
    return out


def _shipped_buffer_counts(objective: str) -> list[int]:
    return sorted(int(n) for n in load_table("blt_parameters.json")["objectives"][objective])


@lru_cache(maxsize=256)
def _candidates(T: int) -> tuple[tuple[str, float, float], ...]:
    """(source, mean loss, max loss) of every factorization considered at T."""
    S = sqrt_l2_norm_squared(T)
    out = [("sqrt", S * sqrt_mean_variance_coefficient(T), S * S)]
    for objective in ("mean", "max"):
        for n in _shipped_buffer_counts(objective):
            decay, scale = shipped_blt_parameters(T, objective, n)
            losses = blt_losses(decay, scale, T)
            source = f"blt ({n} buffers, {objective}-optimized)"
            out.append((source, losses.mean_loss, losses.max_loss))
    normalized = _normalized_sqrt_candidate(T)
    if normalized is not None:
        out.append(normalized)
    out.extend(_normalized_blt_candidates(T))
    dense = dense_optimum_losses(T)
    if dense is not None:
        out.append(("dense mean optimum", dense[0], dense[1]))
    k = T.bit_length() - 1
    dense_max = dense_max_optimum_losses(T)
    if dense_max is not None:
        out.append(("dense max optimum", *dense_max))
    scaled = _row_scaled_table().get(str(k)) if 1 << k == T else None
    if scaled is not None:
        out.append(("row-scaled sqrt", float(scaled["mean_loss"]), float(scaled["max_loss"])))
    return tuple(out)


def _row_scaled_table() -> dict[str, dict[str, float]]:
    """k -> losses of ``RowScaledSqrtFactorization(2^k)`` (shipped, k ≤ 14)."""
    table: dict[str, dict[str, float]] = load_table("row_scaled_sqrt_losses.json")[
        "row_scaled_sqrt"
    ]
    return table


@lru_cache(maxsize=64)
def _toeplitz_candidate(T: int, objective: str) -> tuple[str, float, float]:
    """(source, mean loss, max loss) of the full-band Toeplitz optimized for ``objective``
    (coefficients shared with ``ToeplitzFactorization.optimized``'s cache)."""
    losses = toeplitz_losses(list(optimized_coefficients(T, objective)), T)
    return (f"toeplitz ({objective}-optimized)", losses.mean_loss, losses.max_loss)


def best_known_loss(horizon: int, objective: str | Objective = "mean") -> Reference:
    """The lowest loss among the factorizations dpcount can compute for ``horizon``
    (see the module docstring for the candidates).

    Raises:
        ValueError: a horizon < 1 or an unknown objective (naming them).
    """
    T = check_integer("horizon", horizon, ge=1)
    obj = _objective(objective)
    column = 1 if obj == "mean" else 2
    candidates = list(_candidates(T))
    if T <= MAX_OPTIMIZED_HORIZON:
        candidates.append(_toeplitz_candidate(T, obj))
    best = min(candidates, key=lambda c: (c[column], c[0]))
    return Reference(horizon=T, objective=obj, loss=float(best[column]), source=best[0])


def certify(loss: float, horizon: int, objective: str | Objective = "mean") -> Certificate:
    """``loss`` (in the units above) against :func:`best_known_loss` and
    :func:`asymptotic_lower_bound` for ``horizon``.

    Raises:
        ValueError: a non-positive or non-finite loss, a horizon < 1 or an unknown
            objective (naming them).
    """
    value = check_real("loss", loss, gt=0)
    if not math.isfinite(value):
        raise ValueError(f"loss must be finite, got {loss!r}")
    reference = best_known_loss(horizon, objective)
    return Certificate(
        loss=value,
        reference=reference,
        asymptotic_bound=asymptotic_lower_bound(horizon),
        lower_bound=certified_lower_bound(horizon, objective),
    )


#: largest T whose max-loss bound is computed on the fly from interpolated optimal
#: weights (O(T²) eigenvalues, ≈ 0.5 s at 2048)
WEIGHTED_BOUND_MAX_HORIZON = 2048


def _mean_lower_bound(T: int) -> LowerBound:
    k = T.bit_length() - 1
    if 1 << k == T and k <= _DENSE_SHIPPED_MAX_LOG2:
        row = _dense_table().get(str(k))
        if row is not None:
            value = float(row["mean_lower_bound"])
            return LowerBound(T, "mean", value, "dual of the dense mean optimum (shipped)")
    n = counting_nuclear_norm(T) / T
    return LowerBound(T, "mean", n * n, "(‖A‖_*/T)², the nuclear-norm bound")


@lru_cache(maxsize=64)
def _max_lower_bound(T: int) -> LowerBound:
    k = T.bit_length() - 1
    if 1 << k == T and k <= SHIPPED_MAX_LOG2:
        value = float(shipped_max_optima()[k]["max_lower_bound"])
        return LowerBound(T, "max", value, "γ₂ dual of the dense max optimum (shipped)")
    beyond = shipped_beyond_max_optima()
    if 1 << k == T and k in beyond:
        value = beyond[k]["max_lower_bound"]
        return LowerBound(T, "max", value, "γ₂ dual of the 2^12 max optimum (shipped)")
    interpolated = shipped_interpolated_max_bounds()
    if 1 << k == T and k in interpolated:
        source = "γ₂ dual at the 2^12 optimal weights interpolated (shipped)"
        return LowerBound(T, "max", interpolated[k], source)
    mean = _mean_lower_bound(T)
    if T <= WEIGHTED_BOUND_MAX_HORIZON:
        near = shipped_max_weights(1 << min(max(T - 1, 1).bit_length(), SHIPPED_MAX_LOG2))
        assert near is not None
        value = max_loss_lower_bound(interpolate_weights(near, T))
        if value > mean.value:
            return LowerBound(T, "max", value, "γ₂ dual at interpolated optimal weights")
    return LowerBound(T, "max", mean.value, mean.source + " (max ≥ mean)")


def certified_lower_bound(horizon: int, objective: str | Objective = "mean") -> LowerBound | None:
    """A certified lower bound on the ``objective`` loss of every factorization of the
    T×T counting matrix (single participation, Gaussian/ℓ₂ units), or None beyond
    T = 2^26.

    * mean: for T = 2^0 … 2^11 the Lagrange dual value of the dense mean optimum
      (:func:`~dpcount.counting.factorization.optimize.optimize_dense`, shipped); otherwise
      (‖A‖_*/T)² (:func:`counting_nuclear_norm`; the dual at uniform multipliers:
      T·mean loss = ‖B‖_F²‖C‖²_{1→2} ≥ ‖A‖_*²).
    * max: for T = 2^0 … 2^11 the γ₂ dual value of the shipped max optimum
      (:func:`~dpcount.counting.factorization.optimize_max.max_loss_lower_bound`); for
      T = 2^12 that of the max optimum computed at 4096 (shipped: 11.5208, within
      10⁻⁴ of the max loss 11.5220 of its causal factorization); for T = 2^13, 2^14
      the same bound at the 2^12 weights interpolated to T (shipped); for other
      T ≤ 2048 the bound at the shipped weights of the next power of two interpolated
      to T (O(T²), ≈ 0.5 s at 2048), or the mean bound if larger; otherwise the mean
      bound (max loss ≥ mean loss).

    Every value is a valid bound whatever the weights (weak duality), rounded down
    by its floating-point margin.

    Raises:
        ValueError: a horizon < 1 or an unknown objective (naming them).
    """
    T = check_integer("horizon", horizon, ge=1)
    obj = _objective(objective)
    if T > NUCLEAR_NORM_MAX_HORIZON:
        return None
    return _max_lower_bound(T) if obj == "max" else _mean_lower_bound(T)


def _objective(objective: str | Objective) -> str:
    value = objective.value if isinstance(objective, Objective) else objective
    check_choice("objective", value, tuple(o.value for o in Objective))
    return str(value)
