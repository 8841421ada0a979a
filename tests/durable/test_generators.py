"""The exact check of a saved bit-generator state: every refusal, message for message."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from dpcount.durable import generators
from dpcount.durable.generators import check_generator_state

_PCG = np.random.PCG64(0).state
_MT = np.random.MT19937(0).state
_U128 = (1 << 128) - 1


def _with(state: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """``state`` with the field at ``path`` replaced by ``value`` (copies on the way)."""
    out = dict(state)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _with(state[path[0]], path[1:], value)
    return out


_KEYS = "['bit_generator', 'has_uint32', 'state', 'uinteger']"

REFUSED = [
    ("numpy.PCG64", [1], f"rng.state must be a dict with keys {_KEYS}, got [1]"),
    (
        "numpy.PCG64",
        _with(_PCG, ("state",), 5),
        "rng.state.state must be a dict with keys ['inc', 'state'], got 5",
    ),
    (
        "numpy.PCG64",
        _with(_PCG, ("bit_generator",), "PCG"),
        "rng.state.bit_generator must be 'PCG64', got 'PCG'",
    ),
    (
        "numpy.PCG64",
        _with(_PCG, ("has_uint32",), True),
        "rng.state.has_uint32 must be an int, got True",
    ),
    ("numpy.PCG64", _with(_PCG, ("uinteger",), 1.0), "rng.state.uinteger must be an int, got 1.0"),
    (
        "numpy.PCG64",
        _with(_PCG, ("has_uint32",), 2),
        "rng.state.has_uint32 must be in [0, 1], got 2",
    ),
    (
        "numpy.PCG64",
        _with(_PCG, ("state", "inc"), -1),
        f"rng.state.state.inc must be in [0, {_U128}], got -1",
    ),
    (
        "numpy.MT19937",
        _with(_MT, ("state", "key"), _MT["state"]["key"].astype(np.int64)),
        "rng.state.state.key must be a uint32 array of shape (624,), got ndarray int64(624,)",
    ),
    (
        "numpy.MT19937",
        _with(_MT, ("state", "key"), [1, 2]),
        "rng.state.state.key must be a uint32 array of shape (624,), got list",
    ),
    (
        "numpy.MT19937",
        _with(_MT, ("state", "pos"), 625),
        "rng.state.state.pos must be in [0, 624], got 625",
    ),
]


@pytest.mark.parametrize(("name", "state", "message"), REFUSED)
def test_each_bad_field_is_refused_with_its_exact_message(
    name: str, state: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_generator_state(name, state)


def test_a_long_value_is_cut_in_the_message() -> None:
    state = _with(_PCG, ("extra",), 1)
    with pytest.raises(ValueError) as info:
        check_generator_state("numpy.PCG64", state)
    assert str(info.value) == f"rng.state must be a dict with keys {_KEYS}, got {state!r:.80}"


def test_a_step_range_and_an_unlisted_integer_field(monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = dict(generators._INT_RANGES)
    ranges[("numpy.PCG64", "uinteger")] = (0, 64, 8)
    monkeypatch.setattr(generators, "_INT_RANGES", ranges)
    step = r"^rng\.state\.uinteger must be in \[0, 64\] in steps of 8, got 3$"
    with pytest.raises(ValueError, match=step):
        check_generator_state("numpy.PCG64", _with(_PCG, ("uinteger",), 3))
    del ranges[("numpy.PCG64", "has_uint32")]
    unlisted = r"^rng\.state\.has_uint32: no known range for this field of numpy\.PCG64$"
    with pytest.raises(ValueError, match=unlisted):
        check_generator_state("numpy.PCG64", _PCG)


def test_valid_states_pass() -> None:
    check_generator_state("numpy.PCG64", _PCG)
    check_generator_state("numpy.MT19937", _with(_MT, ("state", "pos"), 624))
    check_generator_state("numpy.PCG64", _with(_PCG, ("state", "inc"), _U128))
