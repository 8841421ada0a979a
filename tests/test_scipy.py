"""``dpcount._scipy``: scipy's functions imported on first call; the first-order
recursion of ``lfilter`` on short inputs runs without scipy, bit for bit (issue 22
item 7: a small ``dpcount count --delta`` run imports no scipy.signal)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from scipy.signal import lfilter as scipy_lfilter

from dpcount import _scipy
from dpcount._scipy import FIRST_ORDER_BUDGET, FIRST_ORDER_MAX, _first_order, lfilter


def _bits(a: np.ndarray) -> list[int]:
    return np.asarray(a, dtype=np.float64).view(np.int64).tolist()


def test_the_first_order_recursion_is_scipys_bit_for_bit() -> None:
    """Random lengths, magnitudes over ten decades, coefficients on both sides of ±1,
    signed zeros in the input and the initial condition: the same doubles (signs of
    zero included) as scipy.signal.lfilter, output and final state."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 200))
        x = rng.standard_normal(n) * 10 ** rng.uniform(-5, 5, n)
        x[rng.integers(0, n)] = -0.0 if trial % 3 == 0 else x[0]
        c = float(rng.uniform(-1.2, 1.2)) if trial % 7 else 0.0
        zi = [c * float(rng.standard_normal())] if trial % 5 else [-0.0]
        want, want_z = scipy_lfilter([1.0], [1.0, -c], x, zi=zi)
        fast = _first_order([1.0], [1.0, -c], x, zi=zi)
        assert fast is not None
        assert _bits(fast[0]) == _bits(want) and _bits(fast[1]) == _bits(want_z)


def test_other_filters_go_to_scipy() -> None:
    x = np.linspace(-1.0, 1.0, 50)
    assert _first_order([1.0], [1.0, -0.5, 0.25], x, zi=[0.0, 0.0]) is None  # order 2
    assert _first_order([1.0], [1.0, -0.5], x) is None  # no initial condition
    assert _first_order([2.0], [1.0, -0.5], x, zi=[0.0]) is None  # b != [1]
    assert _first_order([1.0], [1.0, -0.5], np.zeros(FIRST_ORDER_MAX + 1), zi=[1.0]) is None
    assert _first_order([1.0], [1.0, -0.5], np.ones((3, 2)), axis=0, zi=[[0.0, 0.0]]) is None
    y = lfilter([1.0], [1.0, -0.5, 0.25], x)
    assert _bits(y) == _bits(scipy_lfilter([1.0], [1.0, -0.5, 0.25], x))


def test_long_or_many_filters_run_in_scipy_with_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once scipy.signal is imported, or the Python recursions have used their budget,
    every first-order filter runs in scipy (the row-scaled BLT's 37,696 filters in a
    plan at 2^20): the doubles are the ones the Python recursion gives."""
    calls: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return _first_order(*args, **kwargs)

    monkeypatch.setattr(_scipy, "_first_order", spy)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3000) * 10 ** rng.uniform(-3, 3, 3000)
    python = _first_order([1.0], [1.0, -0.97], x, zi=[0.3])
    assert python is not None
    assert "scipy.signal" in sys.modules  # imported by this test module
    routed = lfilter([1.0], [1.0, -0.97], x, zi=[0.3])
    assert not calls
    assert _bits(routed[0]) == _bits(python[0]) and _bits(routed[1]) == _bits(python[1])
    # without scipy.signal: Python until the budget is spent, then scipy
    monkeypatch.delitem(sys.modules, "scipy.signal")
    monkeypatch.setattr(_scipy, "_python_steps", FIRST_ORDER_BUDGET - 1000)
    assert _scipy._in_python()
    first = lfilter([1.0], [1.0, -0.97], x, zi=[0.3])
    assert calls == [1] and _scipy._python_steps == FIRST_ORDER_BUDGET + 2000
    assert _bits(first[0]) == _bits(python[0]) and _bits(first[1]) == _bits(python[1])
    assert not _scipy._in_python()  # the budget is spent: scipy from now on


def test_long_filters_without_scipy_signal_are_scipys_bit_for_bit() -> None:
    """In a fresh interpreter a long first-order filter (and a second-order one, and
    along axis 0 of a matrix) runs scipy's compiled ``_linear_filter`` loaded alone:
    ``scipy.signal`` is not imported, the doubles are those scipy.signal.lfilter gives
    after it is imported, and the loaded module is the one scipy.signal then uses."""
    import subprocess

    code = """
import sys
import numpy as np
from dpcount._scipy import lfilter
rng = np.random.default_rng(3)
x = rng.standard_normal(300000) * 10 ** rng.uniform(-4, 4, 300000)
X = rng.standard_normal((5000, 3))
calls = [([1.0], [1.0, -0.999], x, -1, [0.25]), ([1.0], [1.0, -0.5, 0.06], x, -1, [0.0, 1.0]),
         ([1.0], [1.0, -0.9], X, 0, np.ones((1, 3)))]
got = [lfilter(b, a, v, axis=ax, zi=z) for b, a, v, ax, z in calls]
plain = lfilter([1.0], [1.0, -0.97], X, axis=0)  # no initial condition
assert "scipy.signal" not in sys.modules, "scipy.signal imported"
assert "scipy.signal._sigtools" in sys.modules
import scipy.signal
assert scipy.signal._signaltools._sigtools is sys.modules["scipy.signal._sigtools"]
for (b, a, v, ax, z), (y, zf) in zip(calls, got):
    want, want_z = scipy.signal.lfilter(b, a, v, axis=ax, zi=z)
    assert y.tobytes() == want.tobytes() and zf.tobytes() == want_z.tobytes()
assert plain.tobytes() == scipy.signal.lfilter([1.0], [1.0, -0.97], X, axis=0).tobytes()
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_linear_filter_is_lfilters_compiled_call_bit_for_bit() -> None:
    """Issue 33 item 3 (the vector BLT batch): :func:`_scipy.linear_filter` is the
    compiled function scipy's lfilter calls, so calling it with lfilter's arrays gives
    its doubles and final state; here on a strided (K, D) view along axis 0 with an
    initial state, as the vector chunks call it, and a decay of exactly 1 (the sum)."""
    rng = np.random.default_rng(5)
    own = rng.standard_normal((700, 4, 9)) * 10 ** rng.uniform(-3, 3, (700, 4, 9))
    zi = rng.standard_normal((1, 4))
    function = _scipy.linear_filter()
    for r in (0.2, 0.999993, 1.0):
        x = own[:, :, 3]  # strided lanes
        y, zf = function(np.array([1.0]), np.array([1.0, -r]), x, 0, zi)
        want, want_zf = scipy_lfilter([1.0], [1.0, -r], x, axis=0, zi=zi)
        assert y.tobytes() == want.tobytes() and zf.tobytes() == want_zf.tobytes()
        # a wrong decay (one ulp off) gives other doubles: the comparison can fail
        other, _ = function(np.array([1.0]), np.array([1.0, -np.nextafter(r, 0.0)]), x, 0, zi)
        assert other.tobytes() != want.tobytes()
