"""One exact sampler per distribution, over positional random words.

numpy splits randomness into a BitGenerator (where the bits come from) and a
Generator (how bits become a distribution). dpcount splits a noise draw the same
way:

* a :class:`~dpcount.privacy.sampling.words.WordBlock` hands out uniform 64-bit
  words for the positions of one draw, under a label (the rejection trial, the
  extension words of an undecided sample). Two adapters:
  :class:`~dpcount.privacy.sampling.words.GeneratorBlock` (fresh words of a
  ``numpy.random.Generator``: research, tests, and ``rng=None`` production) and
  ``dpcount.keyed.prf.PRFBlock`` (AES-CTR words that are a pure function of
  (secret, label, position): the keyed engines);
* :mod:`~dpcount.privacy.sampling.laws` turns words into one distribution, one
  function each: :func:`discrete_laplace`, :func:`discrete_gaussian`,
  :func:`bernoulli_exp` (exact, integer outputs decided from the infinite-precision
  uniform the words spell), :func:`laplace` and :func:`gaussian` (floating point).
"""

from __future__ import annotations

from dpcount.privacy.sampling.laws import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    gaussian,
    laplace,
)
from dpcount.privacy.sampling.words import GeneratorBlock, WordBlock

__all__ = [
    "GeneratorBlock",
    "WordBlock",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "laplace",
]
