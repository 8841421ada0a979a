"""``dpcount.frame``: pandas (and polars when installed) in, frames out — the same
options, notes and choice as ``dpcount count`` (issue 13 item 5, issue 22 item 6)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dpcount.analysis.choice import choose
from dpcount.analysis.compare import compare
from dpcount.cli import main
from dpcount.counting import KaryTree
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.frame import choose_mechanism, private_counts
from dpcount.privacy import Budget, PrivacyWarning

pd = pytest.importorskip("pandas")

ONE = Budget(epsilon=1.0)
CONTINUOUS = r"the data are not all whole numbers: using continuous laplace noise"


def sunspot_like() -> pd.DataFrame:
    years = np.arange(1700, 1760)
    activity = np.round(50 + 40 * np.sin(np.arange(60) / 2.0), 1)
    return pd.DataFrame({"YEAR": years, "SUNACTIVITY": activity}, index=np.arange(100, 160))


def _cli(tmp_path: Path, rows: str, argv: list[str]) -> dict[str, list[str]]:
    """``dpcount count`` on a CSV: the output columns."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text(rows)
    assert main(["count", str(src), *argv, "--digits", "17", "--output", str(out)]) == 0
    with out.open() as fh:
        table = list(csv.DictReader(fh))
    return {name: [r[name] for r in table] for name in table[0]}


def test_a_two_column_frame_without_a_named_column_is_refused() -> None:
    with pytest.raises(ValueError, match=r"data has 2 columns \['YEAR', 'SUNACTIVITY'\]: name"):
        private_counts(sunspot_like(), budget=ONE)


def test_named_columns_keep_index_and_time() -> None:
    df = sunspot_like()
    with pytest.warns(PrivacyWarning, match=CONTINUOUS):
        out = private_counts(df, value="SUNACTIVITY", time="YEAR", budget=ONE, rng=3)
    assert list(out.columns) == ["YEAR", "private_count", "std"]
    assert out.index.equals(df.index)
    assert (out["YEAR"].to_numpy() == df["YEAR"].to_numpy()).all()
    # fractional data: plan's first row, with its continuous noise
    best = compare(60, budget=ONE)[0]
    np.testing.assert_array_equal(out["std"].to_numpy(), np.sqrt(best.build(rng=0).variances()))
    mech = best.build(rng=3)
    np.testing.assert_array_equal(
        out["private_count"].to_numpy(), mech.release(df["SUNACTIVITY"].to_numpy())
    )
    assert "epsilon=1-DP" in out.attrs["privacy"]
    assert out.attrs["choice"] == "ranked first by exact MSE by dpcount plan"
    # the years are not noised: nothing of YEAR enters the release
    with pytest.warns(PrivacyWarning, match=CONTINUOUS):
        out2 = private_counts(
            df.assign(YEAR=df["YEAR"] * 7), value="SUNACTIVITY", time="YEAR", budget=ONE, rng=3
        )
    np.testing.assert_array_equal(out2["private_count"], out["private_count"])


def test_series_integer_data_uses_integer_noise_and_keeps_its_index() -> None:
    idx = pd.date_range("2020-01-01", periods=40, freq="D")
    s = pd.Series(np.arange(40) % 3, index=idx, name="cases")
    out = private_counts(s, budget=ONE, mechanism="kary", k=4, rng=8)
    assert out.index.equals(idx)
    expected = KaryTree(40, epsilon=1.0, k=4, noise="discrete-laplace", rng=8).release(s.to_numpy())
    np.testing.assert_array_equal(out["private_count"].to_numpy(), expected)
    assert out["private_count"].dtype.kind == "i"
    auto = private_counts(s, budget=ONE, rng=8)
    kw = choose_mechanism(40, budget=ONE)
    assert kw["budget"].noise == "discrete-laplace" and kw["name"] in DISCRETE_CAPABLE
    name = kw.pop("name")
    std = np.sqrt(build_mechanism(name, horizon=40, rng=0, **kw).variances())
    np.testing.assert_array_equal(auto["std"].to_numpy(), std)


def test_the_old_loose_budget_spelling_is_a_type_error_naming_the_replacement() -> None:
    """0.4 deprecated the loose spelling, 0.5 removed it (issue 33)."""
    s = pd.Series(np.arange(12) % 3, name="cases")
    with pytest.raises(
        TypeError,
        match=r"private_counts\(\) got an unexpected keyword argument 'epsilon': .* removed in "
        r"dpcount 0\.5 .*; pass budget=Budget\(epsilon=1\.0\) instead",
    ):
        private_counts(s, epsilon=1.0, rng=5)  # type: ignore[call-arg]
    with pytest.raises(
        TypeError,
        match=r"choose_mechanism\(\) got the budget's fields epsilon, delta by position: .* "
        r"pass budget=Budget\(epsilon=1\.0, delta=1e-06\) instead",
    ):
        choose_mechanism(12, 1.0, 1e-6)  # type: ignore[misc]


