"""Embedded keyed engine: tree structure, calibration, bounding, determinism, errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.engine import KeyedMechanism
from dpcount.keyed.events import Contributions, TimeBuckets
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.privacy.discrete import discrete_laplace_variance
from tests.keyed._budget import keyed_counts, keyed_mechanism

SECRET_BYTES = b"k" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)


def _height(k: int, horizon: int) -> int:
    h = 1
    while k**h <= horizon:  # smallest h with k^h > T, i.e. ceil(log_k(T + 1))
        h += 1
    return h


def _mech(**kw: object) -> KeyedMechanism:
    base: dict[str, object] = dict(
        n_keys=10,
        horizon=100,
        mechanism="tree",
        k=2,
        noise="discrete-laplace",
        epsilon=1.0,
        delta=None,
        calibration=None,
        l1_step=1.0,
        l2_step=1.0,
        neighbouring="event-level",
        key_block=16,
    )
    base.update(kw)
    return keyed_mechanism(**base)


@pytest.mark.parametrize(("k", "horizon"), [(2, 100), (2, 127), (2, 128), (3, 80), (8, 4096)])
def test_calibration_uses_tree_height_times_step_sensitivity(k: int, horizon: int) -> None:
    h = _height(k, horizon)
    m = _mech(k=k, horizon=horizon, l1_step=3.0, l2_step=math.sqrt(3.0))
    g = m.privacy
    assert m.counting.height == h  # type: ignore[attr-defined]
    assert g.l1_sensitivity == h * 3.0
    assert g.l2_sensitivity == pytest.approx(math.sqrt(h * 3.0), rel=1e-15)
    # discrete Laplace scale t ≥ l1/epsilon (never less noise than calibrated)
    assert m.counting.sampler.scale >= Fraction(h * 3)  # type: ignore[attr-defined]
    assert g.epsilon <= 1.0
    var = discrete_laplace_variance(float(m.counting.sampler.scale))  # type: ignore[attr-defined]
    digits = [sum(int(c) for c in np.base_repr(s, k)) for s in range(1, horizon + 1)]
    assert np.allclose(m.std() ** 2, np.array(digits) * var, rtol=1e-14)


def test_gaussian_calibration_uses_l2() -> None:
    m = _mech(noise="gaussian", delta=1e-6, l1_step=4.0, l2_step=2.0, horizon=63)
    assert m.privacy.l2_sensitivity == pytest.approx(2.0 * math.sqrt(6))
    from dpcount.privacy.calibration import gaussian_sigma

    assert m.counting.sampler.sigma == pytest.approx(  # type: ignore[attr-defined]
        gaussian_sigma(2.0 * math.sqrt(6), 1.0, 1e-6, method="analytic")
    )


# ---------------------------------------------------------------- whole runs
def _events(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "day": (
                pd.Timestamp("2024-03-01") + pd.to_timedelta(rng.integers(0, 40, n), "D")
            ).strftime("%Y-%m-%d"),
            "product": rng.choice([f"p{i}" for i in range(30)] + ["zz"], n),
            "user": rng.integers(0, 50, n),
            "qty": rng.integers(0, 4, n),
        }
    )


KEYS = [f"p{i}" for i in range(30)]


def _run(events: pd.DataFrame, **kw: object) -> pd.DataFrame:
    args: dict[str, object] = dict(
        keys=KEYS,
        time_column="day",
        key_column="product",
        step="1D",
        epsilon=1.0,
        secret=SECRET,
        start="2024-03-01",
        horizon=40,
    )
    args.update(kw)
    res = keyed_counts(events, **args)  # type: ignore[arg-type]
    assert res.frame is not None
    return res.frame


def _exact(events: pd.DataFrame, weight: str | None = None) -> np.ndarray:
    ev = events[events["product"].isin(KEYS)]
    step = (pd.to_datetime(ev["day"]) - pd.Timestamp("2024-03-01")).dt.days
    w = ev[weight] if weight else pd.Series(1, index=ev.index)
    table = (
        pd.DataFrame({"k": ev["product"].map(KEYS.index), "s": step, "w": w})
        .groupby(["k", "s"])["w"]
        .sum()
        .unstack(fill_value=0)
        .reindex(index=range(30), columns=range(40), fill_value=0)
    )
    return np.cumsum(table.to_numpy(), axis=1)  # (keys, steps)


def test_tiny_noise_run_equals_exact_running_counts() -> None:
    events = _events()
    out = _run(events, epsilon=2000.0)
    got = out["private_count"].to_numpy().reshape(30, 40)
    assert np.array_equal(got, _exact(events))
    assert out["step"].tolist()[:3] == [1, 2, 3]
    assert out["time"].tolist()[:2] == ["2024-03-01", "2024-03-02"]


def test_output_is_a_function_of_secret_and_data_only() -> None:
    events = _events()
    base = _run(events, chunk_keys=2048)
    for chunk in (1, 7, 16):
        assert _run(events, chunk_keys=chunk).equals(base)
    shuffled = events.sample(frac=1.0, random_state=1).reset_index(drop=True)
    assert _run(shuffled, chunk_keys=5).equals(base)
    other = _run(events, secret=unsafe_testing_secret(b"j" * 32))
    assert not other["private_count"].equals(base["private_count"])
    noise = base["private_count"].to_numpy().reshape(30, 40) - _exact(events)
    assert np.any(noise != 0)


@pytest.mark.parametrize("noise", ["laplace", "gaussian", "discrete-gaussian"])
def test_other_noise_kinds_bit_identical_across_chunks(noise: str) -> None:
    events = _events()
    kw: dict[str, object] = {"noise": noise}
    if "gaussian" in noise:
        kw["delta"] = 1e-6
    a = _run(events, chunk_keys=4, **kw)
    b = _run(events, chunk_keys=30, **kw)
    assert a.equals(b)


def test_reported_std_matches_empirical_variance() -> None:
    """40 000 keys without events: the spread of each step's count is its stated std."""
    n_keys, horizon = 40_000, 12
    empty = pd.DataFrame({"t": np.array([], dtype=np.int64), "key": np.array([], dtype=np.int64)})
    res = keyed_counts(
        empty,
        keys=list(range(n_keys)),
        time_column="t",
        key_column="key",
        step=1,
        epsilon=0.5,
        secret=SECRET,
        start=1,
        horizon=horizon,
        mechanism="tree",
        k=3,
    )
    assert res.frame is not None
    x = res.frame["private_count"].to_numpy().reshape(n_keys, horizon).astype(float)
    std = res.frame["std"].to_numpy()[:horizon]
    var = std**2
    # Var of a sample variance ≈ (m4 − σ⁴)/n; sums of discrete Laplace have m4 ≤ 6σ⁴ here
    se = np.sqrt(5.0 * var**2 / n_keys)
    assert np.all(np.abs(x.var(axis=0) - var) < 4 * se)
    assert np.all(np.abs(x.mean(axis=0)) < 4 * np.sqrt(var / n_keys))


