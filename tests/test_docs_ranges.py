"""Every Python example in docs/ranges.md runs (from the repository root, as documented)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ranges.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_ranges_doc_example_runs(
    index: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = BLOCKS[index]
    if "../shared/data/dpbench" in block and not (ROOT.parent / "shared/data/dpbench").is_dir():
        pytest.skip("the DPBench data (../shared/data/dpbench) is not available")
    monkeypatch.chdir(ROOT)
    exec(compile(block, f"docs/ranges.md[{index}]", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_discrete_example_prints_its_guarantee(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = [b for b in BLOCKS if "discrete-gaussian" in b]
    exec(compile(block, "docs/ranges.md", "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.match(r"\(epsilon=1, delta=[0-9.e-]+\)-DP and rho=0\.0\d+-zCDP", lines[1])
