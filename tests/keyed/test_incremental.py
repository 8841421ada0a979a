"""Incremental runs over arriving files: exactly-once output across crashes and reruns."""

from __future__ import annotations

import hashlib
import hmac
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

from dpcount.keyed.incremental import _Appender, inputs_path, run_incremental
from dpcount.keyed.mark import ReleaseMark, mark_path
from dpcount.keyed.secret import RunSecret, unsafe_testing_secret
from dpcount.privacy import Budget
from tests.keyed._budget import keyed_counts

KEYS = ["a", "b", "c"]


class Killed(BaseException):
    """A kill at a chosen point (the rerun must not rely on anything it skipped)."""


START = pd.Timestamp("2024-01-01")


def _batch(seed: int, days: tuple[int, int], n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    day = START + pd.to_timedelta(rng.integers(*days, n), "D")
    hour = pd.to_timedelta(rng.integers(0, 24, n), "h")
    return pd.DataFrame(
        {"t": (day + hour).strftime("%Y-%m-%dT%H:%M:%S"), "key": rng.choice(KEYS, n)}
    )


#: three arrivals: days 0-2, then 2-5 (day 2 arrives again: not yet released), then 5-8
BATCHES = [_batch(1, (0, 3)), _batch(2, (2, 6)), _batch(3, (5, 9))]


def _kw(work: Path) -> dict[str, Any]:
    return dict(
        keys=KEYS, time_column="t", key_column="key", step="1D", start="2024-01-01",
        horizon=10, budget=Budget(epsilon=1.0), secret=work / "run.key", state=work / "run.state",
        output=work / "out.csv", allowed_lateness="1h",
    )  # fmt: skip


def _arrive(work: Path, i: int) -> None:
    (work / "in").mkdir(exist_ok=True)
    BATCHES[i].to_csv(work / "in" / f"batch-{i}.csv", index=False)


def _clone_secret(src: Path, dst: Path) -> None:
    """The same secret in another folder, with a fresh mark (tests only: the oracle)."""
    dst.mkdir(exist_ok=True)
    shutil.copy(src / "run.key", dst / "run.key")
    os.chmod(dst / "run.key", 0o600)
    config = json.loads((dst / "run.key").read_text())["config"]
    secret = RunSecret.load(dst / "run.key", config)
    ReleaseMark.new(secret).save(mark_path(secret.path), secret)  # type: ignore[arg-type]


@pytest.fixture
def reference(tmp_path: Path) -> tuple[Path, bytes]:
    """Three uninterrupted runs; the output they leave."""
    work = tmp_path / "ref"
    work.mkdir()
    for i in range(3):
        _arrive(work, i)
        run_incremental(work / "in", **_kw(work))
    return work, (work / "out.csv").read_bytes()


@pytest.mark.slow
def test_runs_release_complete_steps_once_and_equal_one_run(
    reference: tuple[Path, bytes],
) -> None:
    work, _ = reference
    got = pd.read_csv(work / "out.csv")
    assert sorted(got["step"].unique()) == list(range(1, 9))  # day 9 not complete by 1h
    assert not got.duplicated(["key", "step"]).any()
    body = json.loads((work / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    kw = _kw(work)
    for name in ("secret", "state", "output", "allowed_lateness"):
        kw.pop(name)
    one = keyed_counts(pd.concat(BATCHES), secret=twin, until=8, **kw).frame
    assert one is not None
    one = one.astype({"time": str}).sort_values(["key", "step"]).reset_index(drop=True)
    got = got.sort_values(["key", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[one.columns], one, check_dtype=False)
    record = json.loads(inputs_path(work / "run.state").read_text())
    assert sorted(record["files"]) == [f"batch-{i}.csv" for i in range(3)]
    assert record["released"] == 8 and record["pending"] is None


@pytest.mark.parametrize(
    "point",
    [
        "mid-append",
        pytest.param("before-record", marks=pytest.mark.slow),
        pytest.param("before-mark", marks=pytest.mark.slow),
    ],
)
def test_a_crash_then_a_rerun_gives_the_same_bytes(
    reference: tuple[Path, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """Killed with half the rows appended, or after the release but before the inputs
    record is updated; a new file arrives; the rerun completes the release, then
    takes the new file: the bytes of the uninterrupted runs."""
    from dpcount.keyed import incremental

    ref, text = reference
    work = tmp_path / "crash"
    _clone_secret(ref, work)
    _arrive(work, 0)
    run_incremental(work / "in", **_kw(work))
    _arrive(work, 1)
    append, finish = _Appender.__call__, incremental._finish

    def crash_append(self: _Appender, job: Any, chunks: Any) -> Path:
        append(self, job, chunks)
        with open(self.path, "r+b") as fh:  # the last rows only half written
            fh.truncate(self.path.stat().st_size - 50)
        raise Killed

    def crash_record(*args: Any) -> None:
        raise Killed

    begin = _Appender.begin

    def crash_begin(self: _Appender, secret: Any) -> None:  # the record pending, not the mark
        begin(self, secret)
        raise Killed

    if point == "mid-append":
        monkeypatch.setattr(_Appender, "__call__", crash_append)
    elif point == "before-mark":
        monkeypatch.setattr(_Appender, "begin", crash_begin)
    else:
        monkeypatch.setattr(incremental, "_finish", crash_record)
    with pytest.raises(Killed):
        run_incremental(work / "in", **_kw(work))
    monkeypatch.setattr(_Appender, "__call__", append)
    monkeypatch.setattr(_Appender, "begin", begin)
    monkeypatch.setattr(incremental, "_finish", finish)
    _arrive(work, 2)  # a new file arrives before the rerun
    ran = run_incremental(work / "in", **_kw(work))
    assert ran.completed_interrupted and ran.new_files == ["batch-2.csv"]
    assert (work / "out.csv").read_bytes() == text


@pytest.mark.slow
def test_a_changed_consumed_file_is_refused(reference: tuple[Path, bytes]) -> None:
    work, _ = reference
    path = work / "in" / "batch-1.csv"
    path.write_text(path.read_text() + "2024-01-04T00:00:00,a\n")
    with pytest.raises(ValueError, match=r"batch-1.csv was consumed by an earlier run and has"):
        run_incremental(work / "in", **_kw(work))


@pytest.mark.slow
def test_late_files_are_refused_or_moved(tmp_path: Path) -> None:
    work = tmp_path
    _arrive(work, 0)
    _arrive(work, 1)
    run_incremental(work / "in", **_kw(work))  # days 1..5 released
    BATCHES[0].head(3).to_csv(work / "in" / "straggler.csv", index=False)
    with pytest.raises(ValueError, match=r"late event at straggler.csv line 2 \(time"):
        run_incremental(work / "in", **_kw(work))
    _arrive(work, 2)
    ran = run_incremental(work / "in", late="next-step", **_kw(work))
    assert ran.result is not None and ran.result.report.late_moved == 3
    assert ran.released == (6, 8)


MANY = [f"k{i:03d}" for i in range(300)]


def _many(seed: int, days: tuple[int, int], n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    day = START + pd.to_timedelta(rng.integers(*days, n), "D")
    return pd.DataFrame({"t": day.strftime("%Y-%m-%d"), "key": rng.choice(MANY, n)})


def _argv(work: Path) -> list[str]:
    return ["keyed", "--input-dir", str(work / "in"), "--state", str(work / "run.state"),
            "--output", str(work / "out.csv"), "--secret", str(work / "run.key"), "--keys",
            str(work / "keys.txt"), "--time-column", "t", "--key-column", "key", "--step",
            "1D", "--start", "2024-01-01", "--horizon", "12", "--epsilon", "1",
            "--allowed-lateness", "0", "--chunk-keys", "16"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("seed", range(3))
def test_sigkill_at_random_moments_then_rerun_gives_the_same_bytes(
    tmp_path: Path, seed: int
) -> None:
    """``python -m dpcount keyed --input-dir``, killed with SIGKILL at random moments
    in each of three arrivals, then run to completion: the output equals, byte for
    byte, the output of the same arrivals never interrupted."""
    from dpcount.cli import main

    batches = [_many(seed, (0, 4)), _many(seed + 10, (3, 8)), _many(seed + 20, (7, 12))]
    ref, work = tmp_path / "ref", tmp_path / "crash"
    for folder in (ref, work):
        (folder / "in").mkdir(parents=True)
        (folder / "keys.txt").write_text("\n".join(MANY) + "\n")
    rng = np.random.default_rng(seed)
    interrupted = 0
    for i, batch in enumerate(batches):
        batch.to_csv(ref / "in" / f"b{i}.csv", index=False)
        assert main(_argv(ref)) == 0
        if i == 0:
            _clone_secret(ref, work)
        batch.to_csv(work / "in" / f"b{i}.csv", index=False)
        for within in (0.0, 0.3):  # at once when the release begins, then at random
            interrupted += _kill_during_a_release(work, rng, within=within)
        _kill_during_a_release(work, rng, anytime=True)  # also while the record is written
        assert main(_argv(work)) == 0
        assert (work / "out.csv").read_bytes() == (ref / "out.csv").read_bytes()
        _check_record_bound(work)
    assert interrupted >= 1  # at least one kill left a release half done


def _check_record_bound(work: Path) -> None:
    """The inputs record after the runs authenticates under the run secret and is the
    one the released-up-to mark binds (issue #30, item 3)."""
    from dpcount.keyed.incremental import Inputs

    secret = RunSecret.load(work / "run.key", json.loads(body_of(work))["config"])
    assert secret.path is not None
    record = Inputs.load(inputs_path(work / "run.state"), secret)
    mark = ReleaseMark.load(mark_path(secret.path), secret)
    assert record.pending is None and record.mac(secret) in mark.bound_inputs()


def _kill_during_a_release(
    work: Path,
    rng: np.random.Generator,
    argv: list[str] | None = None,
    within: float = 0.3,
    *,
    anytime: bool = False,
) -> int:
    """Start the CLI (``argv``; default :func:`_argv`), SIGKILL it at a random moment
    in the first ``within`` seconds after its release has begun (the inputs record
    holds a pending release) — or, ``anytime``, in the first 3 s after it started
    (while it reads, records the release pending, writes, or records it done); 1 if
    it died with the release pending."""
    record = inputs_path(work / "run.state")
    with subprocess.Popen(
        [sys.executable, "-m", "dpcount", *(_argv(work) if argv is None else argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        end = time.monotonic() + (float(rng.uniform(0.0, 3.0)) if anytime else 120)
        while proc.poll() is None and time.monotonic() < end:
            if not anytime and record.exists() and '"pending": {' in record.read_text():
                break
            if anytime or within > 0:  # within=0: poll without pause (a short release)
                time.sleep(0.002)
        # a release of _argv's 300 keys stays pending ~0.3-0.5 s (within=0.8 let all six
        # kills of a seed land after it, once the release had become faster)
        if not anytime:
            time.sleep(float(rng.uniform(0.0, within)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    return int(record.exists() and '"pending": {' in record.read_text())


@pytest.mark.slow
def test_a_directory_output_gets_one_folder_of_parts_per_release(tmp_path: Path) -> None:
    kw = _kw(tmp_path)
    kw["output"] = tmp_path / "out"
    for i in range(2):
        _arrive(tmp_path, i)
        run_incremental(tmp_path / "in", **kw)
    folders = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert folders == ["steps-000001-000002", "steps-000003-000005"]
    got = pd.concat(pd.read_parquet(tmp_path / "out" / f) for f in folders)
    assert sorted(set(got["step"])) == [1, 2, 3, 4, 5]
    assert str(got["time"].dtype) == "datetime64[ns]"
    kw["output"] = tmp_path / "out.parquet"
    with pytest.raises(ValueError, match=r"a Parquet file cannot be appended to"):
        run_incremental(tmp_path / "in", **kw)


def test_cli_input_dir_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpcount.cli import main

    argv = _argv(tmp_path)
    for drop, message in (
        (["--state"], "--input-dir needs --state FILE"),
        (["--allowed-lateness"], "--input-dir needs --until STEP or --allowed-lateness WAIT"),
        (["--input-dir"], "give an EVENTS file or --input-dir DIR"),
    ):
        i = argv.index(drop[0])
        assert main(argv[:i] + argv[i + 2 :]) == 2
        assert message in capsys.readouterr().err


def test_open_keys_and_run_level_bounds_in_incremental_runs(tmp_path: Path) -> None:
    open_keys_in_incremental_runs(tmp_path)


def open_keys_in_incremental_runs(tmp_path: Path, **engine: Any) -> None:
    """keys=None with selection and unit_scope="run" over two arrivals: the CSV the runs
    append equals one run over the same events (the key table, selection and unit
    ledger persist in the state between the runs); a directory output is refused.
    ``engine``: keyed_counts' engine options for the runs (default: embedded)."""
    from dpcount.keyed.selection import KeySelection

    rng = np.random.default_rng(4)
    n = 3000
    events = pd.DataFrame(
        {
            "t": (START + pd.to_timedelta(rng.integers(0, 8, n), "D")).strftime("%Y-%m-%d"),
            "key": rng.choice(["a", "b", "c", "d"], n, p=[0.6, 0.3, 0.09, 0.01]),
            "user": rng.integers(0, 900, n),
        }
    )
    # a fresh secret file: "d" (4-5 events after the bounds, one unit's at most C = 3)
    # made all four keys selected w.p. 1.4e-6 a run at δ = 1e-6 (τ = 56); at δ = 1e-10
    # (τ = 85) 1.4e-10, at most 2.0e-10 over 1000 unit-rank keys (release_profile, exact)
    kw: dict[str, Any] = dict(
        keys=None, selection=KeySelection(epsilon=2.0, delta=1e-10), time_column="t",
        key_column="key", unit_column="user", unit_scope="run", max_keys=1, max_steps=3,
        step="1D", start="2024-01-01", horizon=8, budget=Budget(epsilon=2.0),
    )  # fmt: skip
    files = dict(secret=tmp_path / "run.key", state=tmp_path / "run.state")
    (tmp_path / "in").mkdir()
    day = pd.to_datetime(events["t"])
    for name, part, until in (("a.csv", day < "2024-01-05", 4), ("b.csv", day >= "2024-01-05", 8)):
        events[part].to_csv(tmp_path / "in" / name, index=False)
        out = tmp_path / "out.csv"
        run_incremental(tmp_path / "in", output=out, until=until, **files, **kw, **engine)
    body = json.loads((tmp_path / "run.key").read_text())
    twin = unsafe_testing_secret(bytes.fromhex(body["secret"]), run_id=body["run_id"])
    one = keyed_counts(events, secret=twin, **kw)
    assert one.frame is not None and 0 < one.selection.selected < 4
    got = pd.read_csv(tmp_path / "out.csv").sort_values(["key", "step"]).reset_index(drop=True)
    want = one.frame.astype({"time": str}).sort_values(["key", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    with pytest.raises(ValueError, match="a directory of parts is not available with selection"):
        run_incremental(tmp_path / "in", output=tmp_path / "dir", until=8, **files, **kw)


def test_a_copy_or_a_symlink_of_a_consumed_file_is_refused(tmp_path: Path) -> None:
    """A byte-identical copy of a consumed file under another name, or a symlink to it,
    would count its events again (issue #30, item 6): refused, naming both files."""
    _arrive(tmp_path, 0)
    folder = tmp_path / "in"
    run_incremental(folder, **_kw(tmp_path))
    shutil.copy(folder / "batch-0.csv", folder / "copy.csv")
    copied = r"in/copy.csv is a byte-identical copy of \S*in/batch-0.csv \(consumed by an earlier"
    with pytest.raises(ValueError, match=copied):
        run_incremental(folder, **_kw(tmp_path))
    (folder / "copy.csv").unlink()
    (folder / "link.csv").symlink_to("batch-0.csv")
    linked = r"in/link.csv is a symlink to \S*in/batch-0.csv \(consumed by an earlier run\)"
    with pytest.raises(ValueError, match=linked):
        run_incremental(folder, **_kw(tmp_path))


def test_two_identical_new_files_are_refused(tmp_path: Path) -> None:
    """Within one batch of new files too (issue #30, item 6), before any file is made."""
    folder = tmp_path / "in"
    folder.mkdir()
    BATCHES[0].to_csv(folder / "a.csv", index=False)
    shutil.copy(folder / "a.csv", folder / "b.csv")
    with pytest.raises(ValueError, match=r"in/b.csv is a byte-identical copy of \S*in/a.csv"):
        run_incremental(folder, **_kw(tmp_path))
    assert not (tmp_path / "run.key").exists()  # no secret, no record
    assert not inputs_path(tmp_path / "run.state").exists()


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.csv", b"", r"is empty"),
        ("latin.csv", b"t,key\n2024-01-01T00:00:00,a\n2024-01-01T00:00:00,\xe9\n", r"line 3"),
        ("broken.parquet", b"PAR1 not a parquet file", r"cannot be read as parquet"),
        ("quote.csv", b't,key\n2024-01-01T00:00:00,"a\n2024-01-02T00:00:00,b\n', r"line 2"),
    ],
)
def test_unreadable_input_files_are_named(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    """An empty file, bytes that are not UTF-8, a damaged Parquet file, an unterminated
    quote: refused naming the file (and the line), not a reader's bare traceback
    (issue #30, item 9)."""
    folder = tmp_path / "in"
    folder.mkdir()
    BATCHES[0].to_csv(folder / "a-good.csv", index=False)
    (folder / name).write_bytes(data)
    with pytest.raises(ValueError, match=rf"events file \S*in/{name}\W.*{message}"):
        run_incremental(folder, **_kw(tmp_path))


def body_of(work: Path) -> str:
    return (work / "run.key").read_text()


def _record_mac(secret_file: Path, body: dict[str, Any]) -> str:
    """The inputs record's MAC from its documentation: HMAC-SHA256 of the canonical JSON
    under HMAC-SHA256(secret, label ‖ 0 ‖ run id) (independent of the module)."""
    key_body = json.loads(secret_file.read_text())
    key = hmac.new(
        bytes.fromhex(key_body["secret"]),
        b"dpcount-keyed-inputs-mac\0" + key_body["run_id"].encode(),
        hashlib.sha256,
    ).digest()
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def test_a_deleted_rolled_back_or_forged_inputs_record_is_refused(tmp_path: Path) -> None:
    """The consumed-files record is authenticated under the run secret and bound to the
    released-up-to mark (issue #30, item 3): deleted, restored from a backup, edited,
    or re-signed with another secret, it is refused before any file is read again —
    with late="next-step" the old code counted the released events a second time."""
    runs = tmp_path / "runs"
    runs.mkdir()
    kw = {**_kw(runs), "late": "next-step"}
    record = inputs_path(runs / "run.state")
    _arrive(runs, 0)
    run_incremental(runs / "in", **kw)
    backup = record.read_bytes()
    _arrive(runs, 1)
    run_incremental(runs / "in", **kw)
    body = json.loads(record.read_text())
    mac = body.pop("mac")
    assert mac == _record_mac(runs / "run.key", body)  # the documented MAC ...
    secret = RunSecret.load(runs / "run.key", json.loads(body_of(runs))["config"])
    mark = ReleaseMark.load(mark_path(secret.path), secret)  # type: ignore[arg-type]
    assert mark.last is not None and mark.last.inputs == mac  # ... bound into the mark
    forged = {**body, "files": {"batch-1.csv": body["files"]["batch-1.csv"]}}
    other = {**json.loads(body_of(runs)), "secret": "ab" * 32}  # another secret's MAC key
    (tmp_path / "other.key").write_text(json.dumps(other))
    changes = {
        "delete": (None, r"inputs record \S*run.state.inputs is missing"),
        "rollback": (backup, r"is not the one the released-up-to mark of this secret binds"),
        "forge": ({**forged, "mac": mac}, r"fails its authentication check"),
        "other key": (
            {**forged, "mac": _record_mac(tmp_path / "other.key", forged)},
            r"fails its authentication check",
        ),
    }
    for change, (data, match) in changes.items():
        work = tmp_path / change
        shutil.copytree(runs, work, symlinks=True)
        there = inputs_path(work / "run.state")
        there.unlink()
        if data is not None:
            there.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
            os.chmod(there, 0o600)
        _arrive(work, 2)  # new events: the old code released them with the old ones again
        with pytest.raises(ValueError, match=match):
            run_incremental(work / "in", **{**kw, **_kw(work), "late": "next-step"})