# ---------------------------------------------------------------- bounding and reports
def test_drops_are_counted() -> None:
    events = pd.DataFrame(
        {
            "day": ["2024-03-01", "2024-03-02", "2024-02-01", "2024-05-01", "2024-03-03"],
            "product": ["p1", "nope", "p1", "p2", "p2"],
        }
    )
    res = keyed_counts(
        events,
        keys=KEYS,
        time_column="day",
        key_column="product",
        step="1D",
        epsilon=1.0,
        secret=SECRET,
        start="2024-03-01",
        horizon=40,
    )
    r = res.report
    assert (r.events, r.unknown_key, r.out_of_range, r.kept_events) == (5, 1, 2, 2)


def test_event_weights_are_clipped_and_reported() -> None:
    events = _events()
    res = keyed_counts(
        events,
        keys=KEYS,
        time_column="day",
        key_column="product",
        weight_column="qty",
        step="1D",
        epsilon=2000.0,
        secret=SECRET,
        start="2024-03-01",
        horizon=40,
        max_weight=2,
    )
    assert res.frame is not None
    clipped = events.assign(qty=events["qty"].clip(upper=2))
    got = res.frame["private_count"].to_numpy().reshape(30, 40)
    assert np.array_equal(got, _exact(clipped, "qty"))
    inside = events[events["product"].isin(KEYS)]
    assert res.report.clipped_events == int((inside["qty"] > 2).sum())
    assert res.report.clipped_weight == float((inside["qty"] - 2).clip(lower=0).sum())
    assert res.mechanism.privacy.l1_sensitivity == 2 * res.mechanism.counting.height  # type: ignore[attr-defined]


