"""Data frames in, data frames out: private running counts of a pandas or polars column.

``private_counts(frame, value="cases", time="date", budget=Budget(epsilon=1.0))``
releases the running counts (prefix sums) of the column ``value`` with the exact
standard deviation of each release, and returns a frame of the same library
holding the time column (if named), ``private_count`` and ``std``; a pandas result
keeps the input's index. pandas and polars are optional (``pip install
'dpcount[frame]'`` installs pandas): neither is imported unless a frame of it is
passed.

It offers what ``dpcount count`` offers on a file, through the same library
calls: the mechanism and noise of :func:`dpcount.analysis.choice.choose` (``auto``
by default; integer noise for whole-number data), ``step=`` bucketing of a time
column (``start=``, ``horizon=``), ``missing=`` and the post-processing
``monotone``/``clamp``/``round`` (then ``private_count`` is post-processed and
``raw_private_count``/``raw_std`` follow, as in the CLI). What the CLI prints on
stderr is issued here as a :class:`~dpcount.privacy.PrivacyWarning`: why the
noise stays continuous, a δ above 1e-3, a start or horizon read off the data.

A frame with more than one column must name ``value``: nothing is guessed (a
two-column frame such as YEAR, SUNACTIVITY would otherwise be read as a
two-dimensional stream and the years noised).

Privacy: the guarantee of the chosen mechanism (its ``privacy.describe()``,
also in ``result.attrs["privacy"]`` for pandas) for streams that differ at one
step by at most the budget's ``step_sensitivity`` (with ``step=``, one step's
sum). The ``std`` (or ``raw_std``) column is exact and data-independent; it
describes the raw release, not post-processed values.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._time import Clock
from dpcount.analysis.choice import Choice, choose
from dpcount.counting.base import CountingMechanism
from dpcount.postprocess import MONOTONE_NOTE, round_half_even
from dpcount.postprocess import clamp as clamp_negative
from dpcount.postprocess import monotone as isotonic
from dpcount.privacy.budget import Budget
from dpcount.privacy.notes import PrivacyWarning, data_derived_warning
from dpcount.privacy.rng import RNGLike

__all__ = ["choose_mechanism", "private_counts"]

_MISSING = ("error", "skip", "zero")

#: the budget's fields, accepted loose for one more release (DeprecationWarning)
_LOOSE = ("epsilon", "delta", "noise", "calibration", "step_sensitivity")


def choose_mechanism(
    horizon: int,
    epsilon: float | None = None,
    delta: float | None = None,
    *,
    budget: Budget | None = None,
    whole: bool = True,
    step_sensitivity: float | None = None,
    noise: str | None = None,
) -> dict[str, Any]:
    """The keywords of :func:`~dpcount.counting.registry.build_mechanism` (``name``,
    ``budget`` and the options) for the choice ``mechanism="auto"`` makes
    (:func:`dpcount.analysis.choice.choose`, as ``dpcount count --mechanism auto``).

    ``epsilon``, ``delta``, ``step_sensitivity`` and ``noise`` are deprecated: pass
    ``budget=``.
    """
    resolved = Budget.resolve_loose(
        budget,
        owner="choose_mechanism",
        epsilon=epsilon,
        delta=delta,
        step_sensitivity=step_sensitivity,
        noise=noise,
    )
    choice = choose(horizon, budget=resolved, whole=whole)
    return {"name": choice.mechanism, "budget": choice.budget, **choice.options}


def _kind(data: Any) -> str:
    module = type(data).__module__.split(".")[0]
    if module in ("pandas", "polars"):
        return module
    raise TypeError(
        f"data must be a pandas or polars DataFrame or Series, got {type(data).__name__}"
    )


def _columns(data: Any, value: str | None, time: str | None) -> tuple[Any, Any]:
    """(value column, time column or None) as library Series, refusing ambiguity."""
    if type(data).__name__ == "Series":
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


def _values(column: Any, missing: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
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


def _buckets(
    values: NDArray[np.float64], times: list[str], step: str, start: Any, horizon: int | None
) -> tuple[NDArray[np.float64], list[str]]:
    """``dpcount count --step``: the sum of each step's rows (an empty step is 0) and
    the steps' start labels; a start or horizon read off the data is warned about."""
    clock = Clock.parse(step, "step")
    read = [clock.read(t, f"time row {i}") for i, t in enumerate(times)]
    derived = [name for name, given in (("start", start), ("horizon", horizon)) if given is None]
    if derived:
        warnings.warn(data_derived_warning(derived), PrivacyWarning, stacklevel=3)
    if start is not None:
        clock.set_start(str(start), "start")
    else:
        clock.start_at(min(read))
    steps = np.array([clock.step(t) for t in read], dtype=np.int64)
    if (steps < 1).any():
        row = int(np.flatnonzero(steps < 1)[0])
        raise ValueError(f"time row {row} ({times[row]!r}) is before start {start!r}")
    n = int(steps.max())
    sums = np.bincount(steps - 1, weights=values, minlength=n).astype(np.float64)
    return sums, [clock.label(k) for k in range(1, n + 1)]


