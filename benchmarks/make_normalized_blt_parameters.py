"""Regenerate src/dpcount/data/normalized_blt_parameters.json (column-normalized BLT).

For each objective ("mean", "max" normalized loss) and T = 2^0 … 2^24 the candidates
are the shipped BLT parameters at T (both objectives, every shipped buffer count) and
the entry chosen at T/2 (beyond 2^21, to bound the run time, only the shipped
max-optimized BLT with the most buffers and the entry chosen at T/2); each is
evaluated with the exact normalized losses
(:func:`dpcount.counting.factorization.normalized_blt.normalized_blt_losses`, O(T·n)) and the best
is kept. For T ≤ 2^12 (``--optimize-max-log2``) the best candidate is then refined
by L-BFGS-B over the BLT parameterization of :mod:`dpcount.counting.factorization.optimize`
(finite-difference gradients, at most 150 iterations), kept only if it improves.
Deterministic.

Run: ``PYTHONPATH=src python benchmarks/make_normalized_blt_parameters.py [MAX_LOG2]
[--optimize-max-log2 K] [--start-log2 K]`` (``--start-log2`` continues the existing
file from 2^K). About 50 minutes on the loaded 2-core machine: ~80 s per horizon for
the refinements at 2^10 … 2^12, then the exact losses (≈ 35 s per candidate at 2^21,
doubling with T).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from dpcount.counting.factorization.blt import _shipped as shipped_blt_table
from dpcount.counting.factorization.blt import check_blt_parameters, shipped_blt_parameters
from dpcount.counting.factorization.normalized_blt import normalized_blt_losses
from dpcount.counting.factorization.optimize import _pack, _unpack

OUT = (
    Path(__file__).resolve().parents[1]
    / "src"
    / "dpcount"
    / "data"
    / "normalized_blt_parameters.json"
)
OBJECTIVES = ("mean", "max")
#: beyond this T = 2^k only two candidates are evaluated (see the module docstring)
LARGE_POOL_MAX_LOG2 = 21


def loss(decay: list[float], scale: list[float], T: int, objective: str) -> float:
    mean, largest = normalized_blt_losses(decay, scale, T)
    return mean if objective == "mean" else largest


def refine(decay: list[float], scale: list[float], T: int, objective: str) -> tuple[list, list]:
    def f(v: np.ndarray) -> float:
        try:
            value = loss(*(a.tolist() for a in _unpack(v)), T, objective)
        except ValueError:  # left the domain in floating point
            return 1e6
        return math.log(value) if math.isfinite(value) and value > 0 else 1e6

    v0 = _pack(*check_blt_parameters(decay, scale))
    res = minimize(f, v0, method="L-BFGS-B", jac="2-point", options={"maxiter": 150})
    theta, omega = check_blt_parameters(*_unpack(np.asarray(res.x)))
    return theta.tolist(), omega.tolist()


def main() -> None:
    args = sys.argv[1:]
    opt_max = 12
    if "--optimize-max-log2" in args:
        i = args.index("--optimize-max-log2")
        opt_max = int(args[i + 1])
        args = args[:i] + args[i + 2 :]
    first = 0
    if "--start-log2" in args:
        i = args.index("--start-log2")
        first = int(args[i + 1])
        args = args[:i] + args[i + 2 :]
    max_log2 = int(args[0]) if args else 24
    counts = sorted({int(n) for o in OBJECTIVES for n in shipped_blt_table()["objectives"][o]})
    table: dict[str, dict[str, dict[str, object]]] = {o: {} for o in OBJECTIVES}
    previous: dict[str, tuple[list[float], list[float]]] = {}
    if first:
        done = json.loads(OUT.read_text())["objectives"]
        for o in OBJECTIVES:
            table[o] = {k: v for k, v in done[o].items() if int(k) < first}
            entry = table[o][str(first - 1)]
            previous[o] = (entry["buffer_decay"], entry["output_scale"])
    for k in range(first, max_log2 + 1):
        T = 2**k
        begin = time.perf_counter()
        if k <= LARGE_POOL_MAX_LOG2:
            pool = [shipped_blt_parameters(T, o, n) for o in OBJECTIVES for n in counts]
        else:
            pool = [shipped_blt_parameters(T, "max", counts[-1])]
        pool += [p for i, p in enumerate(previous.values()) if p not in list(previous.values())[:i]]
        scored = [(normalized_blt_losses(d, s, T), d, s) for d, s in pool]
        for objective in OBJECTIVES:
            col = 0 if objective == "mean" else 1
            (best_losses, decay, scale) = min(scored, key=lambda r: r[0][col])
            how = "best candidate"
            if k <= opt_max and len(decay) and T > 2:
                d2, s2 = refine(decay, scale, T, objective)
                new = normalized_blt_losses(d2, s2, T)
                if new[col] < best_losses[col]:
                    best_losses, decay, scale, how = new, d2, s2, "refined"
            previous[objective] = (list(decay), list(scale))
            table[objective][str(k)] = {
                "buffer_decay": list(decay),
                "output_scale": list(scale),
                "mean_loss": best_losses[0],
                "max_loss": best_losses[1],
                "how": how,
            }
            print(objective, k, f"{best_losses[0]:.4f} {best_losses[1]:.4f}", how, flush=True)
        print(f"  2^{k}: {time.perf_counter() - begin:.1f} s", flush=True)
        write(table)


def write(table: dict) -> None:
    OUT.write_text(
        json.dumps(
            {
                "generated_by": "benchmarks/make_normalized_blt_parameters.py",
                "generated": time.strftime("%Y-%m-%d"),
                "loss": "normalized loss, sensitivity-1 Gaussian units, single participation, "
                "at T = 2^k",
                "objectives": table,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