def test_unit_bounding_keeps_max_keys_per_unit_and_step_order_free() -> None:
    events = pd.DataFrame(
        {
            "t": [1] * 5 + [1, 1, 2],
            "key": ["a", "b", "c", "d", "e", "a", "a", "a"],
            "unit": ["u"] * 5 + ["v", "v", "v"],
            "w": [1, 1, 1, 1, 1, 2, 2, 1],
        }
    )
    kw: dict[str, object] = dict(
        keys=list("abcde"),
        time_column="t",
        key_column="key",
        weight_column="w",
        unit_column="unit",
        max_keys=2,
        max_weight=3,
        step=1,
        start=1,
        horizon=4,
        epsilon=5000.0,
        secret=SECRET,
    )
    res = keyed_counts(events, **kw)  # type: ignore[arg-type]
    rev = keyed_counts(events.iloc[::-1].reset_index(drop=True), **kw)  # type: ignore[arg-type]
    assert res.frame is not None and rev.frame is not None
    assert res.frame.equals(rev.frame)
    r = res.report
    assert r.unit_dropped_keys == 3 and r.unit_dropped_weight == 3.0
    assert r.clipped_events == 1 and r.clipped_weight == 1.0  # v's 2 + 2 on 'a' cut to 3
    counts = res.frame.pivot(index="key", columns="step", values="private_count")
    step1 = counts[1]
    assert step1["a"] >= 3 and int((step1[["b", "c", "d", "e"]] > 0).sum()) <= 2
    assert int(step1.sum()) == 3 + 2  # v: 3 on a; u: two of its five keys (one each)
    g = res.mechanism.privacy
    h = res.mechanism.counting.height  # type: ignore[attr-defined]
    assert g.l1_sensitivity == 2 * 3 * h
    assert g.l2_sensitivity == pytest.approx(math.sqrt(2 * h) * 3)
    assert "unit-step level" in g.neighbouring


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"time_column": "when"}, r"time column 'when' not found"),
        ({"key_column": "sku"}, r"key column 'sku' not found"),
        (
            {"weight_column": "qty", "events": {"qty": [1, -2, 1]}},
            r"negative weight -2\.0 in column 'qty' \(data row 2\)",
        ),
        ({"weight_column": "qty", "events": {"qty": [1, 1.5, 1]}}, r"not an integer"),
        (
            {"events": {"day": ["2024-03-01", "2024-13-45", "x"]}},
            r"unparseable time '2024-13-45' in column 'day' \(data row 2\)",
        ),
        ({"keys": ["p1", "p1"]}, r"keys must be unique"),
        ({"step": "fortnight"}, r"step must be"),
        ({"max_keys": 2}, r"max_keys needs a unit column"),
        ({"unit_column": "day"}, r"a unit column needs max_keys"),
    ],
)
def test_bad_input_names_the_thing(change: dict[str, object], match: str) -> None:
    events = pd.DataFrame({"day": ["2024-03-01"] * 3, "product": ["p1"] * 3})
    for col, values in dict(change.pop("events", {})).items():  # type: ignore[call-overload]
        events[col] = values
    kw: dict[str, object] = dict(
        keys=KEYS,
        time_column="day",
        key_column="product",
        step="1D",
        epsilon=1.0,
        secret=SECRET,
    )
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        keyed_counts(events, **kw)  # type: ignore[arg-type]


def test_time_buckets() -> None:
    b = TimeBuckets.make("1h", "2024-01-01T00:00:00Z")
    times = pd.Series(
        pd.to_datetime(["2024-01-01T00:59:59", "2024-01-01T01:00:00", "2023-12-31T23:00:00"])
    )
    assert b.steps(times).tolist() == [1, 2, 0]
    assert b.labels(2) == ["2024-01-01T00:00:00", "2024-01-01T01:00:00"]
    i = TimeBuckets.make(10, 5)
    assert i.steps(pd.Series([5, 14, 15, 4])).tolist() == [1, 1, 2, 0]
    assert i.labels(3) == ["5", "15", "25"]
    d = TimeBuckets.make("1D", "2024-01-01")
    from dpcount.keyed.events import parse_times

    tz = parse_times(pd.Series(["2024-01-01T23:30:00-02:00"]), "t")
    assert d.steps(tz).tolist() == [2]  # 01:30 UTC on Jan 2


