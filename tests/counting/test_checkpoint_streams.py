"""Stream continuation patterns that checkpoints rely on (update / update_many mixes).

A restored stream continues from any step, after any mix of ``update`` and
``update_many``; these tests pin the continuation itself, with constant noise
(every release is then a fixed function of t), for horizons past the first
noise block of the square-root process.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.counting import SqrtFactorization
from dpcount.privacy import ConstantNoise
from tests.mechanisms import FACTORIES

# The dense oracle is O(T^2) memory; the others are checked past 1024 steps.
LARGE = sorted(name for name in FACTORIES if not name.startswith("dense"))


@pytest.mark.parametrize("name", LARGE)
def test_block_sized_chunks_then_steps_match_batch(name: str) -> None:
    """update_many of exactly the first block, then single steps, then chunks."""
    T = 2100
    m = FACTORIES[name](T, 0).with_sampler(ConstantNoise(1.0))
    batch = m.release(np.zeros(T))
    s = m.stream()
    parts = [s.update_many(np.zeros(1024)), np.array([s.update(0.0) for _ in range(5)])]
    parts.append(s.update_many(np.zeros(1000)))
    parts.append(np.array([s.update(0.0) for _ in range(T - 2029)]))
    np.testing.assert_allclose(np.concatenate(parts), batch, rtol=1e-12, atol=1e-9)


def test_sqrt_handover_does_not_reuse_released_noise() -> None:
    """Regression: after update_many handed over a whole computed block, the next step
    reused step 1's noise (output_1025 - output_1 was the exact data difference)."""
    T = 3000
    m = SqrtFactorization(T, epsilon=1.0, delta=1e-6, rng=5)
    s = m.stream()
    first = s.update_many(np.zeros(1024))
    nxt = s.update(0.0)
    assert nxt != first[0]
    exact = m.with_sampler(ConstantNoise(1.0)).stream()
    exact.update_many(np.zeros(1024))
    # With unit samples N_1025 = f(0) + ... + f(1024), far from N_1 = 1.
    assert exact.update(0.0) == pytest.approx(float(np.sum(m.coefficients()[:1025])), rel=1e-12)
