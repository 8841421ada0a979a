"""The run's PRF keys recomputed from the secret bytes, independently of RunSecret
(the derivations its docstring states), for tests that redraw a run's noise."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from dpcount.keyed.secret import config_fingerprint


def noise_key(secret: bytes, config: dict[str, Any], run_id: str | None = None) -> bytes:
    """HMAC-SHA256(secret, "dpcount-keyed-prf-key/2" ‖ 0 ‖ run id ‖ 0 ‖ fingerprint);
    ``run_id`` default: that of an in-memory secret (the bytes' SHA-256, 16 hex)."""
    run = hashlib.sha256(secret).hexdigest()[:16] if run_id is None else run_id
    message = b"\0".join(
        (b"dpcount-keyed-prf-key/2", run.encode(), config_fingerprint(config).encode())
    )
    return hmac.new(secret, message, hashlib.sha256).digest()


def sub_key(key: bytes, label: bytes) -> bytes:
    """HMAC-SHA256(noise key, label): the selection's and the sparse vector's keys."""
    return hmac.new(key, label, hashlib.sha256).digest()
