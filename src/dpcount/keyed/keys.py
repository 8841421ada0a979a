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
   key (a keyed SipHash, the same in every process) into Arrow tables;
   :func:`event_buckets` splits an events partition's distinct key texts
   (:func:`dpcount.keyed.ids.key_texts`, in order of first occurrence) likewise, each
   bucket's with a checksum of its texts.
3. :func:`join_positions` joins one bucket: a key that the file holds twice is refused
   (its two copies share a bucket), and each partition's key texts of the bucket get
   their positions (−1: not in the file), in their order — 8 bytes a key go back.
4. :class:`JoinedKeys` collects one partition's positions; the partition's task reads
   its keys again, checks the texts against the checksums and makes its
   :class:`KnownKeys`, whose :meth:`~KnownKeys.indices` are :meth:`KeyUniverse.indices`
   of the events (−1 for a key outside the file).

A key's index — the position of its noise (:mod:`dpcount.keyed.engine`) — is its
position in the file, exactly as :class:`~dpcount.keyed.events.KeyUniverse` numbers
the list the file reads as: the join changes where keys are matched, never which
index a key gets, so every release is bit for bit the same. Nothing here depends on
the events beyond the keys they hold; positions are public (the file's order).

:class:`FileUniverse` is the universe the Dask runner ships instead of the list: the
file's path and block table (:class:`KeyNames`: a key's name read from its block when a
release task or the output needs it), the key count and the digest — streamed once over
the file on the client by :meth:`FileUniverse.open`, the same value as
:meth:`KeyUniverse.digest` of the list, so the run's configuration and secret are those
of the embedded run — and, in an input partition's task, that partition's
:class:`KnownKeys`. The Dask and Spark runners schedule the join
(``known_keys`` of :class:`dpcount.keyed.runners.dask.DaskScheduler` and of
:class:`dpcount.keyed.runners.spark.SparkScheduler`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcount.keyed.events import KeyUniverse
from dpcount.keyed.ids import key_texts

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BLOCK_BYTES",
    "FileUniverse",
    "JoinedKeys",
    "KeyNames",
    "KnownKeys",
    "block_keys",
    "bucket_of",
    "event_buckets",
    "file_blocks",
    "first_positions",
    "join_parts",
    "join_positions",
    "table_buckets",
    "table_span",
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


#: texts hashed at a time (:func:`_hashes`)
_HASH_SLICE = 1 << 18


def _hashes(texts: NDArray[Any]) -> NDArray[np.uint64]:
    """The keyed SipHash of each text, a slice at a time: pandas' ``hash_array`` of 4 x
    10^6 strings took 0.9 GiB of temporaries at once (each text encoded anew)."""
    texts = np.asarray(texts, dtype=object)
    out: NDArray[np.uint64] = np.empty(len(texts), dtype=np.uint64)
    for lo in range(0, len(texts), _HASH_SLICE):
        out[lo : lo + _HASH_SLICE] = pd.util.hash_array(
            texts[lo : lo + _HASH_SLICE], hash_key=_BUCKET_KEY
        )
    return out


def bucket_of(texts: NDArray[Any], buckets: int) -> NDArray[np.int64]:
    """The bucket (0 .. buckets − 1) of each key text: a function of the text alone."""
    out: NDArray[np.int64] = (_hashes(texts) % np.uint64(buckets)).astype(np.int64)
    return out


def table_buckets(keys: Sequence[str], first: int, buckets: int) -> list[pa.Table]:
    """A block's rows (key, position) split by bucket, as Arrow tables (~20 bytes a key
    where a Python string takes ~60); ``first``: its first position."""
    import pyarrow as pa

    texts = np.asarray(keys, dtype=object)
    at = bucket_of(texts, buckets)
    rows = pa.table(
        {"key": pa.array(texts, pa.string()), "position": first + np.arange(len(texts))}
    )
    return [rows.filter(pa.array(at == b)) for b in range(buckets)]


def _checksum(hashed: NDArray[np.uint64]) -> int:
    """An order-sensitive checksum of a bucket's key hashes (mod 2^64)."""
    weights = np.arange(1, len(hashed) + 1, dtype=np.uint64)
    return int((hashed * weights).sum(dtype=np.uint64))


def _event_split(values: pd.Series, buckets: int) -> list[tuple[NDArray[Any], int]]:
    """An events partition's distinct key texts (in order of first occurrence; missing
    keys left out: they match no key) split by bucket, each bucket's with its
    :func:`_checksum`."""
    arrow = _arrow_texts(values)
    if arrow is not None:  # distinct first (Arrow's unique: in order of first occurrence)
        import pyarrow.compute as pc

        texts = pc.unique(arrow.drop_null()).to_numpy(zero_copy_only=False)
    else:
        texts = pd.unique(
            pd.Series(key_texts(values), dtype=object).dropna().to_numpy(dtype=object)
        )
    hashed = _hashes(texts)
    at = (hashed % np.uint64(buckets)).astype(np.int64)
    return [(texts[at == b], _checksum(hashed[at == b])) for b in range(buckets)]


def event_buckets(values: pd.Series, buckets: int) -> list[tuple[pa.Array, int]]:
    """An events partition's distinct key texts split by bucket, as Arrow arrays to send
    to the bucket's join (:func:`join_positions`), each with its checksum."""
    import pyarrow as pa

    return [(pa.array(t, pa.string()), c) for t, c in _event_split(values, buckets)]


def join_positions(
    table: Sequence[pa.Table], events: Sequence[tuple[pa.Array, int]]
) -> list[tuple[NDArray[np.int64], int]]:
    """One bucket's join: for each partition's key texts of the bucket (in their order),
    the key's position in the file (−1: not in it), and the texts' checksum.

    Raises:
        ValueError: a key the file holds more than once (named, as
            :class:`~dpcount.keyed.events.KeyUniverse` names it, the same message).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.concat_tables(list(table)) if table else None
    keys = pa.array([], pa.string()) if rows is None else rows.column("key").combine_chunks()
    position = np.zeros(0, np.int64) if rows is None else rows.column("position").to_numpy()
    if len(pc.unique(keys)) < len(keys):
        listed = pd.Series(keys.to_pylist(), dtype=object)
        key = listed[listed.duplicated()].iloc[0]
        raise ValueError(f"keys must be unique, {key!r} and {key!r} appears more than once")
    out = []
    for texts, checksum in events:
        at = pc.index_in(texts, value_set=keys).to_numpy(zero_copy_only=False)
        found = ~np.isnan(at)
        got = np.full(len(at), -1, dtype=np.int64)
        got[found] = position[at[found].astype(np.int64)]
        out.append((got, checksum))
    return out


def table_span(names: KeyNames, lo: int, hi: int, buckets: int) -> list[pa.Table]:
    """The keys at positions [lo, hi) of a keys file as (key, position) rows split by
    bucket (:func:`table_buckets`), read from the file's blocks."""
    return table_buckets(names[lo:hi], lo, buckets)


def join_parts(tables: int, *pieces: Any) -> list[tuple[NDArray[np.int64], int]]:
    """One bucket's :func:`join_positions`: ``pieces`` are the bucket's table rows of
    ``tables`` table tasks, then each partition's key texts of the bucket
    (:func:`event_buckets`); item p: partition p's."""
    return join_positions(pieces[:tables], pieces[tables:])


@dataclass(frozen=True)
class JoinedKeys:
    """What the join found for one input partition: per bucket, the positions of its
    distinct key texts in their order (8 bytes a key: never the texts, which the
    partition's task reads again), and their checksum."""

    positions: tuple[NDArray[np.int64], ...]
    checksums: tuple[int, ...]

    @classmethod
    def of(cls, *found: tuple[NDArray[np.int64], int]) -> JoinedKeys:
        """From the buckets' :func:`join_positions` items of the partition, in bucket order."""
        return cls(tuple(p for p, _ in found), tuple(c for _, c in found))

    def known(self, values: pd.Series) -> KnownKeys:
        """The :class:`KnownKeys` of the partition's key column ``values``, read again.

        Raises:
            RuntimeError: the partition read again holds other keys than the joined ones
                (a file changed during the run).
        """
        if not self.positions:
            raise RuntimeError("an input partition without its join's result")
        split = _event_split(values, len(self.positions))
        for (texts, checksum), pos, want in zip(split, self.positions, self.checksums, strict=True):
            if len(texts) != len(pos) or checksum != want:
                raise RuntimeError("an input partition read twice gave other keys")
        import pyarrow as pa

        pos = np.concatenate(self.positions)
        texts = pa.array(np.concatenate([t for t, _ in split])[pos >= 0], pa.large_string())
        return KnownKeys(texts, pos[pos >= 0])


@dataclass(frozen=True)
class KnownKeys:
    """The keys of a universe that the events hold, with their positions (what
    :class:`JoinedKeys` found): :meth:`indices` as :meth:`KeyUniverse.indices` of a
    universe of text keys, for events whose keys are all among them or outside it."""

    keys: pa.Array  # Arrow strings: ~20 bytes a key where a Python string takes ~60
    positions: NDArray[np.int64]

    def indices(self, values: pd.Series) -> NDArray[np.int64]:
        """Each value's key index (its position in the file), −1 outside the universe.
        A column of Arrow strings is matched as Arrow strings (no Python string per
        row); any other column by :func:`~dpcount.keyed.ids.key_texts`."""
        arrow = _arrow_texts(values)
        if arrow is not None:
            import pyarrow.compute as pc

            found = pc.index_in(arrow, value_set=self.keys.cast(arrow.type))
            at = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            at = pd.Index(self.keys.to_numpy(zero_copy_only=False), dtype=object).get_indexer(
                pd.Index(key_texts(values), dtype=object)
            )
        out: NDArray[np.int64] = np.where(at >= 0, self.positions[at], -1).astype(np.int64)
        return out


def _arrow_texts(values: pd.Series) -> pa.Array | None:
    """A column of Arrow-backed strings as its Arrow array (then each value is its own
    canonical text, :func:`~dpcount.keyed.ids.key_texts`; a missing one no key), or
    None for any other column."""
    if not isinstance(values.dtype, pd.StringDtype) or values.dtype.storage != "pyarrow":
        return None
    import pyarrow as pa

    got = pa.array(values.array)
    return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got


#: bytes of a keys file per block of :class:`KeyNames` (~75 000 keys of 14 bytes): what
#: a process reads, and keeps as Python strings, to name a key
BLOCK_BYTES = 2**20


class KeyNames(Sequence[str]):
    """The keys of a keys file by position, read from its blocks when asked: ``len``,
    a key, a slice (a list) or all of them in order, each as
    :func:`~dpcount.keyed.io.read_keys` reads the file. The last block read is kept, so
    a release naming consecutive key chunks reads each block once. Pickles to its path
    and block table (a few bytes per block), never to keys."""

    def __init__(
        self, path: str, blocks: Sequence[tuple[int, int]], first: Sequence[int], n: int
    ) -> None:
        self.path, self.n = path, n
        self.blocks, self.first = tuple(blocks), tuple(first)
        self._held: tuple[int, list[str]] = (-1, [])

    def __reduce__(self) -> tuple[Any, ...]:
        return KeyNames, (self.path, self.blocks, self.first, self.n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyNames) and self.__reduce__() == other.__reduce__()

    def __hash__(self) -> int:
        return hash(self.__reduce__()[1])

    def __len__(self) -> int:
        return self.n

    def _block(self, b: int) -> list[str]:
        if self._held[0] != b:
            keys = block_keys(self.path, self.blocks[b])
            end = self.first[b + 1] if b + 1 < len(self.first) else self.n
            if len(keys) != end - self.first[b]:  # the positions would be wrong
                raise ValueError(f"keys file {self.path} changed during the run")
            self._held = (b, keys)
        return self._held[1]

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            lo, hi, step = i.indices(self.n)
            if step != 1:
                return [self[j] for j in range(lo, hi, step)]
            return self._span(lo, hi)
        j = i + self.n if i < 0 else i
        if not 0 <= j < self.n:
            raise IndexError(f"key position {i} outside 0..{self.n - 1}")
        b = bisect.bisect_right(self.first, j) - 1
        return self._block(b)[j - self.first[b]]

    def _span(self, lo: int, hi: int) -> list[str]:
        out: list[str] = []
        b = bisect.bisect_right(self.first, lo) - 1
        while lo < hi:
            keys, at = self._block(b), self.first[b]
            out.extend(keys[lo - at : hi - at])
            lo, b = at + len(keys), b + 1
        return out

    def __iter__(self) -> Iterator[str]:
        for b in range(len(self.blocks)):
            yield from self._block(b)

    def take(self, index: NDArray[np.int64]) -> NDArray[Any]:
        """The names at the positions ``index`` (any order), reading only their blocks."""
        index = np.asarray(index, dtype=np.int64)
        out = np.empty(len(index), dtype=object)
        block = np.searchsorted(np.asarray(self.first), index, side="right") - 1
        for b in np.unique(block):
            at = block == b
            out[at] = np.asarray(self._block(int(b)), dtype=object)[index[at] - self.first[b]]
        return out


class FileUniverse(KeyUniverse):
    """A public key universe read from a keys file, held as its :class:`KeyNames` (no
    process holds every key): the same length, key positions and :meth:`digest` as
    ``KeyUniverse(read_keys(path))``. Its :meth:`indices` are those of the
    :class:`KnownKeys` of the events at hand (:meth:`with_known`), which the runner's
    distributed join (:func:`join_positions`) found: a key twice in the file is refused
    there, with :class:`KeyUniverse`'s message."""

    keys: KeyNames  # type: ignore[assignment]
    sha256: str
    known: KnownKeys | None

    def __init__(self, names: KeyNames, digest: str, known: KnownKeys | None = None) -> None:
        object.__setattr__(self, "keys", names)
        object.__setattr__(self, "sha256", digest)
        object.__setattr__(self, "known", known)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> FileUniverse:
        """The universe of the keys file ``path``: one pass over the file, a block at a
        time, counting each block's keys and hashing them as :meth:`KeyUniverse.digest`
        hashes the list (SHA-256 of each key's ``repr`` and a newline, in file order).

        Raises:
            FileNotFoundError: no such file.
            ValueError: a file without keys (as :func:`~dpcount.keyed.io.read_keys`).
        """
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"keys file {p} not found")
        blocks = file_blocks(p, max(1, -(-p.stat().st_size // BLOCK_BYTES)))
        h, sizes = hashlib.sha256(), []
        for block in blocks:
            keys = block_keys(p, block)
            sizes.append(len(keys))
            h.update("".join(f"{k!r}\n" for k in keys).encode())
        if not sum(sizes):
            raise ValueError(f"keys file {p} holds no keys")
        first = [int(f) for f in first_positions(sizes)]
        # the workers' working folder need not be the client's: the path, absolute
        names = KeyNames(os.path.abspath(p), blocks, first, sum(sizes))
        return cls(names, h.hexdigest())

    def __getstate__(self) -> dict[str, Any]:
        return {"keys": self.keys, "sha256": self.sha256, "known": self.known}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def with_known(self, known: KnownKeys) -> FileUniverse:
        """The universe matching events whose keys in the file are ``known``'s."""
        return FileUniverse(self.keys, self.sha256, known)

    def indices(self, values: pd.Series) -> NDArray[np.int64]:
        """Each value's key index (its position in the file), −1 outside the universe,
        as :meth:`KeyUniverse.indices`: needs the events' :class:`KnownKeys`."""
        if self.known is None:
            raise RuntimeError("a keys file's universe matches events after its join")
        return self.known.indices(values)

    def digest(self) -> str:
        return str(self.sha256)
