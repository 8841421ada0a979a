"""The apps' docstring examples run (docs/apps.md and the README run in tests/test_docs.py)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["histogram", "average", "graphs", "strings", "local"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"dpcount.apps.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
