"""Whether numpy's long double is wider than a double, and the horizons that depends on.

The scaled BLT presets' long forms (:func:`~dpcount.counting.factorization.
normalized_blt.across_levels_exact`) take the powers λ^{c·k} of their level matrices in
numpy's long double and split them into a pair of doubles; their float error — the
float model the float-safe release's δ rests on (:mod:`dpcount.privacy.float_safe`) —
was measured with a long double of 64 significant bits (x87 extended: x86-64 Linux).
Where numpy's long double is a plain double (Windows, macOS on Apple silicon) the pair's
low part is 0 and the powers carry the double's rounding, a computation never measured:
there the presets stop where their plain forms do, and a longer horizon is refused by
the same check as any horizon past a measured limit. (IEEE quad, as on aarch64 Linux,
is wider: the same powers, more accurately.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["EXTENDED_LONG_DOUBLE", "SCALED_BLT_LONG_HORIZON", "scaled_blt_limit"]

#: numpy's long double has at least 64 significant bits (63 stored mantissa bits)
EXTENDED_LONG_DOUBLE: bool = bool(np.finfo(np.longdouble).nmant >= 63)
#: the largest horizon of the scaled BLT presets' long forms (measured: blt.FLOAT_MODEL_HORIZONS)
SCALED_BLT_LONG_HORIZON = 1 << 24


def scaled_blt_limit(plain: int, *, extended: bool = EXTENDED_LONG_DOUBLE) -> int:
    """The largest horizon of a scaled BLT preset whose plain forms are measured up to
    ``plain``: :data:`SCALED_BLT_LONG_HORIZON` with its long forms where the long double
    is ``extended`` (:data:`EXTENDED_LONG_DOUBLE`), else ``plain``."""
    return SCALED_BLT_LONG_HORIZON if extended else plain
