"""Noise samplers: the only place where dpcount draws noise.

A mechanism holds a :class:`NoiseSampler` and a Generator; its structure never
draws randomness itself, so the structure can be tested with :class:`ZeroNoise`
or :class:`ConstantNoise` (as TensorFlow Privacy's tree aggregation is tested with
a constant noise generator).

The continuous samplers below are floating-point samplers: a value ``fl(S + noise)``
leaks through its low-order bits (Mironov 2012; Jin et al. 2022). The counting
releases (``count``, ``keyed``, frames, the training privatizer) therefore snap every
value to a power-of-two grid and add a float-safety term to δ
(:mod:`dpcount.privacy.float_safe`); the samplers themselves stay plain. For
production on integer data the exact integer samplers of
:mod:`dpcount.privacy.discrete` (``noise="discrete-laplace"`` /
``"discrete-gaussian"``) need no such term.

References:
    * I. Mironov. "On significance of the least significant bits for
      differential privacy". ACM CCS 2012. (no link)
    * J. Jin, E. McMurtry, B. I. P. Rubinstein, O. Ohrimenko. "Are we there
      yet? Timing and floating-point attacks on differential privacy systems".
      IEEE S&P 2022. https://arxiv.org/abs/2112.05307
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    check_generator,
    check_instance,
    check_integer,
    check_real,
    check_size,
)
from dpcount.privacy.sampling import GeneratorBlock, WordBlock, gaussian, laplace
from dpcount.privacy.sampling.laws import gaussian_on, laplace_on

__all__ = [
    "ConstantNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "NoiseBuffer",
    "NoiseSampler",
    "WordSampler",
    "ZeroNoise",
]

Shape = int | tuple[int, ...]


def _check_sample_args(rng: object, size: object) -> None:
    # A seed or a list here would otherwise fail deep inside numpy. Mechanisms call this
    # once per block of samples, so the common case (a Generator and an int, or a tuple
    # of ints) takes a fast path.
    if type(rng) is np.random.Generator:
        if type(size) is int:
            if size >= 0:
                return
        elif type(size) is tuple and 1 <= len(size) <= 2:
            first, last = size[0], size[-1]
            if type(first) is int and type(last) is int and first >= 0 and last >= 0:
                return
    check_generator("rng", rng)
    check_size("size", size)


def _shape(size: Shape) -> tuple[int, ...]:
    if type(size) is int:
        return (size,)
    if type(size) is tuple and all(type(d) is int for d in size):
        return size
    return check_size("size", size)


@runtime_checkable
class NoiseSampler(Protocol):
    """Draws i.i.d. noise. ``variance`` is the exact variance of one draw.

    Integer samplers (:mod:`dpcount.privacy.discrete`) return int64 arrays and
    carry a class attribute ``integer = True``; the others return float64.

    dpcount's samplers also have ``draw(block)``: the same distribution at every
    position of a :class:`~dpcount.privacy.sampling.WordBlock` (one sampler per
    distribution, fed by a Generator or by the keyed PRF); ``sample(rng, size)`` is
    ``draw`` on a :class:`~dpcount.privacy.sampling.GeneratorBlock`. A sampler with
    only ``sample`` works with Generator sources only.
    """

    @property
    def variance(self) -> float: ...

    def sample(self, rng: np.random.Generator, size: Shape) -> NDArray[Any]: ...


class WordSampler:
    """Base of dpcount's samplers: ``draw(block)`` turns the words of a
    :class:`~dpcount.privacy.sampling.WordBlock` into the distribution, and
    ``sample(rng, size)`` is ``draw`` on a Generator's words."""

    __slots__ = ()

    def draw(self, block: WordBlock) -> NDArray[Any]:
        """The distribution at every position of ``block`` (shape ``block.shape``)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: Shape) -> NDArray[Any]:
        _check_sample_args(rng, size)
        return self.draw(GeneratorBlock(rng, _shape(size)))


class _Law(NamedTuple):
    """A continuous law with one positive scale parameter p, as a sampler declares it."""

    #: the sampler's field holding p
    name: str
    #: the law at every position of a word block (:mod:`dpcount.privacy.sampling`)
    words: Callable[[WordBlock, float], NDArray[np.float64]]
    #: the same draws on a Generator, numpy called directly (the per-step fast path of
    #: :mod:`dpcount.privacy.sampling.laws`)
    direct: Callable[[np.random.Generator, Shape, float], NDArray[np.float64]]
    #: the c of the variance c·p²
    variance_factor: float


class _FloatLaw(WordSampler):
    """Base of the continuous samplers: the law :attr:`_law` with its parameter, the
    field ``_law.name``. ``draw`` is the law on a word block; ``sample`` on a Generator
    skips the block and calls numpy directly (the same draws)."""

    __slots__ = ()

    _law: ClassVar[_Law]

    @property
    def _parameter(self) -> float:
        value: float = getattr(self, self._law.name)
        return value

    def __post_init__(self) -> None:
        check_real(self._law.name, self._parameter, gt=0)

    @property
    def variance(self) -> float:
        p = self._parameter
        return self._law.variance_factor * p * p

    def draw(self, block: WordBlock) -> NDArray[np.float64]:
        """The law at every position of ``block``."""
        return self._law.words(block, self._parameter)

    def sample(self, rng: np.random.Generator, size: Shape) -> NDArray[np.float64]:
        _check_sample_args(rng, size)
        law = self._law  # the per-step path: no property call
        return law.direct(rng, size, getattr(self, law.name))


@dataclass(frozen=True)
class LaplaceNoise(_FloatLaw):
    """Laplace(0, scale) noise, variance 2·scale²
    (:func:`~dpcount.privacy.sampling.laplace`).

    Floating-point sampler: not hardened against floating-point attacks; prefer
    :class:`~dpcount.privacy.DiscreteLaplaceNoise` in production.

    Drawn as the difference of two independent standard exponentials (which is
    exactly standard Laplace) because numpy's ziggurat exponential sampler is
    faster than its inverse-CDF Laplace sampler.
    """

    scale: float
    _law = _Law("scale", laplace, laplace_on, variance_factor=2.0)


@dataclass(frozen=True)
class GaussianNoise(_FloatLaw):
    """Gaussian N(0, sigma²) noise (:func:`~dpcount.privacy.sampling.gaussian`). ``sigma``
    is a standard deviation, never a variance.

    Floating-point sampler: not hardened against floating-point attacks; prefer
    :class:`~dpcount.privacy.DiscreteGaussianNoise` in production.
    """

    sigma: float
    _law = _Law("sigma", gaussian, gaussian_on, variance_factor=1.0)


@dataclass(frozen=True)
class ZeroNoise(WordSampler):
    """No noise (for structure tests; gives no privacy)."""

    @property
    def variance(self) -> float:
        return 0.0

    def draw(self, block: WordBlock) -> NDArray[np.float64]:
        return np.zeros(block.shape)


@dataclass(frozen=True)
class ConstantNoise(WordSampler):
    """Every draw equals ``value`` (for structure tests; gives no privacy).

    With value 1 a linear mechanism's noise at step t counts the noise terms
    it sums, e.g. the ℓ₁ norm of t's digits for the tree mechanisms.
    """

    value: float = 1.0

    def __post_init__(self) -> None:
        check_real("value", self.value)

    @property
    def variance(self) -> float:
        return 0.0

    def draw(self, block: WordBlock) -> NDArray[np.float64]:
        return np.full(block.shape, float(self.value))


@runtime_checkable
class SampleSource(Protocol):
    """What a :class:`NoiseBuffer` and a noise process draw from: a
    :class:`~dpcount.privacy.source.NoiseSource` (the next rows of ``sampler``'s
    distribution, of vector length ``width``)."""

    @property
    def sampler(self) -> NoiseSampler: ...

    @property
    def width(self) -> int | None: ...

    def sample(self, size: Shape) -> NDArray[Any]: ...


class NoiseBuffer:
    """A FIFO of pre-drawn i.i.d. samples, so a stream can take one at a time cheaply.

    Samples are drawn from ``source`` (a :class:`~dpcount.privacy.source.NoiseSource`
    of width ``dim``) in blocks of ``block`` steps (default: 1024 scalar samples, or
    about 2^20 values for vector samples). A drawn sample is handed out exactly once;
    none is ever re-drawn. Each sample has shape ``()`` (``dim=None``) or ``(dim,)``.
    """

    __slots__ = ("_block", "_dim", "_items", "sampler", "source")

    def __init__(
        self, source: SampleSource, dim: int | None = None, block: int | None = None
    ) -> None:
        self.source: SampleSource = check_instance("source", source, SampleSource, "a NoiseSource")
        self.sampler: NoiseSampler = source.sampler
        self._dim = None if dim is None else check_integer("dim", dim, ge=1)
        if source.width != self._dim:
            raise ValueError(f"dim {dim!r} must be the source's width {source.width!r}")
        if block is None:
            # About 2^20 values (8 MiB) per refill: 1024 scalar steps, fewer wide vectors.
            block = 1024 if dim is None else max(1, 2**20 // dim)
        self._block = check_integer("block", block, ge=1)
        self._items: list[Any] = []

    @property
    def dim(self) -> int | None:
        """The length of a vector sample (None: scalar samples)."""
        return self._dim

    def _shape(self, n: int) -> tuple[int, ...]:
        return (n,) if self._dim is None else (n, self._dim)

    def take_one(self) -> Any:
        """One sample (a float, or an array of shape ``(dim,)`` that owns its memory: a
        row view would keep its whole drawn block alive while a caller holds it)."""
        items = self._items
        if not items:
            drawn = self.source.sample(self._shape(self._block))
            # Reverse so that pop() hands samples out in drawn order.
            items = self._items = list(drawn[::-1]) if self._dim else drawn[::-1].tolist()
        return items.pop().copy() if self._dim else items.pop()

    def take(self, n: int) -> NDArray[Any]:
        """``n`` samples as an array of shape ``(n,)`` or ``(n, dim)``; buffered ones first
        (int64 from an integer sampler, else float64)."""
        if type(n) is not int or n < 0:  # fast path: called once per block by the streams
            n = check_integer("n", n, ge=0)
        shape = self._shape(n)
        # Integer samples stay int64: a float64 copy would round values beyond 2^53.
        dtype = np.int64 if getattr(self.sampler, "integer", False) else np.float64
        if n == 0:
            return np.zeros(shape, dtype=dtype)
        k = min(n, len(self._items))
        if k == 0:
            return self.source.sample(shape)
        head = [self._items.pop() for _ in range(k)]
        out = np.empty(shape, dtype=dtype)
        out[:k] = np.asarray(head, dtype=dtype).reshape(self._shape(k))
        if n > k:
            out[k:] = self.source.sample(self._shape(n - k))
        return out

    def pending(self) -> list[Any]:
        """Samples drawn but not yet handed out, in the order they will be handed out."""
        return list(reversed(self._items))

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The buffer's state for a checkpoint: block size, dim and the pending samples.

        The pending samples were drawn but not handed out; the generator has moved
        past them, so they must be saved (re-drawing would give different noise).
        They are one array in hand-out order: shape ``(n,)`` (float64, or int64
        from an integer sampler) or ``(n, dim)``.
        """
        items = self.pending()
        dtype = np.int64 if getattr(self.sampler, "integer", False) else np.float64
        if self._dim is None:
            pending = np.array(items, dtype=dtype)
        elif items:
            pending = np.array(items, dtype=dtype)  # ~3× faster than np.stack on many rows
        else:
            pending = np.empty((0, self._dim), dtype=dtype)
        return {"block": self._block, "dim": self._dim, "pending": pending}

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict` output into this (fresh) buffer, checking every field.

        Raises:
            ValueError: a different block size or dim, or pending samples of the wrong
                shape, dtype (int64 exactly when the sampler is an integer sampler) or
                count (at most one block), or not finite.
        """
        from dpcount._state import state_array, state_int, state_keys

        owner = "NoiseBuffer"
        st = state_keys(owner, state, ("block", "dim", "pending"))
        state_int(owner, "block", st["block"], self._block, self._block)
        if st["dim"] != self._dim:
            raise ValueError(f"corrupt {owner} state: dim must be {self._dim}, got {st['dim']!r}")
        integer = bool(getattr(self.sampler, "integer", False))
        dtype = np.int64 if integer else np.float64
        pending = state_array(
            owner, "pending", st["pending"], rows=-1, dim=self._dim, dtypes=(dtype,)
        )
        if len(pending) > self._block:
            raise ValueError(
                f"corrupt {owner} state: {len(pending)} pending samples, more than a block "
                f"({self._block})"
            )
        reverse = pending[::-1]
        self._items = reverse.tolist() if self._dim is None else list(reverse)
