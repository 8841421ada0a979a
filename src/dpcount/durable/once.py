"""The one exactly-once protocol: begin → write → commit, over durable journals.

A release is final once any of its output may exist. So before a byte of output, each
*journal* of the run (a file replaced atomically: a checkpoint, a released-up-to mark,
a consumed-files record) records the release **pending**; then the output is written
(and fsynced); then the journals record it **done**, in the reverse order. A process
killed at any point leaves every journal either before the release (nothing was
written), or with the release pending — and the next run completes exactly that
release (the same steps from the same input: the same bytes) or refuses; never a
second, different release of the same steps.

Users:

* ``dpcount count --checkpoint`` (:class:`~dpcount.durable.output.DurableOutput`):
  one journal, the checkpoint, which holds the batch's lines as pending (begin:
  the earlier output fsynced, then the checkpoint saved); the write delivers them;
  the next batch's begin is its commit (a restart reconciles the output with the
  pending lines).
* a keyed run (:class:`dpcount.keyed.mark.ReleaseGuard`): the consumed-files record
  of an incremental run, then the released-up-to mark (begin, after the mark's
  checks); the write is the output and the state; commit: the mark, then the record.

Nothing here knows what a release is: the journals do (:class:`Journal`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

__all__ = ["ExactlyOnce", "Journal"]

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


class Journal(Protocol[R_contra]):
    """A durable record of a run's releases."""

    def begin(self, release: R_contra) -> None:
        """Record ``release`` pending, durably (before any of its output)."""
        ...

    def commit(self, release: R_contra) -> None:
        """Record ``release`` done, durably (after all of its output)."""
        ...


class ExactlyOnce(Generic[R]):
    """The protocol over ``journals``: :meth:`begin` records a release pending in each
    (in order), the caller writes its output, :meth:`commit` records it done in each
    (in the reverse order). One release at a time."""

    def __init__(self, journals: Sequence[Journal[R]]) -> None:
        self.journals = list(journals)
        self.pending: R | None = None

    def begin(self, release: R) -> None:
        if self.pending is not None:
            raise RuntimeError("a release is already in progress")
        for journal in self.journals:
            journal.begin(release)
        self.pending = release

    def commit(self) -> None:
        """Record the release begun done (nothing when none was begun)."""
        release, self.pending = self.pending, None
        if release is None:
            return
        for journal in reversed(self.journals):
            journal.commit(release)

    @contextmanager
    def releasing(self, release: R) -> Iterator[None]:
        """``begin``; the block writes the output; ``commit`` when it ends normally (an
        error leaves the release pending, for the next run to complete)."""
        self.begin(release)
        yield
        self.commit()

    def run(self, release: R, write: Callable[[], None]) -> None:
        """:meth:`releasing` around ``write()``."""
        with self.releasing(release):
            write()
