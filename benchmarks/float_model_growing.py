"""The float model (F) of :mod:`dpcount.privacy.float_safe` at long horizons for
:class:`~dpcount.counting.factorization.horizon_free_growing.HorizonFreeGrowingBLT`
(block 0 of the default unbounded counter).

For each noise path

============  =========================================================================
``batch``     one scalar ``next_many(T)``
``blocks``    scalar ``next_many`` in blocks of 1, 7, 1000, 4097, 1, 7, … steps
``scalar``    T scalar ``next()`` calls
``vector``    T vector ``next()`` steps (dim 2, 3, 4 for seeds 1, 2, 3)
``vbatch``    one vector ``next_many(T)`` (the same dims)
``unbounded`` the default unbounded counter's block 0 (``UnboundedCounter(inner=
              "horizon-free-blt")``'s ``block_mechanism(0)``), scalar ``next()``
============  =========================================================================

and each T = 2^k asked for, the ratio

    max_{t ≤ T} (|N̂_t − N_t| + u·|N̂_t|) / (u·σ_t·(1 + Z*_T/σ₁))

of the float noise N̂ to the exact noise N of the mechanism's definition, from the very
draws the release used (recorded from the sampler), over every step and coordinate
(Z*_T: the largest |draw| of the first T steps). The mechanism has no horizon in its
definition (its columns do not depend on it): every path is run once, at the largest
T, on an instance of horizon 2^53 (``unbounded``: the counter's block 0, horizon
2^s − 1, s = ``HORIZON_FREE_BLT_SPAN_LOG2``, measured up to it), and each smaller T is
its prefix. σ_t is the exact std (``iter_variances``), σ₁ the sampler's.
(F) holds with κ = MODEL_KAPPA = 256; the target is ≤ κ/4 = 64 on every path.

The exact reference: the same recursion y = z − Σ_i u_i, N += ν_b·y, u ← θ⊙u + ω_b·y
in long double (x87 80-bit, u_LD = 2^-64 = u/2048) with the mechanism's float θ, ω_b,
ν_b — these floats ARE its definition (its certified column norms and exact variances
are computed from them; no decay is derived from a formula, so no rounded θ̂ differs
from an exact θ as in the BLT family). Every path's columns (seed × coordinate) run
through one long-double loop.

Run: ``PYTHONPATH=src python benchmarks/float_model_growing.py [--log2 11,14,17,20]
[--paths batch,blocks,scalar,vector,vbatch,unbounded] [--seeds 1,2,3] [--beyond]``
(``--beyond``: measure past the steps the process refuses, ``FLOAT_MODEL_STEPS``).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from typing import Any

import numpy as np

from dpcount.counting.base import MAX_HORIZON
from dpcount.counting.factorization import horizon_free_growing as hfg
from dpcount.counting.factorization.horizon_free_growing import (
    GrowingColumns,
    HorizonFreeGrowingBLT,
)
from dpcount.counting.unbounded import (
    HORIZON_FREE_BLT,
    HORIZON_FREE_BLT_SPAN_LOG2,
    UnboundedCounter,
)
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

LD = np.longdouble
U = 2.0**-53
PATHS = ("batch", "blocks", "scalar", "vector", "vbatch", "unbounded")
#: vector dim per seed (seed 1 → 2, 2 → 3, 3 → 4; other seeds 3)
VECTOR_DIMS = {1: 2, 2: 3, 3: 4}
#: the block sizes of the ``blocks`` path, cycled
BLOCKS = (1, 7, 1000, 4097)
#: the unbounded counter's block 0 horizon
SPAN = (1 << HORIZON_FREE_BLT_SPAN_LOG2) - 1
BUDGET = Budget(epsilon=1.0, delta=1e-6)


class Recorder:
    """The sampler, recording every draw in draw order."""

    integer = False

    def __init__(self, base: Any) -> None:
        self.base = base
        self.draws: list[np.ndarray] = []

    @property
    def variance(self) -> float:
        return float(self.base.variance)

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        out = self.base.sample(rng, size)
        self.draws.append(np.asarray(out).reshape(-1).copy())
        return out  # type: ignore[no-any-return]


def mechanism(path: str = "batch") -> HorizonFreeGrowingBLT:
    """The growing BLT with the largest horizon (its columns do not depend on it;
    ``unbounded``: the very block 0 the default unbounded counter builds, horizon
    2^s − 1)."""
    if path == "unbounded":
        counter = UnboundedCounter(inner=HORIZON_FREE_BLT, budget=BUDGET)
        mech = counter.block_mechanism(0)
        assert isinstance(mech, HorizonFreeGrowingBLT) and mech.horizon == SPAN
        return mech
    return HorizonFreeGrowingBLT(MAX_HORIZON, budget=BUDGET)


def dim_of(path: str, seed: int) -> int | None:
    return VECTOR_DIMS.get(seed, 3) if path in ("vector", "vbatch") else None


def drive(mech: Any, path: str, T: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N̂ (T, D), the draws of the first T steps (T, D)) of one path."""
    rec = Recorder(mech.sampler)
    dim = dim_of(path, seed)
    process = mech.noise_process(NoiseSource.generator(rec, np.random.default_rng(seed), dim), dim)
    if path in ("batch", "vbatch"):
        out = process.next_many(T)
    elif path == "blocks":
        parts, done = [], 0
        for n in itertools.cycle(BLOCKS):
            if done >= T:
                break
            n = min(n, T - done)
            parts.append(np.asarray(process.next_many(n)).reshape(n, -1))
            done += n
        out = np.concatenate(parts)
    else:
        out = np.array([process.next() for _ in range(T)])
    D = 1 if dim is None else dim
    z = np.concatenate(rec.draws).reshape(-1, D)[:T]  # scalar next() draws ahead
    return np.asarray(out, dtype=np.float64).reshape(T, D), z


