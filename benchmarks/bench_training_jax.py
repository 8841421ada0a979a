"""The jit-able device noise step against ``optax.add_noise``, in the same run.

    python benchmarks/bench_training_jax.py [--dim 1000000] [--repeats 30]

Both are jitted functions of (updates, state) over one float32 leaf of ``--dim``
coordinates, timed per step after a warm-up (best of ``--repeats``, wall clock,
``block_until_ready``). The floor is ``optax.add_noise`` (independent Gaussian noise:
one normal draw and one add per coordinate). The device strategies keep (n + 1)
running values per coordinate for BLT with n buffers, n for a banded Toeplitz encoder
with n bands, 1 for independent noise, plus the previous noise (gradient release).

Each strategy is timed with the replay guard (the default: a host ledger through an
ordered ``io_callback`` per step) and without (``replay_guard=False``).

Target (issue #35): the BLT step ≤ 1.5× the floor at d = 10^6 on CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _time(step: Any, updates: Any, state: Any, repeats: int) -> float:
    import jax

    out, state = step(updates, state)  # compile
    jax.block_until_ready(out)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out, state = step(updates, state)
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    import optax

    from dpcount.counting import ToeplitzFactorization
    from dpcount.privacy import Budget, Participation
    from dpcount.training import GradientPrivatizer, gaussian_privatizer, optax_privatizer

    d = args.dim
    updates = jnp.ones(d, jnp.float32)
    floor_tx = optax.add_noise(1.0, 0.0, seed=0)
    floor = _time(jax.jit(floor_tx.update), updates, floor_tx.init(updates), args.repeats)
    print(f"d = {d:,}, float32, best of {args.repeats}; floor optax.add_noise {floor * 1e3:.2f} ms")
    budget = Budget(epsilon=2.0, delta=1e-5)
    banded = ToeplitzFactorization(
        1000,
        coefficients=[1.0, -0.5, -0.125, -0.0625],
        budget=Budget(
            epsilon=2.0,
            delta=1e-5,
            noise="gaussian",
            participation=Participation(max_participations=4, min_separation=250),
        ),
    )
    cases = {
        "blt": gaussian_privatizer(
            "blt", epochs=4, batches_per_epoch=250, clip_norm=1.0, budget=budget
        ),
        "toeplitz (4 bands)": GradientPrivatizer(banded),
        "input": gaussian_privatizer(
            "input", epochs=4, batches_per_epoch=250, clip_norm=1.0, budget=budget
        ),
    }
    runs = [(label, p, True) for label, p in cases.items()]
    runs += [(f"{label} (no guard)", p, False) for label, p in cases.items()]
    for label, privatizer, guard in runs:
        tx = optax_privatizer(privatizer, device=True, replay_guard=guard)
        state = tx.init(updates)
        rows = state.noise.buffers[0].shape[0]
        took = _time(jax.jit(tx.update), updates, state, args.repeats)
        print(
            f"{label:<30} {took * 1e3:8.2f} ms  {took / floor:5.2f}x the floor  "
            f"({rows} + 1 values per coordinate)"
        )


if __name__ == "__main__":
    main()
