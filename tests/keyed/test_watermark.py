"""Event time: late events moved to the next open step or refused, and the watermark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts

KEYS = ["a", "b", "c"]


def _kw(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="t", key_column="key", step=1, start=0, horizon=8,
        budget=Budget(epsilon=1.0), secret=tmp_path / "run.key", state=tmp_path / "run.state",
    )  # fmt: skip
    kw.update(extra)
    return kw


def _twin(tmp_path: Path) -> Any:
    body = json.loads((tmp_path / "run.key").read_text())
    return unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])


FIRST = pd.DataFrame({"t": [0, 1, 2, 2], "key": ["a", "b", "a", "c"]})
# steps 1..3 released; then two late events (times 1 and 0: steps 2 and 1), on time 3, 4
SECOND = pd.DataFrame({"t": [3, 1, 4, 0], "key": ["a", "b", "c", "a"]})


@pytest.mark.slow
def test_late_events_move_to_the_next_open_step_and_are_reported(tmp_path: Path) -> None:
    keyed_counts(FIRST, until=3, **_kw(tmp_path))
    res = keyed_counts(SECOND, until=5, late="next-step", **_kw(tmp_path))
    assert res.report.late_moved == 2 and res.report.kept_events == 4
    assert "2 late events moved to step 4" in "\n".join(res.summary())
    # the same bits as a run over all the events with the late ones placed at step 4
    placed = pd.concat([FIRST, SECOND.assign(t=[3, 3, 4, 3])], ignore_index=True)
    oracle = keyed_counts(placed, **_kw(tmp_path, secret=_twin(tmp_path), state=None, until=5))
    assert oracle.frame is not None and res.frame is not None
    want = oracle.frame[oracle.frame["step"] >= 4].reset_index(drop=True)
    pd.testing.assert_frame_equal(res.frame, want)


def test_late_events_are_refused_by_default_naming_the_row(tmp_path: Path) -> None:
    keyed_counts(FIRST, until=3, **_kw(tmp_path))
    late = r"late event at data row 2 \(time 1\) is in step 2, already"
    with pytest.raises(ValueError, match=late):
        keyed_counts(SECOND, until=5, **_kw(tmp_path))
    with pytest.raises(ValueError, match="late must be one of refuse, next-step, got 'drop'"):
        keyed_counts(SECOND, until=5, late="drop", **_kw(tmp_path))
    with pytest.raises(ValueError, match="late='next-step' needs state="):
        keyed_counts(SECOND, late="next-step", **_kw(tmp_path, state=None))


@pytest.mark.slow
def test_unit_bounds_hold_after_moving(tmp_path: Path) -> None:
    """A unit's late event joins its events of the open step: max_keys holds there."""
    units = dict(unit_column="u", max_keys=1)
    first = FIRST.assign(u="v")
    keyed_counts(first, until=3, **_kw(tmp_path, **units))
    second = pd.DataFrame({"t": [3, 1], "key": ["a", "b"], "u": ["w", "w"]})
    res = keyed_counts(second, until=4, late="next-step", **_kw(tmp_path, **units))
    assert res.report.late_moved == 1
    assert res.report.unit_dropped_keys == 1  # unit w keeps one key of step 4, not two


@pytest.mark.slow
def test_allowed_lateness_releases_the_complete_steps(tmp_path: Path) -> None:
    kw = _kw(tmp_path)
    events = pd.DataFrame({"t": [0, 1, 5], "key": ["a", "b", "c"]})
    # watermark 5, lateness 2: step s covers [s-1, s), complete when s + 2 <= 5
    res = keyed_counts(events, allowed_lateness=2, **kw)
    assert res.released == (1, 3) and res.report.later_steps == 1
    assert any("released steps (from the latest event time)" in x for x in res.summary())
    with pytest.raises(ValueError, match="no new complete step"):
        keyed_counts(events.iloc[:2], allowed_lateness=2, **kw)
    with pytest.raises(ValueError, match=r"give until= .* or allowed_lateness="):
        keyed_counts(events, allowed_lateness=2, until=4, **kw)


def test_allowed_lateness_for_dates_is_a_fixed_duration() -> None:
    from dpcount.keyed.events import TimeBuckets
    from dpcount.keyed.watermark import complete_through, parse_lateness

    days = TimeBuckets.make("MS", "2024-01-01")
    wait = parse_lateness("2D", days)
    assert complete_through(days, 12, pd.Timestamp("2024-03-02T23:00"), wait) == 1
    assert complete_through(days, 12, pd.Timestamp("2024-03-03"), wait) == 2
    with pytest.raises(ValueError, match="allowed_lateness must be a fixed duration"):
        parse_lateness("MS", days)


@pytest.mark.slow
def test_cli_late_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpcount.cli import main

    (tmp_path / "keys.txt").write_text("a\nb\nc\n")
    for name, frame in (("one.csv", FIRST), ("two.csv", SECOND)):
        frame.to_csv(tmp_path / name, index=False)
    base = ["keyed", "--time-column", "t", "--key-column", "key", "--keys",
            str(tmp_path / "keys.txt"), "--step", "1", "--start", "0", "--horizon", "8",
            "--epsilon", "1", "--secret", str(tmp_path / "run.key")]  # fmt: skip
    state = ["--state", str(tmp_path / "run.state")]
    assert main([*base, str(tmp_path / "one.csv"), "--late", "next-step", "--output",
                 str(tmp_path / "o.csv")]) == 2  # fmt: skip
    assert "--late next-step needs --state" in capsys.readouterr().err
    out = ["--output", str(tmp_path / "o.csv")]
    assert main([*base, str(tmp_path / "one.csv"), *state, "--until", "3", *out]) == 0
    assert main([*base, str(tmp_path / "two.csv"), *state, "--until", "5", *out]) == 2
    assert "late event at line 3 of " in capsys.readouterr().err
    argv = [*base, str(tmp_path / "two.csv"), *state, "--allowed-lateness", "0", *out]
    assert main([*argv, "--late", "next-step"]) == 0
    assert "2 late events moved to step 4" in capsys.readouterr().err
