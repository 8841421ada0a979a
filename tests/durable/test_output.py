"""The exactly-once output protocol as a library object (:class:`DurableOutput`),
driven without the command line over a :class:`~dpcount.counting.CountingStream`.

A crash is injected deterministically between each pair of the protocol's steps
(lines computed → output fsynced → checkpoint saved → lines delivered): from the
crash on, every further step of the run fails (a killed process does nothing
more), so what persists is exactly what a SIGKILL at that point leaves. The
resumed run must give the uninterrupted run's output, byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from dpcount.counting import KaryTree, load_stream, save_stream
from dpcount.durable.output import DurableOutput, chain_digest
from dpcount.privacy import Budget

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX locks")

T = 10
SEED = 5
ROWS = [(f"d{t}", float(t % 3)) for t in range(1, T + 1)]
POINTS = ("before-sync", "after-sync", "after-save", "mid-deliver", "after-deliver")


class Crash(BaseException):
    """The injected crash (a BaseException: nothing in the run handles it)."""


class CrashingOutput(DurableOutput):
    """Crashes at ``point`` of the ``at``-th commit; dead from then on."""

    def __init__(self, *, point: str, at: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.point, self.at, self.commits, self.dead = point, at, 0, False

    def _reached(self, where: str) -> None:
        if self.dead:
            raise Crash(f"{self.point}, then dead")
        if where == self.point and self.commits == self.at:
            self.dead = True
            raise Crash(where)

    def sync_output(self, out: IO[str]) -> None:
        if not self.dead:
            self.commits += 1
        self._reached("before-sync")
        super().sync_output(out)
        self._reached("after-sync")

    def save(self, save: Callable[[dict[str, Any]], None], lines: list[str]) -> None:
        self._reached("before-save")
        super().save(save, lines)
        self._reached("after-save")

    def deliver(self, out: IO[str], lines: list[str]) -> None:
        if not self.dead and self.point == "mid-deliver" and self.commits == self.at:
            text = "".join(lines)
            out.write(text[: len(text) // 2 + 1])  # a torn write: part of a line
            out.flush()
            self.dead = True
            raise Crash("mid-deliver")
        self._reached("before-deliver")
        super().deliver(out, lines)
        self._reached("after-deliver")


def run_once(
    folder: Path,
    rows: list[tuple[str, float]] = ROWS,
    cls: type[DurableOutput] = DurableOutput,
    **kwargs: Any,
) -> str:
    """One run of the protocol as a service would drive it; returns the output."""
    ck, out = folder / "ck", folder / "out.csv"
    mech = KaryTree(T, k=2, budget=Budget(epsilon=1.0), rng=SEED)
    run = cls(
        output=out, checkpoint=ck, header="t,day,count\n", options={"seed": SEED},
        horizon=T, every=3, **kwargs,
    )  # fmt: skip
    with run:
        if run.exists():
            stream = load_stream(ck, expect=mech)
            run.load(stream.extra, step=stream.step)
        else:
            run.create()
            stream = mech.stream()
        rest = run.skip_input(rows)
        run.reconcile()
        with run.writing(lambda record: save_stream(stream, ck, extra=record)) as batch:
            for label, value in rest:
                release = stream.update(value)
                batch.append(f"{stream.step},{label},{release!r}\n", value, label)
    return out.read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    text = run_once(tmp_path_factory.mktemp("reference"))
    assert text.startswith("t,day,count\n1,d1,") and text.count("\n") == T + 1
    return text


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize(
    "at", [pytest.param(1, marks=pytest.mark.slow), 4]
)  # the first commit (no checkpoint yet); the last (step 10, committed as the block ends)
def test_a_crash_between_any_two_steps_resumes_to_the_same_output(
    tmp_path: Path, reference: str, point: str, at: int
) -> None:
    with pytest.raises(Crash, match=point):
        run_once(tmp_path, cls=CrashingOutput, point=point, at=at)
    after_crash = (tmp_path / "out.csv").read_text()
    assert reference.startswith(after_crash)  # never a line that is not the reference's
    assert run_once(tmp_path) == reference
    final = load_stream(tmp_path / "ck")
    assert final.step == T and final.extra is not None and final.extra["complete"] is True
    assert run_once(tmp_path) == reference  # complete: nothing is released again


def test_two_crashes_in_a_row_and_an_input_that_ends_early(tmp_path: Path, reference: str) -> None:
    with pytest.raises(Crash, match="mid-deliver"):
        run_once(tmp_path, cls=CrashingOutput, point="mid-deliver", at=1)  # step 3 saved
    with pytest.raises(Crash, match="after-save"):  # the resumed run dies too (step 6)
        run_once(tmp_path, cls=CrashingOutput, point="after-save", at=1)
    partial = run_once(tmp_path, rows=ROWS[:8])  # the input ends at step 8
    assert partial == "".join(reference.splitlines(keepends=True)[:9])
    assert run_once(tmp_path) == reference


def test_changed_input_is_refused_and_the_files_are_untouched(
    tmp_path: Path, reference: str
) -> None:
    with pytest.raises(Crash, match="after-save"):
        run_once(tmp_path, cls=CrashingOutput, point="after-save", at=2)  # step 6 saved
    out, ck = (tmp_path / "out.csv").read_text(), (tmp_path / "ck").read_bytes()
    changed = [*ROWS[:1], ("d2", 9.0), *ROWS[2:]]
    with pytest.raises(ValueError, match="the first 6 input rows differ from those checkpoint"):
        run_once(tmp_path, rows=changed)
    relabelled = [("e1", ROWS[0][1]), *ROWS[1:]]
    with pytest.raises(ValueError, match="the first 6 input rows differ"):
        run_once(tmp_path, rows=relabelled)
    with pytest.raises(ValueError, match=r"the input has 4 rows, but checkpoint .* consumed 6"):
        run_once(tmp_path, rows=ROWS[:4])
    assert (tmp_path / "out.csv").read_text() == out
    assert (tmp_path / "ck").read_bytes() == ck
    assert run_once(tmp_path) == reference


def test_refusals_name_what_is_wrong(tmp_path: Path, reference: str) -> None:
    assert run_once(tmp_path) == reference
    ck, out = tmp_path / "ck", tmp_path / "out.csv"
    kw: dict[str, Any] = {"output": out, "checkpoint": ck, "header": "t,day,count\n"}
    stream = load_stream(ck)
    with DurableOutput(**kw, options={"seed": 6}) as run:
        with pytest.raises(ValueError, match="refusing to continue with different options"):
            run.load(stream.extra, step=stream.step)
        with pytest.raises(ValueError, match="was not written by dpcount count"):
            run.load({"tool": "dpcount count"}, step=stream.step)
        with pytest.raises(ValueError, match=r"checkpoint .*ck is in use by another process"):
            DurableOutput(**kw, options={}).__enter__()
    ck.unlink()
    with pytest.raises(ValueError, match=r"output .*out.csv already holds data but checkpoint"):
        run_once(tmp_path)
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        DurableOutput(**kw, options={}, every=0)
    with pytest.raises(ValueError, match="output and checkpoint must be different files"):
        DurableOutput(output=out, checkpoint=out, header="t\n", options={})


def test_idle_input_commits_each_line_and_the_digest_covers_labels(tmp_path: Path) -> None:
    saves: list[list[str]] = []
    run = DurableOutput(
        output=tmp_path / "o", checkpoint=tmp_path / "c", header="t,v\n", options={},
        seconds=3600.0, idle=lambda: True,
    )  # fmt: skip
    with run:
        run.create()
        with run.writing(lambda record: saves.append(record["pending"])) as batch:
            batch.append("1,0\n", 0.0, "a")
            batch.append("2,1\n", 1.0, None)
    assert saves == [["1,0\n"], ["2,1\n"]]
    assert (tmp_path / "o").read_text() == "t,v\n1,0\n2,1\n"
    start = bytes(32)
    assert chain_digest(start, 1.0, "a") != chain_digest(start, 1.0, None)
    assert chain_digest(start, 1.0, "ab") != chain_digest(chain_digest(start, 1.0, "a"), 0.0)
