"""Example data shipped with dpcount (see ATTRIBUTION.md)."""

from __future__ import annotations

from importlib import resources

import numpy as np
from numpy.typing import NDArray

__all__ = ["load_searchlogs"]


def load_searchlogs() -> NDArray[np.int64]:
    """SEARCHLOGS: frequency of one search term over time, 2004–2010, 4096 steps.

    From the DPBench benchmark (Hay et al., SIGMOD 2016), as shipped in the public
    ``dpcomp_core`` repository; see ``ATTRIBUTION.md`` in this folder.
    """
    with resources.files(__package__).joinpath("searchlogs.npy").open("rb") as fh:
        data: NDArray[np.int64] = np.asarray(np.load(fh), dtype=np.int64)
    return data
