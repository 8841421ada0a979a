"""Canonical keys and unit ids: one identity across files, types and runs.

An event log read from several files (an ``--input-dir`` folder of CSV and Parquet
files, runs continuing a state) gives the same key or unit in different types: ``"7"``
from a CSV (whose ids are read as text, so that ``"007"`` stays ``"007"``), ``7`` from
an int64 Parquet column, ``7.0`` from a float64 one (a column with a missing value).
Compared by type they would be two units — each bounded on its own, so one person's
events would count twice the bound — or two keys. Here they are one:

* **canonical text** (:func:`canonical_text`): text is itself; an integer is its
  decimal digits; a float (or decimal) the exact decimal of its shortest text — what
  a CSV writer prints — with no exponent and no trailing zeros (``7``, ``7.0``,
  ``np.int8(7)`` → ``"7"``; ``1e20`` → ``"100000000000000000000"``; ``7.5``,
  ``Decimal("7.50")`` → ``"7.5"``; ``np.float32(0.1)`` → ``"0.1"``); a boolean
  ``"True"``/``"False"``. Two keys are one key when their canonical texts are equal:
  a public universe given as text (a keys file) matches integer keys, and an integer
  universe matches text keys written as its digits.
* **unit ids** (:func:`unit_text`) are compared as numbers also when written as text:
  ``"7.0"`` (a float column written to CSV), ``"+7"``, ``"007"`` and ``7`` are one
  unit, and ``True`` is unit 1. Merging two ids into one unit can only tighten the
  bound (the merged unit keeps at most what one unit may), so it is safe for privacy;
  the guarantee then protects the canonical unit, a superset of each raw id's events.
  Keys are not parsed that way: a key is public output, and ``"007"`` and ``"7"``, ``"1.10"`` and
  ``"1.1"`` are different keys. A float unit id beyond 2^53 is refused
  (:func:`dpcount.keyed.events.check_unit_floats`): such a float is no exact integer,
  so it could not be matched with the same unit's integer id.

The canonical form is a function of the id alone (never of which other ids occur or
of the order of files), so it is the same in every file, partition and run: the unit
ledger and the open key table of a state (:mod:`dpcount.keyed.state`) store it, and
a state written by dpcount 0.4 is read through it (:meth:`UnitLedger.canonical
<dpcount.keyed.bounds.UnitLedger.canonical>`).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = [
    "EXACT_FLOAT",
    "as_int_keys",
    "canonical_text",
    "ids_as_text",
    "key_texts",
    "open_keys",
    "unit_ids",
    "unit_text",
    "unit_texts",
]

#: the canonical text of an integer: no sign but a minus, no leading zero
_INT_TEXT = re.compile(r"0|-?[1-9][0-9]*")
#: a decimal number as text (a unit id written by a float column, ``"+7"``, ``"007"``)
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: numbers as text beyond 10^±400 stay text (no million-digit integers from "1e999999";
#: every finite float is within)
_MAX_EXPONENT = 400
#: floats up to 2^53 are integers exactly when whole, and their text is those digits
EXACT_FLOAT = 2.0**53
_INT64_MAX = np.iinfo(np.int64).max


def _decimal_text(value: Decimal) -> str:
    """An exact finite decimal's canonical text: digits of an integer, else the plain
    (no exponent) normalized decimal."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def canonical_text(value: Any) -> str:
    """The canonical text of one key or unit id (module docstring): values equal as
    numbers, or a number and the text of its digits, have the same text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            return repr(float(value))
        # the shortest text that reads back as the value (what a CSV writer prints), as
        # an exact decimal: 7.0 -> "7", 1e20 -> 10^20's digits, np.float32(0.1) -> "0.1"
        return _decimal_text(Decimal(str(value)))
    if isinstance(value, Decimal) and value.is_finite():
        return _decimal_text(value)
    return str(value)


def unit_text(value: Any) -> str:
    """The canonical text of a unit id: :func:`canonical_text`, a number written as text
    (``"7.0"``, ``"+7"``, ``"007"``, ``"7e0"``) as that number's, and a boolean as the
    number it equals (``True`` is unit 1, as Python and pandas group it)."""
    if isinstance(value, (bool, np.bool_)):  # True == 1 as numbers: never two units
        return str(int(value))
    text = canonical_text(value)
    if not isinstance(value, str) or _INT_TEXT.fullmatch(text) or not _NUMBER_TEXT.fullmatch(text):
        return text
    try:
        number = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern admits decimals only
        return text
    if abs(number.adjusted()) > _MAX_EXPONENT:
        return text
    return _decimal_text(number)


def _per_distinct(values: pd.Series, rule: Any) -> NDArray[Any]:
    """``rule`` applied to each distinct value once (ids repeat over events)."""
    codes, distinct = pd.factorize(values.to_numpy(dtype=object), use_na_sentinel=False)
    texts = np.array([rule(v) for v in distinct], dtype=object)
    out: NDArray[Any] = texts[codes] if len(codes) else np.zeros(0, dtype=object)
    return out


def _is_int(values: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
        values.dtype
    )


def _fits_int64(values: pd.Series) -> bool:
    if pd.api.types.is_unsigned_integer_dtype(values.dtype) and len(values):
        return int(values.max()) <= _INT64_MAX
    return True


def unit_ids(values: pd.Series | NDArray[Any]) -> NDArray[Any]:
    """Each unit id's identity: int64 when the ids are an integer column (equal ints
    are equal texts: no conversion, the fast path), else the :func:`unit_text` of each
    (object array of str). Ids equal by :func:`unit_text` get equal identities in either
    form, and a concatenation of both forms is compared through :func:`unit_ids` again
    (the ints become text)."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if _is_int(s) and _fits_int64(s):
        out: NDArray[Any] = s.to_numpy(np.int64)
        return out
    if pd.api.types.is_float_dtype(s.dtype):
        f = s.to_numpy(np.float64)
        if bool((np.isfinite(f) & (f == np.floor(f)) & (np.abs(f) <= EXACT_FLOAT)).all()):
            out = f.astype(np.int64)
            return out
    if _all_text(s):  # most ids keep their text: only numbers not written canonically change
        arr: NDArray[Any] = s.to_numpy(dtype=object)
        change = _not_canonical_numbers(arr)
        if change.any():
            arr = arr.copy()
            arr[change] = [unit_text(v) for v in arr[change]]
        return arr
    return _per_distinct(s, unit_text)


