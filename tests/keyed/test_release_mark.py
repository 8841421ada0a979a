"""A keyed step is released once (issue 18, item 1): the mark and the lock.

The noise of a step is a pure function of (secret, configuration, position), so a
second release of a step from other data publishes the exact difference of the data.
These tests drive the ways that used to happen — a restored older state, a run killed
after its output, a rerun on corrected data, two processes at once — and check each
is refused, while the identical retry (same bits: nothing new) is still allowed.
Only ``keyed_counts`` and the CLI are used at module level, so the same tests run
against dpcount 0.3 (where each of them fails: the second release goes through).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.keyed._budget import keyed_counts

KEYS = [f"k{i}" for i in range(6)]
HORIZON = 20


def _events(seed: int = 1, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"t": rng.integers(0, HORIZON, n), "key": rng.choice(KEYS, n)})


def _steps(events: pd.DataFrame, a: int, b: int) -> pd.DataFrame:
    return events[(events["t"] >= a - 1) & (events["t"] <= b - 1)]


def _kw(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="t", key_column="key", step=1, start=0, horizon=HORIZON,
        epsilon=1.0, secret=tmp_path / "run.key", state=tmp_path / "run.state",
    )  # fmt: skip
    kw.update(extra)
    return kw


def _one_less(events: pd.DataFrame) -> pd.DataFrame:
    """The same events with one counted event removed (a "corrected" log)."""
    return events.drop(events.index[0])


def test_restored_older_state_is_refused(tmp_path: Path) -> None:
    events = _events()
    keyed_counts(_steps(events, 1, 10), until=10, **_kw(tmp_path))
    shutil.copy2(tmp_path / "run.state", tmp_path / "backup.state")
    first = keyed_counts(_steps(events, 11, 20), until=20, **_kw(tmp_path)).frame
    shutil.copy2(tmp_path / "backup.state", tmp_path / "run.state")  # restore the backup
    with pytest.raises(ValueError, match=r"records step 10, but steps up to 20.*restored backup"):
        keyed_counts(_one_less(_steps(events, 11, 20)), until=20, **_kw(tmp_path))
    # the identical retry publishes the same bits: allowed
    again = keyed_counts(_steps(events, 11, 20), until=20, **_kw(tmp_path)).frame
    assert again is not None and first is not None and again.equals(first)


def test_rerun_on_corrected_data_without_state_is_refused(tmp_path: Path) -> None:
    events = _events()
    kw = _kw(tmp_path, state=None)
    first = keyed_counts(events, **kw).frame
    with pytest.raises(ValueError, match=r"steps 1\.\.20 were already released with secret"):
        keyed_counts(_one_less(events), **kw)
    assert first is not None and keyed_counts(events, **kw).frame.equals(first)  # type: ignore[union-attr]


DRIVER = r"""
import os, signal, sys, time
from pathlib import Path
import numpy as np, pandas as pd
import dpcount.keyed.run as run
import dpcount.keyed.session as session
from dpcount.keyed.spec import from_keywords
from dpcount.privacy import Budget
mode, work, drop = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1)
keys = [f"k{i}" for i in range(6)]
events = pd.DataFrame({"t": rng.integers(0, 20, 600), "key": rng.choice(keys, 600)})
events = events[events["t"] >= 10].iloc[drop:]
if mode == "kill-after-output":  # SIGKILL once the output is written, before the state
    session.save_state = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
def hold(done, total):  # "hold": keep the run (and its lock) alive until told
    (work / "started").write_text(str(os.getpid()))
    while mode == "hold" and not (work / "go").exists():
        time.sleep(0.05)
