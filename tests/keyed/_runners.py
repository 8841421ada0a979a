"""Helpers of the engine-equality tests (Dask, Spark): the same stateful runs on a
distributed engine and on the embedded engine."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from tests.keyed._budget import keyed_counts


def _stateful_runs(
    events: pd.DataFrame, work: Path, windows: Any, step_of: Any, **kw: Any
) -> list[tuple[Any, bytes]]:
    """The events released in runs over ``windows`` of steps (``step_of``: each event's
    step), continuing the state ``work/run.state``: each run's result and the state
    file's bytes after it."""
    work.mkdir(exist_ok=True)
    out = []
    for first, last in windows:
        step = step_of(events)
        piece = events[(step >= first) & (step <= last)]
        # with allowed_lateness the run finds its own last step from the data
        window = {} if "allowed_lateness" in kw else {"until": last}
        res = keyed_counts(
            piece, state=work / "run.state", **window, secret=str(work / "run.key"), **kw
        )
        out.append((res, (work / "run.state").read_bytes()))
    return out


def same_runs_on_two_engines(
    dask: dict[str, Any],
    tmp_path: Path,
    events: pd.DataFrame,
    windows: Any,
    step_of: Any,
    **kw: Any,
) -> list[Any]:
    """Runs on a distributed engine (``dask``: its keyed_counts options, such as
    engine="dask", 3 partitions, chunks of 7 keys) and embedded runs (chunks of 16) of
    the same secret over the same windows: each run's rows, report, selection outcome
    and the state file after it are the same, bit for bit. Returns the distributed
    engine's results.

    The embedded runs use a copy of the secret file and of its released-up-to mark
    taken after the first distributed run: their first run is accepted as an identical
    retry of it (the mark's input digest is the same on every engine)."""
    dasked = _stateful_runs(events, tmp_path / "dask", windows[:1], step_of, **dask, **kw)
    (tmp_path / "embedded").mkdir()
    for name in ("run.key", "run.key.released"):
        shutil.copy2(tmp_path / "dask" / name, tmp_path / "embedded" / name)
    dasked += _stateful_runs(events, tmp_path / "dask", windows[1:], step_of, **dask, **kw)
    embedded = _stateful_runs(events, tmp_path / "embedded", windows, step_of, chunk_keys=16, **kw)
    for (d, d_state), (e, e_state) in zip(dasked, embedded, strict=True):
        assert d.frame is not None and e.frame is not None
        assert d.frame.equals(e.frame)
        assert d.report == e.report
        assert d.selection == e.selection
        assert d_state == e_state
    return [res for res, _ in dasked]
