"""BLT in the keyed engine: dense-oracle structure, calibration, determinism, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.counting.factorization.blt import BLT
from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.prf import PositionPRF, keyed_gaussian
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.stages import release_task as _release_task
from tests.keyed._budget import keyed_counts, keyed_mechanism
from tests.keyed._keys import noise_key

SECRET_BYTES = b"b" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)
KEYS = [f"k{i}" for i in range(11)]
HORIZON = 40


def _events(seed: int = 4, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"t": rng.integers(0, HORIZON, n), "key": rng.choice([*KEYS, "x"], n)})


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="t", key_column="key", step=1, start=0, horizon=HORIZON,
        epsilon=1.0, delta=1e-6, noise="gaussian", mechanism="blt", secret=SECRET,
        chunk_keys=4,
    )  # fmt: skip
    kw.update(extra)
    return kw


def _mech(horizon: int = HORIZON, n_keys: int = len(KEYS), **extra: Any) -> KeyedMechanism:
    kw: dict[str, Any] = dict(
        n_keys=n_keys, horizon=horizon, mechanism="blt", noise="gaussian", epsilon=1.0,
        delta=1e-6, calibration=None, l1_step=1.0, l2_step=1.0, neighbouring="event-level",
        key_block=16,
    )  # fmt: skip
    kw.update(extra)
    return keyed_mechanism(**kw)


def _exact(events: pd.DataFrame) -> np.ndarray:
    """(steps, keys) exact running counts, by pandas."""
    ev = events[events["key"].isin(KEYS)]
    table = (
        pd.crosstab(ev["t"], ev["key"])
        .reindex(index=range(HORIZON), columns=KEYS, fill_value=0)
        .to_numpy()
    )
    return np.cumsum(table, axis=0)


def test_run_noise_is_the_decoder_applied_to_prf_gaussians() -> None:
    events = _events()
    res = keyed_counts(events, **_kw())
    assert res.frame is not None
    m = res.mechanism
    got = res.frame["private_count"].to_numpy().reshape(len(KEYS), HORIZON).T
    sigma = float(m.counting.sampler.sigma)  # type: ignore[attr-defined]
    # row r of the draws is step r + 1: BLT draws z in step order
    key = noise_key(SECRET_BYTES, res.config)  # bound to the configuration
    prf = PositionPRF(key, "stream/gaussian", m.key_block)
    z = keyed_gaussian(prf, (0, 0, HORIZON, 0, len(KEYS)), sigma)
    B, _ = BLT.optimized(HORIZON, epsilon=1.0, delta=1e-6).dense_factorization()
    # float-safe: each count is snapped to its step's grid (≤ std/4), so within half of it
    grids = m.counting.release_grids(1, HORIZON)
    assert grids is not None and np.all(np.mod(got, grids[:, None]) == 0)
    assert np.all(np.abs(got - (_exact(events) + B @ z)) <= grids[:, None] / 2 + 1e-8)
    assert np.any(np.abs(got - _exact(events)) > 0.1)


def test_calibration_and_std_match_the_single_stream_blt() -> None:
    m = _mech()
    ref = BLT.optimized(HORIZON, epsilon=1.0, delta=1e-6)
    assert m.privacy.l2_sensitivity == pytest.approx(ref.privacy.l2_sensitivity, rel=1e-14)
    assert np.allclose(m.std() ** 2, ref.variances(), rtol=1e-12)
    # independent: the largest column norm of the dense encoder C (a relative 1e-12 above)
    _, C = ref.dense_factorization()
    col = float(np.sqrt((C**2).sum(axis=0)).max())
    assert col <= m.privacy.l2_sensitivity <= col * (1 + 1e-9)
    # unit bounding: l2 across keys = sqrt(max_keys) * max_weight scales the sensitivity
    wide = _mech(l1_step=6.0, l2_step=np.sqrt(3) * 2)
    assert wide.privacy.l2_sensitivity == pytest.approx(np.sqrt(3) * 2 * col, rel=1e-9)
    assert m.structure.startswith("BLT(horizon=40, buffers=") and "Box-Muller" in m.describe()


def test_reported_std_matches_empirical_spread() -> None:
    """20 000 keys without events: per-step sample variance within 5 standard errors."""
    n = 20_000
    res = keyed_counts(
        pd.DataFrame({"t": [0], "key": [0]}),
        **_kw(keys=list(range(n)), horizon=16, chunk_keys=4096),
    )
    assert res.frame is not None
    vals = res.frame["private_count"].to_numpy().reshape(n, 16).copy()
    vals[0] -= np.arange(1, 17) >= 1  # key 0's one event at step 1
    var = vals.var(axis=0, ddof=1)
    want = res.std**2
    assert np.all(np.abs(var / want - 1) < 5 * np.sqrt(2 / (n - 1)))


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_bit_identical_for_any_key_chunking(chunk: int) -> None:
    events = _events()
    a = keyed_counts(events, **_kw(chunk_keys=4)).frame
    b = keyed_counts(events, **_kw(chunk_keys=chunk)).frame
    assert a is not None and a.equals(b)


@pytest.mark.parametrize("cuts", [[1], [16], [7, 33], [20, 21]])
def test_resume_across_time_is_bit_identical(tmp_path: Path, cuts: list[int]) -> None:
    events = _events()
    frames, first = [], 1
    for last in [*cuts, HORIZON]:
        piece = events[(events["t"] >= first - 1) & (events["t"] <= last - 1)]
        res = keyed_counts(
            piece, state=tmp_path / "s", until=last, **_kw(chunk_keys=5, secret=tmp_path / "k")
        )
        assert res.frame is not None
        frames.append(res.frame)
        first = last + 1
    body = json.loads((tmp_path / "k").read_text())  # the same noise, as a testing secret
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    one = keyed_counts(events, **_kw(secret=twin)).frame
    assert one is not None
    got = pd.concat(frames, ignore_index=True)
    order = np.lexsort((got["step"].to_numpy(), got["key"].map(KEYS.index).to_numpy()))
    assert got.iloc[order].reset_index(drop=True).equals(one)


def test_tampered_state_is_refused(tmp_path: Path) -> None:
    events = _events()
    kw = _kw(secret=tmp_path / "k")
    keyed_counts(events[events["t"] < 10], state=tmp_path / "s", until=10, **kw)
    data = bytearray((tmp_path / "s").read_bytes())
    data[-5] ^= 4  # inside the sums (no noise state is stored)
    (tmp_path / "s").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="fails its authentication check"):
        keyed_counts(events[events["t"] >= 10], state=tmp_path / "s", until=HORIZON, **kw)


def test_bad_input_names_the_parameter() -> None:
    with pytest.raises(ValueError, match="noise='discrete-laplace' is not available for BLT"):
        keyed_counts(_events(), **_kw(noise="discrete-laplace", delta=None))
    with pytest.raises(ValueError, match="mechanism must be one of"):
        keyed_counts(_events(), **_kw(mechanism="wavelet"))
    with pytest.raises(ValueError, match="delta"):
        keyed_counts(_events(), **_kw(delta=None))
    with pytest.raises(ValueError, match=r"noise_state: shape \(2, 1\) is not the noise state"):
        buffers = np.zeros((2, 1), dtype=np.uint64)
        _release_task(_mech(), SECRET_BYTES, None, 0, 1, (2, 2), None, buffers, False)  # type: ignore[arg-type]
