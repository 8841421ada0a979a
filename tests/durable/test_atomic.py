"""The one atomic writer (issue 18, item 5): unpredictable temporary names created
O_EXCL, complete writes, fsync, and symlinks never followed.

The first tests plant symlinks at the temporary names 0.3 used (predictable, opened
with O_TRUNC and no O_EXCL): a keyed state save, the parts manifest and a released
output then overwrote the symlink's target with exact counts.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

import dpcount.durable.atomic as atomic
from dpcount.keyed.io import write_frames, write_json_atomic
from dpcount.keyed.secret import RunSecret
from dpcount.keyed.state import RunState

SECRET = RunSecret(b"s" * 32, "run-id", {"n": 1})
VICTIM = b"someone else's file\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    return victim


def _state() -> RunState:
    return RunState("run-id", SECRET.fingerprint, 3, np.arange(4, dtype=np.int64))


def test_state_save_never_follows_a_planted_temp_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "run.state"
    for name in (f".run.state.{os.getpid()}.tmp", "run.state.tmp", ".run.state.tmp"):
        (tmp_path / name).symlink_to(victim)
    _state().save(path, SECRET)
    assert victim.read_bytes() == VICTIM
    assert RunState.load(path, SECRET, 4).sums.tolist() == [0, 1, 2, 3]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "run.state"
    path.symlink_to(victim)
    _state().save(path, SECRET)
    assert victim.read_bytes() == VICTIM and not path.is_symlink()
    manifest = tmp_path / "_run.json"
    manifest.symlink_to(victim)
    (tmp_path / "._run.json.tmp").symlink_to(victim)
    write_json_atomic(manifest, {"run_id": "r"})
    assert victim.read_bytes() == VICTIM and not manifest.is_symlink()


def test_released_output_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    import pandas as pd

    victim = _victim(tmp_path)
    out = tmp_path / "counts.csv"
    out.symlink_to(victim)
    (tmp_path / ".counts.csv.tmp").symlink_to(victim)
    write_frames([pd.DataFrame({"key": ["a"], "private_count": [3]})], out)
    assert victim.read_bytes() == VICTIM
    assert out.read_text() == "key,private_count\na,3\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # a released file


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.write may write fewer bytes than asked; the writer must loop."""
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:3])))
    path = tmp_path / "run.state"
    _state().save(path, SECRET)
    atomic.write_atomic(tmp_path / "x.bin", [b"0123456789", b"abcdefgh"])
    monkeypatch.undo()
    assert (tmp_path / "x.bin").read_bytes() == b"0123456789abcdefgh"
    assert RunState.load(path, SECRET, 4).step == 3


def test_create_only_never_replaces(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    atomic.write_atomic(path, [b"one"], replace=False)
    with pytest.raises(FileExistsError):
        atomic.write_atomic(path, [b"two"], replace=False)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        atomic.write_atomic(dangling, [b"two"], replace=False)
    assert path.read_bytes() == b"one" and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "secret"]  # no temps


def test_failed_write_leaves_the_target_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), atomic.atomic_file(path) as fh:
        fh.write(b"new, half written")
        raise RuntimeError("boom")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    leftover = tmp_path / ".f.abc12_89.tmp"  # a killed writer's temporary file
    leftover.write_bytes(b"exact counts")
    atomic.write_atomic(path, [b"new"])
    assert not leftover.exists() and path.read_bytes() == b"new"
    with pytest.raises(ValueError, match="mode must be a permission mask"):
        atomic.write_atomic(path, [b"x"], mode=0o10000)


@pytest.mark.slow  # importing the experiments (matplotlib) costs ~1 s
def test_experiment_csv_goes_through_the_writer(tmp_path: Path) -> None:
    from dpcount.experiments._framework import write_csv

    victim = _victim(tmp_path)
    out = tmp_path / "r.csv"
    out.symlink_to(victim)
    write_csv(out, ["a", "b"], [(1, 0.5), (2, 1 / 3)])
    assert victim.read_bytes() == VICTIM
    assert out.read_bytes() == b"a,b\r\n1,0.5\r\n2,0.3333333333\r\n"  # csv: CRLF
