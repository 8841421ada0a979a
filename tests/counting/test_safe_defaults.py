"""Audit finding 5: the safe path (integer noise) is the default where the data allow it.

With continuous noise the event "|output| < 1/2 and output not a multiple of 2^-53"
has positive probability under x = 0 and probability 0 under its neighbour
x_1 = 1 (there S_t = 1, so an output in (−1/2, 1/2) is fl(1 + noise) with
|noise| ≥ 1/2, a multiple of 2^-53): the low bits reveal x_1. Integer noise on
integer data releases integers, so the event "output not an integer" (which
contains it) has probability 0 under both inputs. Each test below measures the
event for the new default (must be 0 under both neighbours) and for the old
default (must be > 0 under x = 0), with fixed seeds.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcount.analysis import recommend_mechanism
from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    LocalMedianProtocol,
    SubstringCounter,
    edge_count_statistic,
)
from dpcount.cli import main
from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget

TINY = 2.0**-53


def low_bits_event(out: NDArray[np.float64]) -> NDArray[np.bool_]:
    """|output| < 1/2 and output not a multiple of 2^-53 (the audit's event)."""
    out = np.asarray(out, dtype=np.float64)
    return (np.abs(out) < 0.5) & (np.mod(out, TINY) != 0)


def not_integer(out: NDArray[np.float64]) -> NDArray[np.bool_]:
    out = np.asarray(out, dtype=np.float64)
    return out != np.round(out)


NEIGHBOURS = {"zero": np.zeros(16, dtype=np.int64), "x1=1": np.eye(16, dtype=np.int64)[0]}


@pytest.mark.parametrize("name", ["kary", "binary", "honaker"])
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_library_factory_defaults_to_integer_noise(name: str, delta: float | None) -> None:
    mech = build_mechanism(name, budget=Budget(epsilon=1.0, delta=delta), horizon=16, rng=11)
    assert mech.privacy is not None
    assert mech.privacy.noise == ("discrete-laplace" if delta is None else "discrete-gaussian")
    # Honaker's release is fractional (exact rational rounded once): its bits are a
    # function of the noisy node values, tested in test_discrete_postprocessing.py.
    if not mech.integer_release:
        return
    for x in NEIGHBOURS.values():
        # int64 outputs hold no fraction by type: 20 releases (320 outputs) show the
        # type and the event's absence as well as the 300 this test drew before
        outs = np.array([mech.release(x) for _ in range(20)])
        assert outs.dtype == np.int64
        assert not_integer(outs).mean() == 0.0 and low_bits_event(outs).mean() == 0.0


def test_old_library_default_leaks_through_low_bits() -> None:
    """The old default (continuous Laplace) computed as before, ``fl(S_t + noise)`` (a
    :meth:`with_sampler` copy is released unsnapped): the event at step 1 separates the
    neighbours (measured ≈ 0.046 under x = 0 for this tree, 20 000 draws; exactly 0 under
    x_1 = 1). The float-safe release of the same mechanism (issue 30, item 4) snaps every
    value to a power-of-two grid: the event has probability 0 under both."""
    mech = build_mechanism("kary", budget=Budget(epsilon=1.0, noise="laplace"), horizon=16, rng=12)
    raw = mech.with_sampler(mech.sampler)
    # 4000 (400) independent copies of x as the coordinates of one vector release
    rates = {
        label: low_bits_event(raw.release(np.repeat(x[:, None], 4000, axis=1))[0]).mean()
        for label, x in NEIGHBOURS.items()
    }
    assert rates["zero"] > 0.02 and rates["x1=1"] == 0.0
    for x in NEIGHBOURS.values():
        outs = mech.release(np.repeat(x[:, None], 400, axis=1))[0]
        assert outs.shape == (400,) and low_bits_event(outs).mean() == 0.0


def test_factory_keeps_continuous_noise_where_integer_noise_is_impossible() -> None:
    assert (
        build_mechanism("sqrt", budget=Budget(epsilon=1.0, delta=1e-6), horizon=8).privacy.noise
        == "gaussian"
    )
    frac = build_mechanism("kary", budget=Budget(epsilon=1.0, step_sensitivity=0.5), horizon=8)
    assert frac.privacy is not None and frac.privacy.noise == "laplace"
    with pytest.raises(ValueError, match="x must hold whole numbers"):
        build_mechanism("kary", budget=Budget(epsilon=1.0), horizon=8).release([0.5])


def _cli_outputs(
    tmp_path: Path, values: NDArray[np.int64], extra: list[str]
) -> NDArray[np.float64]:
    src = tmp_path / "in.csv"
    src.write_text("n\n" + "".join(f"{v}\n" for v in values.tolist()))
    outs = []
    for seed in range(25):
        out = tmp_path / "out.csv"
        argv = ["count", str(src), "--epsilon", "1", "--seed", str(seed), "--output", str(out)]
        assert main([*argv, *extra]) == 0
        with out.open() as fh:
            outs.append([float(r["private_count"]) for r in csv.DictReader(fh)])
    return np.array(outs)


@pytest.mark.parametrize(
    "extra",
    [
        [],
        pytest.param(["--delta", "1e-6"], marks=pytest.mark.slow),
        ["--mechanism", "honaker"],
        pytest.param(["--mechanism", "kary", "--delta", "1e-6"], marks=pytest.mark.slow),
    ],
)
def test_cli_count_default_is_integer_noise(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for x in NEIGHBOURS.values():
        outs = _cli_outputs(tmp_path, np.tile(x, 8), extra)  # 128 steps x 25 seeds
        # Honaker's exact fraction is rounded to whole numbers (Choice.finish)
        assert not_integer(outs).mean() == 0.0 and low_bits_event(outs).mean() == 0.0
    err = capsys.readouterr().err
    # no note about continuous noise; Honaker's says its estimate is rounded
    rounded = "note: honaker's estimate (an exact weighted average of integer-noised sums) is"
    assert ("honaker" in extra) == (rounded in " ".join(err.split()))
    assert "note:" not in err.replace("note: honaker's estimate", "")
    if "--delta" not in extra:
        assert "discrete Laplace" in err
    elif "--mechanism" in extra:  # a named mechanism with --delta: discrete Gaussian
        assert "discrete Gaussian" in err
    else:  # auto ranks both integer noises by exact MSE (here discrete Laplace wins)
        assert (
            recommend_mechanism(128, budget=Budget(epsilon=1.0, delta=1e-6)).noise
            == "discrete-laplace"
        )
        assert "discrete Laplace" in err and "delta=1e-06" in err


def test_cli_count_old_default_is_float_safe(tmp_path: Path) -> None:
    """The old default (k = 19, continuous Laplace) leaked through the low bits (event
    rate > 0.002 under x = 0, 0 under x_1 = 1); its release is now snapped to a
    power-of-two grid (dpcount.privacy.float_safe): the event is empty under both."""
    old = ["--mechanism", "kary", "--noise", "laplace"]
    zero = _cli_outputs(tmp_path, np.zeros(128, dtype=np.int64), old)
    one = _cli_outputs(tmp_path, np.eye(128, dtype=np.int64)[0], old)
    assert low_bits_event(zero).mean() == 0.0 and low_bits_event(one).mean() == 0.0
    assert np.all(np.mod(zero, 2.0**-8) == 0.0)  # multiples of the grid (≥ 2^-8 here)


def test_cli_count_keeps_continuous_noise_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    src.write_text("n\n1\n0\n")
    for argv, why, kind in [
        # the square root's class default with a delta: Gaussian
        (["--mechanism", "sqrt", "--delta", "1e-6"], "mechanism 'sqrt' does not take integer",
         "gaussian"),
        (["--sensitivity", "0.5"], "--sensitivity 0.5 is not a whole number", "laplace"),
    ]:  # fmt: skip
        assert main(["count", str(src), "--epsilon", "1", *argv, "--output", "-"]) == 0
        err = capsys.readouterr().err.splitlines()
        notes = [line for line in err if line.startswith("note:")]
        assert len(notes) == 1 and why in notes[0] and kind in notes[0]
    src.write_text("n\n1.5\n0\n")
    assert main(["count", str(src), "--epsilon", "1", "--output", "-"]) == 0
    assert "data are not all whole numbers" in capsys.readouterr().err


# -- apps -------------------------------------------------------------------------------------
def _histogram(delta: float | None, noise: str | None, first: int) -> NDArray[np.float64]:
    h = ContinualHistogram(4, 32, epsilon=1.0, delta=delta, noise=noise, rng=21)
    steps = np.zeros((32, 4), dtype=np.int64)
    steps[0, 0] = first
    return np.array([h.with_sampler(h.mechanism.sampler).update_many(steps) for _ in range(60)])


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_histogram_default_releases_integers(delta: float | None) -> None:
    for first in (0, 1):
        outs = _histogram(delta, None, first)
        assert not_integer(outs).mean() == 0.0 and low_bits_event(outs).mean() == 0.0
    old = "laplace" if delta is None else "gaussian"
    assert low_bits_event(_histogram(delta, old, 0)).mean() > 0.0


def test_string_graph_and_local_defaults_release_integers() -> None:
    sub = SubstringCounter("ab", 2, horizon=20, epsilon=1.0, rng=1)
    epi = EpisodeCounter("ab", 2, horizon=20, epsilon=1.0, delta=1e-6, rng=2)
    edges = edge_count_statistic(6, 20, epsilon=1.0, rng=3)
    local = LocalMedianProtocol(50, epsilon=1.0, rng=4)
    assert {sub.noise, edges.noise, local.noise} == {"discrete-laplace"}
    assert epi.noise == "discrete-gaussian"
    outs = [sub.update_many("ab" * 10), epi.update_many("ba" * 10)]
    outs += [np.array([edges.update([(i % 5, 5)] if i < 5 else []) for i in range(20)])]
    outs += list(local.client_messages(np.arange(50) % local.buckets))
    for out in outs:
        assert not_integer(out).mean() == 0.0
    old = LocalMedianProtocol(50, epsilon=1.0, noise="laplace", rng=4)
    raw = old.mechanism.with_sampler(old.mechanism.sampler)  # fl(S + noise), unsnapped
    assert not_integer(raw.release(np.zeros((8, 50)))).mean() > 0.5
    # continuous noise is released float-safe: multiples of its power-of-two grid
    grids = old.mechanism.release_grids(1, old.mechanism.horizon)
    messages = old.client_messages(np.zeros(50, dtype=np.int64))[0]
    assert np.all(np.mod(messages, grids[: messages.shape[-1]]) == 0)  # (clients, steps)
