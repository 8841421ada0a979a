"""The released-up-to mark and the run lock: a keyed step is released once.

The noise of a keyed run is a pure function of (secret, configuration, position).
So two releases of the same step from *different* data — a restored backup of the
state file, a copy of it, a run killed after writing its output but before saving
its state, two runs started at once — have the same noise, and their difference is
the exact difference of the data. Two files beside the secret file prevent that:

* ``<secret>.lock``: an exclusive :func:`fcntl.flock` held for the whole run (from
  before the state is read until the mark is final; :class:`dpcount.durable.lock.FileLock`,
  the lock of ``count --checkpoint`` too). A second run of the same secret fails at
  once (:class:`~dpcount.durable.lock.LockHeld`, naming the process that holds it). A
  run refused before its secret file was written removes the lock file while holding
  it; a run that opened the removed file finds, after its ``flock``, that the path is
  no longer that file and opens it again.
* ``<secret>.released``, the **mark** (:class:`ReleaseMark`): the last step released
  with this secret, the last release (its steps and an HMAC digest of its input: the
  contributions of its steps, the state's sums and noise state), and a release *in
  progress*. It is authenticated (HMAC-SHA256 under a key derived from the secret,
  like the state) and replaced atomically; a state file cannot roll it back. For an
  incremental run it also binds the MAC of the consumed-files record each release
  leaves (:attr:`Release.inputs`; the record is the guard's
  :class:`ReleaseCompanion`), so that record cannot be deleted, rolled back or forged
  either (:mod:`dpcount.keyed.incremental`).

The protocol (:class:`ReleaseGuard`): before any output, the run records "steps
a..b in progress with input digest D"; it writes the output, saves the state, then
records "released up to b". A later run is refused (:class:`ReleaseRefused`) when

* it would release a step ≤ the mark again (its state is older than the mark: a
  restored backup, a copy, or a state whose run was killed after its output), unless
  it is an identical retry — the same steps from the same input, hence the same bits;
* a release is in progress (a run was killed, its output may be out) and this run is
  not its identical retry; or when a state file records a later step than the mark
  (the mark was restored or replaced), or the mark is missing.

The only way past a refusal is a new secret file (a new run with its own budget).
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dpcount.durable.atomic import read_private_json, write_atomic
from dpcount.durable.lock import FileLock
from dpcount.durable.once import ExactlyOnce, Journal
from dpcount.keyed.secret import MacKey, MacLabel, RunRecord, RunSecret


class SecretLike(Protocol):
    """What the mark needs of a :class:`dpcount.keyed.secret.RunSecret`."""

    @property
    def run_id(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    def mac(self, label: MacLabel) -> MacKey: ...


__all__ = [
    "MARK_FORMAT",
    "Begun",
    "Release",
    "ReleaseCompanion",
    "ReleaseGuard",
    "ReleaseMark",
    "ReleaseRefused",
    "body_mac",
    "create_secret",
    "input_digest",
    "lock_path",
    "mark_path",
    "secret_lock",
    "write_secret",
]

MARK_FORMAT = "dpcount-keyed-mark/1"
#: a mark is a few hundred bytes; anything much larger is not one
MAX_MARK_BYTES = 1 << 16


class ReleaseRefused(ValueError):
    """A release that would publish already released steps again from other data."""


def mark_path(secret_path: Path) -> Path:
    """The mark of the secret file ``secret_path``: ``<secret>.released`` beside it."""
    return secret_path.with_name(secret_path.name + ".released")


def write_secret(secret: RunSecret) -> RunSecret:
    """Write the new ``secret``'s file and its mark (nothing released yet): the mark
    first — a kill between the two leaves a mark without a secret, which the next run
    replaces, never a secret without a mark (refused as "mark missing")."""
    if secret.path is None:
        raise ValueError("an in-memory secret has no file to write")
    if secret.path.exists():
        raise FileExistsError(f"secret file {secret.path} already exists")
    ReleaseMark.new(secret).save(mark_path(secret.path), secret)
    return secret.write_file()


def create_secret(path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
    """Create the secret file ``path`` (must not exist) with a fresh secret, mode 0600,
    and its mark."""
    return write_secret(RunSecret.generate(path, config))


def lock_path(secret_path: Path) -> Path:
    """The lock file of the secret file ``secret_path``: ``<secret>.lock`` beside it."""
    return secret_path.with_name(secret_path.name + ".lock")


def input_digest(
    secret: SecretLike,
    first: int,
    until: int,
    contributions: Any,
    base: NDArray[Any] | None,
    buffers: NDArray[Any] | None,
    extra: bytes = b"",
) -> str:
    """HMAC-SHA256 (key derived from the secret, so it reveals nothing of the data) of
    everything the release of steps first..until depends on besides the secret and
    configuration: the contributions of those steps (sorted by key and step), the
    exact sums at step first − 1 and the noise state there, and ``extra`` (a digest of
    the stored open key set and unit ledger, :func:`dpcount.keyed.state.extras_digest`).
    Equal digests: equal bits."""
    h = secret.mac(MacLabel.INPUT_DIGEST).new()
    h.update(f"{first}:{until}\n".encode())
    if extra:
        h.update(b"extra:" + extra + b"\n")
    for name in ("key", "step", "value"):
        arr = np.asarray(getattr(contributions, name))
        h.update(f"{name}:{arr.dtype.str}:{arr.size}\n".encode())
        h.update(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())
    for name, stored in (("base", base), ("buffers", buffers)):
        if stored is None:
            h.update(f"{name}:none\n".encode())
        else:
            arr = np.asarray(stored)
            h.update(f"{name}:{arr.dtype.str}:{arr.shape}\n".encode())
            h.update(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Release:
    """Steps ``first``..``until`` released from the input of digest ``digest``;
    ``inputs``: the digest of the consumed-files record this release leaves (an
    incremental run's, :mod:`dpcount.keyed.incremental`; None: not an incremental run)."""

    first: int
    until: int
    digest: str
    inputs: str | None = None

    def describe(self) -> str:
        return f"steps {self.first}..{self.until}"

    @classmethod
    def parse(cls, value: object, where: str) -> Release | None:
        if value is None:
            return None
        # "inputs" is absent from the marks of dpcount 0.4.0 (no incremental binding)
        fields = {"first", "until", "digest"}
        if not isinstance(value, dict) or set(value) - {"inputs"} != fields:
            raise ValueError(f"{where} is damaged (a release record)")
        first, until, digest = value["first"], value["until"], value["digest"]
        inputs = value.get("inputs")
        if (
            not (_step(first) and _step(until) and 1 <= first <= until)
            or not _hex64(digest)
            or not (inputs is None or _hex64(inputs))
        ):
            raise ValueError(f"{where} is damaged (release {value!r})")
        return cls(first, until, digest, inputs)


def _hex64(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64


def _step(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


def body_mac(secret: SecretLike, label: MacLabel, body: dict[str, Any]) -> str:
    """HMAC-SHA256 of the canonical JSON of ``body`` under the secret's key for
    ``label`` (:meth:`~dpcount.keyed.secret.RunSecret.mac`): the MAC of a mark,
    and of an incremental run's inputs record."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return secret.mac(label).hexdigest(text)


def _mac(secret: SecretLike, body: dict[str, Any]) -> str:
    return body_mac(secret, MacLabel.MARK, body)


@dataclass(frozen=True)
class Begun:
    """A keyed release under the exactly-once protocol (:class:`ExactlyOnce`): the run's
    secret (it keys the journals' MACs) and the mark with the release pending."""

    secret: SecretLike
    mark: ReleaseMark

    @property
    def release(self) -> Release:
        assert self.mark.pending is not None
        return self.mark.pending


@runtime_checkable
class ReleaseCompanion(Protocol):
    """A record kept with a release — an incremental run's consumed files
    (:mod:`dpcount.keyed.incremental`) — under the mark's protocol: its digest after
    the release is bound into the mark (:attr:`Release.inputs`); it is the first
    journal of the release (:class:`~dpcount.durable.once.Journal`): it records the
    release pending just before the mark does, and done just after."""

    def digest(self, secret: SecretLike) -> str:
        """The MAC of the record as the release will leave it."""
        ...

    def begin(self, release: Begun) -> None:
        """Record the release as pending (after the mark's checks, before the mark
        records it in progress)."""
        ...

    def commit(self, release: Begun) -> None:
        """Record the release as done (after the mark)."""
        ...


class _MarkJournal:
    """The released-up-to mark as a journal of the release: begin — the release in
    progress; commit — released up to its last step."""

    def begin(self, begun: Begun) -> None:
        assert begun.secret.path is not None
        begun.mark.save(mark_path(begun.secret.path), begun.secret)

    def commit(self, begun: Begun) -> None:
        now, mark = begun.release, begun.mark
        done = dataclasses.replace(
            mark, released=max(mark.released, now.until), last=now, pending=None
        )
        assert begun.secret.path is not None
        done.save(mark_path(begun.secret.path), begun.secret)


@dataclass(frozen=True)
class ReleaseMark(RunRecord):
    """Steps 1..``released`` of run ``run_id`` are out; ``last`` is the last completed
    release, ``pending`` one begun whose output may exist."""

    released: int = 0
    last: Release | None = None
    pending: Release | None = None

    @classmethod
    def new(cls, secret: SecretLike) -> ReleaseMark:
        return cls(secret.run_id, secret.fingerprint)

    def bound_inputs(self) -> set[str]:
        """The digests of the inputs record this mark accepts: the one its last release
        left and the one the release in progress will leave (incremental runs)."""
        return {r.inputs for r in (self.last, self.pending) if r is not None and r.inputs}

    def body(self) -> dict[str, Any]:
        return {
            **self.header(MARK_FORMAT),
            "released": self.released,
            "last": None if self.last is None else dataclasses.asdict(self.last),
            "pending": None if self.pending is None else dataclasses.asdict(self.pending),
        }

    def save(self, path: Path, secret: SecretLike) -> None:
        """Replace ``path`` atomically (mode 0600) with this mark and its MAC."""
        body = self.body()
        body["mac"] = _mac(secret, self.body())
        write_atomic(path, [(json.dumps(body, sort_keys=True) + "\n").encode()])

    @classmethod
    def load(cls, path: Path, secret: SecretLike) -> ReleaseMark:
        """Read and authenticate the mark ``path`` of the run of ``secret``."""
        body = read_private_json(path, "released-up-to mark", MAX_MARK_BYTES)
        if body.get("format") != MARK_FORMAT:
            raise ValueError(f"{path} is not a dpcount released-up-to mark")
        mac = body.pop("mac", None)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(secret, body)):
            raise ValueError(
                f"released-up-to mark {path} fails its authentication check: it was changed, "
                f"or it belongs to another secret"
            )
        if body.get("run_id") != secret.run_id or body.get("fingerprint") != secret.fingerprint:
            raise ValueError(f"released-up-to mark {path} belongs to another run")
        released: Any = body.get("released")
        if not _step(released) or set(body) != {
            "format",
            "run_id",
            "fingerprint",
            "released",
            "last",
            "pending",
        }:
            raise ValueError(f"released-up-to mark {path} is damaged")
        last = Release.parse(body["last"], f"released-up-to mark {path}")
        pending = Release.parse(body["pending"], f"released-up-to mark {path}")
        return cls(secret.run_id, secret.fingerprint, released, last, pending)


def secret_lock(secret_path: Path) -> FileLock:
    """The lock of the secret file ``secret_path`` (:func:`lock_path`), refusing a
    second run of the secret at once."""
    path = lock_path(secret_path)
    return FileLock(
        path,
        lambda holder: (
            f"another dpcount keyed run (process {holder}) holds the lock {path} "
            "of this secret: two runs at once could release the same steps twice "
            "(with the same noise); wait for it to finish, then rerun"
        ),
    )


class ReleaseGuard:
    """The lock and mark of one run of a secret file (``secret_path``; None: a testing
    secret, which has neither): ``with`` holds the lock; :meth:`begin` checks the
    window against the mark and records it in progress; :meth:`finish` records it done."""

    def __init__(self, secret_path: Path | None, companion: ReleaseCompanion | None = None) -> None:
        self.secret_path = secret_path
        self.companion = companion
        self._lock = None if secret_path is None else secret_lock(secret_path)
        journals: list[Journal[Begun]] = [] if companion is None else [companion]
        self._once: ExactlyOnce[Begun] = ExactlyOnce([*journals, _MarkJournal()])

    def __enter__(self) -> ReleaseGuard:
        if self._lock is not None:
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is None:
            return
        if self.secret_path is not None and not self.secret_path.exists():
            self._lock.discard()  # a refused new run: no secret, no mark, no lock file
        else:
            self._lock.release()

    def begin(
        self,
        secret: SecretLike,
        created: bool,
        first: int,
        until: int,
        digest: str,
        *,
        state: str | os.PathLike[str] | None,
    ) -> None:
        """Check that releasing steps ``first``..``until`` from the input of ``digest``
        publishes nothing new about released steps, and record it in progress.

        Raises:
            ReleaseRefused: see the module docstring (the message says what happened).
        """
        if secret.path is None:  # a testing secret: no mark (refused with a state)
            return
        if self.secret_path is None or secret.path.resolve() != self.secret_path.resolve():
            raise ValueError("the release guard belongs to another secret file")
        path = mark_path(secret.path)
        if created:
            mark = ReleaseMark.new(secret)
        elif not path.exists():
            raise ReleaseRefused(
                f"the released-up-to mark {path} of secret file {secret.path} is missing: "
                "which steps were released with this secret cannot be told, and releasing "
                "one again from other data would expose the exact difference of the data; "
                "start a new run with a new secret file"
            )
        else:
            mark = ReleaseMark.load(path, secret)
        companion = self.companion
        now = Release(first, until, digest, None if companion is None else companion.digest(secret))
        done = first - 1  # the step the state records (0: no state, or a new one)
        pending = mark.pending
        if pending is not None and state is not None and done == pending.until > mark.released:
            # the state of the pending release was saved, the mark was not yet updated
            mark = dataclasses.replace(mark, released=done, last=pending, pending=None)
            pending = None
        if pending is not None and pending != now:
            raise ReleaseRefused(
                f"a release of {pending.describe()} with secret file {secret.path} (run id "
                f"{secret.run_id}) was interrupted after it began: its output may have been "
                "written. Only the same release from the same input may be retried (it "
                "gives the same bits); releasing these steps from other data would expose "
                "the exact difference of the data. Rerun it with the same events (and the "
                "same state file), or start a new run with a new secret file"
            )
        retry = now in (mark.last, pending)
        if first <= mark.released and not retry:
            what = (
                f"state file {state} records step {done}, but steps up to {mark.released} "
                f"were already released (mark {path}): the state is a restored backup, a "
                "copy, or the state of a run killed after its output was written"
                if state is not None and os.path.exists(state)
                else f"steps 1..{mark.released} were already released with secret file "
                f"{secret.path} (mark {path})"
            )
            raise ReleaseRefused(
                f"{what}. Releasing steps {first}..{min(until, mark.released)} again from other "
                "data would expose the exact difference of the data (the noise is the same); "
                "refused. Continue from the newest state file, or start a new run with a "
                "new secret file"
            )
        if done > mark.released and not retry:
            raise ReleaseRefused(
                f"state file {state} records step {done}, but the released-up-to mark {path} "
                f"only step {mark.released}: the mark was restored from a backup or replaced, "
                "so earlier re-releases cannot be ruled out; start a new run with a new "
                "secret file"
            )
        # the companion's pending release first: a retry finds it
        self._once.begin(Begun(secret, dataclasses.replace(mark, pending=now)))

    @property
    def pending(self) -> Release | None:
        """The release begun and not yet finished (None: none)."""
        begun = self._once.pending
        return None if begun is None else begun.release

    def finish(self) -> None:
        """Record the release begun by :meth:`begin` as done (after output and state):
        the mark, then the companion."""
        self._once.commit()
