"""Honaker's exact discrete release, vectorised: node values in int64 under a checked
bound and each release rounded once by error-free float transformations, with Python
ints as the fallback. Every output must have the bits of the exact rational rounded
once (the Python-int path, and ``Fraction`` as the oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

import dpcount.counting.honaker as honaker
from dpcount.counting import Honaker
from dpcount.privacy.noise import NoiseBuffer
from dpcount.privacy.source import NoiseSource


@dataclass(frozen=True)
class Uniform:
    """Integer sampler: uniform integers in [−r, r]."""

    r: int
    integer: ClassVar[bool] = True

    @property
    def variance(self) -> float:
        return self.r * (self.r + 1) / 3.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        return rng.integers(-self.r, self.r + 1, size=size, dtype=np.int64)


def _bits(a: object) -> list[int]:
    return np.asarray(a, dtype=np.float64).view(np.int64).ravel().tolist()


def _outputs(T: int, r: int, dim: int | None, seed: int) -> list[int]:
    mech = Honaker(T, epsilon=1.0, noise="discrete-laplace", rng=seed).with_sampler(Uniform(r))
    x = np.random.default_rng(seed).integers(0, 3, size=(T,) if dim is None else (T, dim))
    out = _bits(mech.release(x))
    stream = mech.stream()  # mixed chunks: carried node values cross batches
    parts = [stream.update_many(x[:5]), stream.update(x[5]), stream.update_many(x[6:])]
    return out + _bits(np.concatenate([np.asarray(p).reshape(-1) for p in parts]))


@pytest.mark.parametrize(("T", "r"), [(7, 3), (40, 3), (1000, 50), (4097, 10**6)])
@pytest.mark.parametrize("dim", [None, 3])
def test_int64_path_gives_the_python_int_paths_bits(
    T: int, r: int, dim: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _outputs(T, r, dim, seed=T)
    monkeypatch.setattr(honaker, "_INT64_BOUND", 0)  # every batch on Python ints
    assert _outputs(T, r, dim, seed=T) == fast


@pytest.mark.parametrize("dim", [None, 2])
def test_rounding_against_fractions_with_the_fallback(
    monkeypatch: pytest.MonkeyPatch, dim: int | None
) -> None:
    """Crafted running sums of every magnitude (near or past 2^52 the fallback answers)
    against Fraction(S·L + numerator, L) rounded once by Python, the numerators from
    the Python-int path with the same draws."""
    T, n = 1000, 1000

    def draw() -> object:
        process = honaker.HonakerExactNoiseProcess(
            T, NoiseBuffer(NoiseSource.generator(Uniform(50), np.random.default_rng(1), dim), dim)
        )
        return process.next_many(n)

    noise = draw()
    assert isinstance(noise, honaker.HonakerBatchNoise)
    with monkeypatch.context() as m:
        m.setattr(honaker, "_INT64_BOUND", 0)
        numerators = draw()
    assert isinstance(numerators, np.ndarray) and numerators.dtype == object
    gen = np.random.default_rng(2)
    shape = (n,) if dim is None else (n, dim)
    scale = np.array([0, 1, 10, 2**20, 2**40, 2**52 - 3, 2**52 + 5, 2**60], dtype=np.int64)
    sums = gen.integers(-1000, 1000, size=shape) + scale[gen.integers(0, len(scale), size=shape)]
    sums *= np.where(gen.random(shape) < 0.5, -1, 1)
    fallbacks: list[int] = []
    own = noise.numerators
    monkeypatch.setattr(
        noise, "numerators", lambda index: fallbacks.append(len(index)) or own(index)
    )
    out = noise.add_and_round(sums)
    L = noise.denominator
    expected = [
        float(Fraction(int(s) * L + int(v), L))
        for s, v in zip(sums.ravel(), numerators.ravel(), strict=True)
    ]
    assert _bits(out) == _bits(expected)
    # only the steps with a sum near or past 2^52 fall back (the noise moves I < 2^11)
    big = np.abs(sums).reshape(n, -1).max(axis=1)
    sure, maybe = ((big >= 2**52 + s * 2**11).sum() for s in (1, -1))
    assert len(fallbacks) == 1 and 0 < sure <= fallbacks[0] <= maybe


def test_large_samples_take_the_python_int_path() -> None:
    """Samples beyond the int64 bound: Python ints, still the exact rational's bits."""
    T = 64
    process = honaker.HonakerExactNoiseProcess(
        T, NoiseBuffer(NoiseSource.generator(Uniform(2**57), np.random.default_rng(3)))
    )
    noise = process.next_many(T)
    assert isinstance(noise, np.ndarray) and noise.dtype == object
    L = process.denominator
    mech = Honaker(T, epsilon=1.0, noise="discrete-laplace", rng=3).with_sampler(Uniform(2**57))
    out = mech.release(np.zeros(T, dtype=np.int64))
    assert _bits(out) == _bits([float(Fraction(int(v), L)) for v in noise])


def test_ordinary_steps_never_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running sums below 2^52: every step of a long batch is rounded by the float path
    (the fallback is for values within ~2^−80 of a rounding boundary, or huge sums)."""
    calls: list[int] = []
    own = honaker.HonakerBatchNoise.numerators

    def spy(self: honaker.HonakerBatchNoise, index: NDArray[np.intp]) -> NDArray[np.object_]:
        calls.append(len(index))
        return own(self, index)

    monkeypatch.setattr(honaker.HonakerBatchNoise, "numerators", spy)
    T = 2**17
    x = np.random.default_rng(5).integers(0, 3, size=T)
    Honaker(T, epsilon=1.0, noise="discrete-laplace", rng=5).release(x)
    assert calls == []
