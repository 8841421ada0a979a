"""dpcount: differentially private counting over time and over ranges."""

__version__ = "0.1.0"
