"""Normalizing the ``rng`` argument that every noise-drawing function takes.

``rng`` may be a :class:`numpy.random.Generator` (used as is, never re-seeded),
an int seed or a :class:`numpy.random.SeedSequence` (reproducible research and
tests only: anyone who knows the seed can subtract the noise), or ``None``:
fresh entropy from the operating system.

A stateful mechanism normalizes once and keeps the Generator. Re-creating a
Generator from the same seed would replay noise that was already released, which
in differential privacy is a leak.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

__all__ = ["RNGLike", "as_generator"]

RNGLike: TypeAlias = "np.random.Generator | int | np.random.SeedSequence | None"


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    Args:
        rng: a Generator (returned unchanged), a non-negative int seed, a
            SeedSequence, or None (seeded from operating-system entropy).

    Raises:
        TypeError: any other type (including ``numpy.random.RandomState``, whose
            legacy stream we do not use, and bools).
        ValueError: a negative seed.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence()))
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, bool):
        raise TypeError(
            f"rng must be a Generator, an int seed, a SeedSequence or None, got {rng!r}"
        )
    if isinstance(rng, (int, np.integer)):
        seed = int(rng)
        if seed < 0:
            raise ValueError(f"rng seed must be >= 0, got {seed}")
        return np.random.default_rng(seed)
    raise TypeError(
        "rng must be a numpy.random.Generator, an int seed, a SeedSequence or None, "
        f"got {rng!r} of type {type(rng).__name__}"
    )
