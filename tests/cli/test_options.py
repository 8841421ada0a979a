"""Issue 33 item 8: the command line's options are declared once.

A flag is declared (``add_argument("--x", ...)``, ``option("--x", ...)`` or
``Option(("--x",), ...)``) in one place of ``dpcount._cli``; a subcommand that needs it
narrower adds a variant (``.but(...)``) of that one declaration. Closed choices come
from their homes: ``--noise`` from :class:`~dpcount.privacy.NoiseKind`, ``--mechanism``
and ``--objective`` from the counting registry.
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dpcount
from dpcount.cli import build_parser
from dpcount.counting.registry import MECHANISMS, objectives
from dpcount.privacy.budget import NoiseKind

CLI = Path(dpcount.__file__).resolve().parent / "_cli"


def declarations(tree: ast.AST) -> list[str]:
    """The flags a module declares: the first name of each ``add_argument``,
    ``option`` and ``Option`` call (``.but`` variants are not declarations)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if name == "Option" and isinstance(first, ast.Tuple) and first.elts:
            first = first.elts[0]
        value = first.value if isinstance(first, ast.Constant) else None
        calls = name in ("add_argument", "option", "Option")
        if calls and isinstance(value, str) and value.startswith("-"):
            found.append(value)
    return found


def all_declarations() -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(CLI.glob("*.py")):
        counts.update(declarations(ast.parse(path.read_text(encoding="utf-8"))))
    return counts


def test_every_flag_is_declared_once() -> None:
    counts = all_declarations()
    assert len(counts) > 60, counts  # the right folder, the right calls
    assert {flag: n for flag, n in counts.items() if n > 1} == {}


def test_the_check_counts_what_it_is_for() -> None:
    code = """
p.add_argument("--a", type=int)
p.add_argument("input")
A = option("--b", help="")
B = Option(("--c",), "", {})
C = A.but(help="narrower")
"""
    assert declarations(ast.parse(code)) == ["--a", "--b", "--c"]


def _choices(command: str, flag: str) -> tuple[str, ...]:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if flag in a.option_strings)
    assert action.choices is not None
    return tuple(action.choices)


@pytest.mark.parametrize("command", ["count", "histogram", "keyed"])
def test_noise_choices_are_the_noise_kinds(command: str) -> None:
    assert _choices(command, "--noise") == NoiseKind.choices()


def test_mechanism_and_objective_choices_come_from_the_registry() -> None:
    assert _choices("count", "--mechanism") == ("auto", *sorted(MECHANISMS))
    assert _choices("histogram", "--mechanism") == tuple(sorted(MECHANISMS))
    assert _choices("keyed", "--mechanism") == ("auto", *sorted(MECHANISMS), "tree")
    with_objective = [name for name in MECHANISMS if objectives(name)]
    assert with_objective  # the option exists, so the flag has choices
    assert set(_choices("count", "--objective")) == {
        o for n in with_objective for o in objectives(n)
    }


def test_the_options_module_imports_no_numpy() -> None:
    """Choices are read when a subcommand's parser is built: ``dpcount sample`` and
    ``dpcount --help`` import the declarations, not the registry."""
    heavy = ("numpy", "rich", "dpcount.counting.registry")
    code = f"import sys, dpcount._cli.options; print([m for m in {heavy!r} if m in sys.modules])"
    env = {**os.environ, "PYTHONPATH": str(CLI.parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
