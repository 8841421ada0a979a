"""Times in CSV inputs (the library's :mod:`dpcount._time`, shared with ``dpcount.frame``)."""

from dpcount._time import Clock, parse_width

__all__ = ["Clock", "parse_width"]
