"""Noise sources: a calibrated sampler bound to where its random words come from.

numpy splits randomness into a BitGenerator (where the bits come from) and a
Generator (how bits become distributions). dpcount splits a noise draw the same
way: a :class:`~dpcount.privacy.NoiseSampler` says *which* distribution (its kind and
calibrated scale) and turns words into it (``sampler.draw(block)``, one sampler per
distribution: :mod:`dpcount.privacy.sampling`); a :class:`WordSource` says *where*
the words of each row come from:

* :class:`GeneratorWords`: fresh words of a ``numpy.random.Generator`` (research,
  tests, and production with ``rng=None``, a cryptographic Generator);
* ``dpcount.keyed.prf.PRFWords``: a pure function of (PRF key, label, position), the
  position being (row index within the stream, key index) — the keyed engines use
  it so that a key's noise does not depend on how keys are chunked, on the engine,
  on retries or on where a run was resumed.

A :class:`NoiseSource` binds the two and counts rows: a counting mechanism's
``noise_process(source, width)`` draws every sample through ``source.sample(shape)``
with the stream's trailing axis (``width``) last, and row r of the stream is the
r-th row drawn, whatever the block sizes.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_generator, check_instance, check_integer, check_size
from dpcount.privacy.noise import NoiseSampler, Shape
from dpcount.privacy.sampling import GeneratorBlock, WordBlock

__all__ = ["GeneratorWords", "NoiseSource", "WordSource"]


@runtime_checkable
class WordSource(Protocol):
    """The words of the positions of rows of a stream."""

    def block(self, row: int, shape: tuple[int, ...]) -> WordBlock:
        """The words of a draw of ``shape`` whose first row is row ``row`` of the stream
        (for a stream of width w, ``shape`` ends with w; the leading axes are
        consecutive rows)."""
        ...


class GeneratorWords:
    """Fresh words of a numpy Generator for every draw (the row index is not used)."""

    __slots__ = ("rng",)

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = check_generator("rng", rng)

    def block(self, row: int, shape: tuple[int, ...]) -> GeneratorBlock:
        return GeneratorBlock(self.rng, shape)


class NoiseSource:
    """``sampler``'s distribution drawn from ``words``, row by row.

    Args:
        sampler: the calibrated sampler (its kind and scale; a sampler with only
            ``sample(rng, size)`` works on a Generator's words only).
        words: a :class:`WordSource`, or None: zeros of the sampler's dtype (a noise
            process's state layout without drawing anything; no privacy).
        width: the stream's vector length (None: scalar rows).
        start: the row index of the first row drawn (a resumed keyed stream).
    """

    __slots__ = ("_dtype", "_rng", "_sample", "integer", "rows_drawn", "sampler", "width", "words")

    def __init__(
        self,
        sampler: NoiseSampler,
        words: WordSource | None,
        width: int | None = None,
        start: int = 0,
    ) -> None:
        self.sampler: NoiseSampler = check_instance("sampler", sampler, NoiseSampler, "a sampler")
        if words is not None:
            check_instance("words", words, WordSource, "a WordSource")
        self.words = words
        # A Generator's words: sampler.sample(rng, shape) is draw on its GeneratorBlock,
        # taken directly (fewer calls per block: the per-step streams draw one row).
        self._rng = words.rng if type(words) is GeneratorWords else None
        self._sample = sampler.sample
        self.width = None if width is None else check_integer("width", width, ge=1)
        self.rows_drawn = check_integer("start", start, ge=0)
        self.integer = bool(getattr(sampler, "integer", False))
        self._dtype = np.int64 if self.integer else np.float64

    @classmethod
    def generator(
        cls, sampler: NoiseSampler, rng: np.random.Generator, width: int | None = None
    ) -> NoiseSource:
        """``sampler`` on the fresh words of ``rng``."""
        return cls(sampler, GeneratorWords(rng), width)

    @property
    def variance(self) -> float:
        return self.sampler.variance

    def _rows(self, shape: tuple[int, ...]) -> int:
        if self.width is None:
            return math.prod(shape)
        if not shape or shape[-1] != self.width:
            raise ValueError(f"size {shape!r} must end with the source's width {self.width}")
        return math.prod(shape[:-1])

    def sample(self, size: Shape) -> NDArray[Any]:
        """The next rows of the stream as an array of shape ``size`` (int64 for an
        integer sampler, else float64)."""
        if type(size) is tuple:
            shape: tuple[int, ...] = size
        elif type(size) is int:
            shape = (size,)
        else:
            shape = check_size("size", size)
        row = self.rows_drawn
        if self.width is None and len(shape) == 1:
            self.rows_drawn = row + shape[0]
        else:
            self.rows_drawn = row + self._rows(shape)
        if self._rng is not None:
            return self._sample(self._rng, shape)
        if self.words is None:
            return np.zeros(shape, dtype=self._dtype)
        block = self.words.block(row, shape)
        draw = getattr(self.sampler, "draw", None)
        if draw is not None:
            out: NDArray[Any] = draw(block)
            return out.reshape(shape)
        rng = block.generator
        if rng is None:
            raise TypeError(
                f"{self.sampler!r} has no draw(block): it can only draw from a Generator"
            )
        return self.sampler.sample(rng, shape)

    def __repr__(self) -> str:
        return f"NoiseSource({self.sampler!r}, {type(self.words).__name__}, width={self.width})"
