"""The command line stays a thin layer (STYLE.md, issue 19): every function of
``dpcount._cli`` reads at once (at most :data:`MAX_LINES` lines), every function of
the whole package has at most :data:`MAX_LINES` lines of code (its docstring not
counted, issue 33: the gate covers the package, with the short allow-list
:data:`ALLOWED`), no function of the package (keyed included, issue 32) is more
complex than :data:`MAX_COMPLEXITY` (radon's cyclomatic complexity, allow-list
:data:`ALLOWED_COMPLEX`), and no CLI code
decides what to do by reading an exception's message — the library raises typed
errors (:class:`~dpcount.privacy.MissingDeltaError`,
:class:`~dpcount.privacy.ParticipationUnsupportedError`,
:class:`~dpcount.counting.CheckpointMismatchError` with its ``fields``, …) and the
CLI catches the type.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "dpcount" / "_cli"
PACKAGE = CLI.parent
MAX_LINES = 80
#: functions of the package (outside ``_cli``) with more than MAX_LINES lines of code
#: today, each with that length: it may shrink, never grow, and an entry whose function
#: fits is stale (the test says which, to be deleted). None since 0.5.
ALLOWED: dict[str, int] = {}
#: the largest cyclomatic complexity (radon) of a function of the package (issues 32-33)
MAX_COMPLEXITY = 20
#: functions above it today, with their complexity: they may become
#: simpler, never more complex (none since 0.5)
ALLOWED_COMPLEX: dict[str, int] = {}
#: str methods that search or compare text
_SEARCHES = frozenset(
    {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "partition",
     "rpartition", "split", "rsplit"}
)  # fmt: skip
#: re functions that search text
_REGEX = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})


def long_functions(tree: ast.AST) -> list[str]:
    """``name (n lines)`` of each function (nested ones too) longer than MAX_LINES."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                out.append(f"{node.name} ({lines} lines)")
    return out


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    value = first.value if isinstance(first, ast.Expr) else None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        assert first.end_lineno is not None
        return first.end_lineno - first.lineno + 1
    return 0


