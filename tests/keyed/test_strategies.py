"""One strategy, any engine: keyed runs drive the registry's counting mechanisms.

The keyed engine builds the single-stream mechanism (same class, same calibration)
and drives its noise process with the keys as the trailing axis and a PRF noise
source. Checked here: exact std = the single-stream ``variance_at``; the noise is
the mechanism's L applied to the PRF draws; calibration against a brute force over
neighbouring key-step changes; draw order independent of the number of keys; chunk,
resume invariance; ``mechanism="auto"``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.analysis.recommend import recommend_mechanism
from dpcount.counting.registry import build_mechanism
from dpcount.keyed.engine import STEP_BLOCK, KeyedMechanism
from dpcount.keyed.prf import PositionPRF, keyed_gaussian
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.privacy import Budget
from dpcount.privacy.noise import GaussianNoise
from dpcount.privacy.sampling import GeneratorBlock
from dpcount.privacy.source import GeneratorWords, NoiseSource
from tests.keyed._budget import keyed_counts, keyed_mechanism
from tests.keyed._keys import noise_key

SECRET_BYTES = b"s" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)
GAUSS = {"noise": "gaussian", "delta": 1e-6}
#: (registry name, budget keywords): every registry mechanism, with a noise it takes
CASES: list[tuple[str, dict[str, Any]]] = [
    ("kary", {"noise": "discrete-laplace"}),
    ("binary", {"noise": "laplace"}),
    ("honaker", {"noise": "discrete-gaussian", "delta": 1e-6}),
    ("sqrt", GAUSS),
    ("normalized-sqrt", GAUSS),
    ("blt", GAUSS),
    ("toeplitz", GAUSS),
    ("dense-optimum", GAUSS),
    ("smooth-binary", {"noise": "laplace"}),
    ("input", {"noise": "laplace"}),
]


def _mech(name: str, horizon: int = 20, n_keys: int = 3, **kw: Any) -> KeyedMechanism:
    args: dict[str, Any] = dict(
        n_keys=n_keys, horizon=horizon, mechanism=name, noise="discrete-laplace", epsilon=1.0,
        delta=None, calibration=None, l1_step=1.0, l2_step=1.0, neighbouring="event-level",
        key_block=4,
    )  # fmt: skip
    args.update(kw)
    return keyed_mechanism(**args)


@pytest.mark.parametrize(("name", "budget"), CASES)
def test_std_is_the_single_stream_variance(name: str, budget: dict[str, Any]) -> None:
    mine = _mech(name, **budget)
    ref = build_mechanism(name, horizon=20, budget=Budget(epsilon=1.0, **budget), rng=0)
    assert type(mine.counting) is type(ref)
    want = np.sqrt([ref.variance_at(t) for t in range(1, 21)])
    assert np.array_equal(mine.std(), want)
    assert mine.privacy.epsilon == ref.privacy.epsilon  # type: ignore[union-attr]


class _Recorder(GeneratorWords):
    """A Generator's words that record the rows of each draw."""

    def __init__(self) -> None:
        super().__init__(np.random.default_rng(0))
        self.calls: list[int] = []

    def block(self, row: int, shape: tuple[int, ...]) -> Any:
        self.calls.append(int(np.prod(shape[:-1])))
        return GeneratorBlock(self.rng, shape)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "budget"), CASES)
def test_draw_order_does_not_depend_on_the_number_of_keys(
    name: str, budget: dict[str, Any]
) -> None:
    """The rows a process draws, call by call, are the same for 1 key and for 5."""
    m = build_mechanism(name, horizon=40, budget=Budget(epsilon=1.0, **budget), rng=0)
    seen = []
    for width in (1, 5):
        rec = _Recorder()
        process = m.noise_process(NoiseSource(m.sampler, rec, width), width)
        for n in (7, 1, 32):
            out = process.next_many(n)
            if isinstance(out, np.ndarray):
                assert out.shape == (n, width)
        seen.append(rec.calls)
    assert seen[0] == seen[1] and sum(seen[0]) > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sqrt", "toeplitz", "dense-optimum", "blt"])
