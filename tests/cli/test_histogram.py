"""``dpcount histogram``: bucketing, bounds, contribution bounding, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dpcount.apps import ContinualHistogram
from dpcount.cli import main

EVENTS = "t,item,user\n0.5,a,1\n1.2,b,2\n1.7,a,3\n3.1,c,4\n3.9,c,5\n"


def read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def write_events(tmp_path: Path, text: str = EVENTS) -> Path:
    src = tmp_path / "events.csv"
    src.write_text(text)
    return src


def base(src: Path, out: Path) -> list[str]:
    return [
        "histogram",
        str(src),
        "--time-column",
        "t",
        "--item-column",
        "item",
        "--items",
        "a,b,c",
        "--epsilon",
        "1",
        "--seed",
        "0",
        "--output",
        str(out),
    ]


def test_histogram_file_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = write_events(tmp_path), tmp_path / "out.csv"
    assert main([*base(src, out), "--max-items-per-step", "2", "--max-count-per-item", "2"]) == 0
    rows = read(out)
    assert [r["t"] for r in rows] == ["1", "2", "3", "4"]  # steps [0,1), [1,2), [2,3), [3,4)
    err = " ".join(capsys.readouterr().err.split())
    assert "epsilon=1-DP" in err and "5 events in 4 steps" in err
    assert "at most 2 item insertions/removals, at most 2 of one item" in err


def test_histogram_values_equal_the_library_release(tmp_path: Path) -> None:
    src = write_events(tmp_path, "t,item\n0.2,a\n1.5,b\n1.6,a\n3.5,c\n")
    out = tmp_path / "out.csv"
    assert (
        main(
            [
                *base(src, out),
                "--max-items-per-step",
                "2",
                "--delta",
                "1e-6",
                "--mechanism",
                "binary",
                "--digits",
                "17",
            ]
        )
        == 0
    )
    rows = read(out)
    hist = ContinualHistogram(
        3, 4, epsilon=1.0, delta=1e-6, max_items_per_step=2, mechanism="binary", rng=0
    )
    expected = hist.update_many([[1, 0, 0], [1, 1, 0], [0, 0, 0], [0, 0, 1]])
    got = np.array([[float(r[x]) for x in "abc"] for r in rows])
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    np.testing.assert_allclose([float(r["std"]) for r in rows], np.sqrt(hist.variances()))
    assert [r["top1_item"] for r in rows] == ["abc"[int(np.argmax(e))] for e in expected]


def test_step_width_horizon_and_drop_excess(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = write_events(tmp_path), tmp_path / "out.csv"
    argv = [*base(src, out), "--step-width", "2", "--horizon", "3", "--drop-excess"]
    assert main(argv) == 0
    assert len(read(out)) == 3  # public horizon, one step without events
    err = " ".join(capsys.readouterr().err.split())
    # step 1 = [0,2): a, b, a -> keep a (b=1); step 2 = [2,4): c, c -> keep one c
    assert "2 events in 3 steps" in err and "3 events dropped" in err


def test_items_file(tmp_path: Path) -> None:
    src, out = write_events(tmp_path), tmp_path / "out.csv"
    universe = tmp_path / "items.txt"
    universe.write_text("c\nb\na\nz\n")
    argv = [*base(src, out), "--max-items-per-step", "2", "--max-count-per-item", "2"]
    argv[argv.index("a,b,c")] = f"@{universe}"
    assert main(argv) == 0
    assert list(read(out)[0].keys()) == [
        "t", "t_start", "std", "top1_item", "top1_count", "c", "b", "a", "z"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        (EVENTS, [], "line 4: step 2 has more than --max-items-per-step 1 events"),
        (
            EVENTS,
            ["--max-items-per-step", "2"],
            "line 6: step 4 has more than --max-count-per-item 1 events of item 'c'",
        ),
        ("t,item\n0.5,q\n", [], "line 2: item 'q' is not in the universe given by --items"),
        ("t,item\nx,a\n", [], "line 2: could not read 'x' as a time"),
        ("time,item\n1,a\n", [], "no column named 't'"),
        ("t,item\n", [], "no events"),
        ("t,item\ninf,a\n", [], "line 2: time 'inf' is not finite"),
    ],
)
def test_histogram_input_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: list[str], message: str
) -> None:
    src, out = write_events(tmp_path, text), tmp_path / "out.csv"
    assert main([*base(src, out), *extra]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_events_outside_the_steps_are_dropped_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one rule of count, frames and keyed (issue 34 item 6); before: an error."""
    src, out = write_events(tmp_path, "t,item\n-1,a\n0.5,a\n7,b\n"), tmp_path / "out.csv"
    assert main([*base(src, out), "--horizon", "3"]) == 0
    assert len(read(out)) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "1 events in 3 steps" in err
    assert "2 events outside the steps (before --start or after --horizon) dropped" in err


def test_duplicate_universe_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = write_events(tmp_path), tmp_path / "out.csv"
    argv = base(src, out)
    argv[argv.index("a,b,c")] = "a,b,a"
    assert main(argv) == 2
    assert "item 'a' is listed twice" in capsys.readouterr().err


def test_histogram_std_is_computed_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The std column never needs the horizon-long variance array (audit finding 8)."""
    from dpcount.counting import KaryTree
    from dpcount.counting import base as counting_base

    horizon = 300
    src, out = write_events(tmp_path, "t,item\n0.2,a\n1.5,b\n3.5,c\n"), tmp_path / "out.csv"
    std = np.sqrt(
        ContinualHistogram(
            3, horizon, epsilon=1.0, delta=None, max_items_per_step=1, rng=0
        ).variances()
    )

    def refuse(self: object) -> None:
        raise AssertionError("the CLI computed all horizon variances")

    monkeypatch.setattr(counting_base.CountingMechanism, "variances", refuse)
    monkeypatch.setattr(KaryTree, "noise_coefficients", refuse)
    assert main([*base(src, out), "--horizon", str(horizon), "--digits", "17"]) == 0
    assert [float(r["std"]) for r in read(out)] == std.tolist()
