"""Amplified calibration (cyclic Poisson; balls-in-bins): dpcount against the unsampled σ
and against jax_privacy's own computation of the same quantity.

    python benchmarks/bench_sampling.py [--jax-privacy-python PATH]
    python benchmarks/bench_sampling.py --balls-in-bins [--jax-privacy-python PATH]
        [--target-samples M]
    python benchmarks/bench_sampling.py --renyi [--jax-privacy-python PATH]
        [--max-mc-samples M]

Sampling-free against Monte Carlo (``--renyi``, :mod:`dpcount.training.renyi_allocation`):
a table of noise multipliers (σ per unit clip) for balls-in-bins sampling — without
amplification (analytic Gaussian), dpcount's Monte Carlo certificate (upper confidence
bound at 1 − 10⁻³, max(10⁵, 20/δ) samples per direction, at most ``--max-mc-samples``:
above it the certificate may fall back to the unamplified σ), the deterministic Rényi
bound, and jax_privacy's own Monte Carlo
calibration where it is affordable (T ≤ 64, δ ≥ 10⁻³: the 4 × 16 configuration of
figure 3 below) — over RENYI_CONFIGS: the target (BLT, ε 2, δ 10⁻⁵, 4 × 250), fewer
epochs, small ε, a 2-banded Toeplitz encoder, the independent mechanism (DP-SGD), a
small δ, and the jax_privacy-sized one.

Balls-in-bins (``--balls-in-bins``, :mod:`dpcount.training.balls_in_bins`):

1. the target (ε 2, δ 1e-5, 4 epochs × 250 batches, BLT): dpcount's certified noise
   multiplier (M samples per direction, default 2·10⁶, upper confidence bound at
   1 − 10⁻³) against the unsampled one;
2. with jax_privacy: its privacy loss (``sample_generation.get_privacy_loss_sample``)
   on its own samples y against dpcount's loss of the same y, at the target
   configuration (the same quantity, per sample);
3. with jax_privacy, where its Monte Carlo is affordable (its sampler builds a b × T
   Toeplitz matrix per sample: 55 ms at T = 1000, 0.7 ms at T = 64): 4 epochs × 16
   batches, BLT, (ε 2, δ 10⁻²), 10⁴ samples per σ and direction, a 2% σ grid: the σ
   jax_privacy's calibration rule (``delta_calculation.perform_calibration_from_samples``,
   Algorithm 5 of arXiv:2602.09338) picks on ITS samples, the σ the same rule picks on
   DPCOUNT's samples, and dpcount's own certificate (its rule: the upper confidence
   bound at 1 − 10⁻³ on fresh samples).

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
import tempfile
import time
from typing import Any

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


_JP_BINS = """
import json, sys
import numpy as np
from jax_privacy import batch_selection
from jax_privacy.experimental.monte_carlo import delta_calculation as dc
from jax_privacy.experimental.monte_carlo import sample_generation as sg
job = json.loads(open(sys.argv[1]).read())
c = np.array(job["encoder"])
strategy = batch_selection.BallsInBinsSampling(iterations=job["steps"], cycle_length=job["bins"])
if job["kind"] == "losses":
    loss, y = sg.get_privacy_loss_sample(
        strategy, job["sigma"], c, seed=job["seed"], positive_sample=True,
        num_samples=job["samples"])
    print(json.dumps({"loss": list(map(float, loss)), "y": y.T.tolist()}))
else:
    def draw(sigma, i, positive):
        loss, _ = sg.get_privacy_loss_sample(
            strategy, sigma, c, seed=job["seed"] + 2 * i + positive,
            positive_sample=bool(positive), num_samples=job["samples"])
        return loss
    pos = [draw(s, i, 1) for i, s in enumerate(job["sigmas"])]
    neg = [draw(s, i, 0) for i, s in enumerate(job["sigmas"])]
    ok, i = dc.perform_calibration_from_samples(
        job["epsilon"], job["delta"], positive_samples=pos, negative_samples=neg)
    theirs = job["sigmas"][i] if ok else None
    ours = np.load(job["ours"])
    ok2, j = dc.perform_calibration_from_samples(
        job["epsilon"], job["delta"], positive_samples=list(ours["add"]),
        negative_samples=list(ours["remove"]))
    print(json.dumps({"theirs": theirs, "rule_on_ours": job["sigmas"][j] if ok2 else None,
                      "base_delta": dc.get_base_delta(job["samples"], job["delta"])}))