@pytest.mark.parametrize("post", [["--clamp"], ["--monotone", "--clamp", "--round"]])
def test_post_processing_is_the_clis(tmp_path: Path, post: list[str]) -> None:
    x = [3, 0, 1, 0, 0, 2, 0, 1] * 4
    cli = _cli(tmp_path, "n\n" + "".join(f"{v}\n" for v in x), ["--epsilon", "1", "--seed", "6",
                                                                  *post])  # fmt: skip
    flags = {p[2:]: True for p in post}
    out = private_counts(pd.DataFrame({"n": x}), budget=ONE, rng=6, **flags)
    assert list(out.columns) == ["private_count", "raw_private_count", "raw_std"]
    for name in out.columns:
        np.testing.assert_array_equal(out[name].to_numpy(), np.array(cli[name], dtype=float))
    if "--monotone" in post:
        assert (np.diff(out["private_count"].to_numpy()) >= 0).all()


def test_step_bucketing_is_the_clis_and_says_what_comes_from_the_data(tmp_path: Path) -> None:
    days = ["2024-03-02", "2024-03-02", "2024-03-05", "2024-03-03", "2024-03-07"]
    cases = [1, 2, 1, 4, 1]
    rows = "day,cases\n" + "".join(f"{d},{c}\n" for d, c in zip(days, cases, strict=True))
    argv = ["--column", "cases", "--time-column", "day", "--step", "1D", "--epsilon", "1"]
    argv += ["--sensitivity", "4"]
    cli = _cli(tmp_path, rows, [*argv, "--start", "2024-03-01", "--horizon", "9", "--seed", "2"])
    df = pd.DataFrame({"day": days, "cases": cases})
    budget = Budget(epsilon=1.0, step_sensitivity=4)
    out = private_counts(
        df, value="cases", time="day", step="1D", start="2024-03-01", horizon=9, budget=budget,
        rng=2,
    )  # fmt: skip
    assert (
        list(out["day"])
        == list(pd.to_datetime(cli["day"]))
        == list(pd.date_range("2024-03-01", "2024-03-07"))
    )
    np.testing.assert_array_equal(out["private_count"], np.array(cli["private_count"], dtype=int))
    np.testing.assert_array_equal(out["std"], np.array(cli["std"], dtype=float))
    with pytest.warns(PrivacyWarning, match=r"start and horizon taken from the data"):
        derived = private_counts(df, value="cases", time="day", step="1D", budget=budget, rng=2)
    assert derived["day"].iloc[0] == pd.Timestamp("2024-03-02") and len(derived) == 6


def test_a_large_delta_and_continuous_noise_are_the_clis_notes() -> None:
    s = pd.Series([0.5, 1.0, 2.0], name="x")
    with pytest.warns(PrivacyWarning) as caught:
        out = private_counts(s, budget=Budget(epsilon=1.0, delta=0.5, noise="gaussian"), rng=0)
    assert any("delta=0.5 is above 0.001" in str(w.message) for w in caught)
    assert "WARNING: delta=0.5" in out.attrs["privacy"]
    choice = choose(3, budget=ONE, whole=False)
    assert choice.note is not None
    with pytest.warns(PrivacyWarning) as caught:
        private_counts(s, budget=ONE, rng=0)
    assert [str(w.message).split(" (")[0] for w in caught] == [choice.note.text()]


