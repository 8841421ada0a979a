"""One home for the mechanism choice: ``recommend_mechanism`` is the best by exact MSE
among the mechanisms taking the noise used (checked by building every candidate), and
``dpcount count --mechanism auto`` and ``dpcount.frame`` release the same thing."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from dpcount.analysis import recommend_mechanism
from dpcount.cli import main
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.privacy import Budget, PrivacyWarning

pd = pytest.importorskip("pandas")
from dpcount.frame import private_counts  # noqa: E402


def _all_mses(T: int, eps: float, delta: float | None, noise: str, names: list[str]) -> float:
    """The smallest exact MSE over every registry mechanism in ``names`` (trees over all
    k and both subtract options) built with ``noise``: an independent enumeration."""
    best = np.inf
    for name in names:
        opts: list[dict[str, object]] = [{}]
        if name == "kary":
            opts = [
                {"k": k, "subtract": s} for k, s in itertools.product(range(2, 65), (False, True))
            ]
        for o in opts:
            m = build_mechanism(
                name, budget=Budget(epsilon=eps, delta=delta, noise=noise), horizon=T, rng=0, **o
            )
            best = min(best, m.mse())
    return float(best)


@pytest.mark.parametrize(
    ("T", "eps", "delta"),
    [(40, 1.0, None), (309, 0.5, None), (1000, 2.0, None), (500, 0.5, 1e-8), (365, 1.0, 1e-6)],
)
def test_integer_noise_choice_is_the_exact_minimum(T: int, eps: float, delta: float | None) -> None:
    """Over every integer-noise mechanism and, with delta, both integer noises."""
    rec = recommend_mechanism(T, budget=Budget(epsilon=eps, delta=delta))
    assert rec.noise.startswith("discrete") and rec.mechanism in DISCRETE_CAPABLE
    chosen = build_mechanism(
        rec.mechanism,
        budget=rec.budget(Budget(epsilon=eps, delta=delta)),
        horizon=T,
        rng=0,
        **rec.options(),
    )
    noises = ["discrete-laplace"] + ([] if delta is None else ["discrete-gaussian"])
    best = min(_all_mses(T, eps, delta, noise, sorted(DISCRETE_CAPABLE)) for noise in noises)
    assert chosen.mse() == pytest.approx(best, rel=1e-12)


def test_fractional_data_and_named_noise() -> None:
    rec = recommend_mechanism(309, budget=Budget(epsilon=1.0), whole=False)
    assert not rec.noise.startswith("discrete") and rec.candidate.mse == pytest.approx(
        build_mechanism(
            rec.mechanism,
            budget=rec.budget(Budget(epsilon=1.0)),
            horizon=309,
            rng=0,
            **rec.options(),
        ).mse()
    )
    gauss = recommend_mechanism(500, budget=Budget(epsilon=0.5, delta=1e-6, noise="gaussian"))
    assert gauss.noise == "gaussian" and gauss.candidate.noise == "gaussian"
    with pytest.raises(ValueError, match="delta must be given for noise='discrete-gaussian'"):
        recommend_mechanism(50, budget=Budget(epsilon=1.0, noise="discrete-gaussian"))
    with pytest.raises(ValueError, match="noise must be one of"):
        recommend_mechanism(50, budget=Budget(epsilon=1.0, noise="uniform"))


@pytest.mark.parametrize(
    ("T", "budget", "fractional"),
    [
        (40, ["--epsilon", "1"], False),
        (309, ["--epsilon", "0.5"], True),
        (700, ["--epsilon", "1", "--delta", "1e-6"], False),
        (700, ["--epsilon", "0.5", "--delta", "1e-6"], True),
        (256, ["--epsilon", "1", "--delta", "1e-6", "--noise", "gaussian"], False),
    ],
)
def test_cli_auto_and_frame_auto_release_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], T: int, budget: list[str], fractional: bool
) -> None:
    """Same seed, same data: the same mechanism (repr), the same std and release."""
    x = np.arange(T) % 5 + (0.5 if fractional else 0)
    src, out = tmp_path / "x.csv", tmp_path / "o.csv"
    src.write_text("n\n" + "".join(f"{v}\n" for v in x))
    assert (
        main(
            [
                "count",
                str(src),
                "--column",
                "n",
                *budget,
                "--seed",
                "4",
                "--digits",
                "17",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    err = " ".join(capsys.readouterr().err.split())
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    kw = dict(zip(budget[::2], budget[1::2], strict=True))
    budget = Budget(
        epsilon=float(kw["--epsilon"]),
        delta=None if "--delta" not in kw else float(kw["--delta"]),
        noise=kw.get("--noise"),
    )
    # the CLI's note on stderr is the frame's PrivacyWarning (continuous noise)
    noted = fractional and "--noise" not in kw
    with pytest.warns(PrivacyWarning) if noted else contextlib.nullcontext():
        frame = private_counts(pd.DataFrame({"n": x}), budget=budget, rng=4)
    assert ("note: the data are not all whole numbers" in err) is noted
    assert " ".join(frame.attrs["mechanism"].split()) in err
    np.testing.assert_array_equal([float(r["std"]) for r in rows], frame["std"].to_numpy())
    np.testing.assert_array_equal(
        [float(r["private_count"]) for r in rows], frame["private_count"].to_numpy()
    )


@pytest.mark.slow
def test_skipping_the_gaussian_rows_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where bounds let recommend_mechanism rank the Laplace rows alone, the
    recommendation (mechanism, noise, options, MSE) is the one of the full ranking, and
    so is plan's first row, or (when it needs Gaussian noise) it lies within the
    recommendation's bounds; the grid has cases on every side of each bound."""
    from dpcount.analysis import recommend

    # δ = 1e-2: the exact discrete-Gaussian trees decide the integer choice; ε = 8 (and
    # 16): the normalized square root's ceiling, not the BLT's, bounds plan's first row
    grid = [
        *itertools.product((1, 7, 100, 1000), (0.1, 1.0, 4.0), (1e-10, 1e-3, 1e-2), (1.0, 3.0)),
        *itertools.product((7, 100, 1000), (8.0,), (1e-2, 0.1), (1.0, 3.0)),
        (100, 16.0, 1e-3, 1.0),
        (100, 1.0, 0.1, 1.0),
    ]
    used = bounded = dg = 0
    labels = set()
    for T, eps, delta, step in grid:
        budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
        fast = recommend_mechanism(T, budget=budget)
        used += recommend._without_gaussian_rows(T, budget) is not None
        with monkeypatch.context() as patch:
            patch.setattr(recommend, "_without_gaussian_rows", lambda *args: None)
            full = recommend_mechanism(T, budget=budget)
        case = (T, eps, delta, step)
        if fast.gaussian is None:
            assert full == fast, case
            continue
        bounded += 1
        labels.add(fast.gaussian.label)
        dg += fast.noise == "discrete-gaussian"  # from the trees' Gaussian rows
        assert fast.best is None and full.best is not None, case
        assert full.best.noise == "gaussian", case
        assert fast.gaussian.floor <= full.best.mse <= fast.gaussian.ceiling, case
        assert full == dataclasses.replace(fast, best=full.best, gaussian=None), case
    assert used == len(grid)  # with the normalized square root's ceiling, bounds settle all
    assert 1 <= dg < bounded < used
    assert {"blt", "normalized-sqrt"} <= labels


