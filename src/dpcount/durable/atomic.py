"""Atomic file replacement: a crash leaves the old file or the new one, never a mix.

:func:`write_atomic` writes ``<path>.tmp`` in the same folder (mode 0600: a
checkpoint is as sensitive as the raw data), flushes and fsyncs it, renames it
over ``path`` (:func:`os.replace`, atomic on POSIX and Windows within one file
system) and fsyncs the folder, so the rename itself is durable.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["check_path", "write_atomic"]


def check_path(path: object) -> str:
    """A file path: a str or os.PathLike naming a file (not bytes, not empty)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a str or os.PathLike, got {path!r} of type {type(path).__name__}"
        )
    name = os.fspath(path)
    if not isinstance(name, str) or not name:
        raise ValueError(f"path must name a file, got {path!r}")
    return name


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], pieces: list[bytes]) -> None:
    """Write ``pieces`` to ``path`` atomically: ``<path>.tmp`` (mode 0600) in the same
    folder, flush and fsync, :func:`os.replace`, fsync the folder."""
    target = os.path.abspath(os.fspath(path))
    tmp = target + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover from a crash mid-write
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(os.path.dirname(target))
