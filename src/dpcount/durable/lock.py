"""The one process lock: an exclusive, non-blocking ``flock`` on a lock file.

Used by ``dpcount count --checkpoint`` (:class:`~dpcount.durable.output.DurableOutput`,
``<checkpoint>.lock``) and by keyed runs (``<secret>.lock`` for the whole run,
``<state>.inputs.lock`` for an incremental run). A second process is refused at once
with :class:`LockHeld`, naming the process that holds the lock (its id is written in
the file).

* The file is opened ``O_NOFOLLOW`` (never through a planted symlink), created mode
  0600, close-on-exec.
* A holder may remove the file while it still holds the lock (:meth:`FileLock.discard`,
  and ``with`` does so on exit): a process that opened the old file meanwhile finds,
  once its ``flock`` succeeds, that the path no longer names the file it locked (the
  device and inode differ, or the path is gone), and opens the path again. So two
  processes never both hold "the" lock.
* A lock file left by a killed process is harmless: its lock died with the process.

Where ``fcntl`` is missing (Windows) a lock that is not ``required`` is a no-op (the
checkpoint's documented limitation); a required one raises.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from dpcount.durable.atomic import write_all

__all__ = ["FileLock", "LockHeld"]


class LockHeld(OSError, ValueError):
    """Another process holds the lock (an OSError, and a ValueError for the callers
    that report refusals as ValueError)."""


def _default_refusal(path: Path, holder: str) -> str:
    return f"lock {path} is held by another process (process {holder})"


class FileLock:
    """An exclusive, non-blocking lock on ``path``.

    Args:
        path: the lock file (created if absent).
        refusal: the message of :class:`LockHeld` given the holder's process id (text,
            ``"unknown"`` if it cannot be read).
        required: whether a platform without ``fcntl`` raises (True) or runs unlocked.

    ``with`` takes the lock and, on exit, removes the file and releases it
    (:meth:`discard`); :meth:`acquire` / :meth:`release` keep the file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        refusal: Callable[[str], str] | None = None,
        *,
        required: bool = True,
    ) -> None:
        self.path = Path(path)
        self._refusal = refusal
        self.required = required
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (:class:`LockHeld` if another process has it). A lock file
        removed by its holder between our open and our flock is not the lock any
        more: we open the path again."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks
            if self.required:
                raise
            return
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        while True:
            fd = os.open(self.path, flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                text = (self._refusal or (lambda h: _default_refusal(self.path, h)))(holder)
                raise LockHeld(text) from None
            if self._same_file(fd):
                break
            os.close(fd)  # locked an unlinked file: its holder discarded it
        os.ftruncate(fd, 0)
        write_all(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _same_file(self, fd: int) -> bool:
        """Whether the path still names the file open as ``fd``."""
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)

    def release(self) -> None:
        """Release the lock, keeping the file."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def discard(self) -> None:
        """Remove the lock file, then release it; a process waiting on it opens a new
        one (:meth:`acquire`)."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
        self.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()
