"""The keyed package's shape (issue 32): no function over 80 lines of code or of
cyclomatic complexity over 20, counted by an ast-based McCabe count (McCabe 1976, "A
Complexity Measure", IEEE TSE SE-2(4): one plus one per decision: a branch, a loop, an
exception handler, a conditional expression, each extra operand of ``and``/``or``, each
comprehension loop and filter, each ``match`` case), each function on its own (a nested
function is not counted in its parent)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

import dpcount.keyed

KEYED = Path(dpcount.keyed.__file__).parent

MAX_LINES = 80
MAX_COMPLEXITY = 20

#: what other helpers of issue 32 own and reshape (session: the run state's load;
#: keyio: the events' readers, none over the limits today); nothing of the pipeline's
#: own may be listed here
ALLOWED: set[str] = set()
ALLOWED_FILES = {"events.py"}

_DECISIONS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, not descending into nested functions or classes."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def complexity(function: ast.AST) -> int:
    """McCabe's cyclomatic complexity of ``function``'s own body."""
    count = 1
    for node in _own_nodes(function):
        if isinstance(node, _DECISIONS):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.match_case):
            count += 1
    return count


def token_lines(source: str) -> set[int]:
    """The lines of ``source`` that hold a token of code (not only comments or blanks)."""
    lines: set[int] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def code_lines(code: set[int], function: ast.AST) -> int:
    """Lines of ``function`` holding code (``code``: :func:`token_lines` of its file),
    its docstring not counted."""
    start, end = function.lineno, function.end_lineno or function.lineno  # type: ignore[attr-defined]
    first = function.body[0]  # type: ignore[attr-defined]
    doc: set[int] = set()
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        doc = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return len({line for line in code if start <= line <= end} - doc)


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, lines of code, complexity) of every function of ``path``."""
    source = path.read_text(encoding="utf-8")
    tree, code = ast.parse(source), token_lines(source)
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                name = prefix + child.name
                out.append((name, code_lines(code, child), complexity(child)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return out


def _offenders() -> list[str]:
    found = []
    for path in sorted(KEYED.rglob("*.py")):
        rel = path.relative_to(KEYED).as_posix()
        if rel in ALLOWED_FILES:
            continue
        for name, lines, cc in _functions(path):
            if f"{rel}::{name}" in ALLOWED:
                continue
            if lines > MAX_LINES or cc > MAX_COMPLEXITY:
                found.append(f"{rel}::{name} ({lines} lines of code, complexity {cc})")
    return found


def test_no_keyed_function_is_too_long_or_too_complex() -> None:
    assert _offenders() == []


def test_the_count_sees_what_it_must() -> None:
    """The counter itself, on functions of known complexity (so the gate can fail)."""
    source = '''
def flat(x):
    """Doc."""
    return x

def branchy(x, ys):
    if x and x > 1 or not x:
        pass
    elif x:
        pass
    for y in ys:
        while y:
            y = y - 1 if y else 0
    try:
        pass
    except ValueError:
        pass
    return [y for y in ys if y]
'''
    tree = ast.parse(source)
    flat, branchy = (n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert complexity(flat) == 1 and code_lines(token_lines(source), flat) == 2
    # 1 + if + (and, or) + elif + for + while + ifexp + except + comprehension + its if
    assert complexity(branchy) == 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 2


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_the_allow_list_names_real_functions(name: str) -> None:
    rel, qualified = name.split("::")
    assert qualified in {n for n, _, _ in _functions(KEYED / rel)}
