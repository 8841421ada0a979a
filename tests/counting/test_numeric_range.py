"""Audit findings 4 and 7: no running sum leaves the exact float64 range, no inf is
released, integers beyond 2^53 are refused on every input path, and the live CLI
prints integer releases as ints.

Each test fails on the code before the fix (checked against the main branch).
"""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpcount._validate import MAX_EXACT_SUM
from dpcount.cli import main
from dpcount.counting import FactorizationMechanism, KaryTree, SqrtFactorization
from dpcount.counting._steps import check_running_sums
from dpcount.io import CSVError, SeriesReader
from dpcount.privacy import ZeroNoise

BIG = 2**53 + 1


def _mechanisms() -> list[KaryTree | SqrtFactorization]:
    return [
        KaryTree(300, epsilon=1.0, rng=0),
        SqrtFactorization(300, epsilon=1.0, delta=1e-6, rng=0),
    ]


# -- finding 4: running sums beyond 2^53 are refused, naming the step ------------------


def test_reproducer_prefix_sum_2_60_is_refused() -> None:
    """Before: with a prefix sum of 2^60, x_129 = 128 vs 129 released 0.0 vs 256.0 above
    2^60 (the noise was rounded away): a deterministic, non-private difference."""
    x = np.zeros(200)
    x[0], x[128] = 2.0**60, 128.0
    with pytest.raises(
        ValueError, match=r"x: the running sum at step 1 reaches 1\.15\d+e\+18, beyond ±2\^53"
    ):
        KaryTree(200, epsilon=1, rng=0).release(x)


@pytest.mark.parametrize("path", ["release", "update_many", "update"])
def test_running_sum_crossing_2_53_is_refused_at_its_step(path: str) -> None:
    # Each step is small and exact; the sum crosses 2^53 at step 3.
    x = np.array([2.0**52, 2.0**52 - 1, 1.0, 5.0])
    for mech in _mechanisms():
        if path == "release":
            with pytest.raises(ValueError, match=r"^x: the running sum at step 3 reaches"):
                mech.release(x)
        elif path == "update_many":
            s = mech.stream()
            s.update_many(x[:1])
            with pytest.raises(ValueError, match=r"^xs: the running sum at step 3 reaches"):
                s.update_many(x[1:])
            assert s.step == 1  # the refused block is not consumed
        else:
            s = mech.stream()
            s.update(x[0])
            s.update(x[1])
            with pytest.raises(ValueError, match=r"^x: the running sum at step 3 reaches"):
                s.update(x[2])
            assert s.step == 2
            assert np.isfinite(s.update(-5.0))  # a refused step is not consumed


def test_vector_steps_are_checked_per_coordinate() -> None:
    x = np.array([[1.0, 2.0**52], [2.0, 2.0**52]])
    with pytest.raises(ValueError, match=r"running sum at step 2 \(coordinate 1\)"):
        KaryTree(4, epsilon=1.0, rng=0).release(x)
    s = KaryTree(4, epsilon=1.0, rng=0).stream()
    s.update(x[0])
    with pytest.raises(ValueError, match=r"running sum at step 2 \(coordinate 1\)"):
        s.update(x[1])


def test_largest_exact_sums_are_released_exactly() -> None:
    """Integer data just inside the bound: the zero-noise release equals the exact sums
    (computed with Python ints), at every step, on both signs."""
    top = 2**53 - 1
    steps = [2**52, 2**52 - 5, 4, -(2**53 - 2), -(2**53 - 2), 2**52 + 3]
    exact = np.cumsum(np.array(steps, dtype=object))
    assert max(abs(int(v)) for v in exact) == top
    mech = KaryTree(8, epsilon=1.0, rng=0).with_sampler(ZeroNoise())
    got = mech.release(np.array(steps, dtype=np.float64))
    assert [int(v) for v in got] == list(exact)
    s = mech.stream()
    assert [int(s.update(float(v))) for v in steps] == list(exact)


