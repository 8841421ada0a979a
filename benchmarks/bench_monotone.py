"""--monotone on real series: the isotonic fit (plain least squares) against the fit in
the metric of the exact noise covariance (generalized least squares, non-negative steps),
and the raw release. Prints a Markdown table (docs/tutorials/dashboard.md).

Series: the shipped samples (``dpcount sample``): rainy days and snowy days per day in
Seattle 2012-2015 (1461 steps; 259 and 23 events), and the first 1024 steps of
SEARCHLOGS. Mechanisms: what ``dpcount count`` picks for them by default (the k-ary
tree with integer noise) and Honaker's estimator. ε = 1, 10 releases each (seeds 0..9).
Columns: RMSE over steps and releases; the mean over releases of the largest error;
the mean over releases of the final count's error (the tail a dashboard shows).

    python benchmarks/bench_monotone.py
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable

import numpy as np

from dpcount._cli.sample import sample_text
from dpcount.analysis import best_k
from dpcount.counting import CountingMechanism, Honaker, KaryTree
from dpcount.postprocess import gls_fitter, monotone
from dpcount.privacy import Budget

RUNS = 10


def series() -> dict[str, np.ndarray]:
    rows = list(csv.DictReader(io.StringIO(sample_text("weather"))))
    rain = np.array([r["weather"] == "rain" for r in rows], dtype=np.int64)
    snow = np.array([r["weather"] == "snow" for r in rows], dtype=np.int64)
    logs = [int(r["count"]) for r in csv.DictReader(io.StringIO(sample_text("searchlogs")))]
    return {
        "rainy days (1461 steps, 259 events)": rain,
        "snowy days (1461 steps, 23 events)": snow,
        "SEARCHLOGS[:1024]": np.array(logs[:1024]),
    }


def main() -> None:
    print("| series | mechanism | fit | RMSE | mean max error | mean final error |")
    print("|---|---|---|---|---|---|")
    for name, x in series().items():
        truth = np.cumsum(x)
        T = x.size
        k = best_k(T, budget=Budget(epsilon=1.0)).k
        builders: dict[str, Callable[[int], CountingMechanism]] = {
            f"kary k={k}": lambda seed, T=T, k=k: KaryTree(
                T, epsilon=1.0, k=k, noise="discrete-laplace", rng=seed
            ),
            "honaker": lambda seed, T=T: Honaker(
                T, epsilon=1.0, noise="discrete-laplace", rng=seed
            ),
        }
        for label, build in builders.items():
            start = time.perf_counter()
            fit_gls = gls_fitter(build(0), T)
            errors: dict[str, list[np.ndarray]] = {"raw": [], "isotonic": [], "gls": []}
            for seed in range(RUNS):
                raw = np.asarray(build(seed).release(x), dtype=np.float64)
                errors["raw"].append(raw - truth)
                errors["isotonic"].append(monotone(raw) - truth)
                errors["gls"].append(fit_gls(raw) - truth)
            for fit, errs in errors.items():
                e = np.array(errs)
                rmse = math.sqrt(float(np.mean(e**2)))
                worst = float(np.mean(np.abs(e).max(axis=1)))
                final = float(np.mean(np.abs(e[:, -1])))
                print(f"| {name} | {label} | {fit} | {rmse:.2f} | {worst:.2f} | {final:.2f} |")
            print(f"<!-- {label} on {name}: {time.perf_counter() - start:.1f} s -->")


if __name__ == "__main__":
    main()
