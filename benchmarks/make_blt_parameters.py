"""Regenerate src/dpcount/data/blt_parameters.json (optimized BLT parameters).

For each objective and number of buffers, horizons T = 2^0 … 2^24 are optimized in
increasing order with :func:`dpcount.counting.factorization.optimize.optimize_blt`; besides the
default start, each horizon also starts from the previous horizon's optimum as is
and with its slowest rate halved (the optimizer keeps the best). Deterministic.

Run: ``PYTHONPATH=src python benchmarks/make_blt_parameters.py OBJECTIVES MAX_LOG2 BUFFERS...
[--out FILE]`` (e.g. ``mean,max 24 6 8``); with ``--merge A.json B.json`` it merges
the tables of separate runs into the package file.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from dpcount.counting.factorization.optimize import optimize_blt

OUT = Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data" / "blt_parameters.json"


def warm_starts(decay: list[float], scale: list[float]) -> list[tuple[list[float], list[float]]]:
    theta = np.array(decay)
    slow = theta.copy()
    slow[-1] = np.exp(np.log(theta[-1]) / 2)  # halve the slowest rate
    out = [(decay, scale)]
    if np.all(np.diff(slow) > 0) and slow[-1] < 1:
        out.append((slow.tolist(), scale))
    return out


def optimize_table(
    objectives: list[str], max_log2: int, buffer_counts: list[int], out: Path | None = None
) -> dict:
    table: dict[str, dict[str, dict[str, dict[str, object]]]] = {}
    for objective in objectives:
        table[objective] = {}
        for n in buffer_counts:
            rows: dict[str, dict[str, object]] = {}
            previous = None
            for k in range(max_log2 + 1):
                T = 2**k
                starts = [] if previous is None else warm_starts(*previous)
                r = optimize_blt(T, buffers=n, objective=objective, starts=starts)
                previous = (r.buffer_decay, r.output_scale)
                rows[str(k)] = {
                    "buffer_decay": r.buffer_decay,
                    "output_scale": r.output_scale,
                    "mean_loss": r.mean_loss,
                    "max_loss": r.max_loss,
                    "seconds": round(r.seconds, 2),
                }
                print(objective, n, k, f"{r.loss:.6f}", f"{r.seconds:.1f}s", flush=True)
            table[objective][str(n)] = rows
            if out is not None:  # keep what is done if a later count fails
                write(table, out)
    return table


def write(table: dict, out: Path) -> None:
    out.write_text(
        json.dumps(
            {
                "generated_by": "benchmarks/make_blt_parameters.py",
                "generated": time.strftime("%Y-%m-%d"),
                "loss": "sensitivity-1 Gaussian units, single participation, at T = 2^k",
                "objectives": table,
            },
            indent=1,
        )
        + "\n"
    )


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--merge":
        merged: dict = {}
        for name in args[1:]:
            for objective, by_n in json.loads(Path(name).read_text())["objectives"].items():
                merged.setdefault(objective, {}).update(by_n)
        write(merged, OUT)
        return
    out = OUT
    if "--out" in args:
        i = args.index("--out")
        out = Path(args[i + 1])
        args = args[:i] + args[i + 2 :]
    objectives = args[0].split(",") if args else ["mean", "max"]
    max_log2 = int(args[1]) if len(args) > 1 else 24
    buffer_counts = [int(v) for v in args[2:]] or [6, 8]
    write(optimize_table(objectives, max_log2, buffer_counts, out), out)


if __name__ == "__main__":
    main()
