"""The order of a release's rows: by key name, never by the key table's order.

Everything an output shows — its values, which rows exist, **and their order** — must
be a function of what is already private or public. With a public key universe
(``keys=``) the rows follow the universe, which the caller gave. With an open key set
(``keys=None`` and a :class:`~dpcount.keyed.selection.KeySelection`), the key table
(each key's noise position) is ordered by the step of each key's *first counted
event*, then name (:func:`dpcount.keyed.job.place_keys`): a function of the raw data
that the selection deliberately withholds (a key's rows start at its selection step,
not at its first event). Writing the rows in table order revealed it: one event of key
B at step 1 turned a release's order A, B into B, A every time, whatever the noise.

So an open key set's release is written in the order of the **key name** (the keys'
natural order, text by its Unicode code points, integers by value; mixed types by
their type's name first, as :func:`dpcount.keyed.job.open_universe` sorts them), each
key's rows by step. The released key set is private output (the guarantee of
:mod:`dpcount.keyed.selection` covers it), and the order of its names is a function of
that set alone: post-processing, so it costs no privacy. The alternative, selection
step then name, is private output too; the name alone was chosen because it does not
depend on *when* a key was released (a reader's sort by key gives the file's order)
and an incremental run's appended releases each read the same way. The table
position stays what it is — the index of the key's noise (a pure function of the
secret and the position, :mod:`dpcount.keyed.engine`) — so the noise, and every
released value, is bit-for-bit what it was.

The release is computed chunk by chunk in table order; an open key set's released
columns are held (8 bytes per released key and step, only the selected keys') until
the last chunk, then handed out in name order, in blocks of at most
:data:`BLOCK_KEYS` keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCK_KEYS", "ReleasedBlock", "name_order", "released_blocks", "row_mask"]

#: most keys in one block of an open key set's release (the frames and tables built
#: from it: one chunk's worth)
BLOCK_KEYS = 2048


class ReleasedBlock(NamedTuple):
    """Released counts of some keys: ``values`` (steps first..until × keys) of ``keys``,
    and each key's first released step ``since`` (None: every step of the window)."""

    keys: Sequence[Any]
    values: NDArray[Any]
    since: NDArray[np.int64] | None


def name_order(keys: Sequence[Any]) -> NDArray[np.int64]:
    """The indices of ``keys`` sorted by name: by value, and by type name first (a key
    table may hold text and integers together)."""
    order = sorted(range(len(keys)), key=lambda i: (type(keys[i]).__name__, keys[i]))
    return np.asarray(order, dtype=np.int64)


def row_mask(since: NDArray[np.int64], n_steps: int, first: int) -> NDArray[np.bool_]:
    """Rows to keep of a key-major block (keys × steps first..first+n_steps−1): the steps
    at or after each key's first released step ``since``."""
    steps = first + np.arange(n_steps, dtype=np.int64)
    out: NDArray[np.bool_] = (steps[None, :] >= since[:, None]).reshape(-1)
    return out


def released_blocks(
    keys: Sequence[Any],
    chunks: Iterable[tuple[int, NDArray[Any]]],
    selected: NDArray[np.int64] | None,
    until: int,
) -> Iterator[ReleasedBlock]:
    """The released chunks (first key position, counts of shape (steps, keys)) as blocks
    in output order.

    ``keys``: the key table (position → name). ``selected``: each key's selection step
    (an open key set; None: a public universe, whose chunks are passed on as they come,
    in the universe's order). With ``selected``, the columns of the keys selected by
    ``until`` are gathered from every chunk and handed out by name
    (:func:`name_order`), each with its selection step; a key never selected has no
    row, whatever its position.
    """
    if selected is None:
        for lo, values in chunks:
            yield ReleasedBlock(keys[lo : lo + values.shape[1]], values, None)
        return
    shown = np.flatnonzero(selected <= until)  # positions of the released keys, ascending
    # a chunk's columns go to the places of its keys among ``shown`` (any chunk order)
    held: NDArray[Any] | None = None
    filled = 0
    for lo, values in chunks:
        n = values.shape[1]
        at = shown[(shown >= lo) & (shown < lo + n)]
        if held is None:
            held = np.empty((values.shape[0], len(shown)), dtype=values.dtype)
        held[:, np.searchsorted(shown, at)] = values[:, at - lo]
        filled += len(at)
    if held is None or not len(shown):
        return
    if filled != len(shown):
        raise RuntimeError(f"{filled} of {len(shown)} released keys computed (a defect)")
    names = [keys[p] for p in shown.tolist()]
    order = name_order(names)
    for lo in range(0, len(order), BLOCK_KEYS):
        part = order[lo : lo + BLOCK_KEYS]
        yield ReleasedBlock([names[i] for i in part.tolist()], held[:, part], selected[shown[part]])
