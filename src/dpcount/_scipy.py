"""The scipy functions the mechanisms call, each imported on its first call.

``import scipy.signal`` takes about a second (it imports scipy.stats), and
``scipy.optimize`` about half of that; a mechanism module imports these names at
the top and pays for scipy only when a release or an optimization calls them, so
choosing a mechanism (``dpcount count --mechanism auto``) and running a tree import
no scipy at all. Same signatures and results as scipy's own functions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["brentq", "lfilter", "minimize"]


def lfilter(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.signal.lfilter`."""
    from scipy.signal import lfilter as scipy_lfilter

    return scipy_lfilter(*args, **kwargs)


def brentq(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.brentq`."""
    from scipy.optimize import brentq as scipy_brentq

    return scipy_brentq(*args, **kwargs)


def minimize(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.minimize`."""
    from scipy.optimize import minimize as scipy_minimize

    return scipy_minimize(*args, **kwargs)