@pytest.mark.parametrize(
    ("T", "eps", "delta", "step", "largest_k"),
    [
        (100, 1.0, 1e-4, 1.0, 12),
        pytest.param(100, 1.0, 1e-4, 1.0, 64, marks=pytest.mark.slow),
        pytest.param(37, 0.3, 1e-8, 2.0, 64, marks=pytest.mark.slow),
        pytest.param(100, 8.0, 1e-6, 1.0, 64, marks=pytest.mark.slow),  # s < 1
    ],
)
def test_discrete_gaussian_floor_is_below_every_integer_gaussian_tree(
    T: int, eps: float, delta: float, step: float, largest_k: int
) -> None:
    """Both forms of the bound (without calibrating; exact per height: target inf) lie
    below the exact MSE of every tree compare searches (k <= ``largest_k``; the
    quick case stops at 12, the slow ones search all) and Honaker with discrete
    Gaussian noise, each built; the exact form equals their least to 10^-8 (a wrong
    structure figure or height fails it) and the first lies within 10^-5 below the
    lowest continuous-Gaussian tree (e.g. h for sqrt(h) would fail it) when s >= 1."""
    from dpcount.analysis import recommend

    budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
    cheap = recommend._analytic_discrete_gaussian_floor(T, budget, recommend._tree_structures(T))
    exact = recommend._discrete_gaussian_floor(T, budget, np.inf)
    assert recommend._discrete_gaussian_floor(T, budget, 0.0) == (cheap if cheap > 0 else exact)
    trees: list[tuple[str, dict[str, object]]] = [("binary", {}), ("honaker", {})]
    ks = range(2, largest_k + 1)
    trees += [("kary", {"k": k, "subtract": s}) for k in ks for s in (False, True)]
    lowest = {"discrete-gaussian": np.inf, "gaussian": np.inf}
    for noise in lowest:
        for name, options in trees:
            if options.get("k") == 2 and options.get("subtract"):
                continue
            built = build_mechanism(
                name, horizon=T, budget=budget.replace(noise=noise), rng=0, **options
            )
            lowest[noise] = min(lowest[noise], float(built.mse()))
    assert cheap <= exact <= lowest["discrete-gaussian"]
    if largest_k == 64:
        assert exact >= lowest["discrete-gaussian"] * (1 - 1e-8)
    if cheap > 0:
        assert lowest["gaussian"] * (1 - 1e-5) <= cheap <= lowest["gaussian"]
    else:
        assert eps == 8.0  # s < 1: no bound without calibrating


