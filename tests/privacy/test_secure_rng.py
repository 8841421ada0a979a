"""The secure default generator (rng=None) and the single normalization point."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcount.counting import BinaryTree, KaryTree
from dpcount.privacy import as_generator, is_secure, secure_generator


def test_none_gives_a_cryptographic_generator() -> None:
    g = as_generator(None)
    assert isinstance(g, np.random.Generator)
    assert is_secure(g)
    assert type(g.bit_generator).__name__ in ("AESCounter", "ChaCha")


def test_each_secure_generator_has_a_fresh_key() -> None:
    a, b = secure_generator(), secure_generator()
    assert not np.array_equal(a.integers(0, 2**63, 8), b.integers(0, 2**63, 8))


def test_seeds_stay_reproducible_and_are_not_secure() -> None:
    assert as_generator(5).random() == as_generator(5).random()
    assert not is_secure(as_generator(5))
    assert not is_secure(as_generator(np.random.SeedSequence(1)))


@pytest.mark.parametrize(
    "build",
    [
        lambda: BinaryTree(100, epsilon=1.0),
        lambda: KaryTree(100, epsilon=1.0, k=5, noise="gaussian", delta=1e-6),
        lambda: KaryTree(100, epsilon=1.0, noise="discrete-laplace"),
    ],
)
def test_mechanisms_default_to_the_secure_generator(build) -> None:  # type: ignore[no-untyped-def]
    m = build()
    assert is_secure(m._rng)
    # Two default mechanisms draw different noise.
    assert not np.array_equal(m.release(np.zeros(100)), build().release(np.zeros(100)))


def test_secure_output_is_uniform() -> None:
    """Sanity of the bit stream behind the Generator: chi-square on 256 byte values.

    The generator is keyed afresh (OS entropy): the p-value of a uniform stream is
    uniform (up to the chi-square approximation, with 4096 expected a cell), so the
    test fails w.p. about 1e-10 (1e-6 with the bound of 1e-6 it had)."""
    g = secure_generator()
    data = np.frombuffer(g.bytes(1 << 20), dtype=np.uint8)
    counts = np.bincount(data, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-10
    # The same test rejects a biased stream (low bit forced to 0).
    biased = np.bincount(data & 0xFE, minlength=256)
    assert stats.chisquare(biased).pvalue < 1e-12


def test_chacha_fallback_is_a_working_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without AES-NI the default is ChaCha20: check it works behind a Generator."""
    import randomgen

    class NoAesni(randomgen.AESCounter):  # type: ignore[misc]
        @property
        def use_aesni(self) -> bool:
            return False

    monkeypatch.setattr(randomgen, "AESCounter", NoAesni)
    g = secure_generator()
    assert type(g.bit_generator).__name__ == "ChaCha"
    assert is_secure(g)
    x = g.standard_normal(100_000)
    # keyed afresh: the KS p-value of N(0, 1) draws is uniform: this fails w.p. ~1e-10
    # (it was 1e-4 with the bound of 1e-4)
    assert stats.kstest(x, "norm").pvalue > 1e-10
    # the same test rejects a 20% wrong scale on the same draws: sup|Φ(x) − Φ(x/1.2)|
    # = 0.044, √n·0.044 = 13.9, and √n·sup|F_n − Φ| > 4 w.p. ≤ 2e^-32 = 2.5e-14 (DKW),
    # so √n·D > 9.9 and p < 1.4e-85 but w.p. 2.5e-14
    assert stats.kstest(x, stats.norm(scale=1.2).cdf).pvalue < 1e-10
