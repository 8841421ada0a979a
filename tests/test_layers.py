"""The package's import graph: layers read bottom-up and no module imports in a cycle.

Every ``import dpcount...`` and ``from dpcount... import`` is counted, at module
level or inside a function (a function-level import hides a cycle, it does not
remove it).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: bottom-up: a package may import only from its own layer or the ones below it
LAYERS: list[set[str]] = [
    {
        "dpcount._validate",
        "dpcount._numeric",
        "dpcount._scipy",
        "dpcount._lazy",
        "dpcount._state",
        "dpcount._time",
        "dpcount._version",
        "dpcount.io",
        "dpcount.data",
    },
    {"dpcount.durable", "dpcount.postprocess", "dpcount._events"},
    {"dpcount.privacy"},
    {"dpcount.counting", "dpcount.ranges"},
    # analysis (compare, plan, the one choice function) sits below the engines that
    # ask it which mechanism to run: keyed runs call it for --mechanism auto
    {"dpcount.analysis"},
    {"dpcount.keyed"},
    {"dpcount.training"},
    {"dpcount.apps", "dpcount.frame"},
    {"dpcount.experiments"},
    {"dpcount.demo"},
    {"dpcount._cli"},
    {"dpcount.cli", "dpcount.__main__", "dpcount"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(module: str) -> bool:
    return (SRC / Path(*module.split(".")) / "__init__.py").exists()


def _statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``node``, at any depth (imports are statements: the
    expressions need not be walked)."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt):
                yield child
            yield from _statements(child)


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """module -> the dpcount modules it imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((SRC / "dpcount").rglob("*.py")):
        name = _module_name(path)
        targets: set[str] = set()
        for node in _statements(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == "dpcount"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] != "dpcount":
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if _is_package(node.module) and _exists(sub) else node.module)
        graph[name] = targets
    return graph


def _exists(module: str) -> bool:
    base = SRC / Path(*module.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _layer(module: str) -> int:
    head = ".".join(module.split(".")[:2])
    for i, layer in enumerate(LAYERS):
        if head in layer:
            return i
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py: add it")


def test_every_import_points_down_or_sideways_within_its_package() -> None:
    upward = []
    for module, targets in import_graph().items():
        if module == "dpcount":
            continue  # the top-level package re-exports
        for target in targets:
            same_package = target.split(".")[:2] == module.split(".")[:2]
            if same_package or _layer(module) == len(LAYERS) - 1:
                continue  # within a package, or the entry points at the top
            if _layer(target) > _layer(module):
                upward.append(f"{module} -> {target}")
            elif _layer(target) == _layer(module):
                upward.append(f"{module} -> {target} (same layer, different package)")
    assert not upward, "imports against the layering:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    graph = import_graph()
    # A package's __init__ re-exporting its own submodules is not a cycle.
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    with pytest.raises(AssertionError, match="in no layer"):
        _layer("dpcount.nowhere")
