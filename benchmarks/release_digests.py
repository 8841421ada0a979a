"""sha256 digests of seeded releases, to show a speed change left every released value
bit-identical: run it on the tree before and after (``PYTHONPATH`` at each tree's
``src``), then compare the two files.

Covered (3 seeds each): the BLT batch release at T = 1000, 70000 (one block of sums
below ``COMPENSATE_ABOVE``), 2^17 + 5 and 10^6 (compensated decays, many blocks) of
zeros, 0/1 steps, negative whole steps, fractional steps and a sum near 2^52; the BLT
vector stream (d = 3, 1000, 100003: one, and seven fused column blocks) over whole,
fractional and zero steps with an ``update_many`` after them, and the vector batch;
the scalar BLT stream with ``update`` and ``update_many``; the square root, binary
tree and k-ary tree batch and stream; and direct :func:`snap_release` calls on edge
sums (zeros of both signs, negatives, whole and fractional, int64) and noise (zeros,
ties ±g/2, subnormals) for five grids and each ``known`` form. Then (their own
generator, so the digests above are unchanged) the BLT's vector batch at d = 2, 3, 4,
16 up to 2^22 + 3 and a vector stream's long ``update_many`` (:func:`_vector_batches`).

Usage:
    PYTHONPATH=<before>/src python benchmarks/release_digests.py --write before.json
    PYTHONPATH=<after>/src python benchmarks/release_digests.py --write after.json
    python benchmarks/release_digests.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _h(a: Any) -> str:
    arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    return hashlib.sha256(arr.tobytes()).hexdigest()[:20]


def _batch(out: dict[str, str], seed: int, r: np.random.Generator) -> None:
    from dpcount.counting import BLT
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6)
    for T in (1000, 70000, 2**17 + 5, 10**6):
        m = BLT.optimized(T, budget=budget, rng=seed)
        for kind, x in (
            ("zeros", np.zeros(T)),
            ("bits", r.integers(0, 2, T).astype(float)),
            ("neg", r.integers(-3, 2, T).astype(float)),
            ("frac", r.normal(0, 1, T)),
            ("big", np.concatenate([[2.0**52 - 2**20], np.ones(T - 1)])),
        ):
            out[f"blt batch T={T} {kind} s{seed}"] = _h(m.release(x))


def _streams(out: dict[str, str], seed: int, r: np.random.Generator) -> None:
    from dpcount.counting import BLT, BinaryTree, KaryTree, SqrtFactorization
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6)
    m = BLT.optimized(4096, budget=budget, rng=seed)
    for d in (3, 1000, 100003):
        s = m.stream()
        xs = [r.integers(-1, 3, d).astype(float) for _ in range(6)]
        xs += [r.normal(0, 1, d), np.zeros(d), np.zeros(d)]
        res = [s.update(x) for x in xs]
        res.append(s.update_many(np.ones((5, d))))
        out[f"blt stream vec d={d} s{seed}"] = _h(np.concatenate([np.ravel(a) for a in res]))
        out[f"blt batch vec d={d} s{seed}"] = _h(m.release(np.ones((7, d))))
    s = m.stream()
    vals = [s.update(float(v)) for v in r.integers(0, 3, 3500)] + [s.update(1)]
    out[f"blt stream scalar s{seed}"] = _h(vals + list(s.update_many(np.ones(300))))
    pure = Budget(epsilon=1.0)
    for name, mm in (
        ("sqrt", SqrtFactorization(5000, budget=budget, rng=seed)),
        ("tree", BinaryTree(10**5, budget=pure, rng=seed)),
        ("kary", KaryTree(10**5, budget=pure, k=19, subtract=True, rng=seed)),
    ):
        out[f"{name} batch s{seed}"] = _h(mm.release(r.integers(0, 2, mm.horizon).astype(float)))
        s = mm.stream()
        out[f"{name} stream s{seed}"] = _h([s.update(float(v)) for v in r.integers(0, 3, 3000)])


def _snaps(out: dict[str, str], seed: int, r: np.random.Generator) -> None:
    from dpcount.privacy.float_safe import snap_release

    n = 5000
    sums = [
        np.cumsum(r.integers(-3, 4, n)).astype(float),
        np.cumsum(r.integers(-3, 4, n)),
        np.cumsum(r.integers(0, 4, n)),
        np.zeros(n),
        -np.zeros(n),
        r.normal(0, 1e6, n),
        np.full(n, 3.0),
        np.full(n, -3.0),
    ]
    for i, sm in enumerate(sums):
        for g in (0.25, 1.0, 4.0, 2.0**-30, 2.0**40):
            noise = r.normal(0, 6 * g, n)
            noise[:8] = [0.0, -0.0, g / 2, -g / 2, 5e-324, -5e-324, 1.5 * g, -2.5 * g]
            low = float(np.min(sm))
            for known in ((None, None), (low, 2.0**53), (low, None)):
                key = f"snap {i} g={g} {known[0] is None}{known[1] is None} s{seed}"
                out[key] = _h(snap_release(sm, noise.copy(), g, known=known))


def _vector_batches(out: dict[str, str], seed: int) -> None:
    """The BLT's vector batch release (widths 2, 3, 4, 16) at long horizons: one block
    below and above ``_IN_DRAWS_VALUES``, several blocks of ``next_many``, compensated
    decays from 2^17 on; zeros, whole and fractional steps, a partial release, and a
    vector stream's ``update_many`` after three steps (``update`` up to 2^16). Its own
    generator, so the digests above keep their inputs."""
    from dpcount.counting import BLT
    from dpcount.privacy import Budget

    budget = Budget(epsilon=1.0, delta=1e-6)
    r = np.random.default_rng(200 + seed)
    for T, dims in (
        (1000, (2, 4)),
        (2**16, (2, 4, 16)),
        (2**17 + 5, (3, 4)),
        (10**6, (2, 4, 16)),
        (2**22 + 3, (4,)),
    ):
        m = BLT.optimized(T, budget=budget, rng=seed)
        for d in dims:
            key = f"blt vector batch T={T} d={d} s{seed}"
            kinds = [("zeros", np.zeros((T, d)))]
            if T < 2**22:
                kinds += [
                    ("ints", r.integers(-1, 3, (T, d)).astype(float)),
                    ("frac", r.normal(0, 1, (T, d))),
                    ("partial", r.integers(0, 3, (T - T // 3 - 5, d)).astype(float)),
                ]
            for kind, x in kinds:
                out[f"{key} {kind}"] = _h(m.release(x))
            if T < 2**22:
                s = m.stream()  # vector steps (``update``) only up to 2^16: their float model
                first = r.integers(0, 3, (3, d)).astype(float)
                res = [s.update(x) for x in first] if T <= 2**16 else [s.update_many(first)]
                res.append(s.update_many(r.integers(-1, 2, (T - 3, d)).astype(float)))
                out[f"{key} stream"] = _h(np.concatenate([np.ravel(a) for a in res]))


def digests() -> dict[str, str]:
    """Every digest, keyed by what was released."""
    out: dict[str, str] = {}
    for seed in (1, 2, 3):
        r = np.random.default_rng(100 + seed)
        _batch(out, seed, r)
        _streams(out, seed, r)
        _snaps(out, seed, r)
        _vector_batches(out, seed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", metavar="FILE", help="write this tree's digests")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(Path(f).read_text()) for f in args.compare)
        differ = sorted(k for k in before if before[k] != after.get(k))
        print(f"{len(before)} digests compared, {len(differ)} differ")
        for key in differ:
            print("  differs:", key)
        sys.exit(1 if differ or set(before) != set(after) else 0)
    found = digests()
    if args.write:
        Path(args.write).write_text(json.dumps(found, indent=0, sort_keys=True))
    print(f"{len(found)} digests")


if __name__ == "__main__":
    main()
