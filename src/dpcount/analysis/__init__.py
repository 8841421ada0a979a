"""Exact error analysis and mechanism comparison."""

from dpcount.analysis.advisor import TreeChoice, best_k

__all__ = ["TreeChoice", "best_k"]
