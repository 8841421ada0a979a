"""dpcount: differentially private counting over time and over ranges."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpcount._version import __version__

if TYPE_CHECKING:
    from dpcount.privacy.budget import Participation

__all__ = ["Participation", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy: ``import dpcount`` (and ``dpcount --version``) must not import numpy/scipy.
    if name == "Participation":
        from dpcount.privacy.budget import Participation

        return Participation
    raise AttributeError(f"module 'dpcount' has no attribute {name!r}")
