"""Command line: count (file and live stdin), demo, and input errors."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting import KaryTree
from dpcount.privacy import Budget


def read_out(path: Path) -> np.ndarray:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return np.array([[float(r["t"]), float(r["private_count"]), float(r["std"])] for r in rows])


def test_count_file_with_header_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("day,cases\n" + "".join(f"{i},{i % 3}\n" for i in range(50)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--column", "cases", "--mechanism", "kary", "--epsilon", "1"]
    argv += ["--seed", "3", "--digits", "17"]
    assert main([*argv, "--output", str(out)]) == 0
    data = read_out(out)
    assert data.shape == (50, 3)
    np.testing.assert_array_equal(data[:, 0], np.arange(1, 51))
    # Integer data: the default is the safe path, discrete Laplace noise, integer output.
    std = np.sqrt(KaryTree(50, epsilon=1.0, noise="discrete-laplace", rng=0).variances())
    np.testing.assert_allclose(data[:, 2], std, rtol=1e-15)
    assert (data[:, 1] == np.round(data[:, 1])).all()
    err = capsys.readouterr().err
    assert "epsilon=1-DP" in err and "MSE" in err
    # The same seed reproduces the release (research use); the seed path is explicit.
    out2 = tmp_path / "out2.csv"
    assert main([*argv, "--output", str(out2)]) == 0
    np.testing.assert_array_equal(read_out(out2), data)


def test_count_headerless_single_column_binary(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("\n".join(["1", "0", "1", "", "1"]) + "\n")
    out = tmp_path / "out.csv"
    assert (
        main(["count", str(src), "--mechanism", "binary", "--epsilon", "2", "--output", str(out)])
        == 0
    )
    assert read_out(out).shape == (4, 3)  # the blank line is not a step


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("x\n1\nabc\n", [], "line 3: could not read 'abc' as a number"),
        ("x\n1\nnan\n", [], "line 3: missing value 'nan' in column 'x' (pass --missing skip"),
        ("a,b\n1,2\n", [], "line 1: found 2 columns; choose one with --column"),
        ("a,b\n1,2\n", ["--column", "c"], "no column named 'c'"),
        ("1\n", ["--epsilon", "-1"], "epsilon must be > 0, got -1.0"),
        ("1\n", ["--noise", "gaussian"], "--delta must be given for --noise gaussian"),
        ("1\n", ["--mechanism", "kary", "--noise", "gaussian"], "--delta must be given for "),
    ],
)
def test_count_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, extra: list[str], message: str
) -> None:
    src = tmp_path / "in.csv"
    src.write_text(content)
    argv = ["count", str(src), "--epsilon", "1", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error:") and message in err
    assert "Traceback" not in err


def test_count_stdin_is_live(tmp_path: Path) -> None:
    """Each input line produces its output line before the next line is written."""
    with subprocess.Popen(
        [sys.executable, "-m", "dpcount", "count", "-", "--horizon", "10", "--epsilon", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "t,private_count,std"
        for t in range(1, 4):
            proc.stdin.write("1\n")
            proc.stdin.flush()
            line = proc.stdout.readline().strip().split(",")
            assert line[0] == str(t)
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_count_stdin_without_horizon_is_unbounded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n"))
    assert main(["count", "-", "--epsilon", "1"]) == 0  # see tests/cli/test_count_unbounded.py
    assert "UnboundedCounter" in capsys.readouterr().err


def test_demo_runs_and_writes_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "demo.png"
    assert main(["demo", "--seed", "1", "--replicates", "50", "--output", str(png)]) == 0
    out = capsys.readouterr().out
    assert "binary" in out and "exact RMSE" in out
    assert png.stat().st_size > 10_000


def _refuse_full_variances(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every O(horizon) exact-error computation raise (finding 8)."""
    from dpcount.counting import base

    def refuse(self: object) -> None:
        raise AssertionError("the CLI computed all horizon variances")

    monkeypatch.setattr(base.CountingMechanism, "variances", refuse)
    for cls in _all_subclasses(base.CountingMechanism):
        if "noise_coefficients" in vars(cls):
            monkeypatch.setattr(cls, "noise_coefficients", refuse)


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


