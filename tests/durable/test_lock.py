"""The one process lock (:mod:`dpcount.durable.lock`), shared by ``count --checkpoint``
and keyed runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpcount.durable.lock import FileLock, LockHeld
from dpcount.durable.output import DurableOutput
from dpcount.keyed.mark import secret_lock


def test_a_discarded_lock_is_not_held_by_a_late_opener(tmp_path: Path) -> None:
    """A run that leaves nothing behind removes its lock file while holding it; a run
    that opened the old file meanwhile must not count it as the lock."""
    path = tmp_path / "s.key.lock"
    first = FileLock(path)
    first.acquire()
    late = os.open(path, os.O_RDWR)  # opened before the discard
    first.discard()
    assert not path.exists()
    second = FileLock(path)
    assert not second._same_file(late)  # the check acquire makes after its flock
    second.acquire()
    assert path.exists() and second._same_file(second._fd)  # type: ignore[arg-type]
    second.release()
    os.close(late)


def test_a_replaced_lock_file_is_not_the_lock(tmp_path: Path) -> None:
    """The same-file check compares device and inode: a new file at the path (the old
    one removed and another created) is not the file a late opener locked."""
    path = tmp_path / "ck.lock"
    with FileLock(path) as lock:
        assert lock.held and path.read_text() == f"{os.getpid()}\n"
        late = os.open(path, os.O_RDWR)
    assert not path.exists()  # ``with`` removes the file while holding it
    path.write_text("")  # another file at the path
    assert not FileLock(path)._same_file(late)
    os.close(late)


_HOLD = """
import sys, time
from dpcount.durable.lock import FileLock
lock = FileLock(sys.argv[1]); lock.acquire(); print("held", flush=True); time.sleep(60)
"""


def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """Both users of the lock refuse while another process holds it, naming its id:
    the checkpoint's (a ValueError, as before) and a keyed secret's (an OSError)."""
    secret = tmp_path / "s.key"
    ck = tmp_path / "ck"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holders = [
        subprocess.Popen([sys.executable, "-c", _HOLD, str(p)], stdout=subprocess.PIPE, env=env)
        for p in (tmp_path / "s.key.lock", tmp_path / "ck.lock")
    ]
    try:
        for h in holders:
            assert h.stdout is not None and h.stdout.readline() == b"held\n"
        with pytest.raises(OSError, match=f"process {holders[0].pid}\\) holds the lock"):
            secret_lock(secret).acquire()
        run = DurableOutput(output=tmp_path / "o.csv", checkpoint=ck, header="t\n", options={})
        with pytest.raises(
            ValueError, match=f"ck is in use by another process \\(process {holders[1].pid}"
        ):
            run.__enter__()
        with pytest.raises(LockHeld):
            FileLock(tmp_path / "ck.lock").acquire()
    finally:
        for h in holders:
            h.kill()
            h.communicate()
    with secret_lock(secret):  # the holders died: their locks with them
        pass


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "x.lock").symlink_to(target)
    with pytest.raises(OSError):
        FileLock(tmp_path / "x.lock").acquire()
    assert target.read_text() == "keep\n"