def private_counts(
    data: Any,
    *,
    value: str | None = None,
    time: str | None = None,
    budget: Budget | None = None,
    mechanism: str = "auto",
    horizon: int | None = None,
    step: str | None = None,
    start: Any = None,
    missing: str = "error",
    monotone: bool = False,
    clamp: bool = False,
    round: bool = False,
    k: int | None = None,
    subtract: bool | None = None,
    bands: int | None = None,
    rng: RNGLike = None,
    **fields: Any,
) -> Any:
    """Private running counts of one column of a pandas or polars frame (or a Series).

    Args:
        data: a pandas/polars DataFrame or Series, one row per time step, in order
            (with ``step``: one row per event or record, bucketed by ``time``).
        value: the column to count; required when the frame has several columns.
        time: a column copied into the result (dates, timestamps or ids); with
            ``step``, the times to bucket (the result holds each step's start).
        budget: the :class:`~dpcount.privacy.Budget` (ε, δ, an optional noise kind
            and rule, the step sensitivity; a participation schema is calibrated for).
        mechanism: ``"auto"`` (:func:`dpcount.analysis.choice.choose`, as ``dpcount
            count --mechanism auto``) or a registry name (``"kary"``...).
        horizon: steps the noise is calibrated for (default: the steps used).
        step: bucket width for ``time`` (``"1D"``, ``"6h"``, ``"15min"``, calendar
            steps ``"MS"``, ``"QS"``, ``"YS"``, ``"W-MON"``, a number for numeric times;
            :func:`dpcount._time.parse_step`), as ``dpcount count --step``: a step's
            value is the sum of its rows, so the budget's step sensitivity must bound
            one step's sum.
        start: with ``step``, where step 1 starts (default: the earliest time, which
            the release then reveals: a PrivacyWarning says so).
        missing: ``"error"`` (default), ``"skip"`` (drop rows with a missing value;
            they are absent from the result, and the number of steps reveals how
            many) or ``"zero"``.
        monotone, clamp, round: post-processing of the release, in this order
            (:mod:`dpcount.postprocess`); the guarantee is unchanged.
        k, subtract, bands: structure options of a named ``kary`` (``k``,
            ``subtract``) or ``toeplitz`` (``bands``).
        rng: None (OS-entropy CSPRNG) or a seed/generator (research only).
        **fields: deprecated: the budget's fields (``epsilon``, ``delta``, ``noise``,
            ``calibration``, ``step_sensitivity``) instead of ``budget=``.

    Returns:
        A frame of the input's library: the time column (if named), then
        ``private_count`` and ``std`` (with post-processing: ``private_count``,
        ``raw_private_count``, ``raw_std``); pandas keeps the index of the rows used
        (without ``step``) and stores ``attrs["mechanism"]``, ``attrs["privacy"]``,
        ``attrs["choice"]`` (how ``auto`` chose, or None) and ``attrs["notes"]``
        (the notes ``dpcount count`` prints for the same run: continuous noise and
        why, Honaker's estimate rounded to whole numbers, the monotone fit's error).
        With integer noise the counts are whole numbers: Honaker's estimate is
        rounded (:meth:`dpcount.analysis.choice.Choice.finish`; the std describes the
        unrounded estimate, rounding moves each value by at most 0.5).

    Warns:
        PrivacyWarning: continuous noise (and why), a δ above 1e-3, a start or
            horizon taken from the data.
    """
    unknown = sorted(set(fields) - set(_LOOSE))
    if unknown:
        raise TypeError(f"private_counts() got an unexpected keyword argument {unknown[0]!r}")
    resolved = Budget.resolve(budget, fields, owner="private_counts", deprecated=True)
    kind = _kind(data)
    if missing not in _MISSING:
        raise ValueError(f"missing must be one of {_MISSING}, got {missing!r}")
    if step is None and start is not None:
        raise ValueError("start needs step")
    if step is not None and time is None:
        raise ValueError("step needs time (the column of times to bucket)")
    column, time_col = _columns(data, value, time)
    values, keep = _values(column, missing)
    values = values[keep]
    if len(values) == 0:
        raise ValueError("data has no rows to count")
    labels = None
    if step is not None:
        times = [str(t) for t in np.asarray(time_col.to_numpy())[keep]]
        values, labels = _buckets(values, times, step, start, horizon)
    T = len(values) if horizon is None else horizon
    if len(values) > T:
        raise ValueError(f"horizon {T} is smaller than the {len(values)} steps of data")
    options = {
        n: v for n, v in (("k", k), ("subtract", subtract), ("bands", bands)) if v is not None
    }
    whole = bool(np.all(np.isfinite(values) & (values == np.round(values))))
    choice = choose(T, budget=resolved, mechanism=mechanism, whole=whole, options=options)
    mech = _build(choice, rng)
    raw = choice.finish(mech.release(values))
    std = np.sqrt(mech.variances()[: len(values)])
    post = _postprocess(raw, monotone=monotone, clamp=clamp, round=round)
    columns = _result_columns(raw, std, post)
    if kind == "pandas":
        notes = _notes(choice, post is not None, monotone)
        return _pandas(data, keep, time, time_col, labels, columns, mech, choice, notes)
    return _polars(keep, time, time_col, labels, columns)


