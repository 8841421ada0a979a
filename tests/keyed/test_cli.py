"""``dpcount keyed``: end to end, idempotent output, one-line errors."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcount.cli import main
from dpcount.keyed.mark import ReleaseMark, mark_path
from dpcount.keyed.secret import RunSecret
from tests.keyed._budget import keyed_counts


def _write_inputs(tmp_path: Path, fmt: str = "parquet") -> tuple[Path, Path]:
    rng = np.random.default_rng(7)
    n = 2000
    events = pd.DataFrame(
        {
            "day": (
                pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 20, n), "D")
            ).strftime("%Y-%m-%d"),
            "product": rng.choice(["a", "b", "c", "other"], n),
            "qty": rng.integers(0, 3, n),
        }
    )
    path = tmp_path / f"events.{fmt}"
    if fmt == "parquet":
        events.to_parquet(path)
    else:
        events.to_csv(path, index=False)
    keys = tmp_path / "products.txt"
    keys.write_text("a\nb\nc\n")
    return path, keys


def _argv(events: Path, keys: Path, tmp_path: Path, out: str = "counts.parquet") -> list[str]:
    return [
        "keyed", str(events), "--time-column", "day", "--key-column", "product",
        "--keys", str(keys), "--step", "1D", "--epsilon", "1", "--noise", "discrete-laplace",
        "--secret", str(tmp_path / "run.key"), "--output", str(tmp_path / out),
    ]  # fmt: skip


@pytest.mark.parametrize(("fmt", "out"), [("parquet", "counts.parquet"), ("csv", "counts.csv")])
def test_cli_releases_what_the_library_releases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, out: str
) -> None:
    events, keys = _write_inputs(tmp_path, fmt)
    assert main(_argv(events, keys, tmp_path, out)) == 0
    err = capsys.readouterr().err
    for needle in (
        "keys: 3, steps: 20",
        "unknown key",
        "guarantee: epsilon=1-DP",
        "exact error",
        "(new secret)",
        "taken from the data",
    ):
        assert needle in err, needle
    secret_path = tmp_path / "run.key"
    assert stat.S_IMODE(os.stat(secret_path).st_mode) == 0o600
    got = pd.read_parquet(tmp_path / out) if fmt == "parquet" else pd.read_csv(tmp_path / out)
    assert list(got.columns) == ["key", "step", "time", "private_count", "std"]
    frame = pd.read_parquet(events) if fmt == "parquet" else pd.read_csv(events)
    config = RunSecret.load(secret_path, _stored_config(secret_path))
    lib = keyed_counts(
        frame,
        keys=["a", "b", "c"],
        time_column="day",
        key_column="product",
        step="1D",
        epsilon=1.0,
        secret=config,
    ).frame
    assert lib is not None
    assert got["private_count"].tolist() == lib["private_count"].tolist()
    assert got["key"].astype(str).tolist() == lib["key"].tolist()
    if fmt == "csv":  # --digits 4 by default; Parquet keeps the float
        assert got["std"].tolist() == [float(f"{s:.4g}") for s in lib["std"]]
    else:
        assert np.allclose(got["std"], lib["std"], rtol=1e-15)
    assert got["time"].astype(str).iloc[0] == "2024-01-01"


def _stored_config(secret_path: Path) -> dict[str, object]:
    import json

    return dict(json.loads(secret_path.read_text())["config"])


def test_subtract_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events, keys = _write_inputs(tmp_path)
    flags = ["--mechanism", "kary", "--k", "3", "--subtract"]
    assert main([*_argv(events, keys, tmp_path), *flags]) == 0
    assert "KaryTree(horizon=20, k=3, subtract=True" in capsys.readouterr().err
    line = one_line_error(capsys, [*_argv(events, keys, tmp_path, "x.parquet"), "--k", "3"])
    assert "k and subtract are options of the k-ary tree" in line


def test_mechanism_flag_blt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events, keys = _write_inputs(tmp_path)
    flags = ["--mechanism", "blt", "--noise", "gaussian", "--delta", "1e-6"]
    assert main([*_argv(events, keys, tmp_path), *flags]) == 0
    err = capsys.readouterr().err
    assert "BLT(horizon=20, buffers=" in err
    line = one_line_error(
        capsys, [*_argv(events, keys, tmp_path, "x.parquet"), "--mechanism", "blt"]
    )
    assert "--noise discrete-laplace is not available for BLT" in line


def test_rerun_writes_identical_bytes_and_no_temp_files(tmp_path: Path) -> None:
    events, keys = _write_inputs(tmp_path)
    argv = _argv(events, keys, tmp_path)
    assert main(argv) == 0
    first = (tmp_path / "counts.parquet").read_bytes()
    assert main(argv) == 0
    assert (tmp_path / "counts.parquet").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "counts.parquet", "events.parquet", "products.txt", "run.key", "run.key.lock",
        "run.key.released",
    ]  # fmt: skip


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("dpcount: error: "), err
    return lines[0]


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def test_bad_input_is_one_line_naming_the_thing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, keys = _write_inputs(tmp_path)
    argv = _argv(events, keys, tmp_path)
    assert "time column 'when' not found" in one_line_error(
        capsys, _replace(argv, "--time-column", "when")
    )
    assert "keys file" in one_line_error(capsys, _replace(argv, "--keys", str(tmp_path / "no")))
    assert "events file" in one_line_error(capsys, [*argv[:1], str(tmp_path / "x.csv"), *argv[2:]])
    bad = tmp_path / "bad.csv"
    bad.write_text("day,product,qty\n2024-01-01,a,1\nyesterday,b,2\n")
    assert f"unparseable time 'yesterday' in column 'day' (line 3 of {bad})" in one_line_error(
        capsys, [*argv[:1], str(bad), *argv[2:]]
    )
    neg = tmp_path / "neg.csv"
    neg.write_text("day,product,qty\n2024-01-01,a,1\n2024-01-02,b,-2\n")
    line = one_line_error(capsys, [*argv[:1], str(neg), *argv[2:], "--weight-column", "qty"])
    assert "negative weight -2.0 in column 'qty' (line 3)" in line
    assert "must end in .csv or .parquet" in one_line_error(
        capsys, _replace(argv, "--output", str(tmp_path / "out.json"))
    )
    assert "argument --noise: invalid choice: 'uniform'" in one_line_error(
        capsys, [*argv, "--noise", "uniform"]
    )
    # nothing was released by the failed runs
    assert not (tmp_path / "counts.parquet").exists()


def test_secret_file_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events, keys = _write_inputs(tmp_path)
    argv = _argv(events, keys, tmp_path)
    assert main(argv) == 0
    capsys.readouterr()
    secret = tmp_path / "run.key"
    os.chmod(secret, 0o640)
    line = one_line_error(capsys, argv)
    assert f"secret file {secret} has permissions 0640" in line
    os.chmod(secret, 0o600)
    line = one_line_error(capsys, _replace(argv, "--epsilon", "2"))
    assert "belongs to another run" in line and "epsilon" in line
    line = one_line_error(capsys, _replace(argv, "--keys", str(_other_keys(tmp_path))))
    assert "belongs to another run" in line and "keys_sha256" in line


def _other_keys(tmp_path: Path) -> Path:
    p = tmp_path / "other.txt"
    p.write_text("a\nb\n")
    return p


def test_missing_extra_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    events, keys = _write_inputs(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    line = one_line_error(capsys, _argv(events, keys, tmp_path))
    assert "needs the 'keyed' extra (pyarrow is missing)" in line


def test_state_flag_resumes_across_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Day files released one run at a time equal one run; old events are refused."""
    events, keys = _write_inputs(tmp_path)
    frame = pd.read_parquet(events)
    argv = [*_argv(events, keys, tmp_path), "--start", "2024-01-01", "--horizon", "20"]
    state = ["--state", str(tmp_path / "run.state")]
    days = [("2024-01-01", "2024-01-12", 12), ("2024-01-13", "2024-01-20", 20)]
    for i, (lo, hi, until) in enumerate(days):
        part = tmp_path / f"events-{i}.parquet"
        frame[(frame["day"] >= lo) & (frame["day"] <= hi)].to_parquet(part)
        out = str(tmp_path / f"day-{i}.parquet")
        run = [*_replace(_replace(argv, "--output", out), "keyed", "keyed"), *state]
        run[1] = str(part)
        assert main([*run, "--until", str(until)]) == 0
    assert f"state saved to {tmp_path / 'run.state'}" in capsys.readouterr().err
    # the oracle: one run over all steps with a copy of the secret and a fresh mark
    # (the secret's own mark refuses releasing steps 1..20 again)
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy2(tmp_path / "run.key", twin / "run.key")
    copy = RunSecret.load(twin / "run.key", _stored_config(twin / "run.key"))
    ReleaseMark.new(copy).save(mark_path(twin / "run.key"), copy)
    oracle = _replace(argv, "--output", str(tmp_path / "all.parquet"))
    assert main(_replace(oracle, "--secret", str(twin / "run.key"))) == 0
    capsys.readouterr()
    got = pd.concat(
        [pd.read_parquet(tmp_path / f"day-{i}.parquet") for i in range(2)], ignore_index=True
    ).sort_values(["key", "step"], kind="stable")
    want = pd.read_parquet(tmp_path / "all.parquet")
    assert got["private_count"].tolist() == want["private_count"].tolist()
    line = one_line_error(capsys, [*argv, *state, "--until", "20"])  # all released already
    assert "all 20 steps (the horizon) are already released" in line