def exact_noise(columns: GrowingColumns, z: np.ndarray) -> np.ndarray:
    """N (T, K) for the draws z (T, K), every column a stream: the recursion of the
    module docstring in long double with the mechanism's θ, ω_b, ν_b."""
    T, K = z.shape
    n = len(columns.decay)
    theta = np.asarray(columns.decay).astype(LD)[:, None]
    zl = z.astype(LD)
    u = np.zeros((n, K), dtype=LD)
    total = np.zeros(K, dtype=LD)
    out = np.empty((T, K), dtype=LD)
    for b, start in enumerate(columns.starts):
        if start > T:
            break
        stop = columns.starts[b + 1] - 1 if b + 1 < len(columns.starts) else T
        w = np.asarray(columns.scales[b]).astype(LD)[:, None]
        nu = LD(float(columns.normalizers[b]))
        for t in range(start - 1, min(stop, T)):
            y = zl[t] - u.sum(axis=0)
            total += nu * y
            u *= theta
            u += w * y
            out[t] = total
    return out


def ratios(
    mech: Any, noise: np.ndarray, exact: np.ndarray, z: np.ndarray, Ts: list[int]
) -> list[float]:
    """The (F) ratio over the first T steps, for each T in Ts (prefixes of one run)."""
    T = len(noise)
    v = np.fromiter(itertools.islice(mech.iter_variances(), T), np.float64, count=T)
    sd = np.sqrt(v)
    err = (np.abs(noise.astype(LD) - exact) + LD(U) * np.abs(noise).astype(LD)).astype(np.float64)
    per_step = np.max(err, axis=1) / (U * sd)  # over coordinates
    zmax = np.maximum.accumulate(np.max(np.abs(z), axis=1)) / math.sqrt(mech.sampler.variance)
    return [float(np.max(per_step[:k]) / (1.0 + zmax[k - 1])) for k in Ts]


def measure(path: str, Ts: list[int], seed: int) -> list[float]:
    """The (F) ratio of ``path`` with ``seed`` at each T in Ts (one run at max(Ts))."""
    mech = mechanism(path)
    Ts = [min(T, mech.horizon) for T in Ts]  # the counter's block 0 ends at 2^s − 1
    noise, z = drive(mech, path, max(Ts), seed)
    exact = exact_noise(mech.columns, z)
    return ratios(mech, noise, exact, z, Ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", default="11,14,17,20", help="log2 of the step counts")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument(
        "--beyond", action="store_true", help="measure past the refusal (FLOAT_MODEL_STEPS)"
    )
    args = ap.parse_args()
    if args.beyond:
        hfg.FLOAT_MODEL_STEPS = MAX_HORIZON
    Ts = [1 << int(k) for k in args.log2.split(",")]
    print(
        f"(F) ratio of horizon-free-growing-blt, units u·σ_t·(1 + Z*/σ₁); κ = {MODEL_KAPPA}, "
        f"target ≤ κ/4 = {MODEL_KAPPA // 4}"
    )
    print(
        f"{'path':10} {'seed':>4} " + " ".join(f"{'T=2^' + str(T.bit_length() - 1):>9}" for T in Ts)
    )
    for path in args.paths.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            start = time.perf_counter()
            rs = measure(path, Ts, seed)
            print(
                f"{path:10} {seed:>4} "
                + " ".join(f"{r:9.3f}" for r in rs)
                + f"   ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
