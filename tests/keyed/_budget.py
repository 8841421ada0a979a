"""The tests' :func:`keyed_counts`: :func:`dpcount.keyed.run.keyed_counts` with the
budget's fields, given loose by the tests (``epsilon=``, ``delta=``, ``noise=``,
``calibration=``), moved into ``budget=Budget(...)`` (the loose spelling is
deprecated; tests/keyed/test_budget.py checks it warns and means the same)."""

from __future__ import annotations

from typing import Any

from dpcount.keyed import run
from dpcount.privacy import Budget

#: the budget's fields that keyed_counts accepted loose before 0.4
FIELDS = ("epsilon", "delta", "noise", "calibration")


def budgeted(kw: dict[str, Any]) -> dict[str, Any]:
    """``kw`` with its loose budget fields in ``budget=`` (None values left out: the
    budget's defaults); unchanged without loose fields."""
    fields = {name: kw.pop(name) for name in FIELDS if name in kw}
    if fields:
        kw["budget"] = Budget(**{k: v for k, v in fields.items() if v is not None})
    return kw


def keyed_counts(events: Any, **kw: Any) -> run.KeyedResult:
    """:func:`dpcount.keyed.run.keyed_counts` with :func:`budgeted` arguments."""
    return run.keyed_counts(events, **budgeted(kw))
