"""The column-normalized and row-scaled BLT's scalar noise in chunked products.

Scalar blocks (a batch release, a stream's blocks of 4096) compute w = G z in chunks of
32 steps (one Toeplitz product per chunk, one lfilter per buffer across chunks) instead
of one lfilter per buffer over every step; a batch reads the weights (and the row-scaled
BLT its row weights) from kept tables. Checked against an
extended-precision (long double) computation of the same noise with the accurate
decays λ_i = 1 − d_i: within the float model's κ·u·σ_t·(1 + Z*/σ₁)
(:mod:`dpcount.privacy.float_safe`), and a wrong chunk matrix fails it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.signal import lfilter

from dpcount.counting import RowScaledBLT
from dpcount.counting.factorization import normalized_blt as nb
from dpcount.counting.factorization.normalized_blt import NormalizedBLT
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

T = (1 << 16) - 27  # one batch block: full chunks and a remainder chunk (≤ the limit 2^16)
U = 2.0**-53


def _model_ratio(mech: Any, noise: np.ndarray, z: np.ndarray, process: Any) -> float:
    """max_t (|N̂_t − N_t| + u|N̂_t|)/(u·σ_t·(1 + Z*/σ₁)), N in long double."""
    ld = np.longdouble
    zl = z.astype(ld)
    lam = ld(1) - process._one_minus_decay.astype(ld)
    w = zl.copy()
    for i in range(len(lam)):
        p = lfilter(np.array([1.0], dtype=ld), np.array([1.0, -lam[i]], dtype=ld), zl)
        w[1:] += ld(process._scale[i]) * p[:-1]
    exact = np.cumsum(w * mech._weight_table().astype(ld))
    sd = np.sqrt(mech.variances())
    sigma1 = float(np.sqrt(mech.sampler.variance))
    zstar = float(np.max(np.abs(mech.sampler.sample(np.random.default_rng(1), (T,)))))
    err = np.abs(noise.astype(ld) - exact) + U * np.abs(noise)
    return float(np.max(err / (U * sd * (1.0 + zstar / sigma1))))


@pytest.mark.parametrize("cls", [NormalizedBLT, RowScaledBLT])
def test_batch_block_within_the_float_model(cls: Any) -> None:
    mech = cls.optimized(T, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
    process = mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(1)))
    noise = process.next_many(T)
    z = mech.sampler.sample(np.random.default_rng(1), (T,))
    if cls is RowScaledBLT:
        z = z / mech.row_weights()
    assert _model_ratio(mech, noise, z, process) < MODEL_KAPPA / 4
    if cls is RowScaledBLT:
        return  # the stream's path is the column-normalized one's (checked there)
    # the stream's blocks of 4096 (weights from aligned blocks of 512): the same to rounding
    stream = mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(1)))
    steps = np.array([stream.next() for _ in range(T)])
    assert np.allclose(steps, noise, rtol=0, atol=1e-9 * float(noise.std()))
    assert np.allclose(stream._p, process._p, rtol=1e-9)


def test_a_wrong_chunk_matrix_fails_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    mech = NormalizedBLT.optimized(T, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
    real = nb.NormalizedBLTNoiseProcess._chunk_matrices

    def skewed(self: Any, c: int) -> Any:
        G, P, F, rc = real(self, c)
        return G, P, F * (1.0 + 1e-9), rc  # the state's weights off by 10^-9

    monkeypatch.setattr(nb.NormalizedBLTNoiseProcess, "_chunk_matrices", skewed)
    process = mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(1)))
    noise = process.next_many(T)
    z = mech.sampler.sample(np.random.default_rng(1), (T,))
    assert _model_ratio(mech, noise, z, process) > MODEL_KAPPA


def test_row_weight_table_is_the_profiles_floats() -> None:
    mech = RowScaledBLT.optimized(4096, budget=Budget(epsilon=1.0, delta=1e-6), rng=0)
    table = mech._row_weight_table()
    assert table is mech._row_weight_table() and not table.flags.writeable
    assert table.tobytes() == mech._profile.weights(0, 4096).tobytes()
    assert table[1000:3000].tobytes() == mech._profile.weights(1000, 2000).tobytes()
