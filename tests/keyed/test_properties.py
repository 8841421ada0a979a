"""Bad input to dpcount.keyed: each a ValueError/TypeError naming the parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcount.keyed import PositionPRF, RunSecret
from dpcount.keyed.run import write_frames
from dpcount.keyed.secret import unsafe_testing_secret
from tests.keyed._budget import keyed_counts

COVERED = {
    "dpcount.keyed": {"PositionPRF", "RunSecret"},
    "dpcount.keyed.run": {"keyed_counts", "write_frames"},
}

EVENTS = pd.DataFrame({"t": [0, 1, 2, 2], "key": ["a", "b", "a", "z"]})


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=["a", "b"], time_column="t", key_column="key", step=1, start=0, horizon=4,
        epsilon=1.0, secret=unsafe_testing_secret(b"s" * 32),
    )  # fmt: skip
    kw.update(extra)
    return kw


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"noise": "uniform"}, ValueError, "noise must be one of"),
        ({"mechanism": "wavelet"}, ValueError, "mechanism must be one of"),
        ({"mechanism": "blt"}, ValueError, "noise='discrete-laplace' is not available"),
        ({"k": 1, "mechanism": "kary"}, ValueError, "k must be"),
        ({"horizon": 0}, ValueError, "horizon must be"),
        ({"chunk_keys": 0}, ValueError, "chunk_keys must be"),
        ({"until": 5}, ValueError, "until=5 is beyond the horizon"),
        ({"until": "2"}, TypeError, "until must be an integer"),
        ({"until": 0}, ValueError, "until must be >= 1"),
        ({"engine": "flink"}, ValueError, "engine must be"),
        ({"secret": 12}, TypeError, "secret must be"),
        ({"secret": b"s" * 32}, TypeError, "secret must be a secret file path, not bytes"),
        ({"time_column": "when"}, ValueError, "time column 'when' not found"),
        ({"max_keys": 2}, ValueError, "max_keys needs a unit column"),
        ({"state": "x.state", "horizon": None}, ValueError, "explicit start and horizon"),
    ],
)
def test_keyed_counts_bad_input(change: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        keyed_counts(EVENTS, **_kw(**change))


@settings(max_examples=25, deadline=None)
@given(epsilon=st.one_of(st.floats(max_value=0.0), st.just(float("inf"))))
def test_keyed_counts_refuses_any_bad_epsilon(epsilon: float) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        keyed_counts(EVENTS, **_kw(epsilon=epsilon))


@settings(max_examples=25, deadline=None)
@given(block=st.integers(min_value=-5, max_value=3 * 2**20).filter(lambda b: b & (b - 1) or b < 1))
def test_position_prf_key_block(block: int) -> None:
    with pytest.raises(ValueError, match="key_block must be a power of two"):
        PositionPRF(b"s" * 32, "x", block)


@settings(max_examples=25, deadline=None)
@given(secret=st.binary(max_size=15))
def test_run_secret_too_short(secret: bytes) -> None:
    with pytest.raises(ValueError, match="secret must be bytes of length >= 16"):
        RunSecret.in_memory(secret, {})


def test_write_frames_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"must end in \.csv or \.parquet"):
        write_frames([EVENTS], tmp_path / "out.json")
