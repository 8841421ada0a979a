"""The BLT vector stream's fused step: the running sums are added and snapped column
block by column block as the noise process computes each block
(:meth:`BLTNoiseProcess.next_finished`, :func:`~dpcount.privacy.float_safe.snap_in_blocks`,
``CountingStream._update_fused``). Every release must equal, to the bit, the unfused
path's (the whole step, then :func:`~dpcount.privacy.float_safe.snap_release`), and the
checks must refuse what the unfused path refuses, before anything is drawn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpcount.counting import BLT
from dpcount.counting.factorization import blt as blt_module
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import release_grids, snap_in_blocks, snap_release

D = 2 * blt_module._STEP_COLUMNS + 17  # three column blocks, the last one short


def _mechanism(seed: int = 5) -> BLT:
    return BLT.optimized(64, budget=Budget(epsilon=1.0, delta=1e-6), rng=seed)


def _steps(rng: np.random.Generator, n: int) -> list[Any]:
    """Whole, negative, fractional, zero and constant vectors (every snap branch: sums
    above the grid, at or below 0, a least sum between)."""
    kinds = [
        lambda: np.ones(D),
        lambda: rng.integers(-2, 3, D).astype(np.float64),
        lambda: rng.normal(0, 3, D),
        lambda: np.zeros(D),
        lambda: rng.integers(0, 4, D).astype(np.float64),
        lambda: -np.ones(D) * 7.0,
    ]
    return [kinds[i % len(kinds)]() for i in range(n)]


def _releases(unfused: bool, monkeypatch: pytest.MonkeyPatch, steps: list[Any]) -> bytes:
    with monkeypatch.context() as m:
        if unfused:  # the process offers no fused step: the stream's unfused path
            m.setattr(blt_module.BLTNoiseProcess, "next_finished", lambda self, finish: None)
        stream = _mechanism().stream()
        parts = [stream.update(x) for x in steps[:20]]
        parts.append(stream.update_many(np.stack(steps[20:23])).ravel())
        parts += [stream.update(x) for x in steps[23:]]
        return np.concatenate(parts).tobytes()


def test_fused_vector_stream_equals_the_unfused_one_to_the_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 40 steps: the bounds are carried, recomputed exactly (every 16 steps) and
    # recomputed after update_many (a new sums array)
    steps = _steps(np.random.default_rng(3), 40)
    fused = _releases(False, monkeypatch, steps)
    assert fused == _releases(True, monkeypatch, steps)
    # and the fused path was taken: a process that cannot fuse would give the same
    # bytes, so check that a block callback ran
    calls: list[int] = []
    original = blt_module.BLTNoiseProcess.next_finished

    def spy(self: Any, finish: Any) -> Any:
        calls.append(1)
        return original(self, finish)

    monkeypatch.setattr(blt_module.BLTNoiseProcess, "next_finished", spy)
    stream = _mechanism().stream()
    stream.update(np.ones(D))
    stream.update(np.ones(D))
    assert calls == [1]  # the first step takes the general path


def test_fused_step_refuses_a_nan_or_too_large_sum_before_drawing() -> None:
    stream = _mechanism().stream()
    stream.update(np.ones(D))
    process = stream._process
    assert process is not None
    state = process.state_dict()
    bad = np.ones(D)
    bad[D - 3] = np.nan
    with pytest.raises(ValueError, match="x must be finite"):
        stream.update(bad)
    big = np.ones(D)
    big[D - 1] = 2.0**53
    with pytest.raises(ValueError, match=r"running sum at step 2 \(coordinate"):
        stream.update(big)
    assert stream.step == 1  # nothing counted, drawn or summed
    after = process.state_dict()
    assert after["t"] == state["t"] and np.array_equal(after["q"], state["q"])
    assert stream.update(np.ones(D)).shape == (D,)  # the stream goes on


def test_next_finished_declines_where_the_step_is_not_fused() -> None:
    stream = _mechanism().stream()
    stream.update(1.0)
    assert stream._process is not None
    before = stream._process.state_dict()
    assert stream._process.next_finished(lambda a, b: None) is None  # scalar steps
    assert stream._process.state_dict()["t"] == before["t"]


def _general(sums: np.ndarray, noise: np.ndarray, grid: Any, known: Any) -> bytes:
    return snap_release(sums, noise.copy(), grid, known=known).tobytes()  # type: ignore[no-any-return]


@pytest.mark.parametrize("width", [1, 7, 64])
def test_snap_in_blocks_equals_snap_release_to_the_bit(width: int) -> None:
    rng = np.random.default_rng(21)
    n = 150
    g = float(release_grids(6.0))
    cases: list[tuple[np.ndarray, Any]] = [
        (np.cumsum(rng.integers(0, 4, n)).astype(np.float64) + 2 * g, g),  # all ≥ g
        (np.cumsum(rng.integers(-3, 4, n)).astype(np.float64), g),  # both signs
        (np.concatenate([[0.0, -0.0], rng.normal(0, 50, n - 2)]), g),  # zeros, fractions
        (np.full(n, 3.0), 2.0**-30),
        (np.full(n, 1e300), 2.0**-30),  # s/g overflows: the fmod form
        (np.cumsum(rng.integers(0, 4, n)).astype(np.float64), release_grids(rng.uniform(1, 9, n))),
    ]
    for sums, grid in cases:
        noise = rng.normal(0, 6, n)
        noise[:4] = [0.0, -0.0, g / 2, -g / 2]
        bound = 2.0**53 if np.abs(sums).max() < 2.0**53 else None  # a true bound or none
        for known in ((None, None), (float(sums.min()), bound), (float(sums.min()) - 5, None)):
            want = _general(sums, noise, grid, known)
            got = noise.copy()
            work = np.full((2, width), np.nan)
            finish = snap_in_blocks(sums, grid, work, known=known)
            for start in range(0, n, width):
                finish(start, got[start : start + width])
            assert got.tobytes() == want