run.keyed_counts(events, **from_keywords(
    keys=keys, time_column="t", key_column="key", step=1, start=0, horizon=20,
    budget=Budget(epsilon=1.0), secret=work / "run.key", state=work / "run.state", until=20,
    output=work / sys.argv[4], progress=hold,
))
"""


def _driver(work: Path, mode: str, drop: int, output: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode, str(work), str(drop), output],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _first_half(tmp_path: Path) -> None:
    keyed_counts(_steps(_events(), 1, 10), until=10, **_kw(tmp_path))


@pytest.mark.slow  # three interpreters importing pandas: ~20 s each on a loaded machine
def test_run_killed_after_output_is_retried_only_on_the_same_input(tmp_path: Path) -> None:
    _first_half(tmp_path)
    killed = _driver(tmp_path, "kill-after-output", 0, "a.csv")
    _, err = killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL, err.decode()
    assert (tmp_path / "a.csv").exists()  # the output is out, the state still at step 10
    other = _driver(tmp_path, "run", 1, "b.csv")  # other events for the same steps
    _, err = other.communicate(timeout=120)
    assert other.returncode != 0 and not (tmp_path / "b.csv").exists()
    assert "was interrupted after it began: its output may have been written" in err.decode()
    same = _driver(tmp_path, "run", 0, "c.csv")  # the identical retry completes the run
    _, err = same.communicate(timeout=120)
    assert same.returncode == 0, err.decode()
    assert (tmp_path / "c.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()
    with pytest.raises(ValueError, match="all 20 steps"):  # the state moved on
        keyed_counts(_steps(_events(), 11, 20), until=20, **_kw(tmp_path))


@pytest.mark.slow  # two interpreters importing pandas
def test_two_processes_at_once_cannot_both_release(tmp_path: Path) -> None:
    _first_half(tmp_path)
    holder = _driver(tmp_path, "hold", 0, "a.csv")
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert holder.poll() is None, holder.communicate()[1].decode()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = _driver(tmp_path, "run", 1, "b.csv")  # other data, the same steps
        _, err = second.communicate(timeout=120)
        assert second.returncode != 0 and not (tmp_path / "b.csv").exists()
        message = err.decode()
        assert "holds the lock" in message and f"process {holder.pid}" in message
    finally:
        (tmp_path / "go").write_text("")
        _, err = holder.communicate(timeout=120)
    assert holder.returncode == 0, err.decode()
    assert (tmp_path / "a.csv").exists()


def test_mark_missing_tampered_or_older_than_the_state(tmp_path: Path) -> None:
    events = _events()
    mark = tmp_path / "run.key.released"
    keyed_counts(_steps(events, 1, 5), until=5, **_kw(tmp_path))
    shutil.copy2(mark, tmp_path / "old.released")
    keyed_counts(_steps(events, 6, 10), until=10, **_kw(tmp_path))
    shutil.copy2(tmp_path / "old.released", mark)  # a restored mark (step 5 < state's 10)
    with pytest.raises(ValueError, match=r"the mark was restored from a backup or replaced"):
        keyed_counts(_steps(events, 11, 20), until=20, **_kw(tmp_path))
    body = json.loads((tmp_path / "old.released").read_text())
    body["released"] = 10  # edited by hand: the MAC no longer matches
    mark.write_text(json.dumps(body))
    with pytest.raises(ValueError, match="fails its authentication check"):
        keyed_counts(_steps(events, 11, 20), until=20, **_kw(tmp_path))
    mark.unlink()
    with pytest.raises(ValueError, match=r"released-up-to mark .* is missing"):
        keyed_counts(_steps(events, 11, 20), until=20, **_kw(tmp_path))


def test_state_deleted_after_a_release_is_refused(tmp_path: Path) -> None:
    events = _events()
    keyed_counts(_steps(events, 1, 10), until=10, **_kw(tmp_path))
    (tmp_path / "run.state").unlink()  # starting over from step 1 would re-release 1..10
    with pytest.raises(ValueError, match=r"steps 1\.\.10 were already released"):
        keyed_counts(_one_less(_steps(events, 1, 12)), until=12, **_kw(tmp_path))


def test_a_symlink_to_the_secret_shares_its_mark(tmp_path: Path) -> None:
    events = _events()
    keyed_counts(events, **_kw(tmp_path, state=None))
    (tmp_path / "link.key").symlink_to(tmp_path / "run.key")
    with pytest.raises(ValueError, match=r"steps 1\.\.20 were already released"):
        keyed_counts(_one_less(events), **_kw(tmp_path, state=None, secret=tmp_path / "link.key"))
    assert not (tmp_path / "link.key.released").exists()
