"""Citations that lead somewhere, and no pointers outside the package.

* Every public counting and range mechanism states its formal guarantee and cites
  its sources with a link (arXiv or DOI) or says explicitly that there is none.
* No file of the package points outside it (the development checkout's ``shared/``
  folder, absolute ``/work/`` paths) or to issue numbers / audit findings.
* Every arXiv id and DOI cited in the package is listed on the references page.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from pathlib import Path

import pytest

import dpcount.counting as counting
import dpcount.ranges as ranges
from dpcount.counting import CountingMechanism
from dpcount.ranges import RangeMechanism

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dpcount"
REFERENCES = ROOT / "docs" / "references.md"

#: the mechanisms the references page and this test are about; a new public mechanism
#: is picked up by ``_public_mechanisms`` and must be added here too
EXPECTED = {
    "BLT",
    "ToeplitzFactorization",
    "NormalizedSqrtFactorization",
    "NormalizedBLT",
    "RowScaledBLT",
    "RowScaledSqrtFactorization",
    "HorizonFreeSqrt",
    "HorizonFreeBLT",
    "HorizonFreeGrowingBLT",
    "RowScaledBandedToeplitz",
    "BinaryTree",
    "KaryTree",
    "Honaker",
    "SqrtFactorization",
    "SmoothBinary",
    "InputPerturbation",
    "FactorizationMechanism",
    "CorrelatedPerturbation",
    "IdentityMechanism",
    "TreeMechanism",
    "HierarchicalMechanism",
    "WaveletMechanism",
    "EigenDesignMechanism",
}

ARXIV = re.compile(r"arxiv\.org/abs/(\d{4}\.\d{4,5})")
DOI = re.compile(r"doi\.org/(10\.\d{4,9}/[^\s,;)>`\"]+[^\s,;)>`.\"])")
LINK = re.compile(r"https://(arxiv\.org/abs/\d{4}\.\d{4,5}|doi\.org/10\.\d{4,9}/\S+)")


def _public_mechanisms() -> list[type]:
    out = []
    for module, base in ((counting, CountingMechanism), (ranges, RangeMechanism)):
        for name in module.__all__:
            obj = getattr(module, name)
            if (
                inspect.isclass(obj)
                and issubclass(obj, base)
                and obj is not base
                and not inspect.isabstract(obj)
            ):
                out.append(obj)
    return out


def test_the_public_mechanisms_are_the_expected_ones() -> None:
    # Guards the parametrized test below against checking nothing.
    assert {cls.__name__ for cls in _public_mechanisms()} == EXPECTED


@pytest.mark.parametrize("cls", _public_mechanisms(), ids=lambda c: c.__name__)
def test_mechanism_docstring_has_guarantee_and_references(cls: type) -> None:
    doc = cls.__dict__.get("__doc__") or ""  # the class's own docstring, not inherited
    assert "Formal guarantee:" in doc, f"{cls.__name__}: no 'Formal guarantee:' paragraph"
    guarantee = doc.split("Formal guarantee:", 1)[1].split("References:", 1)[0]
    for needed in ("Neighbouring relation", "DP", "Exact variance"):
        assert needed in guarantee, f"{cls.__name__}: the formal guarantee lacks {needed!r}"
    assert "References:" in doc, f"{cls.__name__}: no 'References:' paragraph"
    refs = doc.split("References:", 1)[1]
    assert LINK.search(refs) or "(no link)" in refs, f"{cls.__name__}: no link in References"
    # Every entry (a '* ' item) names a year and ends in a link or '(no link)'.
    entries = re.split(r"\n\s*\* ", refs)[1:]
    assert entries, f"{cls.__name__}: References has no entries"
    for entry in entries:
        entry = entry.split("\n\n", 1)[0]
        assert re.search(r"\b(19|20)\d\d\b", entry), f"{cls.__name__}: no year in {entry!r}"
        assert LINK.search(entry) or "(no link)" in entry, f"{cls.__name__}: {entry!r}"


def _source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".md") and p.is_file())


#: forbidden anywhere in the package's text (code, strings, comments, docs)
_FORBIDDEN_ANYWHERE = {
    "a pointer into the development checkout's shared papers": re.compile(r"shared/papers"),
    "an absolute path of the development machine": re.compile(r"/work/"),
    "an issue number": re.compile(r"\bissues?\s*(#\s*)?\d", re.IGNORECASE),
    "an issue reference": re.compile(r"\bissue\s*#", re.IGNORECASE),
    "an audit finding number": re.compile(r"\baudit\s+finding", re.IGNORECASE),
    "the papers' README": re.compile(r"papers' README|papers/README", re.IGNORECASE),
}


def _docs_and_comments(path: Path) -> str:
    """The docstrings and comments of a Python file (not its code or other strings)."""
    text = path.read_text(encoding="utf-8")
    parts = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
    return "\n".join(parts)


def test_no_pointers_outside_the_package_or_to_issues() -> None:
    problems = []
    for path in _source_files():
        text = path.read_text(encoding="utf-8")
        for what, pattern in _FORBIDDEN_ANYWHERE.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {what}: {m.group(0)!r}")
        # Documentation may not send the reader to ``shared/`` either (a runtime data
        # lookup that names the folder it searched is code, not documentation).
        if "shared/" not in text:  # the prose is part of the text: nothing to find
            continue
        prose = _docs_and_comments(path) if path.suffix == ".py" else text
        for m in re.finditer(r"shared/", prose):
            problems.append(f"{path.relative_to(ROOT)}: documentation points to {m.group(0)!r}")
    assert not problems, "\n".join(problems)


def _cited(pattern: re.Pattern[str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in _source_files():
        for m in pattern.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_cited_arxiv_id_and_doi_is_on_the_references_page() -> None:
    page = REFERENCES.read_text(encoding="utf-8")
    arxiv, dois = _cited(ARXIV), _cited(DOI)
    assert arxiv, "no arXiv link found in the package (the scan is broken)"
    assert dois, "no DOI link found in the package (the scan is broken)"
    missing = [f"arXiv:{k} (cited in {sorted(v)})" for k, v in arxiv.items() if k not in page]
    missing += [f"doi:{k} (cited in {sorted(v)})" for k, v in dois.items() if k not in page]
    assert not missing, "not on docs/references.md:\n" + "\n".join(missing)


def test_references_page_is_linked_from_the_readme() -> None:
    assert "(docs/references.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
