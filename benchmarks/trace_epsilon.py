"""Walk ``--epsilon`` from ``dpcount count`` to the calibration rule and the noise draw.

A profile hook (:func:`sys.setprofile`) watches ``dpcount count --epsilon 1 --horizon
100`` run in-process on 100 rows of 1 and follows the value, not the call graph:

* ``flag``: the frame where the flag's text becomes a float (argparse's ``type=``);
* each :class:`~dpcount.privacy.Budget` the value lives in, from the one built of the
  flags to the one :func:`dpcount.counting.base.calibrate_budget` reads: the stack
  where it was made (a budget made by ``Budget.replace`` has the one it copies as its
  parent: the provenance chain is followed through the copies);
* ``calibrate``: the stack at the call of :func:`dpcount.privacy.guarantee.calibrate`
  that calibrates the released mechanism (with ``--mechanism auto`` earlier calls
  rank the candidates: the last one before the first draw);
* ``draw``: the first draw of random words after it
  (``dpcount.privacy.sampling.words``), or the first C call into ``numpy.random``:
  how the calibrated scale reaches the words.

The walk's hops are the flag's conversion and every dpcount function on those stacks
(each counted once; dataclass-generated ``__init__`` frames are not hops), in the order
the value reaches them. No timing: the figures do not depend on the machine's load.

Usage: python benchmarks/trace_epsilon.py [--live] [-- extra dpcount count flags]
(e.g. ``-- --mechanism kary``).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from dpcount import cli

_GENERATED = "__create_fn__"  # the frames of dataclass-generated methods
_WORDS = "dpcount.privacy.sampling.words."  # where the random words are drawn


def _label(frame: FrameType) -> str:
    code = frame.f_code
    return f"{frame.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"


def _frames(frame: FrameType | None) -> list[FrameType]:
    """dpcount's frames of the stack ending at ``frame``, outermost first."""
    out = []
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("dpcount"):
            out.append(frame)
        frame = frame.f_back
    return out[::-1]


def _chain(frame: FrameType | None) -> list[str]:
    return [_label(f) for f in _frames(frame) if _GENERATED not in _label(f)]


class Tracer:
    """The profile hook: the flag's frame, each budget's birth, calibrate, the draw."""

    def __init__(self) -> None:
        self.stacks: dict[str, list[str]] = {}
        self.born: dict[int, tuple[list[str], int | None, Any]] = {}
        self.provenance: list[list[str]] = []
        self.calibrations = 0

    def _budget_born(self, frame: FrameType) -> None:
        budget = frame.f_locals["self"]
        parent = None
        for f in reversed(_frames(frame)):
            if _label(f).endswith("Budget.replace"):
                parent = id(f.f_locals["self"])
                break
        stack = [name for name in _chain(frame) if not name.endswith("__post_init__")]
        self.born[id(budget)] = (stack, parent, budget)  # the object kept: ids stay unique

    def _calibrated(self, frame: FrameType) -> None:
        self.calibrations += 1
        self.stacks["calibrate"] = _chain(frame)
        reader = next(f for f in reversed(_frames(frame)) if "calibrate_budget" in _label(f))
        chain: list[list[str]] = []
        key: int | None = id(reader.f_locals["budget"])
        while key is not None and key in self.born:
            stack, key, _ = self.born[key]
            chain.append(stack)
        self.provenance = chain[::-1]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        stacks = self.stacks
        if "draw" in stacks:
            return
        if event == "call":
            name = _label(frame)
            if name.endswith("positive_float") and "flag" not in stacks:
                stacks["flag"] = _chain(frame)
            elif name.endswith("Budget.__post_init__") and "flag" in stacks:
                self._budget_born(frame)
            elif name == "dpcount.privacy.guarantee.calibrate":
                self._calibrated(frame)
            elif "calibrate" in stacks and name.startswith(_WORDS) and name.endswith(".words"):
                stacks["draw"] = _chain(frame)
        elif event == "c_call" and "calibrate" in stacks:
            owner = type(getattr(arg, "__self__", None))
            if owner.__module__.startswith("numpy.random"):
                stacks["draw"] = [*_chain(frame), f"{owner.__name__}.{arg.__name__} (C)"]

    def hops(self) -> list[str]:
        """The walk: the flag's conversion, then each stack's frames not seen before,
        budget by budget, then calibrate's."""
        walked = self.stacks.get("flag", [])[-1:]
        for stack in [*self.provenance, self.stacks.get("calibrate", [])]:
            walked += [name for name in stack if name not in walked]
        return walked


def walk(live: bool, extra: list[str]) -> tuple[Tracer, int]:
    """Run ``dpcount count`` on 100 rows of 1 under the hook."""
    rows = "x\n" + "1\n" * 100
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.csv"
        path.write_text(rows)
        argv = ["count", "--epsilon", "1.0", "--horizon", "100", *extra]
        argv.append("-" if live else str(path))
        stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(rows), io.StringIO(), io.StringIO()
        tracer = Tracer()
        sys.setprofile(tracer)
        try:
            status = cli.main(argv)
        finally:
            sys.setprofile(None)
            sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    return tracer, status


def _show(title: str, stack: list[str]) -> None:
    print(f"== {title}: {len(stack)} frames")
    for i, name in enumerate(stack):
        print(f"  {i:2d} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--live", action="store_true", help="read stdin (the live path)")
    parser.add_argument("extra", nargs="*", help="more dpcount count flags, after --")
    args = parser.parse_args()
    tracer, status = walk(args.live, args.extra)
    print(f"exit status {status}; calibrate called {tracer.calibrations} time(s)")
    _show("flag", tracer.stacks.get("flag", []))
    for i, stack in enumerate(tracer.provenance):
        _show(f"budget {i + 1} of {len(tracer.provenance)} made", stack)
    _show("calibrate", tracer.stacks.get("calibrate", []))
    _show("draw", tracer.stacks.get("draw", []))
    walked = tracer.hops()
    print(f"== the walk of --epsilon to the calibration rule: {len(walked)} hops")
    for i, name in enumerate(walked, 1):
        print(f"  {i:2d} {name}")


if __name__ == "__main__":
    main()
