"""Out-of-bound input in the apps (audit finding 9): refuse (default) or clip and report.

Every clip test compares the clip mode on raw data with the error mode on data
clipped here, independently, with the same seed: equal releases show that the
clip mode runs the same calibrated mechanism (same guarantee, same noise) on the
clipped records.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from dpcount.apps import (
    ContinualHistogram,
    EpisodeCounter,
    GraphStatistic,
    LocalMedianProtocol,
    RunningAverage,
    SubstringCounter,
    SyntheticGraph,
)


def same_guarantee(a: object, b: object) -> None:
    assert a.privacy is not None and a.privacy == b.privacy  # type: ignore[attr-defined]
    assert a.sensitivity == b.sensitivity  # type: ignore[attr-defined]
    assert a.mechanism.noise_scale == b.mechanism.noise_scale  # type: ignore[attr-defined]


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_running_average_clips_and_reports(delta: float | None) -> None:
    raw = np.random.default_rng(1).uniform(-1.0, 2.0, size=40)
    strict = RunningAverage(40, epsilon=1.0, delta=delta, lower=0.0, upper=1.0, rng=5)
    clip = RunningAverage(
        40, epsilon=1.0, delta=delta, lower=0.0, upper=1.0, on_out_of_bounds="clip", rng=5
    )
    same_guarantee(clip, strict)
    with pytest.raises(ValueError, match=r"values must be finite and in \[0, 1\]"):
        strict.update_many(raw)
    with pytest.raises(ValueError, match=r"value must be finite and in \[0, 1\]"):
        strict.update(float(raw[raw > 1][0]))
    assert strict.step == 0 and strict.clipped == 0
    by_hand = [min(1.0, max(0.0, float(v))) for v in raw]
    assert clip.update_many(raw).tolist() == strict.update_many(by_hand).tolist()
    outside = sum(1 for v in raw if not 0.0 <= v <= 1.0)
    assert 0 < outside < 40 and clip.clipped == outside


def test_running_average_clip_spellings() -> None:
    old = RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, clip=True)
    assert old.on_out_of_bounds == "clip" and old.clip
    with pytest.raises(ValueError, match="either clip=True or on_out_of_bounds"):
        RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, clip=True, on_out_of_bounds="clip")
    with pytest.raises(ValueError, match="on_out_of_bounds must be one of"):
        RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, on_out_of_bounds="drop")
    avg = RunningAverage(5, epsilon=1.0, lower=0.0, upper=1.0, on_out_of_bounds="clip", rng=0)
    avg.update(3.0)
    with pytest.raises(ValueError, match="value must be finite"):
        avg.update(float("nan"))  # not clipped, not counted
    assert avg.clipped == 1 and avg.step == 1
    from dpcount.privacy import ZeroNoise

    assert avg.with_sampler(ZeroNoise()).clipped == 0  # a fresh copy at step 0


def clip_histogram_step(x: list[int], b: int, m: int) -> list[int]:
    """The documented rule, one entry at a time: each to [−m, m], then b in item order."""
    out, left = [], b
    for v in x:
        c = max(-m, min(m, v))
        keep = min(abs(c), left)
        left -= keep
        out.append(keep if c >= 0 else -keep)
    return out


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_histogram_clips_and_reports(delta: float | None) -> None:
    b, m, u, T = 3, 2, 6, 30
    raw = np.random.default_rng(2).integers(0, 3, size=(T, u))
    raw[raw.sum(axis=1) == 0, 0] = 1  # some steps within the bounds, most over
    kw = {"max_count_per_item": m, "rng": 7}
    strict = ContinualHistogram(u, T, epsilon=1.0, delta=delta, max_items_per_step=b, **kw)
    clip = ContinualHistogram(
        u, T, epsilon=1.0, delta=delta, max_items_per_step=b, on_out_of_bounds="clip", **kw
    )
    same_guarantee(clip, strict)
    with pytest.raises(ValueError, match="more than max_items_per_step=3"):
        strict.update_many(raw)
    with pytest.raises(ValueError, match="more than max_count_per_item=2"):
        strict.update([0, 0, 0])
    assert strict.step == 0 and strict.clipped == 0
    by_hand = [clip_histogram_step(row, b, m) for row in raw.tolist()]
    assert clip.update_many(raw).tolist() == strict.update_many(by_hand).tolist()
    changed = sum(1 for row, kept in zip(raw.tolist(), by_hand, strict=True) if row != kept)
    assert 0 < changed < T and clip.clipped == changed


def test_histogram_clip_of_item_lists_and_removals() -> None:
    from dpcount.privacy import ZeroNoise

    h = ContinualHistogram(
        5, 4, epsilon=1.0, delta=None, max_items_per_step=3, on_out_of_bounds="clip"
    ).with_sampler(ZeroNoise())
    assert h.update([0, 0, 1, 2, 3, 4]).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert h.update([], removed=[0, 0, 1]).tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]  # −1 per item
    assert h.clipped == 2
    with pytest.raises(ValueError, match="removes item 3 more often than it is present"):
        h.update([], removed=[3])  # not a per-step bound: still refused
    assert h.clipped == 2 and h.step == 2


def clip_graph_update(row: list[float], m: int) -> list[float]:
    out, changed = [], 0
    for w in row:
        c = max(0.0, min(1.0, w))
        if c != 0.0:
            changed += 1
            if changed > m:
                c = 0.0
        out.append(c)
    return out


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_synthetic_graph_clips_and_reports(delta: float | None) -> None:
    n, m, T = 5, 2, 20
    pairs = n * (n - 1) // 2
    gen = np.random.default_rng(3)
    raw = np.where(gen.random((T, pairs)) < 0.2, gen.uniform(-0.5, 1.5, size=(T, pairs)), 0.0)
    strict = SyntheticGraph(n, T, epsilon=1.0, delta=delta, max_edges_per_step=m, rng=9)
    clip = SyntheticGraph(
        n, T, epsilon=1.0, delta=delta, max_edges_per_step=m, on_out_of_bounds="clip", rng=9
    )
    same_guarantee(clip, strict)
    with pytest.raises(ValueError, match=r"increments must be finite and in \[0, 1\]"):
        strict.update_many(raw)
    with pytest.raises(ValueError, match=r"weight of edge \(0, 1\) must be <= 1"):
        strict.update([(0, 1, 1.5)])
    assert strict.step == 0 and strict.clipped == 0
    by_hand = [clip_graph_update(row, m) for row in raw.tolist()]
    assert clip.update_many(raw).tolist() == strict.update_many(by_hand).tolist()
    changed = sum(1 for row, kept in zip(raw.tolist(), by_hand, strict=True) if row != kept)
    assert 0 < changed < T and clip.clipped == changed


def test_synthetic_graph_clip_of_edge_lists() -> None:
    from dpcount.privacy import ZeroNoise

    g = SyntheticGraph(4, 3, epsilon=1.0, max_edges_per_step=2, on_out_of_bounds="clip")
    exact = g.with_sampler(ZeroNoise())
    out = exact.update([(0, 1, 1.5), (2, 3, 0.25), (1, 2, 1.0)])  # third pair over m = 2
    assert out[
        [exact.pair_index(0, 1), exact.pair_index(2, 3), exact.pair_index(1, 2)]
    ].tolist() == [
        1.0,
        0.25,
        0.0,
    ]
    exact.update([(0, 2, 0.5)])
    assert exact.clipped == 1
    with pytest.raises(ValueError, match="appears twice"):
        exact.update([(0, 1, 0.5), (1, 0, 0.5)])  # a malformed update is never clipped


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_local_median_clips_and_reports(delta: float | None) -> None:
    data = np.random.default_rng(4).uniform(-0.3, 1.3, size=500)
    strict = LocalMedianProtocol(500, epsilon=1.0, delta=delta, rng=11)
    clip = LocalMedianProtocol(500, epsilon=1.0, delta=delta, on_out_of_bounds="clip", rng=11)
    assert clip.privacy == strict.privacy and clip.mechanism.noise_scale == (
        strict.mechanism.noise_scale
    )
    with pytest.raises(ValueError, match=r"data must be finite and in \[0, 1\]"):
        strict.run(data)
    by_hand = [min(1.0, max(0.0, float(v))) for v in data]
    got, expected = clip.run(data), strict.run(by_hand)
    assert got.slopes.tolist() == expected.slopes.tolist() and got.estimate == expected.estimate
    outside = sum(1 for v in data if not 0.0 <= v <= 1.0)
    assert 0 < outside < 500 and clip.clipped == outside
    with pytest.raises(ValueError, match="data must be finite"):
        clip.run(np.full(500, np.nan))


@pytest.mark.parametrize(
    "cls",
    [
        RunningAverage,
        ContinualHistogram,
        SyntheticGraph,
        LocalMedianProtocol,
        GraphStatistic,
        SubstringCounter,
        EpisodeCounter,
    ],
)
def test_guarantees_state_that_a_refusal_is_a_data_dependent_signal(cls: type) -> None:
    doc = " ".join((inspect.getdoc(cls) or "").split())
    assert "data-dependent signal the guarantee does not cover" in doc or (
        "data-dependent signal the LDP guarantee does not cover" in doc
    )
    assert "NOT private" in doc or "not private" in doc or "no clipping mode" in doc


def test_local_median_function_reports_the_clipped_clients() -> None:
    from dpcount.apps import local_median

    data = np.array([-0.5, 0.2, 0.4, 0.6, 1.5, 0.3])
    result = local_median(data, epsilon=1.0, on_out_of_bounds="clip", rng=1)
    expected = local_median(np.clip(data, 0.0, 1.0), epsilon=1.0, rng=1)
    assert result.clipped == 2 and expected.clipped == 0
    assert result.slopes.tolist() == expected.slopes.tolist()
    protocol = LocalMedianProtocol(6, epsilon=1.0, on_out_of_bounds="clip", rng=1)
    assert protocol.run(data).clipped == 2
    assert protocol.run_buckets([0, 1, 1, 2, 2, 2]).clipped == 0 and protocol.clipped == 0
    with pytest.raises(ValueError, match=r"data must be finite and in \[0, 1\]"):
        local_median(data, epsilon=1.0, rng=1)
