"""polars event frames: the same release as the same rows in pandas."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")

from dpcount.keyed.secret import unsafe_testing_secret  # noqa: E402
from tests.keyed._budget import keyed_counts  # noqa: E402

SECRET_BYTES = b"p" * 32
SECRET = unsafe_testing_secret(SECRET_BYTES)
KEYS = ["a", "b", "c"]


def _events() -> pd.DataFrame:
    rng = np.random.default_rng(8)
    n = 1500
    return pd.DataFrame(
        {
            "day": (
                pd.Timestamp("2024-05-01") + pd.to_timedelta(rng.integers(0, 12, n), "D")
            ).strftime("%Y-%m-%d"),
            "key": rng.choice([*KEYS, "zz"], n),
            "w": rng.integers(0, 3, n),
            "other": rng.random(n),
        }
    )


def _kw(**extra: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        keys=KEYS, time_column="day", key_column="key", weight_column="w", max_weight=2,
        step="1D", start="2024-05-01", horizon=12, epsilon=1.0, secret=SECRET,
    )  # fmt: skip
    kw.update(extra)
    return kw


def test_polars_frame_equals_pandas() -> None:
    events = _events()
    want = keyed_counts(events, **_kw())
    got = keyed_counts(pl.from_pandas(events), **_kw())
    assert want.frame is not None and got.frame is not None
    assert got.frame.equals(want.frame)
    assert got.report == want.report and got.report.unknown_key > 0


def test_polars_dates_and_lazy_frames() -> None:
    events = _events()
    want = keyed_counts(events, **_kw()).frame
    typed = pl.from_pandas(events).with_columns(pl.col("day").str.to_date())
    assert typed.schema["day"] == pl.Date
    assert keyed_counts(typed, **_kw()).frame.equals(want)  # type: ignore[union-attr]
    assert keyed_counts(typed.lazy(), **_kw()).frame.equals(want)  # type: ignore[union-attr]
    stamps = typed.with_columns(pl.col("day").cast(pl.Datetime("us")))
    assert keyed_counts(stamps, **_kw()).frame.equals(want)  # type: ignore[union-attr]


def test_polars_missing_column_is_named() -> None:
    with pytest.raises(ValueError, match="weight column 'qty' not found"):
        keyed_counts(pl.from_pandas(_events()), **_kw(weight_column="qty"))