def test_continuous_noise_is_noted_like_dpcount_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18 item 4: the same note as ``dpcount count`` and a line in the summary."""
    events, keys = _write_inputs(tmp_path)
    argv = _replace(_argv(events, keys, tmp_path), "--noise", "laplace")
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "note: --noise laplace adds continuous floating-point noise" in err
    assert "(floating-point noise: values snapped to a power-of-two grid, a float-safety" in err
    assert "note: laplace noise is continuous (floating point)" in err
    other = _replace(_argv(events, keys, tmp_path, "d.parquet"), "--secret", str(tmp_path / "x"))
    assert main(other) == 0
    assert "floating-point noise" not in capsys.readouterr().err  # discrete: no note


def test_help_names_both_key_sets(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 item 7: keys need not be a public universe (an open key set is
    selected privately), in the command's help and in ``dpcount --help``."""
    for argv in (["keyed", "--help"], ["--help"]):
        assert main(argv) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "every key of a public universe" not in text
        assert "for the keys of --keys, or for keys selected privately from the data" in text


def test_unit_column_help_and_guarantee_say_one_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18 item 10: the unit column protects a unit within one step only."""
    assert main(["keyed", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "bounding each unit within ONE step" in text
    assert "a unit active at n steps is protected at n times the budget" in text
    events, keys = _write_inputs(tmp_path)
    argv = [*_argv(events, keys, tmp_path), "--unit-column", "qty", "--max-keys", "2"]
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "within ONE step (a unit active at n steps is protected at n times" in err
