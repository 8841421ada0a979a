"""Error metrics of range-query mechanisms (correlated-input-perturbation Defs 3.11–3.13).

For a mechanism whose answers to a workload W are Wx + e with e ~ N(0, Σ_W):

* :func:`total_squared_error` — err_{W,2} = E‖e‖₂² = Σ_q Var(e_q) (Def. 3.11), exact;
* :func:`worst_case_expected_error` — err^∞_W = max_q E|e_q| = √(2/π)·max_q √Var(e_q)
  (Def. 3.12: the expectation is inside the max), exact;
* :func:`expected_worst_case_error` — err_{W,∞} = E max_q |e_q| (Def. 3.13: the
  expectation is outside), by Monte Carlo over independent noise draws; for all
  ranges of a consistent release each draw's maximum is max − min of the noise
  prefix sums (O(n)), for the tree mechanism an O(n log n) crossing scan;
* :func:`paper_monte_carlo_errors` — the paper's estimator (§4.2, App. C.4): sample
  ranges uniformly, estimate err_{W,2} by (#ranges)·mean(E²) and err_{W,∞} by max|E|;
* :func:`nodal_level_variances` — exact variance of every tree node's answer by depth
  (the paper's Fig. 5).

For all ranges the exact metrics never list the ranges: the noise models sum and
maximize in O(n) to O(n log n) (see :mod:`._halving`). In 2-D, ``AllRanges`` means all
rectangles (the totals and maxima factorize over the axes).

References:
    * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
      Queries with Correlated Input Perturbation". 2024.
      https://arxiv.org/abs/2402.07066
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_instance, check_integer
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.ranges._models import KroneckerModel
from dpcount.ranges.mechanism import RangeMechanism
from dpcount.ranges.release import RangeAnswers
from dpcount.ranges.workloads import (
    AllRanges,
    DenseWorkload,
    RangeWorkload,
    Workload,
    as_workload,
    nodal_ranges,
)

__all__ = [
    "MonteCarloEstimate",
    "PaperEstimate",
    "expected_worst_case_error",
    "max_query_variance",
    "nodal_level_variances",
    "paper_monte_carlo_errors",
    "query_variances",
    "total_squared_error",
    "worst_case_expected_error",
]

FloatArray = NDArray[np.float64]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class MonteCarloEstimate:
    """A Monte Carlo mean with its standard error (over ``draws`` independent draws)."""

    mean: float
    stderr: float
    draws: int
    samples: FloatArray


@dataclass(frozen=True)
class PaperEstimate:
    """The paper's estimates, one per run: err_{W,2} ≈ N·mean(E²), err_{W,∞} ≈ max|E|."""

    total_squared_error: FloatArray
    worst_case_error: FloatArray
    samples_per_run: int


def _check_mechanism(mechanism: object) -> None:
    check_instance("mechanism", mechanism, RangeMechanism, "a RangeMechanism")


def _workload(mechanism: RangeMechanism, workload: Any) -> Workload | None:
    """None stands for all ranges (or all rectangles in 2-D)."""
    _check_mechanism(mechanism)
    if workload is None or (isinstance(workload, AllRanges) and len(mechanism.shape) == 1):
        if isinstance(workload, AllRanges) and workload.n != mechanism.n:
            raise ValueError(
                f"workload is over n={workload.n} cells, the mechanism over n={mechanism.n}"
            )
        return None
    if len(mechanism.shape) != 1:
        raise ValueError("2-D mechanisms support the all-rectangles workload (workload=None) only")
    return as_workload(workload, mechanism.shape[0])


def query_variances(mechanism: RangeMechanism, workload: Workload) -> FloatArray:
    """Exact variance of each query of an explicit workload (ranges or dense rows)."""
    w = _workload(mechanism, workload)
    model = mechanism.noise_model
    if w is None or isinstance(model, KroneckerModel):
        raise ValueError("query_variances needs an explicit RangeWorkload or DenseWorkload")
    if isinstance(w, RangeWorkload):
        return model.range_variance(w.lo, w.hi + 1)
    if isinstance(w, DenseWorkload):
        return model.query_variance(w.weights)
    raise ValueError("query_variances needs an explicit RangeWorkload or DenseWorkload")


def total_squared_error(mechanism: RangeMechanism, workload: Any = None) -> float:
    """err_{W,2} (Def. 3.11), exact. ``workload=None``: all ranges (2-D: all rectangles)."""
    w = _workload(mechanism, workload)
    if w is None:
        return mechanism.noise_model.all_ranges_total()
    return float(query_variances(mechanism, w).sum())