"""


RENYI_CONFIGS = [  # (label, mechanism, bands, epochs, batches, epsilon, delta)
    ("target", "blt", None, 4, 250, 2.0, 1e-5),
    ("fewer epochs", "blt", None, 1, 250, 2.0, 1e-5),
    ("small eps", "blt", None, 4, 250, 0.5, 1e-5),
    ("2 bands", "toeplitz", 2, 4, 250, 2.0, 1e-5),
    ("DP-SGD", "input", None, 4, 250, 2.0, 1e-5),
    ("small delta", "input", None, 4, 250, 2.0, 1e-8),
    ("jax_privacy size", "blt", None, 4, 16, 2.0, 1e-2),
]


def _encoder(
    mechanism: str, bands: int | None, epochs: int, batches: int, epsilon: float, delta: float
) -> Any:
    """The Toeplitz encoder's first column the privatizer would account."""
    import numpy as np

    from dpcount.privacy import Budget
    from dpcount.training import gaussian_privatizer

    if mechanism == "blt":
        return _blt_encoder(epochs, batches, epsilon, delta)
    if mechanism == "input":
        return np.ones(1)
    mech = gaussian_privatizer(
        mechanism,
        epochs=epochs,
        batches_per_epoch=batches,
        clip_norm=1.0,
        budget=Budget(epsilon=epsilon, delta=delta),
        bands=bands,
    ).mechanism
    return np.asarray(mech.coefficients, dtype=np.float64)


def renyi_table(python: str | None, max_mc_samples: int) -> None:
    """The sampling-free table (module docstring)."""
    from dpcount.training import RenyiAllocationAccountant
    from dpcount.training.balls_in_bins import BallsInBinsAccountant, MonteCarlo

    print(
        f"{'config':<17} {'mech':<9} {'k x b':>8} {'eps':>4} {'delta':>6}  {'unampl.':>8} "
        f"{'MC cert':>10} {'Renyi':>8} {'jax_priv':>8}  {'MC/un':>6} {'Re/un':>6} "
        f"{'Re/MC':>6}  {'band':>4} {'t MC':>6} {'t Re':>5}"
    )
    for label, name, bands, k, b, eps, delta in RENYI_CONFIGS:
        encoder = _encoder(name, bands, k, b, eps, delta)
        start = time.perf_counter()
        renyi = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b)
        rcert = renyi.calibrate(eps, delta)
        t_re = time.perf_counter() - start
        unampl = renyi.unsampled_noise_multiplier(eps, delta)
        m = MonteCarlo().sample_count(delta)
        capped = m > max_mc_samples  # then at the cap (it may not certify anything)
        start = time.perf_counter()
        acc = BallsInBinsAccountant(encoder, epochs=k, batches_per_epoch=b)
        mc_cert = acc.calibrate(eps, delta, samples=min(m, max_mc_samples), alpha=1e-3, rng=7)
        mc = mc_cert.noise_multiplier
        t_mc = time.perf_counter() - start
        mark = ("*" if capped else " ") + (" " if mc_cert.amplified else "u")
        theirs = float("nan")
        if python is not None and k * b <= 64 and delta >= 1e-3:
            theirs = _small_config(python, quiet=True)
        sigma = rcert.noise_multiplier
        print(
            f"{label:<17} {name:<9} {f'{k}x{b}':>8} {eps:>4} {delta:>6.0e}  {unampl:8.4f} "
            f"{mc:8.4f}{mark} {sigma:8.4f} {theirs:8.4f}  {mc / unampl:6.3f} {sigma / unampl:6.3f} "
            f"{sigma / mc:6.3f}  {renyi.band:>4} {t_mc:6.0f} {t_re:5.1f}",
            flush=True,
        )
    print(
        "*: max(1e5, 20/delta) samples exceed --max-mc-samples: the Monte Carlo ran at the cap; "
        "u: it certified nothing (the unamplified sigma); nan: jax_privacy not run (T > 64)"
    )


def _blt_encoder(epochs: int, batches: int, epsilon: float, delta: float) -> Any:
    from dpcount.counting.factorization.blt import encoder_coefficients
    from dpcount.privacy import Budget
    from dpcount.training import gaussian_privatizer

    mech = gaussian_privatizer(
        "blt",
        epochs=epochs,
        batches_per_epoch=batches,
        clip_norm=1.0,
        budget=Budget(epsilon=epsilon, delta=delta),
    ).mechanism
    return encoder_coefficients(mech.buffer_decay, mech.output_scale, epochs * batches)


