"""Smoke tests of benchmarks/bench_before_after.py's adapter and flag (no timing)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from dpcount.counting import BinaryTree

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_before_after.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_before_after", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_adapter_passes_a_budget_where_the_version_takes_one() -> None:
    """The current tree takes ``budget=``: the adapter builds with it (a loose
    ``epsilon=`` would warn, and warnings are errors here)."""
    mech = _script().build(BinaryTree, 8, privacy={"epsilon": 0.5}, rng=0)
    assert isinstance(mech, BinaryTree)
    assert mech.budget.epsilon == 0.5


def test_adapter_falls_back_to_loose_fields() -> None:
    """A factory without ``budget=`` (as 0.3's keyed API) gets the fields as keywords."""

    def old_style(horizon: int, *, epsilon: float, rng: int) -> dict[str, Any]:
        return {"horizon": horizon, "epsilon": epsilon, "rng": rng}

    built = _script().build(old_style, 8, privacy={"epsilon": 0.5}, rng=0)
    assert built == {"horizon": 8, "epsilon": 0.5, "rng": 0}


def test_report_flags_a_path_more_than_five_percent_slower() -> None:
    """Floors equal, the hot path 10 % slower after: SLOWER; 2 % slower: no flag."""

    def runs(before: float, after: float) -> dict[str, list[dict[str, Any]]]:
        return {
            "before": [{"cpu": before, "floor": 1.0}],
            "after": [{"cpu": after, "floor": 1.0}],
        }

    lines = _script().report({"slow path": runs(1.0, 1.1), "steady path": runs(1.0, 1.02)})
    slow = next(line for line in lines if line.startswith("slow path"))
    steady = next(line for line in lines if line.startswith("steady path"))
    assert slow.endswith("SLOWER")
    assert steady.rstrip().endswith("1.000")  # the floors column; no flag after it


def test_pinned_heap_sets_the_same_glibc_thresholds_for_every_child() -> None:
    script = _script()
    plain, pinned = (script.child_env(Path("/x/src"), flag) for flag in (False, True))
    assert plain["PYTHONPATH"] == pinned["PYTHONPATH"] == "/x/src"
    assert not set(script.PINNED_HEAP) & (set(plain) - set(os.environ))
    assert {k: pinned[k] for k in script.PINNED_HEAP} == script.PINNED_HEAP
    assert int(pinned["MALLOC_MMAP_THRESHOLD_"]) >= 1 << 30  # no array of a run is mmap'd
