"""``dpcount count`` defaults (issue 13, items 4 and 12): ``--mechanism auto`` is what
``dpcount plan`` recommends, and ``--checkpoint`` saves by time, not after every row,
leaving no lock file behind."""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dpcount
from dpcount._cli import _durable
from dpcount.analysis.compare import compare
from dpcount.cli import main
from dpcount.counting import KaryTree
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.durable import output as durable_output
from dpcount.privacy import Budget

SRC = str(Path(dpcount.__file__).resolve().parents[1])
ENTRY = Path(sys.executable).parent / "dpcount"


def released(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return (
        np.array([float(r["private_count"]) for r in rows]),
        np.array([float(r["std"]) for r in rows]),
    )


# -- --mechanism auto ---------------------------------------------------------------------------


def test_auto_is_plans_choice_for_integer_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    T = 300
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{i % 5}\n" for i in range(T)))
    out = tmp_path / "o.csv"
    argv = ["count", str(src), "--epsilon", "1", "--seed", "2", "--digits", "17"]
    assert main([*argv, "--output", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    # plan's best among the mechanisms taking integer noise (the safe default)
    best = next(
        r for r in compare(T, budget=Budget(epsilon=1.0)) if r.mechanism in DISCRETE_CAPABLE
    )
    budget = Budget(epsilon=1.0, noise="discrete-laplace")
    mech = build_mechanism(
        best.mechanism, budget=budget, horizon=T, rng=2, k=best.k, subtract=best.subtract
    )
    values, std = released(out)
    np.testing.assert_array_equal(std, np.sqrt(mech.variances()))
    np.testing.assert_array_equal(values, mech.release(np.arange(T) % 5))
    assert "chosen by --mechanism auto" in err
    # better than the old fixed default (k = 19), by its exact MSE
    assert mech.mse() < KaryTree(T, epsilon=1.0, noise="discrete-laplace").mse()


def test_auto_is_plans_first_row_for_fractional_data(tmp_path: Path) -> None:
    T = 309  # the length of the sunspots series
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{(i * 7.3) % 100:.1f}\n" for i in range(T)))
    out = tmp_path / "o.csv"
    assert main(["count", str(src), "--epsilon", "1", "--digits", "17", "--output", str(out)]) == 0
    best = compare(T, budget=Budget(epsilon=1.0))[0]
    _, std = released(out)
    np.testing.assert_array_equal(std, np.sqrt(best.build(rng=0).variances()))
    assert math.sqrt(best.mse) < math.sqrt(KaryTree(T, epsilon=1.0).mse())


def test_auto_with_delta_and_named_noise_stays_in_that_family(tmp_path: Path) -> None:
    T = 1000
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{i % 2}\n" for i in range(T)))
    out = tmp_path / "o.csv"
    argv = ["count", str(src), "--epsilon", "0.5", "--delta", "1e-6", "--noise", "gaussian"]
    assert main([*argv, "--digits", "17", "--output", str(out)]) == 0
    best = next(
        r for r in compare(T, budget=Budget(epsilon=0.5, delta=1e-6)) if r.noise == "gaussian"
    )
    _, std = released(out)
    np.testing.assert_allclose(std, np.sqrt(best.build(rng=0).variances()), rtol=1e-15)


def test_auto_refuses_tree_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n")
    assert main(["count", str(src), "--epsilon", "1", "--k", "4"]) == 2
    assert "pass --mechanism kary with them" in capsys.readouterr().err


# -- checkpoint cadence -----------------------------------------------------------------------


def _count_saves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    saves: list[int] = []
    real = _durable.save_stream

    def counting(stream: object, *a: object, **kw: object) -> None:
        saves.append(stream.step)  # type: ignore[attr-defined]
        real(stream, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_durable, "save_stream", counting)
    return saves


def test_default_checkpoint_cadence_is_bounded_by_time_not_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 5_000
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(n)))
    saves = _count_saves(monkeypatch)
    batch = 2_000  # MAX_BATCH (10 000) scaled with the rows: at least two saves
    monkeypatch.setattr(durable_output, "MAX_BATCH", batch)
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--seed", "4"]
    start = time.monotonic()
    ck = ["--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "o.csv")]
    assert main([*argv, *ck]) == 0
    elapsed = time.monotonic() - start
    # one save per started second (default --checkpoint-seconds 1), at most, plus the
    # last one and the MAX_BATCH cap; the old default saved once per row (5 000 times)
    assert 2 <= len(saves) <= math.ceil(elapsed) + n // batch + 1, (saves, elapsed)
    assert saves[-1] == n
    # the same lines as a plain live run with the same seed
    monkeypatch.setattr(sys, "stdin", io.StringIO(src.read_text()))
    plain = ["count", "-", "--mechanism", "kary", "--epsilon", "1", "--seed", "4"]
    assert main([*plain, "--horizon", str(n), "--output", str(tmp_path / "p.csv")]) == 0
    assert (tmp_path / "o.csv").read_text() == (tmp_path / "p.csv").read_text()


@pytest.mark.parametrize("extra", [["--checkpoint-seconds", "0"], ["--checkpoint-every", "1"]])
def test_every_step_can_still_be_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(40)))
    saves = _count_saves(monkeypatch)
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1", "--seed", "4"]
    argv += ["--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "o.csv")]
    assert main([*argv, *extra]) == 0
    assert saves == list(range(1, 41))


def test_checkpoint_seconds_needs_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n")
    assert main(["count", str(src), "--epsilon", "1", "--checkpoint-seconds", "5"]) == 2
    assert "--checkpoint-seconds needs --checkpoint FILE" in capsys.readouterr().err
    argv = ["count", str(src), "--epsilon", "1", "--checkpoint", str(tmp_path / "ck")]
    argv += ["--output", str(tmp_path / "o.csv"), "--checkpoint-seconds", "nan"]
    assert main(argv) == 2
    assert "--checkpoint-seconds must be a number >= 0, got nan" in capsys.readouterr().err


def test_no_lock_file_is_left_after_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1", "--seed", "1"]
    argv += ["--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "o.csv")]
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "o.csv", "x.csv"]
    src.write_text("1\n0\n2\n")  # other data: refused, and still no lock file
    assert main(argv) == 2
    assert "differ from those checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "ck.lock").exists()


def test_a_paused_live_stream_is_delivered_without_waiting_for_more(tmp_path: Path) -> None:
    """The installed entry point, fed three rows and then nothing: the three lines reach
    the output (and the checkpoint) while dpcount still waits for row four."""
    out, ck = tmp_path / "o.csv", tmp_path / "ck"
    cmd = [str(ENTRY)] if ENTRY.exists() else [sys.executable, "-m", "dpcount"]
    argv = ["count", "-", "--horizon", "100", "--mechanism", "binary", "--epsilon", "1"]
    argv += ["--checkpoint-seconds", "3600", "--checkpoint", str(ck), "--output", str(out)]
    proc = subprocess.Popen(
        [*cmd, *argv],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write("1\n0\n1\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) == 4:
                break
            time.sleep(0.05)
        assert out.read_text().splitlines()[-1].startswith("3,")
        assert proc.poll() is None  # still running, waiting for input
        assert (tmp_path / "ck.lock").exists()  # held while it runs
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
    assert proc.returncode == 0, err
    assert not (tmp_path / "ck.lock").exists()


@pytest.mark.parametrize("name", ["blt", "toeplitz"])
def test_gaussian_only_mechanisms_default_to_gaussian_noise(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --noise: the class default (Gaussian), not Laplace (which they refuse)."""
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 2}\n" for i in range(32)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", name, "--epsilon", "1", "--seed", "3"]
    assert main([*argv, "--delta", "1e-6", "--digits", "17", "--output", str(out)]) == 0
    assert "using continuous gaussian noise" in capsys.readouterr().err
    _, std = released(out)
    mech = build_mechanism(
        name, budget=Budget(epsilon=1.0, delta=1e-6, noise="gaussian"), horizon=32, rng=0
    )
    np.testing.assert_allclose(std, np.sqrt(mech.variances()), rtol=1e-12)
    assert main(argv) == 2  # no --delta: a clear error naming it
    err = capsys.readouterr().err
    assert f"--mechanism {name} uses Gaussian noise" in err and "needs --delta" in err


def test_build_mechanism_uses_the_class_default_noise() -> None:
    m = build_mechanism("blt", budget=Budget(epsilon=1.0, delta=1e-6), horizon=16, rng=0)
    assert m.budget.noise is not None and m.budget.noise.value == "gaussian"
    with pytest.raises(ValueError, match="delta must be given for mechanism 'toeplitz'"):
        build_mechanism("toeplitz", budget=Budget(epsilon=1.0), horizon=16, rng=0)
    # a Gaussian-default mechanism that also takes Laplace: pure DP gives Laplace
    pure = build_mechanism("sqrt", budget=Budget(epsilon=1.0), horizon=16, rng=0)
    assert pure.budget.noise is not None and pure.budget.noise.value == "laplace"
