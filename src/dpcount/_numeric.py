"""One root finder for the package: bisection of a monotone predicate.

Every calibration that solves for a scale (the analytic Gaussian σ, the zCDP
conversions, the PLD Laplace scale) and the Laplace-vs-Gaussian threshold search
bisect a bracket [lo, hi] whose ends sit on either side of a monotone boundary,
then keep the end that is on the safe side. This is that loop, once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["arithmetic_mid", "bisect", "geometric_mid"]


def arithmetic_mid(lo: float, hi: float) -> float:
    return 0.5 * (lo + hi)


def geometric_mid(lo: float, hi: float) -> float:
    """For positive brackets searched in ratio (a scale to a relative precision)."""
    return math.sqrt(lo * hi)


def bisect(
    below: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    done: Callable[[float, float], bool],
    steps: int = 200,
    mid: Callable[[float, float], float] = arithmetic_mid,
) -> tuple[float, float]:
    """Shrink a bracket around the boundary of a monotone predicate.

    Invariant (the caller's to establish): ``below(lo)`` holds and ``below(hi)``
    does not, and ``below`` is monotone on [lo, hi]. Each step evaluates the
    midpoint ``m`` and moves ``lo`` to it if ``below(m)``, else ``hi``; it stops
    when ``done(lo, hi)`` after a step, or after ``steps`` steps.

    Returns:
        the final bracket ``(lo, hi)``; the caller keeps the end on the safe side
        (e.g. the larger noise scale).
    """
    for _ in range(steps):
        m = mid(lo, hi)
        if below(m):
            lo = m
        else:
            hi = m
        if done(lo, hi):
            break
    return lo, hi
