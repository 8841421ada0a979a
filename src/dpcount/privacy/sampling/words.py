"""Where a sampler's uniform words come from: the positions of one draw.

A draw covers the positions of an array of shape ``shape`` (row-major, flat index
``i``). Each position owns, under every label, one 128-bit block: two uniform 64-bit
words. A sampler asks for the words of all positions or of some (``index``) under a
label (``""`` the first words, ``"trial3/laplace"`` a rejection trial's), and for
*extension* words (``r = 1, 2, …``) when it needs more bits of one uniform. It asks
for a given (label, position, r) at most once and never relies on two requests
giving equal words, so a source may hand out fresh words on every request
(:class:`GeneratorBlock`) or the same words on every request
(``dpcount.keyed.prf.PRFBlock``: a pure function of the secret, the label and the
position) and the law of every output is the same.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = ["GeneratorBlock", "WordBlock"]

U64 = NDArray[np.uint64]
I64 = NDArray[np.int64]


@runtime_checkable
class WordBlock(Protocol):
    """Uniform 64-bit words for the positions of one draw of shape :attr:`shape`."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the draw; flat index i is position i in row-major order."""
        ...

    @property
    def generator(self) -> np.random.Generator | None:
        """The Generator behind the words (None for a keyed source): the floating-point
        samplers draw from it with numpy's own faster algorithms."""
        ...

    def words(self, label: str, index: I64 | None = None) -> U64:
        """The two words of every position (``index`` None) or of the positions at flat
        ``index``, under ``label``: shape (n, 2)."""
        ...

    def extension(self, label: str, flat: int, r: int) -> tuple[int, int]:
        """The two words of extension ``r`` ≥ 1 of position ``flat`` under ``label``."""
        ...


class GeneratorBlock:
    """Fresh words from a numpy Generator for a draw of shape ``shape``.

    Every request draws new words (``rng.integers`` over all of [0, 2^64), the bit
    generator's raw 64-bit outputs), so the positions are only a count here.
    """

    __slots__ = ("_shape", "rng")

    def __init__(self, rng: np.random.Generator, shape: tuple[int, ...]) -> None:
        self.rng = rng
        self._shape = shape

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def generator(self) -> np.random.Generator:
        return self.rng

    def words(self, label: str, index: I64 | None = None) -> U64:
        n = math.prod(self._shape) if index is None else int(index.size)
        out: U64 = self.rng.integers(0, 2**64, size=(n, 2), dtype=np.uint64)
        return out

    def extension(self, label: str, flat: int, r: int) -> tuple[int, int]:
        w = self.rng.integers(0, 2**64, size=2, dtype=np.uint64)
        return int(w[0]), int(w[1])
