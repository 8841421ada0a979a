"""Regenerate src/dpcount/data/row_scaled_blt_parameters.json (row-scaled BLT).

For T = 2^k, k = 4 … 24, the encoder is the column-normalized BLT's shipped
mean-optimized BLT (:func:`~dpcount.counting.factorization.normalized_blt.
shipped_normalized_blt_parameters`), and the row weights ln w = Σ_m a_m T_m(y)
(8 Chebyshev coefficients) are fitted by L-BFGS-B (finite-difference gradients,
|a_m| ≤ 5) on the exact losses of
:func:`~dpcount.counting.factorization.row_scaled_blt.row_scaled_blt_losses`
(O(T·n²), no dense matrix), started from the entry at T/2 (zeros at 2^4, i.e. the
column-normalized BLT). Objectives: "mean" (the mean loss) and "max" (a soft maximum,
the 64-norm of the row variances, started from the mean entry; an entry is kept only
if its exact max loss beats the mean entry's). The evaluations per horizon shrink
with T to bound the run time (``BUDGET``); beyond 2^20 the coefficients of 2^20 are
carried over (the weights are a function of t/T) and evaluated. Deterministic.

Run: ``PYTHONPATH=src python benchmarks/make_row_scaled_blt_parameters.py [MAX_LOG2]
[--start-log2 K]`` (``--start-log2`` continues the existing file from 2^K). About
45 minutes to 2^20 and 25 more to 2^24 on the loaded 2-core machine (most of it
waiting for a core: an evaluation at 2^18 is 0.6 s of CPU time).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from datetime import date
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from dpcount.counting.factorization.normalized_blt import shipped_normalized_blt_parameters
from dpcount.counting.factorization.row_scaled_blt import (
    row_scaled_blt_losses,
    row_scaled_blt_noise_coefficients,
)

OUT = Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data"
OUT = OUT / "row_scaled_blt_parameters.json"
TERMS = 8
#: function evaluations allowed per horizon (by log2 T); 0 = carried over, evaluated only
BUDGET = {**dict.fromkeys(range(4, 15), 400), 15: 120, 16: 80, 17: 40, 18: 30, 19: 15, 20: 12}
SOFT_MAX_POWER = 64.0


def objective_value(
    decay: list[float], scale: list[float], a: np.ndarray, T: int, kind: str
) -> float:
    if kind == "mean":
        return row_scaled_blt_losses(decay, scale, a.tolist(), T)[0]
    v = row_scaled_blt_noise_coefficients(decay, scale, a.tolist(), T)
    top = float(v.max())
    return top * float(np.mean((v / top) ** SOFT_MAX_POWER)) ** (1.0 / SOFT_MAX_POWER)


def fit(decay: list[float], scale: list[float], start: np.ndarray, T: int, kind: str, budget: int):
    def f(a: np.ndarray) -> float:
        try:
            value = objective_value(decay, scale, a, T, kind)
        except ValueError:
            return 1e6
        return math.log(value) if math.isfinite(value) and value > 0 else 1e6

    if budget == 0:
        return start
    res = minimize(
        f,
        start,
        method="L-BFGS-B",
        jac="2-point",
        bounds=[(-5.0, 5.0)] * TERMS,
        options={"maxiter": budget, "maxfun": budget, "ftol": 1e-13, "gtol": 1e-9},
    )
    return np.asarray(res.x) if res.fun <= f(start) else start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("max_log2", nargs="?", type=int, default=24)
    parser.add_argument("--start-log2", type=int, default=4)
    opts = parser.parse_args()
    first, max_log2 = opts.start_log2, opts.max_log2
    table: dict = {"mean": {}, "max": {}}
    if first > 4 and OUT.exists():
        table = json.loads(OUT.read_text())["objectives"]
    for k in range(first, max_log2 + 1):
        T = 1 << k
        decay, scale = shipped_normalized_blt_parameters(T, "mean")
        budget = BUDGET.get(k, 0)
        t0 = time.perf_counter()
        for kind in ("mean", "max"):
            prev = table[kind].get(str(k - 1))
            if prev is not None:
                start = np.array(prev["log_weights"])
            elif kind == "max":
                start = np.array(table["mean"][str(k)]["log_weights"])
            else:
                start = np.zeros(TERMS)
            a = fit(decay, scale, start, T, kind, budget)
            entry = {"buffer_decay": decay, "output_scale": scale, "log_weights": a.tolist()}
            mean, largest = row_scaled_blt_losses(decay, scale, a.tolist(), T)
            how = f"L-BFGS-B, <= {budget} evaluations" if budget else f"carried from 2^{k - 1}"
            entry.update(mean_loss=mean, max_loss=largest, how=how)
            if kind == "max" and largest > table["mean"][str(k)]["max_loss"]:
                entry = {**table["mean"][str(k)], "how": "the mean entry (lower max loss)"}
            table[kind][str(k)] = entry
            print(
                f"2^{k} {kind}: mean {entry['mean_loss']:.5f} max {entry['max_loss']:.5f} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
        OUT.write_text(
            json.dumps(
                {
                    "generated_by": "benchmarks/make_row_scaled_blt_parameters.py",
                    "generated": date.today().isoformat(),
                    "loss": "sensitivity-1 Gaussian units, single participation, at T = 2^k",
                    "objectives": table,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
