"""Cost of the secure default generator (rng=None) in the tree benchmark.

Times ``release`` of the tree mechanisms at T = 10^7 (as benchmarks/bench_tree.py)
with the secure default generator (AES-CTR with AES-NI, else ChaCha20) and with a
seeded PCG64 Generator, in the same run, and prints the ratio secure ÷ PCG64.
Target (issue #7): ≤ 2×. Also times ChaCha20 explicitly (the fallback without AES-NI)
and the discrete-Laplace tree.

Usage: python benchmarks/bench_secure_rng.py [--horizon T] [--repeats R]
"""

from __future__ import annotations

import argparse
import secrets

import numpy as np
from randomgen import ChaCha

from _timing import best_of  # benchmarks/_timing.py
from dpcount.counting import BinaryTree, KaryTree
from dpcount.privacy import secure_generator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--horizon", type=int, default=10**7)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    T, R = args.horizon, args.repeats
    x = np.random.default_rng(0).integers(0, 2, size=T)
    secure = secure_generator()
    chacha = np.random.Generator(ChaCha(key=secrets.randbits(256), rounds=20))
    print(f"T = {T:,}; secure default = {type(secure.bit_generator).__name__}")
    print(
        f"{'mechanism':<36}{'PCG64 s':>9}{'secure s':>10}{'÷ PCG64':>9}{'ChaCha20 s':>12}{'÷':>7}"
    )
    builds = [
        ("kary-19-sub laplace", lambda g: KaryTree(T, epsilon=1.0, k=19, subtract=True, rng=g)),
        ("binary laplace", lambda g: BinaryTree(T, epsilon=1.0, rng=g)),
        (
            "binary gaussian",
            lambda g: BinaryTree(T, epsilon=1.0, delta=1e-6, noise="gaussian", rng=g),
        ),
        (
            "binary discrete-laplace",
            lambda g: BinaryTree(T, epsilon=1.0, noise="discrete-laplace", rng=g),
        ),
    ]
    for name, build in builds:
        pcg = build(np.random.default_rng(1))
        sec = build(secure)
        cha = build(chacha)
        # Interleaved best-of-R, so load from other processes hits all three alike.
        t_pcg = t_sec = t_cha = float("inf")
        for _ in range(R):
            t_pcg = min(t_pcg, best_of(lambda m=pcg: m.release(x), 1))
            t_sec = min(t_sec, best_of(lambda m=sec: m.release(x), 1))
            t_cha = min(t_cha, best_of(lambda m=cha: m.release(x), 1))
        print(
            f"{name:<36}{t_pcg:>9.3f}{t_sec:>10.3f}{t_sec / t_pcg:>8.2f}×"
            f"{t_cha:>12.3f}{t_cha / t_pcg:>6.2f}×"
        )
    print("target: secure ÷ PCG64 ≤ 2× (batch release, T = 10^7)")


if __name__ == "__main__":
    main()