def test_check_running_sums_boundary() -> None:
    check_running_sums("x", np.array([MAX_EXACT_SUM - 1, -(MAX_EXACT_SUM - 1)]))
    for bad in (MAX_EXACT_SUM, -MAX_EXACT_SUM, np.inf, -np.inf):
        with pytest.raises(ValueError, match=r"running sum at step 2"):
            check_running_sums("x", np.array([0.0, bad]))


# -- finding 7: no inf released; integers beyond 2^53 refused everywhere -------------------


@pytest.mark.parametrize("path", ["release", "update_many", "update"])
def test_overflowing_sum_is_refused_not_released_as_inf(path: str) -> None:
    """Before: 1e308 twice gave inf with status 0."""
    mech = KaryTree(4, epsilon=1, rng=0)
    with pytest.raises(ValueError, match=r"running sum at step 1 reaches 1e\+308"):
        if path == "release":
            mech.release([1e308, 1e308])
        elif path == "update_many":
            mech.stream().update_many([1e308, 1e308])
        else:
            mech.stream().update(1e308)


def test_cli_overflowing_sum_exits_with_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    out = tmp_path / "out.csv"
    # 1e308 is an integer-valued float beyond 2^53: refused when read.
    src.write_text("1e308\n1e308\n")
    assert main(["count", str(src), "--epsilon", "1", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error:") and "line 1: value 1e308" in err
    # Exact steps whose sum leaves the exact range: refused at the step, nothing inf.
    # (continuous noise; the default integer noise sums in int64, exact to 2^61).
    src.write_text("5e15\n5e15\n")
    argv = ["count", str(src), "--epsilon", "1", "--noise", "laplace", "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpcount: error:") and "running sum at step 2" in err
    assert "inf" not in (out.read_text() if out.exists() else "")


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_huge_sensitivity_is_refused_at_construction(noise: str) -> None:
    """Before: step_sensitivity=1e308 (Laplace) or 1e300 (Gaussian) gave inf variances."""
    delta = None if noise == "laplace" else 1e-6
    sens = 1e308 if noise == "laplace" else 1e300
    with pytest.raises(ValueError, match=r"step_sensitivity=1e\+30\d .* beyond 2\^900"):
        KaryTree(4, epsilon=1.0, delta=delta, noise=noise, step_sensitivity=sens)
    # A large but representable calibration keeps finite variances and releases.
    mech = KaryTree(4, epsilon=1.0, delta=delta, noise=noise, step_sensitivity=1e130, rng=0)
    assert np.isfinite(mech.variances()).all() and np.isfinite(mech.mse())
    assert np.isfinite(mech.release([0.0, 1.0])).all()


def test_cli_huge_sensitivity_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("1\n2\n")
    argv = ["count", str(src), "--epsilon", "1", "--sensitivity", "1e308"]
    assert main([*argv, "--noise", "laplace", "--output", str(tmp_path / "out.csv")]) == 2
    assert "beyond 2^900" in capsys.readouterr().err
    # The default (--mechanism auto, integer noise) refuses it just as clearly: the
    # ranking's exact closed forms meet the scale first.
    assert main([*argv, "--output", str(tmp_path / "out.csv")]) == 2
    assert "beyond 2^900" in capsys.readouterr().err
    argv += ["--mechanism", "kary"]  # a named tree: the integer sampler's own bound
    assert main([*argv, "--output", str(tmp_path / "out.csv")]) == 2
    assert "must be <= 2^40" in capsys.readouterr().err


def test_factorization_rows_of_l_are_bounded() -> None:
    T = 4
    A = np.tril(np.ones((T, T)))
    with pytest.raises(ValueError, match=r"L has a row with sum of squares .* beyond 2\^64"):
        FactorizationMechanism(A * 2.0**40, np.eye(T) / 2.0**40, epsilon=1.0)


@pytest.mark.parametrize(
    "x",
    [
        [BIG, 1.0],
        [1.0, BIG],
        (0.5, BIG),
        [[1.0, 2.0], [BIG, 0.5]],
    ],
)
def test_mixed_lists_with_big_integers_are_refused(x: list[object]) -> None:
    """Before: KaryTree(4, epsilon=1).release([2**53 + 1, 1.0]) rounded 2^53 + 1 silently."""
    mech = KaryTree(4, epsilon=1, rng=0)
    step = 1 + next(i for i, v in enumerate(x) if BIG in (v if isinstance(v, list) else [v]))
    with pytest.raises(ValueError, match=rf"integers of magnitude <= 2\^53 .* step {step} holds"):
        mech.release(x)
    with pytest.raises(ValueError, match=r"integers of magnitude <= 2\^53"):
        mech.stream().update_many(x)


def test_mixed_vector_step_with_big_integer_is_refused() -> None:
    with pytest.raises(ValueError, match=r"integers of magnitude <= 2\^53 .* index 0 holds"):
        KaryTree(4, epsilon=1, rng=0).stream().update([BIG, 1.0])
    # A Fraction is a numbers.Real that float() would round silently.
    with pytest.raises(ValueError, match=r"x must be exactly representable in float64"):
        KaryTree(4, epsilon=1, rng=0).stream().update(Fraction(BIG))


def test_big_floats_and_object_arrays() -> None:
    mech = KaryTree(4, epsilon=1, rng=0)
    # Floats are what they are (no rounding by dpcount); a sum that large is refused.
    with pytest.raises(ValueError, match=r"running sum at step 1"):
        mech.release([1e20, 1.0])
    for arr in (np.array([BIG, 1.0], dtype=object), np.array([BIG, 1], dtype=object)):
        with pytest.raises(TypeError, match=r"x must hold real numbers, got an array of dtype"):
            mech.release(arr)
    with pytest.raises(ValueError, match=r"integers of magnitude <= 2\^53 .* step 2 holds -"):
        mech.release([1.0, -BIG])
    np.testing.assert_array_equal(
        mech.with_sampler(ZeroNoise()).release([2**53 - 2, 1.0]), [2**53 - 2, 2**53 - 1]
    )


@pytest.mark.parametrize(
    "text", ["9007199254740993.0", "9.007199254740993e15", "-9007199254740993.0", "1e20"]
)
def test_csv_float_syntax_beyond_2_53_is_refused(text: str) -> None:
    """Before: 9007199254740993.0 in a CSV was read as 2^53."""
    with pytest.raises(CSVError, match=r"line 2: value .* integer beyond 2\^53"):
        list(SeriesReader(io.StringIO(f"1\n{text}\n")))
    assert list(SeriesReader(io.StringIO("9007199254740992.0\n0.5\n"))) == [
        (1, 2.0**53),
        (2, 0.5),
    ]


def test_cli_csv_float_syntax_beyond_2_53(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("1\n9007199254740993.0\n")
    assert main(["count", str(src), "--epsilon", "1", "--output", str(tmp_path / "o")]) == 2
    assert "line 2: value 9007199254740993.0" in capsys.readouterr().err


# -- finding 7: the live CLI prints integer releases as ints ---------------------------


def test_live_cli_prints_discrete_releases_as_ints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `dpcount count -` printed -8.0 where a file run printed -8."""
    data = "1\n-3\n2\n0\n"
    src = tmp_path / "in.csv"
    src.write_text(data)
    argv = ["--epsilon", "1", "--noise", "discrete-laplace", "--seed", "7", "--horizon", "4"]
    assert main(["count", str(src), *argv, "--output", str(tmp_path / "file.csv")]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(data))
    assert main(["count", "-", *argv, "--output", str(tmp_path / "live.csv")]) == 0
    file_lines = (tmp_path / "file.csv").read_text().splitlines()
    live_lines = (tmp_path / "live.csv").read_text().splitlines()
    assert len(live_lines) == 5
    for line in live_lines[1:]:
        value = line.split(",")[1]
        assert value.lstrip("-").isdigit(), line
    # Same formatting as a file run (the noise differs: batch and stream draw differently).
    assert [len(x.split(",")) for x in live_lines] == [len(x.split(",")) for x in file_lines]
    assert all(x.split(",")[1].lstrip("-").isdigit() for x in file_lines[1:])
