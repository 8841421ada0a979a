"""The one file writer: a crash leaves the old file or the new one, never a mix.

Every file dpcount writes (checkpoints, keyed secrets' marks and states, released
output, manifests) goes through :func:`atomic_file` (or its shortcut
:func:`write_atomic`):

* the data go to a temporary file created in the target's folder with
  :func:`tempfile.mkstemp` — an unpredictable name, opened ``O_CREAT | O_EXCL``
  (so a symlink or file planted at any name is never opened, let alone followed) —
  with the requested permissions (0600 by default: a checkpoint or a state is as
  sensitive as the raw data; :data:`PUBLIC` for released output: 0666 minus the
  umask, the permissions of an ordinary new file);
* every write is checked for completeness (:func:`os.write` may write fewer bytes
  than asked: it is called again for the rest), then the file is fsynced;
* it is renamed over the target (:func:`os.replace`, atomic on POSIX and Windows
  within one file system; a symlink *at the target* is replaced, not followed) and
  the folder is fsynced, so the rename itself is durable.

On any error the temporary file is removed and the target is untouched; temporary
files a killed process left for the same target are removed by the next write.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "PRIVATE",
    "PUBLIC",
    "atomic_file",
    "check_owner_only",
    "check_path",
    "read_private_json",
    "write_all",
    "write_atomic",
]

#: owner read/write only: checkpoints, states, marks (as sensitive as the raw data)
PRIVATE = 0o600
#: an ordinary new file (0666 minus the umask): released output
PUBLIC = -1


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


def check_owner_only(path: Path, what: str) -> None:
    """Refuse ``path`` unless it exists, is this user's and only its owner can read it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} not found") from None
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise PermissionError(
            f"{what} {path} has permissions {mode:04o}: it must be readable by its "
            f"owner only (chmod 600 {path}); it is as sensitive as the raw data"
        )
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PermissionError(f"{what} {path} belongs to another user (uid {st.st_uid})")


def read_private_json(path: Path, what: str, limit: int) -> dict[str, Any]:
    """The JSON object in ``path``, a file only its owner can read
    (:func:`check_owner_only`, naming ``what``) of at most ``limit`` bytes; anything
    else (larger, not JSON, nested too deep, not an object) is refused with
    ValueError "``path`` is not a dpcount ``what``"."""
    check_owner_only(path, what)
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    try:
        if len(data) > limit:
            raise ValueError
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ValueError(f"{path} is not a dpcount {what}") from None
    return body


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: tempfile.mkstemp's random part: 8 characters of this alphabet
_RANDOM_CHARS = 8
_RANDOM_ALPHABET = set("abcdefghijklmnopqrstuvwxyz0123456789_")


def _remove_leftovers(folder: str, name: str) -> None:
    """Remove temporary files a crash left for ``name`` (they may hold exact counts):
    this user's regular files ``.<name>.XXXXXXXX.tmp`` (and 0.3's ``<name>.tmp``),
    never through a symlink."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    with os.scandir(folder) as entries:
        for entry in entries:
            middle = entry.name[len(name) + 2 : -4]
            mine = entry.name == f"{name}.tmp" or (
                entry.name.startswith(f".{name}.")
                and entry.name.endswith(".tmp")
                and len(middle) == _RANDOM_CHARS
                and set(middle) <= _RANDOM_ALPHABET  # no dot: not another target's temp
            )
            if not mine or not entry.is_file(follow_symlinks=False):
                continue
            if uid is None or entry.stat(follow_symlinks=False).st_uid == uid:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``: :func:`os.write` may write less than asked."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - a regular file never returns 0 for n > 0
            raise OSError(f"short write: {written} of {len(view)} bytes")
        view = view[written:]


@contextlib.contextmanager
def atomic_file(
    path: str | os.PathLike[str], *, mode: int = PRIVATE, replace: bool = True
) -> Iterator[IO[bytes]]:
    """A binary file that replaces ``path`` when the ``with`` block ends without error.

    ``mode``: the permissions of the new file (:data:`PRIVATE` 0600 by default;
    :data:`PUBLIC` for 0666 minus the umask). The temporary file has an unpredictable
    name in the target's folder, created ``O_EXCL`` (never through a symlink); it is
    fsynced, renamed over ``path`` and the folder fsynced. On error it is removed and
    ``path`` is left as it was. ``replace=False``: create ``path`` only if nothing
    (not even a dangling symlink) is there — :func:`os.link`, which fails with
    FileExistsError otherwise — so a new file appears complete or not at all.
    """
    target = os.path.abspath(check_path(path))
    folder, name = os.path.split(target)
    perms = (0o666 & ~_umask()) if mode == PUBLIC else mode
    if not 0 <= perms <= 0o777:
        raise ValueError(f"mode must be a permission mask (0..0o777) or PUBLIC, got {mode!r}")
    _remove_leftovers(folder, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, perms)
        with os.fdopen(fd, "wb", closefd=True) as fh:
            fd = -1
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target, follow_symlinks=False)
            os.unlink(tmp)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def write_atomic(
    path: str | os.PathLike[str],
    pieces: Iterable[bytes],
    *,
    mode: int = PRIVATE,
    replace: bool = True,
) -> None:
    """Write ``pieces`` to ``path`` atomically with :func:`atomic_file` (each piece
    written completely, short writes resumed)."""
    with atomic_file(path, mode=mode, replace=replace) as fh:
        fh.flush()
        for piece in pieces:
            write_all(fh.fileno(), bytes(piece))