def max_query_variance(mechanism: RangeMechanism, workload: Any = None) -> float:
    """max over the workload of the exact variance (all ranges: O(n log n), none listed)."""
    w = _workload(mechanism, workload)
    if w is None:
        return mechanism.noise_model.all_ranges_max()
    return float(query_variances(mechanism, w).max())


def worst_case_expected_error(mechanism: RangeMechanism, workload: Any = None) -> float:
    """err^∞_W (Def. 3.12) = √(2/π)·√(max variance), exact (Gaussian: E|e| = √(2/π)·sd)."""
    return _SQRT_2_OVER_PI * math.sqrt(max_query_variance(mechanism, workload))


def _noise_release(mechanism: RangeMechanism, rng: np.random.Generator) -> RangeAnswers:
    return mechanism._release(np.zeros(mechanism.shape), rng)


def _worst(release: RangeAnswers, workload: Workload | None) -> float:
    if workload is None:
        return float(release.max_abs_range_sum())  # type: ignore[attr-defined]
    if isinstance(workload, RangeWorkload):
        return float(np.max(np.abs(release._answer(workload.lo, workload.hi + 1))))
    if isinstance(workload, DenseWorkload):
        return float(np.max(np.abs(release.answer(workload.weights))))  # type: ignore[attr-defined]
    raise ValueError(f"unsupported workload {workload!r}")


def expected_worst_case_error(
    mechanism: RangeMechanism, workload: Any = None, draws: int = 100, rng: RNGLike = None
) -> MonteCarloEstimate:
    """err_{W,∞} (Def. 3.13) by Monte Carlo: E max_q |e_q| over ``draws`` noise draws.

    Each draw is a release of x = 0 (the error does not depend on x), through the
    mechanism's own sampler, with ``rng``. The maximum over all ranges is exact per draw.
    """
    draws = check_integer("draws", draws, ge=2)
    w = _workload(mechanism, workload)
    gen = as_generator(rng)
    samples = np.array([_worst(_noise_release(mechanism, gen), w) for _ in range(draws)])
    return MonteCarloEstimate(
        float(samples.mean()), float(samples.std(ddof=1) / math.sqrt(draws)), draws, samples
    )


def paper_monte_carlo_errors(
    mechanism: RangeMechanism,
    samples: int = 5000,
    runs: int = 10,
    rng: RNGLike = None,
    x: Any = None,
) -> PaperEstimate:
    """The paper's Monte Carlo estimates over all ranges (§4.2, App. C.4), for comparison.

    Per run: one release (of ``x``, default zeros), ``samples`` ranges drawn uniformly
    (:meth:`AllRanges.sample`), errors E_i; err_{W,2} ≈ (n(n+1)/2)·mean(E²) (unbiased)
    and err_{W,∞} ≈ max_i |E_i| (a lower estimate of the true worst case).
    """
    _check_mechanism(mechanism)
    if len(mechanism.shape) != 1:
        raise ValueError("paper_monte_carlo_errors is defined for 1-D mechanisms")
    samples = check_integer("samples", samples, ge=1)
    runs = check_integer("runs", runs, ge=1)
    gen = as_generator(rng)
    data = np.zeros(mechanism.shape) if x is None else mechanism.check_data(x)
    truth = np.concatenate(([0.0], np.cumsum(data)))
    workload = AllRanges(mechanism.shape[0])
    total, worst = np.empty(runs), np.empty(runs)
    for r in range(runs):
        release = mechanism._release(data.copy(), gen)
        lo, hi = workload.sample(samples, gen)
        errors = release._answer(lo, hi + 1) - (truth[hi + 1] - truth[lo])
        total[r] = workload.count * float(np.mean(errors**2))
        worst[r] = float(np.max(np.abs(errors)))
    return PaperEstimate(total, worst, samples)


def nodal_level_variances(mechanism: RangeMechanism) -> list[FloatArray]:
    """Exact variance of every node query of the balanced tree over n cells, by depth.

    Entry d holds the 2^d node variances at depth d (the last entry: the leaves at the
    deepest level). The paper's Fig. 5 plots their level means.
    """
    _check_mechanism(mechanism)
    if len(mechanism.shape) != 1:
        raise ValueError("nodal_level_variances is defined for 1-D mechanisms")
    nodes = nodal_ranges(mechanism.shape[0])
    variances = query_variances(mechanism, nodes)
    if nodes.depth is None:  # pragma: no cover - nodal_ranges always tags depths
        raise RuntimeError("nodal workload without depths")
    return [variances[nodes.depth == d] for d in range(int(nodes.depth.max()) + 1)]
