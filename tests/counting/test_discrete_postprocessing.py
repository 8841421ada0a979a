"""Audit finding 1: under integer noise every release is a function of the noisy vector.

A mechanism with ``supports_discrete_noise`` perturbs an integer vector y = R·x + ζ
and must release post-processing of y only. If the release is computed as
``S_t + fl(noise term)`` instead, the rounding of the noise term depends on ζ
alone, so the bits of an output with the same exact value differ between
neighbouring inputs (Honaker: the value 1 came out as ``0x1.fffffffffffffp-1``
only under x = 0).

The check used here needs no knowledge of which draw feeds which node: every
release of these mechanisms is an exact rational whose denominator divides a
known L (1 for the trees; lcm(2^{j+1} − 1) for Honaker), and y ↦ exact value is
the mechanism's linear estimator. So an implementation that computes exactly and
rounds once releases ``RN(value)``, which (i) is recovered from the output by
``Fraction(out).limit_denominator(L)`` (distinct such rationals are ≥ 1/L² apart,
far more than the rounding error) and (ii) makes equal exact values give equal
bits. We pool the outputs of both neighbouring inputs and of every output path
(release, stream.update, update_many in chunks; scalar and vector steps) and
check that each exact value has exactly one bit pattern, RN(value).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcount.counting import BinaryTree, CountingMechanism, Honaker, KaryTree


@dataclass(frozen=True)
class SmallIntegers:
    """Integer sampler: uniform integers in [−r, r] (hits many rounding cases quickly)."""

    r: int
    integer: ClassVar[bool] = True

    @property
    def variance(self) -> float:
        return self.r * (self.r + 1) / 3.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        return rng.integers(-self.r, self.r + 1, size=size, dtype=np.int64)


@dataclass(frozen=True)
class IntegerConstant:
    """Integer sampler whose every draw is ``value``."""

    value: int
    integer: ClassVar[bool] = True

    @property
    def variance(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        return np.full(size, self.value, dtype=np.int64)


def _honaker_denominator(horizon: int) -> int:
    return math.lcm(*((1 << (j + 1)) - 1 for j in range(horizon.bit_length())))


def _paths(mech: CountingMechanism, x: NDArray[np.int64]) -> list[NDArray[Any]]:
    """Outputs of release, stream.update and update_many (chunks 1, 2, rest)."""
    out = [np.asarray(mech.release(x))]
    stream = mech.stream()
    out.append(np.array([stream.update(v) for v in (x.tolist())]))
    stream = mech.stream()
    parts = [x[:1], x[1:3], x[3:]]
    out.append(np.concatenate([stream.update_many(p) for p in parts if len(p)]))
    return out


Builder = Callable[[int], CountingMechanism]

MECHANISMS: dict[str, tuple[Builder, Callable[[int], int]]] = {
    "honaker": (lambda T: Honaker(T, epsilon=1.0, noise="discrete-laplace"), _honaker_denominator),
    "binary": (lambda T: BinaryTree(T, epsilon=1.0, noise="discrete-laplace"), lambda T: 1),
    "kary-5-sub": (lambda T: KaryTree(T, epsilon=1.0, k=5, noise="discrete-laplace"), lambda T: 1),
    "kary-4": (
        lambda T: KaryTree(T, epsilon=1.0, k=4, subtract=False, noise="discrete-laplace"),
        lambda T: 1,
    ),
}


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@pytest.mark.parametrize("horizon", [7, pytest.param(40, marks=pytest.mark.slow)])
@pytest.mark.parametrize("dim", [None, pytest.param(2, marks=pytest.mark.slow)])
def test_outputs_are_a_function_of_the_noisy_vector(
    name: str, horizon: int, dim: int | None
) -> None:
    build, denominator = MECHANISMS[name]
    L = denominator(horizon)
    base = build(horizon)
    x = np.zeros(horizon if dim is None else (horizon, dim), dtype=np.int64)
    neighbour = x.copy()
    neighbour[0] = 1  # x_1 = 1: an event-level neighbour (vector: l1 change dim, fine here)
    bits: dict[Fraction, set[int]] = defaultdict(set)
    outputs = 0
    # Vector streams refill ~2^20 values per buffer: fewer seeds keep this fast.
    for seed in range(40 if dim is None else 6):
        mech = base.with_sampler(SmallIntegers(3))
        mech._rng = np.random.default_rng(seed)  # reproducible noise for this test
        for data in (x, neighbour):
            for out in _paths(mech, data):
                if base.integer_release:
                    assert out.dtype == np.int64, f"{name}: integer release must be int64"
                flat = out.astype(np.float64).ravel()
                for value in flat.tolist():
                    exact = Fraction(value).limit_denominator(L)
                    bits[exact].add(np.float64(value).view(np.int64).item())
                    outputs += 1
    assert outputs > 400
    wrong = {
        v: {float.hex(np.int64(b).view(np.float64).item()) for b in bs}
        for v, bs in bits.items()
        if bs != {np.float64(float(v)).view(np.int64).item()}
    }
    assert not wrong, (
        f"{name}: outputs not correctly rounded from the exact value (so not a function "
        f"of the noisy vector): {dict(list(wrong.items())[:5])}"
    )


def test_honaker_reproducer_value_one() -> None:
    """The audit's reproducer: Honaker(7), value 1 must always be encoded as 1.0."""
    seen: dict[str, set[str]] = {"zero": set(), "neighbour": set()}
    for seed in range(200):
        mech = Honaker(7, epsilon=1.0, noise="discrete-laplace").with_sampler(SmallIntegers(2))
        mech._rng = np.random.default_rng(seed)
        for label, data in (("zero", [0] * 7), ("neighbour", [1] + [0] * 6)):
            out = mech.release(np.array(data))
            for value in out.tolist():
                if abs(value - 1.0) < 1e-9:
                    seen[label].add(float.hex(value))
    assert seen["zero"] == seen["neighbour"] == {float.hex(1.0)}


