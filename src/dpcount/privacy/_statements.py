"""The DP statement of each noise kind, written once for every mechanism's docstring.

A counting mechanism's "Formal guarantee" argues its own sensitivities — Δ₁ and Δ₂,
the ℓ₁ and ℓ₂ sensitivities of the vector it perturbs — and then states what each
noise kind gives for them. That second part is the same for every mechanism (it is
what :func:`dpcount.privacy.calibrate` implements), so it is written here once, and
:func:`noise_statements` puts it into a class's docstring where the line
``[noise kinds: continuous]`` or ``[noise kinds: all]`` stands, and the works those
statements cite where ``[noise kinds references]`` stands. ``help()`` and the API
pages show the whole guarantee; the source holds each statement once, so a
correction reaches every mechanism.
"""

from __future__ import annotations

import re
import textwrap
from typing import TypeVar, overload

__all__ = ["EVENT_LEVEL", "REFERENCES", "STATEMENTS", "cite", "cited", "noise_statements"]

_T = TypeVar("_T", bound=type)

#: noise kind -> its DP statement for a perturbed vector with sensitivities Δ₁, Δ₂
STATEMENTS: dict[str, str] = {
    "laplace": '``"laplace"``: pure ε-DP with scale λ = Δ₁/ε (Laplace mechanism, Dwork, '
    "McSherry, Nissim, Smith 2006); with a delta, (ε, δ)-DP by count-on-your-elders "
    "Theorem 3 (heterogeneous composition over the coordinates, Kairouz, Oh, Viswanath "
    "2015), or pure ε-DP when that needs less noise.",
    "gaussian": '``"gaussian"`` (needs delta): (ε, δ)-DP, σ for ℓ₂ sensitivity Δ₂ by the '
    'analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8; default), ``"classic"`` '
    '(Dwork & Roth 2014, Thm A.1) or ``"fhu"`` (constant-matters eq. 2).',
    "discrete-laplace": '``"discrete-laplace"`` (whole-number steps): pure ε-DP with '
    "ε = Δ₁/t exactly for the discrete Laplace scale t (geometric mechanism, Ghosh, "
    "Roughgarden, Sundararajan 2009; exact sampler of Canonne, Kamath, Steinke 2020); "
    "with a delta, Theorem 3 when that needs less noise.",
    "discrete-gaussian": '``"discrete-gaussian"`` (whole-number steps, needs delta): '
    "ρ-zCDP with ρ = Δ₂²/(2σ²) (Canonne, Kamath, Steinke 2020, Thm 14), reported as "
    "(ε, δ)-DP by their Corollary 13.",
    "no-discrete": "The discrete kinds are not offered here (``supports_discrete_noise`` is "
    "False): asking for them raises ValueError.",
}

#: the works the statements cite, as References entries (year, then a link or "(no link)")
REFERENCES: dict[str, str] = {
    "dmns06": 'C. Dwork, F. McSherry, K. Nissim, A. Smith. "Calibrating noise to sensitivity in '
    'private data analysis". TCC 2006, LNCS 3876. (no link)',
    "elders": 'J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your Elders: '
    'Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329). https://arxiv.org/abs/2408.07021',
    "kov15": 'P. Kairouz, S. Oh, P. Viswanath. "The composition theorem for differential '
    'privacy". ICML 2015. https://arxiv.org/abs/1311.0776',
    "bw18": 'B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential privacy: '
    'analytical calibration and optimal denoising". ICML 2018. https://arxiv.org/abs/1805.06530',
    "dr14": 'C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy". '
    "Foundations and Trends in Theoretical Computer Science 9(3–4), 2014. "
    "https://doi.org/10.1561/0400000042",
    "fhu23": 'H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters: Fine-grained '
    'Error Bound on Differentially Private Continual Observation". ICML 2023. '
    "https://arxiv.org/abs/2202.11205",
    "dggw24": 'P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range Queries '
    'with Correlated Input Perturbation". 2024. https://arxiv.org/abs/2402.07066',
    "hku25": 'M. Henzinger, N. Kalinin, J. Upadhyay. "Normalized square root: sharper matrix '
    'factorization bounds for differentially private continual counting". 2025. '
    "https://arxiv.org/abs/2509.14334",
    "jf25": 'B. Jacobsen, K. Fawaz. "Private Continual Counting of Unbounded Streams". '
    "NeurIPS 2025. https://arxiv.org/abs/2506.15018",
    "cks20": 'C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for Differential '
    'Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010',
}