def _not_canonical_numbers(texts: NDArray[Any]) -> NDArray[np.bool_]:
    """Which texts are numbers not written as an integer's canonical text (what
    :func:`unit_text` changes), by two RE2 passes in Arrow: 0.4 s for 10^6 ids, where
    Python's ``re`` per value took 0.9 s (measured on the shared machine)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = pa.array(texts, type=pa.string())
    number = pc.match_substring_regex(column, f"^(?:{_NUMBER_TEXT.pattern})$")
    canonical = pc.match_substring_regex(column, f"^(?:{_INT_TEXT.pattern})$")
    out: NDArray[np.bool_] = pc.and_(number, pc.invert(canonical)).to_numpy(zero_copy_only=False)
    return out


def _all_text(values: pd.Series) -> bool:
    """Whether every value is a string (a C-level scan of an object column)."""
    if values.dtype == object:
        return bool(pd.api.types.infer_dtype(values, skipna=False) == "string")
    return pd.api.types.is_string_dtype(values.dtype) and not values.isna().any()


def unit_texts(values: pd.Series | NDArray[Any]) -> NDArray[Any]:
    """:func:`unit_ids` as text (the unit ledger stores units by their text)."""
    return ids_as_text(unit_ids(values))


def ids_as_text(ids: NDArray[Any]) -> NDArray[Any]:
    """Identities of :func:`unit_ids` as text (int64 ids as their digits)."""
    if ids.dtype == np.int64:
        out: NDArray[Any] = ids.astype(str).astype(object)
        return out
    return ids


def key_texts(values: pd.Series | NDArray[Any]) -> NDArray[Any]:
    """The :func:`canonical_text` of every key (object array of str)."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if _is_int(s):
        out: NDArray[Any] = s.astype(str).to_numpy(dtype=object)
        return out
    if _all_text(s) or (pd.api.types.is_string_dtype(s.dtype) and s.dtype != object):
        out = s.to_numpy(dtype=object)  # text is its own canonical text (missing: no key)
        return out
    return _per_distinct(s, canonical_text)


