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

The noise key. The PRF key of the noise (:attr:`RunSecret.prf_key`) is
HMAC-SHA256 of the secret over the run id and the configuration fingerprint (key
universe, in order, included): any other configuration — another key order, ε,
start, horizon, bound — gets independent noise even from the same secret bytes.

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

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcount.durable.atomic import check_owner_only, write_atomic
from dpcount.keyed.mark import ReleaseMark, mark_path

__all__ = [
    "SECRET_FORMAT",
    "RunSecret",
    "UnsafeTestingSecret",
    "check_owner_only",
    "config_fingerprint",
    "unsafe_testing_secret",
]

SECRET_FORMAT = "dpcount-keyed-secret/1"


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
    configuration (:attr:`RunSecret.prf_key`). Refused with ``state=``. Production
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
class RunSecret:
    """A run's secret bytes, run id, the configuration it was made for and (when loaded
    from or created as a file) the file's path, beside which the mark and lock live."""

    secret: bytes
    run_id: str
    config: dict[str, Any]
    path: Path | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"RunSecret(run_id={self.run_id!r}, fingerprint={self.fingerprint[:12]}…)"

    @property
    def fingerprint(self) -> str:
        return config_fingerprint(self.config)

    @property
    def prf_key(self) -> bytes:
        """The key of every noise sample: HMAC-SHA256(secret, scheme ‖ run id ‖
        fingerprint of the whole configuration). Any other configuration (key universe
        or its order, budget, start, horizon, bounds, mechanism) or run gets
        independent noise from the same secret bytes (HMAC is a PRF, Bellare 2006)."""
        message = b"\0".join(
            (b"dpcount-keyed-prf-key/2", self.run_id.encode(), self.fingerprint.encode())
        )
        return hmac.new(self.secret, message, hashlib.sha256).digest()

    def derived_key(self, label: bytes) -> bytes:
        """A key for another use (``label``: MACs, the unit hash), bound to the run id."""
        return hmac.new(self.secret, label + b"\0" + self.run_id.encode(), hashlib.sha256).digest()

    @classmethod
    def in_memory(cls, secret: bytes, config: dict[str, Any]) -> RunSecret:
        """A secret not stored in a file (see :func:`unsafe_testing_secret`): its run id
        is a function of the bytes and it has no released-up-to mark."""
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("secret must be bytes of length >= 16")
        return cls(secret, hashlib.sha256(secret).hexdigest()[:16], dict(config))

    @classmethod
    def create(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """Create ``path`` (must not exist) with a fresh secret, mode 0600."""
        return cls.generate(path, config).write()

    @classmethod
    def generate(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """A fresh secret for ``path``, not written yet (:meth:`write`): a run writes
        it only once everything is validated and it is about to release, so a refused
        run leaves no secret file bound to its configuration."""
        real = Path(os.path.realpath(path))
        return cls(secrets.token_bytes(32), secrets.token_hex(8), dict(config), real)

    def write(self) -> RunSecret:
        """Write this secret to its (absent) :attr:`path`, mode 0600, and its mark
        (nothing released yet); returns it."""
        if self.path is None:
            raise ValueError("an in-memory secret has no file to write")
        body = {
            "format": SECRET_FORMAT,
            "run_id": self.run_id,
            "secret": self.secret.hex(),
            "config": self.config,
            "fingerprint": self.fingerprint,
        }
        data = (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()
        if self.path.exists():
            raise FileExistsError(f"secret file {self.path} already exists")
        # the mark first (nothing released yet): a kill between the two leaves a mark
        # without a secret, which the next run replaces, never a secret without a mark
        # (refused as "mark missing")
        ReleaseMark.new(self).save(mark_path(self.path), self)
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
        if len(value.secret) < 16 or body.get("fingerprint") != value.fingerprint:
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
    def open_or_create(
        cls, path: str | os.PathLike[str], config: dict[str, Any]
    ) -> tuple[RunSecret, bool]:
        """Load ``path`` if it exists, else create it; returns (secret, created)."""
        if Path(path).exists():
            return cls.load(path, config), False
        return cls.create(path, config), True

    @classmethod
    def open_or_generate(
        cls, path: str | os.PathLike[str], config: dict[str, Any]
    ) -> tuple[RunSecret, bool]:
        """Load ``path`` if it exists, else :meth:`generate` a secret for it (written by
        :meth:`write` when the run begins its release); returns (secret, new)."""
        if Path(path).exists():
            return cls.load(path, config), False
        return cls.generate(path, config), True
