"""Regenerate src/dpcount/data/row_scaled_sqrt_losses.json: the exact mean and max loss
of :class:`dpcount.counting.factorization.row_scaled_sqrt.RowScaledSqrtFactorization` (default
weights) at T = 2^0 … 2^14, for :func:`dpcount.analysis.certificates.best_known_loss`
(the O(T²) variances take ≈ 1 min at 2^14, too slow for ``dpcount plan``).

Loss: the mechanism's variance over that of a sensitivity-1 Gaussian at the same
budget, so its calibrated sensitivity 1 + 10⁻⁹ (the rounding margin) is included.
Deterministic.

Run: ``PYTHONPATH=src python benchmarks/make_row_scaled_losses.py`` (≈ 2 min).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from dpcount.counting.factorization.row_scaled_sqrt import (
    ROW_SCALED_MAX_HORIZON,
    RowScaledSqrtFactorization,
)
from dpcount.privacy.calibration import gaussian_sigma

OUT = (
    Path(__file__).resolve().parents[1] / "src" / "dpcount" / "data" / "row_scaled_sqrt_losses.json"
)


def main() -> None:
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    rows: dict[str, dict[str, float]] = {}
    k = 0
    while 1 << k <= ROW_SCALED_MAX_HORIZON:
        begin = time.perf_counter()
        m = RowScaledSqrtFactorization(1 << k, epsilon=1.0, delta=1e-6)
        rows[str(k)] = {"mean_loss": m.mse() / unit, "max_loss": m.max_variance() / unit}
        print(k, rows[str(k)], f"{time.perf_counter() - begin:.1f}s", flush=True)
        k += 1
    OUT.write_text(
        json.dumps(
            {
                "generated_by": "benchmarks/make_row_scaled_losses.py",
                "generated": time.strftime("%Y-%m-%d"),
                "loss": "sensitivity-1 Gaussian units with the mechanism's sensitivity",
                "row_scaled_sqrt": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
