"""DPBench histograms (1-D n = 4096, 2-D 256×256) load and run through every mechanism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcount.privacy import ZeroNoise
from dpcount.ranges import (
    CorrelatedPerturbation,
    IdentityMechanism,
    build_mechanism,
    total_squared_error,
    worst_case_expected_error,
)


@pytest.mark.parametrize("name", ["correlated", "identity", "tree", "hierarchical", "wavelet"])
def test_one_dimensional_dpbench(dpbench_dir: Path, name: str) -> None:
    x = np.load(dpbench_dir / "1D" / "SEARCHLOGS.n4096.npy")
    assert x.shape == (4096,)
    mech = build_mechanism(name, x.shape, epsilon=0.1, delta=1e-9, rng=0)
    exact = mech.with_sampler(ZeroNoise()).release(x)
    lo, hi = np.array([0, 100, 4095]), np.array([4095, 2047, 4095])
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    np.testing.assert_allclose(exact.query(lo, hi), prefix[hi + 1] - prefix[lo])
    release = mech.release(x)
    z = (release.query(lo, hi) - (prefix[hi + 1] - prefix[lo])) / np.sqrt(
        release.range_variance(lo, hi)
    )
    assert np.all(np.abs(z) < 6.0)
    assert 0 < worst_case_expected_error(mech) < np.inf
    assert total_squared_error(mech) > 0


def test_correlated_beats_identity_on_dpbench_ranges(dpbench_dir: Path) -> None:
    """§4.2: the correlated mechanism's exact all-range error is far below identity's."""
    n = np.load(dpbench_dir / "1D" / "PATENT.n4096.npy").size
    correlated = CorrelatedPerturbation(n, epsilon=0.1, delta=1e-9)
    identity = IdentityMechanism(n, epsilon=0.1, delta=1e-9)
    assert total_squared_error(correlated) < total_squared_error(identity) / 20


def test_two_dimensional_dpbench(dpbench_dir: Path) -> None:
    x = np.load(dpbench_dir / "2D" / "BeijingTaxiS_256_256.npy")
    assert x.shape == (256, 256)
    mech = CorrelatedPerturbation(x.shape, epsilon=0.5, delta=1e-9, rng=1)
    exact = mech.with_sampler(ZeroNoise()).release(x)
    assert exact.query([0, 0], [255, 255]) == pytest.approx(x.sum())
    assert exact.query([10, 20], [30, 40]) == pytest.approx(x[10:31, 20:41].sum())
    release = mech.release(x)
    err = release.query([0, 0], [255, 255]) - x.sum()
    assert abs(err) < 6 * mech.sigma
    assert release.range_variance([0, 0], [255, 255]) == pytest.approx(mech.sigma**2)
