"""Data frames in, data frames out: private running counts of a pandas or polars column.

``private_counts(frame, value="cases", time="date", budget=Budget(epsilon=1.0))``
releases the running counts (prefix sums) of the column ``value`` with the exact
standard deviation of each release, and returns a frame of the same library
holding the time column (if named), ``private_count`` and ``std``; a pandas result
keeps the input's index. pandas and polars are optional (``pip install
'dpcount[frame]'`` installs pandas): neither is imported unless a frame of it is
passed.

It offers what ``dpcount count`` offers on a file, through the same library
calls, and gives the same numbers for the same seed: the mechanism and noise of
:func:`dpcount.analysis.choice.choose` (``auto`` by default; integer noise for
whole-number data), ``step=`` bucketing of a time column or of a DatetimeIndex
(``start=``, ``horizon=``; :func:`dpcount._events.sum_steps`, as ``count --step``:
pandas' bins and labels, each row one event cut to the step sensitivity),
counting rows (``value=None`` with ``step=``), ``where=`` filters applied inside
(a row that fails one counts 0 but keeps its time, so the steps span the whole
frame), ``missing=`` and the post-processing ``monotone``/``clamp``/``round``
(then ``private_count`` is post-processed and ``raw_private_count``/``raw_std``
follow, as in the CLI). What the CLI prints on stderr as a warning is issued here
as a :class:`~dpcount.privacy.PrivacyWarning`: why the noise stays continuous, a δ
above 1e-3, a start or horizon read off the data; its notes (rows cut to the
bound, rows outside the steps dropped, rows not matching ``where``) are in
``result.attrs["notes"]``, with their exact numbers in ``result.attrs["report"]``
(exact, not private). polars frames have no ``attrs``: a polars result carries
the same dictionary as its attribute ``attrs``.

A frame with more than one column must name ``value``: nothing is guessed (a
two-column frame such as YEAR, SUNACTIVITY would otherwise be read as a
two-dimensional stream and the years noised).

Privacy: the guarantee of the chosen mechanism (its ``privacy.describe()``,
also in ``result.attrs["privacy"]``) for streams that differ at one step by at
most the budget's ``step_sensitivity``; with ``step=``, each row is one event,
its value cut to at most ``step_sensitivity`` in absolute value, so logs that
differ in one row differ at one step by at most that (the per-event bound is
part of ``attrs["privacy"]``). The ``std`` (or ``raw_std``) column is exact and data-independent; it
describes the raw release, not post-processed values.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount._events import ABOVE_POLICIES, Bucketing, StepSums, bound_text, cut_note, outside_note
from dpcount._events import sum_steps as _sum_steps
from dpcount.analysis.choice import Choice, choose
from dpcount.counting.base import CountingMechanism
from dpcount.io import Condition, parse_where
from dpcount.postprocess import MONOTONE_NOTE, round_half_even
from dpcount.postprocess import clamp as clamp_negative
from dpcount.postprocess import monotone as isotonic
from dpcount.privacy.budget import Budget, refuses_loose_budget
from dpcount.privacy.notes import PrivacyWarning, data_derived_warning
from dpcount.privacy.rng import RNGLike

__all__ = ["choose_mechanism", "private_counts"]

_MISSING = ("error", "skip", "zero")


@refuses_loose_budget("epsilon", "delta")
def choose_mechanism(horizon: int, *, budget: Budget, whole: bool = True) -> dict[str, Any]:
    """The keywords of :func:`~dpcount.counting.registry.build_mechanism` (``name``,
    ``budget`` and the options) for the choice ``mechanism="auto"`` makes
    (:func:`dpcount.analysis.choice.choose`, as ``dpcount count --mechanism auto``).
    The budget's fields loose or by position (0.4) were removed in 0.5: a TypeError
    names the replacement.
    """
    resolved = Budget.check(budget, owner="choose_mechanism")
    choice = choose(horizon, budget=resolved, whole=whole)
    return {"name": choice.mechanism, "budget": choice.budget, **choice.options}


def _kind(data: Any) -> str:
    module = type(data).__module__.split(".")[0]
    if module in ("pandas", "polars"):
        return module
    raise TypeError(
        f"data must be a pandas or polars DataFrame or Series, got {type(data).__name__}"
    )


def _conditions(where: Any) -> tuple[Condition, ...]:
    """``where=`` as conditions: a mapping column → value (equality) or list of values
    (one of them), a string in ``--where``'s syntax (``"weather!=sun"``, ``"weather in
    rain,drizzle"``) or a list of such strings. Cells are compared as text, stripped,
    as the CLI reads a CSV."""
    if where is None:
        return ()
    if isinstance(where, Condition):
        return (where,)
    if isinstance(where, str):
        return (parse_where(where, "where"),)
    if isinstance(where, Mapping):
        out = []
        for column, wanted in where.items():
            if not isinstance(column, str):
                raise TypeError(f"where: column names must be strings, got {column!r}")
            many = isinstance(wanted, (list, tuple, set, frozenset))
            values = sorted(map(str, wanted)) if isinstance(wanted, (set, frozenset)) else (
                list(map(str, wanted)) if many else [str(wanted)]
            )  # fmt: skip
            if not values:
                raise ValueError(f"where: the list of values of {column!r} is empty")
            out.append(Condition(column, tuple(v.strip() for v in values)))
        return tuple(out)
    if isinstance(where, (list, tuple)):
        return tuple(c for item in where for c in _conditions(item))
    raise TypeError(
        "where must be a mapping column -> value (or list of values), a condition string "
        f"such as 'weather!=sun', or a list of them; got {type(where).__name__}"
    )


def _column(data: Any, name: str, label: str) -> Any:
    names = [str(c) for c in data.columns]
    if name not in names:
        raise ValueError(f"{label} column {name!r} is not in the frame's columns {names}")
    return data[name]


def _columns(data: Any, value: str | None, time: str | None, rows: bool) -> tuple[Any, Any]:
    """(value column or None when counting rows, time column or None) as library
    Series, refusing ambiguity."""
    if type(data).__name__ == "Series":
        if time is not None:
            raise ValueError("time must be None for a Series (its index is kept)")
        if value is not None and value != data.name:
            raise ValueError(f"value {value!r} is not the Series' name {data.name!r}")
        return data, None
    names = [str(c) for c in data.columns]
    if value is None and not rows:
        if len(names) != 1:
            raise ValueError(
                f"data has {len(names)} columns {names}: name the one to count with value= "
                "(and the time column with time=), or count rows with step= and no value; "
                "a frame is never read as a multi-dimensional stream"
            )
        value = names[0]
    if time is not None and time == value:
        raise ValueError(f"time and value must be different columns, got {value!r} for both")
    column = None if value is None else _column(data, value, "value")
    return column, (None if time is None else _column(data, time, "time"))


def _index_times(data: Any, step: str | None, time: str | None) -> Any:
    """The DatetimeIndex of a pandas input to bucket by (``step=`` and no ``time=``),
    or None."""
    if step is None or time is not None:
        return None
    index = getattr(data, "index", None)
    if type(index).__name__ != "DatetimeIndex":
        raise ValueError(
            "step needs time (the column of times to bucket) or a pandas DatetimeIndex"
        )
    return index


def _matched(data: Any, conditions: tuple[Condition, ...]) -> NDArray[np.bool_]:
    """Which rows pass every condition (cells compared as stripped text)."""
    n = len(data)
    ok = np.ones(n, dtype=bool)
    for c in conditions:
        cells = _column(data, c.column, "where")
        text = [str(v).strip() for v in cells.to_list()]
        ok &= np.fromiter((c.matches(t) for t in text), dtype=bool, count=n)
    return ok


def _values(
    column: Any, missing: str, matched: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], NDArray[np.bool_], int]:
    """The column as float64 (0 where a row fails ``where``), a mask of the rows kept
    (``missing`` policy, applied to the matching rows, as the CLI) and how many
    missing values were skipped or read as 0."""
    arr = column.to_numpy()
    try:
        values = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"value column {column.name!r} must hold numbers") from None
    values = np.where(matched, values, 0.0)
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
    return values, keep, int(absent.sum())


@dataclass
class _Rows:
    """The rows to release: values per step, their time labels and what was done."""

    values: NDArray[np.float64]
    labels: list[Any] | None
    keep: NDArray[np.bool_]
    bucketed: StepSums | None = None
    notes: list[str] = field(default_factory=list)
    report: dict[str, float] = field(default_factory=dict)


def _time_texts(times: Any, keep: NDArray[np.bool_]) -> list[str]:
    """The kept times as the text the CLI reads: datetime64 values as ISO timestamps
    to the microsecond (the clock's resolution; what ``datetime.fromisoformat`` of
    Python 3.10 reads), anything else by ``str``."""
    arr = np.asarray(times.to_numpy())[keep]
    if np.issubdtype(arr.dtype, np.datetime64):
        return [str(t) for t in arr.astype("datetime64[us]")]
    return [str(t) for t in arr]


def _label_values(bucketed: StepSums) -> list[Any]:
    """Each step's label as a value: a datetime (naive UTC) or a number."""
    labels = [bucketed.clock.label_value(k) for k in range(1, len(bucketed.sums) + 1)]
    numbers = [v for v in labels if isinstance(v, float)]
    if len(numbers) == len(labels) and all(v.is_integer() for v in numbers):
        return [int(v) for v in numbers]
    return labels


