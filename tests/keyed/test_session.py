"""The run session (:mod:`dpcount.keyed.session`): a run's lifecycle state in one object,
driven step by step as a runner does, gives the bytes of ``keyed_counts``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.durable.lock import LockHeld
from dpcount.keyed.engine import chunk_bounds
from dpcount.keyed.events import DropReport, EventColumns
from dpcount.keyed.mark import ReleaseMark, ReleaseRefused, mark_path
from dpcount.keyed.session import RunSession
from dpcount.keyed.stages import release_chunks
from dpcount.keyed.state import RunState
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts, make_job

KEYS = [f"k{i}" for i in range(5)]
COLUMNS = EventColumns("t", "key")


def _events(seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"t": rng.integers(0, 12, 300), "key": rng.choice(KEYS, 300)})


def _common() -> dict[str, Any]:
    return dict(
        keys=KEYS, columns=COLUMNS, step=1, budget=Budget(epsilon=1.0), max_weight=1,
        max_keys=None, start=0, horizon=12, k=None, subtract=None, mechanism="tree",
        selection=None, unit_scope="step", max_steps=None, min_separation=None,
        late="refuse",
    )  # fmt: skip


def _by_hand(work: Path, events: pd.DataFrame, until: int) -> np.ndarray:
    """A release driven through the session's API (as a runner): the released counts."""
    state = work / "run.state"
    with RunSession(work / "run.key", state) as session:
        times = events["t"]
        job, derived = make_job(times=times, key_values=events["key"], **_common())
        job = session.window(job, until, times, None, derived)
        partial, _ = job.prepare(events)
        job = session.bind(job)
        contributions, _, ledger = job.finish_run([partial])
        job, contributions, base, buffers = session.begin(job, contributions, ledger, 2)
        assert session.digest is not None and session.digest == session.guard.pending.digest  # type: ignore[union-attr]
        carry = session.carry
        assert carry is not None and carry.buffers is not None
        chunks = [(lo, hi, True) for lo, hi in chunk_bounds(job.mechanism.n_keys, 2)]
        out = []
        shard = (contributions, DropReport())
        for lo, values, ends in release_chunks(job, shard, chunks, base, buffers):
            carry.buffers[:, lo : lo + values.shape[1]] = ends
            out.append(values)
        assert session.commit(job) == state
    return np.concatenate(out, axis=1)


def test_a_session_driven_by_hand_releases_what_keyed_counts_does(tmp_path: Path) -> None:
    ref, work = tmp_path / "ref", tmp_path / "work"
    ref.mkdir()
    events = _events()
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="t", key_column="key", step=1, start=0, horizon=12,
        epsilon=1.0, secret=ref / "run.key", state=ref / "run.state", mechanism="tree",
    )  # fmt: skip
    first = keyed_counts(events[events["t"] < 6], until=6, **kw).frame
    shutil.copytree(ref, work)  # the same secret, mark and state
    second = keyed_counts(events[events["t"] >= 6], until=12, **kw).frame
    assert first is not None and second is not None
    got = _by_hand(work, events[events["t"] >= 6], 12)  # steps 7..12, continuing
    want = second.pivot(index="step", columns="key", values="private_count")[KEYS]
    assert np.array_equal(got, want.to_numpy())
    # the session saved the same state and recorded the release done in the mark
    assert (work / "run.state").read_bytes() == (ref / "run.state").read_bytes()
    assert RunState.peek_step(work / "run.state") == 12
    again = (work / "run.key.released").read_bytes()
    assert again == (ref / "run.key.released").read_bytes()


def test_a_session_holds_the_lock_and_begins_through_the_mark(tmp_path: Path) -> None:
    events = _events()
    secret = tmp_path / "run.key"
    with (
        RunSession(secret, tmp_path / "run.state"),
        pytest.raises(LockHeld, match="holds the lock"),
    ):
        RunSession(secret, tmp_path / "run.state").__enter__()
    assert not (tmp_path / "run.key.lock").exists()  # refused before a secret: none left
    _by_hand(tmp_path, events[events["t"] < 6], 6)
    mark = ReleaseMark.load(mark_path(secret.resolve()), _secret(secret))
    assert mark.released == 6 and mark.pending is None
    (tmp_path / "run.state").unlink()  # a lost state: steps 1..6 again from other data
    with pytest.raises(ReleaseRefused, match="already released"):
        _by_hand(tmp_path, events[events["t"] < 5], 6)


def _secret(path: Path) -> Any:
    import json

    from dpcount.keyed.secret import RunSecret

    return RunSecret.load(path, json.loads(path.read_text())["config"])
