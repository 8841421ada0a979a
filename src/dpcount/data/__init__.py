"""Example data shipped with dpcount (see ATTRIBUTION.md)."""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["load_searchlogs", "load_table"]


def load_searchlogs() -> NDArray[np.int64]:
    """SEARCHLOGS: frequency of one search term over time, 2004–2010, 4096 steps.

    From the DPBench benchmark (Hay et al., SIGMOD 2016), as shipped in the public
    ``dpcomp_core`` repository; see ``ATTRIBUTION.md`` in this folder.
    """
    from importlib import resources

    with resources.files(__package__).joinpath("searchlogs.npy").open("rb") as fh:
        data: NDArray[np.int64] = np.asarray(np.load(fh), dtype=np.int64)
    return data


@cache
def load_table(name: str) -> dict[str, Any]:
    """The JSON table ``name`` shipped in this folder (shipped optima, parameters and
    losses), read once and shared: callers must not modify it. Read from this folder's
    path (a package installed as files; ``importlib.resources`` costs more to import
    than a small job's table read)."""
    with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data
