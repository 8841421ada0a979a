"""The jit-able device noise step against ``optax.add_noise``, in the same run.

    python benchmarks/bench_training_jax.py [--dim 1000000] [--rounds 7] [--repeats 15]
    python benchmarks/bench_training_jax.py --quick      # 4 rounds of 8: under 2 min

Every case is a jitted ``update(updates, state)`` over one float32 leaf of ``--dim``
coordinates, with the updates and the state donated (``donate_argnums=(0, 1)``, as a
training step donates its optimizer state), each step fed the previous step's output
and state. The floor is ``optax.add_noise`` (independent Gaussian noise: one normal
draw and one add per coordinate), jitted and donated the same way.

The cases are timed in alternating rounds (in a round, one step of the floor, then
one of each case, ``--repeats`` times over): a case's ratio in a round is its best
step over the floor's best step in the same round, and the table gives the minimum and the median
of those ratios over the rounds, and best/best (the case's best step over the floor's
best step, over all rounds) and the CPU ratio (the same with the process's CPU time
per step, all threads: less moved by other processes than the wall clock, though not
by their use of the caches and memory), with the load average before and after (on a shared
machine the absolute times move with the load; the ratios move less).

Released as gradients, the device strategies keep n values per coordinate for BLT
with n buffers (no running sum, no N_{t−1}: the increment N_t − N_{t−1} is computed
from the buffers and the draw), n − 1 filter values for a banded Toeplitz encoder
with n bands and none for independent noise (the table's last column: buffers +
other values per coordinate). "guard" is the default replay guard (a host
ledger asked through an XLA FFI custom call whose answer gates every value derived
from the draw: :mod:`dpcount.training._ledger_ffi`); "guard via io_callback" is the
same ledger asked through jax's ``io_callback`` (the fallback where the handler is
unavailable, and the guard's only path before); "no guard" is
``replay_guard=False``; "not donated" jits the step without donation (every step
allocates fresh state buffers).

Target (issue #35): the BLT step ≤ 1.5× the floor at d = 10^6 on CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def _step(run: list[Any]) -> tuple[float, float]:
    """One step of ``run`` ([step, updates, state, ...]), which it advances: its wall
    time and the process's CPU time (all threads) it took."""
    import jax

    step, updates, state = run[:3]
    start, cpu = time.perf_counter(), time.process_time()
    updates, state = step(updates, state)
    jax.block_until_ready(updates)
    took = time.perf_counter() - start, time.process_time() - cpu
    run[1:3] = [updates, state]
    return took


def _cases() -> dict[str, tuple[Any, bool, bool]]:
    """label -> (transformation, donate, through the io_callback fallback)."""
    import optax

    from dpcount.counting import ToeplitzFactorization
    from dpcount.privacy import Budget, Participation
    from dpcount.training import GradientPrivatizer, gaussian_privatizer, optax_privatizer

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

    def privatizer(name: str) -> GradientPrivatizer:
        if name == "toeplitz":
            return GradientPrivatizer(banded)
        return gaussian_privatizer(
            name, epochs=4, batches_per_epoch=250, clip_norm=1.0, budget=budget
        )

    floor = optax.add_noise(1.0, 0.0, 0)
    cases: dict[str, tuple[Any, bool, bool]] = {"floor optax.add_noise": (floor, True, False)}
    for name, label in (("blt", "blt"), ("toeplitz", "toeplitz (4 bands)"), ("input", "input")):
        for guard in (True, False):
            tx = optax_privatizer(privatizer(name), device=True, replay_guard=guard)
            cases[f"{label}, {'guard' if guard else 'no guard'}"] = (tx, True, False)
    cases["blt, guard via io_callback"] = (
        optax_privatizer(privatizer("blt"), device=True),
        True,
        True,
    )
    cases["blt, no guard, not donated"] = (
        optax_privatizer(privatizer("blt"), device=True, replay_guard=False),
        False,
        False,
    )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dim", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="4 rounds of 8 steps")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.repeats = 4, 8
    import jax
    import jax.numpy as jnp

    from dpcount.training import _ledger_ffi

    d = args.dim
    load_before = os.getloadavg()
    runs: dict[str, list[Any]] = {}  # label -> [step, updates, state, rows]
    registered = _ledger_ffi._registered()
    for label, (tx, donate, fallback) in _cases().items():
        fresh = jnp.ones(d, jnp.float32)
        state = tx.init(fresh)
        step: Callable[..., Any] = jax.jit(tx.update, donate_argnums=(0, 1) if donate else ())
        _ledger_ffi._REGISTRATION[:] = [registered and not fallback]  # fixed when traced
        try:
            updates, state = step(fresh, state)  # compile
        finally:
            _ledger_ffi._REGISTRATION[:] = [registered]
        jax.block_until_ready(updates)
        noise = getattr(state, "noise", None)
        rows = "" if noise is None else f"{len(noise.buffers[0])} + {noise.previous[0].size // d}"
        runs[label] = [step, updates, state, rows]
    times: dict[str, list[float]] = {label: [] for label in runs}
    cpu: dict[str, float] = dict.fromkeys(runs, float("inf"))
    floor, *others = runs
    for _ in range(args.rounds):
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(args.repeats):  # one step of each, in turn
            for label in runs:
                wall, used = _step(runs[label])
                best[label] = min(best[label], wall)
                cpu[label] = min(cpu[label], used)
        for label in runs:
            times[label].append(best[label])
    floors = times[floor]
    load_after = os.getloadavg()
    print(
        f"d = {d:,}, float32, {args.rounds} alternating rounds, best of {args.repeats} steps "
        f"per round; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"({os.cpu_count()} CPUs)"
    )
    print(
        f"floor optax.add_noise: {min(floors) * 1e3:.2f} ms min, "
        f"{statistics.median(floors) * 1e3:.2f} ms median"
    )
    print(
        f"{'case':<34} {'min ratio':>9} {'median':>7} {'best/best':>9} {'best ms':>7} "
        f"{'CPU ratio':>9}  values per coordinate"
    )
    for label in others:
        rows = runs[label][3]
        ratios = [t / f for t, f in zip(times[label], floors, strict=True)]
        print(
            f"{label:<34} {min(ratios):9.2f} {statistics.median(ratios):7.2f} "
            f"{min(times[label]) / min(floors):9.2f} {min(times[label]) * 1e3:7.2f} "
            f"{cpu[label] / cpu[floor]:9.2f}  {rows}"
        )


if __name__ == "__main__":
    main()