def code_lengths(tree: ast.AST, prefix: str = "") -> dict[str, int]:
    """``{qualified name: lines}`` of every function (methods as ``Class.name``, nested
    ones as ``outer.inner``), from ``def`` to its end, its docstring not counted."""
    out: dict[str, int] = {}
    for node in _statements_in(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1 - _docstring_lines(node)
            out[prefix + node.name] = lines
            out.update(code_lengths(node, f"{prefix}{node.name}."))
        elif isinstance(node, ast.ClassDef):
            out.update(code_lengths(node, f"{prefix}{node.name}."))
        else:
            out.update(code_lengths(node, prefix))
    return out


def _statements_in(node: ast.AST) -> list[ast.AST]:
    """The statements (and except handlers, match cases) directly below ``node``: where
    a ``def`` can stand (expressions are not walked: the gate reads every module)."""
    found: list[ast.AST] = []
    for name in ("body", "orelse", "finalbody", "handlers", "cases"):
        value = getattr(node, name, None)
        if isinstance(value, list):
            found += [
                v for v in value if isinstance(v, (ast.stmt, ast.excepthandler, ast.match_case))
            ]
    return found


@functools.cache
def parsed(root: Path) -> dict[str, ast.Module]:
    """``{path relative to root: its tree}`` of every module below ``root`` (parsed once
    for both package gates)."""
    paths = sorted(root.rglob("*.py"))
    return {p.relative_to(root).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in paths}


def package_long_functions(root: Path) -> dict[str, int]:
    """``{path::name: lines of code}`` of every function of ``root`` over MAX_LINES."""
    found = {}
    for where, tree in parsed(root).items():
        for name, lines in code_lengths(tree).items():
            if lines > MAX_LINES:
                found[f"{where}::{name}"] = lines
    return found


def test_package_functions_are_short_but_for_the_allow_list() -> None:
    found = package_long_functions(PACKAGE)
    new = {name: n for name, n in found.items() if name not in ALLOWED}
    assert new == {}, f"functions over {MAX_LINES} lines of code (docstring not counted)"
    grown = {name: n for name, n in found.items() if name in ALLOWED and n > ALLOWED[name]}
    assert grown == {}, "allowed long functions may shrink, never grow"
    stale = sorted(set(ALLOWED) - set(found))
    assert stale == [], "these fit now: delete them from ALLOWED"


def complex_functions(root: Path) -> dict[str, int]:
    """``{path::name: cyclomatic complexity}`` (radon's, as ``radon cc``) of every
    function of ``root`` above MAX_COMPLEXITY."""
    from radon.complexity import cc_visit_ast

    found = {}
    for where, tree in parsed(root).items():
        for block in cc_visit_ast(tree):
            if block.complexity > MAX_COMPLEXITY:
                found[f"{where}::{block.fullname}"] = block.complexity
    return found


def test_package_functions_are_simple() -> None:
    found = complex_functions(PACKAGE)
    new = {name: n for name, n in found.items() if name not in ALLOWED_COMPLEX}
    assert new == {}, f"functions of cyclomatic complexity above {MAX_COMPLEXITY} (radon cc)"
    grown = {n: c for n, c in found.items() if n in ALLOWED_COMPLEX and c > ALLOWED_COMPLEX[n]}
    assert grown == {}, "allowed complex functions may become simpler, never more complex"
    stale = sorted(set(ALLOWED_COMPLEX) - set(found))
    assert stale == [], "these are simple enough now: delete them from ALLOWED_COMPLEX"


def test_the_complexity_gate_counts_branches(tmp_path: Path) -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(MAX_COMPLEXITY))
    for name, body in (
        ("a", branches + "    return -1\n"),
        ("b", branches[branches.index("    if x == 1:") :]),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text(f"def f(x):\n{body}")
    assert body.startswith("    if x == 1:")  # one branch less: at the limit
    assert complex_functions(tmp_path / "a") == {"m.py::f": MAX_COMPLEXITY + 1}
    assert complex_functions(tmp_path / "b") == {}


def _text_of(node: ast.AST, errors: set[str], tainted: set[str]) -> bool:
    """Whether ``node`` contains an exception's text: ``str(e)``, ``repr(e)``,
    ``e.args``, ``e.message``, ``f"{e}"``, ``format(e)``, or a name assigned from one."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr in ("args", "message", "msg", "strerror")
            and isinstance(sub.value, ast.Name)
            and sub.value.id in errors
        ):
            return True
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id in ("str", "repr", "format")
            and any(isinstance(a, ast.Name) and a.id in errors for a in sub.args)
        ):
            return True
        if (
            isinstance(sub, ast.FormattedValue)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in errors
        ):
            return True
    return False


def _is_search(node: ast.AST, errors: set[str], tainted: set[str]) -> bool:
    if isinstance(node, ast.Compare):
        return any(_text_of(n, errors, tainted) for n in [node.left, *node.comparators])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr, owner = node.func.attr, node.func.value
        if attr in _SEARCHES and _text_of(owner, errors, tainted):
            return True
        regex = isinstance(owner, ast.Name) and owner.id == "re" and attr in _REGEX
        return regex and any(_text_of(a, errors, tainted) for a in node.args)
    return False


def message_matching(tree: ast.AST) -> list[int]:
    """Lines that compare or search an exception's text (``except ... as e`` names,
    and the parameters of a function annotated to take an exception)."""
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        errors = {h.name for h in ast.walk(func) if isinstance(h, ast.ExceptHandler) and h.name}
        for arg in [*func.args.args, *func.args.kwonlyargs]:
            note = ast.unparse(arg.annotation) if arg.annotation else ""
            if "Exception" in note or "Error" in note:
                errors.add(arg.arg)
        tainted: set[str] = set()
        for node in ast.walk(func):  # names holding the text, e.g. text = str(err)
            if isinstance(node, ast.Assign) and _text_of(node.value, errors, tainted):
                tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        found += [n.lineno for n in ast.walk(func) if _is_search(n, errors, tainted)]
    return sorted(set(found))


def modules() -> list[Path]:
    paths = sorted(CLI.glob("*.py"))
    assert len(paths) >= 10, paths  # the right folder
    return paths


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.name)
def test_cli_functions_are_short_and_never_read_messages(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert long_functions(tree) == [], f"{path.name}: functions over {MAX_LINES} lines"
    assert message_matching(tree) == [], f"{path.name}: lines matching exception text"


BAD = """
import re
def a():
    try:
        pass
    except ValueError as err:
        if "delta" in str(err):
            raise
def b(exc: ValueError) -> bool:
    text = str(exc)
    return text.startswith("horizon")
def c():
    try:
        pass
    except KeyError as e:
        return re.search("x", f"{e}") or e.args[0] == "k"
"""

GOOD = """
def d():
    try:
        pass
    except ValueError as err:
        raise ValueError(f"{err}; pass --delta") from None
    except CheckpointMismatchError as err:
        if "horizon" in err.fields:
            raise
"""


def test_the_checks_catch_what_they_are_for() -> None:
    assert message_matching(ast.parse(BAD)) == [7, 11, 16]
    assert message_matching(ast.parse(GOOD)) == []  # rewording or a typed attribute is fine
    long = "def f():\n" + "    x = 1\n" * MAX_LINES
    assert long_functions(ast.parse(long)) == [f"f ({MAX_LINES + 1} lines)"]
    assert long_functions(ast.parse("def f():\n" + "    x = 1\n" * (MAX_LINES - 1))) == []
    doc = '        """A\n\n        docstring.\n        """\n'
    method = f"class C:\n    def m(self):\n{doc}" + "        x = 1\n" * MAX_LINES
    assert code_lengths(ast.parse(method)) == {"C.m": MAX_LINES + 1}  # the docstring is free
    nested = "def f():\n    def g():\n        pass\n"
    assert code_lengths(ast.parse(nested)) == {"f": 3, "f.g": 2}
