"""Regenerate src/dpcount/data/normalized_sqrt_losses.json (blocked column-normalized
square root, T = 2^15 … 2^22, block ratio 1.1).

For each T = 2^k the exact per-step variances of
``NormalizedSqrtFactorization(T)`` (the default block ratio
:data:`~dpcount.counting.factorization.normalized_sqrt.DEFAULT_BLOCK_RATIO`), by
:func:`~dpcount.counting.factorization.normalized_sqrt.normalized_sqrt_losses`: O(m·T log T) per T,
deterministic (no randomness, exact integer block boundaries). The table lets
:func:`dpcount.analysis.certificates.best_known_loss` answer instantly for these
horizons; ``tests/analysis/test_certificates.py`` recomputes the smaller entries.

Run: ``PYTHONPATH=src python benchmarks/make_normalized_sqrt_losses.py [MAX_LOG2]``
(about a minute in all on the 2-core development machine, half of it at 2^22).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dpcount.counting.factorization.normalized_sqrt import (
    DEFAULT_BLOCK_RATIO,
    NORMALIZED_SQRT_MAX_HORIZON,
    normalized_sqrt_block_starts,
    normalized_sqrt_losses,
)

OUT = (
    Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data" / "normalized_sqrt_losses.json"
)


def main() -> None:
    max_log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 22
    first = NORMALIZED_SQRT_MAX_HORIZON.bit_length()  # 15: the first blocked power of two
    rows: dict[str, dict[str, float | int]] = {}
    for k in range(first, max_log2 + 1):
        T = 1 << k
        start = time.perf_counter()
        mean, mx = normalized_sqrt_losses(T, block_ratio=DEFAULT_BLOCK_RATIO)
        blocks = len(normalized_sqrt_block_starts(T, DEFAULT_BLOCK_RATIO))
        rows[str(k)] = {"mean_loss": mean, "max_loss": mx, "blocks": blocks}
        print(
            f"T = 2^{k}: {blocks} blocks, mean {mean:.6f}, max {mx:.6f} "
            f"({time.perf_counter() - start:.1f} s)",
            flush=True,
        )
    data = {
        "description": "exact (mean, max) loss of the blocked column-normalized square "
        "root (NormalizedSqrtFactorization, block_ratio below) at T = 2^k; "
        "benchmarks/make_normalized_sqrt_losses.py",
        "block_ratio": DEFAULT_BLOCK_RATIO,
        "losses": rows,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
