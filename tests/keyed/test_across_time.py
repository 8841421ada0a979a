"""Resume across time: runs continuing from a stored state equal one run, bit for bit."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcount.keyed.mark import create_secret
from dpcount.keyed.secret import unsafe_testing_secret
from tests.keyed._budget import keyed_counts

SECRET_BYTES = b"t" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)
KEYS = [f"k{i}" for i in range(13)]
HORIZON = 37


def _events(seed: int = 5, n: int = 2500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"t": rng.integers(0, HORIZON, n), "key": rng.choice([*KEYS, "x"], n)}
    ).astype({"t": np.int64})


def _kw(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="t", key_column="key", step=1, start=0, horizon=HORIZON,
        epsilon=1.0, secret=tmp_path / "run.key", chunk_keys=5, state=tmp_path / "run.state",
    )  # fmt: skip
    kw.update(extra)
    return kw


def _twin(tmp_path: Path) -> Any:
    """The secret file's bytes and run id as a testing secret: the same noise, without
    the file's mark (which refuses a second release of its steps: the oracle run)."""
    body = json.loads((tmp_path / "run.key").read_text())
    return unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])


def _step_rows(events: pd.DataFrame, a: int, b: int) -> pd.DataFrame:
    """Events of steps a..b (time t is step t + 1)."""
    return events[(events["t"] >= a - 1) & (events["t"] <= b - 1)]


def _pieces(tmp_path: Path, events: pd.DataFrame, cuts: list[int], **extra: Any) -> pd.DataFrame:
    frames, first = [], 1
    for last in [*cuts, HORIZON]:
        kw = _kw(tmp_path, until=last, **extra)
        res = keyed_counts(_step_rows(events, first, last), **kw)
        assert res.frame is not None and res.released == (first, last)
        frames.append(res.frame)
        first = last + 1
    return pd.concat(frames, ignore_index=True)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["key", "step"], kind="stable").reset_index(drop=True)


# ------------------------------------------------------------- runs split in pieces
@pytest.mark.parametrize(
    "cuts",
    [[1], [8], [16], [20], [4, 8], [15, 16], [3, 32], [36]],
)
def test_split_runs_equal_one_run_discrete(tmp_path: Path, cuts: list[int]) -> None:
    events = _events()
    got = _pieces(tmp_path, events, cuts)
    one = keyed_counts(events, **_kw(tmp_path, state=None, secret=_twin(tmp_path))).frame
    assert one is not None
    assert _sorted(got).equals(_sorted(one))
    assert not (tmp_path / "run.state").stat().st_mode & 0o077


@pytest.mark.parametrize(
    ("extra", "cuts"),
    [
        ({"mechanism": "kary", "k": 3, "subtract": True}, [9, 27]),
        ({"mechanism": "tree", "k": 4}, [16, 17]),
        ({"noise": "laplace"}, [8, 30]),
        ({"noise": "gaussian", "delta": 1e-6, "mechanism": "kary", "k": 3}, [9, 10]),
        ({"mechanism": "honaker"}, [8, 30]),  # exact rational noise
        ({"noise": "gaussian", "delta": 1e-6, "mechanism": "sqrt"}, [5, 20]),
    ],
)
def test_split_runs_equal_one_run_other_mechanisms_and_noise(
    tmp_path: Path, extra: dict[str, Any], cuts: list[int]
) -> None:
    events = _events(seed=9)
    got = _pieces(tmp_path, events, cuts, **extra)
    one = keyed_counts(events, **_kw(tmp_path, state=None, secret=_twin(tmp_path), **extra)).frame
    assert one is not None
    assert _sorted(got).equals(_sorted(one))


