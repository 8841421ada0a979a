"""``count --step``, ``histogram --step-width`` and ``keyed --step`` bucket a calendar
example identically (one parser, one calendar), and keyed Parquet stores timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcount._cli import count, histogram
from dpcount.cli import build_parser, main

TIMES = ["2024-01-31T23:59:59", "2024-02-01", "2024-02-29T12:00:00", "2024-03-31T23:59:59",
         "2024-04-01", "2024-12-31", "2025-02-28"]  # fmt: skip
ITEMS = ["a", "b", "a", "a", "b", "a", "b"]


def _events(tmp_path: Path) -> Path:
    src = tmp_path / "events.csv"
    src.write_text("t,item\n" + "".join(f"{t},{i}\n" for t, i in zip(TIMES, ITEMS, strict=True)))
    return src


def _args(argv: list[str]) -> object:
    return build_parser().parse_args(argv)


@pytest.mark.parametrize(("step", "start"), [("MS", "2024-01-01"), ("QS-DEC", "2023-12-01")])
def test_count_histogram_keyed_bucket_alike(tmp_path: Path, step: str, start: str) -> None:
    import pandas as pd

    from dpcount.keyed.events import TimeBuckets, parse_times

    src = _events(tmp_path)
    flags = ["--epsilon", "1", "--start", start]
    args = _args(["count", str(src), "--time-column", "t", "--step", step, *flags])
    count._check_options(args)  # type: ignore[arg-type]
    sums, labels, _, _ = count._read_file(args)  # type: ignore[arg-type]

    args = _args(["histogram", str(src), "--time-column", "t", "--item-column", "item",
                  "--items", "a,b", "--step-width", step, "--max-items-per-step", "9",
                  "--max-count-per-item", "9", *flags])  # fmt: skip
    clock = histogram.Clock.parse(step, "--step-width")
    events = histogram._read_events(args, {"a": 0, "b": 1}, clock)  # type: ignore[arg-type]
    per_step = {s: sum(c.values()) for s, c in events.steps.items()}

    buckets = TimeBuckets.make(step, start)
    keyed = buckets.steps(parse_times(pd.Series(TIMES), "t")).tolist()

    want = {s: keyed.count(s) for s in set(keyed)}
    assert {s + 1: v for s, v in enumerate(sums) if v} == want == per_step
    assert labels == buckets.labels(len(sums)) == [clock.label(s) for s in range(1, len(sums) + 1)]
    if step == "MS":
        assert keyed == [1, 2, 2, 3, 4, 12, 14]
        assert labels[:3] == ["2024-01-01", "2024-02-01", "2024-03-01"]


def test_refusals_name_the_flag_of_each_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _events(tmp_path)
    argv = ["count", str(src), "--time-column", "t", "--step", "1M", "--epsilon", "1"]
    assert main(argv) == 2
    assert "--step '1M' is ambiguous: minutes" in capsys.readouterr().err
    argv = ["histogram", str(src), "--time-column", "t", "--item-column", "item", "--items",
            "a,b", "--step-width", "MS", "--start", "2024-01-15", "--epsilon", "1"]  # fmt: skip
    assert main(argv) == 2
    assert "--start '2024-01-15' does not start a step of 1MS" in capsys.readouterr().err


@pytest.mark.slow
def test_keyed_parquet_stores_step_starts_as_timestamps(tmp_path: Path) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    src = _events(tmp_path)
    (tmp_path / "keys.txt").write_text("a\nb\n")
    out = tmp_path / "out.parquet"
    argv = ["keyed", str(src), "--time-column", "t", "--key-column", "item", "--keys",
            str(tmp_path / "keys.txt"), "--step", "MS", "--start", "2024-01-01", "--horizon",
            "14", "--epsilon", "1", "--secret", str(tmp_path / "run.key"),
            "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert str(pq.read_schema(out).field("time").type) == "timestamp[ns]"
    got = pd.read_parquet(out)
    months = pd.date_range("2024-01-01", periods=14, freq="MS")
    assert (got.loc[got["key"] == "a", "time"].to_numpy() == months.to_numpy()).all()
