"""Crafted keyed state files and released-up-to marks never crash the loaders.

Like ``tests/counting/test_checkpoint_fuzz.py`` for checkpoints: random byte flips,
truncations and crafted headers — re-authenticated with the right secret, so the
MAC check passes and the field checks are what is tested — must load or raise
ValueError / TypeError, never anything else (OverflowError, RecursionError,
MemoryError, KeyError, ...). The MACs are computed here from their documentation
(HMAC-SHA256 of the canonical JSON), independently of the modules under test.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcount.keyed.engine import NoiseLayout
from dpcount.keyed.mark import Release, ReleaseMark, mark_path
from dpcount.keyed.secret import RunSecret
from dpcount.keyed.state import RunState

RAW = b"f" * 32
SECRET = RunSecret(RAW, "fuzz-run", {"n": 3}, None)
N_KEYS = 3
LAYOUT = NoiseLayout(4, '{"rows":7,"pending":{"$keyed":[0,"<i8",[2]]}}', 2)
HUGE: list[Any] = [
    10**30, -(10**30), -1, 2**63, 2**64 + 1, 1.5, float("nan"), float("inf"), True, None,
    "7", [], {}, [1, 2], {"a": 1}, "x" * 5000,
]  # fmt: skip


def _state_mac(header: dict[str, Any], payload: bytes) -> str:
    key = hmac.new(RAW, b"dpcount-keyed-state-mac", hashlib.sha256).digest()
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, text + b"\n" + payload, hashlib.sha256).hexdigest()


def _mark_mac(body: dict[str, Any]) -> str:
    key = hmac.new(
        RAW, b"dpcount-keyed-mark-mac\0" + SECRET.run_id.encode(), hashlib.sha256
    ).digest()
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _state_bytes(header: dict[str, Any], payload: bytes, mac: bool = True) -> bytes:
    header = dict(header)
    header.pop("mac", None)
    if mac:
        header["mac"] = _state_mac(header, payload)
    return json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def _good_state(tmp_path: Path, *extra: Any) -> tuple[dict[str, Any], bytes]:
    """A valid state (``extra``: its open key set and unit ledger)."""
    path = tmp_path / "good.state"
    RunState(
        SECRET.run_id,
        SECRET.fingerprint,
        4,
        np.array([1, 2, 3], dtype=np.int64),
        np.zeros((LAYOUT.rows, N_KEYS), dtype=np.uint64),
        LAYOUT,
        *extra,
    ).save(path, SECRET)
    line, _, payload = path.read_bytes().partition(b"\n")
    return json.loads(line), payload


def _load_state(path: Path) -> None:
    os.chmod(path, 0o600)
    with contextlib.suppress(ValueError, TypeError):
        RunState.peek_step(path)
        RunState.load(path, SECRET, N_KEYS, LAYOUT)


QUICK = [10**30, float("nan"), "7"]


def _crafted_states(header: dict[str, Any], payload: bytes, values: list[Any]) -> Iterator[bytes]:
    fields = ("step", "n_keys", "noise_rows", "noise_layout", "dtype", "run_id", "fingerprint")
    for field in (*fields, "format"):
        for value in values:
            yield _state_bytes({**header, field: value}, payload)
        yield _state_bytes({k: v for k, v in header.items() if k != field}, payload)
    for sums in ([-1, 0, 0], [2**53, 0, 0], [2**62, 1, 1]):
        yield _state_bytes(header, np.array(sums, dtype="<i8").tobytes() + payload[24:])
    yield _state_bytes({**header, "dtype": "float64"}, np.full(9, np.nan).tobytes())
    yield _state_bytes(header, payload[:24] + np.full(6, np.inf).tobytes())
    yield _state_bytes(header, payload[:-1])
    yield _state_bytes(header, payload + b"\0" * 8)
    yield b"[" * 100_000 + b"\n" + payload  # deep nesting
    yield b"\xff\xfe not json\n" + payload
    yield b"[1, 2]\n" + payload
    yield b""


def _good_mark_body() -> dict[str, Any]:
    mark = ReleaseMark(SECRET.run_id, SECRET.fingerprint, 7, Release(1, 7, "a" * 64), None)
    return mark.body()


def _mark_bytes(body: dict[str, Any], mac: bool = True) -> bytes:
    body = {k: v for k, v in body.items() if k != "mac"}
    if mac:
        body["mac"] = _mark_mac(body)
    return json.dumps(body, sort_keys=True).encode()


def _crafted_marks(body: dict[str, Any], values: list[Any]) -> Iterator[bytes]:
    for field in ("released", "last", "pending", "run_id", "fingerprint", "format"):
        for value in values:
            yield _mark_bytes({**body, field: value})
        yield _mark_bytes({k: v for k, v in body.items() if k != field})
    for field in ("first", "until", "digest", "inputs"):  # inputs: the record's MAC
        for value in values:
            yield _mark_bytes({**body, "last": {**body["last"], field: value}})
            yield _mark_bytes({**body, "pending": {**body["last"], field: value}})
    yield _mark_bytes({**body, "last": {"first": 5, "until": 2, "digest": "a" * 64}})
    yield _mark_bytes({**body, "extra": 1})
    yield b"[" * 100_000
    yield b"{" + b" " * (1 << 17) + b"}"
    yield b"\xff\xfe"


def _load_mark(path: Path) -> None:
    os.chmod(path, 0o600)
    with contextlib.suppress(ValueError, TypeError):
        ReleaseMark.load(path, SECRET)


def _mutations(data: bytes, rng: np.random.Generator, n: int) -> Iterator[bytes]:
    for _ in range(n):
        buf = bytearray(data)
        kind = rng.integers(4)
        if kind == 0:  # flip bits
            for i in rng.integers(0, len(buf), size=int(rng.integers(1, 4))):
                buf[i] ^= 1 << int(rng.integers(8))
        elif kind == 1:  # truncate
            del buf[int(rng.integers(0, len(buf))) :]
        elif kind == 2:  # random bytes spliced in
            at = int(rng.integers(0, len(buf)))
            buf[at:at] = (
                rng.integers(0, 256, size=int(rng.integers(1, 9))).astype(np.uint8).tobytes()
            )
        else:  # digits replaced by a huge number
            text = bytes(buf)
            digits = [i for i, c in enumerate(text) if 48 <= c <= 57]
            if digits:
                at = digits[int(rng.integers(len(digits)))]
                buf[at : at + 1] = b"9" * 400
        yield bytes(buf)


def _run(path: Path, cases: Iterator[bytes], load: Callable[[Path], None]) -> int:
    count = 0
    for data in cases:
        path.write_bytes(data)
        load(path)
        count += 1
    return count


@pytest.mark.parametrize("values", [QUICK, pytest.param(HUGE, marks=pytest.mark.slow)])
def test_crafted_states_and_marks_raise_only_value_or_type_errors(
    tmp_path: Path, values: list[Any]
) -> None:
    header, payload = _good_state(tmp_path)
    assert _run(tmp_path / "s", _crafted_states(header, payload, values), _load_state) > 30
    assert _run(tmp_path / "m", _crafted_marks(_good_mark_body(), values), _load_mark) > 30
    # the untouched files load (the fuzz starts from valid files)
    (tmp_path / "ok.state").write_bytes(_state_bytes(header, payload))
    os.chmod(tmp_path / "ok.state", 0o600)
    assert RunState.load(tmp_path / "ok.state", SECRET, N_KEYS, LAYOUT).step == 4
    (tmp_path / "ok").write_bytes(_mark_bytes(_good_mark_body()))
    os.chmod(tmp_path / "ok", 0o600)
    assert ReleaseMark.load(tmp_path / "ok", SECRET).released == 7
    assert mark_path(tmp_path / "k").name == "k.released"


@pytest.mark.parametrize("n", [20, pytest.param(3000, marks=pytest.mark.slow)])
def test_random_mutations_raise_only_value_or_type_errors(tmp_path: Path, n: int) -> None:
    rng = np.random.default_rng(18)
    header, payload = _good_state(tmp_path)
    state = _state_bytes(header, payload)
    assert _run(tmp_path / "s", _mutations(state, rng, n), _load_state) == n
    # mutated headers re-authenticated: the field checks, not the MAC, must refuse them
    line = json.dumps(header, sort_keys=True).encode()
    remac = (
        _state_bytes(h, payload)
        for h in (_json_or_none(m) for m in _mutations(line, rng, n))
        if isinstance(h, dict)
    )
    _run(tmp_path / "s", remac, _load_state)
    mark = _mark_bytes(_good_mark_body())
    assert _run(tmp_path / "m", _mutations(mark, rng, n), _load_mark) == n
    remarked = (
        _mark_bytes(b)
        for b in (_json_or_none(m) for m in _mutations(mark, rng, n))
        if isinstance(b, dict)
    )
    _run(tmp_path / "m", remarked, _load_mark)


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _open_state(tmp_path: Path) -> tuple[dict[str, Any], bytes]:
    """A valid state of an open key set with run-level bounds (key table, selection
    steps and noise state, unit ledger)."""
    from dpcount.keyed.bounds import UnitLedger
    from dpcount.keyed.state import OpenKeys

    column = np.array([0, 1], dtype=np.int64)
    keys = OpenKeys(
        ("a", "b", 7),
        np.array([2, 5, 5], dtype=np.int64),
        np.ones((LAYOUT.rows, N_KEYS), dtype=np.uint64),
        LAYOUT,
    )
    return _good_state(
        tmp_path, keys, UnitLedger(("u", "v"), column, column * 2, column + 1, column + 3)
    )


def _load_open_state(path: Path) -> None:
    os.chmod(path, 0o600)
    with contextlib.suppress(ValueError, TypeError):
        RunState.peek_keys(path)
        RunState.load(
            path, SECRET, None, LAYOUT, selection_layout=LAYOUT, open_keys=True, units=True
        )


@pytest.mark.parametrize("n", [40, pytest.param(3000, marks=pytest.mark.slow)])
def test_open_key_and_unit_sections_raise_only_value_or_type_errors(tmp_path: Path, n: int) -> None:
    """The key table, selection and unit ledger sections, mutated and re-authenticated
    (payload bytes, and every field of their header entries set to crafted values),
    load or raise ValueError / TypeError only; the untouched state loads."""
    rng = np.random.default_rng(23)
    header, payload = _open_state(tmp_path)
    good = tmp_path / "ok.state"
    good.write_bytes(_state_bytes(header, payload))
    os.chmod(good, 0o600)
    loaded = RunState.load(
        good, SECRET, None, LAYOUT, selection_layout=LAYOUT, open_keys=True, units=True
    )
    assert loaded.open is not None and loaded.open.keys == ("a", "b", 7)
    assert loaded.ledger is not None and loaded.ledger.units == ("u", "v")
    assert RunState.peek_keys(good) == ("a", "b", 7)
    remac = (_state_bytes(header, m) for m in _mutations(payload, rng, n))
    assert _run(tmp_path / "s", remac, _load_open_state) == n
    crafted = []
    for section in ("open", "units"):
        for field in header[section]:
            for value in QUICK:
                changed = {**header, section: {**header[section], field: value}}
                crafted.append(_state_bytes(changed, payload))
        for value in QUICK:
            crafted.append(_state_bytes({**header, section: value}, payload))
    assert _run(tmp_path / "c", iter(crafted), _load_open_state) == 21  # 5 fields + 2 sections, x3


# ----------------------------------------------------------------------------------
# The inputs record of incremental runs (issue #30, item 3): authenticated like a mark
# ----------------------------------------------------------------------------------
def _inputs_mac(body: dict[str, Any]) -> str:
    key = hmac.new(
        RAW, b"dpcount-keyed-inputs-mac\0" + SECRET.run_id.encode(), hashlib.sha256
    ).digest()
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _good_inputs_body() -> dict[str, Any]:
    seen = {"sha256": "c" * 64, "size": 10, "mtime_ns": 1_700_000_000_000_000_000, "last_step": 4}
    return {
        "format": "dpcount-keyed-inputs/2",
        "released": 3,
        "watermark": "2024-01-04T00:00:00",
        "files": {"a.csv": seen},
        "pending": {
            "first": 4,
            "until": 5,
            "new": {"b.csv": {**seen, "last_step": 5}},
            "watermark": 7,
            "output_size": 120,
        },
    }


def _inputs_bytes(body: dict[str, Any], mac: bool = True) -> bytes:
    body = {k: v for k, v in body.items() if k != "mac"}
    if mac:
        body["mac"] = _inputs_mac(body)
    return json.dumps(body, sort_keys=True).encode()


def _crafted_inputs(body: dict[str, Any], values: list[Any]) -> Iterator[bytes]:
    pending, seen = body["pending"], body["files"]["a.csv"]
    for field in body:
        for value in values:
            yield _inputs_bytes({**body, field: value})
        yield _inputs_bytes({k: v for k, v in body.items() if k != field})
    for field in pending:
        for value in values:
            yield _inputs_bytes({**body, "pending": {**pending, field: value}})
    for field in seen:
        for value in values:
            yield _inputs_bytes({**body, "files": {"a.csv": {**seen, field: value}}})
    for name in ("", "..", "x/../../y", "a\0b", 7):
        yield _inputs_bytes({**body, "files": {name: seen}})
    yield _inputs_bytes({**body, "pending": {**pending, "first": 6}})  # first > until
    yield _inputs_bytes({**body, "format": "dpcount-keyed-inputs/1"})
    yield _inputs_bytes({**body, "extra": 1})
    yield b"[" * 100_000
    yield b"\xff\xfe"
    yield b""


def _load_inputs(path: Path) -> None:
    from dpcount.keyed.incremental import Inputs

    os.chmod(path, 0o600)
    with contextlib.suppress(ValueError, TypeError):
        Inputs.load(path, SECRET)


@pytest.mark.parametrize(
    ("values", "n"), [(QUICK, 20), pytest.param(HUGE, 3000, marks=pytest.mark.slow)]
)
def test_crafted_inputs_records_raise_only_value_or_type_errors(
    tmp_path: Path, values: list[Any], n: int
) -> None:
    """Crafted and mutated inputs records (re-authenticated: the field checks are what
    is tested) load or raise ValueError / TypeError only; the untouched record loads,
    and one with a wrong MAC is refused."""
    from dpcount.keyed.incremental import Inputs

    body = _good_inputs_body()
    good = tmp_path / "ok.inputs"
    good.write_bytes(_inputs_bytes(body))
    os.chmod(good, 0o600)
    loaded = Inputs.load(good, SECRET)
    assert loaded.released == 3 and loaded.pending is not None
    assert loaded.settled().files.keys() == {"a.csv", "b.csv"}
    assert _run(tmp_path / "i", _crafted_inputs(body, values), _load_inputs) > 40
    rng = np.random.default_rng(31)
    data = _inputs_bytes(body)
    assert _run(tmp_path / "i", _mutations(data, rng, n), _load_inputs) == n
    remac = (
        _inputs_bytes(b)
        for b in (_json_or_none(m) for m in _mutations(data, rng, n))
        if isinstance(b, dict)
    )
    _run(tmp_path / "i", remac, _load_inputs)
    (tmp_path / "bad").write_bytes(_inputs_bytes(body, mac=False))
    os.chmod(tmp_path / "bad", 0o600)
    with pytest.raises(ValueError, match="fails its authentication check"):
        Inputs.load(tmp_path / "bad", SECRET)
