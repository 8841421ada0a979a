"""The batch release's blocked running sums: the same floats and errors as numpy's cumsum.

:func:`dpcount.counting._steps.add_running_sums` sums in cache-sized blocks (whole
numbers in int64); the reference is the plain computation it replaces:
``sums = np.cumsum(x, axis=0)``, :func:`check_running_sums`, ``noise + sums``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpcount.counting import BLT, BinaryTree, _steps
from dpcount.counting._steps import (
    NotWholeNumberError,
    add_running_sums,
    check_integral_array,
    check_running_sums,
    stream_array_and_bounds,
)
from dpcount.privacy import float_safe
from dpcount.privacy.float_safe import snap_release
from dpcount.privacy.source import NoiseSource

B = 2.0**53


def _reference(noise: Any, x: Any) -> tuple[str, Any]:
    try:
        with np.errstate(over="ignore"):
            sums = np.cumsum(x, axis=0)
        check_running_sums("x", sums)
    except ValueError as err:
        return "error", str(err)
    return "release", noise + sums


def _blocked(noise: Any, x: Any) -> tuple[str, Any]:
    out = noise.copy()
    try:
        add_running_sums("x", out, x)
    except ValueError as err:
        return "error", str(err)
    return "release", out


def _steps_cases(shape: tuple[int, ...]) -> list[Any]:
    rng = np.random.default_rng(0)

    def counts() -> Any:
        return rng.integers(-3, 4, shape).astype(np.float64)

    cases = [counts(), rng.standard_normal(shape), np.full(shape, -0.0), np.full(shape, 1e308)]
    half = counts()
    half[len(half) // 2 :] += 0.5  # whole blocks, then fractional ones
    cases.append(half)
    back = counts()
    back[len(back) // 3] = 0.25  # a fractional block whose sum is whole again
    back[min(len(back) - 1, len(back) // 3 + 1)] = 0.75
    cases.append(back)
    zero_run = np.full(shape, -0.0)
    zero_run[-1] = 1.0  # -0.0 sums until the last step
    cases.append(zero_run)
    for big in (B, 2.0**63, -(2.0**63), 1e300):  # refused, or beyond int64
        c = counts()
        c[len(c) // 2] = big
        cases.append(c)
    edge = counts()
    edge[0], edge[1:] = B - 2, 1.0  # crosses 2^53 at step 3
    cases.append(edge)
    cancel = counts()
    cancel[0], cancel[1:] = 2.0**60, -(2.0**60)
    cases.append(cancel)
    for first, rest in ((0.0, -0.0), (3.0, -0.0), (-5.0, 0.0), (B - 1, 0.0), (0.5, 0.0)):
        sparse = np.full(shape, rest)  # blocks of zero steps after a sum (or at the start)
        sparse[0] = first
        sparse[len(sparse) // 2] = 1.0
        cases.append(sparse)
    tail = counts()
    tail[len(tail) // 4 :] = 0.0  # zero blocks after per-coordinate sums
    cases.append(tail)
    return cases


@pytest.mark.parametrize("shape", [(1,), (9,), (40,), (40, 3), (5, 9)])
def test_blocked_sums_equal_cumsum_bit_for_bit(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of 8 values: every boundary case (int64/float blocks, -0.0, 2^53, 2^63)
    gives the same bytes, or the same error message, as the plain cumsum."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 8)
    rng = np.random.default_rng(1)
    for x in _steps_cases(shape):
        for noise in (rng.standard_normal(shape), np.zeros(shape), np.full(shape, -0.0)):
            want, got = _reference(noise, x), _blocked(noise, x)
            assert want[0] == got[0], (x, want, got)
            if want[0] == "error":
                assert got[1] == want[1]
            else:
                assert got[1].dtype == np.float64
                assert got[1].tobytes() == want[1].tobytes(), x


@pytest.mark.parametrize("make", [BLT.optimized, BinaryTree])
def test_release_is_noise_plus_cumsum(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release is the same noise (same seed) plus numpy's cumsum, to the bit, in the
    float-safe form (each step snapped to its grid, the sum's grid part out of every
    rounding; blocks of 256 steps: int64 blocks, then float64 ones)."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 256)
    x = np.random.default_rng(2).random(3000)
    x[:1000] = np.round(x[:1000] * 9)  # whole numbers, then fractions
    got = make(3000, epsilon=1.0, delta=1e-6, rng=5).release(x)
    mech = make(3000, epsilon=1.0, delta=1e-6, rng=5)
    noise = mech.noise_process(
        NoiseSource.generator(mech.sampler, mech._rng, None), None
    ).next_many(3000)
    assert got.dtype == np.float64
    grids = mech.release_grids(1, 3000)
    assert got.tobytes() == snap_release(np.cumsum(x), noise, grids).tobytes()


def test_integral_array_fast_path_keeps_values_and_messages() -> None:
    """Whole numbers come back as int64 (any offset far from 2^61); a fraction, a value
    beyond 2^53 or an int64 sum near 2^61 is refused, naming the step, as before."""
    x = np.array([3.0, -0.0, 2.0**53, -(2.0**53), 7.0])
    got = check_integral_array("x", x, already=2, offset=5)
    assert got.dtype == np.int64 and got.tolist() == [3, 0, 2**53, -(2**53), 7]
    vec = np.array([[1.0, 2.0], [3.0, -4.0]])
    assert check_integral_array("xs", vec, offset=np.array([2**55, 0])).tolist() == [
        [1, 2],
        [3, -4],
    ]
    with pytest.raises(NotWholeNumberError, match=r"^x must hold whole .* step 4 holds 0\.5$"):
        check_integral_array("x", np.array([1.0, 0.5]), already=2)
    with pytest.raises(NotWholeNumberError, match=r"step 2 holds 9007199254740994\.0$"):
        check_integral_array("x", np.array([1.0, 2.0**53 + 2]))
    with pytest.raises(ValueError, match=r"^x: the integer running sum may exceed 2\^61 at step 3"):
        check_integral_array("x", np.full(4, 2.0**53), offset=2**61 - 2**54)


def _edge_noise(n: int, g: float, rng: Any) -> Any:
    """Noise with the snap's edge values: ±0.0, ties ±g/2 and ±3g/2, subnormals, values
    near a grid point and far beyond it."""
    edge = [
        0.0,
        -0.0,
        g / 2,
        -g / 2,
        1.5 * g,
        -1.5 * g,
        5e-324,
        -5e-324,
        2.0**900 * g,
        -(2.0**900) * g,
    ]
    edge += [math.nextafter(g / 2, 0.0), math.nextafter(-g / 2, 0.0), 1e-300 * g]
    noise = rng.standard_normal(n) * g * 3
    noise[: min(n, len(edge))] = edge[:n]
    return rng.permutation(noise)


@pytest.mark.parametrize("g", [4.0, 0.5, 2.0**-40, 2.0**40])
def test_snapped_constant_blocks_equal_snap_of_cumsum(
    g: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of equal int64 sums (zero steps) are snapped as one broadcast sum: the same
    bytes as the snap of numpy's cumsum repeated, for zero, negative, near-2^53 and
    fractional-grid sums, with ±0.0, ties and subnormals in the noise; blocks of 8, the
    constant ones after whole and fractional ones (the carry), scalar and vector steps,
    one grid and one per row."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 8)
    rng = np.random.default_rng(4)
    starts = [0.0, -5.0, 7.0, B - 4, -(B - 4), 0.5, g, -g, 3 * g]
    for first in starts:
        for shape in ((40,), (24, 2)):
            x = np.zeros(shape)
            x[0] = first
            x[17:19] = 1.0  # a block that is not constant, then constant ones again
            noise = _edge_noise(x.size, g, rng).reshape(shape)
            for grid in (g, np.full(shape[0], g) if len(shape) == 1 else np.full((shape[0], 1), g)):
                got = noise.copy()
                add_running_sums("x", got, x, grid=grid)
                want = snap_release(np.cumsum(x, axis=0), noise.copy(), grid)
                assert got.tobytes() == want.tobytes(), (first, shape, g)


def test_snap_of_one_broadcast_sum_equals_the_sum_repeated() -> None:
    """snap_release with sums of shape (1,) gives the bytes of the sum repeated, for int64
    and float sums (±0.0, negative, fractional, near 2^53), the five grids' kinds and each
    ``known`` form; the noise holds ±0.0, ties and subnormals."""
    rng = np.random.default_rng(5)
    sums = [0, -0.0, 0.0, -7, 7, 2**53 - 1, -(2**53 - 1), 0.75, -0.75, 12.5, 2.0**60]
    for g in (4.0, 1.0, 0.5, 2.0**-40, 2.0**40):
        noise = _edge_noise(64, g, rng)
        for s in sums:
            one = np.array([s], dtype=np.int64 if isinstance(s, int) else np.float64)
            many = np.full(64, s, dtype=one.dtype)
            for known in ((None, None), (many.min(), None), (many.min(), 2.0**61)):
                want = snap_release(many, noise.copy(), g, known=known)
                got = snap_release(one, noise.copy(), g, known=known)
                assert got.tobytes() == want.tobytes(), (s, g, known)
                vec = snap_release(one, noise.reshape(16, 4).copy(), g, known=known)
                assert vec.tobytes() == want.tobytes(), (s, g, known)


def _bounded_cases(shape: tuple[int, ...]) -> list[Any]:
    """Steps for the bounded whole-number paths: 0/1 and signed counts, sums near 2^50,
    2^51 and 2^53, single steps at and beyond 2^51 (the rounder's range), fractions,
    -0.0 and zero runs."""
    rng = np.random.default_rng(6)
    n = shape[0]
    cases = [
        (rng.random(shape) < 0.5).astype(np.float64),
        rng.integers(-3, 4, shape).astype(np.float64),
        np.full(shape, -0.0),
    ]
    half = (rng.random(shape) < 0.5).astype(np.float64)
    half[n // 2] += 0.5
    cases.append(half)
    for big in (2.0**51, 2.0**51 + 2, 2.0**50, 2.0**50 - 1, B - 3, 2.0**63):
        for sign in (1.0, -1.0):
            for rest in (0.0, 1.0):
                c = np.full(shape, rest)
                c[n // 3] = sign * big
                cases.append(c)
    for first in (2.0**50 - n, 2.0**50 - 2, 2.0**51 - n // 2, B - n, B - 2):
        c = np.ones(shape)
        c[0] = first
        cases.append(c)
    z = np.zeros(shape)
    z[-1] = 1.0
    z[0] = -0.0
    cases.append(z)
    return cases


@pytest.mark.parametrize("shape", [(41,), (24, 3)])
def test_bounded_whole_blocks_equal_the_general_path_bit_for_bit(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the steps' bounds (the 1.5·2^52 rounder, no sum reductions, the offset sums
    snapped by snap_offset_sums) the release is the snap of numpy's cumsum, to the bit,
    or the same error, for grids below, at and above 1 (and at the offset's limits, one
    per row too), loose bounds as well as the exact ones; blocks of 8 steps."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 8)
    rng = np.random.default_rng(7)
    for x in _bounded_cases(shape):
        arr, bounds = stream_array_and_bounds("x", x, max_steps=100, dim=-1)
        for g in (4.0, 1.0, 0.5, 2.0**-40, 2.0**40, 2.0**-961, 2.0**960):
            rows = np.full(shape[0], g)
            rows[shape[0] // 2 :] *= 2.0
            noise = _edge_noise(x.size, g, rng).reshape(shape)
            for grid in (g, rows if len(shape) == 1 else rows[:, None]):
                want = _reference(noise, x)
                if want[0] == "release":
                    want = ("release", snap_release(np.cumsum(x, axis=0), noise.copy(), grid))
                for known in (bounds, (min(bounds[0], -1.0), bounds[1] + 3.0)):
                    got = noise.copy()
                    try:
                        add_running_sums("x", got, arr, grid=grid, bounds=known)
                    except ValueError as err:
                        assert want == ("error", str(err)), (x, g)
                        continue
                    assert want[0] == "release", (x, g, known)
                    assert got.tobytes() == want[1].tobytes(), (x, g, known)


def test_rounder_converts_whole_steps_within_its_range_only() -> None:
    """_whole_as_int64: whole steps up to 2^51 (and -0.0) come back as int64 exactly,
    fractions and NaN are refused; beyond 2^51 (inf too) its answer would be wrong
    (2^51 + 2 gives 2^51 + 1, inf passes), which is why add_running_sums takes it only
    when the steps' bounds are within ±2^51."""
    x = np.array([0.0, -0.0, 1.0, -7.0, 2.0**51, -(2.0**51), 2.0**51 - 1, 3.0])
    ints, y, same = np.empty(8, np.int64), np.empty(8), np.empty(8, bool)
    assert _steps._whole_as_int64(x, ints, y, same)
    assert ints.tolist() == [0, 0, 1, -7, 2**51, -(2**51), 2**51 - 1, 3]
    for bad in (0.5, -2.5, 1e-300, 5e-324, 2.0**50 + 0.5, math.nan):
        x[3] = bad
        assert not _steps._whole_as_int64(x, ints, y, same), bad
    x[3] = 2.0**51 + 2  # out of range: wrong
    assert _steps._whole_as_int64(x, ints, y, same) and ints[3] == 2**51 + 1
    x[3] = math.inf
    assert _steps._whole_as_int64(x, ints, y, same)


def test_offset_sums_are_the_bits_of_c_plus_s_over_g() -> None:
    """sum_offset(g) + S, viewed as float64, is C + S/g exactly (C = 1.5·2^52/g) for
    |S| < 2^51, at the grids' limits; snap_offset_sums equals snap_release of S."""
    rng = np.random.default_rng(8)
    for g in (4.0, 1.0, 0.5, 2.0**-960, 2.0**960, 2.0**40):
        offset = float_safe.sum_offset(g)
        assert offset is not None
        c = Fraction(3, 2) * 2**52 / Fraction(g)
        for s in (0, 1, -1, 2**50 - 1, -(2**50 - 1), 2**51 - 1, -(2**51 - 1), 12345):
            got = np.array([offset + s], dtype=np.int64).view(np.float64)[0]
            assert Fraction(float(got)) == c + Fraction(s) / Fraction(g), (g, s)
        sums = np.concatenate([[0, 1, 2**50 - 1], rng.integers(-(2**49), 2**49, 61)])
        noise = _edge_noise(64, g, rng)
        for s_arr in (sums, np.abs(sums) + 2**40, np.arange(64) + 1):
            s_arr = s_arr.astype(np.int64)
            got = noise.copy()
            w = s_arr + np.int64(offset)
            float_safe.snap_offset_sums(w, got, g, scratch=np.empty(64), low=int(s_arr.min()))
            assert got.tobytes() == snap_release(s_arr, noise.copy(), g).tobytes(), g
    for g in (3.0, 2.0**-961, 2.0**961, np.array([1.0])):
        assert float_safe.sum_offset(g) is None


def test_stream_array_bounds_and_the_finite_refusal() -> None:
    """The least and largest step come back with the array; NaN and ±inf are refused
    naming the first such step, as the elementwise check did."""
    arr, bounds = stream_array_and_bounds("x", [[1, -2], [3, 0]], max_steps=5, dim=-1)
    assert arr.dtype == np.float64 and bounds == (-2.0, 3.0)
    for bad, text in ((math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")):
        x = np.ones(6)
        x[4] = bad
        with pytest.raises(ValueError, match=rf"^xs must be finite; step 7 holds {text}$"):
            stream_array_and_bounds("xs", x, max_steps=9, already=2)


@pytest.mark.parametrize("shape", [(400,), (400, 3)])
def test_zero_blocks_under_runs_of_grids_equal_the_general_path(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of zero steps whose grids change within the block (a GridTable's runs)
    are snapped one broadcast sum a run: the same floats as snap_release of numpy's
    cumsum with one grid a step, after a zero prefix, a whole carry, -0.0 steps and a
    negative carry; with bounds and without."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 120)
    table = float_safe.GridTable(np.repeat([1.0, 5.0, 40.0, 300.0, 2000.0], 80))
    per_step = table.array(1, 400)
    assert isinstance(_steps._rows(table, 60, 100, 1), list)  # a block spans runs
    calls: list[int] = []
    real = _steps.snap_release

    def spy(sums: Any, noise: Any, grid: Any, **kw: Any) -> Any:
        calls.append(sums.size)
        return real(sums, noise, grid, **kw)

    monkeypatch.setattr(_steps, "snap_release", spy)
    rng = np.random.default_rng(10)
    zeros = np.zeros(shape)
    early = zeros.copy()
    early[:7] = 1.0
    signed = zeros.copy()
    signed[:5] = -2.0
    signed[200:] = -0.0
    for x in (zeros, early, signed, np.full(shape, -0.0)):
        noise = rng.normal(size=shape) * 10.0
        grid = per_step if len(shape) == 1 else per_step[:, None]
        want = real(np.cumsum(x, axis=0), noise.copy(), grid)
        for bounds in (None, (float(x.min()), float(x.max()))):
            calls.clear()
            got = noise.copy()
            arr = np.ascontiguousarray(x)
            add_running_sums("x", got, arr, grid=table, bounds=bounds)
            assert got.tobytes() == want.tobytes(), (x[:8], bounds)
            # a broadcast sum a run (all -0.0 steps keep the float path: their sums are -0.0)
            minus_zero = x.flat[0] == 0.0 and bool(np.signbit(x.flat[0]))
            assert (1 in calls) is not minus_zero, (x[:8], bounds)
            if x is zeros:  # every block, those spanning runs too, broadcasts
                assert set(calls) == {1}, calls


def _offset_cases(n: int) -> list[Any]:
    """Steps for the per-step offset blocks: 0/1, counts and signed counts, sums near the
    offsets' limit ±2^50 (in range and beyond), a fraction, -0.0 first and later."""
    rng = np.random.default_rng(11)
    cases = [(rng.random(n) < 0.5).astype(np.float64), rng.integers(0, 9, n).astype(np.float64)]
    cases.append(rng.integers(-4, 4, n).astype(np.float64))
    for first in (2.0**46 - 3, 2.0**47 - 1, 2.0**50 - 1, 2.0**51, -(2.0**46) + 3, -(2.0**51)):
        c = np.ones(n)
        c[0] = first
        cases.append(c)
    half = np.ones(n)
    half[n // 3] = 0.5
    signed = (rng.random(n) < 0.5).astype(np.float64)
    signed[0] = signed[n // 2] = -0.0
    return [*cases, half, signed, np.zeros(n)]


def _step_edge_noise(grids: Any, rng: Any) -> Any:
    """Per-step noise: the snap's edge values at each step's grid (±0.0, ties, near ties,
    subnormals, 2^400·g), every other step a normal of 3g."""
    noise = rng.standard_normal(len(grids)) * grids * 3
    for t in range(0, len(grids), 2):
        g = float(grids[t])
        edge = (0.0, -0.0, g / 2, -g / 2, 1.5 * g, -1.5 * g, 5e-324, -5e-324)
        edge += (math.nextafter(g / 2, 0.0), 1e-300 * g, 2.0**400 * g, -(2.0**400) * g)
        noise[t] = edge[(t // 2) % len(edge)]
    return noise


def test_per_step_offset_blocks_equal_the_general_path_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a GridTable whose grid changes every few steps (a tree's), whole blocks of
    bounded steps are summed in int64 onto the offset 1.5·2^52 and snapped with one 1/g
    a step (snap_quotients): the same floats as snap_release of numpy's cumsum with one grid a
    step, or the same error, for grids from 2^-513 to 2^508 (the float
    variances' range; snap_quotients at 2^-950 and 2^960 below),
    sums up to and past ±2^50, a fraction and -0.0; blocks of 8 steps."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 8)
    calls: list[int] = []
    real = _steps.snap_quotients

    def spy(u: Any, noise: Any, grid: Any, **kw: Any) -> None:
        calls.append(u.size)
        real(u, noise, grid, **kw)

    monkeypatch.setattr(_steps, "snap_quotients", spy)
    rng = np.random.default_rng(12)
    n = 61
    for kinds in ((4.0, 1.0, 0.5, 2.0**-40, 2.0**40), (2.0**-513, 2.0**-512), (2.0**508, 1.0)):
        grids = np.array(kinds)[np.arange(n) // 3 % len(kinds)]
        table = float_safe.GridTable(16.0 * grids * grids)  # σ = 4g: grid g
        assert table.array(1, n).tobytes() == grids.tobytes()
        assert table.step_inverses(3) is not None
        for i, x in enumerate(_offset_cases(n)):
            arr, bounds = stream_array_and_bounds("x", x, max_steps=n, dim=-1)
            noise = _step_edge_noise(grids, rng)
            want = _reference(noise, x)
            if want[0] == "release":
                want = ("release", snap_release(np.cumsum(x), noise.copy(), grids))
            calls.clear()
            got = noise.copy()
            try:
                add_running_sums("x", got, arr, grid=table, bounds=bounds)
            except ValueError as err:
                assert want == ("error", str(err)), (kinds, x[:3])
                continue
            assert want[0] == "release", (kinds, x[:3])
            assert got.tobytes() == want[1].tobytes(), (kinds, x[:3])
            if i < 4:  # 0/1, counts, signed counts, a large first step: the offset form
                assert len(calls) == 8, (kinds, i)


def test_snap_quotients_equals_snap_release_at_the_grids_limits() -> None:
    """snap_quotients (float sums S, one 1/g a value) gives snap_release's floats for
    integer sums to ±(2^53 − 1), 0, and grids 2^-950 … 2^960 mixed value by value, with
    and without ``plus`` where it is allowed; tables whose grid rarely changes keep no
    inverses."""
    rng = np.random.default_rng(13)
    kinds = np.array([2.0**-950, 2.0**960, 1.0, 4.0, 2.0**-949, 0.5, 2.0**959, 2.0**40])
    n = 96
    grids = kinds[np.arange(n) % len(kinds)]
    sums = rng.integers(-(2**52), 2**52, n)
    sums[:6] = [0, 1, -1, 2**53 - 1, -(2**53 - 1), 2**50]
    noise = _step_edge_noise(grids, rng)
    want = snap_release(sums, noise.copy(), grids)
    got = noise.copy()
    float_safe.snap_quotients(sums.astype(np.float64), got, 1.0 / grids, q=np.empty(n), plus=False)
    assert got.tobytes() == want.tobytes()
    big = np.abs(sums) + 2**45  # every S ≥ its grid where the grid is at most 2^40
    small = grids <= 2.0**40
    want = snap_release(big[small], noise[small].copy(), grids[small])
    got = noise[small].copy()
    u = big[small].astype(np.float64)
    float_safe.snap_quotients(u, got, 1.0 / grids[small], q=np.empty(len(u)), plus=True)
    assert got.tobytes() == want.tobytes()
    assert float_safe.GridTable(np.repeat([16.0, 64.0], 64)).step_inverses(64) is None


def test_steps_in_zero_one_take_the_mask_conversion_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steps whose bounds lie in [0, 1] (0/1 data) are converted to int64 by two masks
    (``_binary_as_int64``) instead of the rounder's four passes: the same floats as
    numpy's cumsum snapped (or added, without a grid) for scalar and vector steps, one
    grid or one a step, 0/1 data with -0.0, and blocks holding 0.5, 1 − 2^-53 or a
    subnormal (refused by the masks: summed in float64); blocks of 8 steps."""
    monkeypatch.setattr(_steps, "_BLOCK_VALUES", 8)
    answers: list[bool] = []
    real = _steps._binary_as_int64

    def spy(*args: Any) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(_steps, "_binary_as_int64", spy)
    rng = np.random.default_rng(14)
    n = 61
    kinds = np.array([4.0, 1.0, 0.5, 2.0**-20])
    per_step = kinds[np.arange(n) // 3 % len(kinds)]
    table = float_safe.GridTable(16.0 * per_step * per_step)
    for shape in ((n,), (n, 3)):
        base = (rng.random(shape) < 0.5).astype(np.float64)
        cases = [base, np.where(base == 0.0, -0.0, 1.0)]
        for odd in (0.5, 1.0 - 2.0**-53, 5e-324):
            c = base.copy()
            c[n // 2] = odd
            cases.append(c)
        grids: list[Any] = [None, 4.0] + ([table] if len(shape) == 1 else [])
        for x in cases:
            arr, bounds = stream_array_and_bounds("x", x, max_steps=n, dim=-1)
            for grid in grids:
                noise = (
                    _step_edge_noise(per_step, rng) if len(shape) == 1 else rng.normal(size=shape)
                )
                sums = np.cumsum(x, axis=0)
                if grid is None:
                    want = noise + sums
                else:
                    g = per_step if isinstance(grid, float_safe.GridTable) else grid
                    want = snap_release(sums, noise.copy(), g if len(shape) == 1 else grid)
                answers.clear()
                got = noise.copy()
                add_running_sums("x", got, arr, grid=grid, bounds=bounds)
                assert got.tobytes() == want.tobytes(), (shape, x.flat[n // 2], grid)
                whole = bool(np.all((x == 0.0) | (x == 1.0)))
                assert answers and (all(answers) if whole else not all(answers)), (x.flat[n // 2],)
