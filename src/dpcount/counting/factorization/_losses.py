"""The losses every factorization's exact error terms define, written once."""

from __future__ import annotations

__all__ = ["Losses"]


class Losses:
    """``mean_loss`` and ``max_loss`` of a frozen dataclass of exact error terms (in units
    of one sample's variance) that has ``sensitivity_squared``, ``mean_variance`` and
    ``max_variance``: the variances with the sensitivity scaled to 1 (single
    participation)."""

    sensitivity_squared: float
    mean_variance: float
    max_variance: float

    @property
    def mean_loss(self) -> float:
        """sens² · mean variance: the mean variance with the sensitivity scaled to 1."""
        return self.sensitivity_squared * self.mean_variance

    @property
    def max_loss(self) -> float:
        """sens² · largest variance: the largest variance with the sensitivity scaled to 1."""
        return self.sensitivity_squared * self.max_variance
