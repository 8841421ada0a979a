"""Declared stream memory against tracemalloc and RSS, per mechanism (issue 20 item 2).

For each registry mechanism and horizon T (``--horizons``) at vector steps of length
d (``--dim``, default 10^5) one fresh interpreter builds the mechanism, then streams
T steps of ones and reports:

* declared: the class's ``memory_estimate(T, d).stream`` (what ``plan --dim``,
  ``compare(dim=)`` and the stream-start check read);
* tracemalloc: the peak of Python and numpy allocations while streaming;
* RSS: the peak resident set (VmHWM) minus the resident set before streaming
  (VmRSS), from /proc/self/status (Linux); the allocator keeps freed pages, so it
  is at least the tracemalloc peak of the large arrays.

Mechanisms whose declared structure and stream exceed ``--memory`` (default 4GiB)
are skipped, as ``compare(dim=, memory=)`` skips them. The structure includes, since
2026-12-07, the float-safe grid table a batch release keeps on the mechanism (the trees
and Honaker: up to 16 bytes a step to 2^22 steps); streams never build it (they read
their grids block by block), so it is not in the streamed figures here:
``tests/counting/test_memory.py`` measures it after a release. Each run is its own process
(so RSS figures do not mix). On a machine shared with other work the figures stay
valid (memory, not time).

Usage: python benchmarks/bench_memory.py [--dim D] [--horizons T1,T2] [--memory 4GiB]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tracemalloc

import numpy as np

from dpcount.counting.base import format_bytes, parse_bytes
from dpcount.counting.registry import MECHANISMS, build_mechanism, memory_estimate
from dpcount.privacy import Budget

_DISCRETE_FREE = ("binary", "kary", "honaker", "input", "smooth-binary")


def _status(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def one(name: str, horizon: int, dim: int) -> dict[str, float]:
    """Stream ``horizon`` vector steps of ``dim`` ones; the three figures in bytes."""
    noise = "laplace" if name in _DISCRETE_FREE else "gaussian"
    budget = Budget(epsilon=1.0, delta=1e-6, noise=noise)
    mech = build_mechanism(name, horizon=horizon, budget=budget, rng=1, memory="1TiB")
    x = np.ones(dim)
    declared = mech.stream_state_bytes(dim)
    rss_before = _status("VmRSS")
    tracemalloc.start()
    stream = mech.stream()
    for _ in range(horizon):
        stream.update(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"declared": declared, "tracemalloc": peak, "rss": _status("VmHWM") - rss_before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dim", type=int, default=100_000)
    parser.add_argument("--horizons", default="32,128")
    parser.add_argument("--memory", default="4GiB")
    parser.add_argument("--one", nargs=3, metavar=("NAME", "T", "D"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        name, horizon, dim = args.one
        print(json.dumps(one(name, int(horizon), int(dim))))
        return
    limit = parse_bytes("--memory", args.memory)
    print(f"d = {args.dim:,}; declared vs tracemalloc peak vs RSS growth, one process each")
    print(f"{'mechanism':16s} {'T':>6s} {'declared':>10s} {'tracemalloc':>12s} {'RSS':>10s}  ratio")
    for horizon in (int(t) for t in args.horizons.split(",")):
        for name in MECHANISMS:
            if memory_estimate(name, horizon, args.dim).total > limit:
                print(f"{name:16s} {horizon:6d} skipped: does not fit in {args.memory}")
                continue
            cmd = [sys.executable, __file__, "--one", name, str(horizon), str(args.dim)]
            result = json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)
            print(
                f"{name:16s} {horizon:6d} {format_bytes(result['declared']):>10s} "
                f"{format_bytes(result['tracemalloc']):>12s} {format_bytes(result['rss']):>10s}"
                f"  {result['tracemalloc'] / result['declared']:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
