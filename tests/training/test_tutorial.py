"""docs/tutorials/training.md runs as written (its blocks in order, one namespace).

The jax/optax block needs the ``training`` extra (in ``test``); the PyTorch recipe
runs when torch is installed and is skipped otherwise (torch is in no extra). The
whole page trains about ten small models: a ``slow`` test."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "training.md"
BLOCKS = [
    (m.group(1), PAGE.read_text(encoding="utf-8").count("\n", 0, m.start()) + 1)
    for m in re.finditer(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
]
ACCURACY = re.compile(r"accuracy:? (0\.\d+)")


@pytest.mark.slow
def test_training_tutorial_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    assert len(BLOCKS) >= 5
    namespace: dict[str, object] = {"__name__": "__docs__"}
    skipped = []
    for code, line in BLOCKS:
        needs = [m for m in ("jax", "optax", "torch") if re.search(rf"^import {m}\b", code, re.M)]
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        if missing:
            skipped.append(f"block at line {line} (needs {', '.join(missing)})")
            continue
        exec(compile("\n" * line + code, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    accuracies = [float(a) for a in ACCURACY.findall(out)]
    assert len(accuracies) >= 5 - len(skipped), out
    assert min(accuracies) > 0.5, out  # every private model is far above chance (0.1)
    if skipped:
        pytest.skip("; ".join(skipped))
