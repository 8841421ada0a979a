"""Normalizing the ``rng`` argument that every noise-drawing function takes.

``rng`` may be

* ``None`` (the default, and the only choice for production): a
  cryptographically secure generator, :func:`secure_generator` — the AES-128
  block cipher in counter mode (``randomgen.AESCounter``, AES-NI instructions)
  or, on CPUs without AES-NI, the ChaCha20 stream cipher (``randomgen.ChaCha``,
  20 rounds), keyed with fresh operating-system entropy (:mod:`secrets`) and
  wrapped in a :class:`numpy.random.Generator` so every sampler works unchanged;
* a :class:`numpy.random.Generator` (used as is, never re-seeded);
* an int seed or a :class:`numpy.random.SeedSequence` (PCG64). **Reproducible
  research and tests only, not for production**: PCG64 is not a cryptographic
  generator, and anyone who knows the seed can regenerate and subtract the noise.

A stateful mechanism normalizes once and keeps the Generator. Re-creating a
Generator from the same seed would replay noise that was already released, which
in differential privacy is a leak. For the same reason never share one
Generator between processes created by ``os.fork`` (both would draw the same
noise); create the mechanism in each process instead.

Why ``randomgen``: numpy ships no cryptographic bit generator, and a bit
generator must be compiled code to be fast behind a Generator. ``randomgen`` is
maintained by numpy's random-module maintainer, ships wheels for CPython
3.10–3.14 on Linux, macOS and Windows against numpy 2, and with AES-NI costs
about the same as PCG64 in our measurements.
"""

from __future__ import annotations

import secrets
from typing import TypeAlias

import numpy as np

__all__ = ["RNGLike", "as_generator", "is_secure", "secure_generator"]

RNGLike: TypeAlias = "np.random.Generator | int | np.random.SeedSequence | None"

_SECURE_NAMES = ("AESCounter", "ChaCha")


def secure_generator() -> np.random.Generator:
    """A new cryptographically secure Generator keyed from operating-system entropy.

    AES-128 in counter mode with a 128-bit key from :func:`secrets.randbits`
    (``randomgen.AESCounter``) when the CPU has AES-NI; otherwise ChaCha20 with
    a 256-bit key (``randomgen.ChaCha(rounds=20)``), which is constant-time in
    software. The key is set directly (not passed through a SeedSequence).

    Raises:
        ImportError: ``randomgen`` is not installed (it is a core dependency).
    """
    try:
        from randomgen import AESCounter, ChaCha
    except ImportError as exc:  # pragma: no cover - randomgen is a declared dependency
        raise ImportError(
            "dpcount's default (rng=None) secure generator needs the 'randomgen' package: "
            "pip install randomgen"
        ) from exc
    aes = AESCounter(key=secrets.randbits(128))
    if aes.use_aesni:
        return np.random.Generator(aes)
    return np.random.Generator(ChaCha(key=secrets.randbits(256), rounds=20))


def is_secure(rng: np.random.Generator) -> bool:
    """Whether ``rng`` runs on one of the cryptographic bit generators used for ``rng=None``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {rng!r} of type {type(rng).__name__}"
        )
    return type(rng.bit_generator).__name__ in _SECURE_NAMES


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    Args:
        rng: None (a new :func:`secure_generator`, for production), a Generator
            (returned unchanged), or a non-negative int seed / SeedSequence
            (PCG64; reproducible research and tests only, not for production).

    Raises:
        TypeError: any other type (including ``numpy.random.RandomState``, whose
            legacy stream we do not use, and bools).
        ValueError: a negative seed.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return secure_generator()
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
