"""Times in CSV inputs (the library's :mod:`dpcount._time`, shared with ``dpcount.frame``)."""

from dpcount._time import Clock, Step, parse_step

__all__ = ["Clock", "Step", "parse_step"]