def _jax_privacy(python: str, job: dict[str, Any]) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    run = subprocess.run(
        [python, "-c", _JP_BINS, f.name], capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def balls_in_bins(python: str | None, samples: int) -> None:
    """The balls-in-bins figures (module docstring)."""
    import numpy as np

    from dpcount.training.balls_in_bins import BallsInBinsAccountant

    k, b, eps, delta = 4, 250, 2.0, 1e-5
    encoder = _blt_encoder(k, b, eps, delta)
    acc = BallsInBinsAccountant(encoder, epochs=k, batches_per_epoch=b)
    start = time.perf_counter()
    cert = acc.calibrate(eps, delta, samples=samples, alpha=1e-3)
    took = time.perf_counter() - start
    unsampled = acc.unsampled_noise_multiplier(eps, delta)
    print(f"target: BLT, {k} epochs x {b} batches, eps {eps}, delta {delta:g}")
    print(f"  unsampled noise multiplier (per unit clip) {unsampled:.4f}")
    print(
        f"  balls-in-bins certified {cert.noise_multiplier:.4f} (ratio "
        f"{cert.noise_multiplier / unsampled:.4f}; certified delta {cert.delta:.3e}, point "
        f"estimate {cert.estimate:.3e}, {cert.samples} samples/direction, alpha {cert.alpha:g}; "
        f"{took:.0f} s on a shared machine)"
    )
    if python is None:
        return
    sigma = cert.noise_multiplier
    got = _jax_privacy(
        python,
        {
            "kind": "losses",
            "encoder": encoder.tolist(),
            "steps": k * b,
            "bins": b,
            "sigma": sigma,
            "seed": 1,
            "samples": 40,
        },
    )
    y = np.array(got["y"])
    ours = acc._loss((y @ acc.modes).T, sigma)
    gap = np.max(np.abs(ours - np.array(got["loss"])))
    print(f"  privacy loss of 40 jax_privacy samples: max |dpcount - jax_privacy| = {gap:.2e}")
    _small_config(python)


def _small_config(
    python: str, m: int = 10_000, step: float = 0.02, half: int = 4, quiet: bool = False
) -> float:
    """jax_privacy's calibration rule on its samples and on dpcount's (module docstring):
    m samples per σ and direction, a grid of 2·half + 1 σ values ``step`` apart. Returns
    jax_privacy's σ (nan if its rule picks none); ``quiet``: print nothing."""
    import numpy as np

    from dpcount.training.balls_in_bins import BallsInBinsAccountant

    k, b, eps, delta = 4, 16, 2.0, 1e-2
    encoder = _blt_encoder(k, b, eps, delta)
    acc = BallsInBinsAccountant(encoder, epochs=k, batches_per_epoch=b)
    cert = acc.calibrate(eps, delta, samples=m, alpha=1e-3, rng=1)
    unsampled = acc.unsampled_noise_multiplier(eps, delta)
    sigmas = [cert.noise_multiplier * (1 + step) ** i for i in range(half, -half - 1, -1)]
    rng = np.random.default_rng(2)
    losses = [acc.privacy_losses(s, m, rng=rng) for s in sigmas]
    with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as f:
        np.savez(f, add=np.array([x[0] for x in losses]), remove=np.array([x[1] for x in losses]))
    job = {
        "kind": "calibrate",
        "encoder": encoder.tolist(),
        "steps": k * b,
        "bins": b,
        "sigmas": sigmas,
        "seed": 3,
        "samples": m,
        "epsilon": eps,
        "delta": delta,
        "ours": f.name,
    }
    got = _jax_privacy(python, job)
    theirs, same_rule = got["theirs"], got["rule_on_ours"]
    if quiet:
        return float("nan") if theirs is None else float(theirs)
    print(f"small: BLT, {k} epochs x {b} batches, eps {eps}, delta {delta:g}, {m} samples/sigma")
    print(f"  unsampled {unsampled:.4f}; grid {sigmas[-1]:.4f}..{sigmas[0]:.4f} ({step:.0%} steps)")
    print(f"  jax_privacy rule on jax_privacy samples: {theirs}")
    print(f"  jax_privacy rule on dpcount samples:     {same_rule}")
    print(f"  dpcount certificate (UCB, alpha 1e-3):   {cert.noise_multiplier:.4f}")
    if theirs and same_rule:
        print(f"  dpcount samples / jax_privacy samples (same rule): {same_rule / theirs:.4f}")
        print(f"  dpcount certificate / jax_privacy: {cert.noise_multiplier / theirs:.4f}")
    return float("nan") if theirs is None else float(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jax-privacy-python", default=None)
    parser.add_argument("--balls-in-bins", action="store_true")
    parser.add_argument("--target-samples", type=int, default=2_000_000)
    parser.add_argument("--small-only", action="store_true", help="only figure 3")
    parser.add_argument("--renyi", action="store_true", help="the sampling-free table")
    parser.add_argument("--max-mc-samples", type=int, default=2_000_000)
    args = parser.parse_args()
    if args.renyi:
        renyi_table(args.jax_privacy_python, args.max_mc_samples)
        return
    if args.balls_in_bins and args.small_only and args.jax_privacy_python:
        _small_config(args.jax_privacy_python)
        return
    if args.balls_in_bins:
        balls_in_bins(args.jax_privacy_python, args.target_samples)
        return
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
