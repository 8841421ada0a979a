"""Keyed continual counters: private running counts for many streams (keys) at once.

* :mod:`dpcount.keyed.prf` — noise as a pure function of a secret and a position;
* :mod:`dpcount.keyed.secret` — the run secret file (as sensitive as the raw data).
"""

from __future__ import annotations

from dpcount.keyed.prf import PositionPRF
from dpcount.keyed.secret import RunSecret

__all__ = ["PositionPRF", "RunSecret"]
