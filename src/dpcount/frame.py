"""Data frames in, data frames out: private running counts of a pandas or polars column.

``private_counts(frame, value="cases", time="date", epsilon=1.0)`` releases the
running counts (prefix sums) of the column ``value`` with the exact standard
deviation of each release, and returns a frame of the same library holding the
time column (if named), ``private_count`` and ``std``; a pandas result keeps the
input's index. pandas and polars are optional (``pip install 'dpcount[frame]'``
installs pandas): neither is imported unless a frame of it is passed.

A frame with more than one column must name ``value``: nothing is guessed (a
two-column frame such as YEAR, SUNACTIVITY would otherwise be read as a
two-dimensional stream and the years noised).

Privacy: the guarantee of the chosen mechanism (its ``privacy.describe()``,
also in ``result.attrs["privacy"]`` for pandas) for streams that differ at one
step (one row) by at most ``step_sensitivity``. The ``std`` column is exact and
data-independent (it describes the release; no post-processing is applied here —
see :mod:`dpcount.postprocess`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.analysis.recommend import recommend_mechanism
from dpcount.counting.base import CountingMechanism
from dpcount.counting.registry import build_mechanism
from dpcount.privacy.rng import RNGLike

__all__ = ["choose_mechanism", "private_counts"]

_MISSING = ("error", "skip", "zero")


def choose_mechanism(
    horizon: int,
    epsilon: float,
    delta: float | None = None,
    *,
    whole: bool = True,
    step_sensitivity: float = 1.0,
    noise: str | None = None,
) -> dict[str, Any]:
    """The keywords of :func:`~dpcount.counting.registry.build_mechanism` (``name``
    and its options) for :func:`dpcount.analysis.recommend.recommend_mechanism`'s
    choice, the one ``dpcount count --mechanism auto`` makes."""
    choice = recommend_mechanism(
        horizon,
        epsilon=epsilon,
        delta=delta,
        noise=noise,
        whole=whole,
        step_sensitivity=step_sensitivity,
    )
    return {"name": choice.mechanism, **choice.options()}


def _kind(data: Any) -> str:
    module = type(data).__module__.split(".")[0]
    if module in ("pandas", "polars"):
        return module
    raise TypeError(
        f"data must be a pandas or polars DataFrame or Series, got {type(data).__name__}"
    )


def _columns(data: Any, kind: str, value: str | None, time: str | None) -> tuple[Any, Any]:
    """(value column, time column or None) as library Series, refusing ambiguity."""
    is_series = type(data).__name__ == "Series"
    if is_series:
        if time is not None:
            raise ValueError("time must be None for a Series (its index is kept)")
        if value is not None and value != data.name:
            raise ValueError(f"value {value!r} is not the Series' name {data.name!r}")
        return data, None
    names = [str(c) for c in data.columns]
    if value is None:
        if len(names) != 1:
            raise ValueError(
                f"data has {len(names)} columns {names}: name the one to count with value= "
                "(and the time column with time=); a frame is never read as a multi-"
                "dimensional stream"
            )
        value = names[0]
    for label, name in (("value", value), ("time", time)):
        if name is not None and name not in names:
            raise ValueError(f"{label} column {name!r} is not in the frame's columns {names}")
    if time is not None and time == value:
        raise ValueError(f"time and value must be different columns, got {value!r} for both")
    return data[value], (None if time is None else data[time])


def _values(column: Any, kind: str, missing: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The column as float64 with a mask of the rows kept (``missing`` policy)."""
    arr = column.to_numpy()
    try:
        values = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"value column {column.name!r} must hold numbers") from None
    absent = np.isnan(values)
    keep = np.ones(len(values), dtype=bool)
    if absent.any():
        if missing == "error":
            first = int(np.flatnonzero(absent)[0])
            raise ValueError(
                f"value column {column.name!r} has {int(absent.sum())} missing value(s), the "
                f"first at row {first}: pass missing='skip' to drop those rows or "
                "missing='zero' to count them as 0"
            )
        if missing == "skip":
            keep = ~absent
        else:
            values = np.where(absent, 0.0, values)
    return values, keep