def as_int_keys(values: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Keys as int64 for an integer key universe, and which of them are integers (a key
    whose :func:`canonical_text` is an integer's digits: ``7``, ``7.0``, ``"7"``; not
    ``"007"``, ``7.5`` or ``True``)."""
    n = len(values)
    if _is_int(values) and _fits_int64(values):
        return values.to_numpy(np.int64), np.ones(n, dtype=bool)
    if pd.api.types.is_float_dtype(values.dtype):
        f = values.to_numpy(np.float64)
        ok = np.isfinite(f) & (f == np.floor(f)) & (np.abs(f) <= EXACT_FLOAT)
        if not (np.isfinite(f) & (np.abs(f) > EXACT_FLOAT)).any():
            return np.where(ok, f, 0).astype(np.int64), ok
        # beyond 2^53: by their canonical text (1e18 is 10^18; 2^60 as a float is not 2^60)
    import pyarrow as pa
    import pyarrow.compute as pc

    # one RE2 pass and one cast in Arrow: a Python loop over 10^6 text keys took 4.7 s
    column = pa.array(key_texts(values), type=pa.string(), from_pandas=True)
    canonical = pc.fill_null(pc.match_substring_regex(column, f"^(?:{_INT_TEXT.pattern})$"), False)
    ok = canonical.to_numpy(zero_copy_only=False)
    short = ok & (pc.utf8_length(column).to_numpy(zero_copy_only=False) <= 18)
    out = np.zeros(n, dtype=np.int64)
    if short.any():
        digits = pc.filter(column, pa.array(short))
        out[short] = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(ok & ~short):  # 19 or 20 characters: may not fit int64
        value = int(column[int(i)].as_py())
        ok[i] = -_INT64_MAX - 1 <= value <= _INT64_MAX
        out[i] = value if ok[i] else 0
    return out, ok


def open_keys(values: pd.Series, prior: tuple[Any, ...] = ()) -> tuple[list[Any], list[Any]]:
    """An open key set's table: the ``prior`` keys (of earlier runs, positions kept) and
    the distinct new keys of ``values``, as one type. Integers while the key column is
    an integer column and the table holds integers; otherwise every key as its
    :func:`canonical_text` (the table turns to text, positions kept). Which form the
    table takes depends on the columns' types and the stored table, never on which
    values occur (a text key that is never released does not change the others' form).

    Raises:
        ValueError: two stored keys with one canonical text (a table written by
            dpcount 0.4 from mixed types).
    """
    s = values.dropna()
    integers = _is_int(s) and _fits_int64(s) and all(isinstance(k, int) for k in prior)
    if integers:
        new = [int(v) for v in pd.unique(s.to_numpy(np.int64))]
        return list(prior), new
    table = [canonical_text(k) for k in prior]
    if len(set(table)) != len(table):
        seen: dict[str, Any] = {}
        for key, text in zip(prior, table, strict=True):
            if text in seen:
                raise ValueError(
                    f"the stored key table holds {seen[text]!r} and {key!r}, one key "
                    "(equal as numbers or as text): start a new run with a new secret"
                )
            seen[text] = key
    return table, [str(v) for v in pd.unique(key_texts(s))]
