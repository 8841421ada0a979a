"""Batch sampling for the privatizer and its amplified accounting (cyclic Poisson).

Three ways to form the batches (``sampling=`` of :func:`~dpcount.training.gaussian_privatizer`):

* ``"fixed-batches"`` (:class:`Sampling.FIXED`): the data are split once into b fixed
  batches, visited cyclically (:func:`~dpcount.training.fixed_batches`); every example
  is in exactly k = ``epochs`` steps, b apart. No amplification: the privatizer's
  guarantee is the mechanism's under the (k, b) participation schema.
* ``"cyclic-poisson"`` (:class:`Sampling.CYCLIC_POISSON`): the data are split once into
  b fixed partitions; step t draws its batch from partition (t − 1) mod b, keeping each
  example independently with probability q (:class:`CyclicPoissonBatches`). An example
  can only be in the steps of its partition, at most k of them, b apart.
* ``"balls-in-bins"`` (:class:`Sampling.BALLS_IN_BINS`): each example is put in one of b
  bins uniformly at random, once; step t uses bin (t − 1) mod b
  (:mod:`dpcount.training.balls_in_bins`: any non-negative Toeplitz encoder, BLT
  included; Monte Carlo accounting with a stated confidence).

Amplified guarantee (cyclic Poisson). Choquette-Choo, Ganesh, McKenna, McMahan, Rush,
Thakurta, Xu, "(Amplified) Banded Matrix Factorization: A unified approach to private
training", NeurIPS 2023 (arXiv:2306.08153), Theorem 4: for an encoder C that is
lower-triangular with at most b̂ ≤ b bands, cyclic Poisson sampling over b partitions with
probability q, and add/remove-one neighbouring, the run (C·G + Z, Z i.i.d. N(0, σ²)) is
as private as the k-fold composition of the Poisson-subsampled Gaussian mechanism with
sampling probability q and noise multiplier σ / (C_clip·‖c‖₂), ‖c‖₂ the largest column
norm of C (one participation's sensitivity per unit clip norm). The reason: an example's
≤ k participations are b ≥ b̂ steps apart, so their columns of C have disjoint supports
and touch disjoint coordinates of C·G + Z; each participation is then a Poisson-sampled
Gaussian mechanism on its own coordinates, and the k of them compose adaptively. The
strategies here with that structure: ``"toeplitz"`` with ``bands ≤ batches_per_epoch``
and ``"input"`` (one band: DP-SGD with cyclic Poisson sampling). BLT and the square
roots have full bands and are refused here: use ``"balls-in-bins"``
(:mod:`dpcount.training.balls_in_bins`, Monte Carlo accounting, arXiv:2410.06266).

Calibration: the smallest noise multiplier whose privacy-loss-distribution ε at the
target δ (dp_accounting's ``PLDAccountant``, add/remove, pessimistic discretization: an
upper bound) is at most the target ε, by bisection, keeping the upper end; the
mechanism is then built with a budget whose own (unamplified, worst-case) calibration
gives at least that σ, so the mechanism's stated guarantee stays true and the
privatizer's :meth:`~dpcount.training.GradientPrivatizer.dp_event` states the amplified
one. Normalize the noisy sum by a public constant (the expected batch size q·n/b),
never by the sampled count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_instance, check_integer, check_real
from dpcount.privacy.budget import Budget, _Choice
from dpcount.privacy.calibration import gaussian_sigma
from dpcount.privacy.rng import RNGLike, as_generator

__all__ = [
    "Amplification",
    "CyclicPoissonBatches",
    "Sampling",
    "amplified_noise_multiplier",
    "cyclic_poisson_batches",
    "fixed_batches",
]

_INSTALL_HINT = "amplified accounting needs dp-accounting: pip install 'dpcount[accounting]'"
#: relative width at which the noise-multiplier bisection stops
_BISECTION_TOLERANCE = 1e-3
#: the PLD accountant's value discretization (pessimistic: coarser only adds ε)
_DISCRETIZATION = 1e-3


class Sampling(_Choice):
    """How the training batches are formed (module docstring)."""

    FIXED = "fixed-batches"
    CYCLIC_POISSON = "cyclic-poisson"
    BALLS_IN_BINS = "balls-in-bins"


@dataclass(frozen=True)
class Amplification:
    """Cyclic Poisson sampling's accounting for one run (module docstring).

    Attributes:
        sampling_probability: q, the probability an example of the step's partition
            is in the batch.
        epochs: k, the steps each example may be in.
        unit_sensitivity: the ℓ₂ sensitivity of one participation (clip bound × the
            encoder's largest column norm).
    """

    sampling_probability: float
    epochs: int
    unit_sensitivity: float

    def dp_event(self, sigma: float) -> Any:
        """The k-fold composition of the Poisson-subsampled Gaussian with noise
        multiplier σ / unit_sensitivity, as a dp_accounting ``DpEvent``."""
        try:
            import dp_accounting
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        gaussian = dp_accounting.GaussianDpEvent(sigma / self.unit_sensitivity)
        sampled = dp_accounting.PoissonSampledDpEvent(self.sampling_probability, gaussian)
        return dp_accounting.SelfComposedDpEvent(sampled, self.epochs)


def _epsilon(noise_multiplier: float, q: float, k: int, delta: float) -> float:
    """ε at δ of k Poisson-subsampled Gaussians (PLD, pessimistic: an upper bound)."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise_multiplier)),
        k,
    )
    accountant = PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval=_DISCRETIZATION,
    )
    return float(accountant.compose(event).get_epsilon(delta))


