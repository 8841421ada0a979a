"""Amplified (cyclic Poisson) calibration: dpcount against the unsampled σ and against
jax_privacy's own calibration of the same quantity.

    python benchmarks/bench_sampling.py [--jax-privacy-python PATH]

For each configuration (epochs k, partitions b = bands, sampling probability q, target
(ε, δ)) it prints dpcount's noise multiplier z (σ per unit of one participation's
sensitivity, :func:`dpcount.training.amplified_noise_multiplier`), the fixed-batch σ
ratio, and — with ``--jax-privacy-python`` pointing at a Python that has
``jax-privacy`` installed (it is not a dpcount dependency: ``python -m venv jp &&
jp/bin/pip install jax-privacy``) — jax_privacy's ``BandMFExecutionPlanConfig``
calibration for ``iterations = k·b``, ``num_bands = b``, ``sampling_prob = q`` with a
``PLDAccountant(ADD_OR_REMOVE_ONE)`` and ``PartitionType.INDEPENDENT`` (the same
quantity: k compositions of the Poisson-subsampled Gaussian, arXiv:2306.08153 Thm 4).

What the σ ratio does not say: with probability q the expected batch is q times the
fixed batch, so the noise per expected example is σ/q; amplification pays when that
is still smaller than the fixed σ per fixed batch (DP-SGD regimes: many epochs, small q).
"""

from __future__ import annotations

import argparse
import json
import subprocess

CONFIGS = [  # (epochs, partitions = bands, q, epsilon, delta)
    (4, 250, 0.5, 2.0, 1e-5),
    (4, 250, 0.25, 2.0, 1e-5),
    (4, 8, 0.5, 2.0, 1e-5),
    (16, 8, 0.1, 2.0, 1e-5),
    (100, 1, 0.01, 1.0, 1e-6),  # DP-SGD: 100 epochs, Poisson 1%
]

_JAX_PRIVACY = """
import json, sys
import numpy as np, dp_accounting
from jax_privacy import batch_selection
from jax_privacy.experimental import execution_plan
out = []
for k, b, q, eps, delta in json.loads(sys.argv[1]):
    config = execution_plan.BandMFExecutionPlanConfig(
        iterations=k * b, strategy=np.ones(b) / np.sqrt(b), epsilon=eps, delta=delta,
        sampling_prob=q, partition_type=batch_selection.PartitionType.INDEPENDENT,
        accountant=dp_accounting.pld.PLDAccountant(
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    event = config.plan.dp_event
    out.append(event.event.event.noise_multiplier)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jax-privacy-python", default=None)
    args = parser.parse_args()
    from dpcount.privacy import Budget, gaussian_sigma
    from dpcount.training import amplified_noise_multiplier

    theirs: list[float | None] = [None] * len(CONFIGS)
    if args.jax_privacy_python:
        run = subprocess.run(
            [args.jax_privacy_python, "-c", _JAX_PRIVACY, json.dumps(CONFIGS)],
            capture_output=True,
            text=True,
            check=True,
        )
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
    print(
        f"{'k':>4} {'b':>4} {'q':>5} {'eps':>4} {'delta':>6}  {'z dpcount':>10} "
        f"{'z fixed':>8} {'ratio':>6} {'z jax_privacy':>13} {'ours/theirs':>11}"
    )
    for (k, b, q, eps, delta), other in zip(CONFIGS, theirs, strict=True):
        z = amplified_noise_multiplier(
            sampling_probability=q, epochs=k, budget=Budget(epsilon=eps, delta=delta)
        )
        fixed = gaussian_sigma(k**0.5, eps, delta)  # k participations, unit column norm
        ratio = "" if other is None else f"{z / other:11.4f}"
        other_s = "" if other is None else f"{other:13.4f}"
        print(
            f"{k:>4} {b:>4} {q:>5} {eps:>4} {delta:>6.0e}  {z:10.4f} {fixed:8.4f} "
            f"{z / fixed:6.3f} {other_s:>13} {ratio:>11}"
        )


if __name__ == "__main__":
    main()
