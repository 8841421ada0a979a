"""Step-by-step and block release for noise processes that compute their noise in
blocks (the BLT and Toeplitz processes): a scalar ``next()`` computes
:data:`SCALAR_CHUNK` steps at once and hands them out from a list (the computed,
unreleased values are part of the process state, saved by its ``state_dict``);
``next_many`` computes its steps in blocks of at most :data:`MAX_BLOCK_ELEMENTS`
values. A subclass provides ``_compute(dest)`` (draw z for ``len(dest)`` steps and
write their noise into ``dest``, advancing its own state) and may override
``_vector_next`` (one vector step)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._state import state_array
from dpcount._validate import check_integer
from dpcount.counting._process import SourcedNoiseProcess

__all__ = ["MAX_BLOCK_ELEMENTS", "SCALAR_CHUNK", "ChunkedNoiseProcess", "read_sum", "sum_state"]

#: steps computed at once by a scalar ``next()``
SCALAR_CHUNK = 4096
#: largest number of values (steps × dim) computed in one block by ``next_many``
MAX_BLOCK_ELEMENTS = 1 << 21


class ChunkedNoiseProcess(SourcedNoiseProcess):
    """``next`` / ``next_many`` on top of a subclass's ``_compute``."""

    _tail: tuple[int, ...]
    _pending: list[Any]

    def _compute(self, dest: NDArray[np.float64]) -> None:
        raise NotImplementedError

    def _compute_new(self, n: int) -> NDArray[np.float64] | None:
        """The next ``n`` steps' noise as a new array, computed as ``_compute`` would
        (same floats), or None (nothing drawn) where the subclass has no such path; used
        by ``next_many`` when the steps are one block and nothing is pending."""
        return None

    def _vector_next(self) -> Any:
        """One vector step (default: a block of one step)."""
        assert self.dim is not None
        out = np.empty((1, self.dim))
        self._compute(out)
        return out[0]

    def next(self) -> Any:
        if self._pending:
            self._t += 1
            return self._pending.pop()
        if self._t >= self.horizon:
            raise ValueError(f"noise process is at its horizon ({self.horizon} steps)")
        self._t += 1
        if self.dim is not None:
            return self._vector_next()
        block = np.empty(min(SCALAR_CHUNK, self.horizon - self._t + 1))
        self._compute(block)
        self._pending = block[:0:-1].tolist()  # reversed: pop() hands out in order
        return float(block[0])

    def next_many(self, n: int) -> NDArray[np.float64]:
        n = check_integer("n", n, ge=1)
        if self._t + n > self.horizon:
            raise ValueError(f"noise process holds {self.horizon} steps, asked for {self._t + n}")
        step_block = max(1, MAX_BLOCK_ELEMENTS // (1 if self.dim is None else self.dim))
        if n <= step_block and not self._pending:
            new = self._compute_new(n)
            if new is not None:
                self._t += n
                return new
        out = np.empty((n, *self._tail))
        take = min(n, len(self._pending))
        if take:
            out[:take] = self._pending[: -take - 1 : -1]
            del self._pending[-take:]
        for start in range(take, n, step_block):
            self._compute(out[start : min(n, start + step_block)])
        self._t += n
        return out

    # -- checkpoints: the computed, unreleased noise and a running sum -------------------
    def _pending_state(self) -> NDArray[np.float64]:
        """The computed, unreleased noise in release order (a checkpoint field)."""
        return np.array(self._pending[::-1], dtype=np.float64)

    def _read_pending(self, value: Any, t: int) -> list[Any]:
        """:meth:`_pending_state` output checked (empty for vector steps, at most the
        horizon's remaining steps), as the list ``next`` pops from."""
        owner = self._owner
        pending = state_array(owner, "pending", value, rows=-1, dim=None)
        if len(pending) and self.dim is not None:
            raise ValueError(f"corrupt {owner} state: pending must be empty for vector steps")
        if t + len(pending) > self.horizon:
            raise ValueError(
                f"corrupt {owner} state: t + len(pending) = {t + len(pending)} exceeds the "
                f"horizon {self.horizon}"
            )
        out: list[Any] = pending.astype(np.float64)[::-1].tolist()
        return out


def sum_state(total: Any) -> NDArray[np.float64]:
    """A running sum (a float or a ``(dim,)`` array) as a checkpoint field."""
    return np.array(total, dtype=np.float64, ndmin=1)


def read_sum(owner: str, value: Any, tail: tuple[int, ...]) -> NDArray[np.float64]:
    """:func:`sum_state` output checked and shaped back to ``tail`` (``()`` or ``(dim,)``)."""
    dim = tail[0] if tail else 1
    total = state_array(owner, "sum", value, rows=None, dim=dim)
    return total.astype(np.float64).reshape(tail)
