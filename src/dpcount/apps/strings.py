"""Substring and episode counting under continual observation.

constant-matters (Fichtenberger, Henzinger, Upadhyay, ICML 2023), App. B.3–B.4.
A stream of letters s_1 s_2 … over an alphabet 𝒰 is turned into a stream of
binary vectors indexed by all words of length 1..ℓ (d = Σ_{j ≤ ℓ} |𝒰|^j
coordinates), whose prefix sums a continual counting mechanism releases
(M_ep = M_count ⊗ I_d):

* :class:`SubstringCounter` (Cor. B.4): v_t[w] = 1 iff the current text ends
  with w, so Σ_{i ≤ t} v_i[w] is the number of occurrences of w as a substring
  of s_1 … s_t.
* :class:`EpisodeCounter` (Cor. B.6): v_t[e] = 1 iff a minimal occurrence of the
  episode e ends at s_t, so the sums count minimal occurrences. The non-private
  incremental counter is :class:`MinimalOccurrenceCounter`.

Definitions (App. B.4). An episode e = e_1 … e_ℓ is a word; an occurrence of e
in s is a subsequence of s equal to e; an occurrence with positions
i_1 < … < i_ℓ is *minimal* if no other occurrence j_1 < … < j_ℓ has
[j_1, j_ℓ] ⊊ [i_1, i_ℓ]. As in the paper ("there can be at most one minimal
occurrence of e that ends at a fixed element"), minimal occurrences are counted
by their window [i_1, i_ℓ]: several position tuples with the same minimal
window count once. The paper's support threshold S (restricting the output to
frequent episodes) is not implemented: choosing which episodes to release from
the data would need its own privacy analysis, so every episode's count is
released.

Sensitivities (a correction to the paper). Neighbouring texts differ in one
letter, at position p. That changes the indicator vectors at *several* steps,
so the sensitivity the counting mechanism needs is the per-coordinate total
variation of :class:`~dpcount.apps.StreamSensitivity`, not the ℓ₂ norm of one
step. Cor. B.4's value ℓ is wrong even on its own terms (its sum is ℓ(ℓ+1) > ℓ²
before the square root). See :func:`substring_sensitivity` and
:func:`episode_sensitivity` for the bounds used, both checked against brute
force in the tests.

Word layout (paper → code): words of length j occupy the block starting at
Σ_{i<j} |𝒰|^i, ordered by the base-|𝒰| code of their letters' alphabet
positions (first letter most significant); :meth:`words` lists them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_integer, check_iterable
from dpcount.apps._common import AppBase, AppFields, StreamSensitivity
from dpcount.counting.base import CountingStream
from dpcount.privacy.budget import Budget
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "EpisodeCounter",
    "MinimalOccurrenceCounter",
    "SubstringCounter",
    "episode_sensitivity",
    "substring_sensitivity",
]


def substring_sensitivity(max_length: int) -> StreamSensitivity:
    """Sensitivity of the substring-indicator stream when one letter changes.

    If letter p changes, then at step p + r (0 ≤ r < ℓ) exactly the suffixes of
    length j = r+1..ℓ contain p: each such suffix w loses 1 and the new suffix
    w′ ≠ w gains 1 (2(ℓ − r) entries ±1). A word of length j can be touched at
    most once per step and only at the j steps r < j, and each length j gets 2j
    touches in total. So Γ₁ ≤ Σ_j 2j = ℓ(ℓ+1) and
    Γ₂² ≤ Σ_j 2·j² = ℓ(ℓ+1)(2ℓ+1)/3 (at most two words of length j with j
    touches each maximize the squares).

    (Cor. B.4 states ℓ; its own count gives √(ℓ(ℓ+1)) > ℓ for one step, and the
    change spans ℓ steps, so neither is a valid sensitivity for correlated noise.)
    """
    ell = check_integer("max_length", max_length, ge=1)
    return StreamSensitivity(float(ell * (ell + 1)), math.sqrt(ell * (ell + 1) * (2 * ell + 1) / 3))


def episode_sensitivity(alphabet_size: int, max_length: int) -> StreamSensitivity:
    """Sensitivity of the minimal-occurrence indicator stream when one letter changes.

    Let letter p change from a to a′. (1) An episode containing neither a nor
    a′ is unaffected. (2) A window not containing p is minimal in one text iff
    in the other (it and its sub-windows are identical). (3) At most |e|
    minimal windows of e contain p: for such a window [s, f] let r be the
    longest prefix of e that is a subsequence of s_s … s_p (r ≥ 1); if r = |e|
    then f = p, else f is the earliest end of a match of e_{r+1..} after p —
    so two windows with the same r would have the same end, impossible for
    distinct minimal windows. Hence each affected episode e has at most 2|e|
    changed indicator entries (|e| per text), and with
    N_j = |𝒰|^j − (|𝒰| − 2)^j episodes of length j containing a or a′:

    * Γ₁ ≤ Σ_{j ≤ ℓ} N_j · 2j,
    * Γ₂² ≤ Σ_{j ≤ ℓ} N_j · (2j)².

    (Cor. B.6 states 2√(|𝒰|^{ℓ−1}ℓ) as an ℓ₂ norm of the whole change, which is
    not a valid sensitivity for correlated noise, and its count of affected
    episodes — those *ending* with the changed letter — misses episodes whose
    windows merely contain it.)
    """
    u = check_integer("alphabet_size", alphabet_size, ge=2)
    ell = check_integer("max_length", max_length, ge=1)
    affected = [u**j - (u - 2) ** j for j in range(1, ell + 1)]
    l1 = sum(n * 2 * j for j, n in enumerate(affected, start=1))
    l2_sq = sum(n * 4 * j * j for j, n in enumerate(affected, start=1))
    return StreamSensitivity(float(l1), math.sqrt(l2_sq))


class _Words:
    """The alphabet and the layout of all words of length 1..ℓ."""

    def __init__(self, alphabet: Iterable[Hashable], max_length: int) -> None:
        if isinstance(alphabet, (str, bytes)):
            letters: tuple[Hashable, ...] = tuple(alphabet)
        else:
            try:
                letters = tuple(alphabet)
            except TypeError:
                raise TypeError(
                    f"alphabet must be a sequence of letters, got {alphabet!r}"
                ) from None
        if len(letters) < 2:
            raise ValueError(f"alphabet must have at least 2 letters, got {letters!r}")
        index: dict[Hashable, int] = {}
        for i, letter in enumerate(letters):
            try:
                if letter in index:
                    raise ValueError(f"alphabet must not repeat a letter, got {letter!r} twice")
            except TypeError:
                raise TypeError(f"alphabet letters must be hashable, got {letter!r}") from None
            index[letter] = i
        self.letters = letters
        self.index = index
        self.size = len(letters)
        self.max_length = check_integer("max_length", max_length, ge=1)
        self.offsets = [0]
        for j in range(1, self.max_length + 1):
            self.offsets.append(self.offsets[-1] + self.size**j)
        self.dim = self.offsets[-1]

    def letter(self, value: Any, name: str = "letter") -> int:
        try:
            return self.index[value]
        except (KeyError, TypeError):
            raise ValueError(
                f"{name} must be in the alphabet {self.letters!r}, got {value!r}"
            ) from None

    def word_index(self, word: Sequence[Hashable]) -> int:
        if isinstance(word, (str, bytes, Sequence)):
            letters = list(word)
        else:
            raise TypeError(f"word must be a sequence of letters, got {word!r}")
        if not 1 <= len(letters) <= self.max_length:
            raise ValueError(
                f"word must have length 1..{self.max_length}, got {word!r} of length {len(letters)}"
            )
        code = 0
        for letter in letters:
            code = code * self.size + self.letter(letter, "word letters")
        return self.offsets[len(letters) - 1] + code

    def words(self) -> list[tuple[Hashable, ...]]:
        out: list[tuple[Hashable, ...]] = []
        for j in range(1, self.max_length + 1):
            for code in range(self.size**j):
                digits = []
                for _ in range(j):
                    code, r = divmod(code, self.size)
                    digits.append(self.letters[r])
                out.append(tuple(reversed(digits)))
        return out


class MinimalOccurrenceCounter:
    """Non-private incremental counter of minimal occurrences of all episodes of length ≤ ℓ.

    State: for every episode e, L_e = the latest start i such that e is a
    subsequence of s_i … s_t (0 if none). When letter a arrives at step t, only
    episodes ending with a change: for e = e′a, a minimal window ends at t iff
    L_{e′}(t−1) > L_e(t−1) (e′ occurs and e does not already occur in the
    window [L_{e′}(t−1), t−1]), and then L_e(t) = L_{e′}(t−1); for |e| = 1 the
    window [t, t] is minimal. O(Σ_{j<ℓ} |𝒰|^j) vectorized work per letter.

    Letters are alphabet positions 0..size−1; the episode layout is that of the
    module docstring.
    """

    def __init__(self, alphabet_size: int, max_length: int) -> None:
        self.alphabet_size = check_integer("alphabet_size", alphabet_size, ge=1)
        self.max_length = check_integer("max_length", max_length, ge=1)
        a = self.alphabet_size
        self.offsets = [0]
        for j in range(1, self.max_length + 1):
            self.offsets.append(self.offsets[-1] + a**j)
        self.dim = self.offsets[-1]
        # _latest[j-1][code]: latest start (1-based, 0 = none) of the episode of length j.
        self._latest = [np.zeros(a**j, dtype=np.int64) for j in range(1, self.max_length + 1)]
        self.counts = np.zeros(self.dim, dtype=np.int64)
        self.step = 0

    def update(self, letter: int) -> NDArray[np.bool_]:
        """Add one letter (its alphabet position); return which episodes have a minimal
        occurrence ending at it (boolean vector of length ``dim``)."""
        a = self.alphabet_size
        c = check_integer("letter", letter, ge=0, le=a - 1)
        self.step += 1
        t = self.step
        ends = np.zeros(self.dim, dtype=np.bool_)
        # Longest first, so L_{e′} is still the value at t − 1 when it is read.
        for j in range(self.max_length, 1, -1):
            cur = self._latest[j - 1]
            prev = self._latest[j - 2]  # L_{e′}(t−1) for every e′ of length j − 1
            sl = slice(c, a**j, a)  # episodes e′·c
            hit = prev > cur[sl]
            ends[self.offsets[j - 1] + c : self.offsets[j] : a] = hit
            cur[sl] = np.maximum(prev, cur[sl])
        self._latest[0][c] = t
        ends[c] = True
        self.counts += ends
        return ends


class _TextApp(AppBase):
    """Shared stream plumbing of the two string apps."""

    _words: _Words
    _latest: NDArray[np.float64] | None
    _stream: CountingStream

    #: what the step sensitivity is computed from (named when a budget sets one)
    _bounds: ClassVar[str]

    _shown = ("alphabet", "max_length", "horizon")

    def __init__(
        self,
        alphabet: Iterable[Hashable],
        max_length: int,
        horizon: int,
        *,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[AppFields],
    ) -> None:
        user_budget, choice = self._options(budget, fields, bounds=self._bounds)
        self._words = _Words(alphabet, max_length)
        self._setup_mechanism(
            choice,
            user_budget,
            self._sensitivity(),
            horizon=horizon,
            rng=rng,
            neighbouring="event-level: letter streams differ in one letter",
            integer=True,  # integer-valued stream
        )
        self._reset()

    def _sensitivity(self) -> StreamSensitivity:
        """Γ₁, Γ₂ of a changed letter for ``self._words``."""
        raise NotImplementedError

    @property
    def alphabet(self) -> tuple[Hashable, ...]:
        return self._words.letters

    @property
    def max_length(self) -> int:
        return self._words.max_length

    @property
    def dim(self) -> int:
        """Number of words of length 1..ℓ (released coordinates)."""
        return self._words.dim

    @property
    def step(self) -> int:
        """Letters released so far."""
        return int(self._stream.step)

    def words(self) -> list[tuple[Hashable, ...]]:
        """All words of length 1..ℓ in release order."""
        return self._words.words()

    def word_index(self, word: Sequence[Hashable]) -> int:
        """Position of ``word`` in the released vector."""
        return self._words.word_index(word)

    def _indicator(self, letter: int) -> NDArray[np.float64]:
        raise NotImplementedError

    def _check_horizon(self, n: int) -> None:
        if self.step + n > self.horizon:
            raise ValueError(
                f"{n} letter(s) would exceed the horizon {self.horizon} "
                f"({self.step} already released)"
            )

    def update(self, letter: Hashable) -> NDArray[np.float64]:
        """Add one letter; return the private counts of all words (length ``dim``)."""
        c = self._words.letter(letter)
        self._check_horizon(1)
        out: NDArray[np.float64] = np.asarray(
            self._stream.update(self._indicator(c)), dtype=np.float64
        )
        self._latest = out
        return np.array(out)

    def update_many(self, letters: Iterable[Hashable]) -> NDArray[np.float64]:
        """Add several letters (e.g. a string); return the private counts after each."""
        codes = [self._words.letter(x) for x in check_iterable("letters", letters, allow_str=True)]
        if not codes:
            raise ValueError("letters must contain at least one letter, got none")
        self._check_horizon(len(codes))
        rows = np.stack([self._indicator(c) for c in codes])
        out: NDArray[np.float64] = self._stream.update_many(rows)
        self._latest = out[-1].copy()
        return out

    def count(self, word: Sequence[Hashable]) -> float:
        """The latest private count of ``word``."""
        if self._latest is None:
            raise ValueError("nothing released yet: call update() first")
        return float(self._latest[self._words.word_index(word)])


class SubstringCounter(_TextApp):
    """Private counts of all substrings of length ≤ ℓ after each letter (Cor. B.4).

    After letter t the release holds, for every word w of length 1..ℓ, the
    number of occurrences of w as a (contiguous) substring of s_1 … s_t, plus
    noise.

    Neighbouring relation (event level): letter streams differ in one letter.
    Sensitivity (:func:`substring_sensitivity`): Γ₁ = ℓ(ℓ+1) (Laplace),
    Γ₂ = √(ℓ(ℓ+1)(2ℓ+1)/3) (Gaussian) — not the paper's ℓ (see the module
    docstring).

    Formal guarantee: for that event-level relation the releases of all T
    letters together are ε-DP without a delta and (ε, δ)-DP with one — the
    counting mechanism's guarantee (:attr:`privacy`, :meth:`dp_event`),
    calibrated for Γ₁/Γ₂ above. Fichtenberger, Henzinger, Upadhyay, "Constant
    Matters: Fine-grained Error Bound on Differentially Private Continual
    Observation", ICML 2023 (arXiv:2202.11205), App. B.3, Corollary B.4 (with
    the sensitivity corrected, see the module docstring). Exact error: every
    coordinate at step t has variance ``variances()[t − 1]``.

    Letters outside the alphabet raise ValueError and are not consumed. That
    refusal is a data-dependent signal the guarantee does not cover (a stream
    that stops at letter t reveals that letter t is not in the alphabet); keep
    such errors with the data holder (:mod:`dpcount.apps._bounds`). There is no
    nearest letter to clip to; the clip-and-report alternative is to map every
    unknown letter to a fixed letter of the alphabet (e.g. a ``"?"`` added to
    it) before calling :meth:`update`, and count the mapped letters yourself
    (that count is not private). The map looks at one letter at a time, so the
    guarantee, for letter streams differing in one letter, is unchanged.

    Args:
        alphabet: the letters (a string, or a sequence of distinct hashables).
        max_length: ℓ ≥ 1.
        horizon: T, the number of letters.
        mechanism, k, subtract, rng: as for :class:`~dpcount.apps.ContinualHistogram`.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon``, ``delta``, ``noise``, ``calibration``), as for
            :class:`~dpcount.apps.ContinualHistogram`. The step sensitivity is
            computed from ℓ (a budget that sets one is refused).

    Example:
        >>> from dpcount.apps import SubstringCounter
        >>> from dpcount.privacy import ZeroNoise
        >>> sc = SubstringCounter("ab", 2, horizon=5, epsilon=1.0).with_sampler(ZeroNoise())
        >>> _ = sc.update_many("abab")
        >>> sc.count("ab"), sc.count("ba"), sc.count("a")
        (2.0, 1.0, 2.0)
    """

    _bounds = "max_length"

    def _sensitivity(self) -> StreamSensitivity:
        return substring_sensitivity(self._words.max_length)

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        self._latest = None
        self._suffixes: list[int] = []  # codes of the current suffixes of length 1, 2, …

    def _indicator(self, letter: int) -> NDArray[np.float64]:
        a = self._words.size
        self._suffixes = [letter] + [
            code * a + letter for code in self._suffixes[: self.max_length - 1]
        ]
        v = np.zeros(self.dim)
        for j, code in enumerate(self._suffixes):
            v[self._words.offsets[j] + code] = 1.0
        return v


class EpisodeCounter(_TextApp):
    """Private counts of minimal occurrences of all episodes of length ≤ ℓ (Cor. B.6).

    After letter t the release holds, for every episode e of length 1..ℓ, the
    number of minimal occurrences (minimal windows, see the module docstring) of
    e in s_1 … s_t, plus noise. The exact counts come from
    :class:`MinimalOccurrenceCounter`.

    Neighbouring relation (event level): letter streams differ in one letter.
    Sensitivity (:func:`episode_sensitivity`): with N_j = |𝒰|^j − (|𝒰|−2)^j,
    Γ₁ = Σ_j 2j·N_j (Laplace) and Γ₂ = (Σ_j 4j²·N_j)^½ (Gaussian).

    Formal guarantee: as for :class:`SubstringCounter` (event-level ε-DP without a
    delta, (ε, δ)-DP with one, calibrated for Γ₁/Γ₂ above), by Fichtenberger,
    Henzinger, Upadhyay, "Constant Matters" (ICML 2023, arXiv:2202.11205), App. B.4,
    Corollary B.6 (with the sensitivity corrected, see the module docstring). Exact
    error: every coordinate at step t has variance ``variances()[t − 1]``.

    Letters outside the alphabet raise ValueError and are not consumed, a
    data-dependent signal the guarantee does not cover; :class:`SubstringCounter`
    describes the clip-and-report alternative (whose count of mapped letters is not
    private).

    Args:
        alphabet, horizon, mechanism, k, subtract, rng: as for :class:`SubstringCounter`.
        max_length: ℓ ≥ 1.
        budget: as for :class:`SubstringCounter`; the step sensitivity is computed
            from the alphabet size and ℓ (a budget that sets one is refused).

    Example:
        >>> from dpcount.apps import EpisodeCounter
        >>> from dpcount.privacy import ZeroNoise
        >>> ec = EpisodeCounter("abc", 2, horizon=6, epsilon=1.0).with_sampler(ZeroNoise())
        >>> _ = ec.update_many("aacb")  # windows of "ab": [2, 4] only
        >>> ec.count("ab"), ec.count("aa"), ec.count("ca")
        (1.0, 1.0, 0.0)
    """

    _bounds = "the alphabet size and max_length"

    def _sensitivity(self) -> StreamSensitivity:
        return episode_sensitivity(self._words.size, self._words.max_length)

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        self._latest = None
        self.counter = MinimalOccurrenceCounter(self._words.size, self._words.max_length)

    def _indicator(self, letter: int) -> NDArray[np.float64]:
        return self.counter.update(letter).astype(np.float64)
