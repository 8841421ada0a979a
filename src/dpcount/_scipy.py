"""The scipy functions the mechanisms call, each imported on its first call.

``import scipy.signal`` takes about a second (it imports scipy.stats), and
``scipy.optimize`` about half of that; a mechanism module imports these names at
the top and pays for scipy only when a release or an optimization calls them, so
choosing a mechanism (``dpcount count --mechanism auto``) and running a tree import
no scipy at all. Same signatures and results as scipy's own functions.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import math
import os
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["brent_root", "brentq", "compiled_alone", "lfilter", "linear_filter", "minimize"]


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
    if "scipy.signal" not in sys.modules:
        direct = _linear_filter(*args, **kwargs)
        if direct is not None:
            return direct[0]
    from scipy.signal import lfilter as scipy_lfilter

    return scipy_lfilter(*args, **kwargs)


def _linear_filter(b: Any, a: Any, x: Any, axis: int = -1, zi: Any = None) -> tuple[Any] | None:
    """``(scipy.signal.lfilter(b, a, x, axis, zi),)`` for ``len(a) ≥ 2``, computed by
    the very call scipy's ``lfilter`` makes for it (``_sigtools._linear_filter(b, a, x,
    axis[, zi])`` on the arrays as given: the same doubles, tested) with
    ``scipy.signal._sigtools`` loaded alone (:func:`compiled_alone`, ~5 ms) instead of
    ``import scipy.signal`` (~0.5 s: a ``dpcount plan`` at 2^20 or a long BLT release
    runs thousands of long filters). None (scipy's own function then) for other calls
    or when the module cannot be loaded alone."""
    import numpy as np

    b, a = np.atleast_1d(b), np.atleast_1d(a)
    if len(a) < 2 or b.ndim != 1 or a.ndim != 1 or b.size == 0:
        return None
    try:
        sigtools = compiled_alone("scipy.signal._sigtools")
    except Exception:  # another scipy layout: the ordinary import
        return None
    if zi is None:
        return (sigtools._linear_filter(b, a, np.asarray(x), axis),)
    return (sigtools._linear_filter(b, a, np.asarray(x), axis, np.asarray(zi)),)


def linear_filter() -> Callable[..., Any]:
    """scipy's compiled ``_sigtools._linear_filter``, the function scipy's
    :func:`lfilter` calls as ``_linear_filter(b, a, x, axis, zi)`` for a denominator
    ``a`` of two or more coefficients (after ``np.atleast_1d(b)``, ``np.atleast_1d(a)``,
    ``np.asarray(x)``, ``np.asarray(zi)``): called with float64 arrays it gives the same
    doubles without the wrapper's checks (~7 µs a call; a vector BLT batch makes one per
    buffer and block, thousands). Loaded alone (:func:`compiled_alone`) where it can be,
    else by importing its package."""
    try:
        module = compiled_alone("scipy.signal._sigtools")
    except Exception:  # another scipy layout: the ordinary import
        module = importlib.import_module("scipy.signal._sigtools")
    function: Callable[..., Any] = module._linear_filter
    return function


def compiled_alone(name: str) -> types.ModuleType:
    """The compiled module ``name`` (e.g. ``"scipy.special._special_ufuncs"``) loaded
    from its file, without importing its packages' ``__init__`` modules (scipy's test
    utilities, array-API layer, numpy.testing, f2py: 0.2–0.5 s; this ~1–5 ms).

    The extension module must import numpy only. It is loaded under its own name and
    module lock and kept in ``sys.modules``, so a later import of its package reuses
    it (the same object: tested for ``scipy.special`` and ``scipy.signal``).

    Raises:
        StopIteration, AssertionError, ImportError: the file is not where scipy's
            layout puts it (callers fall back to the ordinary import).
    """
    bootstrap: Any = getattr(importlib, "_bootstrap")  # noqa: B009 - the module lock
    with bootstrap._ModuleLockManager(name):
        if name in sys.modules:  # imported meanwhile
            return sys.modules[name]
        top, *middle, leaf = name.split(".")
        root = importlib.util.find_spec(top)  # finds, does not import
        assert root is not None and root.submodule_search_locations is not None
        folder = os.path.join(next(iter(root.submodule_search_locations)), *middle)
        path = next(
            p
            for p in (
                os.path.join(folder, leaf + suffix)
                for suffix in importlib.machinery.EXTENSION_SUFFIXES
            )
            if os.path.exists(p)
        )
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return sys.modules.setdefault(name, module)


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
    """:func:`scipy.optimize.brentq`: :func:`brent_root` (the same double, no import)
    for ``(f, a, b)`` with ``xtol``, ``rtol``, ``maxiter``, else scipy's."""
    if len(args) == 3 and set(kwargs) <= {"xtol", "rtol", "maxiter"}:
        return brent_root(*args, **kwargs)
    from scipy.optimize import brentq as scipy_brentq

    return scipy_brentq(*args, **kwargs)


def brent_root(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float = 2e-12,
    rtol: float = 8.881784197001252e-16,
    maxiter: int = 100,
) -> float:
    """:func:`scipy.optimize.brentq` ``(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter)``
    in Python floats, without ``import scipy.optimize`` (about half a second): the same
    steps in the same order as scipy's C solver (``Zeros/brentq.c``, Brent 1973,
    ch. 4: inverse quadratic or secant step when it stays within the bracket and
    shrinks fast enough, else bisection), so the same double (tests compare bits).

    Raises:
        ValueError: f(a) and f(b) of the same sign.
        RuntimeError: no convergence in ``maxiter`` iterations (as scipy's).
    """
    xpre, xcur = float(a), float(b)
    fpre, fcur = float(f(xpre)), float(f(xcur))
    if fpre == 0.0:
        return xpre
    if fcur == 0.0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre != 0.0 and fcur != 0.0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0.0 or abs(sbis) < delta:
            return xcur
        spre, scur = _brent_step(xpre, xcur, xblk, fpre, fcur, fblk, spre, scur, sbis, delta)
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = float(f(xcur))
    raise RuntimeError(f"brent_root did not converge in {maxiter} iterations")


def _brent_step(
    xpre: float,
    xcur: float,
    xblk: float,
    fpre: float,
    fcur: float,
    fblk: float,
    spre: float,
    scur: float,
    sbis: float,
    delta: float,
) -> tuple[float, float]:
    """(spre, scur) after one step of :func:`brent_root`: interpolation when the last
    step was long enough and |f| fell, kept if short enough, else bisection."""
    if abs(spre) > delta and abs(fcur) < abs(fpre):
        if xpre == xblk:  # interpolate (secant)
            stry = -fcur * (xcur - xpre) / (fcur - fpre)
        else:  # extrapolate (inverse quadratic)
            dpre = (fpre - fcur) / (xpre - xcur)
            dblk = (fblk - fcur) / (xblk - xcur)
            stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
        if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
            return scur, stry  # a good short step
    return sbis, sbis


def minimize(*args: Any, **kwargs: Any) -> Any:
    """:func:`scipy.optimize.minimize`."""
    from scipy.optimize import minimize as scipy_minimize

    return scipy_minimize(*args, **kwargs)