def private_counts(
    data: Any,
    *,
    value: str | None = None,
    time: str | None = None,
    epsilon: float,
    delta: float | None = None,
    mechanism: str = "auto",
    noise: str | None = None,
    step_sensitivity: float = 1.0,
    horizon: int | None = None,
    missing: str = "error",
    rng: RNGLike = None,
    **options: Any,
) -> Any:
    """Private running counts of one column of a pandas or polars frame (or a Series).

    Args:
        data: a pandas/polars DataFrame or Series, one row per time step, in order.
        value: the column to count; required when the frame has several columns.
        time: a column copied into the result (dates, timestamps or ids).
        epsilon: the budget's ε > 0.
        delta: the budget's δ in (0, 1), or None for pure ε-DP.
        mechanism: ``"auto"`` (what ``dpcount plan`` recommends for this horizon,
            budget and noise: :func:`dpcount.analysis.recommend.recommend_mechanism`,
            as ``dpcount count --mechanism auto``) or a registry name (``"kary"``...).
        noise: the noise kind; None: integer noise for whole-number data where the
            mechanism takes it (the safe default), else the mechanism's default.
        step_sensitivity: largest change of one step between neighbouring inputs.
        horizon: steps the noise is calibrated for (default: the rows used).
        missing: ``"error"`` (default), ``"skip"`` (drop rows with a missing value;
            they are absent from the result) or ``"zero"``.
        rng: None (OS-entropy CSPRNG) or a seed/generator (research only).
        **options: further keywords of the mechanism (``k``, ``subtract``,
            ``calibration``).

    Returns:
        A frame of the input's library: the time column (if named), then
        ``private_count`` and ``std``; pandas keeps the index of the rows used and
        stores ``attrs["mechanism"]`` and ``attrs["privacy"]``.
    """
    kind = _kind(data)
    if missing not in _MISSING:
        raise ValueError(f"missing must be one of {_MISSING}, got {missing!r}")
    column, time_col = _columns(data, kind, value, time)
    values, keep = _values(column, kind, missing)
    values = values[keep]
    if len(values) == 0:
        raise ValueError("data has no rows to count")
    T = len(values) if horizon is None else horizon
    whole = bool(np.all(values == np.round(values)))
    mech = _mechanism(mechanism, T, epsilon, delta, noise, step_sensitivity, whole, rng, options)
    released = mech.release(values)
    std = np.sqrt(mech.variances()[: len(values)])
    return _result(data, kind, keep, time, time_col, released, std, mech)


def _mechanism(
    name: str,
    T: int,
    epsilon: float,
    delta: float | None,
    noise: str | None,
    step: float,
    whole: bool,
    rng: RNGLike,
    options: dict[str, Any],
) -> CountingMechanism:
    kw: dict[str, Any] = {"horizon": T, "epsilon": epsilon, "delta": delta, "rng": rng}
    kw["step_sensitivity"] = step
    if name == "auto" and not options:
        chosen = choose_mechanism(
            T, epsilon, delta, whole=whole, step_sensitivity=step, noise=noise
        )
        return build_mechanism(chosen.pop("name"), **kw, **chosen)
    if name == "auto":
        raise ValueError(
            f"mechanism='auto' chooses the mechanism's options itself: name a mechanism to "
            f"pass {sorted(options)}"
        )
    if noise is None and not whole:
        noise = "laplace" if delta is None else "gaussian"  # continuous data
    return build_mechanism(name, noise=noise, **kw, **options)


def _result(
    data: Any,
    kind: str,
    keep: NDArray[np.bool_],
    time: str | None,
    time_col: Any,
    released: NDArray[Any],
    std: NDArray[np.float64],
    mech: CountingMechanism,
) -> Any:
    privacy = mech.privacy.describe() if mech.privacy is not None else "none"
    if kind == "pandas":
        import pandas as pd

        index = data.index[keep]
        cols: dict[str, Any] = {}
        if time is not None:
            cols[time] = time_col.to_numpy()[keep]
        cols["private_count"] = released
        cols["std"] = std
        out = pd.DataFrame(cols, index=index)
        out.attrs["mechanism"] = repr(mech)
        out.attrs["privacy"] = privacy
        return out
    import polars as pl

    pcols: dict[str, Any] = {}
    if time is not None:
        pcols[time] = time_col.filter(pl.Series(keep))
    pcols["private_count"] = released
    pcols["std"] = std
    return pl.DataFrame(pcols)