@pytest.mark.parametrize(
    ("T", "eps", "delta", "step"),
    [(100, 1.0, 1e-4, 1.0), (1000, 0.5, 1e-9, 3.0), (1, 8.0, 0.1, 1.0)],
)
def test_gaussian_ceiling_is_just_above_the_blt_row(
    T: int, eps: float, delta: float, step: float
) -> None:
    """The ceiling bounds the exact MSE of the BLT as compare and the registry build it,
    within 10^-5 (a ceiling from the wrong parameters or without the step fails)."""
    from dpcount.analysis import recommend

    budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
    ceiling = recommend._gaussian_ceiling(T, budget)
    assert ceiling is not None and ceiling[1] == "blt"
    exact = build_mechanism("blt", horizon=T, budget=budget.replace(noise="gaussian"), rng=0).mse()
    assert exact <= ceiling[0] <= exact * (1 + 1e-5)


@pytest.mark.parametrize(
    ("T", "eps", "delta", "step"),
    [(100, 8.0, 1e-2, 1.0), (1000, 8.0, 1e-2, 3.0), (7, 4.0, 1e-3, 1.0)],
)
def test_normalized_sqrt_ceiling_is_just_above_its_row(
    T: int, eps: float, delta: float, step: float
) -> None:
    """The normalized square root's ceiling bounds the exact MSE of its row as compare
    and the registry build it, within 10^-5 (without the step, or with the square
    root's unnormalized loss, it fails); where ε = 8, δ = 10^-2 it is below every
    Laplace row, the BLT's is not."""
    from dpcount.analysis import recommend
    from dpcount.analysis.compare import compare

    budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
    ceiling = recommend._normalized_sqrt_ceiling(T, budget)
    assert ceiling is not None and ceiling[1] == "normalized-sqrt"
    built = build_mechanism("normalized-sqrt", horizon=T, budget=budget.replace(noise="gaussian"))
    exact = built.mse()
    assert exact <= ceiling[0] <= exact * (1 + 1e-5)
    if (T, eps) == (100, 8.0):
        rows = compare(T, budget=budget, metric="mse", certificates=False, gaussian=False)
        blt = recommend._gaussian_ceiling(T, budget)
        assert blt is not None and ceiling[0] < rows[0].mse < blt[0]
    assert recommend._normalized_sqrt_ceiling(1025, budget) is None


@pytest.mark.parametrize(
    ("T", "eps", "delta", "step"),
    [(100, 0.1, 1e-2, 1.0), (100, 1.0, 0.1, 3.0), (1000, 0.5, 1e-3, 1.0), (37, 8.0, 1e-2, 1.0)],
)
def test_integer_gaussian_rows_are_compares(T: int, eps: float, delta: float, step: float) -> None:
    """The Gaussian rows of the integer-noise mechanisms without the search over k are
    the ones compare lists (every field), and the k from bounds is best_k's for
    Gaussian noise, with and without subtraction (a k off by one fails it)."""
    from dpcount.analysis import best_k, recommend
    from dpcount.analysis.compare import compare, rank_key

    budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
    for sub in (False, True):
        ks = range(3 if sub else 2, 65)
        full = best_k(T, budget=budget.replace(noise="gaussian"), subtract=sub, k_values=ks)
        assert recommend._gaussian_best_k(T, budget, sub) == full.k
    fast = recommend._integer_gaussian_rows(T, budget)
    rows = compare(T, budget=budget, metric="mse", certificates=False, mechanisms=DISCRETE_CAPABLE)
    assert fast is not None
    assert sorted(fast, key=rank_key) == [r for r in rows if r.noise == "gaussian"]


def test_gaussian_best_k_gives_up_on_a_tie_across_heights() -> None:
    """At T = 7 two heights tie exactly in h·L (their order is the calibration's last
    bits): no k from bounds, and auto ranks the rows (same choice as the full path)."""
    from dpcount.analysis import recommend

    budget = Budget(epsilon=1.0, delta=1e-2)
    assert recommend._gaussian_best_k(7, budget, False) is None
    assert recommend._integer_gaussian_rows(7, budget) is None


def test_gaussian_bounds_are_printed_outward() -> None:
    """auto's reason rounds the lower bound down and the upper one up (so both still
    hold at 4 digits)."""
    from dpcount.analysis.choice import _digits

    assert _digits(7.4050001, down=False) == "7.406"
    assert _digits(7.4059999, down=True) == "7.405"
    assert _digits(123456.0, down=True) == "1.234e+05"
    assert _digits(0.012341, down=False) == "0.01235"
