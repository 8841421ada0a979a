"""Helpers of the engine-equality tests (Dask, Spark): the same stateful runs on a
distributed engine and on the embedded engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcount.keyed.secret import unsafe_testing_secret
from tests.keyed._budget import keyed_counts

SECRET = unsafe_testing_secret(b"d" * 32)
KEYS = [f"k{i}" for i in range(40)]


def twin(tmp_path: Path) -> Any:
    """The secret file's bytes and run id as a testing secret: the same noise, without
    the file's mark (which refuses the oracle's second release of the same steps)."""
    body = json.loads((tmp_path / "run.key").read_text())
    return unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])


def keys_file(tmp_path: Path, extra: tuple[str, ...] = ()) -> Path:
    """:data:`KEYS` (then ``extra``) as a keys file, padded, with blank lines and CRLFs."""
    lines = [f"  {k} " if i % 3 else f"{k}\r" for i, k in enumerate([*KEYS, *extra])]
    path = tmp_path / "keys.txt"
    path.write_bytes(("\n\n".join(lines) + "\n").encode())
    return path


def small_events(n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "t": rng.integers(0, 50, n),
            "key": rng.choice([*KEYS, "nope"], n),
            "unit": rng.integers(0, 80, n),
            "w": rng.integers(0, 4, n),
        }
    )


#: the small job of the engine-equality tests: 40 keys (and an unknown one), 10 steps of
#: 5 time units, weights up to 3 clipped to 2, the ternary tree, discrete Laplace
SMALL_JOB: dict[str, Any] = {
    "keys": KEYS, "time_column": "t", "key_column": "key", "weight_column": "w", "step": 5,
    "start": 0, "horizon": 10, "epsilon": 1.0, "secret": SECRET, "max_weight": 2,
    "mechanism": "tree", "k": 3,
}  # fmt: skip


def small_kw(**extra: Any) -> dict[str, Any]:
    """:data:`SMALL_JOB` with ``extra`` options."""
    return {**SMALL_JOB, **extra}


def by_key_then_step(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of runs over windows of steps in one run's order (the universe's, then step)."""
    order = np.lexsort((frame["step"].to_numpy(), frame["key"].map(KEYS.index).to_numpy()))
    return frame.iloc[order].reset_index(drop=True)


def check_equals_embedded(runner: dict[str, Any], **extra: Any) -> Any:
    """One run on ``runner`` (keyed_counts' engine options, with its partitions; chunks of
    7 keys) and on the embedded engine (chunks of 16): the same frame and report."""
    events = small_events()
    embedded = keyed_counts(events, chunk_keys=16, **small_kw(**extra))
    other = keyed_counts(events, chunk_keys=7, **runner, **small_kw(**extra))
    assert embedded.frame is not None and other.frame is not None
    assert other.frame.equals(embedded.frame)
    assert other.report == embedded.report
    return embedded.report


def check_key_selection(tmp_path: Path, runner: dict[str, Any], units: bool) -> None:
    """An open key set on ``runner`` and on the embedded engine: the same rows (a frame
    and the bytes of a Parquet file) and selection outcome."""
    from dpcount.keyed.selection import KeySelection

    rng = np.random.default_rng(3)
    n = 3000
    events = pd.DataFrame(
        {
            "t": rng.integers(0, 50, n),
            # a few heavy keys (selected) and many light ones (mostly not)
            "key": np.where(rng.random(n) < 0.6, rng.integers(0, 6, n), rng.integers(6, 400, n)),
            "unit": rng.integers(0, 1500, n),
        }
    )
    extra: dict[str, Any] = dict(
        keys=None, selection=KeySelection(epsilon=1.5, delta=0.15), weight_column=None, max_weight=1
    )
    if units:
        extra.update(unit_column="unit", unit_scope="run", max_keys=1)
    embedded = keyed_counts(events, chunk_keys=16, **small_kw(**extra))
    other = keyed_counts(events, chunk_keys=7, **runner, **small_kw(**extra))
    assert embedded.frame is not None and other.frame is not None
    assert other.frame.equals(embedded.frame)
    assert other.selection == embedded.selection
    assert embedded.selection is not None
    assert 0 < embedded.selection.selected < embedded.selection.candidates
    # the same chunks: a Parquet file holds one row group per released chunk
    a = keyed_counts(events, output=tmp_path / "a.parquet", chunk_keys=7, **small_kw(**extra))
    b = keyed_counts(
        events, output=tmp_path / "b.parquet", chunk_keys=7, **runner, **small_kw(**extra)
    )
    assert a.output is not None and b.output is not None
    assert a.output.read_bytes() == b.output.read_bytes()


def check_parts_resume(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any], **extra: Any
) -> None:
    """A directory of parts on a distributed engine, stopped after the first part
    arrives (``first``: its options), rerun (``second``; only the missing parts
    computed): the embedded engine's files (``extra``: options of both)."""
    events = small_events()
    kw = small_kw(secret=tmp_path / "run.key", chunk_keys=6, **extra)
    keyed_counts(events, output=tmp_path / "embedded", **kw)

    class Stop(Exception):
        pass

    def stop(done: int, total: int) -> None:
        raise Stop

    try:
        keyed_counts(events, output=tmp_path / "other", progress=stop, **first, **kw)
    except Stop:
        pass
    else:
        raise AssertionError("the run was not stopped")
    computed: list[int] = []
    keyed_counts(
        events,
        output=tmp_path / "other",
        progress=lambda done, total: computed.append(done),
        **second,
        **kw,
    )
    assert len(computed) < len(range(0, len(KEYS), 6))  # only missing parts were run

    def files(p: Path) -> dict[str, bytes]:
        return {f.name: f.read_bytes() for f in sorted(p.iterdir())}

    assert files(tmp_path / "other") == files(tmp_path / "embedded")


def check_resumed_runs(
    tmp_path: Path,
    runner: dict[str, Any],
    windows: tuple[int, ...],
    events: pd.DataFrame,
    **extra: Any,
) -> None:
    """Runs on ``runner`` over steps up to each of ``windows`` from a stored state: the
    bits of one embedded run over all the steps."""
    frames, first = [], 1
    t = events["t"] // 5 + 1  # step of each event
    for last in windows:
        res = keyed_counts(
            events[(t >= first) & (t <= last)],
            state=tmp_path / "run.state",
            until=last,
            **runner,
            **small_kw(**extra, secret=tmp_path / "run.key"),
        )
        assert res.frame is not None
        frames.append(res.frame)
        first = last + 1
    one = keyed_counts(events, chunk_keys=16, **small_kw(**extra, secret=twin(tmp_path)))
    assert one.frame is not None
    assert by_key_then_step(pd.concat(frames, ignore_index=True)).equals(one.frame)


def check_float_mechanism(tmp_path: Path, runner: dict[str, Any], mechanism: str) -> None:
    """Floating-point Gaussian noise through ``mechanism`` on ``runner``: the embedded
    engine's bits, in one run and resumed from a state after step 4."""
    events = small_events().assign(w=lambda f: f["w"].astype(np.float64) * 0.75)
    blt = {"noise": "gaussian", "delta": 1e-6, "mechanism": mechanism, "k": None}
    check_equals_embedded(runner, **blt)
    resumed = {**runner, "chunk_keys": 9}
    check_resumed_runs(tmp_path, resumed, (4, 10), events, **blt)


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
