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

Exact discrete Laplace from two words. Lap_Z(t), P[Y = y] ∝ e^{−|y|/t}, is the
difference G₁ − G₂ of two i.i.d. geometric variables with P[G ≥ g] = e^{−g/t}
(Inusah & Kozubowski 2006, "A discrete analogue of the Laplace distribution").
With V uniform on (0, 1), G = ⌊t·(−ln V)⌋ has exactly that law. The word gives
the first 64 bits of V; the floor is read from a table when V's bucket (the
exponent and 12 more bits of its 53-bit prefix) has one floor for all its values
(:func:`_floor_table`, built once per t with the margin below), and is otherwise
decided from an enclosure of t·(−ln V)
computed with one floating-point logarithm and a rigorous error margin (relative
2⁻⁴⁰, far above the few-ulp error of ``log``; :func:`_exp_enclosure`) and, in
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

import functools
import hashlib
import hmac
import math
from collections.abc import Callable, Iterator
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcount.privacy.discrete import DiscreteGaussianNoise, DiscreteLaplaceNoise
from dpcount.privacy.noise import ConstantNoise, GaussianNoise, LaplaceNoise, ZeroNoise

__all__ = [
    "PRF_SCHEME",
    "PRFKey",
    "PRFSource",
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

#: relative margin on floating-point logs/products (true error is a few ulp ≈ 1e-15)
_MARGIN = 2.0**-40
_TWO53 = float(2**53)


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
# Exact decisions on E = −ln V
# --------------------------------------------------------------------------------------
def _exp_enclosure(
    words: U64, top: I64 | None = None, scratch: tuple[F64, F64] | None = None
) -> tuple[F64, F64]:
    """Float bounds lo < −ln V < hi from V's top 53 bits (hi = inf when they are all 0).

    One logarithm: with V ∈ [a, a + 1)·2⁻⁵³, −ln V lies in [E₋, E₊] where
    E₋ = −ln((a + 1)·2⁻⁵³) and E₊ = −ln(a·2⁻⁵³) = E₋ + ln(1 + 1/a) ≤ E₋ + 1/a. With
    L = fl(−ln((a + 1)·2⁻⁵³)) (a + 1 ≤ 2⁵³ and the scaling are exact) and the
    log's relative error below :data:`_MARGIN`: lo = L·(1 − 2M) ≤ E₋ and
    hi = (L + 1/a)·(1 + 3M) ≥ E₊, the extra M's covering the few roundings
    (relative 2⁻⁵³ each) of the products and the sum.

    ``top``: where to put the 53-bit integers a (int64, same size; default: a new array).
    ``scratch``: two float arrays of the same size that become (lo, hi) (default: new).
    """
    a = np.right_shift(words, np.uint64(11), out=None if top is None else top.view(np.uint64))
    a_plus_1 = np.empty(a.shape) if scratch is None else scratch[0]
    np.copyto(a_plus_1, a.view(np.int64), casting="unsafe")  # exact (< 2^53); int64 is SIMD
    with np.errstate(divide="ignore"):  # inf at a = 0
        inv_a = np.divide(1.0, a_plus_1, out=None if scratch is None else scratch[1])
    a_plus_1 += 1.0
    a_plus_1 *= 1.0 / _TWO53
    log = np.log(a_plus_1, out=a_plus_1)  # = −L (≤ 0)
    hi = np.subtract(inv_a, log, out=inv_a)
    hi *= 1.0 + 3.0 * _MARGIN
    lo = np.multiply(log, -(1.0 - 2.0 * _MARGIN), out=log)
    return lo, hi


def _decimal_exp_bounds(big: int, n_words: int) -> tuple[Decimal, Decimal, int] | None:
    """Decimal bounds on −ln V for V ∈ [big, big + 1)·2^(−64n), and the precision used."""
    if big == 0:
        return None
    prec = 40 + 20 * n_words
    with localcontext() as ctx:
        ctx.prec = prec
        scale = Decimal(2) ** (64 * n_words)  # exact: fewer digits than prec
        e_lo = -((Decimal(big + 1) / scale).ln())
        e_hi = -((Decimal(big) / scale).ln())
        tol = Decimal(10) ** (-(prec - 8)) * (1 + e_hi)
        return e_lo - tol, e_hi + tol, prec


def _refined_exp_bounds(words: Iterator[int]) -> Iterator[tuple[Decimal, Decimal, int]]:
    """Enclosures (lo, hi, prec) of −ln V, V = 0.w₀w₁w₂… the concatenated 64-bit words,
    one per word drawn that gives one (:func:`_decimal_exp_bounds`), each tighter."""
    big, n = 0, 0
    while True:
        big = (big << 64) | next(words)
        n += 1
        bounds = _decimal_exp_bounds(big, n)
        if bounds is not None:
            yield bounds


def exact_floor_t_exp(t: Fraction, words: Iterator[int]) -> int:
    """⌊t·(−ln V)⌋ exactly, V = 0.w₀w₁w₂… the concatenated 64-bit words (drawn as needed)."""
    for e_lo, e_hi, prec in _refined_exp_bounds(words):
        with localcontext() as ctx:
            ctx.prec = prec
            tt = Decimal(t.numerator) / Decimal(t.denominator)
            slack = tt * Decimal(10) ** (-(prec - 8)) * (1 + e_hi)
            lo, hi = tt * e_lo - slack, tt * e_hi + slack
            if lo > 0 and math.floor(lo) == math.floor(hi):
                return math.floor(lo)
            if hi < 1:
                return 0
    raise AssertionError("unreachable: the word stream is infinite")


def _exact_exp_greater(gamma: Fraction, words: Iterator[int]) -> bool:
    """[−ln V > γ] exactly (Bernoulli(e^{−γ})), V = 0.w₀w₁… drawn as needed."""
    for e_lo, e_hi, prec in _refined_exp_bounds(words):
        with localcontext() as ctx:
            ctx.prec = prec
            g = Decimal(gamma.numerator) / Decimal(gamma.denominator)
            slack = Decimal(10) ** (-(prec - 8)) * (1 + g)
            if e_lo > g + slack:
                return True
            if e_hi < g - slack:
                return False
    raise AssertionError("unreachable: the word stream is infinite")


def _word_stream(first: int, ext: Callable[[int], int]) -> Iterator[int]:
    yield first
    r = 1
    while True:
        yield ext(r)
        r += 1


def _floor_t_exp_enclosed(words: U64, t: Fraction) -> tuple[I64, NDArray[np.bool_]]:
    """⌊t·(−ln V)⌋ where decided from 53 bits, and the mask of undecided entries.

    Exact where decided: t·(−ln V) lies in [lo, hi] (:func:`_exp_enclosure`, one
    logarithm, with t's rounding covered by one more margin M on each side), and the
    floor is returned only when ⌊lo⌋ + 1 > hi, i.e. when every value of the
    enclosure has the same floor — the floor of the true, infinite-precision value.
    Elsewhere (hi = inf at a zero word, or an integer inside the enclosure; about
    t·2⁻⁴⁰ of the entries) the entry is 0 and marked undecided, for
    :func:`exact_floor_t_exp`. So the result does not depend on the enclosure's
    width (a wider one only sends more entries to the exact path): exact sampling,
    not an approximation. Computed in place, :data:`_SLICE` words at a time, in two
    float scratch arrays that stay in the processor's cache (element by element the
    same operations: the same bits as on the whole array, at about half the time).
    """
    tf = float(t)  # relative error ≤ 2⁻⁵³, inside the extra margin below
    flat = words.reshape(-1)
    g = np.empty(flat.shape, dtype=np.int64)
    undecided = np.empty(flat.shape, dtype=bool)
    size = min(flat.size, _SLICE)
    scratch = np.empty(size), np.empty(size)
    for start in range(0, flat.size, _SLICE):
        end = min(start + _SLICE, flat.size)
        top, mask = g[start:end], undecided[start:end]
        room = (scratch[0][: end - start], scratch[1][: end - start])
        lo, hi = _exp_enclosure(flat[start:end], top=top, scratch=room)
        lo *= tf * (1.0 - _MARGIN)
        hi *= tf * (1.0 + _MARGIN)
        np.floor(lo, out=lo)  # lo ≥ 0: the floor is exact in float and fits int64
        hi -= lo
        np.greater_equal(hi, 1.0, out=mask)  # also catches hi = inf
        np.copyto(lo, 0.0, where=mask)
        np.copyto(top, lo, casting="unsafe")
    return g.reshape(words.shape), undecided.reshape(words.shape)


#: words per slice of :func:`_floor_t_exp_enclosed` and :func:`_floor_t_exp_fast`: two
#: float scratch arrays (2 × 256 KiB) fit a core's L2 cache; 2^15 took 0.5× the
#: whole-array time at 2·10^6 words
_SLICE = 1 << 15

#: M, the bits after the leading one of the 53-bit prefix a that index a bucket of
#: :func:`_floor_table` (54 × 2^M int32 entries: 864 KiB at M = 12)
_TABLE_BITS = 12
#: the largest t the table is used for: about t·1.6·10⁻⁴ of the entries fall in a bucket
#: whose floor is not constant (4% at 256), and they take the enclosure path
_TABLE_MAX_T = 256.0


@functools.lru_cache(maxsize=8)
def _floor_table(t: Fraction, margin: float) -> NDArray[np.int32]:
    """⌊t·(−ln V)⌋ for every V of a bucket of the 53-bit prefix a, or −1 where it is not
    the same for all of them.

    Bucket (e, j), for a ≥ 1, holds the a with ⌊log₂ a⌋ = e whose M = :data:`_TABLE_BITS`
    bits after the leading one are j (for e < M, a itself): a ∈ [L, U) with
    L = 2^e + j·2^(e−M) and U = L + max(2^(e−M), 1), so V ∈ [L, U)·2⁻⁵³ and
    −ln V ∈ (−ln(U·2⁻⁵³), −ln(L·2⁻⁵³)]. Both ends are exact floats (integers ≤ 2⁵³
    scaled by a power of two), so with the log's relative error below ``margin``
    (:data:`_MARGIN`, the bound :func:`_exp_enclosure` rests on):
    lo = fl(−ln(U·2⁻⁵³))·(1 − 2M)·t·(1 − M) ≤ t·(−ln V) ≤
    hi = fl(−ln(L·2⁻⁵³))·(1 + 2M)·t·(1 + M), the extra M's covering t's rounding and
    the few products' roundings (relative 2⁻⁵³ each). The entry is ⌊lo⌋ when
    ⌊lo⌋ + 1 > hi — then every V of the bucket has that floor, whatever its further
    bits — and −1 otherwise. Entry (e, j) is at index (e + 1)·2^M + j; the first 2^M
    entries (where a = 0 lands, clipped) are −1.
    """
    bits = _TABLE_BITS
    e = np.arange(53, dtype=np.float64)[:, None]
    j = np.arange(1 << bits, dtype=np.float64)[None, :]
    low = np.ldexp(1.0 + j / (1 << bits), e.astype(np.int64))  # L, exact
    high = low + np.maximum(np.ldexp(1.0, (e - bits).astype(np.int64)), 1.0)  # U, exact
    tf = float(t)
    with np.errstate(divide="ignore"):
        lo = -np.log(np.ldexp(high, -53)) * (1.0 - 2.0 * margin) * (tf * (1.0 - margin))
        hi = -np.log(np.ldexp(low, -53)) * (1.0 + 2.0 * margin) * (tf * (1.0 + margin))
    floor = np.floor(lo)
    decided = (floor + 1.0 > hi) & (lo >= 0.0)
    entries = np.where(decided, floor, -1.0).astype(np.int32)
    table = np.concatenate([np.full(1 << bits, -1, np.int32), entries.reshape(-1)])
    table.setflags(write=False)
    return table


def _floor_t_exp_fast(words: U64, t: Fraction) -> tuple[I64, NDArray[np.bool_]]:
    """⌊t·(−ln V)⌋ where decided from 53 bits, and the mask of undecided entries.

    First by table (:func:`_floor_table`, for t ≤ :data:`_TABLE_MAX_T`): the bucket of
    a = word >> 11 is read from the bits of float(a) (exact, a < 2⁵³): its exponent
    and the first M bits of its mantissa. A bucket whose floor is constant gives it
    exactly; the rest (about t·1.6·10⁻⁴ of the entries at M = 12) go to
    :func:`_floor_t_exp_enclosed`, whose undecided entries are this function's. Every
    decided entry is the exact floor, so the result is the same as the enclosure's
    alone wherever that decides: 4.6 ns instead of 11 ns per word at t = 10 (2·10⁶
    words, best of 7). Computed :data:`_SLICE` words at a time.
    """
    tf = float(t)
    if not tf <= _TABLE_MAX_T:
        return _floor_t_exp_enclosed(words, t)
    table = _floor_table(t, _MARGIN)
    bits = _TABLE_BITS
    flat = words.reshape(-1)
    g = np.empty(flat.shape, dtype=np.int64)
    size = min(flat.size, _SLICE)
    scratch, found = np.empty(size), np.empty(size, dtype=np.int32)
    base, shift = np.uint64(1022 << bits), np.uint64(52 - bits)
    for start in range(0, flat.size, _SLICE):
        end = min(start + _SLICE, flat.size)
        top, x, got = g[start:end], scratch[: end - start], found[: end - start]
        np.right_shift(flat[start:end], np.uint64(11), out=top.view(np.uint64))
        np.copyto(x, top, casting="unsafe")  # float(a): exact, a < 2^53
        index = x.view(np.uint64)
        np.right_shift(index, shift, out=index)  # exponent and M mantissa bits
        np.subtract(index, base, out=index)  # a = 0: negative as int64, clipped to -1
        np.take(table, index.view(np.int64), mode="clip", out=got)
        np.copyto(top, got)
    rest = np.flatnonzero(g < 0)
    undecided = np.zeros(flat.shape, dtype=bool)
    if rest.size:
        g_rest, u_rest = _floor_t_exp_enclosed(flat[rest], t)
        g[rest] = g_rest
        undecided[rest[u_rest]] = True
    return g.reshape(words.shape), undecided.reshape(words.shape)


# --------------------------------------------------------------------------------------
# Samplers over a rectangle of positions
# --------------------------------------------------------------------------------------
Rect = tuple[int, int, int, int, int]  # level, node_lo, node_hi, key_lo, key_hi


def _ext_word(prf: PositionPRF, rect: Rect, flat: int, half: int) -> Callable[[int], int]:
    level, node_lo, _, key_lo, key_hi = rect
    node, key = divmod(flat, key_hi - key_lo)

    def ext(r: int) -> int:
        return prf.child(f"ext{r}").block(level, node_lo + node, key_lo + key)[half]

    return ext


def _geometric_pair(prf: PositionPRF, rect: Rect, t: Fraction) -> tuple[I64, I64]:
    """G₁, G₂ (flattened, node-major) with P[G ≥ g] = e^{−g/t}, exactly: G₁ from the
    first word of each position, G₂ from the second (both words in one pass)."""
    words = prf.rectangle(*rect).reshape(-1)
    g, undecided = _floor_t_exp_fast(words, t)
    for i in np.flatnonzero(undecided):
        flat, half = divmod(int(i), 2)
        stream = _word_stream(int(words[i]), _ext_word(prf, rect, flat, half))
        g[i] = exact_floor_t_exp(t, stream)
    pairs = g.reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def keyed_discrete_laplace(prf: PositionPRF, rect: Rect, scale: Fraction) -> I64:
    """Exact Lap_Z(scale) noise for every position of ``rect``: shape (nodes, keys), int64."""
    _, node_lo, node_hi, key_lo, key_hi = rect
    g1, g2 = _geometric_pair(prf, rect, Fraction(scale))
    out: I64 = np.subtract(g1, g2).reshape(node_hi - node_lo, key_hi - key_lo)
    return out


def _uniform_open(words: U64) -> F64:
    """(a + 1/2)·2^-53 ∈ (0, 1) from the top 53 bits."""
    out: F64 = ((words >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO53
    return out


def keyed_laplace(prf: PositionPRF, rect: Rect, scale: float) -> F64:
    """Continuous Laplace(scale) noise: scale·(E₁ − E₂), E = −ln V (floating point)."""
    _, node_lo, node_hi, key_lo, key_hi = rect
    w = prf.rectangle(*rect).reshape(-1, 2)
    x = scale * (np.log(_uniform_open(w[:, 1])) - np.log(_uniform_open(w[:, 0])))
    out: F64 = x.reshape(node_hi - node_lo, key_hi - key_lo)
    return out


def keyed_gaussian(prf: PositionPRF, rect: Rect, sigma: float) -> F64:
    """Continuous N(0, σ²) noise by Box–Muller on the two words (floating point)."""
    _, node_lo, node_hi, key_lo, key_hi = rect
    w = prf.rectangle(*rect).reshape(-1, 2)
    r = np.sqrt(-2.0 * np.log(_uniform_open(w[:, 0])))
    x = sigma * r * np.cos(2.0 * np.pi * _uniform_open(w[:, 1]))
    out: F64 = x.reshape(node_hi - node_lo, key_hi - key_lo)
    return out


def _gaussian_gamma(y: int, sigma2: Fraction, t: int) -> Fraction:
    return (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)


def _accept_trial(
    prf: PositionPRF, rect: Rect, y: I64, sigma2: Fraction, t: int, trial: int
) -> NDArray[np.bool_]:
    """Bernoulli(e^{−γ(y)}) for every position of ``rect`` (CKS Alg. 3, line 5), exactly."""
    bern = prf.child(f"trial{trial}/bernoulli")
    words = bern.rectangle(*rect).reshape(-1, 2)[:, 0]
    e_lo, e_hi = _exp_enclosure(words)
    s2 = float(sigma2)
    mag = np.abs(y).astype(np.float64)
    gamma = (mag - s2 / t) ** 2 / (2.0 * s2)
    g_lo, g_hi = gamma * (1.0 - _MARGIN), gamma * (1.0 + _MARGIN)
    accept = e_lo > g_hi
    undecided = ~accept & ~(e_hi < g_lo)
    for i in np.flatnonzero(undecided):
        stream = _word_stream(int(words[i]), _ext_word(bern, rect, int(i), 0))
        accept[i] = _exact_exp_greater(_gaussian_gamma(int(y[i]), sigma2, t), stream)
    return accept


def keyed_discrete_gaussian(prf: PositionPRF, rect: Rect, sigma2: Fraction) -> I64:
    """Exact N_Z(0, σ²) noise for every position of ``rect`` (CKS 2020 Alg. 3), int64.

    Trial r of a position uses the domains ``trial{r}/laplace`` and
    ``trial{r}/bernoulli`` at that position, and the first accepted trial is its
    value — whatever rectangle it is computed in. Trials run on the rows of
    ``rect`` that still hold a pending position while more than 1/512 of it is
    pending, then position by position.
    """
    level, node_lo, node_hi, key_lo, key_hi = rect
    s2 = Fraction(sigma2)
    t = math.isqrt(s2.numerator // s2.denominator) + 1
    n_keys = key_hi - key_lo
    out = np.zeros((node_hi - node_lo, n_keys), dtype=np.int64)
    pending = np.ones(out.shape, dtype=bool)
    trial = 0
    while pending.sum() * 512 > pending.size:
        rows = np.flatnonzero(pending.any(axis=1))
        r0, r1 = int(rows[0]), int(rows[-1]) + 1
        sub: Rect = (level, node_lo + r0, node_lo + r1, key_lo, key_hi)
        g1, g2 = _geometric_pair(prf.child(f"trial{trial}/laplace"), sub, Fraction(t))
        y = (g1 - g2).reshape(r1 - r0, n_keys)
        ok = pending[r0:r1] & _accept_trial(prf, sub, y.ravel(), s2, t, trial).reshape(y.shape)
        out[r0:r1][ok] = y[ok]
        pending[r0:r1] &= ~ok
        trial += 1
    for node, key in zip(*np.nonzero(pending), strict=True):
        one: Rect = (
            level,
            node_lo + int(node),
            node_lo + int(node) + 1,
            key_lo + int(key),
            key_lo + int(key) + 1,
        )
        r = trial
        while True:
            g1, g2 = _geometric_pair(prf.child(f"trial{r}/laplace"), one, Fraction(t))
            if _accept_trial(prf, one, g1 - g2, s2, t, r)[0]:
                out[node, key] = g1[0] - g2[0]
                break
            r += 1
    return out


# --------------------------------------------------------------------------------------
# The PRF as a noise source
# --------------------------------------------------------------------------------------
class PRFSource:
    """Noise rows as a pure function of (PRF, row index, key index): a
    :class:`~dpcount.privacy.source.NoiseSource` for the keyed engines.

    Row r of the stream (the r-th row a noise process draws) for key i is the sample
    at position (level 0, node ``start + r``, key i) of ``prf``, by the exact sampler
    of the distribution's kind: :func:`keyed_discrete_laplace`,
    :func:`keyed_discrete_gaussian` (exact integers), :func:`keyed_laplace`,
    :func:`keyed_gaussian` (floating point). So a key's noise depends only on the
    secret, the key and how many rows the process drew before — not on the other keys
    of the chunk, the chunking, the engine or retries.

    Args:
        prf: the run's :class:`PositionPRF`.
        key_lo, key_hi: the key indices [key_lo, key_hi) of the columns.
        start: the row index of the first row (default 0).
    """

    def __init__(self, prf: PositionPRF, key_lo: int, key_hi: int, start: int = 0) -> None:
        if not 0 <= key_lo < key_hi:
            raise ValueError(f"need 0 <= key_lo < key_hi, got [{key_lo}, {key_hi})")
        self.prf = prf
        self.key_lo, self.key_hi = key_lo, key_hi
        self._next = start

    @property
    def width(self) -> int:
        return self.key_hi - self.key_lo

    @property
    def rows_drawn(self) -> int:
        return self._next

    def draw(self, sampler: object, rows: int) -> NDArray[np.generic]:
        rect = (0, self._next, self._next + rows, self.key_lo, self.key_hi)
        self._next += rows
        shape = (rows, self.width)
        if isinstance(sampler, DiscreteLaplaceNoise):
            return keyed_discrete_laplace(self.prf, rect, sampler.scale)
        if isinstance(sampler, DiscreteGaussianNoise):
            return keyed_discrete_gaussian(self.prf, rect, sampler.sigma2)
        if isinstance(sampler, LaplaceNoise):
            return keyed_laplace(self.prf, rect, float(sampler.scale))
        if isinstance(sampler, GaussianNoise):
            return keyed_gaussian(self.prf, rect, float(sampler.sigma))
        if isinstance(sampler, ZeroNoise):  # structure tests
            return np.zeros(shape)
        if isinstance(sampler, ConstantNoise):
            return np.full(shape, float(sampler.value))
        raise TypeError(f"no keyed PRF sampler for {sampler!r}")