def _rows(data: Any, request: _Request) -> _Rows:
    """What ``private_counts`` counts: the values (with ``step=``: summed per step by
    :func:`dpcount._events.sum_steps`), filtered, bounded and cut at the horizon."""
    column, time_col = _columns(data, request.value, request.time, request.count_rows)
    index_times = _index_times(data, request.step, request.time)
    matched = _matched(data, request.where)
    if request.where and not matched.any():
        texts = ", ".join(c.text() for c in request.where)
        raise ValueError(f"no row matches where {texts}")
    if column is None:
        values, keep, missing = matched.astype(np.float64), np.ones(len(matched), bool), 0
    else:
        values, keep, missing = _values(column, request.missing, matched)
    report: dict[str, float] = {"rows": len(values), "unmatched": int((~matched).sum())}
    report["missing"] = missing  # skipped or read as 0 (missing="skip"/"zero")
    values = values[keep]
    if len(values) == 0:
        raise ValueError("data has no rows to count")
    if request.step is None:
        return _cut_at_horizon(values, keep, request.horizon, report)
    times = _time_texts(index_times if index_times is not None else time_col, keep)
    how = Bucketing(
        request.step, request.start, request.horizon, request.bound, request.above_bound,
        ("step", "start", "horizon", "budget.step_sensitivity", "above_bound"),
    )  # fmt: skip
    bucketed = _sum_steps(values, times, how, lambda i: f"row {int(np.flatnonzero(keep)[i])}")
    report.update(cut=bucketed.cut, cut_weight=bucketed.cut_weight, outside=bucketed.outside)
    out = _Rows(bucketed.sums, _label_values(bucketed), keep, bucketed, report=report)
    if bucketed.cut:
        out.notes.append(
            cut_note(bucketed.cut, bucketed.cut_weight, request.bound, "step_sensitivity")
        )
    horizon = request.horizon if request.horizon is not None else len(bucketed.sums)
    if bucketed.outside:
        out.notes.append(outside_note(bucketed.outside, horizon, "horizon", "start"))
    return out


