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

Open key sets and run-level unit bounds keep more (:class:`OpenKeys`,
:class:`~dpcount.keyed.bounds.UnitLedger`), under the same MAC, permissions and
release mark: the key table (each key's position, in the order keys were first
counted), each key's selection step, the selection counter's noise state per key
(:mod:`dpcount.keyed.selection`), and per unit the keys it used, per (unit, key) the
steps it used and the last of them (:mod:`dpcount.keyed.bounds`) — the units' names
included, so this file names the data's units too.

Format (``dpcount-keyed-state/3``): one line of JSON (format tag, run id,
configuration fingerprint, last released step, dtype, number of keys, the noise
layout and its number of rows per key, the sizes of the open-key and unit sections,
MAC), then the sums as little-endian int64 or float64, then the noise state: rows ×
keys 64-bit values (row-major); then, for an open key set, the key table (JSON), the
selection steps (int64 per key) and the selection noise state (rows × keys); then,
for run-level bounds, the unit names (JSON) and the ledger's four int64 columns.
Formats /1 and /2 (dpcount 0.4.0 development versions) are refused with
:class:`~dpcount.counting.checkpoint.CheckpointMismatchError`: start a new run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import MAX_EXACT_SUM
from dpcount.counting.checkpoint import CheckpointMismatchError
from dpcount.durable.atomic import write_atomic
from dpcount.keyed.bounds import UnitLedger
from dpcount.keyed.engine import NoiseLayout
from dpcount.keyed.secret import MacLabel, RunRecord, RunSecret, check_owner_only

__all__ = ["STATE_FORMAT", "OpenKeys", "RunState"]

STATE_FORMAT = "dpcount-keyed-state/3"
#: formats this dpcount recognizes but cannot continue
_OLD_FORMATS = ("dpcount-keyed-state/1", "dpcount-keyed-state/2")


@dataclass(frozen=True)
class OpenKeys:
    """The state of an open key set after a release: the key table (key i has noise
    position i), each key's selection step (``horizon + 1``: not selected yet) and the
    selection counter's per-key noise state (``buffers`` laid out by ``layout``; both
    None: not kept, replayed)."""

    keys: tuple[Any, ...]
    selected: NDArray[np.int64]
    buffers: NDArray[np.uint64] | None = None
    layout: NoiseLayout | None = None

    def key_text(self) -> bytes:
        for key in self.keys:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise ValueError(
                    f"key {key!r} ({type(key).__name__}): an open key set with state= "
                    "stores its keys, which must be text or integers"
                )
        return json.dumps(list(self.keys), ensure_ascii=False).encode()

    def pieces(self) -> list[bytes]:
        out = [self.key_text(), np.ascontiguousarray(self.selected, dtype="<i8").tobytes()]
        if self.buffers is not None:
            out.append(np.ascontiguousarray(self.buffers, dtype="<u8").tobytes())
        return out


def _ledger_pieces(ledger: UnitLedger) -> list[bytes]:
    text = json.dumps(list(ledger.units), ensure_ascii=False).encode()
    columns = (ledger.unit, ledger.key, ledger.steps, ledger.last)
    return [text, *(np.ascontiguousarray(c, dtype="<i8").tobytes() for c in columns)]


def extras_digest(open_keys: OpenKeys | None, ledger: UnitLedger | None) -> bytes:
    """SHA-256 of the open-key and unit sections (for the release mark's input digest)."""
    h = hashlib.sha256()
    for name, pieces in (
        ("open", None if open_keys is None else open_keys.pieces()),
        ("units", None if ledger is None else _ledger_pieces(ledger)),
    ):
        h.update(f"{name}:{'none' if pieces is None else len(pieces)}\n".encode())
        for piece in pieces or []:
            h.update(f"{len(piece)}\n".encode())
            h.update(piece)
    return h.digest()


