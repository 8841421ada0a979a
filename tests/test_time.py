"""The one step parser (:mod:`dpcount._time`): spellings, refusals, calendar arithmetic."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from dpcount._time import Clock, parse_step


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1D", "1D"),
        ("d", "1D"),
        ("6h", "6h"),
        ("2H", "2h"),
        ("15min", "15min"),
        ("1T", "1min"),
        ("30s", "30s"),
        ("1.5h", "90min"),
        ("100ms", "100000000ns"),
        ("MS", "1MS"),
        ("3MS", "3MS"),
        ("QS", "1QS-JAN"),
        ("QS-APR", "1QS-JAN"),  # April starts a January quarter too
        ("QS-FEB", "1QS-FEB"),
        ("YS", "1YS-JAN"),
        ("AS", "1YS-JAN"),
        ("AS-JUL", "1YS-JUL"),
        ("W-MON", "1W-MON"),
        ("2W-SUN", "2W-SUN"),
        ("5", "5"),
        ("2.5", "2.5"),
    ],
)
def test_spellings(text: str, canonical: str) -> None:
    assert parse_step(text, "--step").describe() == canonical


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("1M", r"'1M' is ambiguous: minutes .*1min or 1T.* months .*1MS"),
        ("1m", r"'1m' is ambiguous: minutes .*1min or 1T.* months .*1MS"),
        ("2W", r"'2W' is ambiguous: 14 days .*14D.*2W-MON"),
        ("Q", r"period END .*write 1QS"),
        ("1Y", r"period END .*write 1YS"),
        ("ME", r"period END .*write 1MS"),
        ("1.5MS", "a calendar step needs a whole number"),
        ("MS-JAN", "only QS and YS take a month"),
        ("W-FUN", "W-DAY needs a weekday"),
        ("0D", r"--step must be > 0, got '0D'"),
        ("-3", r"--step must be > 0"),
        ("1 fortnight", "--step must be a number, a duration"),
        ("1Ms", "--step must be a number, a duration"),
    ],
)
def test_refused_spellings_name_the_flag(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        parse_step(text, "--step")
    assert "--step" in str(err.value)


def test_not_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="step must be a number"):
        parse_step(True, "step")


def _ns(text: str) -> int:
    moment = dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
    return (
        (moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))
        // dt.timedelta(microseconds=1)
        * 1000
    )


def _steps(step: str, start: str, times: list[str]) -> list[int]:
    s = parse_step(step)
    s.check_start(_ns(start), "start", start)
    return s.index(_ns(start), np.array([_ns(t) for t in times])).tolist()


def test_months_of_unequal_length_and_leap_years() -> None:
    times = ["2023-12-31T23:59:59", "2024-01-01", "2024-01-31T23:59:59", "2024-02-01",
             "2024-02-29T12:00:00", "2024-03-01", "2025-02-28T23:59:59", "2025-03-01"]  # fmt: skip
    assert _steps("MS", "2024-01-01", times) == [0, 1, 1, 2, 2, 3, 14, 15]
    assert _steps("2MS", "2024-01-01", times) == [0, 1, 1, 1, 1, 2, 7, 8]
    assert _steps("QS", "2024-01-01", times) == [0, 1, 1, 1, 1, 1, 5, 5]
    assert _steps("YS", "2024-01-01", times) == [0, 1, 1, 1, 1, 1, 2, 2]
    assert _steps("YS-MAR", "2024-03-01", times) == [0, 0, 0, 0, 0, 1, 1, 2]
    # 2024 is a leap year: its first quarter has 91 days, 2025's has 90
    s = parse_step("QS")
    b = s.boundaries(_ns("2024-01-01"), 1, 6) // (86_400 * 10**9)
    assert np.diff(b).tolist() == [91, 91, 92, 92, 90]


def test_weeks_end_on_their_weekday_as_pandas() -> None:
    # 2024-01-01 is a Monday: W-MON is Tuesday to Monday, labelled by its Monday
    times = ["2024-01-01T23:59:59", "2024-01-02", "2024-01-08", "2024-01-09", "2023-12-31"]
    assert _steps("W-MON", "2024-01-02", times) == [0, 1, 1, 2, 0]
    assert _steps("2W-MON", "2024-01-02", times) == [0, 1, 1, 1, 0]
    s = parse_step("W-MON")
    assert s.labels(_ns("2024-01-02"), 1, 2).tolist() == [_ns("2024-01-08"), _ns("2024-01-15")]
    # a start read off the data: the week ending on the first Monday on or after it
    assert s.floor(_ns("2024-01-01T05:00:00")) == _ns("2023-12-26")
    assert s.floor(_ns("2024-01-02T05:00:00")) == _ns("2024-01-02")
    assert parse_step("2W-MON").floor(_ns("2024-01-03")) == _ns("2023-12-26")  # to 01-08
    w = parse_step("W-SUN")
    assert w.floor(_ns("2024-01-03T05:00:00")) == _ns("2024-01-01")
    with pytest.raises(
        ValueError, match=r"does not start a step of 1W-SUN: .* a Mon.*ending on Sun"
    ):
        w.check_start(_ns("2024-01-07"), "--start", "2024-01-07")


def test_calendar_start_must_be_a_boundary_and_floors_from_data() -> None:
    q = parse_step("QS")
    with pytest.raises(ValueError, match=r"--start '2024-02-01' .* 1QS-JAN.*JAN, APR, JUL, OCT"):
        q.check_start(_ns("2024-02-01"), "--start", "2024-02-01")
    with pytest.raises(ValueError, match="does not start a step of 1MS"):
        parse_step("MS").check_start(_ns("2024-02-01T06:00:00"), "--start", "x")
    assert q.floor(_ns("2024-05-17T08:00:00")) == _ns("2024-04-01")
    assert parse_step("YS-JUL").floor(_ns("2024-05-17")) == _ns("2023-07-01")


def test_clock_reads_microseconds_and_labels_calendar_steps() -> None:
    clock = Clock.parse("MS", "--step")
    times = [clock.read(t, "row") for t in ("2024-02-29", "2024-01-15", "9999-12-31")]
    clock.start_at(min(times))
    assert clock.label(1) == "2024-01-01"
    assert [clock.step(t) for t in times] == [2, 1, (9999 - 2024) * 12 + 12]
    assert clock.label(14) == "2025-02-01"
    hours = Clock.parse("6h", "--step")
    hours.set_start("2024-01-01T03:00:00", "--start")
    assert hours.label(2) == "2024-01-01T09:00:00"


def test_clock_is_exact_to_the_microsecond_in_year_9000() -> None:
    """ISO times are integers of microseconds (a float of them would round here)."""
    clock = Clock.parse("1s", "--step")
    clock.set_start("9000-01-01T00:00:00", "--start")
    late = clock.read("9000-01-01T00:00:00.999999", "row")
    assert [clock.step(late), clock.step(clock.read("9000-01-01T00:00:01", "row"))] == [1, 2]


#: every accepted spelling and pandas' current name for it (``T``, ``S``, ``2H`` and
#: ``AS`` are pandas' older names, removed in pandas 3)
PANDAS = {
    "1D": "1D", "d": "D", "2D": "2D", "5D": "5D", "6h": "6h", "7h": "7h", "2H": "2h",
    "1.5h": "90min", "15min": "15min", "1T": "1min", "30s": "30s", "S": "s", "100ms": "100ms",
    "us": "us", "MS": "MS", "3MS": "3MS", "QS": "QS", "QS-FEB": "QS-FEB", "2QS-NOV": "2QS-NOV",
    "YS": "YS", "YS-JUL": "YS-JUL", "AS": "YS", "2YS-MAR": "2YS-MAR", "W-MON": "W-MON",
    "2W-MON": "2W-MON", "W-SUN": "W-SUN", "3W-WED": "3W-WED", "W-SAT": "W-SAT",
}  # fmt: skip
#: seconds spanned by the random times of each unit (pandas makes a bin per step)
_SPAN = {"ms": 2, "us": 0.002, "s": 2000, "min": 20000, "h": 20 * 86400, "D": 200 * 86400}


@pytest.mark.parametrize("alias", sorted(PANDAS))
def test_every_alias_bins_and_labels_as_pandas_resample(alias: str) -> None:
    """``count --step``/``histogram``/``frame`` (the Clock) and ``keyed`` (TimeBuckets)
    give pandas' ``resample(alias).sum()`` bin for bin: same first bin, labels, sums."""
    pd = pytest.importorskip("pandas")
    from dpcount.keyed.events import TimeBuckets

    unit = parse_step(alias)
    fixed = unit.kind == "fixed" and unit.weekday is None
    span = next(
        (v for k, v in _SPAN.items() if fixed and PANDAS[alias].endswith(k)), 3 * 365 * 86400
    )
    rng = np.random.default_rng(sorted(PANDAS).index(alias))
    for trial in range(2):  # times of day, then dates at midnight
        micros = rng.integers(0, int(span * 1e6), 40) + 1_325_000_000 * 10**6  # Dec 2011
        if trial % 2:
            micros -= micros % (86_400 * 10**6)  # dates at midnight too
        times = pd.to_datetime(micros, unit="us")
        values = rng.integers(0, 5, len(times)).astype(float)
        want = pd.Series(values, index=times).resample(PANDAS[alias]).sum()
        clock = Clock.parse(alias, "--step")
        read = [clock.read(t.isoformat(), "row") for t in times]
        clock.start_at(min(read))
        steps = clock.steps(read)
        n = int(steps.max())
        labels = pd.to_datetime([clock.label(k) for k in range(1, n + 1)], format="ISO8601")
        assert list(labels) == list(want.index), alias
        np.testing.assert_array_equal(np.bincount(steps - 1, values, n), want.to_numpy())
        buckets = TimeBuckets.from_data(alias, pd.Series(times))
        np.testing.assert_array_equal(buckets.steps(pd.Series(times)), steps)
        assert list(pd.DatetimeIndex(buckets.label_times(1, n))) == list(want.index)