_CITED = {
    "continuous": ("dmns06", "elders", "kov15", "bw18", "dr14", "fhu23"),
    "all": ("dmns06", "elders", "kov15", "bw18", "dr14", "fhu23", "cks20"),
}

_KINDS = {
    "continuous": ("laplace", "gaussian", "no-discrete"),
    "all": ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian"),
}

#: the event-level neighbouring relation, put where ``[neighbouring: event level]`` stands
EVENT_LEVEL = (
    "Neighbouring relation: event level — two streams that differ at one step by at most "
    "Δ = ``step_sensitivity`` (the ℓ₁ norm of the change for Laplace noise, its ℓ₂ norm "
    "for Gaussian noise)."
)

_NEIGHBOURING_MARKER = re.compile(r"^( *)\[neighbouring: event level\]$", re.MULTILINE)
_MARKER = re.compile(r"^( *)\[noise kinds: (continuous|all)\]$", re.MULTILINE)
_REFERENCES_MARKER = re.compile(r"^( *)\[noise kinds references\]$", re.MULTILINE)
_CITE_MARKER = re.compile(r"^( *)\[references: ([a-z0-9]+(?:, [a-z0-9]+)*)\]$", re.MULTILINE)


def _bullets(texts: list[str], indent: str) -> str:
    return "\n".join(
        textwrap.fill(
            text,
            width=88,
            initial_indent=f"{indent}* ",
            subsequent_indent=f"{indent}  ",
            break_on_hyphens=False,
        )
        for text in texts
    )


def noise_statements(cls: _T) -> _T:
    """Class decorator: replace the docstring's ``[neighbouring: event level]`` line (if
    any) by :data:`EVENT_LEVEL`, its ``[noise kinds: ...]`` line by the
    statements of :data:`STATEMENTS` (``continuous``: Laplace and Gaussian, the
    discrete kinds refused; ``all``: the four kinds), and its ``[noise kinds
    references]`` line by the :data:`REFERENCES` they cite, as bulleted lists at the
    lines' indentation.

    Raises:
        ValueError: the docstring lacks either line (a mechanism would lose its
            guarantee or its citations silently).
    """
    doc = cls.__doc__
    if doc is None:  # python -OO strips docstrings
        return cls
    relation = _NEIGHBOURING_MARKER.search(doc)
    if relation is not None:
        indent = relation.group(1)
        paragraph = textwrap.fill(
            EVENT_LEVEL,
            width=88,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
        doc = doc[: relation.start()] + paragraph + doc[relation.end() :]
    found = _MARKER.search(doc)
    if found is None:
        raise ValueError(f"{cls.__name__}'s docstring has no '[noise kinds: ...]' line")
    indent, which = found.groups()
    doc = (
        doc[: found.start()]
        + _bullets([STATEMENTS[k] for k in _KINDS[which]], indent)
        + doc[found.end() :]
    )
    cited = _REFERENCES_MARKER.search(doc)
    if cited is None:
        raise ValueError(f"{cls.__name__}'s docstring has no '[noise kinds references]' line")
    entries = _bullets([REFERENCES[key] for key in _CITED[which]], cited.group(1))
    cls.__doc__ = doc[: cited.start()] + entries + doc[cited.end() :]
    return cls


@overload
def cite(doc: str) -> str: ...
@overload
def cite(doc: None) -> None: ...


def cite(doc: str | None) -> str | None:
    """A module docstring with its ``[references: key, ...]`` line replaced by those
    :data:`REFERENCES` entries, as a bulleted list at the line's indentation (a
    module citing a work the mechanisms cite writes it once: ``__doc__ = cite(__doc__)``).

    Raises:
        ValueError: the docstring lacks the line, or names a key :data:`REFERENCES`
            does not hold.
    """
    if doc is None:  # python -OO strips docstrings
        return None
    found = _CITE_MARKER.search(doc)
    if found is None:
        raise ValueError("the docstring has no '[references: ...]' line")
    indent, keys = found.groups()
    unknown = [key for key in keys.split(", ") if key not in REFERENCES]
    if unknown:
        raise ValueError(f"no REFERENCES entry for {unknown}")
    entries = _bullets([REFERENCES[key] for key in keys.split(", ")], indent)
    return doc[: found.start()] + entries + doc[found.end() :]


def cited(cls: _T) -> _T:
    """Class decorator: :func:`cite` on the class's docstring (its ``[references: ...]``
    line becomes those :data:`REFERENCES` entries)."""
    if cls.__doc__ is not None:
        try:
            cls.__doc__ = cite(cls.__doc__)
        except ValueError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None
    return cls
