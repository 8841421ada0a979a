"""One sampler per distribution, over the words of a :class:`WordBlock`.

Each function draws an array of the block's shape. The exact samplers release
integers decided from the infinite-precision uniforms the words spell
(:mod:`~dpcount.privacy.sampling.exact`), so no floating-point rounding reaches an
output (Mironov 2012; Jin et al. 2022):

* :func:`discrete_laplace` — Lap_Z(t), P[Y = y] ∝ e^{−|y|/t}, as G₁ − G₂ of two i.i.d.
  geometric variables with P[G ≥ g] = e^{−g/t} (Inusah & Kozubowski 2006), each
  G = ⌊t·(−ln V)⌋ from one word of the position (and extension words if needed);
* :func:`bernoulli_exp` — Bernoulli(e^{−γ}) = [−ln V > γ] for rational γ ≥ 0 (the
  role of CKS Algorithm 1);
* :func:`discrete_gaussian` — N_Z(0, σ²) by CKS Algorithm 3: trial r of a position is
  y ~ Lap_Z(⌊σ⌋ + 1) from the words labelled ``trial{r}/laplace``, accepted with
  probability e^{−γ(y)}, γ(y) = (|y| − σ²/t)²/(2σ²), from the words labelled
  ``trial{r}/bernoulli``; the position's value is its first accepted trial.

Continuous :func:`laplace` and :func:`gaussian` are floating-point samplers (their
releases are snapped to a grid and pay a float-safety δ,
:mod:`dpcount.privacy.float_safe`). On a keyed block they use the position's two
words (log-difference, Box–Muller); on a Generator block numpy's own exponential and
ziggurat normal samplers, which are 3–4× faster than Box–Muller on the same words
and keep the seeded research streams of 0.4.

References:
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * S. Inusah, T. J. Kozubowski. "A discrete analogue of the Laplace
      distribution". J. Statistical Planning and Inference 136(3), 2006. (no link)
    * I. Mironov. "On significance of the least significant bits for
      differential privacy". ACM CCS 2012. (no link)
    * J. Jin, E. McMurtry, B. I. P. Rubinstein, O. Ohrimenko. "Are we there
      yet? Timing and floating-point attacks on differential privacy systems".
      IEEE S&P 2022. https://arxiv.org/abs/2112.05307
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcount.privacy.sampling import exact as _exact
from dpcount.privacy.sampling.words import WordBlock

__all__ = ["bernoulli_exp", "discrete_gaussian", "discrete_laplace", "gaussian", "laplace"]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
Bools = NDArray[np.bool_]


def _join(label: str, suffix: str) -> str:
    return f"{label}/{suffix}" if label else suffix


def _geometric_pair(
    block: WordBlock, label: str, t: Fraction, index: I64 | None = None
) -> tuple[I64, I64]:
    """G₁, G₂ with P[G ≥ g] = e^{−g/t}, exactly, at every position (or those at
    ``index``): G₁ from the first word of each position, G₂ from the second."""
    words = block.words(label, index).reshape(-1)
    g, undecided = _exact._floor_t_exp_fast(words, t)
    for i in np.flatnonzero(undecided):
        pos, half = divmod(int(i), 2)
        flat = pos if index is None else int(index[pos])
        g[i] = _exact.exact_floor_t_exp(t, _extended(block, label, flat, half, int(words[i])))
    pairs = g.reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def _extended(block: WordBlock, label: str, flat: int, half: int, first: int) -> _exact.Words:
    def ext(r: int) -> int:
        return block.extension(_join(label, f"ext{r}"), flat, r)[half]

    return _exact.word_stream(first, ext)


def discrete_laplace(block: WordBlock, scale: Fraction) -> I64:
    """Exact Lap_Z(scale) at every position of ``block`` (int64, the block's shape)."""
    g1, g2 = _geometric_pair(block, "", Fraction(scale))
    out: I64 = np.subtract(g1, g2).reshape(block.shape)
    return out


def _exp_greater(
    block: WordBlock,
    label: str,
    gamma: F64,
    exact_gamma: Callable[[int], Fraction],
    index: I64 | None = None,
) -> Bools:
    """[−ln V > γ] (Bernoulli(e^{−γ})) from the first word of every position (or those
    at ``index``), exactly: ``gamma`` holds γ to relative 2⁻⁵⁰, ``exact_gamma(i)``
    the rational γ of entry i for the entries the float enclosure leaves open."""
    words = block.words(label, index)[:, 0]
    e_lo, e_hi = _exact._exp_enclosure(words)
    g_lo, g_hi = gamma * (1.0 - _exact._MARGIN), gamma * (1.0 + _exact._MARGIN)
    accept: Bools = e_lo > g_hi
    undecided = ~accept & ~(e_hi < g_lo)
    for i in np.flatnonzero(undecided):
        flat = int(i) if index is None else int(index[i])
        stream = _extended(block, label, flat, 0, int(words[i]))
        accept[i] = _exact.exact_exp_greater(exact_gamma(int(i)), stream)
    return accept


def bernoulli_exp(block: WordBlock, gamma_num: I64, gamma_den: int) -> Bools:
    """Exact Bernoulli(exp(−gamma_num/gamma_den)) elementwise (shape of ``gamma_num``)."""
    flat = gamma_num.reshape(-1)
    gamma = flat.astype(np.float64) / float(gamma_den)  # relative error ≤ 2·2⁻⁵³
    out = _exp_greater(block, "", gamma, lambda i: Fraction(int(flat[i]), gamma_den))
    return out.reshape(gamma_num.shape)


def discrete_gaussian(block: WordBlock, sigma2: Fraction) -> I64:
    """Exact N_Z(0, σ²) at every position of ``block`` (CKS 2020 Alg. 3), int64.

    Trial r of a position uses the labels ``trial{r}/laplace`` and
    ``trial{r}/bernoulli`` at that position, and the first accepted trial is its
    value, whatever else the draw holds; each trial runs on the positions still
    pending.
    """
    s2 = Fraction(sigma2)
    t = math.isqrt(s2.numerator // s2.denominator) + 1
    sf = float(s2)
    n = math.prod(block.shape)
    out = np.zeros(n, dtype=np.int64)
    pending: I64 | None = None  # None: every position
    trial = 0
    while pending is None or pending.size:
        g1, g2 = _geometric_pair(block, f"trial{trial}/laplace", Fraction(t), pending)
        y = g1 - g2
        mag = np.abs(y).astype(np.float64)
        gamma = (mag - sf / t) ** 2 / (2.0 * sf)

        def exact_gamma(i: int, y: I64 = y) -> Fraction:
            return (abs(int(y[i])) - s2 / t) ** 2 / (2 * s2)

        ok = _exp_greater(block, f"trial{trial}/bernoulli", gamma, exact_gamma, pending)
        where = np.flatnonzero(ok) if pending is None else pending[ok]
        out[where] = y[ok]
        pending = np.flatnonzero(~ok) if pending is None else pending[~ok]
        trial += 1
    return out.reshape(block.shape)


def laplace(block: WordBlock, scale: float) -> F64:
    """Laplace(0, scale) at every position (floating point).

    Generator block: scale·(E₁ − E₂) with numpy's ziggurat exponentials (a difference of
    two standard exponentials is exactly standard Laplace). Keyed block:
    scale·(ln V₂ − ln V₁) from the position's two words.
    """
    rng = block.generator
    if rng is not None:
        return laplace_on(rng, block.shape, scale)
    w = block.words("")
    x = scale * (np.log(_exact._uniform_open(w[:, 1])) - np.log(_exact._uniform_open(w[:, 0])))
    out: F64 = x.reshape(block.shape)
    return out


def laplace_on(rng: np.random.Generator, size: int | tuple[int, ...], scale: float) -> F64:
    """:func:`laplace` on a Generator block, called directly (the per-step fast path)."""
    out: F64 = rng.standard_exponential(size)
    out -= rng.standard_exponential(size)
    out *= scale
    return out


def gaussian(block: WordBlock, sigma: float) -> F64:
    """N(0, σ²) at every position (floating point): numpy's ziggurat on a Generator
    block, Box–Muller on the position's two words on a keyed block."""
    rng = block.generator
    if rng is not None:
        return gaussian_on(rng, block.shape, sigma)
    w = block.words("")
    r = np.sqrt(-2.0 * np.log(_exact._uniform_open(w[:, 0])))
    x = sigma * r * np.cos(2.0 * np.pi * _exact._uniform_open(w[:, 1]))
    out: F64 = x.reshape(block.shape)
    return out


def gaussian_on(rng: np.random.Generator, size: int | tuple[int, ...], sigma: float) -> F64:
    """:func:`gaussian` on a Generator block, called directly (the per-step fast path)."""
    out: F64 = rng.standard_normal(size)
    out *= sigma
    return out