def _cut_at_horizon(
    values: NDArray[np.float64], keep: NDArray[np.bool_], horizon: int | None,
    report: dict[str, float],
) -> _Rows:  # fmt: skip
    """Without ``step``: every row is a step; rows after the horizon are dropped and
    reported (the rule of ``dpcount count`` and ``dpcount keyed``)."""
    out = _Rows(values, None, keep, report=report)
    report["outside"] = 0
    if horizon is not None and horizon < len(values):
        report["outside"] = len(values) - horizon
        out.values = values[:horizon]
        kept = np.flatnonzero(keep)
        out.keep = keep.copy()
        out.keep[kept[horizon:]] = False
        out.notes.append(outside_note(len(values) - horizon, horizon, "horizon", None))
    return out


@dataclass(frozen=True)
class _Request:
    """The row options of :func:`private_counts`, checked."""

    value: str | None
    time: str | None
    where: tuple[Condition, ...]
    step: str | None
    start: Any
    horizon: int | None
    missing: str
    bound: float
    above_bound: str
    #: counting rows: a frame, no value column, with ``step`` (each row counts 1)
    count_rows: bool

    def check(self, data: Any) -> None:
        if self.where and type(data).__name__ == "Series":
            raise ValueError("where needs a DataFrame (the columns its conditions name)")
        if self.missing not in _MISSING:
            raise ValueError(f"missing must be one of {_MISSING}, got {self.missing!r}")
        if self.above_bound not in ABOVE_POLICIES:
            raise ValueError(
                f"above_bound must be one of {ABOVE_POLICIES}, got {self.above_bound!r}"
            )
        if self.step is None and self.start is not None:
            raise ValueError("start needs step")
        if self.step is None and self.above_bound != "cut":
            raise ValueError("above_bound needs step (without it a row is a step)")
        if (
            self.where
            and self.value is None
            and self.step is None
            and (type(data).__name__ != "Series")
        ):
            raise ValueError(
                "counting rows (no value) needs step: without it every step is one row, "
                "so every count is 1; pass value= to sum a numeric column"
            )
        wrong = isinstance(self.horizon, bool) or not isinstance(self.horizon, (int, np.integer))
        if self.horizon is not None and wrong:
            raise TypeError(f"horizon must be an int, got {self.horizon!r}")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon!r}")


