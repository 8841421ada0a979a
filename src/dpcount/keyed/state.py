"""The state of a keyed run between releases: resume across time without old events.

The dashboard use: release steps 1..100 today, step 101 tomorrow from tomorrow's
events only, with exactly the bits one run over steps 1..101 would have released.
A later run needs, per key, the exact running count C(s₀) at the last released
step s₀ and the noise state there (:class:`dpcount.keyed.engine.NoiseLayout`: the
noise process's live values, the PRF row it draws next and the noise already
computed for the rest of its block of steps), so it draws no noise of released
steps; mechanisms that keep no noise state (see :mod:`dpcount.keyed.engine`)
store only the sums and replay their noise.

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

Format (``dpcount-keyed-state/2``): one line of JSON (format tag, run id,
configuration fingerprint, last released step, dtype, number of keys, the noise
layout and its number of rows per key, MAC), then the sums as little-endian int64 or
float64, then the noise state: rows × keys 64-bit values (row-major). Format /1
(dpcount 0.4.0 development versions: sums only, the noise replayed) is refused with
:class:`~dpcount.counting.checkpoint.CheckpointMismatchError`: start a new run.
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
from dpcount.counting.checkpoint import CheckpointMismatchError
from dpcount.durable.atomic import write_atomic
from dpcount.keyed.engine import NoiseLayout
from dpcount.keyed.secret import RunSecret, check_owner_only

__all__ = ["STATE_FORMAT", "RunState"]

STATE_FORMAT = "dpcount-keyed-state/2"
#: formats this dpcount recognizes but cannot continue
_OLD_FORMATS = ("dpcount-keyed-state/1",)


@dataclass(frozen=True)
class RunState:
    """Exact running counts ``sums`` (one per key) after step ``step`` of run ``run_id``,
    and the per-key noise state there: ``buffers`` (layout rows × keys, 64-bit values)
    laid out by ``layout`` (both None: the mechanism keeps no noise state)."""

    run_id: str
    fingerprint: str
    step: int
    sums: NDArray[Any]
    buffers: NDArray[np.uint64] | None = None
    layout: NoiseLayout | None = None

    def __post_init__(self) -> None:
        if (self.buffers is None) != (self.layout is None):
            raise ValueError("buffers and layout go together (both or neither)")
        if self.buffers is not None and self.layout is not None:
            want = (self.layout.rows, len(self.sums))
            if self.buffers.shape != want or self.buffers.dtype != np.uint64:
                raise ValueError(
                    f"buffers must be uint64 of shape {want}, got {self.buffers.dtype} "
                    f"{self.buffers.shape}"
                )

    @classmethod
    def empty(cls, secret: RunSecret, n_keys: int, integer: bool) -> RunState:
        """The state before step 1: nothing released, all sums zero."""
        dtype = np.int64 if integer else np.float64
        return cls(secret.run_id, secret.fingerprint, 0, np.zeros(n_keys, dtype=dtype))

    def save(self, path: str | os.PathLike[str], secret: RunSecret) -> Path:
        """Write atomically with mode 0600 (the sums are exact counts)."""
        p = Path(path)
        sums = np.ascontiguousarray(self.sums, dtype=self.sums.dtype.newbyteorder("<"))
        pieces = [sums.tobytes()]
        if self.buffers is not None:
            pieces.append(np.ascontiguousarray(self.buffers, dtype="<u8").tobytes())
        digest = hmac.new(_mac_key(secret), digestmod=hashlib.sha256)
        header = self._header()
        digest.update(_header_text(header) + b"\n")
        for piece in pieces:
            digest.update(piece)
        header["mac"] = digest.hexdigest()
        write_atomic(p, [json.dumps(header, sort_keys=True).encode() + b"\n", *pieces])
        return p

    def _header(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "run_id": self.run_id,
            "fingerprint": self.fingerprint,
            "step": self.step,
            "dtype": "int64" if self.sums.dtype.kind == "i" else "float64",
            "n_keys": len(self.sums),
            "noise_layout": None if self.layout is None else self.layout.text,
            "noise_rows": 0 if self.layout is None else self.layout.rows,
        }

    @staticmethod
    def _read(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any], bytes]:
        p = Path(path)
        check_owner_only(p, "state file")
        data = p.read_bytes()
        line, _, payload = data.partition(b"\n")
        try:
            header = json.loads(line)
            if not isinstance(header, dict):
                raise ValueError
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise ValueError(f"state file {p} is not a dpcount keyed state file") from None
        found = header.get("format")
        if isinstance(found, str) and found in _OLD_FORMATS:
            raise CheckpointMismatchError(
                f"state file {p} has format {found} (an earlier dpcount, which kept no "
                f"noise state); this dpcount continues only {STATE_FORMAT}. Its run cannot "
                "be continued: start a new run (a new secret file) from step 1",
                fields=("format",),
            )
        if found != STATE_FORMAT:
            raise ValueError(f"state file {p} is not a dpcount keyed state file")
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
        cls,
        path: str | os.PathLike[str],
        secret: RunSecret,
        n_keys: int,
        layout: NoiseLayout | None = None,
    ) -> RunState:
        """Read and authenticate ``path`` for the run of ``secret`` with ``n_keys`` keys,
        whose noise state after the stored step has ``layout`` (None: none kept).

        Raises:
            CheckpointMismatchError: a valid state of an earlier format, or whose noise
                layout is not ``layout`` (written by another dpcount version).
            ValueError: not a state file, changed, of another run, or damaged.
        """
        p, header, payload = cls._read(path)
        mac = header.pop("mac", None)
        digest = hmac.new(_mac_key(secret), _header_text(header) + b"\n" + payload, "sha256")
        if not isinstance(mac, str) or not hmac.compare_digest(mac, digest.hexdigest()):
            raise ValueError(
                f"state file {p} fails its authentication check: it was changed, or it "
                f"belongs to another run (its run id is {header.get('run_id')!r}, this "
                f"run's is {secret.run_id!r})"
            )
        if header.get("run_id") != secret.run_id or header.get("fingerprint") != (
            secret.fingerprint
        ):
            raise ValueError(f"state file {p} belongs to another run (run id or configuration)")
        want_text = None if layout is None else layout.text
        rows = 0 if layout is None else layout.rows
        if header.get("noise_layout") != want_text or header.get("noise_rows") != rows:
            raise CheckpointMismatchError(
                f"state file {p} holds a noise state of another layout "
                f"({header.get('noise_rows')!r} values per key, this run's mechanism keeps "
                f"{rows}): written by another dpcount version; start a new run",
                fields=("noise_layout",),
            )
        dtype = np.dtype("<i8" if header.get("dtype") == "int64" else "<f8")
        if header.get("n_keys") != n_keys or len(payload) != 8 * n_keys * (1 + rows):
            raise ValueError(
                f"state file {p} holds {header.get('n_keys')!r} keys ({len(payload)} bytes), "
                f"not {n_keys} with {rows} noise values each"
            )
        sums = np.frombuffer(payload[: 8 * n_keys], dtype=dtype).astype(dtype.newbyteorder("="))
        buffers = None
        if rows:
            raw = np.frombuffer(payload[8 * n_keys :], dtype="<u8")
            buffers = raw.astype(np.uint64).reshape(rows, n_keys)
        step = header.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"state file {p} is damaged (step {step!r})")
        if layout is not None and step != layout.step:
            raise ValueError(f"state file {p} is damaged (step {step}, layout of {layout.step})")
        # weights are non-negative and running sums stay below 2^53 (events.check_running)
        if not (np.all(sums >= 0) and np.all(sums < MAX_EXACT_SUM)):
            raise ValueError(f"state file {p} is damaged (a running sum outside [0, 2^53))")
        return cls(str(header["run_id"]), str(header["fingerprint"]), step, sums, buffers, layout)


def _mac_key(secret: RunSecret) -> bytes:
    return hmac.new(secret.secret, b"dpcount-keyed-state-mac", hashlib.sha256).digest()


def _header_text(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
