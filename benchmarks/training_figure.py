"""docs/figures/training-digits.png: test accuracy of a private softmax regression on
scikit-learn's digits per noise strategy, at the same (ε, δ).

Runs the code of docs/tutorials/training.md (its first python block: the data split,
the model, ``train``), so the figure is made by the code the tutorial shows.

* the learning rate of each (mechanism, ε) is picked from ``--rates`` by the mean
  final accuracy over ``--tune-seeds`` seeds on a validation split (the last 300 of
  the 1400 training rows; training on the other 1100), *outside* the privacy
  accounting, as is usual in papers;
* then each (mechanism, ε) trains ``--seeds`` times on all 1400 training rows with
  that rate, and the figure shows the mean ± one standard deviation of the test
  accuracy after the last epoch (left) and per epoch at the first ε (right).

Usage: python benchmarks/training_figure.py [--epochs 10] [--batches 10] [--seeds 8]
       [--out docs/figures/training-digits.png]

``--sampling`` instead draws docs/figures/training-digits-sampling.png: the tutorial's
jit-compiled device-noise training (``sampled_privatizer`` / ``train_sampled`` of its
balls-in-bins section) for independent noise (DP-SGD) and BLT, each with fixed batches
and with balls-in-bins sampling (σ from the Monte Carlo certificate), 4 epochs × 25
batches, the learning rate picked per (mechanism, sampling, ε) from ``--rates`` on the
validation split as above, then the mean ± sd test accuracy over ``--seeds`` seeds.

       python benchmarks/training_figure.py --sampling [--seeds 4]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import numpy as np

from dpcount.counting.registry import MECHANISMS as MECHANISM_NAMES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorials" / "training.md"
MECHANISMS = {
    "input": "independent (DP-SGD)",
    "binary": "binary tree",
    "blt": "BLT",
    "normalized-sqrt": "normalized sqrt",
}
if "normalized-blt" in MECHANISM_NAMES:  # the bounded-memory normalized BLT, when shipped
    MECHANISMS["normalized-blt"] = "normalized BLT"


def tutorial_namespace() -> dict[str, Any]:
    """The names defined by the tutorial's first python block."""
    code = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)[0]
    namespace: dict[str, Any] = {"__name__": "__training_figure__"}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def sampling_namespace() -> dict[str, Any]:
    """The names of the tutorial's first block, its jax block and the balls-in-bins
    definitions (the block defining ``train_sampled``)."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    wanted = [blocks[0]] + [b for b in blocks if "def clipped_sum" in b or "def train_sampled" in b]
    namespace: dict[str, Any] = {"__name__": "__training_figure__"}
    for code in wanted:
        exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


SAMPLED = {
    ("input", "fixed-batches"): "independent, fixed batches",
    ("input", "balls-in-bins"): "independent, balls-in-bins",
    ("blt", "fixed-batches"): "BLT, fixed batches",
    ("blt", "balls-in-bins"): "BLT, balls-in-bins",
}


def sampling_figure(args: argparse.Namespace) -> None:
    """docs/figures/training-digits-sampling.png (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sampling_namespace()
    epochs, batches = 4, 25
    finals: dict[tuple[str, str], list[np.ndarray]] = {key: [] for key in SAMPLED}
    print(f"epochs={epochs} batches={batches} delta=1e-5 clip=1 seeds={args.seeds}")
    for eps in args.epsilons:
        for (name, sampling), label in SAMPLED.items():
            p = ns["sampled_privatizer"](
                name, sampling, epochs=epochs, batches=batches, epsilon=eps
            )
            full_train, full_test = ns["train_rows"], ns["test_rows"]
            ns["train_rows"], ns["test_rows"] = full_train[:1100], full_train[1100:]
            try:
                scores = {
                    lr: np.mean(
                        [
                            ns["train_sampled"](p, sampling, lr=lr, seed=1000 + s)[-1]
                            for s in range(args.tune_seeds)
                        ]
                    )
                    for lr in args.rates
                }
            finally:
                ns["train_rows"], ns["test_rows"] = full_train, full_test
            lr = max(scores, key=lambda r: scores[r])
            runs = np.array(
                [ns["train_sampled"](p, sampling, lr=lr, seed=s)[-1] for s in range(args.seeds)]
            )
            finals[name, sampling].append(runs)
            print(
                f"{label:28s} eps {eps:4g} sigma {p.mechanism.noise_scale:7.3f} lr {lr:5g} "
                f"{runs.mean():6.3f} ± {runs.std(ddof=1):.3f}"
            )
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in SAMPLED.items():
        data = np.array(finals[key])
        ax.errorbar(
            args.epsilons,
            data.mean(axis=1),
            yerr=data.std(axis=1, ddof=1),
            marker="o",
            capsize=3,
            linestyle="--" if key[1] == "fixed-batches" else "-",
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ε (δ = 1e-5)")
    ax.set_ylabel("test accuracy after the last epoch")
    ax.set_title(f"{epochs} epochs × {batches} batches, jit + device noise, {args.seeds} seeds")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = ROOT / "docs" / "figures" / "training-digits-sampling.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def pick_rate(ns: dict[str, Any], name: str, eps: float, args: argparse.Namespace) -> float:
    full_train, full_test = ns["train_rows"], ns["test_rows"]
    ns["train_rows"], ns["test_rows"] = full_train[:1100], full_train[1100:]
    try:
        scores = {
            lr: np.mean(
                [
                    ns["train"](
                        name,
                        epochs=args.epochs,
                        batches=args.batches,
                        epsilon=eps,
                        lr=lr,
                        seed=1000 + s,
                    )[-1]
                    for s in range(args.tune_seeds)
                ]
            )
            for lr in args.rates
        }
    finally:
        ns["train_rows"], ns["test_rows"] = full_train, full_test
    return float(max(scores, key=lambda lr: scores[lr]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--tune-seeds", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "figures" / "training-digits.png"
    )
    parser.add_argument("--sampling", action="store_true")
    args = parser.parse_args()
    if args.sampling:
        sampling_figure(args)
        return

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = tutorial_namespace()
    curves: dict[tuple[str, float], np.ndarray] = {}
    print(f"epochs={args.epochs} batches={args.batches} delta=1e-5 clip=1 seeds={args.seeds}")
    print(f"{'mechanism':16s} {'eps':>4s} {'lr':>5s} {'test accuracy':>16s}")
    for eps in args.epsilons:
        for name in MECHANISMS:
            lr = pick_rate(ns, name, eps, args)
            runs = np.array(
                [
                    ns["train"](
                        name, epochs=args.epochs, batches=args.batches, epsilon=eps, lr=lr, seed=s
                    )
                    for s in range(args.seeds)
                ]
            )
            curves[name, eps] = runs
            final = runs[:, -1]
            print(f"{name:16s} {eps:4g} {lr:5g} {final.mean():8.3f} ± {final.std(ddof=1):.3f}")

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, label in MECHANISMS.items():
        finals = np.array([curves[name, e][:, -1] for e in args.epsilons])
        left.errorbar(
            args.epsilons,
            finals.mean(axis=1),
            yerr=finals.std(axis=1, ddof=1),
            marker="o",
            capsize=3,
            label=label,
        )
        per_epoch = curves[name, args.epsilons[0]]
        epochs = np.arange(1, args.epochs + 1)
        right.plot(epochs, per_epoch.mean(axis=0), marker="o", label=label)
        right.fill_between(
            epochs,
            per_epoch.mean(axis=0) - per_epoch.std(axis=0, ddof=1),
            per_epoch.mean(axis=0) + per_epoch.std(axis=0, ddof=1),
            alpha=0.15,
        )
    left.set_xscale("log", base=2)
    left.set_xlabel("ε (δ = 1e-5)")
    left.set_ylabel("test accuracy after the last epoch")
    left.set_title(f"{args.epochs} epochs × {args.batches} batches, {args.seeds} seeds")
    right.set_xlabel("epoch")
    right.set_ylabel("test accuracy")
    right.set_title(f"ε = {args.epsilons[0]:g}")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Softmax regression on the digits, private SGD per noise strategy")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
