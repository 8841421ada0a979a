"""The run secret: the one value from which every noise sample of a keyed run is derived.

**The secret file is as sensitive as the raw data.** Anyone holding it can
regenerate every noise value and subtract it from the released counts, recovering
the exact counts. Keep it where the raw events are kept, never next to the
released output, and delete it when the run will never be extended again.

The file is JSON with the format tag, a random run id, the secret (256 bits from
:mod:`secrets`, i.e. operating-system entropy), the run's public configuration and
its SHA-256 fingerprint. It is created with ``O_CREAT | O_EXCL`` and mode 0600 and
refused when

* its permissions let anyone but the owner read or write it (group/other bits), or
  it belongs to another user;
* it was made for another run: its configuration (mechanism, budget, horizon, key
  universe, bucketing, bounding, PRF layout) differs from the one asked for.
  Reusing a secret with another configuration would correlate the noise of two
  releases, which the privacy analysis of either does not cover.

Derived keys. The raw secret bytes never leave this module: a run asks its
:class:`RunSecret` for a labelled PRF key (:meth:`RunSecret.prf`, a :class:`Label`)
or a labelled MAC key (:meth:`RunSecret.mac`, a :class:`MacLabel`), opaque objects
that compute the words or the MACs. The PRF key of the noise
(``secret.prf(Label.NOISE)``) is HMAC-SHA256 of the secret over the run id and the
configuration fingerprint (key universe, in order, included): any other
configuration — another key order, ε, start, horizon, bound — gets independent
noise even from the same secret bytes. The key selection's and the sparse vector's
keys are HMACs of that key under their labels; each MAC key is an HMAC of the
secret under its label (and the run id where :class:`MacLabel` says so). HMAC is a
PRF (Bellare, "New proofs for NMAC and HMAC", CRYPTO 2006): keys of distinct labels
are independent to anyone without the secret.

**One secret, one event log per released step.** The same secret always gives the
same noise at the same position — that is what makes retries and resumes safe. It
also means that releasing the counts of a step twice from *different* data (say,
after correcting an event) would reveal the exact difference of the two logs,
because the noise cancels. So a secret file has a released-up-to mark beside it
(:mod:`dpcount.keyed.mark`) that refuses any such second release, and raw secret
bytes — which have no place for the mark — are refused by
:func:`dpcount.keyed.run.keyed_counts` except through
:func:`unsafe_testing_secret`, for tests and examples only. Publish a correction as
a new run with a new secret and its own budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from dpcount.durable.atomic import check_owner_only, write_atomic
from dpcount.keyed.prf import PRFKey

__all__ = [
    "SECRET_FORMAT",
    "Label",
    "MacKey",
    "MacLabel",
    "RunRecord",
    "RunSecret",
    "UnsafeTestingSecret",
    "check_owner_only",
    "config_fingerprint",
    "unsafe_testing_secret",
]

SECRET_FORMAT = "dpcount-keyed-secret/1"


class Label(Enum):
    """The PRF keys of a run (:meth:`RunSecret.prf`), each its own stream. The value is
    the HMAC label: NOISE's binds the run id and configuration fingerprint; the others
    are HMACs of the noise key under their label."""

    #: the counting noise (:mod:`dpcount.keyed.engine`)
    NOISE = b"dpcount-keyed-prf-key/2"
    #: the tree selection counter of an open key set (:mod:`dpcount.keyed.selection`)
    SELECTION = b"dpcount/keyed/key-selection"
    #: the sparse vector's ρ and ν (:mod:`dpcount.keyed.sparse_vector`)
    SPARSE_VECTOR = b"dpcount/keyed/sparse-vector"


class MacLabel(Enum):
    """The MAC keys of a run (:meth:`RunSecret.mac`): (HMAC label, whether the run id
    is bound into the key)."""

    #: the stored state (:mod:`dpcount.keyed.state`)
    STATE = (b"dpcount-keyed-state-mac", False)
    #: the released-up-to mark (:mod:`dpcount.keyed.mark`)
    MARK = (b"dpcount-keyed-mark-mac", True)
    #: an incremental run's consumed-files record (:mod:`dpcount.keyed.incremental`)
    INPUTS = (b"dpcount-keyed-inputs-mac", True)
    #: the digest of a release's input (:func:`dpcount.keyed.mark.input_digest`)
    INPUT_DIGEST = (b"dpcount-keyed-input-digest", True)
    #: the SipHash key of the unit-bounding rank (:mod:`dpcount.keyed.events`)
    UNIT_RANK = (b"unit-rank", False)


class MacKey:
    """One derived HMAC-SHA256 key (:meth:`RunSecret.mac`); the bytes stay inside."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def __repr__(self) -> str:  # never print the key
        return "MacKey(…)"

    def new(self) -> hmac.HMAC:
        """An HMAC-SHA256 under this key, to be fed with ``update``."""
        return hmac.new(self._key, digestmod=hashlib.sha256)

    def hexdigest(self, data: bytes) -> str:
        """HMAC-SHA256 of ``data`` (hex)."""
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()

    def verify(self, mac: object, data: bytes) -> bool:
        """Whether ``mac`` is the MAC of ``data`` (constant-time comparison)."""
        return isinstance(mac, str) and hmac.compare_digest(mac, self.hexdigest(data))

    def hash_key(self) -> str:
        """The first 16 hex characters of the key: a SipHash key (the unit rank)."""
        return self._key.hex()[:16]


