"""What the apps do with a record outside their declared bounds: refuse it, or clip it.

The guarantee of an app with input bounds (a value range, at most b items or m
pairs per step, …) is a statement about streams *within* the bounds. Refusing
an out-of-bound record (``on_out_of_bounds="error"``, the default) stops the
stream with an error, and that stop is itself a data-dependent signal: whoever
sees that the stream ended early, or ended at step t, learns that some record
(the one at step t) was out of bounds. No DP guarantee covers that signal; it
is fine while the errors reach only the data holder (who sees the raw data
anyway), not when the release's length or timing is public.

``on_out_of_bounds="clip"`` maps every record into the bounds by a fixed rule
that looks at that record only (e.g. a value to the nearest bound). The
mechanism then runs on the clipped stream, whose records are within the bounds,
so the sensitivity and the guarantee are unchanged: two raw streams that differ
in one record give clipped streams that differ in (at most) that record, and
the app's guarantee covers them whenever the clipped records are neighbours
under its relation (for a value range: always). The release is that of the
clipped data (biased where clipping happened), and the stream never stops on
data.

The number of clipped records is reported in the app's ``clipped`` attribute
for data-quality monitoring. It is an exact, *non-private* function of the
data: it is for the data holder (the caller, who holds the raw records anyway)
and must not be published with the release. To publish it, count the clipped
records with a counting mechanism of their own (and its own budget).
"""

from __future__ import annotations

from dpcount._validate import check_choice

__all__ = ["OUT_OF_BOUNDS_CHOICES", "check_on_out_of_bounds"]

#: the values of every app's ``on_out_of_bounds`` option
OUT_OF_BOUNDS_CHOICES = ("error", "clip")


def check_on_out_of_bounds(value: object) -> str:
    """``on_out_of_bounds`` is ``"error"`` or ``"clip"`` (see the module docstring)."""
    return check_choice("on_out_of_bounds", value, OUT_OF_BOUNDS_CHOICES)
