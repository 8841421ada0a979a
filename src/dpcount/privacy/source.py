"""Noise sources: where the i.i.d. draws of a noise sampler come from.

numpy splits randomness into a BitGenerator (where the bits come from) and a
Generator (how bits become distributions). dpcount splits a noise draw the same
way: a :class:`~dpcount.privacy.NoiseSampler` says *which* distribution (its kind and
calibrated scale), a :class:`NoiseSource` says *where* each draw comes from:

* :class:`GeneratorSource`: the sampler's own exact algorithm on a
  ``numpy.random.Generator`` (what a single stream uses: fresh noise per draw);
* ``dpcount.keyed.prf.PRFSource``: a pure function of (PRF key, position), the
  position being (row index within the stream, key index) — the keyed engines use
  it so that a key's noise does not depend on how keys are chunked, on the engine,
  on retries or on where a run was resumed.

A counting mechanism's noise process draws through ``sampler.sample(rng, size)``
with the stream's trailing axis last. :class:`SourcedSampler` is the adapter that
lets any noise process draw from any source unchanged: it is a ``NoiseSampler`` of
the same distribution whose rows come from the source, in the order the process asks
for them (row r of the stream is the r-th row drawn, whatever the block sizes).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_generator, check_instance, check_integer
from dpcount.privacy.noise import NoiseSampler, Shape

__all__ = ["GeneratorSource", "NoiseSource", "SourcedSampler"]


@runtime_checkable
class NoiseSource(Protocol):
    """The next rows of i.i.d. draws of a sampler's distribution.

    ``width`` is the length of the trailing axis the source covers (None: scalar
    rows). Row r of the stream is the r-th row handed out: a source never hands a
    row out twice and never skips one.
    """

    @property
    def width(self) -> int | None: ...

    @property
    def rows_drawn(self) -> int:
        """Rows handed out so far (the position of the next row)."""
        ...

    def draw(self, sampler: NoiseSampler, rows: int) -> NDArray[Any]:
        """``rows`` rows of draws from ``sampler``'s distribution: shape (rows,) or
        (rows, width); int64 for an integer sampler, else float64."""
        ...


class GeneratorSource:
    """Draws from a numpy Generator with the sampler's own algorithm (single streams)."""

    def __init__(self, rng: np.random.Generator, width: int | None = None) -> None:
        self.rng = check_generator("rng", rng)
        self._width = None if width is None else check_integer("width", width, ge=1)
        self._rows = 0

    @property
    def width(self) -> int | None:
        return self._width

    @property
    def rows_drawn(self) -> int:
        return self._rows

    def draw(self, sampler: NoiseSampler, rows: int) -> NDArray[Any]:
        rows = check_integer("rows", rows, ge=0)
        shape = (rows,) if self._width is None else (rows, self._width)
        self._rows += rows
        return sampler.sample(self.rng, shape)


class SourcedSampler:
    """``sampler``'s distribution, with every draw taken from ``source``.

    A :class:`~dpcount.privacy.NoiseSampler`, so it can be handed to any noise
    process. ``sample(rng, size)`` needs ``size`` to end with the source's width
    (or to be one axis for a scalar source); the leading axes are flattened into
    consecutive rows of the source. The ``rng`` a process passes is not used: the
    source is where the randomness comes from.

    Args:
        sampler: the calibrated sampler (its kind and scale; its ``variance`` and
            ``integer`` are this sampler's).
        source: a :class:`NoiseSource`.
    """

    def __init__(self, sampler: NoiseSampler, source: NoiseSource) -> None:
        self.sampler: NoiseSampler = check_instance("sampler", sampler, NoiseSampler, "a sampler")
        self.source: NoiseSource = check_instance("source", source, NoiseSource, "a NoiseSource")
        self.integer = bool(getattr(sampler, "integer", False))

    @property
    def variance(self) -> float:
        return self.sampler.variance

    def sample(self, rng: np.random.Generator, size: Shape) -> NDArray[Any]:
        shape = (size,) if isinstance(size, int) else tuple(size)
        width = self.source.width
        if width is None:
            lead = shape
        elif not shape or shape[-1] != width:
            raise ValueError(f"size {size!r} must end with the source's width {width}")
        else:
            lead = shape[:-1]
        rows = math.prod(lead)
        return self.source.draw(self.sampler, rows).reshape(shape)

    def __repr__(self) -> str:
        return f"SourcedSampler({self.sampler!r}, {type(self.source).__name__})"
