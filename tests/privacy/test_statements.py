"""The citations written once (privacy/_statements.py): module docstrings' marker."""

from __future__ import annotations

import pytest

import dpcount.counting.factorization.horizon_free as horizon_free
import dpcount.experiments.elders as elders
import dpcount.experiments.ranges_speed as ranges_speed
from dpcount.privacy._statements import REFERENCES, cite


def test_cite_expands_the_marker_at_its_indentation() -> None:
    doc = cite("Title.\n\nReferences:\n    [references: elders, dggw24]\n")
    assert doc is not None
    assert "[references" not in doc
    flat = " ".join(doc.split())
    for key in ("elders", "dggw24"):
        assert f"* {' '.join(REFERENCES[key].split())}" in flat
    entries = doc.split("References:\n", 1)[1].splitlines()
    assert entries[0].startswith("    * J. D. Andersson")
    assert all(line.startswith("    ") for line in entries if line)


@pytest.mark.parametrize(
    ("module", "link"),
    [
        (elders, "https://arxiv.org/abs/2408.07021"),
        (ranges_speed, "https://arxiv.org/abs/2402.07066"),
        (horizon_free, "https://arxiv.org/abs/2506.15018"),
    ],
)
def test_experiment_modules_show_their_citation(module: object, link: str) -> None:
    doc = module.__doc__ or ""
    assert "[references" not in doc
    assert link in doc.split("References:", 1)[1]


def test_cite_refuses_a_missing_marker_or_an_unknown_key() -> None:
    with pytest.raises(ValueError, match=r"no '\[references: \.\.\.\]' line"):
        cite("Title.\n\nReferences: none\n")
    with pytest.raises(ValueError, match=r"no REFERENCES entry for \['nope'\]"):
        cite("Title.\n\n    [references: elders, nope]\n")
    assert cite(None) is None


def test_cited_expands_a_class_docstring_and_names_the_class() -> None:
    from dpcount.counting import (
        HorizonFreeSqrt,
        RowScaledBandedToeplitz,
        RowScaledBLT,
        RowScaledSqrtFactorization,
    )
    from dpcount.privacy._statements import cited

    for cls, link in (
        (RowScaledSqrtFactorization, "2509.14334"),
        (RowScaledBandedToeplitz, "2509.14334"),
        (RowScaledBLT, "2509.14334"),
        (HorizonFreeSqrt, "2506.15018"),
    ):
        doc = cls.__dict__["__doc__"]
        assert "[references" not in doc
        assert f"https://arxiv.org/abs/{link}" in doc.split("References:", 1)[1]

    class NoMarker:
        """References: none."""

    with pytest.raises(ValueError, match=r"NoMarker: the docstring has no '\[references"):
        cited(NoMarker)
