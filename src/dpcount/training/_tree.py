"""Nested dicts, lists and tuples of arrays ("pytrees") flattened to one vector.

numpy only: the order is that of :func:`jax.tree_util.tree_flatten` for these
containers (dict keys sorted, sequences in order), so a structure flattened here and
by jax lists its leaves the same way. Namedtuples are rebuilt as their own type.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Layout", "flatten", "is_shape", "layout_of_shapes", "walk"]


def is_shape(value: object) -> bool:
    """A shape: a tuple of ints (``()`` is a scalar's shape)."""
    return isinstance(value, tuple) and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in value
    )


@dataclass(frozen=True)
class _Node:
    """One container: its type, its dict keys (or None) and its children."""

    kind: type
    keys: tuple[Any, ...] | None
    children: tuple[_Node | None, ...]  # None: a leaf


def walk(
    tree: Any, path: str, is_leaf: Callable[[Any], bool], leaves: list[tuple[str, Any]]
) -> _Node | None:
    if is_leaf(tree):
        leaves.append((path, tree))
        return None
    if isinstance(tree, dict):
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise TypeError(f"{path} has dict keys that cannot be sorted: {list(tree)!r}") from None
        children = tuple(walk(tree[k], f"{path}[{k!r}]", is_leaf, leaves) for k in keys)
        return _Node(dict, keys, children)
    if isinstance(tree, (list, tuple)):
        children = tuple(walk(v, f"{path}[{i}]", is_leaf, leaves) for i, v in enumerate(tree))
        return _Node(type(tree), None, children)
    raise TypeError(
        f"{path} must be an array, a number, a shape (a tuple of ints) or a dict/list/tuple "
        "of them, "
        f"got {tree!r} of type {type(tree).__name__}"
    )


def _build(node: _Node | None, leaves: list[Any], at: list[int]) -> Any:
    if node is None:
        leaf = leaves[at[0]]
        at[0] += 1
        return leaf
    values = [_build(child, leaves, at) for child in node.children]
    if node.kind is dict:
        assert node.keys is not None
        return dict(zip(node.keys, values, strict=True))
    if hasattr(node.kind, "_fields"):  # a namedtuple
        return node.kind(*values)
    return node.kind(values)


@dataclass(frozen=True)
class Layout:
    """Where each leaf of a pytree sits in the flat vector.

    Attributes:
        paths: each leaf's path, e.g. ``params['w']`` (for error messages).
        shapes: each leaf's shape.
        size: the length of the flat vector (Σ of the leaves' sizes).
    """

    root: _Node | None
    paths: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        return sum(math.prod(s) for s in self.shapes)

    def unflatten(self, leaves: list[Any]) -> Any:
        """The pytree with these leaves (in flattening order)."""
        return _build(self.root, leaves, [0])

    def split(self, vector: NDArray[np.float64], dtypes: list[np.dtype[Any]]) -> Any:
        """The pytree whose leaves are consecutive pieces of ``vector``, reshaped and
        cast to ``dtypes``."""
        out = []
        start = 0
        for shape, dtype in zip(self.shapes, dtypes, strict=True):
            stop = start + math.prod(shape)
            out.append(vector[start:stop].reshape(shape).astype(dtype, copy=True))
            start = stop
        return self.unflatten(out)


def layout_of_shapes(name: str, tree: Any) -> Layout:
    """The layout of a shape, an array (or a number), or a dict/list/tuple of them.

    Raises:
        TypeError: a leaf that is neither a shape nor has a ``shape``.
        ValueError: a negative dimension, or no element at all.
    """

    def leaf(value: object) -> bool:
        return is_shape(value) or hasattr(value, "shape") or isinstance(value, numbers.Real)

    found: list[tuple[str, Any]] = []
    root = walk(tree, name, leaf, found)
    shapes = []
    for path, value in found:
        shape = tuple(int(n) for n in (value if is_shape(value) else np.shape(value)))
        if any(n < 0 for n in shape):
            raise ValueError(f"{path} must have non-negative dimensions, got shape {shape}")
        shapes.append(shape)
    out = Layout(root, tuple(p for p, _ in found), tuple(shapes))
    if out.size == 0:
        raise ValueError(f"{name} must have at least one element, got {tree!r}")
    return out


def flatten(
    name: str, tree: Any, layout: Layout
) -> tuple[NDArray[np.float64], list[np.dtype[Any]]]:
    """``tree``'s leaves, checked against ``layout``, as one float64 vector, and the
    dtype each leaf is returned in (its own floating dtype, else float64).

    Raises:
        TypeError: a different structure, or a leaf that is not real numbers.
        ValueError: a leaf of another shape, or a value that is not finite.
    """
    found: list[tuple[str, Any]] = []
    root = walk(tree, name, lambda v: not isinstance(v, (dict, list, tuple)), found)
    if root != layout.root:
        raise TypeError(
            f"{name} must have the structure given to init() (leaves {list(layout.paths)}), "
            f"got leaves {[p for p, _ in found]}"
        )
    vector = np.empty(layout.size)
    dtypes: list[np.dtype[Any]] = []
    start = 0
    for (path, value), shape in zip(found, layout.shapes, strict=True):
        arr = np.asarray(value)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{path} must hold real numbers, got dtype {arr.dtype}")
        if arr.shape != shape:
            raise ValueError(
                f"{path} must have shape {shape} (as given to init()), got {arr.shape}"
            )
        stop = start + arr.size
        vector[start:stop] = arr.ravel()
        if not np.isfinite(vector[start:stop]).all():
            raise ValueError(f"{path} must be finite, got a NaN or infinite value")
        dtypes.append(arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64))
        start = stop
    return vector, dtypes