def test_noise_is_the_mechanisms_L_applied_to_the_prf_draws(name: str) -> None:
    """Zero data: the release of key i is L z_i with z_i[r] the PRF draw at (r, i)."""
    horizon, n_keys = 24, 6
    empty = pd.DataFrame({"t": np.array([], dtype=np.int64), "key": np.array([], dtype=object)})
    res = keyed_counts(
        empty, keys=[f"k{i}" for i in range(n_keys)], time_column="t", key_column="key",
        step=1, start=1, horizon=horizon, epsilon=1.0, secret=SECRET, mechanism=name,
        chunk_keys=4, **GAUSS,
    )  # fmt: skip
    assert res.frame is not None
    got = res.frame["private_count"].to_numpy().reshape(n_keys, horizon).T
    m = res.mechanism
    c: Any = m.counting
    L = c.L if name == "dense-optimum" else c.dense_factorization()[0]
    sigma = float(m.counting.sampler.sigma)  # type: ignore[attr-defined]
    key = noise_key(SECRET_BYTES, res.config)  # bound to the configuration
    prf = PositionPRF(key, "stream/gaussian", m.key_block)
    z = keyed_gaussian(prf, (0, 0, L.shape[1], 0, n_keys), sigma)
    # float-safe releases (#30 item 4): each step's values are L z snapped to its grid g_t
    grids = c.release_grids(1, horizon)[:, None]
    assert np.all(got % grids == 0)  # multiples of the step's grid
    assert np.all(np.abs(got - L @ z) <= 0.5 * grids * (1 + 1e-9) + 1e-9 * sigma)
    assert np.count_nonzero(got) > got.size // 2  # (a grid of std/8 rounds some to 0)


def _tree_incidence(horizon: int, k: int) -> np.ndarray:
    """The 3-ary tree's node vector: node (level, m) sums steps m·k^level + 1 ..
    (m + 1)·k^level, for the levels of width k^level <= T (h = ⌈log_k(T + 1)⌉)."""
    rows, width = [], 1
    while width <= horizon:
        for lo in range(0, horizon, width):
            row = np.zeros(horizon)
            row[lo : lo + width] = 1.0
            rows.append(row)
        width *= k
    return np.array(rows)


def _signed_changes(n_keys: int, max_keys: int) -> list[np.ndarray]:
    out = []
    for values in itertools.product((-1.0, 0.0, 1.0), repeat=n_keys):
        if 0 < np.count_nonzero(values) <= max_keys:
            out.append(np.array(values))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "noise", "delta"),
    [
        ("tree", "laplace", None),
        ("honaker", "laplace", None),
        ("sqrt", "gaussian", 1e-6),
        ("blt", "gaussian", 1e-6),
        ("tree", "discrete-gaussian", 1e-6),
    ],
)
def test_unit_level_calibration_against_brute_force(
    name: str, noise: str, delta: float | None
) -> None:
    """max_keys = 2 keys of 3, weight 1: every neighbouring (step, key-vector) change of
    the perturbed matrix C X, in ℓ₁ (Laplace kinds) or ℓ₂ (Gaussian kinds), is within the
    calibrated sensitivity, and the largest one reaches it (up to the safety margin)."""
    horizon, n_keys, max_keys = 8, 3, 2
    m = _mech(
        name, horizon=horizon, n_keys=n_keys, noise=noise, delta=delta,
        l1_step=float(max_keys), l2_step=float(np.sqrt(max_keys)),
        **({"k": 3} if name == "tree" else {}),
    )  # fmt: skip
    c: Any = m.counting
    C = _tree_incidence(horizon, 3) if name == "tree" else c.dense_factorization()[1]
    gaussian = noise.endswith("gaussian")
    worst = 0.0
    for j in range(horizon):
        for delta_keys in _signed_changes(n_keys, max_keys):
            change = np.zeros((horizon, n_keys))
            change[j] = delta_keys
            moved = C @ change
            norm = np.sqrt((moved**2).sum()) if gaussian else np.abs(moved).sum()
            worst = max(worst, float(norm))
    stated = m.privacy.l2_sensitivity if gaussian else m.privacy.l1_sensitivity
    assert worst <= stated <= worst * (1 + 1e-9)


def _events(n_keys: int, horizon: int, n: int = 800, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "t": rng.integers(1, horizon + 1, n),
            "key": rng.choice([f"k{i}" for i in range(n_keys)], n),
        }
    )