def _record_draws(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Every PRF draw of the keyed engines as (first key, first row, rows)."""
    from dpcount.keyed.prf import PRFWords

    draws: list[tuple[int, int, int]] = []
    original = PRFWords.block

    def block(self: PRFWords, row: int, shape: tuple[int, ...]) -> Any:
        draws.append((self.key_lo, row, int(np.prod(shape[:-1]))))
        return original(self, row, shape)

    monkeypatch.setattr(PRFWords, "block", block)
    return draws


@pytest.mark.parametrize(
    "extra",
    [
        {},
        pytest.param(
            {"noise": "gaussian", "delta": 1e-6, "mechanism": "blt"}, marks=pytest.mark.slow
        ),
    ],
)
def test_resumed_run_draws_no_noise_of_released_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any]
) -> None:
    """With the noise state stored, a resumed run starts drawing PRF rows where the
    previous run stopped (no row drawn twice) and draws those of its own steps only
    (blocks of 8 steps here), yet releases the bits of one uninterrupted run."""
    import dpcount.keyed.engine as engine

    monkeypatch.setattr(engine, "STEP_BLOCK", 8)
    events = _events(seed=4)
    draws = _record_draws(monkeypatch)
    got, first = [], 1
    rows_by_run = []
    for last in (13, 14, 30, HORIZON):
        draws.clear()
        res = keyed_counts(_step_rows(events, first, last), **_kw(tmp_path, until=last, **extra))
        assert res.frame is not None
        got.append(res.frame)
        rows_by_run.append({(key, row + i) for key, row, n in draws for i in range(n)})
        first = last + 1
    for earlier, later in itertools.pairwise(rows_by_run):
        assert not earlier & later  # no PRF row drawn twice
    # run 2 (step 14) is served from the stored noise of block 9..16; run 3 draws the
    # rows of blocks 17..24 and 25..32 only
    assert rows_by_run[1] == set()
    assert rows_by_run[2] and min(r for _, r in rows_by_run[2]) >= max(r for _, r in rows_by_run[0])
    draws.clear()
    one = keyed_counts(events, **_kw(tmp_path, state=None, secret=_twin(tmp_path), **extra)).frame
    assert one is not None
    whole = {(key, row + i) for key, row, n in draws for i in range(n)}
    assert whole == set().union(*rows_by_run)  # the same rows in all: none extra
    assert _sorted(pd.concat(got, ignore_index=True)).equals(_sorted(one))


def test_state_of_an_earlier_format_or_layout_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpcount.keyed.engine as engine
    from dpcount.counting.checkpoint import CheckpointMismatchError

    path = _saved(tmp_path)
    line, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(line)
    older = {**header, "format": "dpcount-keyed-state/1"}
    path.write_bytes(json.dumps(older).encode() + b"\n" + payload)
    with pytest.raises(CheckpointMismatchError, match="format dpcount-keyed-state/1") as err:
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12))
    assert err.value.fields == ("format",)
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    monkeypatch.setattr(engine, "STATE_VALUES_LIMIT", 0)  # as if another version kept none
    with pytest.raises(CheckpointMismatchError, match="noise state of another layout"):
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12))


def test_split_with_float_weights_is_bit_identical(tmp_path: Path) -> None:
    events = _events(seed=3).assign(w=np.random.default_rng(1).random(2500) * 0.9)
    extra = {"weight_column": "w", "noise": "laplace"}
    got = _pieces(tmp_path, events, [5, 22], **extra)
    one = keyed_counts(events, **_kw(tmp_path, state=None, secret=_twin(tmp_path), **extra)).frame
    assert one is not None
    assert _sorted(got).equals(_sorted(one))


def test_resumed_parts_directory_and_file_output(tmp_path: Path) -> None:
    events = _events()
    keyed_counts(_step_rows(events, 1, 10), output=tmp_path / "out", **_kw(tmp_path, until=10))
    res = keyed_counts(
        _step_rows(events, 11, 37), output=tmp_path / "day.parquet", **_kw(tmp_path, until=37)
    )
    assert res.released == (11, 37) and res.output is not None
    first = pd.read_parquet(tmp_path / "out" / "steps-000001-000010")
    back = pd.concat([first, pd.read_parquet(res.output)], ignore_index=True)
    back["key"] = back["key"].astype(str)
    one = keyed_counts(events, **_kw(tmp_path, state=None, secret=_twin(tmp_path))).frame
    assert one is not None
    back = back.sort_values(["key", "step"]).reset_index(drop=True)
    one = one.sort_values(["key", "step"]).reset_index(drop=True)
    assert back["private_count"].tolist() == one["private_count"].tolist()
    assert sorted(set(back["step"])) == list(range(1, 38))


# ------------------------------------------------------------- refusals and reports
def test_events_of_released_steps_are_refused(tmp_path: Path) -> None:
    events = _events()
    keyed_counts(_step_rows(events, 1, 10), **_kw(tmp_path, until=10))
    late = _step_rows(events, 10, 12)
    row = late.index[late["t"] == 9][0]
    with pytest.raises(ValueError, match=rf"index label {row} .* step 10, already released"):
        keyed_counts(late, **_kw(tmp_path, until=12))


def test_later_events_are_reported_not_counted(tmp_path: Path) -> None:
    events = _events()
    res = keyed_counts(events, **_kw(tmp_path, until=10))
    later = int(((events["t"] >= 10) & events["key"].isin(KEYS)).sum())
    assert res.report.later_steps == later > 0
    assert res.report.kept_events == int(((events["t"] < 10) & events["key"].isin(KEYS)).sum())
    assert any("after the released steps" in line for line in res.summary())
    assert res.frame is not None and set(res.frame["step"]) == set(range(1, 11))


def test_bad_windows_are_refused(tmp_path: Path) -> None:
    events = _events()
    with pytest.raises(ValueError, match="beyond the horizon 37"):
        keyed_counts(events, **_kw(tmp_path, until=38))
    with pytest.raises(ValueError, match="explicit start and horizon"):
        keyed_counts(events, **_kw(tmp_path, horizon=None))
    keyed_counts(_step_rows(events, 1, 20), **_kw(tmp_path, until=20))
    with pytest.raises(ValueError, match="until must be >= 21"):
        keyed_counts(_step_rows(events, 21, 21), **_kw(tmp_path, until=20))
    keyed_counts(_step_rows(events, 21, 37), **_kw(tmp_path, until=37))
    with pytest.raises(ValueError, match="all 37 steps"):
        keyed_counts(_step_rows(events, 21, 21), **_kw(tmp_path, until=37))
    with pytest.raises(ValueError, match="state= needs until="):
        keyed_counts(_step_rows(events, 21, 21), **_kw(tmp_path / "other"))


def _saved(tmp_path: Path) -> Path:
    keyed_counts(_step_rows(_events(), 1, 10), **_kw(tmp_path, until=10))
    return tmp_path / "run.state"


def test_tampered_state_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 1  # one bit of the payload (a noise state value)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="fails its authentication check"):
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12))


def test_tampered_step_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    data = path.read_bytes().replace(b'"step": 10', b'"step": 11', 1)
    path.write_bytes(data)
    with pytest.raises(ValueError, match="fails its authentication check"):
        keyed_counts(_step_rows(_events(), 12, 12), **_kw(tmp_path, until=12))


def test_state_of_another_run_is_refused(tmp_path: Path) -> None:
    _saved(tmp_path)
    config = json.loads((tmp_path / "run.key").read_text())["config"]
    with pytest.raises(ValueError, match=r"authentication check.*another run"):
        keyed_counts(
            _step_rows(_events(), 11, 12),
            **_kw(tmp_path, until=12, secret=create_secret(tmp_path / "u.key", config)),
        )
    with pytest.raises(ValueError, match="another run"):  # same secret, other budget
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12, epsilon=2.0))


def test_state_without_its_secret_file_creates_nothing(tmp_path: Path) -> None:
    _saved(tmp_path)
    secret = tmp_path / "new.key"
    with pytest.raises(FileNotFoundError, match=r"exists but secret file .* does not"):
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12, secret=secret))
    assert not secret.exists()


def test_state_file_checks(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError, match=r"state file .* permissions 0644"):
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12))
    os.chmod(path, 0o600)
    path.write_bytes(b"hello\n")
    with pytest.raises(ValueError, match="not a dpcount keyed state file"):
        keyed_counts(_step_rows(_events(), 11, 12), **_kw(tmp_path, until=12))
