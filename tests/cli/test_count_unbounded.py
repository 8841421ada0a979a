"""``dpcount count -`` without --horizon: the unbounded doubling counter, end to end."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting.unbounded import UnboundedCounter
from tests.cli.test_count import read_out


def _stdin(monkeypatch: pytest.MonkeyPatch, rows: list[int]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{v}\n" for v in rows)))


def test_stdin_without_horizon_releases_the_unbounded_counter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [i % 3 for i in range(70)]  # blocks 0..6
    _stdin(monkeypatch, rows)
    out = tmp_path / "out.csv"
    argv = ["count", "-", "--mechanism", "binary", "--epsilon", "1", "--seed", "4"]
    assert main([*argv, "--digits", "17", "--output", str(out)]) == 0
    data = read_out(out)
    # the same counter, same seed and the CLI's default integer noise, by the library
    counter = UnboundedCounter(inner="binary", epsilon=1.0, noise="discrete-laplace", rng=4)
    stream = counter.stream()
    want = [stream.update(v) for v in rows]
    np.testing.assert_array_equal(data[:, 0], np.arange(1, 71))
    np.testing.assert_array_equal(data[:, 1], want)
    np.testing.assert_array_equal(data[:, 2], [counter.std_at(t) for t in range(1, 71)])
    assert data[0, 2] < data[-1, 2]  # the error grows with t
    err = capsys.readouterr().err
    assert "UnboundedCounter(inner=binary" in err and "grows with t" in err
    assert "block i" in err and "every prefix" in err


def test_auto_chooses_the_inner_by_exact_variance_at_2_16(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, [1, 0, 1])
    out = tmp_path / "out.csv"
    assert main(["count", "-", "--epsilon", "1", "--seed", "1", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    variances = {
        name: UnboundedCounter(inner=name, epsilon=1.0, noise="discrete-laplace").variance_at(2**16)
        for name in ("binary", "kary", "honaker")
    }
    best = min(variances, key=variances.__getitem__)
    assert f"UnboundedCounter(inner={best}" in err and "lowest exact variance" in err
    assert len(read_out(out)) == 3


def test_fractional_row_under_default_integer_noise_names_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0.5\n"))
    assert main(["count", "-", "--epsilon", "1", "--mechanism", "binary"]) == 2
    assert "--noise laplace" in capsys.readouterr().err


def test_checkpointed_unbounded_run_resumes_and_matches_the_plain_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stdin without --horizon with --checkpoint: the producer stops at 6 and 13 rows
    and re-sends; the output equals the plain unbounded run's, line for line."""
    rows = [(3 * i) % 4 for i in range(40)]
    base = ["count", "-", "--mechanism", "binary", "--epsilon", "1", "--seed", "9"]
    _stdin(monkeypatch, rows)
    assert main([*base, "--output", str(tmp_path / "plain.csv")]) == 0
    argv = [*base, "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out.csv")]
    for n in (6, 13, 40):
        _stdin(monkeypatch, rows[:n])
        assert main([*argv, "--checkpoint-every", "4"]) == 0
    assert (tmp_path / "out.csv").read_text() == (tmp_path / "plain.csv").read_text()
    # a fixed-horizon run refuses this checkpoint, and the other way round
    _stdin(monkeypatch, rows)
    assert main([*argv, "--horizon", "64"]) == 2


def test_gaussian_without_horizon_runs_the_horizon_free_blt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--noise gaussian`` without --horizon: auto takes the horizon-free BLT (bounded
    state); the output is the library's stream with the same seed."""
    rows = [i % 3 for i in range(20)]
    _stdin(monkeypatch, rows)
    out = tmp_path / "out.csv"
    argv = ["count", "-", "--epsilon", "1", "--delta", "1e-6", "--noise", "gaussian"]
    assert main([*argv, "--seed", "2", "--digits", "17", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert "UnboundedCounter(inner=horizon-free-blt" in err and "BLT" in err
    counter = UnboundedCounter(
        inner="horizon-free-blt", epsilon=1.0, delta=1e-6, noise="gaussian", rng=2
    )
    stream = counter.stream()
    data = read_out(out)
    np.testing.assert_array_equal(data[:, 1], [stream.update(v) for v in rows])