def _kw(name: str, budget: dict[str, Any], **extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=[f"k{i}" for i in range(9)], time_column="t", key_column="key", step=1, start=1,
        horizon=30, epsilon=1.0, secret=SECRET, mechanism=name, **budget,
    )  # fmt: skip
    kw.update(extra)
    return kw


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "budget"),
    [("toeplitz", GAUSS), ("dense-optimum", GAUSS), ("normalized-sqrt", GAUSS),
     ("honaker", {"noise": "discrete-laplace"}), ("smooth-binary", {"noise": "laplace"})],
)  # fmt: skip
def test_bit_identical_across_chunks_and_resumes(
    tmp_path: Path, name: str, budget: dict[str, Any]
) -> None:
    events = _events(9, 30)
    frames, first = [], 1
    for last in (7, 30):
        piece = events[(events["t"] >= first) & (events["t"] <= last)]
        kw = _kw(name, budget, chunk_keys=4, state=tmp_path / "s", until=last)
        kw["secret"] = tmp_path / "run.key"  # a resumed run needs a secret file (its mark)
        frames.append(keyed_counts(piece, **kw).frame)
        first = last + 1
    # the uninterrupted runs recompute the file's noise from its bytes and run id
    body = json.loads((tmp_path / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    one = keyed_counts(events, **_kw(name, budget, chunk_keys=9, secret=twin)).frame
    assert one is not None
    again = keyed_counts(events, **_kw(name, budget, chunk_keys=2, secret=twin)).frame
    assert again is not None and again.equals(one)
    got = pd.concat(frames, ignore_index=True)
    order = np.lexsort((got["step"].to_numpy(), got["key"].map(lambda k: int(k[1:])).to_numpy()))
    assert got.iloc[order].reset_index(drop=True).equals(one)


@pytest.mark.slow
def test_empirical_spread_is_the_stated_std() -> None:
    """20 000 keys of the square root factorization without events: each step's sample
    variance within 5 standard errors of std², and twice the variance would fail."""
    n, horizon = 20_000, 6
    res = keyed_counts(
        pd.DataFrame({"t": [1], "key": [0]}), keys=list(range(n)), time_column="t",
        key_column="key", step=1, start=1, horizon=horizon, epsilon=1.0, secret=SECRET,
        mechanism="sqrt", chunk_keys=8192, **GAUSS,
    )  # fmt: skip
    assert res.frame is not None
    vals = res.frame["private_count"].to_numpy().reshape(n, horizon).copy()
    vals[0] -= 1  # key 0's event at step 1
    var = vals.var(axis=0, ddof=1)
    se = np.sqrt(2 / (n - 1))
    assert np.all(np.abs(var / res.std**2 - 1) < 5 * se)
    assert np.all(np.abs(var / (2 * res.std**2) - 1) > 5 * se)


def test_auto_gives_the_flights_example_the_plans_best() -> None:
    """3 keys, 365 daily steps, ε = 1 (the flights example): the plan's best tree, with
    lower error than 0.3's binary tree."""
    events = _events(3, 365, n=3000)
    kw: dict[str, Any] = dict(
        keys=["k0", "k1", "k2"], time_column="t", key_column="key", step=1, start=1,
        horizon=365, epsilon=1.0, secret=SECRET,
    )  # fmt: skip
    auto = keyed_counts(events, **kw)
    rec = recommend_mechanism(365, budget=Budget(epsilon=1.0, noise="discrete-laplace"))
    chosen = auto.mechanism
    assert (chosen.mechanism, chosen.k, chosen.subtract) == (rec.mechanism, rec.k, rec.subtract)
    assert chosen.structure != "KaryTree(horizon=365, k=2, subtract=False, height=9)"
    binary = keyed_counts(events, mechanism="tree", **kw)
    assert np.mean(auto.std**2) < 0.8 * np.mean(binary.std**2)
    ref = build_mechanism(
        rec.mechanism,
        horizon=365,
        budget=Budget(epsilon=1.0, noise="discrete-laplace"),
        rng=0,
        **rec.options(),
    )
    assert np.array_equal(auto.std, np.sqrt(ref.variances()))


def test_noise_source_checks_the_width() -> None:
    source = NoiseSource.generator(GaussianNoise(1.0), np.random.default_rng(0), 3)
    assert source.sample((2, 4, 3)).shape == (2, 4, 3)
    assert source.rows_drawn == 8
    with pytest.raises(ValueError, match="must end with the source's width 3"):
        source.sample((2, 4))


def test_options_of_another_mechanism_are_refused() -> None:
    with pytest.raises(ValueError, match="k and subtract are options of the k-ary tree"):
        _mech("sqrt", k=3, **GAUSS)
    with pytest.raises(ValueError, match="bands is an option of mechanism='toeplitz'"):
        _mech("kary", bands=3)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        _mech("wavelet")
    with pytest.raises(ValueError, match="calibration='pld' is computed for one scalar step"):
        _mech("kary", noise="laplace", delta=1e-6, calibration="pld", l1_step=2.0, l2_step=1.5)
    events = _events(9, 30)
    with pytest.raises(ValueError, match="pass mechanism='kary' with them"):
        keyed_counts(events, **_kw("auto", {}, k=3))


def test_step_block_is_a_power_of_two() -> None:
    assert STEP_BLOCK >= 256 and STEP_BLOCK & (STEP_BLOCK - 1) == 0
