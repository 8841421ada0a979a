"""The counts a remote release task sends back (Dask, Spark): narrowed for the wire,
widened by the client to the very same array (no Dask needed: quick)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpcount.keyed.stages import WIRE_TYPES, Narrowed, hand_out, narrowed


@pytest.mark.parametrize(
    ("least", "greatest", "wire"),
    [
        (0, 0, np.int8),
        (-128, 127, np.int8),
        (-129, 127, np.int16),
        (-128, 128, np.int16),
        (-(2**15), 2**15 - 1, np.int16),
        (-(2**15) - 1, 0, np.int32),
        (0, 2**15, np.int32),
        (-(2**31), 2**31 - 1, np.int32),
    ],
)
def test_integer_counts_travel_in_the_narrowest_type_and_come_back_equal(
    least: int, greatest: int, wire: Any
) -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(least, greatest, size=(5, 9), endpoint=True, dtype=np.int64)
    values[0, 0], values[-1, -1] = least, greatest  # both extremes present
    packed = narrowed(values)
    assert isinstance(packed, Narrowed)
    assert packed.values.dtype == wire
    back = packed.widened()
    assert back.dtype == np.int64 and back.shape == values.shape
    assert back.tobytes() == values.tobytes()


@pytest.mark.parametrize("extreme", [-(2**31) - 1, 2**31, np.iinfo(np.int64).max])
def test_counts_beyond_int32_travel_as_they_are(extreme: int) -> None:
    values = np.array([[0, extreme]], dtype=np.int64)
    assert narrowed(values) is values


def test_an_int32_array_narrows_but_never_to_its_own_width() -> None:
    small = np.array([1, -3], dtype=np.int32)
    packed = narrowed(small)
    assert isinstance(packed, Narrowed) and packed.values.dtype == np.int8
    assert packed.widened().dtype == np.int32
    wide = np.array([2**20], dtype=np.int32)
    assert narrowed(wide) is wide  # int32 is no narrower than itself
    assert np.iinfo(WIRE_TYPES[-1]).bits == 32


@pytest.mark.parametrize(
    "values",
    [
        None,
        np.zeros((0, 4), dtype=np.int64),
        np.array([[0.5, 2.0]]),
        np.array([[1.0, 2.0]]),  # whole floats stay floats
    ],
)
def test_floats_empty_and_absent_counts_are_left_as_they_are(values: Any) -> None:
    assert narrowed(values) is values


def test_hand_out_widens_a_narrowed_chunk_to_the_released_array() -> None:
    counts = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    ends = np.ones((2, 4), dtype=np.uint64)

    class Carry:
        buffers = np.zeros((2, 8), dtype=np.uint64)

    carry = Carry()
    got = [(0, narrowed(counts), ends), (4, narrowed(counts + 1000), ends)]
    out = list(hand_out(got, 8, 4, carry, set(), None))
    assert [lo for lo, _ in out] == [0, 4]
    assert out[0][1].dtype == np.int64 and np.array_equal(out[0][1], counts)
    assert out[1][1].dtype == np.int64 and np.array_equal(out[1][1], counts + 1000)
    assert np.array_equal(carry.buffers, np.ones((2, 8), dtype=np.uint64))


def _job_and_shard() -> tuple[Any, Any]:
    import pandas as pd

    from dpcount.keyed.events import DropReport, EventColumns
    from dpcount.keyed.job import make_job
    from dpcount.keyed.secret import unsafe_testing_secret
    from dpcount.keyed.session import with_secret
    from dpcount.privacy import Budget

    rng = np.random.default_rng(3)
    events = pd.DataFrame({"t": rng.integers(0, 20, 200), "key": rng.integers(0, 6, 200)})
    job, _ = make_job(
        times=events["t"], keys=range(6), columns=EventColumns("t", "key"), step=1,
        budget=Budget(epsilon=1.0, noise="discrete-laplace"), max_weight=1, max_keys=None,
        start=0, horizon=20, mechanism="tree",
    )  # fmt: skip
    job, _ = with_secret(job, unsafe_testing_secret(b"wire-test-secret-not-for-use-000"))
    partial, _ = job.prepare(events)
    contributions, _ = job.finish([partial])
    return job, (contributions, DropReport())


def test_a_remote_release_task_sends_narrowed_counts_and_none_for_quiet_chunks() -> None:
    from dpcount.keyed.stages import release_chunks

    job, shard = _job_and_shard()
    chunks = [(0, 2, True), (2, 4, False), (4, 6, True)]
    local = release_chunks(job, shard, chunks, None, None)
    remote = release_chunks(job, shard, chunks, None, None, wire=True)
    assert [lo for lo, _, _ in remote] == [0, 2, 4]
    assert local[1][1] is None and remote[1][1] is None  # its counts are not handed out
    for (_, mine, _), (_, sent, _) in zip(local, remote, strict=True):
        if mine is not None:
            assert isinstance(sent, Narrowed) and sent.values.itemsize < mine.itemsize
            assert sent.widened().tobytes() == mine.tobytes()
