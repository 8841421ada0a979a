"""dpcount: differentially private counting over time and over ranges."""

from dpcount._version import __version__

__all__ = ["__version__"]
