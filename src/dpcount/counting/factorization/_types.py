"""The array type the factorization modules share."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Array"]

#: a float64 array (coefficients, kernels, variances, noise)
Array = NDArray[np.float64]
