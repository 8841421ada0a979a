"""Regenerate src/dpcount/data/factorization_optima.json (dense optima, T = 2^0 … 2^11).

For each T = 2^k, k = 0…MAX_LOG2 (default 11), runs
:func:`dpcount.counting.factorization.optimize.optimize_dense` (mean objective, its default stopping
rule, which stops on a certified duality gap) and records the exact mean loss of
the returned factorization and its max loss (sensitivity² · largest row norm² of the
decoder). dpcount has no dense max-loss
solver, so the max figure is the max loss of the mean-optimal dense factorization: an
achieved value, hence an upper bound on the dense max-loss optimum. Deterministic.

Run: ``PYTHONPATH=src python benchmarks/make_factorization_optima.py [MAX_LOG2]``
(about 40 s in all on the development machine since the certified-gap solver;
``mean_lower_bound`` is its Lagrange-dual lower bound on the dense mean optimum).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from dpcount.counting.factorization.optimize import optimize_dense

OUT = Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data" / "factorization_optima.json"


def main() -> None:
    max_log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    rows: dict[str, dict[str, float | int]] = {}
    for k in range(max_log2 + 1):
        r = optimize_dense(2**k)
        C, B = r.encoder, r.decoder
        sens2 = float(np.max(np.sum(C * C, axis=0)))
        max_loss = sens2 * float(np.max(np.sum(B * B, axis=1)))
        rows[str(k)] = {
            "mean_loss": r.loss,
            "mean_lower_bound": r.lower_bound,
            "max_loss": max_loss,
            "iterations": r.iterations,
            "seconds": round(r.seconds, 2),
        }
        print(k, f"{r.loss:.6f}", f"{max_loss:.6f}", r.iterations, f"{r.seconds:.1f}s", flush=True)
        OUT.write_text(
            json.dumps(
                {
                    "generated_by": "benchmarks/make_factorization_optima.py",
                    "generated": time.strftime("%Y-%m-%d"),
                    "loss": "sensitivity-1 Gaussian units, single participation, at T = 2^k",
                    "solver": "optimize_dense (mean objective), default stopping rule",
                    "dense_mean_optimum": rows,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
