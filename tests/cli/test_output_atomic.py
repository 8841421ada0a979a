"""Released output goes through the one atomic writer (issue 18 item 5): a symlink
planted at the output path is never followed to overwrite another file."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from dpcount.cli import main


def _victim(tmp_path: Path) -> tuple[Path, Path]:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "out.csv"
    os.symlink(victim, link)
    return victim, link


def test_file_output_replaces_a_planted_symlink_not_its_target(tmp_path: Path) -> None:
    victim, link = _victim(tmp_path)
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(20)))
    assert main(["count", str(src), "--epsilon", "1", "--seed", "1", "--output", str(link)]) == 0
    assert victim.read_text() == "keep me\n"  # the old code wrote the release here
    assert not link.is_symlink() and link.read_text().startswith("t,private_count,std\n")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_live_output_refuses_a_planted_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    victim, link = _victim(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0\n2\n"))
    argv = ["count", "-", "--epsilon", "1", "--horizon", "3", "--output", str(link)]
    assert main(argv) == 2
    assert "--output" in capsys.readouterr().err
    assert victim.read_text() == "keep me\n"
