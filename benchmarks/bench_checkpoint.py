"""Cost of durable streams: checkpoint save/load, and ``dpcount count --checkpoint`` per step.

Each time is printed as a RATIO to a floor measured in the same run on the same
bytes:

* save ÷ (atomic write of the same number of bytes with plain os calls: open,
  write, fsync, rename, fsync of the folder) — what serializing adds to the I/O;
* load ÷ (reading the file and hashing it with SHA-256) — what parsing, checking
  and rebuilding the mechanism add;
* ``dpcount count --checkpoint`` (every step) per step ÷ (one atomic write of a
  checkpoint-sized file plus one fsync of the output) — the protocol's own cost
  above its minimum I/O.

fsync dominates on a disk (milliseconds); on tmpfs it is nearly free, so the
ratios there show the CPU cost. Choose the folder with --dir.

Usage: python benchmarks/bench_checkpoint.py [--dir DIR] [--repeats R] [--steps N]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from _timing import best_of  # benchmarks/_timing.py
from dpcount.cli import main as cli_main
from dpcount.counting import (
    CountingStream,
    KaryTree,
    SqrtFactorization,
    load_stream,
    save_stream,
)


def plain_atomic_write(path: Path, data: bytes) -> None:
    tmp = str(path) + ".plain"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)


def read_and_hash(path: Path) -> None:
    hashlib.sha256(path.read_bytes()).digest()


def streams() -> list[tuple[str, CountingStream]]:
    out = []
    tree = KaryTree(10**6, epsilon=1.0, rng=1).stream()
    tree.update_many(np.ones(10**5 - 7))
    for _ in range(7):
        tree.update(1.0)  # fills the scalar noise buffer (1024 samples)
    out.append(("kary-19-sub, scalar, step 1e5", tree))
    vec = KaryTree(10**5, epsilon=1.0, noise="gaussian", delta=1e-6, rng=1).stream()
    vec.update(np.ones(16))  # the vector buffer pre-draws 2^20 values (8 MiB)
    out.append(("kary-19-sub, 16-vector, step 1", vec))
    sq = SqrtFactorization(10**6, epsilon=1.0, delta=1e-6, rng=1).stream()
    sq.update_many(np.ones(3 * 10**5))
    sq.update(1.0)  # z and noise computed ahead to the next doubling
    out.append(("sqrt, scalar, step 3e5", sq))
    return out


def bench_library(folder: Path, repeats: int) -> None:
    print(f"{'stream':<34}{'bytes':>11}{'save ms':>9}{'÷ floor':>9}{'load ms':>9}{'÷ floor':>9}")
    for name, stream in streams():
        path = folder / "bench.ckpt"
        save_stream(stream, path)
        data = path.read_bytes()
        t_save = t_write = t_load = t_read = float("inf")
        for _ in range(repeats):  # interleaved, so background load hits both alike
            t_save = min(t_save, best_of(lambda s=stream, p=path: save_stream(s, p), 1))
            t_write = min(t_write, best_of(lambda d=data: plain_atomic_write(folder / "p", d), 1))
            t_load = min(t_load, best_of(lambda p=path: load_stream(p), 1))
            t_read = min(t_read, best_of(lambda p=path: read_and_hash(p), 1))
        print(
            f"{name:<34}{len(data):>11,}{t_save * 1e3:>9.2f}{t_save / t_write:>8.2f}×"
            f"{t_load * 1e3:>9.2f}{t_load / t_read:>8.2f}×"
        )


def bench_cli(folder: Path, steps: int, repeats: int) -> None:
    values = np.random.default_rng(0).integers(0, 6, size=steps)
    text = "x\n" + "".join(f"{v}\n" for v in values)
    src = folder / "data.csv"
    src.write_text(text)
    out, ck = folder / "out.csv", folder / "cli.ckpt"

    def durable(every: int) -> None:
        for p in (out, ck):
            p.unlink(missing_ok=True)
        argv = ["count", str(src), "--epsilon", "1", "--seed", "1"]
        argv += ["--checkpoint", str(ck), "--output", str(out), "--checkpoint-every", str(every)]
        stderr, sys.stderr = sys.stderr, io.StringIO()
        try:
            assert cli_main(argv) == 0
        finally:
            sys.stderr = stderr

    durable(1)
    size = ck.stat().st_size
    payload = os.urandom(size)

    def floor() -> None:
        with open(folder / "o", "ab") as fh:
            for _ in range(steps):
                plain_atomic_write(folder / "f", payload)
                fh.write(b"1,2.0,3.0\n")
                fh.flush()
                os.fsync(fh.fileno())

    t1 = t100 = t_floor = float("inf")
    for _ in range(repeats):
        t1 = min(t1, best_of(lambda: durable(1), 1))
        t100 = min(t100, best_of(lambda: durable(100), 1))
        t_floor = min(t_floor, best_of(floor, 1))
    print(
        f"dpcount count --checkpoint, {steps} steps, checkpoint {size:,} bytes: "
        f"{t1 / steps * 1e3:.3f} ms/step every step ({t1 / t_floor:.2f}× the I/O floor "
        f"{t_floor / steps * 1e3:.3f} ms/step); --checkpoint-every 100: "
        f"{t100 / steps * 1e3:.3f} ms/step"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        folder = Path(name)
        print(f"folder: {folder}")
        bench_library(folder, args.repeats)
        bench_cli(folder, args.steps, max(1, args.repeats // 2))


if __name__ == "__main__":
    main()