MECHANISM_OPTIONS = {
    "binary": [],
    "kary": [],
    "sqrt": ["--noise", "gaussian", "--delta", "1e-6"],
    "honaker": [],
    "smooth-binary": [],
    "input": [],
}


@pytest.mark.parametrize("mechanism", sorted(MECHANISM_OPTIONS))
def test_live_count_computes_the_std_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """Live mode never builds the horizon-long variance array, and prints the same std."""
    import io

    from dpcount.counting.registry import build_mechanism, default_noise

    horizon, rows = 3000, 40
    options = MECHANISM_OPTIONS[mechanism]
    delta = float(options[-1]) if options else None
    # the CLI's default: integer noise where the mechanism takes it, else laplace
    noise = options[1] if options else (default_noise(mechanism, None) or "laplace")
    budget = Budget(epsilon=1.0, delta=delta, noise=noise)
    mech = build_mechanism(mechanism, budget=budget, horizon=horizon, rng=0, k=19, subtract=True)
    std = np.sqrt(mech.variances()[:rows])
    _refuse_full_variances(monkeypatch)
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{i % 3}\n" for i in range(rows))))
    out = tmp_path / "out.csv"
    argv = ["count", "-", "--mechanism", mechanism, "--epsilon", "1", "--seed", "1", *options]
    assert main([*argv, "--horizon", str(horizon), "--digits", "17", "--output", str(out)]) == 0
    data = read_out(out)
    np.testing.assert_array_equal(data[:, 0], np.arange(1, rows + 1))
    assert data[:, 2].tolist() == std.tolist()


def test_file_count_with_a_large_horizon_computes_the_std_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("x\n1\n0\n1\n")
    std = np.sqrt(KaryTree(10**6, epsilon=1.0, noise="discrete-laplace", rng=0).variances()[:3])
    _refuse_full_variances(monkeypatch)
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", "kary", "--epsilon", "1", "--horizon", str(10**6)]
    argv += ["--digits", "17", "--output", str(out)]
    assert main(argv) == 0
    assert read_out(out)[:, 2].tolist() == std.tolist()


def test_live_count_memory_does_not_grow_with_the_horizon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rows at --horizon 10^7: the old code traced 80 MB (one float64 per step)."""
    import io
    import tracemalloc

    out = tmp_path / "out.csv"
    argv = ["count", "-", "--column", "x", "--epsilon", "1", "--output", str(out)]
    monkeypatch.setattr(sys, "stdin", io.StringIO("x\n1\n0\n"))
    # The same run once untraced: imports and per-scale sampler tables are not the run's.
    assert main([*argv, "--horizon", str(10**7)]) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO("x\n1\n0\n"))
    tracemalloc.start()
    try:
        assert main([*argv, "--horizon", str(10**7)]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(read_out(out)) == 2
    assert peak < 2 * 10**6, peak  # 2.5·10^5 float64 values; the old code needed 10^7


def test_count_with_the_normalized_square_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcount.counting import NormalizedSqrtFactorization

    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(40)))
    out = tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", "normalized-sqrt", "--epsilon", "1"]
    argv += ["--noise", "gaussian", "--delta", "1e-6", "--horizon", "64", "--seed", "1"]
    argv += ["--digits", "17"]
    assert main([*argv, "--output", str(out)]) == 0
    data = read_out(out)
    assert data.shape == (40, 3)
    want = NormalizedSqrtFactorization(64, epsilon=1.0, delta=1e-6).variances()[:40]
    np.testing.assert_allclose(data[:, 2], np.sqrt(want), rtol=1e-15)
    assert "NormalizedSqrtFactorization" in capsys.readouterr().err
    # Gaussian noise only: a Laplace request names the flag.
    bad = ["count", str(src), "--mechanism", "normalized-sqrt", "--epsilon", "1"]
    assert main([*bad, "--noise", "laplace"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error: --noise laplace is not available")
