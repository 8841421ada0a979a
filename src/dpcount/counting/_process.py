"""What the noise processes of the counting mechanisms share: their construction from
a noise source, the step counter, and the checked reading of a checkpoint's ``t``.

A process is built from its structure and a :class:`~dpcount.privacy.noise.NoiseBuffer`
(a :class:`~dpcount.privacy.source.NoiseSource` and the vector length ``dim`` in one
value): a process that takes samples one at a time uses the buffer, one that computes
its noise in blocks draws with ``self.noise.sample(shape)`` (the source) directly. The per-step code
(``next`` / ``next_many``) stays in each process, so this base adds nothing to a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpcount._state import state_int, state_keys
from dpcount.privacy.noise import NoiseBuffer

__all__ = ["SourcedNoiseProcess"]


class SourcedNoiseProcess:
    """Base of a noise process (:class:`~dpcount.counting.base.NoiseProcess`) that
    draws from one source.

    Attributes:
        horizon: the last step the process can produce.
        dim: None for scalar steps, else the vector length.
        sampler: the source's sampler (its distribution; i.i.d. draws).
        noise: the :class:`~dpcount.privacy.source.NoiseSource` (``noise.sample(shape)``).
    """

    def __init__(self, horizon: int, source: NoiseBuffer) -> None:
        self.horizon = horizon
        self.dim = source.dim
        self.sampler = source.sampler
        self.noise = source.source
        self._buffer = source
        self._t = 0

    @property
    def step(self) -> int:
        return self._t

    #: the name a corrupt checkpoint state's error gives (default: the class name)
    _state_owner: str | None = None

    @property
    def _owner(self) -> str:
        return type(self).__name__ if self._state_owner is None else self._state_owner

    def _state(self, **fields: Any) -> dict[str, Any]:
        """A checkpoint state: the step ``t``, then ``fields`` in order."""
        return {"t": self._t, **fields}

    def _read_state(
        self, state: Any, fields: tuple[str, ...], last: int | None = None
    ) -> tuple[Mapping[str, Any], int]:
        """``state`` checked to hold exactly ``t`` and ``fields``, and its step t, an int
        in [0, ``last``] (default: the horizon); errors name the process and the field
        (:mod:`dpcount._state`)."""
        st = state_keys(self._owner, state, ("t", *fields))
        t = state_int(self._owner, "t", st["t"], 0, self.horizon if last is None else last)
        return st, t
