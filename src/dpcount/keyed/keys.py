"""A keys file joined to the events' keys without any process holding all of it.

A public key universe read from a keys file is a list of Python strings: at 10^7 keys
~700 MiB in every process that holds it, and matching the events' keys against it
(:meth:`dpcount.keyed.events.KeyUniverse.indices`) builds a hash table of all of it in
every Dask worker — 2.8 GiB per worker and 2.9 GiB on the client at 10^7 string keys
(``benchmarks/bench_keyed.py``). These stage functions match them as a distributed hash
join instead, each stage on a part of the file or of the events:

1. :func:`file_blocks` cuts the file into byte ranges at line ends; :func:`block_keys`
   reads one block's keys (the rule of :func:`dpcount.keyed.io.read_keys`: lines as
   ``str.splitlines`` cuts them, stripped, blank lines skipped). The client adds up the
   blocks' key counts (:func:`first_positions`), so block b's keys are at positions
   first[b], first[b] + 1, ...
2. :func:`table_buckets` splits a block's (key, position) rows by :func:`bucket_of` the
   key (a keyed SipHash, the same in every process); :func:`event_buckets` splits an
   events partition's distinct key texts (:func:`dpcount.keyed.ids.key_texts`) likewise.
3. :func:`join_bucket` joins one bucket: a key that the file holds twice is refused (its
   two copies share a bucket), and every event key of the bucket gets its position.
4. :class:`KnownKeys` is the universe as far as the events use it: its :meth:`indices`
   are :meth:`KeyUniverse.indices` of the events (−1 for a key outside the file).

A key's index — the position of its noise (:mod:`dpcount.keyed.engine`) — is its
position in the file, exactly as :class:`~dpcount.keyed.events.KeyUniverse` numbers
the list the file reads as: the join changes where keys are matched, never which
index a key gets, so every release is bit for bit the same. Nothing here depends on
the events beyond the keys they hold; positions are public (the file's order).

Not yet scheduled by a runner: the Dask engine still ships the whole universe.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.ids import key_texts

__all__ = [
    "KnownKeys",
    "block_keys",
    "bucket_of",
    "event_buckets",
    "file_blocks",
    "first_positions",
    "join_bucket",
    "table_buckets",
]

#: the SipHash key of :func:`bucket_of` (16 characters): a fixed, public spreading of
#: keys over buckets, the same in every process (Python's ``hash`` of a str is not)
_BUCKET_KEY = "dpcount-keyjoin1"


def file_blocks(path: str | os.PathLike[str], count: int) -> list[tuple[int, int]]:
    """``count`` (at most) byte ranges [start, end) covering the file, each starting at
    the start of a line (after a ``\\n``, so a ``\\r\\n`` and a UTF-8 character are never
    cut); empty ranges are left out."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    p = Path(path)
    size = p.stat().st_size
    cuts = [0]
    with p.open("rb") as fh:
        for i in range(1, count):
            at = max(size * i // count, cuts[-1])
            fh.seek(at)
            if at > 0:
                fh.seek(at - 1)
                fh.readline()  # to the end of the line holding byte at − 1
            cuts.append(min(fh.tell(), size))
    cuts.append(size)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def block_keys(path: str | os.PathLike[str], block: tuple[int, int]) -> list[str]:
    """The keys of one :func:`file_blocks` block, as :func:`~dpcount.keyed.io.read_keys`
    reads them from the whole file."""
    start, end = block
    with Path(path).open("rb") as fh:
        fh.seek(start)
        text = fh.read(end - start).decode("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def first_positions(sizes: Sequence[int]) -> NDArray[np.int64]:
    """Each block's first key position, from the blocks' key counts in file order."""
    out: NDArray[np.int64] = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)[:-1]))
    return out.astype(np.int64)


def bucket_of(texts: NDArray[Any], buckets: int) -> NDArray[np.int64]:
    """The bucket (0 .. buckets − 1) of each key text: a function of the text alone."""
    hashed = pd.util.hash_array(np.asarray(texts, dtype=object), hash_key=_BUCKET_KEY)
    out: NDArray[np.int64] = (hashed % np.uint64(buckets)).astype(np.int64)
    return out


def table_buckets(keys: Sequence[str], first: int, buckets: int) -> list[pd.DataFrame]:
    """A block's rows (key, position) split by bucket; ``first``: its first position."""
    texts = np.asarray(keys, dtype=object)
    rows = pd.DataFrame({"key": texts, "position": first + np.arange(len(texts))})
    at = bucket_of(texts, buckets)
    return [rows[at == b].reset_index(drop=True) for b in range(buckets)]


def event_buckets(values: pd.Series, buckets: int) -> list[NDArray[Any]]:
    """An events partition's distinct key texts (missing keys left out: they match no
    key), split by bucket."""
    texts = pd.unique(pd.Series(key_texts(values), dtype=object).dropna().to_numpy(dtype=object))
    at = bucket_of(texts, buckets)
    return [texts[at == b] for b in range(buckets)]


def join_bucket(table: Sequence[pd.DataFrame], events: Sequence[NDArray[Any]]) -> pd.DataFrame:
    """One bucket's event keys that are in the file, with their positions (key,
    position).

    Raises:
        ValueError: a key the file holds more than once (named, as
            :class:`~dpcount.keyed.events.KeyUniverse` names it, the same message).
    """
    rows = pd.concat(list(table), ignore_index=True)
    twice = rows["key"].duplicated()
    if twice.any():
        key = rows["key"][twice].iloc[0]
        raise ValueError(f"keys must be unique, {key!r} and {key!r} appears more than once")
    parts = [np.asarray(e, dtype=object) for e in events]
    wanted = pd.unique(np.concatenate(parts)) if parts else np.array([], dtype=object)
    found = rows[rows["key"].isin(wanted)]
    return found.reset_index(drop=True)


@dataclass(frozen=True)
class KnownKeys:
    """The keys of a universe that the events hold, with their positions (the rows of
    :func:`join_bucket`): :meth:`indices` as :meth:`KeyUniverse.indices` of a universe
    of text keys, for events whose keys are all among them or outside the universe."""

    keys: NDArray[Any]
    positions: NDArray[np.int64]

    @classmethod
    def of(cls, joined: Sequence[pd.DataFrame]) -> KnownKeys:
        rows = pd.concat(list(joined), ignore_index=True)
        return cls(rows["key"].to_numpy(dtype=object), rows["position"].to_numpy(np.int64))

    def indices(self, values: pd.Series) -> NDArray[np.int64]:
        """Each value's key index (its position in the file), −1 outside the universe."""
        at = pd.Index(self.keys, dtype=object).get_indexer(
            pd.Index(key_texts(values), dtype=object)
        )
        out: NDArray[np.int64] = np.where(at >= 0, self.positions[at], -1).astype(np.int64)
        return out
