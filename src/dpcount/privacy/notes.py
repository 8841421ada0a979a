"""What a release says besides its numbers: warnings about the budget and about
public parameters read off the data, worded once for every front end.

The CLI prints these strings on stderr; the library puts them into the text it
returns (:meth:`~dpcount.privacy.PrivacyGuarantee.describe`) or issues them as a
:class:`PrivacyWarning` (``dpcount.frame``), so a test run with
``filterwarnings = error`` can expect exactly this category.

References:
    * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
      Foundations and Trends in Theoretical Computer Science 9(3–4), 2014, §2.3
      (δ "less than the inverse of any polynomial in the size of the database").
      https://doi.org/10.1561/0400000042
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DELTA_WARNING_THRESHOLD",
    "PrivacyWarning",
    "data_derived_warning",
    "delta_warning",
]

#: δ above this is warned about: a δ-probability event may expose one person entirely,
#: so δ must be much smaller than 1/n for n people (1e-3 is already weak for n = 1000)
DELTA_WARNING_THRESHOLD = 1e-3


class PrivacyWarning(UserWarning):
    """A release that is valid but weaker than it looks (a large δ, a public
    parameter read off the data, floating-point noise on integer data)."""


def delta_warning(delta: float | None, *, parameter: str = "delta") -> str | None:
    """The warning for a δ in (:data:`DELTA_WARNING_THRESHOLD`, 1), else None.

    An (ε, δ)-DP release may fail with probability δ in the worst case, exposing a
    person's data entirely; with n people a δ near 1/n allows that for one of them.
    The usual rule is δ much smaller than 1/n (Dwork & Roth 2014, §2.3).

    Args:
        delta: the δ (None: pure DP, no warning).
        parameter: how the front end spells it (``"delta"`` gives ``delta=0.5``, a
            flag such as ``"--delta"`` gives ``--delta 0.5``).
    """
    if delta is None or not DELTA_WARNING_THRESHOLD < delta < 1:
        return None  # δ ≥ 1 is not a guarantee at all: refused by validation, not warned
    given = f"{parameter} {delta:g}" if parameter.startswith("-") else f"{parameter}={delta:.3g}"
    return (
        f"{given} is above {DELTA_WARNING_THRESHOLD:g} and gives little protection: "
        "with probability delta the guarantee may fail outright; the usual rule is delta much "
        "smaller than 1 / (the number of people in the data), e.g. 1e-6 or less"
    )


def data_derived_warning(names: Sequence[str]) -> str:
    """The warning for public parameters taken from the data (not private), e.g.
    ``["--start", "--horizon"]``: the first and last event times then appear in the
    release (as step labels and as its length)."""
    if not names:
        raise ValueError("names must not be empty")
    return (
        f"warning: {' and '.join(names)} taken from the data (not private); "
        "pass them explicitly for a fully private release"
    )
