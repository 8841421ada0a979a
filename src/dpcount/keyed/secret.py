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

**One secret, one event log per released step.** The same secret always gives the
same noise at the same position — that is what makes retries and resumes safe. It
also means that releasing the counts of a step twice from *different* data (say,
after correcting an event) reveals the exact difference of the two logs, because
the noise cancels. Once a step is released, never rerun it on changed data with the
same secret; publish a correction as a new run with a new secret and its own budget.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SECRET_FORMAT", "RunSecret", "check_owner_only", "config_fingerprint"]

SECRET_FORMAT = "dpcount-keyed-secret/1"


def config_fingerprint(config: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``config`` (hex)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


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


@dataclass(frozen=True)
class RunSecret:
    """A run's secret bytes, run id and the configuration it was made for."""

    secret: bytes
    run_id: str
    config: dict[str, Any]

    def __repr__(self) -> str:  # never print the secret
        return f"RunSecret(run_id={self.run_id!r}, fingerprint={self.fingerprint[:12]}…)"

    @property
    def fingerprint(self) -> str:
        return config_fingerprint(self.config)

    @classmethod
    def in_memory(cls, secret: bytes, config: dict[str, Any]) -> RunSecret:
        """A secret not stored in a file (tests, or a caller that manages its own storage)."""
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("secret must be bytes of length >= 16")
        return cls(secret, hashlib.sha256(secret).hexdigest()[:16], dict(config))

    @classmethod
    def create(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """Create ``path`` (must not exist) with a fresh secret, mode 0600."""
        p = Path(path)
        value = cls(secrets.token_bytes(32), secrets.token_hex(8), dict(config))
        body = {
            "format": SECRET_FORMAT,
            "run_id": value.run_id,
            "secret": value.secret.hex(),
            "config": value.config,
            "fingerprint": value.fingerprint,
        }
        data = (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise FileExistsError(f"secret file {p} already exists") from None
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return value

    @classmethod
    def load(cls, path: str | os.PathLike[str], config: dict[str, Any]) -> RunSecret:
        """Read ``path``, checking its permissions and that it belongs to this run."""
        p = Path(path)
        check_owner_only(p, "secret file")
        try:
            body = json.loads(p.read_text(encoding="utf-8"))
            if body.get("format") != SECRET_FORMAT:
                raise ValueError
            value = cls(bytes.fromhex(body["secret"]), str(body["run_id"]), dict(body["config"]))
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