@refuses_loose_budget()
def private_counts(
    data: Any,
    *,
    value: str | None = None,
    time: str | None = None,
    where: Any = None,
    budget: Budget,
    mechanism: str = "auto",
    horizon: int | None = None,
    step: str | None = None,
    start: Any = None,
    missing: str = "error",
    above_bound: str = "cut",
    monotone: bool = False,
    clamp: bool = False,
    round: bool = False,
    k: int | None = None,
    subtract: bool | None = None,
    bands: int | None = None,
    rng: RNGLike = None,
) -> Any:
    """Private running counts of one column of a pandas or polars frame (or a Series),
    or of its rows per time step: ``dpcount count``'s options, the same numbers.

    Args:
        data: a pandas/polars DataFrame or Series, one row per time step, in order
            (with ``step``: one row per event or record, bucketed by ``time`` or by a
            pandas DatetimeIndex).
        value: the column to count; required when the frame has several columns,
            except with ``step``: then no ``value`` counts rows (each row counts 1,
            ``dpcount count --step`` without ``--column``).
        time: a column copied into the result (dates, timestamps or ids); with
            ``step``, the times to bucket (the result holds each step's label, a
            datetime, or a number for numeric times). With ``step`` and no ``time``,
            a pandas DatetimeIndex is bucketed and the result is indexed by the
            steps' labels, as ``resample``.
        where: row filters, as ``count --where``: a mapping column → value (equality)
            or → list of values (one of them), a condition string (``"weather!=sun"``,
            ``"weather in rain,drizzle"``, ``"weather not in rain,drizzle"``) or a list
            of strings; all must hold; cells are compared as stripped text. A row that
            fails counts 0 but keeps its time: the steps (start, horizon) come from
            the whole frame, as the CLI's.
        budget: the :class:`~dpcount.privacy.Budget` (ε, δ, an optional noise kind
            and rule, the step sensitivity; a participation schema is calibrated for).
        mechanism: ``"auto"`` (:func:`dpcount.analysis.choice.choose`, as ``dpcount
            count --mechanism auto``) or a registry name (``"kary"``...).
        horizon: steps the noise is calibrated for (default: the steps used); rows
            after step ``horizon`` are dropped and reported in ``attrs`` (the rule of
            ``dpcount count`` and ``dpcount keyed``).
        step: bucket width for ``time`` (``"1D"``, ``"6h"``, ``"15min"``, calendar
            steps ``"MS"``, ``"QS"``, ``"YS"``, ``"W-MON"``, a number for numeric times;
            :func:`dpcount._time.parse_step`), binned and labelled as pandas'
            ``resample``: a step's value is the sum of its rows, each row one event
            whose value is cut to at most the budget's ``step_sensitivity`` in absolute
            value (see ``above_bound``).
        start: with ``step``, where step 1 starts (default: pandas' first bin of the
            earliest time, which the release then reveals: a PrivacyWarning says so);
            rows before it are dropped and reported.
        missing: ``"error"`` (default), ``"skip"`` (drop rows with a missing value;
            they are absent from the result, and the number of steps reveals how
            many) or ``"zero"``.
        above_bound: with ``step``: ``"cut"`` (default: a row above the bound is cut
            to it, counted in ``attrs["report"]["cut"]``) or ``"error"`` (ValueError
            naming the row).
        monotone, clamp, round: post-processing of the release, in this order
            (:mod:`dpcount.postprocess`); the guarantee is unchanged.
        k, subtract, bands: structure options of a named ``kary`` (``k``,
            ``subtract``) or ``toeplitz`` (``bands``).
        rng: None (OS-entropy CSPRNG) or a seed/generator (research only).

    Returns:
        A frame of the input's library: the time column (if named), then
        ``private_count`` and ``std`` (with post-processing: ``private_count``,
        ``raw_private_count``, ``raw_std``); pandas keeps the index of the rows used
        (without ``step``). ``attrs`` (pandas' ``DataFrame.attrs``; for polars an
        attribute of the result) holds ``"mechanism"``, ``"privacy"`` (the
        guarantee, with the per-event bound under ``step``), ``"choice"`` (how
        ``auto`` chose, or None), ``"notes"`` (the notes ``dpcount count`` prints for
        the same run: continuous noise and why, Honaker's estimate rounded, the
        monotone fit's error, rows cut, dropped or not matching) and ``"report"``
        (exact, not private: ``rows``, ``unmatched``, ``cut``, ``cut_weight``,
        ``outside``). With integer noise the counts are whole numbers: Honaker's
        estimate is rounded (:meth:`dpcount.analysis.choice.Choice.finish`; the std
        describes the unrounded estimate, rounding moves each value by at most 0.5).

    Warns:
        PrivacyWarning: continuous noise (and why), a δ above 1e-3, a start or
            horizon taken from the data.
    """
    resolved = Budget.check(budget, owner="private_counts")
    kind = _kind(data)
    rows_only = value is None and step is not None and type(data).__name__ != "Series"
    request = _Request(value, time, _conditions(where), step, start, horizon, missing,
                       float(resolved.step_sensitivity), above_bound, rows_only)  # fmt: skip
    request.check(data)
    rows = _rows(data, request)
    derived = [name for name, given in (("start", start), ("horizon", horizon)) if given is None]
    if step is not None and derived:
        warnings.warn(data_derived_warning(derived), PrivacyWarning, stacklevel=2)
    T = len(rows.values) if horizon is None else horizon
    options = {
        n: v for n, v in (("k", k), ("subtract", subtract), ("bands", bands)) if v is not None
    }
    values = rows.values
    whole = bool(np.all(np.isfinite(values) & (values == np.round(values))))
    choice = choose(T, budget=resolved, mechanism=mechanism, whole=whole, options=options)
    mech = _build(choice, rng)
    raw = choice.finish(mech.release(values))
    std = np.sqrt(mech.variances()[: len(values)])
    post = _postprocess(raw, monotone=monotone, clamp=clamp, round=round)
    columns = _result_columns(raw, std, post)
    attrs = _attrs(mech, choice, rows, request, post is not None, monotone)
    if kind == "pandas":
        return _pandas(data, request, rows, columns, attrs)
    return _polars(data, request, rows, columns, attrs)