def config_fingerprint(config: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``config`` (hex)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class UnsafeTestingSecret:
    """Fixed secret bytes for tests and examples: see :func:`unsafe_testing_secret`."""

    secret: bytes
    run_id: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return "UnsafeTestingSecret(…)"


def unsafe_testing_secret(secret: bytes, run_id: str | None = None) -> UnsafeTestingSecret:
    """Fixed secret bytes for a keyed run — **for tests and examples only**.

    The run id is a function of the bytes, and there is no file beside which a
    released-up-to mark could be kept: nothing stops a second release of the same
    steps from other data with the same bytes, and the difference of the two
    releases is then the exact difference of the data. Noise is still bound to the
    configuration (:meth:`RunSecret.prf`). Refused with ``state=``. Production
    runs pass a secret *file* (created from operating-system entropy if absent).
    ``run_id``: another run id than the bytes' hash (a test that recomputes a secret
    file's noise passes the file's bytes and run id).
    """
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise ValueError("secret must be bytes of length >= 16")
    if run_id is not None and not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str, got {run_id!r}")
    return UnsafeTestingSecret(secret, run_id)


@dataclass(frozen=True)
class RunRecord:
    """A file stored for one run (its state, its released-up-to mark) carries the run's
    id and configuration fingerprint, so that a file of another run is refused."""

    run_id: str
    fingerprint: str

    def header(self, file_format: str) -> dict[str, Any]:
        """The first fields of the file's header: its format and the run it is of."""
        return {"format": file_format, "run_id": self.run_id, "fingerprint": self.fingerprint}


@dataclass(frozen=True)
class RunSecret:
    """A run's secret bytes, run id, the configuration it was made for and (when loaded
    from or created as a file) the file's path, beside which the mark and lock live."""

    _secret: bytes = field(repr=False)
    run_id: str
    config: dict[str, Any]
    path: Path | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"RunSecret(run_id={self.run_id!r}, fingerprint={self.fingerprint[:12]}…)"

    @property
    def fingerprint(self) -> str:
        return config_fingerprint(self.config)

    def prf(self, label: Label) -> PRFKey:
        """The PRF key ``label``. :attr:`Label.NOISE`, the key of every noise sample:
        HMAC-SHA256(secret, scheme ‖ run id ‖ fingerprint of the whole configuration),
        so any other configuration (key universe or its order, budget, start, horizon,
        bounds, mechanism) or run gets independent noise from the same secret bytes
        (HMAC is a PRF, Bellare 2006); the others: HMAC-SHA256(noise key, label)."""
        if not isinstance(label, Label):
            raise TypeError(f"label must be a Label, got {label!r}")
        message = b"\0".join((Label.NOISE.value, self.run_id.encode(), self.fingerprint.encode()))
        key = hmac.new(self._secret, message, hashlib.sha256).digest()
        if label is not Label.NOISE:
            key = hmac.new(key, label.value, hashlib.sha256).digest()
        return PRFKey(key)

    def mac(self, label: MacLabel) -> MacKey:
        """The MAC key ``label``: HMAC-SHA256(secret, label), or (run-bound labels)
        HMAC-SHA256(secret, label ‖ 0 ‖ run id)."""
        if not isinstance(label, MacLabel):
            raise TypeError(f"label must be a MacLabel, got {label!r}")
        text, bound = label.value
        message = text + b"\0" + self.run_id.encode() if bound else text
        return MacKey(hmac.new(self._secret, message, hashlib.sha256).digest())

    @classmethod
    def for_testing(cls, secret: UnsafeTestingSecret, config: dict[str, Any]) -> RunSecret:
        """The in-memory secret of a testing secret (:func:`unsafe_testing_secret`)
        for ``config``: its run id is the given one, or a function of the bytes."""
        made = cls.in_memory(secret.secret, config)
        if secret.run_id is not None:
            made = dataclasses.replace(made, run_id=secret.run_id)
        return made

    @classmethod
    def in_memory(cls, secret: bytes, config: dict[str, Any]) -> RunSecret:
        """A secret not stored in a file (see :func:`unsafe_testing_secret`): its run id
        is a function of the bytes and it has no released-up-to mark."""
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("secret must be bytes of length >= 16")
        return cls(secret, hashlib.sha256(secret).hexdigest()[:16], dict(config))

    @classmethod
    def generate(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """A fresh secret for ``path``, not written yet
        (:func:`dpcount.keyed.mark.write_secret`): a run writes it only once everything
        is validated and it is about to release, so a refused run leaves no secret file
        bound to its configuration."""
        real = Path(os.path.realpath(path))
        return cls(secrets.token_bytes(32), secrets.token_hex(8), dict(config), real)

    def write_file(self) -> RunSecret:
        """Write this secret to its (absent) :attr:`path`, mode 0600; returns it. Its
        mark must exist first: :func:`dpcount.keyed.mark.write_secret` writes both."""
        if self.path is None:
            raise ValueError("an in-memory secret has no file to write")
        body = {
            "format": SECRET_FORMAT,
            "run_id": self.run_id,
            "secret": self._secret.hex(),
            "config": self.config,
            "fingerprint": self.fingerprint,
        }
        data = (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()
        try:  # complete or absent, mode 0600 whatever the umask, never over a file
            write_atomic(self.path, [data], replace=False)
        except FileExistsError:
            raise FileExistsError(f"secret file {self.path} already exists") from None
        return self

    @classmethod
    def load(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """Read ``path``, checking its permissions and that it belongs to this run."""
        p = Path(path)
        check_owner_only(p, "secret file")
        try:
            body = json.loads(p.read_text(encoding="utf-8"))
            if body.get("format") != SECRET_FORMAT:
                raise ValueError
            value = cls(
                bytes.fromhex(body["secret"]),
                str(body["run_id"]),
                dict(body["config"]),
                Path(os.path.realpath(p)),  # one lock and mark whatever path names it
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"secret file {p} is not a dpcount keyed secret file") from None
        if len(value._secret) < 16 or body.get("fingerprint") != value.fingerprint:
            raise ValueError(f"secret file {p} is damaged (fingerprint does not match)")
        if value.config != config:
            diff = sorted(
                k for k in set(config) | set(value.config) if config.get(k) != value.config.get(k)
            )
            raise ValueError(
                f"secret file {p} belongs to another run (run id {value.run_id}; "
                f"configuration differs in: {', '.join(diff)}); use a new secret file"
            )
        return value

    @classmethod
    def open_or_generate(
        cls, path: str | os.PathLike[str], config: dict[str, Any]
    ) -> tuple[RunSecret, bool]:
        """Load ``path`` if it exists, else :meth:`generate` a secret for it (written
        when the run begins its release); returns (secret, new)."""
        if Path(path).exists():
            return cls.load(path, config), False
        return cls.generate(path, config), True
