"""``CountingStream.update``'s fast path rounds r = fmod(S, g) + N to the grid g as
fl(fl(r + C·g) − C·g) (C = 1.5·2^52, g a power of two) instead of
:func:`~dpcount.privacy.float_safe.snap_scalar`'s fl(fl(r/g + C) − C)·g: the same floats,
checked here to the bit on ties, zeros, subnormals, both ends of the range |r| < 2^51·g
and beyond it, for grids from 2^-1003 to beyond 2^970 and a grid that is not a power of
two (those two take ``snap_scalar`` itself).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dpcount.counting import SqrtFactorization
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import snap_scalar

_GRIDS = [2.0**-1003, 2.0**-30, 0.5, 1.0, 8.0, 2.0**40, 2.0**969, 2.0**970, 2.0**1000, 3.0]


def _noise_cases(g: float, rng: np.random.Generator) -> list[float]:
    """Noise values whose r = lo + noise hits the rounding's edges for sums with lo = 0."""
    edge = [0.0, -0.0, 5e-324, -5e-324, g / 2, -g / 2, 1.5 * g, -2.5 * g, g * 0.49999999999999994]
    edge += [g * (2.0**51 - 0.5), -g * (2.0**51 - 0.5), g * 2.0**51, -g * 2.0**51]
    edge += [g * (2.0**51 + 2), g * 2.0**52, g * 2.0**60]
    with np.errstate(over="ignore"):  # the largest grids: dropped below
        rand = (rng.normal(0, 1, 60) * g * 10.0 ** rng.integers(0, 17, 60)).tolist()
    return [v for v in edge + rand if math.isfinite(v)]


def _on_fast_path(g: float, steps: int) -> Any:
    """A scalar float-safe stream on update's fast path, snapping to ``g`` (its own grids
    and noise replaced: the rounding alone is under test)."""
    mech = SqrtFactorization(steps + 1, budget=Budget(epsilon=1.0, delta=1e-6), rng=1)
    s = mech.stream()
    s.update(0.0)  # the general path; from the next step on the fast path
    s._g, s._g_end, s._runs, s._refill = g, steps + 1, [], None
    return s


@pytest.mark.parametrize("g", _GRIDS)
@pytest.mark.parametrize("listed", [False, True], ids=["checked", "unchecked"])
def test_fast_path_rounding_equals_snap_scalar_to_the_bit(g: float, listed: bool) -> None:
    """Each step's noise is handed out as from a hand-out list bounded by |N| (armed:
    no range check when |N| < 2^50·g) or by a process without one (checked)."""
    rng = np.random.default_rng(int(math.log2(g)) % 1000 if g != 3.0 else 7)
    noise = _noise_cases(g, rng)
    steps = rng.choice([0.0, -0.0, 1.0, -3.0, 0.375, 2.0**40, -(2.0**40)], len(noise))
    s = _on_fast_path(g, len(noise))
    total, unchecked = 0.0, 0  # the sum after the first (zero) step
    for x, n in zip(steps.tolist(), noise, strict=True):
        s._pop = [n].pop
        s._listed = SimpleNamespace(handout_bound=abs(n), handout_end=10**9) if listed else None
        s._arm()
        unchecked += s._t < s._safe_end
        total += x
        got, want = s.update(x), snap_scalar(total, n, g)
        assert (math.copysign(1.0, got), got) == (math.copysign(1.0, want), want), (g, x, n)
    in_range = sum(abs(n) < 2.0**50 * g for n in noise)
    assert unchecked == (in_range if listed and g != 3.0 and 2.0**-1003 <= g < 2.0**970 else 0)


def test_the_range_check_matters() -> None:
    """Beyond |r| < 2^51·g the scaled form without its check would be wrong (so the
    check in the test above is exercised), and a wrong constant would be seen."""
    g = 1.0
    r = g * (2.0**52 + 3)  # an odd multiple of g beyond the range
    cg = 1.5 * 2.0**52 * g
    assert (r + cg) - cg != snap_scalar(0.0, r, g)
    s = _on_fast_path(g, 1)
    s._pop = [r].pop
    assert s.update(0.0) == snap_scalar(0.0, r, g)
    wrong = 2.0**53 * g  # C = 2^53: the floats near C·g are 2g apart
    assert (1.25 + wrong) - wrong != snap_scalar(0.0, 1.25, g)


def test_unchecked_steps_only_while_the_hand_out_list_is_in_range() -> None:
    """The fast path skips the range check only below ``_safe_end``: within the run and
    the hand-out list, whose bound covers every value in it; a list holding a value
    beyond 2^50·g is not armed, and its step takes ``snap_scalar``'s own rounding."""
    mech = SqrtFactorization(3000, budget=Budget(epsilon=1.0, delta=1e-6), rng=2)
    s = mech.stream()
    s.update(1.0)  # the general path: from the next step on the fast path, armed
    s.update(1.0)
    total = 2.0
    process = s._process
    assert s._t < s._safe_end <= min(s._g_end, process.handout_end)  # type: ignore[union-attr]
    assert process.handout_bound >= max(abs(v) for v in process.handout)  # type: ignore[union-attr]
    assert process.handout_bound < 2.0**50 * s._g  # type: ignore[union-attr]
    g = s._g
    huge = g * (2.0**52 + 3)  # beyond the range: the scaled rounding would be wrong
    cg = g * 1.5 * 2.0**52
    assert ((math.fmod(total + 1.0, g) + huge) + cg) - cg != snap_scalar(total + 1.0, huge, g)
    process.handout[-1] = huge  # type: ignore[union-attr]
    process.handout_bound = math.inf  # type: ignore[union-attr]
    s._arm()
    assert s._safe_end == 0
    assert s.update(1.0) == snap_scalar(total + 1.0, huge, g)
