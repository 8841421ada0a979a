"""The state of a keyed run between releases: resume across time without old events.

The dashboard use: release steps 1..100 today, step 101 tomorrow from tomorrow's
events only, with exactly the bits one run over steps 1..101 would have released.
The release of step s is the exact running count C(s) plus the noise of the tree
nodes of s's decomposition (:func:`dpcount.keyed.engine.window_running_counts`),
and the noise is a pure function of (secret, level, node, key). So the only thing a
later run needs from the past is, per key, C(s₀) at the last released step s₀ — no
node sums and no noise are stored.

**The state file is as sensitive as the raw data**: it holds the *exact* running
count of every key. It is written with owner-only permissions (0600), atomically
(:mod:`dpcount.durable.atomic`), and refused on load when

* its permissions let anyone but the owner read or write it;
* it is not a state file, or it was changed: the header and the sums carry an
  HMAC-SHA256 under a key derived from the run secret, so only the holder of the
  secret can produce a state the run accepts;
* it belongs to another run (run id or configuration fingerprint differs);
* it is older than the released-up-to mark kept beside the secret
  (:mod:`dpcount.keyed.mark`): a restored backup or a copy of an earlier state would
  release the same steps again, with the same noise, from other data.

Format: one line of JSON (format tag, run id, configuration fingerprint, last
released step, dtype, number of keys, MAC), then the sums as little-endian int64
or float64.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import MAX_EXACT_SUM
from dpcount.durable.atomic import write_atomic
from dpcount.keyed.secret import RunSecret, check_owner_only

__all__ = ["STATE_FORMAT", "RunState"]

STATE_FORMAT = "dpcount-keyed-state/1"


def _mac(secret: RunSecret, header: dict[str, Any], payload: bytes) -> str:
    key = hmac.new(secret.secret, b"dpcount-keyed-state-mac", hashlib.sha256).digest()
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, text + b"\n" + payload, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class RunState:
    """Exact running counts ``sums`` (one per key) after step ``step`` of run ``run_id``,
    and the mechanism's noise state (BLT: ``buffers``, (buffers + 1) × keys; None for
    the tree, whose noise needs no state)."""

    run_id: str
    fingerprint: str
    step: int
    sums: NDArray[Any]
    buffers: NDArray[np.float64] | None = None

    @classmethod
    def empty(cls, secret: RunSecret, n_keys: int, integer: bool) -> RunState:
        """The state before step 1: nothing released, all sums zero."""
        dtype = np.int64 if integer else np.float64
        return cls(secret.run_id, secret.fingerprint, 0, np.zeros(n_keys, dtype=dtype))

    def save(self, path: str | os.PathLike[str], secret: RunSecret) -> Path:
        """Write atomically with mode 0600 (the sums are exact counts)."""
        p = Path(path)
        sums = np.ascontiguousarray(self.sums, dtype=self.sums.dtype.newbyteorder("<"))
        payload = sums.tobytes()
        if self.buffers is not None:
            payload += np.ascontiguousarray(self.buffers, dtype="<f8").tobytes()
        header = self._header()
        header["mac"] = _mac(secret, self._header(), payload)
        write_atomic(p, [json.dumps(header, sort_keys=True).encode() + b"\n", payload])
        return p

    def _header(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "run_id": self.run_id,
            "fingerprint": self.fingerprint,
            "step": self.step,
            "dtype": "int64" if self.sums.dtype.kind == "i" else "float64",
            "n_keys": len(self.sums),
            "buffers": 0 if self.buffers is None else int(self.buffers.shape[0]),
        }

    @staticmethod
    def _read(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any], bytes]:
        p = Path(path)
        check_owner_only(p, "state file")
        data = p.read_bytes()
        line, _, payload = data.partition(b"\n")
        try:
            header = json.loads(line)
            if not isinstance(header, dict) or header.get("format") != STATE_FORMAT:
                raise ValueError
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise ValueError(f"state file {p} is not a dpcount keyed state file") from None
        return p, header, payload

    @classmethod
    def peek_step(cls, path: str | os.PathLike[str]) -> int:
        """The last released step recorded in ``path`` (not yet authenticated)."""
        p, header, _ = cls._read(path)
        step = header.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"state file {p} is damaged (step {step!r})")
        return step

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], secret: RunSecret, n_keys: int, buffers: int = 0
    ) -> RunState:
        """Read and authenticate ``path`` for the run of ``secret`` with ``n_keys`` keys
        (and ``buffers`` noise state values per key)."""
        p, header, payload = cls._read(path)
        mac = header.pop("mac", None)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(secret, header, payload)):
            raise ValueError(
                f"state file {p} fails its authentication check: it was changed, or it "
                f"belongs to another run (its run id is {header.get('run_id')!r}, this "
                f"run's is {secret.run_id!r})"
            )
        if header.get("run_id") != secret.run_id or header.get("fingerprint") != (
            secret.fingerprint
        ):
            raise ValueError(f"state file {p} belongs to another run (run id or configuration)")
        dtype = np.dtype("<i8" if header.get("dtype") == "int64" else "<f8")
        if (
            header.get("n_keys") != n_keys
            or header.get("buffers") != buffers
            or len(payload) != 8 * n_keys * (1 + buffers)
        ):
            raise ValueError(
                f"state file {p} holds {header.get('n_keys')} keys and "
                f"{header.get('buffers')} buffers, not {n_keys} and {buffers}"
            )
        sums = np.frombuffer(payload[: 8 * n_keys], dtype=dtype).astype(dtype.newbyteorder("="))
        state = None
        if buffers:
            raw = np.frombuffer(payload[8 * n_keys :], dtype="<f8")
            state = raw.astype(np.float64).reshape(buffers, n_keys)
        step = header.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"state file {p} is damaged (step {step!r})")
        # weights are non-negative and running sums stay below 2^53 (events.check_running)
        if not (np.all(sums >= 0) and np.all(sums < MAX_EXACT_SUM)):
            raise ValueError(f"state file {p} is damaged (a running sum outside [0, 2^53))")
        if state is not None and not np.isfinite(state).all():
            raise ValueError(f"state file {p} is damaged (a non-finite noise state)")
        return cls(str(header["run_id"]), str(header["fingerprint"]), step, sums, state)