def amplified_noise_multiplier(
    *, sampling_probability: float, epochs: int, budget: Budget
) -> float:
    """The smallest noise multiplier z (to a relative 1e-3, rounded up) such that k
    compositions of the Poisson-subsampled Gaussian (probability q, noise multiplier z)
    are (ε, δ)-DP (``budget``'s ε and δ) by dp_accounting's PLD accountant
    (add/remove-one; pessimistic discretization, so the ε it computes is an upper bound).

    The bisection starts from the bracket [q·z₁, z₁], z₁ the multiplier without
    sampling (k Gaussians compose to one with multiplier z₁/√k: the analytic Gaussian
    of Balle & Wang 2018, Theorem 8), and widens it until ε(lower) > target ≥ ε(upper).

    Raises:
        ImportError: dp-accounting is not installed.
        ValueError: naming the parameter.
    """
    q = check_real("sampling_probability", sampling_probability, gt=0, le=1)
    k = check_integer("epochs", epochs, ge=1)
    check_instance("budget", budget, Budget, "a Budget")
    if budget.epsilon is None or budget.delta is None:
        raise ValueError(f"budget needs an epsilon and a delta, got {budget!r}")
    eps, dlt = budget.epsilon, budget.delta
    try:
        import dp_accounting  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    hi = gaussian_sigma(math.sqrt(k), eps, dlt)
    lo = q * hi
    while _epsilon(hi, q, k, dlt) > eps:  # the PLD's discretization can cost a little
        lo, hi = hi, 1.01 * hi
    while _epsilon(lo, q, k, dlt) <= eps:
        lo, hi = 0.5 * lo, lo
    while (hi - lo) > _BISECTION_TOLERANCE * hi:
        mid = math.sqrt(lo * hi)
        if _epsilon(mid, q, k, dlt) > eps:
            lo = mid
        else:
            hi = mid
    return hi


def fixed_batches(
    examples: int, batches_per_epoch: int, *, rng: RNGLike = None
) -> list[NDArray[np.int64]]:
    """Split ``range(examples)`` once at random into ``batches_per_epoch`` batches of
    sizes ⌊n/b⌋ or ⌈n/b⌉. Visit them cyclically in this order every epoch (step t
    uses batch (t − 1) mod b): the (epochs, b)-participation the privatizer assumes.

    The split itself may use any randomness: it is a fixed, data-independent
    assignment of example indices."""
    n = check_integer("examples", examples, ge=1)
    b = check_integer("batches_per_epoch", batches_per_epoch, ge=1, le=n)
    order = as_generator(rng).permutation(n)
    return [np.sort(part).astype(np.int64) for part in np.array_split(order, b)]


@dataclass(frozen=True)
class CyclicPoissonBatches:
    """The batches of cyclic Poisson sampling: call :meth:`batch` once per step.

    Attributes:
        partitions: the b fixed partitions of ``range(examples)`` (public: a
            data-independent split).
        sampling_probability: q.
    """

    partitions: tuple[NDArray[np.int64], ...]
    sampling_probability: float
    draw: Callable[[int], NDArray[np.float64]]

    def batch(self, step: int) -> NDArray[np.int64]:
        """The example indices of step ``step`` (1-based): each example of partition
        (step − 1) mod b, kept independently with probability q. Draw each step once
        (a second draw for the same step is a different batch)."""
        t = check_integer("step", step, ge=1)
        part = self.partitions[(t - 1) % len(self.partitions)]
        return part[self.draw(len(part)) < self.sampling_probability]


def cyclic_poisson_batches(
    examples: int,
    batches_per_epoch: int,
    sampling_probability: float,
    *,
    rng: RNGLike = None,
) -> CyclicPoissonBatches:
    """Split ``range(examples)`` once into ``batches_per_epoch`` partitions and sample each
    step's batch from its partition with probability ``sampling_probability``.

    Args:
        examples: n ≥ 1.
        batches_per_epoch: b, the number of partitions (1 ≤ b ≤ n).
        sampling_probability: q in (0, 1].
        rng: None (default: a cryptographically secure generator from OS entropy: the
            inclusion draws are part of the privacy mechanism), a Generator or an int
            seed (tests only).
    """
    q = check_real("sampling_probability", sampling_probability, gt=0, le=1)
    generator = as_generator(rng)
    partitions = tuple(fixed_batches(examples, batches_per_epoch, rng=generator))
    return CyclicPoissonBatches(partitions, q, generator.random)