def _build(choice: Choice, rng: RNGLike) -> CountingMechanism:
    """The chosen mechanism; the notes the CLI prints go out as PrivacyWarnings."""
    if choice.ignored:
        raise ValueError(
            f"{', '.join(choice.ignored)} given for mechanism {choice.mechanism!r}, which has "
            "no such option (k and subtract are kary's, bands toeplitz's)"
        )
    if choice.note is not None:
        warnings.warn(
            f"{choice.note.text()} (floating-point noise: values snapped to a power-of-two grid, a "
            "float-safety term in delta; see "
            "docs/safe-noise.md; pass a noise kind in the budget to choose)",
            PrivacyWarning,
            stacklevel=3,
        )
    mech = choice.build(rng=rng)
    if mech.privacy is not None and mech.privacy.warning is not None:
        warnings.warn(mech.privacy.warning, PrivacyWarning, stacklevel=3)
    return mech


def _notes(choice: Choice, post: bool, monotone: bool) -> list[str]:
    """The notes ``dpcount count`` prints for the same run (without its ``note:`` and
    flag prefixes): why the noise is continuous, that Honaker's estimate is rounded,
    what the monotone fit's error is."""
    notes = [] if choice.note is None else [choice.note.text()]
    rounding = choice.rounding_note("raw_std" if post else "std")
    if rounding is not None:
        notes.append(rounding)
    if monotone:
        notes.append(MONOTONE_NOTE)
    return notes


def _postprocess(
    raw: NDArray[Any], *, monotone: bool, clamp: bool, round: bool
) -> NDArray[Any] | None:
    """The release after ``monotone``, ``clamp``, ``round`` (in that order, as the
    CLI's ``--monotone --clamp --round``), or None without post-processing."""
    if not (monotone or clamp or round):
        return None
    values = np.asarray(raw, dtype=np.float64)
    if monotone:
        values = isotonic(values)
    if clamp:
        values = clamp_negative(values)
    if round:
        return np.asarray(round_half_even(values))
    if not monotone and np.issubdtype(np.asarray(raw).dtype, np.integer):
        return values.astype(np.int64)  # clamped integers stay integers
    return values


def _result_columns(
    raw: NDArray[Any], std: NDArray[np.float64], post: NDArray[Any] | None
) -> dict[str, Any]:
    if post is None:
        return {"private_count": raw, "std": std}
    return {"private_count": post, "raw_private_count": raw, "raw_std": std}


def _pandas(
    data: Any,
    keep: NDArray[np.bool_],
    time: str | None,
    time_col: Any,
    labels: list[str] | None,
    columns: dict[str, Any],
    mech: CountingMechanism,
    choice: Choice,
    notes: list[str],
) -> Any:
    import pandas as pd

    cols: dict[str, Any] = {}
    if time is not None:
        cols[time] = time_col.to_numpy()[keep] if labels is None else labels
    out = pd.DataFrame({**cols, **columns}, index=data.index[keep] if labels is None else None)
    out.attrs["mechanism"] = repr(mech)
    out.attrs["privacy"] = mech.privacy.describe() if mech.privacy is not None else "none"
    out.attrs["choice"] = None if choice.auto is None else choice.auto.text()
    out.attrs["notes"] = notes
    return out


def _polars(
    keep: NDArray[np.bool_],
    time: str | None,
    time_col: Any,
    labels: list[str] | None,
    columns: dict[str, Any],
) -> Any:
    import polars as pl

    cols: dict[str, Any] = {}
    if time is not None:
        cols[time] = time_col.filter(pl.Series(keep)) if labels is None else labels
    return pl.DataFrame({**cols, **columns})
