"""Apps' hot paths: time as a ratio to the underlying counting mechanism in the same run.

Floors (same mechanism, same shapes, measured in this run):

* histogram ``update_many`` of (T, u) item vectors  ÷  ``mechanism.release`` of the same data;
* histogram ``update(items)`` per step               ÷  ``stream().update`` of a length-u vector;
* substring / episode ``update(letter)``              ÷  ``stream().update`` of a length-d vector;
* synthetic graph ``update([(u, v, w)])``  ÷  ``stream().update`` of an n(n−1)/2 vector;
* ``LocalMedianProtocol.run`` (n clients)  ÷  ``mechanism.release`` of (w, 2n) zeros in the
  same blocks of clients.

Targets: every ratio ≤ 1.5 (the apps add validation and encoding, never a second
pass over the noise).

Usage: python benchmarks/bench_apps.py [--repeats R]
"""

from __future__ import annotations

import argparse

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    LocalMedianProtocol,
    SubstringCounter,
    SyntheticGraph,
)


def row(name: str, app: float, floor: float) -> None:
    print(f"{name:<46}{app:>10.4f}{floor:>10.4f}{app / floor:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    R = args.repeats
    rng = np.random.default_rng(0)
    print(f"{'hot path':<46}{'app s':>10}{'floor s':>10}{'ratio':>9}")

    # Histogram, large universe, batch.
    T, u, b = 2000, 10_000, 4
    hist = ContinualHistogram(u, T, epsilon=1.0, max_items_per_step=b, rng=1)
    x = np.zeros((T, u), dtype=np.int64)
    for t in range(T):
        x[t, rng.choice(u, size=b, replace=False)] = 1
    app = best_of(lambda: hist.with_sampler(hist.mechanism.sampler).update_many(x), R)
    x_float = x.astype(np.float64)  # not np.zeros: calloc'ed zero pages would flatter the floor
    floor = best_of(lambda: hist.mechanism.release(x_float), R)
    row(f"histogram update_many (T={T}, u={u:,})", app, floor)

    # Per-step paths run 1024 steps: the streams pre-draw noise in blocks of 1024
    # steps, so app and floor draw the same samples.
    # Histogram, per step.
    steps = 1024
    items = [list(rng.choice(u, size=b, replace=False)) for _ in range(steps)]

    def per_step_app() -> None:
        h = hist.with_sampler(hist.mechanism.sampler)
        for it in items:
            h.update(it)

    def per_step_floor() -> None:
        s = hist.mechanism.stream()
        v = np.zeros(u)
        for _ in range(steps):
            s.update(v)

    row(
        f"histogram update(items) x{steps} (u={u:,})",
        best_of(per_step_app, R),
        best_of(per_step_floor, R),
    )

    # Strings.
    text = "".join(rng.choice(list("abcdefghij"), size=1024))
    for cls, ell in ((SubstringCounter, 4), (EpisodeCounter, 4)):
        app_obj = cls("abcdefghij", ell, len(text), epsilon=1.0, rng=2)
        d = app_obj.dim

        def string_app(a=app_obj) -> None:
            fresh = a.with_sampler(a.mechanism.sampler)
            for ch in text:
                fresh.update(ch)

        def string_floor(a=app_obj, d=d) -> None:
            s = a.mechanism.stream()
            v = np.zeros(d)
            for _ in text:
                s.update(v)

        row(
            f"{cls.__name__} update x{len(text)} (d={d:,})",
            best_of(string_app, R),
            best_of(string_floor, R),
        )

    # Synthetic graph.
    n, T = 150, 1024
    graph = SyntheticGraph(n, T, epsilon=1.0, delta=1e-6, mechanism="kary", rng=3)
    edges = [
        (int(a), int(c), float(w))
        for a, c, w in zip(
            rng.integers(0, 75, T), rng.integers(75, n, T), rng.uniform(size=T), strict=True
        )
    ]

    def graph_app() -> None:
        g = graph.with_sampler(graph.mechanism.sampler)
        for e in edges:
            g.update([e])

    def graph_floor() -> None:
        s = graph.mechanism.stream()
        v = np.zeros(graph.n_pairs)
        for _ in edges:
            s.update(v)

    row(
        f"SyntheticGraph update x{T} (pairs={graph.n_pairs:,})",
        best_of(graph_app, R),
        best_of(graph_floor, R),
    )

    # Local median: clients simulated vectorized.
    n_clients = 200_000
    protocol = LocalMedianProtocol(n_clients, epsilon=1.0, rng=4)
    data = rng.beta(2, 5, size=n_clients)
    w = protocol.buckets
    app = best_of(lambda: protocol.run(data), R)
    block = max(1, (1 << 21) // (2 * w))  # the protocol's block of clients

    def local_floor() -> None:
        for start in range(0, n_clients, block):
            c = min(block, n_clients - start)
            protocol.mechanism.release(np.zeros((w, 2 * c)))

    floor = best_of(local_floor, R)
    row(f"LocalMedianProtocol.run (n={n_clients:,}, w={w})", app, floor)


if __name__ == "__main__":
    main()
