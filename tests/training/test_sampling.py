"""Cyclic Poisson sampling: the sampler, the amplified calibration against dp_accounting
(tight to 1%: a 1% smaller multiplier breaks the target) and the plumbing into the
privatizer (q = 1 gives the fixed-batch σ; non-banded strategies are refused)."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.privacy import Budget
from dpcount.training import (
    amplified_noise_multiplier,
    cyclic_poisson_batches,
    gaussian_privatizer,
)

BUDGET = Budget(epsilon=2.0, delta=1e-5)


def _epsilon(event: object, delta: float = 1e-5) -> float:
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    return float(accountant.compose(event).get_epsilon(delta))


def test_cyclic_poisson_batches_sample_each_steps_partition_with_probability_q() -> None:
    sampler = cyclic_poisson_batches(10_000, 4, 0.3, rng=5)
    parts = sampler.partitions
    assert sorted(np.concatenate(parts).tolist()) == list(range(10_000))
    sizes = []
    for step in range(1, 9):
        batch = sampler.batch(step)
        assert set(batch.tolist()) <= set(parts[(step - 1) % 4].tolist())
        sizes.append(len(batch) / len(parts[(step - 1) % 4]))
    # 8 binomial proportions of 2500 trials: mean within 5.5 standard errors of q = 0.3
    se = np.sqrt(0.3 * 0.7 / (8 * 2500))
    assert abs(np.mean(sizes) - 0.3) < 5.5 * se
    assert abs(np.mean(sizes) - 0.33) > 5.5 * se  # a wrong q would be caught
    with pytest.raises(ValueError, match="step must be >= 1"):
        sampler.batch(0)
    with pytest.raises(ValueError, match="sampling_probability"):
        cyclic_poisson_batches(10, 2, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize(("q", "epochs"), [(0.5, 4), (0.1, 10)])
def test_amplified_multiplier_meets_the_target_and_one_percent_less_does_not(
    q: float, epochs: int
) -> None:
    dp_accounting = pytest.importorskip("dp_accounting")

    def event(z: float) -> object:
        sampled = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
        return dp_accounting.SelfComposedDpEvent(sampled, epochs)

    z = amplified_noise_multiplier(sampling_probability=q, epochs=epochs, budget=BUDGET)
    assert _epsilon(event(z)) <= 2.0
    assert _epsilon(event(0.99 * z)) > 2.0


@pytest.mark.slow
def test_privatizer_states_the_amplified_event_and_q_one_keeps_the_fixed_sigma() -> None:
    pytest.importorskip("dp_accounting")
    kw = {"epochs": 4, "batches_per_epoch": 50, "clip_norm": 1.0, "budget": BUDGET, "bands": 4}
    fixed = gaussian_privatizer("toeplitz", **kw)
    same = gaussian_privatizer(
        "toeplitz", sampling="cyclic-poisson", sampling_probability=1.0, **kw
    )
    assert same.amplification is None
    assert same.mechanism.noise_scale == fixed.mechanism.noise_scale
    amp = gaussian_privatizer("toeplitz", sampling="cyclic-poisson", sampling_probability=0.5, **kw)
    assert amp.amplification is not None
    assert amp.mechanism.noise_scale < 0.7 * fixed.mechanism.noise_scale
    assert _epsilon(amp.dp_event()) <= 2.0
    # the mechanism's own (unamplified) guarantee is weaker but true: ε' > ε
    assert amp.mechanism.budget.epsilon is not None and amp.mechanism.budget.epsilon > 2.0
    # one participation's sensitivity: the encoder's column norm times the clip bound
    c = np.asarray(amp.mechanism.coefficients)
    assert amp.amplification.unit_sensitivity == pytest.approx(np.sqrt(np.sum(c**2)), rel=1e-9)


def test_cyclic_poisson_refuses_full_band_strategies_and_bad_options() -> None:
    kw = {"epochs": 2, "batches_per_epoch": 5, "clip_norm": 1.0, "budget": BUDGET}
    with pytest.raises(ValueError, match="banded strategy with bands <= batches_per_epoch"):
        gaussian_privatizer("blt", sampling="cyclic-poisson", sampling_probability=0.5, **kw)
    with pytest.raises(ValueError, match="banded strategy"):
        gaussian_privatizer(
            "toeplitz", sampling="cyclic-poisson", sampling_probability=0.5, bands=6, **kw
        )
    with pytest.raises(ValueError, match="needs sampling_probability"):
        gaussian_privatizer("input", sampling="cyclic-poisson", **kw)
    with pytest.raises(ValueError, match="sampling_probability is for sampling='cyclic-poisson'"):
        gaussian_privatizer("input", sampling_probability=0.5, **kw)
    with pytest.raises(ValueError, match="sampling must be one of"):
        gaussian_privatizer("input", sampling="shuffle", **kw)
    with pytest.raises(ValueError, match="bands is an option of mechanism='toeplitz'"):
        gaussian_privatizer("blt", bands=2, **kw)
