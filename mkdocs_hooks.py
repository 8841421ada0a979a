"""mkdocs hook: Sphinx cross-reference roles in docstrings render as plain code.

The docstrings use Sphinx roles (``:func:`~dpcount.frame.private_counts```), which
mkdocstrings' Markdown leaves as the literal text ``:func:`` before the code span.
This keeps the code span and drops the role; a leading ``~`` keeps the last dotted
component only, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_code, html)
