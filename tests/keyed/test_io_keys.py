"""The keys-file join (dpcount.keyed.keys) gives every event key the index the whole
universe gives it (KeyUniverse of read_keys), for any cut of the file into blocks and of
the keys into buckets."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from dpcount.keyed import keys as join
from dpcount.keyed.events import KeyUniverse
from dpcount.keyed.io import read_keys

#: lines a keys file may hold: padding, blank lines, CRLF, a NEL inside a line (a line
#: break for str.splitlines), text that reads as numbers, non-ASCII
LINES = ["  a ", "", "b\r", "007", "7", "7.5", "é", "x\x85y", "   ", "sku-000000001", "NA"]


def _file(tmp_path: Path, rng: np.random.Generator) -> Path:
    lines = [*LINES, *(f"k{i}" for i in range(100))]
    order = rng.permutation(len(lines))
    path = tmp_path / "keys.txt"
    path.write_bytes(("\n".join(lines[i] for i in order) + "\n").encode())
    return path


def _joined(path: Path, parts: list[pd.Series], blocks: int, buckets: int) -> NDArray[np.int64]:
    """The key indices of the events ``parts`` (input partitions) through the join."""
    cut = join.file_blocks(path, blocks)
    keys = [join.block_keys(path, b) for b in cut]
    first = join.first_positions([len(k) for k in keys])
    table = [join.table_buckets(k, int(f), buckets) for k, f in zip(keys, first, strict=True)]
    events = [join.event_buckets(p, buckets) for p in parts]
    found = [
        join.join_positions([t[b] for t in table], [e[b] for e in events]) for b in range(buckets)
    ]
    joined = [join.JoinedKeys.of(*(f[i] for f in found)) for i in range(len(parts))]
    return np.concatenate([j.known(p).indices(p) for j, p in zip(joined, parts, strict=True)])


def _halves(values: pd.Series) -> list[pd.Series]:
    return [values.iloc[: len(values) // 2], values.iloc[len(values) // 2 :]]


@pytest.mark.parametrize(("blocks", "buckets"), [(1, 1), (3, 4), (7, 5), (60, 3)])
def test_join_gives_each_key_its_universe_index(tmp_path: Path, blocks: int, buckets: int) -> None:
    rng = np.random.default_rng(blocks * 10 + buckets)
    path = _file(tmp_path, rng)
    universe = read_keys(path)
    assert [k for b in join.file_blocks(path, blocks) for k in join.block_keys(path, b)] == universe
    pool = [*universe[:40], "nope", "k", "7", 7, 7.0, 7.5, "a ", None, np.nan]
    values = pd.Series([pool[i] for i in rng.integers(0, len(pool), 500)], dtype=object)
    want = KeyUniverse(universe).indices(values)
    assert (want >= 0).any() and (want < 0).any()
    assert np.array_equal(_joined(path, _halves(values), blocks, buckets), want)
    texts = values[values.map(lambda v: isinstance(v, str))].reset_index(drop=True)
    for dtype in ("str", "string[pyarrow]", object):  # Arrow strings: matched as Arrow
        column = texts.astype(dtype)
        want = KeyUniverse(universe).indices(column)
        assert np.array_equal(_joined(path, _halves(column), blocks, buckets), want)


def test_a_key_twice_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("a\nb\nc\n b \n")
    with pytest.raises(ValueError, match="keys must be unique, 'b' and 'b' appears more than once"):
        _joined(path, [pd.Series(["a"])], 2, 3)
    with pytest.raises(ValueError, match="keys must be unique, 'b' and 'b' appears more than once"):
        KeyUniverse(read_keys(path))  # the whole universe's own message


def test_buckets_are_a_function_of_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = np.array(["a", "b", "k1", "é"], dtype=object)
    got = join.bucket_of(texts, 7)
    assert np.array_equal(got, join.bucket_of(texts[::-1], 7)[::-1])
    assert ((got >= 0) & (got < 7)).all()
    monkeypatch.setattr(join, "_HASH_SLICE", 64)
    many = np.array([f"k{i}" for i in range(150)], dtype=object)
    whole = pd.util.hash_array(many, hash_key=join._BUCKET_KEY) % np.uint64(7)
    assert np.array_equal(join.bucket_of(many, 7), whole.astype(np.int64))  # sliced
    with pytest.raises(ValueError, match="count must be a positive integer"):
        join.file_blocks(__file__, 0)


def test_file_universe_is_the_lists_without_holding_it(tmp_path: Path) -> None:
    """FileUniverse.open: the length, key positions (every slice, any block size) and
    digest of KeyUniverse(read_keys(path)); it pickles to its block table, not its keys."""
    import pickle

    rng = np.random.default_rng(5)
    path = _file(tmp_path, rng)
    listed = KeyUniverse(read_keys(path))
    for size in (7, 64, 2**20):
        join.BLOCK_BYTES, saved = size, join.BLOCK_BYTES
        try:
            u = join.FileUniverse.open(path)
        finally:
            join.BLOCK_BYTES = saved
        assert len(u) == len(listed) and u.digest() == listed.digest()
        assert list(u.keys) == list(listed.keys) == [u.keys[i] for i in range(len(u))]
        for lo, hi in [(0, 1), (3, 50), (0, len(u)), (40, 41), (90, 500), (-5, -1)]:
            assert u.keys[lo:hi] == list(listed.keys[lo:hi])
        at = rng.integers(0, len(u), 30)
        assert list(u.keys.take(at)) == [listed.keys[i] for i in at]
        assert u.keys[-1] == listed.keys[-1]
        with pytest.raises(IndexError, match="key position"):
            u.keys[len(u)]
        again = pickle.loads(pickle.dumps(u))
        assert again == u and again.digest() == u.digest() and list(again.keys) == list(u.keys)
    assert len(pickle.dumps(join.FileUniverse.open(path))) < path.stat().st_size
    u = join.FileUniverse.open(path)
    path.write_text("a\nb\n")  # a block's key count no longer the one hashed
    with pytest.raises(ValueError, match="changed during the run"):
        u.keys[0:3]


def test_file_universe_matches_events_through_its_join(tmp_path: Path) -> None:
    """FileUniverse.indices: those of the KnownKeys the join gives; a partition read
    again with other keys than the joined ones is refused."""
    path = _file(tmp_path, np.random.default_rng(6))
    u = join.FileUniverse.open(path)
    values = pd.Series(["k3", "7", 7, "nope", None, "a", "k3"], dtype=object)
    with pytest.raises(RuntimeError, match="after its join"):
        u.indices(values)
    cut = join.file_blocks(path, 3)
    table = [join.table_buckets(join.block_keys(path, cut[0]), 0, 2)]
    found = [
        join.join_positions([t[b] for t in table], [join.event_buckets(values, 2)[b]])
        for b in range(2)
    ]
    joined = join.JoinedKeys.of(*(f[0] for f in found))
    want = KeyUniverse(read_keys(path)[: sum(len(t) for t in table[0])]).indices(values)
    assert np.array_equal(u.with_known(joined.known(values)).indices(values), want)
    with pytest.raises(RuntimeError, match="read twice gave other keys"):
        joined.known(values.iloc[::-1])
    with pytest.raises(RuntimeError, match="read twice gave other keys"):
        joined.known(values[values != "nope"])


def test_file_universe_refuses_a_missing_or_empty_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"keys file .* not found"):
        join.FileUniverse.open(tmp_path / "none.txt")
    (tmp_path / "blank.txt").write_text("\n  \n\n")
    with pytest.raises(ValueError, match="holds no keys"):
        join.FileUniverse.open(tmp_path / "blank.txt")


def test_run_level_ranks_by_key_span_read_only_their_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run-level unit bounds over a keys file: the (unit, key) pairs ranked one key span
    at a time (stages.pair_spans, stages.rank_span, as the Dask runner schedules them)
    give every pair the rank that the whole list gives it, and the bounding with those
    ranks keeps what it keeps ranking from the list; no span's task reads a block of
    the file outside its span, so none holds the file's names."""
    from types import SimpleNamespace

    from dpcount.keyed.bounds import RunBound, bound_units_run, rank_pairs, unit_pairs
    from dpcount.keyed.stages import pair_spans, rank_span

    path = tmp_path / "keys.txt"
    path.write_text("".join(f"key-{i:05d}\n" for i in range(300)))  # 10 bytes a line
    monkeypatch.setattr(join, "BLOCK_BYTES", 100)  # 30 blocks of 10 keys
    u = join.FileUniverse.open(path)
    listed = KeyUniverse(read_keys(path))
    assert len(u.keys.blocks) == 30
    rng = np.random.default_rng(9)
    parts = [
        pd.DataFrame(
            {
                "unit": rng.integers(0, 25, 400),
                "step": rng.integers(1, 6, 400),
                "key": rng.integers(0, 300, 400),
                "weight": np.ones(400),
            }
        )
        for _ in range(3)
    ]
    hash_key = "0123456789abcdef"
    cuts = [0, 70, 200, 300]
    job = SimpleNamespace(universe=u, hash_key=hash_key)
    split = [pair_spans(p, cuts) for p in parts]
    read: list[list[int]] = []
    real = join.block_keys

    def block_keys(p: object, block: tuple[int, int]) -> list[str]:
        read[-1].append(u.keys.blocks.index(block))
        return real(p, block)  # type: ignore[arg-type]

    monkeypatch.setattr(join, "block_keys", block_keys)
    ranks = []
    for s, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        read.append([])
        u.keys._held = (-1, [])  # a fresh task
        ranks.append(rank_span(job, *[pieces[s] for pieces in split]))  # type: ignore[arg-type]
        assert read[-1] and all(lo <= 10 * b + 9 and 10 * b < hi for b in read[-1])
    got = pd.concat(ranks, ignore_index=True).sort_values(["utext", "key"], ignore_index=True)
    rows = pd.concat(parts, ignore_index=True)
    want = rank_pairs(unit_pairs(rows), listed.keys, hash_key)
    want = want.sort_values(["utext", "key"], ignore_index=True)
    pd.testing.assert_frame_equal(got, want)
    assert len(set(want["rank"])) == len(want)  # the ranks tell the pairs apart
    bound = RunBound(max_keys=2, max_steps=2, min_separation=1, max_weight=1.0)
    a = bound_units_run(rows, bound, hash_key=hash_key, keys=listed.keys)
    b = bound_units_run(rows, bound, hash_key=hash_key, keys=None, ranks=got)
    pd.testing.assert_frame_equal(a[0], b[0])
    assert a[1] == b[1] and a[1].unit_dropped_keys > 0
    assert a[2].frame().equals(b[2].frame())
    wrong = got.assign(rank=got["rank"].to_numpy()[::-1])  # the ranks of other pairs
    assert not bound_units_run(rows, bound, hash_key=hash_key, ranks=wrong)[0].equals(a[0])
