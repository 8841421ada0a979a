"""The scipy functions the mechanisms call, each imported on its first call.

``import scipy.signal`` takes about a second (it imports scipy.stats), and
``scipy.optimize`` about half of that; a mechanism module imports these names at
the top and pays for scipy only when a release or an optimization calls them, so
choosing a mechanism (``dpcount count --mechanism auto``) and running a tree import
no scipy at all. Same signatures and results as scipy's own functions.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["brentq", "lfilter", "minimize"]


#: the longest input the first-order recursion of :func:`lfilter` runs in Python
FIRST_ORDER_MAX = 4096
#: the inputs' total length the Python recursion takes in one process before
#: :func:`lfilter` goes to scipy for good: ~0.1 s of Python loop, the cost of
#: ``import scipy.signal`` (a plan or a long release then runs each filter in C)
FIRST_ORDER_BUDGET = 1 << 18

_python_steps = 0


def lfilter(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.signal.lfilter`. A first-order recursion on a short 1-D input with
    initial conditions (``lfilter([1.0], [1.0, -c], x, zi=[z0])``, the BLT variances of
    a small horizon) runs here in Python floats instead, with bit-identical results
    (:func:`_first_order`): ``import scipy.signal`` costs more than a small job. Once
    scipy.signal is imported, or the Python recursions have run
    :data:`FIRST_ORDER_BUDGET` steps in all, every call goes to scipy (same doubles,
    in C: thousands of such filters cost seconds in Python)."""
    global _python_steps
    if _in_python():
        fast = _first_order(*args, **kwargs)
        if fast is not None:
            _python_steps += len(fast[0])
            return fast
    from scipy.signal import lfilter as scipy_lfilter

    return scipy_lfilter(*args, **kwargs)


def _in_python() -> bool:
    """Whether :func:`lfilter` tries the Python recursion: scipy.signal not imported and
    the budget not spent."""
    return _python_steps < FIRST_ORDER_BUDGET and "scipy.signal" not in sys.modules


def _first_order(b: Any, a: Any, x: Any, axis: int = -1, zi: Any = None) -> tuple[Any, Any] | None:
    """``lfilter([1.0], [1.0, a1], x, zi=[z0])`` for a 1-D float64 ``x`` of at most
    :data:`FIRST_ORDER_MAX` steps, else None. The same floating-point operations in the
    same order as scipy's direct form II transposed filter (``_linear_filter``,
    ``lfilter.c``) with ``b`` padded to ``[1.0, 0.0]``: ``y = z + 1.0·x``, then
    ``z = x·0.0 − y·a1``; so each output is the same double (tests compare bits)."""
    import numpy as np

    if zi is None or len(b) != 1 or len(a) != 2:
        return None
    b0, a0, a1 = (float(v) for v in (b[0], a[0], a[1]))
    x = np.asarray(x)
    z_in = np.asarray(zi)
    if (b0, a0) != (1.0, 1.0) or x.dtype != np.float64 or x.ndim != 1 or z_in.shape != (1,):
        return None
    if x.size > FIRST_ORDER_MAX or z_in.dtype != np.float64 or axis not in (-1, 0):
        return None
    z = float(z_in[0])
    out = []
    for v in x.tolist():
        y = z + b0 * v
        z = v * 0.0 - y * a1
        out.append(y)
    return np.array(out, dtype=np.float64), np.array([z])


def brentq(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.brentq`."""
    from scipy.optimize import brentq as scipy_brentq

    return scipy_brentq(*args, **kwargs)


def minimize(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.minimize`."""
    from scipy.optimize import minimize as scipy_minimize

    return scipy_minimize(*args, **kwargs)
