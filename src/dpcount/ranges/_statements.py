"""The range mechanisms' shared guarantee text, written once for every docstring.

Every range mechanism is neighbour-for-neighbour the same (histograms differing by
at most 1 in one cell) and offers the same two noise kinds; only the ℓ₂ sensitivity
Δ₂ of the vector it perturbs differs. :func:`range_statements` puts the relation
where a docstring's line ``[range neighbouring relation]`` stands, the noise kinds'
statements for the mechanism's Δ₂ where ``[range noise kinds: all; Δ₂ = EXPR]`` (or
``gaussian``: the Gaussian only) stands, and the works they cite where
``[noise kinds references]`` stands. The wording and citations are those of
:mod:`dpcount.privacy._statements`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

from dpcount.privacy._statements import REFERENCES

__all__ = ["NEIGHBOURING_RELATION", "RANGE_STATEMENTS", "range_statements"]

_T = TypeVar("_T", bound=type)

#: the neighbouring relation every range mechanism's guarantee is for
NEIGHBOURING_RELATION = (
    "Neighbouring relation: histograms x, x' that differ by at most 1 in one cell, "
    "‖x−x'‖₁ ≤ 1 (one record added or removed)."
)

#: noise kind -> its DP statement for a vector with ℓ₂ sensitivity Δ₂ = ``{sensitivity}``
RANGE_STATEMENTS: dict[str, str] = {
    "gaussian": '``"gaussian"`` (default): (ε, δ)-DP, continuous N(0, σ²) noise with σ for '
    "ℓ₂ sensitivity Δ₂ = {sensitivity} by the analytic Gaussian mechanism (Balle & Wang 2018, "
    'Theorem 8; ``calibration="analytic"``, default, exact for every ε), the tail bound of '
    'correlated-input-perturbation Thm 3.7 (``"paper"``, ε ≤ 1) or the classic bound '
    '(``"classic"``, Dwork & Roth 2014, Thm A.1).',
    "discrete-gaussian": '``"discrete-gaussian"`` (whole-number cells): ρ-zCDP with '
    "ρ = Δ₂²/(2σ²) (Canonne, Kamath, Steinke 2020, Thm 14), reported as (ε, δ)-DP by their "
    'Corollary 13 (``calibration="zcdp"``).',
}

_CITED = ("bw18", "cks20", "dr14")

_RELATION = re.compile(r"^( *)\[range neighbouring relation\]$", re.MULTILINE)
_KINDS = re.compile(r"^( *)\[range noise kinds: (gaussian|all); Δ₂ = (.+)\]$", re.MULTILINE)
_CITATIONS = re.compile(r"^( *)\[noise kinds references\]$", re.MULTILINE)


def _fill(text: str, indent: str, bullet: str = "") -> str:
    return textwrap.fill(
        text,
        width=88,
        initial_indent=f"{indent}{bullet}",
        subsequent_indent=indent + " " * len(bullet),
        break_on_hyphens=False,
    )


def _expand(doc: str, owner: str, marker: re.Pattern[str], render: Callable[..., str]) -> str:
    """``doc`` with the line ``marker`` matches replaced by ``render(*its groups)``."""
    found = marker.search(doc)
    if found is None:
        raise ValueError(f"{owner}'s docstring has no {marker.pattern!r} line")
    return doc[: found.start()] + render(*found.groups()) + doc[found.end() :]


def _bullets(texts: list[str], indent: str) -> str:
    return "\n".join(_fill(text, indent, "* ") for text in texts)


def range_statements(cls: _T) -> _T:
    """Class decorator: expand the three marker lines of a range mechanism's docstring
    (see the module docstring).

    Raises:
        ValueError: a marker line is missing (a mechanism would lose its guarantee or
            its citations silently).
    """
    doc = cls.__doc__
    if doc is None:  # python -OO strips docstrings
        return cls
    name = cls.__name__
    doc = _expand(doc, name, _RELATION, lambda indent: _fill(NEIGHBOURING_RELATION, indent))

    def kinds(indent: str, which: str, sensitivity: str) -> str:
        chosen = ("gaussian",) if which == "gaussian" else ("gaussian", "discrete-gaussian")
        return _bullets(
            [RANGE_STATEMENTS[k].format(sensitivity=sensitivity) for k in chosen], indent
        )

    doc = _expand(doc, name, _KINDS, kinds)
    cited = [REFERENCES[k] for k in _CITED]
    cls.__doc__ = _expand(doc, name, _CITATIONS, lambda indent: _bullets(cited, indent))
    return cls