def _attrs(
    mech: CountingMechanism, choice: Choice, rows: _Rows, request: _Request, post: bool,
    monotone: bool,
) -> dict[str, Any]:  # fmt: skip
    """What the result says besides its numbers (``attrs``)."""
    privacy = mech.privacy.describe() if mech.privacy is not None else "none"
    if request.step is not None:
        privacy += f"; per event: {bound_text(request.bound, 'budget.step_sensitivity')}"
    notes = _notes(choice, post, monotone)
    if request.count_rows:
        notes.append("no value column: each row counts 1 (rows per step)")
    if request.where:
        texts = ", ".join(c.text() for c in request.where)
        notes.append(f"{rows.report['unmatched']} row(s) not matching where {texts} counted 0")
    return {
        "mechanism": repr(mech),
        "privacy": privacy,
        "choice": None if choice.auto is None else choice.auto.text(),
        "notes": notes + rows.notes,
        "report": dict(rows.report),
    }


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
    data: Any, request: _Request, rows: _Rows, columns: dict[str, Any], attrs: dict[str, Any]
) -> Any:
    import pandas as pd

    cols: dict[str, Any] = {}
    index: Any = None
    if rows.labels is None:
        index = data.index[rows.keep]
        if request.time is not None:
            cols[request.time] = data[request.time].to_numpy()[rows.keep]
    elif request.time is not None:
        cols[request.time] = _label_column(pd, rows.labels)
    else:  # a DatetimeIndex bucketed: indexed by the steps, as resample
        index = pd.DatetimeIndex(_label_column(pd, rows.labels), name=data.index.name)
    out = pd.DataFrame({**cols, **columns}, index=index)
    out.attrs.update(attrs)
    return out


def _label_column(pd: Any, labels: list[Any]) -> Any:
    """The steps' labels as a column: datetime64 for dates, else numbers."""
    if labels and not isinstance(labels[0], (int, float)):
        return pd.to_datetime(labels)
    return np.asarray(labels)


def _polars(
    data: Any, request: _Request, rows: _Rows, columns: dict[str, Any], attrs: dict[str, Any]
) -> Any:
    import polars as pl

    cols: dict[str, Any] = {}
    if request.time is not None and rows.labels is None:
        cols[request.time] = data[request.time].filter(pl.Series(rows.keep))
    elif request.time is not None and rows.labels is not None:
        cols[request.time] = pl.Series(request.time, rows.labels)
    out = pl.DataFrame({**cols, **columns})
    out.attrs = attrs  # type: ignore[attr-defined]  # polars has no attrs: an attribute
    return out