@pytest.mark.parametrize(
    "mech",
    [
        BinaryTree(7, epsilon=1.0, noise="discrete-laplace"),
        KaryTree(100, epsilon=1.0, k=19, noise="discrete-laplace"),
        KaryTree(100, epsilon=1.0, k=4, noise="discrete-gaussian", delta=1e-6),
    ],
    ids=repr,
)
def test_tree_integer_release_is_exact_beyond_2_to_53(mech: KaryTree) -> None:
    """Integer node noise above 2^53 (exact in int64, not in float64) stays exact."""
    c = 2**55 + 1
    sized = mech.with_sampler(IntegerConstant(c))
    T = mech.horizon
    x = np.arange(T, dtype=np.int64) % 3
    # Every node used at t is added (Alg. 2 adds the subtracted nodes' fresh samples):
    # noise_t = ||digits(t)||_1 · c exactly.
    counts = [int(v) for v in mech.noise_coefficients()]
    expected = [int(s) + n * c for s, n in zip(np.cumsum(x).tolist(), counts, strict=True)]
    for out in _paths(sized, x):
        assert [int(v) for v in out.tolist()] == expected
    both = sized.release(np.stack([x, 2 * x], axis=1))
    assert [int(v) for v in both[:, 0].tolist()] == expected


def test_tree_refuses_samples_that_could_overflow_int64() -> None:
    tree = KaryTree(100, epsilon=1.0, k=19, noise="discrete-laplace")
    mech = tree.with_sampler(IntegerConstant(2**62))
    with pytest.raises(OverflowError, match="int64-safe bound"):
        mech.release(np.ones(100, dtype=np.int64))
    with pytest.raises(OverflowError, match="int64-safe bound"):
        mech.stream().update(1)


class Scripted:
    """Integer sampler handing out a fixed sequence of draws in order (then zeros)."""

    integer: ClassVar[bool] = True

    def __init__(self, draws: list[int]) -> None:
        self.draws = list(draws)
        self.variance = 1.0

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.int64]:
        n = math.prod((size,) if isinstance(size, int) else size)
        head, self.draws = self.draws[:n], self.draws[n:]
        out = np.zeros(n, dtype=np.int64)
        out[: len(head)] = head
        return out.reshape(size)


def _first_step_nodes(horizon: int, path: str) -> list[int]:
    """Draw indices of the Honaker nodes (j, 0) (those containing step 1).

    release (one next_many from step 0): level by level, node (j, m) is draw
    Σ_{i<j} ⌊T/2^i⌋ + m. stream.update: at step t the leaf, then the nodes completing
    at t bottom-up; node (j, 0) completes at t = 2^j after Σ_i ⌊(2^j − 1)/2^i⌋ earlier
    nodes and is the (j+1)-th draw of that step.
    """
    levels = [j for j in range(horizon.bit_length()) if 1 << j <= horizon]
    if path == "release":
        return [sum(horizon >> i for i in range(j)) for j in levels]
    return [sum(((1 << j) - 1) >> i for i in range(j + 1)) + j for j in levels]


@pytest.mark.parametrize("horizon", [7, 40])
@pytest.mark.parametrize("path", ["release", "stream"])
def test_honaker_same_noisy_vector_same_bits(horizon: int, path: str) -> None:
    """x = 0 with node noise ζ and x_1 = 1 with ζ' = ζ − R·e_1 perturb to the same y:
    the outputs must be bit-identical (audit finding 1, as stated)."""
    base = Honaker(horizon, epsilon=1.0, noise="discrete-laplace")
    nodes = _first_step_nodes(horizon, path)
    gen = np.random.default_rng(horizon)
    x, neighbour = np.zeros(horizon, dtype=np.int64), np.eye(horizon, dtype=np.int64)[0]
    checked = 0
    for _ in range(150):
        zeta = gen.integers(-3, 4, size=2 * horizon).tolist()
        shifted = list(zeta)
        for i in nodes:
            shifted[i] -= 1  # y' = R x' + ζ' = R x + ζ
        outs = []
        for data, draws in ((x, zeta), (neighbour, shifted)):
            mech = base.with_sampler(Scripted(draws))
            if path == "release":
                outs.append(np.asarray(mech.release(data)))
            else:
                stream = mech.stream()
                outs.append(np.array([stream.update(v) for v in data.tolist()]))
        assert outs[0].view(np.int64).tolist() == outs[1].view(np.int64).tolist()
        checked += horizon
    assert checked == 150 * horizon


def test_integer_sampler_on_an_inexact_release_is_refused() -> None:
    """The base class refuses ``S_t + fl(noise)`` for integer noise: a mechanism must
    release an integer combination (trees) or an exact process (Honaker)."""
    from dpcount.counting import SqrtFactorization

    mech = SqrtFactorization(8, epsilon=1.0, delta=1e-6, rng=0).with_sampler(SmallIntegers(2))
    with pytest.raises(TypeError, match="cannot use an integer sampler"):
        mech.release(np.ones(8, dtype=np.int64))
    with pytest.raises(TypeError, match="cannot use an integer sampler"):
        mech.stream().update(1)
    with pytest.raises(TypeError, match="cannot use an integer sampler"):
        mech.stream().update_many([1, 2])
