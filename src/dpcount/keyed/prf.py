"""Noise as a pure function of a secret and a position: (secret, noise label, level, node, key).

Why: a distributed engine retries, re-partitions and resumes work. Noise drawn from a
stateful generator (or one seeded per partition) is *fresh* noise when a task is
recomputed, and two different noisy values of the same count leak it. Here every
noise value is a deterministic function of a 256-bit secret and its position, so
any partitioning, any order, any retry and any resume release the same bits.

The PRF. Uniform words come from AES-128 in counter mode: block b of the stream
for domain key K is AES_K(b), b as 16 little-endian bytes (``randomgen.AESCounter``,
AES-NI when available; checked against the FIPS-197 test vector in the tests).
AES is a pseudorandom permutation, hence a PRF on distinct counter blocks up to the
birthday bound (the PRP/PRF switching lemma; Bellare & Rogaway, "The security of
triple encryption and a framework for code-based game-playing proofs", 2006):
using each counter block once, the outputs are indistinguishable from independent
uniform 128-bit strings to anyone without K. The domain key is
``HMAC-SHA256(secret, label)[:16]`` (HMAC is a PRF, Bellare 2006), so different
labels (noise kinds, rejection trials, extension words) give independent streams.
The ``secret`` a keyed run passes here is a :class:`PRFKey`, an opaque labelled key
of its run secret (:meth:`dpcount.keyed.secret.RunSecret.prf`), itself an HMAC of
the run secret over the run id and the whole configuration's fingerprint: two runs
or two configurations never share a stream.
As with any cryptographic generator, the privacy guarantee then holds against
adversaries who cannot distinguish AES from a random function (computational DP);
it is void for anyone who holds the secret.
AES-CTR was chosen over a hash per position because one ``random_raw`` call
produces a contiguous counter range at ~0.5 GB/s, and over ChaCha20 because
AES-NI is faster on the machines this runs on (both are available in randomgen).

Counter layout (128 bits): ``level << 120 | (key // B) << 64 | (node·B + key % B)``
with B = ``key_block`` (a power of two fixed for a run). For one level and one key
block the blocks of consecutive nodes are contiguous, so a (nodes × keys) rectangle
costs one call per level and key block. Each position (level, node, key) owns one
128-bit block: two uniform 64-bit words.

The samplers are those of :mod:`dpcount.privacy.sampling` (one per distribution,
the same that draw from a Generator), fed the words of a rectangle of positions by
:class:`PRFBlock` (label L: the domain ``label/L``; extension word r of a position:
the domain ``label/L/ext{r}``); :class:`PRFWords` gives a stream's rows to a
:class:`~dpcount.privacy.source.NoiseSource`.

Exact discrete Laplace from two words. Lap_Z(t), P[Y = y] ∝ e^{−|y|/t}, is the
difference G₁ − G₂ of two i.i.d. geometric variables with P[G ≥ g] = e^{−g/t}
(Inusah & Kozubowski 2006, "A discrete analogue of the Laplace distribution").
With V uniform on (0, 1), G = ⌊t·(−ln V)⌋ has exactly that law. The word gives
the first 64 bits of V; the floor is read from a table when V's bucket (the
exponent and 12 more bits of its 53-bit prefix) has one floor for all its values
(``dpcount.privacy.sampling.exact._floor_table``, built once per t with the margin
below), and is otherwise
decided from an enclosure of t·(−ln V)
computed with one floating-point logarithm and a rigorous error margin (relative
2⁻⁴⁰, far above the few-ulp error of ``log``) and, in
the rare case the enclosure contains an integer, more bits of V are drawn
(extension words, one more PRF domain per word) and the comparison is redone with
correctly rounded ``decimal`` logarithms at growing precision. The output is
therefore an exact function of an (infinite-precision) uniform V — no
floating-point value is ever released; how wide the float enclosure is decides
only which path computes a sample, never its value.

Exact discrete Gaussian: Canonne, Kamath & Steinke 2020, Algorithm 3 (rejection
from Lap_Z(⌊σ⌋+1) with acceptance Bernoulli(e^{−γ})), where trial r of a position
uses its own PRF domains and Bernoulli(e^{−γ}) = [−ln V > γ] is decided the same
exact way. Continuous Laplace and Gaussian (Box–Muller) noise use the same words
but are floating-point samplers: their released counts are snapped to a power-of-two
grid and the guarantee pays a float-safety δ (:mod:`dpcount.privacy.float_safe`,
Mironov 2012).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcount.privacy.sampling import discrete_gaussian, discrete_laplace, gaussian, laplace
from dpcount.privacy.sampling.exact import exact_floor_t_exp

__all__ = [
    "PRF_SCHEME",
    "PRFBlock",
    "PRFKey",
    "PRFWords",
    "PositionPRF",
    "derive_key",
    "exact_floor_t_exp",
    "keyed_discrete_gaussian",
    "keyed_discrete_laplace",
    "keyed_gaussian",
    "keyed_laplace",
]

#: /2: the PRF key is bound to the run id and the configuration (/1 used the secret
#: bytes directly); a /1 secret file belongs to another configuration and is refused
PRF_SCHEME = "dpcount-keyed-prf/2"
#: the domain-separation prefix of the labels (unchanged since /1: the streams of a
#: given key are the same; what /2 changed is which key a run uses)
_DOMAIN = "dpcount-keyed-prf/1"
U64 = NDArray[np.uint64]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


class PRFKey:
    """An opaque PRF key (a run's: :meth:`dpcount.keyed.secret.RunSecret.prf`): it gives
    the position streams of its labels (:meth:`stream`); its bytes stay inside."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) < 16:
            raise ValueError("a PRF key must be at least 16 bytes")
        self._key = key

    def __repr__(self) -> str:  # never print the key
        return "PRFKey(…)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PRFKey) and hmac.compare_digest(self._key, other._key)

    def __hash__(self) -> int:
        return hash(hashlib.sha256(self._key).digest())

    def stream(self, label: str, key_block: int) -> PositionPRF:
        """The uniform blocks of ``label`` (:class:`PositionPRF`)."""
        return PositionPRF(self, label, key_block)


def derive_key(secret: bytes | PRFKey, label: str) -> int:
    """128-bit AES key for ``label``: HMAC-SHA256(secret, scheme/label), first 16 bytes."""
    if isinstance(secret, PRFKey):
        secret = secret._key
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise ValueError("secret must be at least 16 bytes")
    digest = hmac.new(secret, f"{_DOMAIN}/{label}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:16], "little")


def _aes_raw(key: int, counter: int, n_words: int) -> U64:
    """``n_words`` 64-bit words of AES_key(counter), AES_key(counter + 1), ...

    A new AESCounter per call (its state is set by the constructor only): the words
    depend on nothing but (key, counter, n_words), and a prefix never depends on n.
    """
    from randomgen import AESCounter

    if n_words == 0:
        return np.zeros(0, dtype=np.uint64)
    words: U64 = AESCounter(key=key, counter=counter).random_raw(n_words)
    return words


class PositionPRF:
    """Uniform 128-bit blocks indexed by (level, node, key) under one secret and label.

    Args:
        secret: the run's PRF key (:class:`PRFKey`), or key bytes (≥ 16; tests).
        label: domain label (e.g. ``"discrete-laplace"``); different labels give
            independent streams.
        key_block: B, a power of two ≤ 2^20 fixed for the run (part of its configuration).
    """

    def __init__(self, secret: bytes | PRFKey, label: str, key_block: int) -> None:
        if key_block < 1 or key_block & (key_block - 1) or key_block > 2**20:
            raise ValueError(f"key_block must be a power of two in [1, 2^20], got {key_block}")
        self.secret = secret
        self.label = label
        self.key_block = key_block
        self.aes_key = derive_key(secret, label)

    def child(self, suffix: str) -> PositionPRF:
        """An independent stream for ``label/suffix`` (same secret and key block)."""
        return PositionPRF(self.secret, f"{self.label}/{suffix}", self.key_block)

    def counter(self, level: int, node: int, key: int) -> int:
        b = self.key_block
        if not (0 <= level < 256 and 0 <= node < 2**64 // b and 0 <= key < 2**56 * b):
            raise ValueError(f"position out of range: level={level}, node={node}, key={key}")
        return (level << 120) | ((key // b) << 64) | (node * b + key % b)

    def block(self, level: int, node: int, key: int) -> tuple[int, int]:
        """The two words of one position."""
        w = _aes_raw(self.aes_key, self.counter(level, node, key), 2)
        return int(w[0]), int(w[1])

    def rectangle(self, level: int, node_lo: int, node_hi: int, key_lo: int, key_hi: int) -> U64:
        """Words of nodes [node_lo, node_hi) × keys [key_lo, key_hi): shape (nodes, keys, 2)."""
        b = self.key_block
        n_nodes, n_keys = node_hi - node_lo, key_hi - key_lo
        if n_nodes <= 0 or n_keys <= 0:
            return np.empty((max(n_nodes, 0), max(n_keys, 0), 2), dtype=np.uint64)
        self.counter(level, node_hi - 1, key_hi - 1)  # range check
        if key_lo % b == 0 and n_keys == b:  # one whole key block: the words as they come
            words = _aes_raw(self.aes_key, self.counter(level, node_lo, key_lo), 2 * n_nodes * b)
            return words.reshape(n_nodes, b, 2)
        out = np.empty((n_nodes, n_keys, 2), dtype=np.uint64)
        for kb in range(key_lo // b, (key_hi - 1) // b + 1):
            lo, hi = max(key_lo, kb * b), min(key_hi, (kb + 1) * b)
            if hi - lo == b or n_nodes == 1:
                # one call: the whole block rows, or (one node) just the keys needed
                first = self.counter(level, node_lo, lo)
                count = 2 * n_nodes * b if hi - lo == b else 2 * (hi - lo)
                words = _aes_raw(self.aes_key, first, count)
                out[:, lo - key_lo : hi - key_lo] = words.reshape(n_nodes, hi - lo, 2)
            else:
                first = self.counter(level, node_lo, kb * b)
                words = _aes_raw(self.aes_key, first, 2 * n_nodes * b).reshape(n_nodes, b, 2)
                out[:, lo - key_lo : hi - key_lo] = words[:, lo - kb * b : hi - kb * b]
        return out


# --------------------------------------------------------------------------------------
# The PRF as the words of a draw
# --------------------------------------------------------------------------------------
Rect = tuple[int, int, int, int, int]  # level, node_lo, node_hi, key_lo, key_hi

#: a request for at least 1/512 of a rectangle's positions reads the rows that hold
#: them in one call per key block; sparser requests read position by position
_DENSE = 512


class PRFBlock:
    """The words of the positions of ``rect`` = (level, node_lo, node_hi, key_lo, key_hi)
    under ``prf``: a :class:`~dpcount.privacy.sampling.WordBlock` whose words are a pure
    function of (secret, label, level, node, key).

    Flat index i is (node_lo + i // keys, key_lo + i % keys), keys = key_hi − key_lo;
    label ``""`` is ``prf``'s own stream and label L the stream ``prf.child(L)``.
    """

    generator = None

    def __init__(self, prf: PositionPRF, rect: Rect) -> None:
        self.prf = prf
        self.rect = rect
        self._domains: dict[str, PositionPRF] = {"": prf}

    @property
    def shape(self) -> tuple[int, int]:
        _, node_lo, node_hi, key_lo, key_hi = self.rect
        return node_hi - node_lo, key_hi - key_lo

    def _domain(self, label: str) -> PositionPRF:
        domain = self._domains.get(label)
        if domain is None:
            domain = self._domains[label] = self.prf.child(label)
        return domain

    def words(self, label: str, index: I64 | None = None) -> U64:
        domain = self._domain(label)
        level, node_lo, node_hi, key_lo, key_hi = self.rect
        keys = key_hi - key_lo
        if index is None:
            return domain.rectangle(*self.rect).reshape(-1, 2)
        if index.size * _DENSE > (node_hi - node_lo) * keys:
            r0, r1 = int(index[0]) // keys, int(index[-1]) // keys + 1
            rows = domain.rectangle(level, node_lo + r0, node_lo + r1, key_lo, key_hi)
            out: U64 = rows.reshape(-1, 2)[index - r0 * keys]
            return out
        out = np.empty((index.size, 2), dtype=np.uint64)
        for j, flat in enumerate(index.tolist()):
            node, key = divmod(flat, keys)
            out[j] = domain.block(level, node_lo + node, key_lo + key)
        return out

    def extension(self, label: str, flat: int, r: int) -> tuple[int, int]:
        level, node_lo, _, key_lo, key_hi = self.rect
        node, key = divmod(flat, key_hi - key_lo)
        return self._domain(label).block(level, node_lo + node, key_lo + key)


def keyed_discrete_laplace(prf: PositionPRF, rect: Rect, scale: Fraction) -> I64:
    """Exact Lap_Z(scale) noise for every position of ``rect``: shape (nodes, keys), int64."""
    return discrete_laplace(PRFBlock(prf, rect), Fraction(scale))


def keyed_laplace(prf: PositionPRF, rect: Rect, scale: float) -> F64:
    """Continuous Laplace(scale) noise: scale·(E₁ − E₂), E = −ln V (floating point)."""
    return laplace(PRFBlock(prf, rect), scale)


def keyed_gaussian(prf: PositionPRF, rect: Rect, sigma: float) -> F64:
    """Continuous N(0, σ²) noise by Box–Muller on the two words (floating point)."""
    return gaussian(PRFBlock(prf, rect), sigma)


def keyed_discrete_gaussian(prf: PositionPRF, rect: Rect, sigma2: Fraction) -> I64:
    """Exact N_Z(0, σ²) noise for every position of ``rect`` (CKS 2020 Alg. 3), int64.

    Trial r of a position uses the domains ``trial{r}/laplace`` and
    ``trial{r}/bernoulli`` at that position, and the first accepted trial is its
    value — whatever rectangle it is computed in.
    """
    return discrete_gaussian(PRFBlock(prf, rect), Fraction(sigma2))


# --------------------------------------------------------------------------------------
# The PRF as the words of a stream
# --------------------------------------------------------------------------------------
class PRFWords:
    """The words of a stream's rows for keys [key_lo, key_hi): a
    :class:`~dpcount.privacy.source.WordSource` for the keyed engines.

    Row r of the stream for key i is position (level 0, node r, key i) of ``prf``; a
    :class:`~dpcount.privacy.source.NoiseSource` on these words draws row r with its
    sampler's word sampler (``sampler.draw``, :mod:`dpcount.privacy.sampling`). So a
    key's noise depends only on the secret, the key and the row — not on the other keys
    of the chunk, the chunking, the engine or retries.

    Args:
        prf: the run's :class:`PositionPRF`.
        key_lo, key_hi: the key indices [key_lo, key_hi) of the columns.
    """

    def __init__(self, prf: PositionPRF, key_lo: int, key_hi: int) -> None:
        if not 0 <= key_lo < key_hi:
            raise ValueError(f"need 0 <= key_lo < key_hi, got [{key_lo}, {key_hi})")
        self.prf = prf
        self.key_lo, self.key_hi = key_lo, key_hi

    @property
    def width(self) -> int:
        return self.key_hi - self.key_lo

    def block(self, row: int, shape: tuple[int, ...]) -> PRFBlock:
        if not shape or shape[-1] != self.width:
            raise ValueError(f"size {shape!r} must end with the key width {self.width}")
        rows = math.prod(shape[:-1])
        return PRFBlock(self.prf, (0, row, row + rows, self.key_lo, self.key_hi))
