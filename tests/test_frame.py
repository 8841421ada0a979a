"""``dpcount.frame``: pandas (and polars when installed) in, frames out (issue 13, item 5)."""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.analysis.compare import compare
from dpcount.counting import KaryTree
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.frame import choose_mechanism, private_counts

pd = pytest.importorskip("pandas")


def sunspot_like() -> pd.DataFrame:
    years = np.arange(1700, 1760)
    activity = np.round(50 + 40 * np.sin(np.arange(60) / 2.0), 1)
    return pd.DataFrame({"YEAR": years, "SUNACTIVITY": activity}, index=np.arange(100, 160))


def test_a_two_column_frame_without_a_named_column_is_refused() -> None:
    with pytest.raises(ValueError, match=r"data has 2 columns \['YEAR', 'SUNACTIVITY'\]: name"):
        private_counts(sunspot_like(), epsilon=1.0)


def test_named_columns_keep_index_and_time() -> None:
    df = sunspot_like()
    out = private_counts(df, value="SUNACTIVITY", time="YEAR", epsilon=1.0, rng=3)
    assert list(out.columns) == ["YEAR", "private_count", "std"]
    assert out.index.equals(df.index)
    assert (out["YEAR"].to_numpy() == df["YEAR"].to_numpy()).all()
    # fractional data: plan's first row, with its continuous noise
    best = compare(60, 1.0)[0]
    np.testing.assert_array_equal(out["std"].to_numpy(), np.sqrt(best.build(rng=0).variances()))
    mech = best.build(rng=3)
    np.testing.assert_array_equal(
        out["private_count"].to_numpy(), mech.release(df["SUNACTIVITY"].to_numpy())
    )
    assert "epsilon=1-DP" in out.attrs["privacy"]
    # the years are not noised: nothing of YEAR enters the release
    out2 = private_counts(df.assign(YEAR=df["YEAR"] * 7), value="SUNACTIVITY", time="YEAR",
                          epsilon=1.0, rng=3)  # fmt: skip
    np.testing.assert_array_equal(out2["private_count"], out["private_count"])


def test_series_integer_data_uses_integer_noise_and_keeps_its_index() -> None:
    idx = pd.date_range("2020-01-01", periods=40, freq="D")
    s = pd.Series(np.arange(40) % 3, index=idx, name="cases")
    out = private_counts(s, epsilon=1.0, mechanism="kary", k=4, rng=8)
    assert out.index.equals(idx)
    expected = KaryTree(40, epsilon=1.0, k=4, noise="discrete-laplace", rng=8).release(s.to_numpy())
    np.testing.assert_array_equal(out["private_count"].to_numpy(), expected)
    assert out["private_count"].dtype.kind == "i"
    auto = private_counts(s, epsilon=1.0, rng=8)
    kw = choose_mechanism(40, 1.0)
    assert kw["noise"] == "discrete-laplace" and kw["name"] in DISCRETE_CAPABLE
    name = kw.pop("name")
    std = np.sqrt(build_mechanism(name, horizon=40, epsilon=1.0, rng=0, **kw).variances())
    np.testing.assert_array_equal(auto["std"].to_numpy(), std)


def test_missing_values() -> None:
    df = pd.DataFrame({"d": list("abcd"), "n": [1.0, np.nan, 2.0, 1.0]})
    with pytest.raises(ValueError, match=r"1 missing value\(s\), the first at row 1: pass"):
        private_counts(df, value="n", epsilon=1.0)
    out = private_counts(df, value="n", time="d", epsilon=1.0, missing="skip", rng=1)
    assert list(out["d"]) == ["a", "c", "d"] and list(out.index) == [0, 2, 3]
    out = private_counts(df, value="n", time="d", epsilon=1.0, missing="zero", rng=1)
    assert list(out["d"]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        ({"value": "nope"}, ValueError, r"value column 'nope' is not in the frame's columns"),
        ({"value": "SUNACTIVITY", "time": "SUNACTIVITY"}, ValueError, "different columns"),
        ({"value": "SUNACTIVITY", "k": 4}, ValueError, "name a mechanism to pass \\['k'\\]"),
        ({"value": "SUNACTIVITY", "missing": "drop"}, ValueError, "missing must be one of"),
    ],
)
def test_bad_arguments(kw: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        private_counts(sunspot_like(), epsilon=1.0, **kw)


def test_not_a_frame() -> None:
    with pytest.raises(TypeError, match="pandas or polars DataFrame or Series, got list"):
        private_counts([1, 2, 3], epsilon=1.0)


def test_polars() -> None:
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"day": ["a", "b", "c"], "n": [1, 0, 2]})
    with pytest.raises(ValueError, match="name the one to count"):
        private_counts(df, epsilon=1.0)
    out = private_counts(df, value="n", time="day", epsilon=1.0, mechanism="binary", rng=2)
    assert out.columns == ["day", "private_count", "std"]
    assert out["day"].to_list() == ["a", "b", "c"]
