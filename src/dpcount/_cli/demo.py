"""``dpcount demo``: the main job for a newcomer."""

from __future__ import annotations

import argparse
import math
import time

from rich.table import Table

from dpcount._cli.common import escape, out_console
from dpcount._cli.options import EPSILON, OUTPUT, SEED, add

HELP = "stream a real time series (SEARCHLOGS) through the best tree and the binary tree"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add(p, EPSILON.but(type=float, default=1.0, required=False, help="ε for pure ε-DP (default 1)"))
    p.add_argument("--replicates", type=int, default=200, help="releases used to measure the error")
    add(p, OUTPUT.but(default="dpcount-demo.png", help="PNG plot to write"), SEED)


def run(args: argparse.Namespace) -> int:
    from dpcount.demo import demo_rows, plot_demo

    start = time.perf_counter()
    con = out_console(100)
    x, rows = demo_rows(args.epsilon, args.replicates, args.seed)
    con.print(f"SEARCHLOGS: {len(x)} steps of search-term counts (DPBench), total {int(x.sum())}.")
    con.print(f"Privacy: {escape(rows[0].mechanism.privacy.describe())}")  # type: ignore[union-attr]
    table = Table(
        title=f"Exact vs measured error ({args.replicates} independent releases)",
        caption="height: levels of the tree (a step's count adds or subtracts nodes of "
        "each level); noise scale: the Laplace scale b of every node (variance 2b²); exact RMSE: "
        "from the mechanism's formula, before any release; measured: over the releases "
        "(± its standard error); max σ: the largest exact std of a step; in ±2σ: the share "
        "of released steps within 2 exact σ of the truth",
    )
    columns = ("mechanism", "height", "noise scale", "exact RMSE", "measured RMSE", "max σ")
    for col in (*columns, "in ±2σ"):
        table.add_column(col, justify="right")
    for r in rows:
        m = r.mechanism
        # delta method: se(sqrt(mse)) = se(mse) / (2 sqrt(mse))
        se_rmse = r.measured_se / (2 * math.sqrt(r.measured_mse))
        table.add_row(
            escape(m.name),
            str(m.height),
            f"{m.noise_scale:.4g}",
            f"{math.sqrt(r.exact_mse):.3f}",
            f"{math.sqrt(r.measured_mse):.3f} ± {se_rmse:.3f}",
            f"{r.max_std:.3f}",
            f"{100 * r.coverage:.1f}%",
        )
    con.print(table)
    best, binary = rows
    con.print(
        f"{best.mechanism.name} has {binary.exact_mse / best.exact_mse:.2f}× lower exact MSE "
        "than the binary tree at the same ε."
    )
    try:
        path = plot_demo(x, rows, args.output)
        con.print(f"Plot written to {escape(str(path))}")
    except ImportError:
        con.print(escape("matplotlib is not installed: pip install 'dpcount[plot]' for the plot"))
    con.print(f"Done in {time.perf_counter() - start:.1f} s.")
    return 0