def test_missing_values() -> None:
    df = pd.DataFrame({"d": list("abcd"), "n": [1.0, np.nan, 2.0, 1.0]})
    with pytest.raises(ValueError, match=r"1 missing value\(s\), the first at row 1: pass"):
        private_counts(df, value="n", budget=ONE)
    out = private_counts(df, value="n", time="d", budget=ONE, missing="skip", rng=1)
    assert list(out["d"]) == ["a", "c", "d"] and list(out.index) == [0, 2, 3]
    out = private_counts(df, value="n", time="d", budget=ONE, missing="zero", rng=1)
    assert list(out["d"]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        ({"value": "nope"}, ValueError, r"value column 'nope' is not in the frame's columns"),
        ({"value": "SUNACTIVITY", "time": "SUNACTIVITY"}, ValueError, "different columns"),
        ({"value": "SUNACTIVITY", "k": 4}, ValueError, "name a mechanism to pass \\['k'\\]"),
        ({"value": "SUNACTIVITY", "missing": "drop"}, ValueError, "missing must be one of"),
        ({"value": "SUNACTIVITY", "mechanism": "binary", "k": 4}, ValueError,
         "k given for mechanism 'binary', which has no such option"),
        ({"value": "SUNACTIVITY", "start": "1700"}, ValueError, "start needs step"),
        ({"value": "SUNACTIVITY", "step": "2"}, ValueError, "step needs time .* DatetimeIndex"),
        ({"value": "SUNACTIVITY", "horizon": 0}, ValueError, "horizon must be >= 1, got 0"),
        ({"value": "SUNACTIVITY", "horizon": 2.0}, TypeError, "horizon must be an int"),
        ({"value": "SUNACTIVITY", "where": 3}, TypeError, "where must be a mapping"),
        ({"value": "SUNACTIVITY", "where": "YEAR"}, ValueError, "where must be COLUMN=VALUE"),
        ({"value": "SUNACTIVITY", "where": {"NOPE": 1}}, ValueError, "where column 'NOPE'"),
        ({"value": "SUNACTIVITY", "above_bound": "error"}, ValueError, "above_bound needs step"),
        ({"value": "SUNACTIVITY", "width": 2}, TypeError, "unexpected keyword argument 'width'"),
    ],
)  # fmt: skip
def test_bad_arguments(kw: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        private_counts(sunspot_like(), budget=ONE, **kw)


def test_not_a_frame() -> None:
    with pytest.raises(TypeError, match="pandas or polars DataFrame or Series, got list"):
        private_counts([1, 2, 3], budget=ONE)


def test_polars() -> None:
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"day": ["a", "b", "c"], "n": [1, 0, 2]})
    with pytest.raises(ValueError, match="name the one to count"):
        private_counts(df, budget=ONE)
    out = private_counts(df, value="n", time="day", budget=ONE, mechanism="binary", rng=2)
    assert out.columns == ["day", "private_count", "std"]
    assert out["day"].to_list() == ["a", "b", "c"]
    # the mechanism, guarantee and notes, as pandas' attrs (issue 34 item 3)
    assert out.attrs["mechanism"].startswith("BinaryTree(horizon=3")
    assert "epsilon=1-DP" in out.attrs["privacy"] and out.attrs["notes"] == []
    events = pl.DataFrame({"t": ["2024-01-01", "2024-01-01", "2024-01-03"], "w": list("aba")})
    rows = private_counts(events, time="t", step="1D", where="w=a", budget=ONE, start="2024-01-01",
                          horizon=3, mechanism="binary", rng=2)  # fmt: skip
    assert rows["t"].dtype == pl.Datetime and rows.height == 3
    assert rows.attrs["report"]["unmatched"] == 1


# -- the CLI's equal on every option of count (issue 34 item 3, issue 30 item 5) ------------


def _weather(tmp_path: Path) -> Path:
    """The shipped event log (``dpcount sample weather``): date, weather; 1461 days."""
    path = tmp_path / "weather.csv"
    assert main(["sample", "weather", "--output", str(path)]) == 0
    return path


def _table(path: Path) -> dict[str, list[str]]:
    with path.open() as fh:
        table = list(csv.DictReader(fh))
    return {name: [r[name] for r in table] for name in table[0]}


@pytest.mark.parametrize(
    ("where", "flags", "days"),
    [
        ({"weather": "rain"}, ["--where", "weather=rain"], 1461),
        ({"weather": ["rain", "drizzle"]}, ["--where", "weather in rain,drizzle"], 90),
        ("weather!=sun", ["--where", "weather!=sun"], 90),
    ],
)
def test_where_and_step_equal_the_cli_row_for_row(
    tmp_path: Path, where: object, flags: list[str], days: int
) -> None:
    """``private_counts(events, time=..., step="1D", where=...)`` is ``dpcount count
    --where ... --step 1D`` row for row (same seed: same mechanism, same noise): the
    steps span the whole log (1461 days, not the first to the last rainy day)."""
    src, out = _weather(tmp_path), tmp_path / "out.csv"
    src.write_text("".join(src.read_text().splitlines(keepends=True)[: days + 1]))
    argv = ["count", str(src), "--time-column", "date", "--step", "1D", *flags]
    assert (
        main([*argv, "--epsilon", "1", "--seed", "4", "--digits", "17", "--output", str(out)]) == 0
    )
    cli = _table(out)
    events = pd.read_csv(src)
    with pytest.warns(PrivacyWarning, match="start and horizon taken from the data"):
        got = private_counts(events, time="date", step="1D", where=where, budget=ONE, rng=4)
    assert len(got) == len(cli["t"]) == days
    assert got["date"].dtype.kind == "M"  # real datetimes, not strings
    assert list(got["date"]) == list(pd.to_datetime(cli["date"]))
    np.testing.assert_array_equal(got["private_count"], np.array(cli["private_count"], dtype=int))
    np.testing.assert_array_equal(got["std"], np.array(cli["std"], dtype=float))
    assert any("each row counts 1" in n for n in got.attrs["notes"])
    assert got.attrs["report"]["unmatched"] > 0 and got.attrs["report"]["rows"] == days