@dataclass(frozen=True)
class RunState(RunRecord):
    """Exact running counts ``sums`` (one per key) after step ``step`` of run ``run_id``,
    and the per-key noise state there: ``buffers`` (layout rows × keys, 64-bit values)
    laid out by ``layout`` (both None: the mechanism keeps no noise state)."""

    step: int
    sums: NDArray[Any]
    buffers: NDArray[np.uint64] | None = None
    layout: NoiseLayout | None = None
    open: OpenKeys | None = None
    ledger: UnitLedger | None = None

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
        if self.open is not None:
            pieces.extend(self.open.pieces())
        if self.ledger is not None:
            pieces.extend(_ledger_pieces(self.ledger))
        digest = secret.mac(MacLabel.STATE).new()
        header = self._header()
        digest.update(_header_text(header) + b"\n")
        for piece in pieces:
            digest.update(piece)
        header["mac"] = digest.hexdigest()
        write_atomic(p, [json.dumps(header, sort_keys=True).encode() + b"\n", *pieces])
        return p

    def _header(self) -> dict[str, Any]:
        return {
            **self.header(STATE_FORMAT),
            "step": self.step,
            "dtype": "int64" if self.sums.dtype.kind == "i" else "float64",
            "n_keys": len(self.sums),
            "noise_layout": None if self.layout is None else self.layout.text,
            "noise_rows": 0 if self.layout is None else self.layout.rows,
            "open": None
            if self.open is None
            else {
                "keys_bytes": len(self.open.key_text()),
                "selection_layout": None if self.open.layout is None else self.open.layout.text,
                "selection_rows": 0 if self.open.layout is None else self.open.layout.rows,
            },
            "units": None
            if self.ledger is None
            else {"units_bytes": len(_ledger_pieces(self.ledger)[0]), "pairs": len(self.ledger)},
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
    def peek_keys(cls, path: str | os.PathLike[str]) -> tuple[Any, ...]:
        """The key table of an open key set's state (not yet authenticated: the run
        checks it against the authenticated one, :meth:`load`)."""
        p, header, payload = cls._read(path)
        spec = header.get("open")
        n = header.get("n_keys")
        rows = header.get("noise_rows")
        if not isinstance(spec, dict):
            raise ValueError(f"state file {p} holds no open key set (a run with keys= wrote it)")
        try:
            at = 8 * int(n) * (1 + int(rows))  # type: ignore[arg-type]
            keys = json.loads(payload[at : at + int(spec["keys_bytes"])])
            if not isinstance(keys, list) or not _key_table(keys):
                raise ValueError
        except (ValueError, TypeError, KeyError, RecursionError):
            raise ValueError(f"state file {p} is damaged (its key table)") from None
        return tuple(keys)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        secret: RunSecret,
        n_keys: int | None,
        layout: NoiseLayout | Callable[[int], NoiseLayout | None] | None = None,
        *,
        selection_layout: NoiseLayout | Callable[[int], NoiseLayout | None] | None = None,
        open_keys: bool = False,
        units: bool = False,
    ) -> RunState:
        """Read and authenticate ``path`` for the run of ``secret`` with ``n_keys`` keys
        (None: an open key set, as many as its table holds), whose noise state after
        the stored step has ``layout`` (None: none kept; a callable: the layout for a
        number of keys). ``open_keys``/``units``: the run keeps an open key set (with
        ``selection_layout``, the selection counter's) / a unit ledger.

        Raises:
            CheckpointMismatchError: a valid state of an earlier format, or whose noise
                layout is not ``layout`` (written by another dpcount version).
            ValueError: not a state file, changed, of another run, or damaged.
        """
        p, header, payload = cls._read(path)
        _authenticate(p, header, payload, secret)
        n_keys = _stored_keys(p, header, n_keys)
        if callable(layout):
            layout = layout(n_keys)
        if callable(selection_layout):
            selection_layout = selection_layout(n_keys)
        _check_sections(p, header, layout, open_keys, units)
        dtype = np.dtype("<i8" if header.get("dtype") == "int64" else "<f8")
        reader = _Reader(payload, p)
        sums = reader.array(dtype, n_keys).astype(dtype.newbyteorder("="))
        buffers = None
        if layout is not None and layout.rows:
            buffers = reader.array(np.dtype("<u8"), layout.rows * n_keys).astype(np.uint64)
            buffers = buffers.reshape(layout.rows, n_keys)
        spec, uspec = header.get("open"), header.get("units")
        stored_open = None
        if spec is not None:
            stored_open = _load_open(reader, spec, n_keys, selection_layout, p)
        ledger = None if uspec is None else _load_ledger(reader, uspec, n_keys, p)
        reader.done()
        step = header.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"state file {p} is damaged (step {step!r})")
        if layout is not None and step != layout.step:
            raise ValueError(f"state file {p} is damaged (step {step}, layout of {layout.step})")
        # weights are non-negative and running sums stay below 2^53 (events.check_running)
        if not (np.all(sums >= 0) and np.all(sums < MAX_EXACT_SUM)):
            raise ValueError(f"state file {p} is damaged (a running sum outside [0, 2^53))")
        return cls(
            str(header["run_id"]),
            str(header["fingerprint"]),
            step,
            sums,
            buffers,
            layout,
            stored_open,
            ledger,
        )


def _authenticate(p: Path, header: dict[str, Any], payload: bytes, secret: RunSecret) -> None:
    """Check the state's MAC (popped from ``header``) and that it is this run's."""
    mac = header.pop("mac", None)
    if not secret.mac(MacLabel.STATE).verify(mac, _header_text(header) + b"\n" + payload):
        raise ValueError(
            f"state file {p} fails its authentication check: it was changed, or it "
            f"belongs to another run (its run id is {header.get('run_id')!r}, this "
            f"run's is {secret.run_id!r})"
        )
    if header.get("run_id") != secret.run_id or header.get("fingerprint") != (secret.fingerprint):
        raise ValueError(f"state file {p} belongs to another run (run id or configuration)")


