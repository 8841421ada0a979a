"""Regenerate the dense max-loss optima (T = 2^0 … 2^11) shipped with dpcount.

For each T = 2^k, k = 0…MAX_LOG2 (default 11), runs
:func:`dpcount.counting.factorization.optimize_max.optimize_dense_max` (relative gap 10⁻⁴, started
from the previous horizon's weights interpolated) and writes

* ``src/dpcount/data/dense_max_weights.npy``: the dual weights u of every T, one
  float64 array, T = 1, 2, 4, … concatenated (the factorization is rebuilt from them
  by one tridiagonal eigendecomposition, :func:`dense_max_factors`);
* ``src/dpcount/data/dense_max_optima.json``: per k the exact max and mean loss of the
  causal factorization built from the weights, the certified lower bound
  (:func:`max_loss_lower_bound` of the same weights), iterations and seconds; and
  for T = 2^13, 2^14 (``interpolated_max_lower_bound``) the lower bound of the
  2^12 weights interpolated to T (no optimization there: O(T²) eigenvalues, ≈ 9 s
  at 2^14).

``python benchmarks/make_dense_max_optima.py beyond`` computes the max optimum at
T = 2^12 (beyond the dense mechanism's 2048: its lower bound certifies, its
factorization is not shipped), started from the shipped 2^11 weights interpolated:
``dense_max_weights_4096.npy`` and the json's ``dense_max_optimum_beyond``; measured
2026-12-07: 61 iterations, 777 s on the shared 2-core machine, max loss 11.52196,
lower bound 11.52084 (gap 9.8e-5); then the interpolated bounds.
``python benchmarks/make_dense_max_optima.py bounds`` recomputes only the
interpolated bounds from the shipped 2^12 weights.

Deterministic. Run: ``PYTHONPATH=src python benchmarks/make_dense_max_optima.py
[MAX_LOG2]`` (≈ 5 minutes on the loaded 2-core development machine, most of it T = 2048).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from dpcount.counting.factorization.optimize_max import (
    interpolate_weights,
    max_loss_lower_bound,
    optimize_dense_max,
)

DATA = Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data"
INTERPOLATED_LOG2 = (13, 14)
BEYOND_LOG2 = 12


def add_interpolated_bounds() -> None:
    path = DATA / "dense_max_optima.json"
    data = json.loads(path.read_text())
    u = np.load(DATA / "dense_max_weights_4096.npy")  # T = 2^12
    bounds = {}
    for k in INTERPOLATED_LOG2:
        begin = time.perf_counter()
        bounds[str(k)] = max_loss_lower_bound(interpolate_weights(u, 2**k))
        print(k, f"{bounds[str(k)]:.6f}", f"{time.perf_counter() - begin:.1f}s", flush=True)
    data["interpolated_max_lower_bound"] = bounds
    path.write_text(json.dumps(data, indent=1) + "\n")


def add_beyond() -> None:
    """The max optimum at T = 2^BEYOND_LOG2 from the shipped 2^11 weights."""
    path = DATA / "dense_max_optima.json"
    data = json.loads(path.read_text())
    weights = np.load(DATA / "dense_max_weights.npy")
    T = 1 << BEYOND_LOG2
    r = optimize_dense_max(T, rtol=1e-4, start=interpolate_weights(weights[2047:4095], T))
    print(BEYOND_LOG2, f"{r.loss:.6f}", f"{r.lower_bound:.6f}", f"{r.gap:.2e}", r.iterations,
          f"{r.seconds:.1f}s", flush=True)  # fmt: skip
    np.save(DATA / f"dense_max_weights_{T}.npy", r.weights)
    data["dense_max_optimum_beyond"] = {
        str(BEYOND_LOG2): {
            "max_loss": r.loss,
            "max_lower_bound": r.lower_bound,
            "mean_loss": r.mean_loss,
            "iterations": r.iterations,
            "seconds": round(r.seconds, 2),
            "weights": f"dense_max_weights_{T}.npy",
            "generated": time.strftime("%Y-%m-%d"),
        }
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    add_interpolated_bounds()


def main() -> None:
    if sys.argv[1:] == ["bounds"]:
        add_interpolated_bounds()
        return
    if sys.argv[1:] == ["beyond"]:
        add_beyond()
        return
    max_log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    rows: dict[str, dict[str, float | int]] = {}
    weights: list[np.ndarray] = []
    u = None
    for k in range(max_log2 + 1):
        T = 2**k
        r = optimize_dense_max(T, rtol=1e-4, start=None if u is None else interpolate_weights(u, T))
        u = r.weights
        weights.append(u)
        rows[str(k)] = {
            "max_loss": r.loss,
            "max_lower_bound": r.lower_bound,
            "mean_loss": r.mean_loss,
            "iterations": r.iterations,
            "seconds": round(r.seconds, 2),
        }
        print(k, f"{r.loss:.6f}", f"{r.lower_bound:.6f}", f"{r.gap:.2e}", r.iterations,
              f"{r.seconds:.1f}s", flush=True)  # fmt: skip
    np.save(DATA / "dense_max_weights.npy", np.concatenate(weights))
    (DATA / "dense_max_optima.json").write_text(
        json.dumps(
            {
                "generated_by": "benchmarks/make_dense_max_optima.py",
                "generated": time.strftime("%Y-%m-%d"),
                "loss": "sensitivity-1 Gaussian units, single participation, at T = 2^k",
                "solver": "optimize_dense_max, rtol 1e-4, warm-started from T/2",
                "weights": "dense_max_weights.npy: u for T = 2^0, 2^1, ... concatenated",
                "dense_max_optimum": rows,
            },
            indent=1,
        )
        + "\n"
    )
    if max_log2 == 11:
        add_beyond()  # and the interpolated bounds from its weights


if __name__ == "__main__":
    main()