def test_monthly_steps_of_a_filtered_log_keep_the_whole_horizon() -> None:
    """Filtering first loses the months without a match (46 instead of 48 before):
    ``where=`` keeps every row's time."""
    days = pd.date_range("2012-01-01", "2015-12-31", freq="D")
    weather = np.where(days.month.isin([7, 8]) & (days.year == 2015), "sun", "rain")
    weather[-1] = "sun"
    events = pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "weather": weather})
    budget = Budget(epsilon=1.0)
    with pytest.warns(PrivacyWarning):
        got = private_counts(events, time="date", step="MS", where={"weather": "sun"},
                             budget=budget, rng=0)  # fmt: skip
    assert len(got) == 48 and got["date"].iloc[0] == pd.Timestamp("2012-01-01")


def test_a_datetime_index_with_step_is_bucketed_as_resample() -> None:
    idx = pd.to_datetime(["2012-01-01", "2012-01-02", "2012-01-03", "2012-01-10", "2012-01-16"])
    s = pd.Series([1, 1, 0, 1, 1], index=idx, name="n")
    opts = {"step": "W-MON", "start": "2011-12-27", "horizon": 3, "budget": ONE}
    got = private_counts(s, mechanism="kary", rng=3, **opts)
    assert isinstance(got.index, pd.DatetimeIndex)
    want = s.resample("W-MON").sum()  # weeks ending on Monday, labelled by it
    assert list(got.index) == list(want.index)
    mech = KaryTree(3, epsilon=1.0, k=19, noise="discrete-laplace", rng=3)
    np.testing.assert_array_equal(got["private_count"], mech.release(want.to_numpy()))
    frame = s.rename_axis("date").reset_index()
    by_column = private_counts(frame, value="n", time="date", mechanism="kary", rng=3, **opts)
    np.testing.assert_array_equal(by_column["private_count"], got["private_count"])


def test_step_cuts_each_row_to_the_bound_and_reports_it() -> None:
    """One row is one event: a value above the step sensitivity is cut (issue 30
    item 5: before, a row of 55.9 was summed in full under "epsilon=1")."""
    df = pd.DataFrame({"day": ["2024-01-01", "2024-01-01", "2024-01-02"], "mm": [0.5, 55.9, -3]})
    budget = Budget(epsilon=1.0, noise="laplace", step_sensitivity=2)
    opts = {"value": "mm", "time": "day", "step": "1D", "start": "2024-01-01", "horizon": 2}
    got = private_counts(df, budget=budget, mechanism="kary", rng=1, **opts)
    mech = KaryTree(2, epsilon=1.0, k=19, noise="laplace", step_sensitivity=2, rng=1)
    np.testing.assert_array_equal(got["private_count"], mech.release(np.array([2.5, -2.0])))
    assert got.attrs["report"]["cut"] == 2 and got.attrs["report"]["cut_weight"] == 54.9
    assert any(n.startswith("cut: 2 row(s) above step_sensitivity 2") for n in got.attrs["notes"])
    assert "per event: each row is one event, its value cut to at most 2" in got.attrs["privacy"]
    with pytest.raises(ValueError, match=r"row 1: value 55.9 is above budget.step_sensitivity 2"):
        private_counts(df, budget=budget, above_bound="error", **opts)


def test_rows_outside_the_steps_are_dropped_and_reported() -> None:
    """One rule for a horizon shorter than the data (count, frame and keyed): the
    rows outside steps 1..T are dropped and counted (before: a ValueError here)."""
    df = pd.DataFrame({"day": ["2023-12-31", "2024-01-01", "2024-01-02", "2024-01-05"]})
    opts = {"time": "day", "step": "1D", "start": "2024-01-01", "horizon": 2}
    got = private_counts(df, budget=ONE, mechanism="kary", rng=0, **opts)
    assert len(got) == 2 and got.attrs["report"]["outside"] == 2
    assert "dropped: 2 row(s) outside steps 1..2" in " ".join(got.attrs["notes"])
    s = pd.Series([1, 0, 1, 1], name="n")
    short = private_counts(s, budget=ONE, mechanism="kary", horizon=3, rng=0)
    assert list(short.index) == [0, 1, 2] and short.attrs["report"]["outside"] == 1
    assert "dropped: 1 row(s) after horizon 3" in short.attrs["notes"][-1]