def test_text_universe_matches_integer_key_column() -> None:
    events = pd.DataFrame({"t": [1, 1, 2], "key": np.array([7, 12, 7], dtype=np.int64)})
    res = keyed_counts(
        events,
        keys=["7", "12", "99"],
        time_column="t",
        key_column="key",
        step=1,
        start=1,
        horizon=2,
        epsilon=4000.0,
        secret=SECRET,
    )
    assert res.report.unknown_key == 0
    assert res.frame is not None
    assert res.frame["private_count"].tolist() == [1, 2, 1, 1, 0, 0]


def test_numpy_keys_give_the_same_configuration() -> None:
    from dpcount.keyed.events import KeyUniverse

    assert KeyUniverse(np.arange(3)).digest() == KeyUniverse([0, 1, 2]).digest()


@pytest.mark.parametrize("keys", [range(5), range(3, 40, 7), range(10, -6, -3)])
def test_range_universe_stays_a_range_and_matches_like_its_list(keys: range) -> None:
    from dpcount.keyed.events import KeyUniverse

    kept, listed = KeyUniverse(keys), KeyUniverse(list(keys))
    assert kept.keys is keys  # not materialized: O(1) whatever its length
    assert kept.digest() == listed.digest()  # the same configuration, secret and run id
    values = [*keys, 41, -7, 10**6]
    for column in (
        pd.Series(values),
        pd.Series([float(v) for v in values] + [3.5]),
        pd.Series([str(v) for v in values] + [*values], dtype=object),
    ):
        assert kept.indices(column).tolist() == listed.indices(column).tolist()


def test_huge_range_universe_costs_nothing() -> None:
    from dpcount.keyed.events import KeyUniverse

    universe = KeyUniverse(range(10**15))  # a tuple of it would not fit in any memory
    assert len(universe) == 10**15
    found = universe.indices(pd.Series([0, 10**15 - 1, 10**15, -1]))
    assert found.tolist() == [0, 10**15 - 1, -1, -1]
    with pytest.raises(ValueError, match="at least one key"):
        KeyUniverse(range(0))


def test_string_universe_builds_its_lookup_once_and_matches_as_text(monkeypatch) -> None:
    """The lookup index of a universe is built once per process (at construction, or on
    first use after unpickling: it is not pickled), not on every call as before; string
    universes match values as text (int columns against digit keys, missing: -1)."""
    import pickle

    import dpcount.keyed.events as events_module
    from dpcount.keyed.events import KeyUniverse

    built = []
    real = events_module._lookup_index

    def counted(keys: object) -> object:
        built.append(1)
        return real(keys)  # type: ignore[arg-type]

    monkeypatch.setattr(events_module, "_lookup_index", counted)
    universe = KeyUniverse(["7", "b", "a", "10"])
    column = pd.Series([10, 7, 3, 7])
    for _ in range(3):
        assert universe.indices(column).tolist() == [3, 0, -1, 0]
    text = pd.Series(["a", None, "b", "7", "x"], dtype="str")
    assert universe.indices(text).tolist() == [2, -1, 1, 0, -1]
    mixed = pd.Series(["a", 7, 10.0, "10"], dtype=object)  # one key: 7, 10.0 as "7", "10"
    assert universe.indices(mixed).tolist() == [2, 0, 3, 3]
    assert len(built) == 1
    copy = pickle.loads(pickle.dumps(universe))
    assert "_lookup" not in copy.__dict__ and copy == universe
    assert copy.indices(column).tolist() == [3, 0, -1, 0] and len(built) == 2
    copy.indices(text)
    assert len(built) == 2
    ints = KeyUniverse([5, 3, 9])  # other universes keep pandas' inferred index
    assert ints.indices(pd.Series([9.0, 3, 4])).tolist() == [2, 1, -1]


def test_range_keys_release_what_their_list_releases() -> None:
    events = pd.DataFrame({"t": [1, 2, 2, 3], "key": [0, 4, 9, 2]})
    kw: dict[str, object] = dict(
        time_column="t", key_column="key", step=1, start=1, horizon=3, epsilon=1.0,
        secret=SECRET, chunk_keys=2,
    )  # fmt: skip
    a = keyed_counts(events, keys=range(6), **kw)
    b = keyed_counts(events, keys=list(range(6)), **kw)
    assert a.run_id == b.run_id and a.report == b.report
    assert a.frame is not None and b.frame is not None and a.frame.equals(b.frame)
    assert a.report.unknown_key == 1


