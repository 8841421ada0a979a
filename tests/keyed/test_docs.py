"""docs/keyed.md cannot rot: its Python blocks run in order and its command line runs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcount.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "keyed.md"


def test_keyed_doc_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DOC.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        exec(compile(block, "docs/keyed.md", "exec"), namespace)
    out = capsys.readouterr().out.splitlines()
    assert "False" not in out
    assert out.count("True") == 13 + 4  # + run-level bounds and key selection
    assert "['_run.json', 'part-000000000000.parquet']" in out
    assert "1 1 3.0" in out  # unit u's third key dropped; v's weight 5 cut to 2
    assert any(line.startswith("epsilon=1-DP, event-level") for line in out)
    # the command line, on a small events file
    _stage()
    command = re.findall(r"```bash\n(.*?)```", text, flags=re.S)[0]  # the embedded run
    argv = shlex.split(command.replace("\\\n", " "))  # continuation lines
    assert argv[0] == "dpcount"
    assert main(argv[1:]) == 0
    released = pd.read_parquet("counts.parquet")
    assert list(released.columns) == ["key", "step", "time", "private_count", "std"]
    assert len(released) == 2 * 9


def _stage() -> None:
    """The command lines' small events file and key list, in the current folder."""
    rng = np.random.default_rng(1)
    pd.DataFrame(
        {
            "day": (
                pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 9, 300), "D")
            ).strftime("%Y-%m-%d"),
            "product": rng.choice(["a", "b", "z"], 300),
        }
    ).to_parquet("events.parquet")
    Path("products.txt").write_text("a\nb\n")


@pytest.mark.slow
def test_keyed_doc_spark_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark section's commands (a local[2] session each: slow), after the page's
    embedded command with the same secret: the same Parquet bytes, and the same rows in
    the executors' parts."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java (17+)")
    text = DOC.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _stage()
    embedded, spark = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = [embedded, *re.split(r"\n(?=dpcount )", spark.strip())]
    assert len(commands) == 3
    for command in commands:
        argv = shlex.split(command.replace("\\\n", " "))
        assert argv[0] == "dpcount"
        with warnings.catch_warnings():  # pyspark 4 on pandas 3 (no frame conversions here)
            warnings.filterwarnings("ignore", "PySpark does not yet", FutureWarning)
            assert main(argv[1:]) == 0
    want = Path("counts.parquet").read_bytes()
    assert Path("counts-spark.parquet").read_bytes() == want
    parts = sorted(Path("counts-parts").glob("part-*.parquet"))
    assert [p.name for p in parts] == ["part-000000000000.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(parts[0]), pd.read_parquet("counts.parquet"))
