"""sha256 digests of seeded square-root streams, step by step, to show a change to the
stream's per-update path left every released value bit-identical: run it on the tree
before and after (``PYTHONPATH`` at each tree's ``src``), then compare the two files
(``cmp``).

Covered (seeds 1-3): ``SqrtFactorization`` at T = 1, 7, 1000, 5000 and 70000 with
Gaussian and Laplace noise and step sensitivities 1, 2^400 and 2^-400 (grids far from
1), scalar ``update`` over 0/1, fractional, negative, signed-zero, 2^52-sized, 1e-300-sized
and mixed-type (int, numpy float) steps with an ``update_many`` in the middle, the step
past the horizon, and steps whose sum leaves ±2^53 or that are NaN or infinite (the
error text and the step it stopped at); vector steps (d = 1, 3); the normalized,
row-scaled and horizon-free square roots, the BLT and the binary tree over 0/1,
fractional and negative steps; and copies with a ``GaussianNoise(2^1000)``,
``GaussianNoise(2^60)`` and ``ZeroNoise`` sampler.

Usage:
    PYTHONPATH=<before>/src python benchmarks/sqrt_stream_digests.py before.json
    PYTHONPATH=<after>/src python benchmarks/sqrt_stream_digests.py after.json
    cmp before.json after.json
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from typing import Any

import numpy as np

KINDS = ("01", "frac", "neg", "zeros", "big", "tiny", "mixed", "over", "nan", "inf")


def _h(values: list[Any]) -> str:
    data = b"".join(np.asarray(v, dtype=np.float64).tobytes() for v in values)
    return hashlib.sha256(data).hexdigest()[:20]


def _steps(r: np.random.Generator, kind: str, n: int) -> list[Any]:
    simple: dict[str, Any] = {
        "01": lambda: [float(v) for v in r.integers(0, 2, n)],
        "frac": lambda: r.normal(0, 3, n).tolist(),
        "neg": lambda: [float(v) for v in r.integers(-5, 1, n)],
        "zeros": lambda: [-0.0 if i % 3 else 0.0 for i in range(n)],
        "big": lambda: [2.0**52] + [float(r.integers(-1, 2)) for _ in range(n - 1)],
        "tiny": lambda: (r.normal(0, 1, n) * 1e-300).tolist(),
        "over": lambda: [2.0**53 - 2.0] + [1.0] * (n - 1),
        "nan": lambda: [1.0] * (n // 2) + [float("nan")] + [1.0] * n,
        "inf": lambda: [1.0] * (n // 2) + [float("-inf")] + [1.0] * n,
    }
    if kind in simple:
        return simple[kind]()  # type: ignore[no-any-return]
    out: list[Any] = []  # "mixed": Python ints, numpy floats and floats
    for i, v in enumerate(r.integers(0, 3, n)):
        out.append(int(v) if i % 7 == 0 else np.float64(v) if i % 11 == 0 else float(v))
    return out


def _run(stream: Any, xs: list[Any], out: dict[str, str], key: str) -> None:
    """Steps one by one, an ``update_many`` of five after the first third, then one
    step past the horizon; an error ends the run and is recorded."""
    vals: list[Any] = []
    try:
        k = len(xs) // 3
        vals += [stream.update(x) for x in xs[:k]]
        if len(xs) > 10:
            vals += list(stream.update_many(np.asarray(xs[k : k + 5], dtype=float)))
            k += 5
        vals += [stream.update(x) for x in xs[k:]]
        try:
            stream.update(1.0)
        except ValueError:
            vals.append(-1.0)
    except (ValueError, OverflowError) as e:
        vals.append(float(len(vals)))
        out[f"error {key}"] = str(e)
    out[key] = _h(vals)


def _sqrt(out: dict[str, str], seed: int) -> None:
    from dpcount.counting import SqrtFactorization
    from dpcount.privacy import Budget

    gauss = {"epsilon": 1.0, "delta": 1e-6}
    budgets = {
        "gauss": Budget(**gauss),
        "lap": Budget(epsilon=0.5, noise="laplace"),
        "gauss-huge": Budget(**gauss, step_sensitivity=2.0**400),
        "gauss-small": Budget(**gauss, step_sensitivity=2.0**-400),
    }
    for T in (1, 7, 1000, 5000, 70000):
        for noise, budget in budgets.items():
            m = SqrtFactorization(T, budget=budget, rng=seed)
            for kind in KINDS if T <= 5000 else ("01", "frac"):
                xs = _steps(np.random.default_rng(seed * 1000 + T), kind, T)
                _run(m.stream(), xs, out, f"sqrt s{seed} T{T} {noise} {kind}")
            if T >= 1000 and noise in ("gauss", "lap"):
                for d in (1, 3):
                    r = np.random.default_rng(seed)
                    s = m.stream()
                    vals = [
                        s.update(r.integers(-1, 3, d).astype(float)) for _ in range(min(T, 3000))
                    ]
                    out[f"sqrt vec d{d} s{seed} T{T} {noise}"] = _h(vals)


def _others(out: dict[str, str], seed: int) -> None:
    from dpcount.counting import (
        BLT,
        BinaryTree,
        HorizonFreeSqrt,
        NormalizedSqrtFactorization,
        RowScaledSqrtFactorization,
    )
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6)
    mechs = {
        "normalized": NormalizedSqrtFactorization(3000, budget=budget, rng=seed),
        "row-scaled": RowScaledSqrtFactorization(3000, budget=budget, rng=seed),
        "horizon-free": HorizonFreeSqrt(3000, budget=budget, rng=seed),
        "blt": BLT.optimized(3000, budget=budget, rng=seed),
        "tree": BinaryTree(3000, budget=Budget(epsilon=1.0), rng=seed),
    }
    for name, m in mechs.items():
        r = np.random.default_rng(seed)
        for kind in ("01", "frac", "neg"):
            s = m.stream()
            out[f"{name} s{seed} {kind}"] = _h([s.update(x) for x in _steps(r, kind, 3000)])


def _samplers(out: dict[str, str]) -> None:
    from dpcount.counting import SqrtFactorization
    from dpcount.privacy import Budget, GaussianNoise, ZeroNoise

    samplers = {
        "huge": GaussianNoise(2.0**1000),
        "zero": ZeroNoise(),
        "big": GaussianNoise(2.0**60),
    }
    for name, sampler in samplers.items():
        m = SqrtFactorization(1000, budget=Budget(epsilon=1.0, delta=1e-6), rng=5)
        m = m.with_sampler(sampler)
        for kind in ("01", "frac", "big"):
            s = m.stream()
            xs = _steps(np.random.default_rng(9), kind, 1000)
            out[f"sampler {name} {kind}"] = _h([s.update(x) for x in xs])


def main() -> None:
    warnings.simplefilter("ignore", DeprecationWarning)
    out: dict[str, str] = {}
    for seed in (1, 2, 3):
        _sqrt(out, seed)
        _others(out, seed)
    _samplers(out)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{len(out)} digests written to {sys.argv[1]}")


if __name__ == "__main__":
    main()