def test_no_events_needs_explicit_start() -> None:
    empty = pd.DataFrame({"t": np.array([], dtype=np.int64), "key": np.array([], dtype=object)})
    with pytest.raises(ValueError, match="pass start and horizon"):
        keyed_counts(
            empty,
            keys=["a"],
            time_column="t",
            key_column="key",
            step=1,
            epsilon=1.0,
            secret=SECRET,
        )


# ---------------------------------------------------------------- the tree with subtraction
@pytest.mark.parametrize(("k", "horizon"), [(3, 100), (4, 63), (19, 500), (2, 77)])
def test_subtraction_std_and_sensitivity_match_kary_tree(k: int, horizon: int) -> None:
    from dpcount.counting import KaryTree

    mine = _mech(k=k, horizon=horizon, subtract=True)
    ref = KaryTree(horizon, k=k, subtract=True, epsilon=1.0, noise="discrete-laplace")
    assert mine.counting.height == ref.height  # type: ignore[attr-defined]
    assert mine.privacy.l1_sensitivity == ref.privacy.l1_sensitivity
    assert np.allclose(mine.std() ** 2, ref.variances(), rtol=1e-12)
    plain = KaryTree(horizon, k=k, subtract=False, epsilon=1.0, noise="discrete-laplace")
    assert np.allclose(_mech(k=k, horizon=horizon).std() ** 2, plain.variances(), rtol=1e-12)


def test_subtraction_run_tiny_noise_exact_and_chunk_invariant() -> None:
    events = _events()
    out = _run(events, epsilon=2000.0, mechanism="kary", k=3, subtract=True)
    assert np.array_equal(out["private_count"].to_numpy().reshape(30, 40), _exact(events))
    a = _run(events, mechanism="kary", k=5, subtract=True, chunk_keys=3)
    b = _run(events, mechanism="kary", k=5, subtract=True, chunk_keys=30)
    assert a.equals(b)
    plain = _run(events, mechanism="kary", k=5, subtract=False, chunk_keys=30)
    assert not a["private_count"].equals(plain["private_count"])


def test_describe_names_the_keyed_sampler() -> None:
    for noise, delta, word in [
        ("discrete-laplace", None, "two geometric"),
        ("discrete-laplace", 1e-6, "two geometric"),
        ("discrete-gaussian", 1e-6, "Alg. 3"),
        ("gaussian", 1e-6, "Box-Muller"),
    ]:
        text = _mech(noise=noise, delta=delta).describe()
        assert word in text and "Alg. 2" not in text and "AES-CTR" in text, text


@pytest.mark.parametrize("whole", [True, False])
def test_partial_sums_and_contributions_equal_pandas_groupby(whole: bool) -> None:
    """Event-level sums per (key, step): whole-number weights take one int64 sort, which
    gives pandas' (compensated) groupby sums bit for bit; other weights take the groupby
    itself. Both: one row per (key, step), sorted by key then step."""
    from dpcount.keyed.events import partial_sums, to_contributions

    rng = np.random.default_rng(4)
    n = 5000
    weight = rng.integers(0, 2**40, n).astype(np.float64)
    if not whole:
        weight += rng.random(n)
    rows = pd.DataFrame(
        {"key": rng.integers(0, 30, n), "step": rng.integers(1, 40, n), "weight": weight}
    )
    expected = rows.groupby(["key", "step"], sort=True)["weight"].sum()
    for contributions in (
        to_contributions(rows, np.float64),
        to_contributions(partial_sums(rows, by_unit=False), np.float64),
    ):
        assert np.array_equal(contributions.key, expected.index.get_level_values(0))
        assert np.array_equal(contributions.step, expected.index.get_level_values(1))
        assert np.array_equal(contributions.value, expected.to_numpy())
    # duplicates were summed (not a no-op): fewer rows than events
    assert len(expected) < n


def test_release_is_release_with_state_without_the_state() -> None:
    m = _mech(horizon=12, n_keys=5)
    one = np.ones(3, dtype=np.int64)
    data = Contributions(np.array([0, 2, 4]), np.array([1, 5, 12]), one)
    base = np.array([3, 0, 1], dtype=np.int64)
    kept, _ = m.release_with_state(b"k" * 32, data, 1, 4, first=4, last=9, base=base)
    assert np.array_equal(m.release(b"k" * 32, data, 1, 4, first=4, last=9, base=base), kept)
    assert not np.array_equal(m.release(b"k" * 32, data, 1, 4, first=4, last=9), kept)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'keep_state'"):
        m.release(b"k" * 32, data, 1, 4, keep_state=True)  # type: ignore[call-arg]
