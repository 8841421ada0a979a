"""dpcount: differentially private counting over time and over ranges."""

from dpcount._version import __version__
from dpcount.privacy.budget import Participation

__all__ = ["Participation", "__version__"]