def _stored_keys(p: Path, header: dict[str, Any], n_keys: int | None) -> int:
    """The number of keys the state holds: ``n_keys`` (checked), or (None: an open key
    set) as many as its header says."""
    stored_n = header.get("n_keys")
    if n_keys is None:
        if isinstance(stored_n, bool) or not isinstance(stored_n, int) or stored_n < 1:
            raise ValueError(f"state file {p} is damaged (n_keys {stored_n!r})")
        return stored_n
    if stored_n != n_keys:
        raise ValueError(f"state file {p} holds {stored_n!r} keys, not {n_keys}")
    return n_keys


def _check_sections(
    p: Path, header: dict[str, Any], layout: NoiseLayout | None, open_keys: bool, units: bool
) -> None:
    """The noise layout is the run's (else written by another version) and the open-key
    and unit sections are there exactly when the run keeps them."""
    want_text = None if layout is None else layout.text
    rows = 0 if layout is None else layout.rows
    if header.get("noise_layout") != want_text or header.get("noise_rows") != rows:
        raise CheckpointMismatchError(
            f"state file {p} holds a noise state of another layout "
            f"({header.get('noise_rows')!r} values per key, this run's mechanism keeps "
            f"{rows}): written by another dpcount version; start a new run",
            fields=("noise_layout",),
        )
    spec, uspec = header.get("open"), header.get("units")
    if (spec is not None) != open_keys or (uspec is not None) != units:
        raise ValueError(f"state file {p} is damaged (its open-key or unit section)")


class _Reader:
    """Consecutive sections of an authenticated payload (sizes checked)."""

    def __init__(self, payload: bytes, path: Path) -> None:
        self.payload, self.at, self.path = payload, 0, path

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.payload):
            raise ValueError(f"state file {self.path} is damaged (truncated)")
        out = self.payload[self.at : self.at + size]
        self.at += size
        return out

    def array(self, dtype: np.dtype[Any], count: int) -> NDArray[Any]:
        return np.frombuffer(self.take(dtype.itemsize * count), dtype=dtype)

    def json(self, size: object) -> list[Any]:
        if isinstance(size, bool) or not isinstance(size, int):
            raise ValueError(f"state file {self.path} is damaged (a section size)")
        try:
            value = json.loads(self.take(size))
        except (ValueError, RecursionError):
            raise ValueError(f"state file {self.path} is damaged (a JSON section)") from None
        if not isinstance(value, list):
            raise ValueError(f"state file {self.path} is damaged (a JSON section)")
        return value

    def done(self) -> None:
        if self.at != len(self.payload):
            raise ValueError(f"state file {self.path} is damaged ({len(self.payload)} bytes)")


def _load_open(
    reader: _Reader, spec: Any, n_keys: int, layout: NoiseLayout | None, p: Path
) -> OpenKeys:
    if not isinstance(spec, dict):
        raise ValueError(f"state file {p} is damaged (its open-key section)")
    want_text = None if layout is None else layout.text
    rows = 0 if layout is None else layout.rows
    if spec.get("selection_layout") != want_text or spec.get("selection_rows") != rows:
        raise CheckpointMismatchError(
            f"state file {p} holds a selection noise state of another layout: written by "
            "another dpcount version; start a new run",
            fields=("selection_layout",),
        )
    keys = reader.json(spec.get("keys_bytes"))
    if len(keys) != n_keys or not _key_table(keys):
        raise ValueError(f"state file {p} is damaged (its key table)")
    selected = reader.array(np.dtype("<i8"), n_keys).astype(np.int64)
    buffers = None
    if rows:
        buffers = reader.array(np.dtype("<u8"), rows * n_keys).astype(np.uint64)
        buffers = buffers.reshape(rows, n_keys)
    return OpenKeys(tuple(keys), selected, buffers, layout)


def _key_table(keys: list[Any]) -> bool:
    """Whether ``keys`` is a key table: distinct text or integer keys."""
    plain = all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys)
    return plain and len(set(keys)) == len(keys)


def _load_ledger(reader: _Reader, spec: Any, n_keys: int, p: Path) -> UnitLedger:
    if not isinstance(spec, dict):
        raise ValueError(f"state file {p} is damaged (its unit section)")
    units = reader.json(spec.get("units_bytes"))
    pairs = spec.get("pairs")
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 0:
        raise ValueError(f"state file {p} is damaged (its unit section)")
    unit, key, steps, last = (
        reader.array(np.dtype("<i8"), pairs).astype(np.int64) for _ in range(4)
    )
    if not all(isinstance(u, str) for u in units) or (
        pairs
        and not (
            unit.min() >= 0
            and unit.max() < len(units)
            and key.min() >= 0
            and key.max() < n_keys
            and steps.min() >= 1
            and last.min() >= 1
        )
    ):
        raise ValueError(f"state file {p} is damaged (its unit section)")
    return UnitLedger(tuple(units), unit, key, steps, last)


def _header_text(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
