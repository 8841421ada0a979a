"""The tests' :func:`keyed_counts`, :class:`KeyedMechanism` and :func:`make_job`: the
library's with the budget's fields, given loose by the tests (``epsilon=``,
``delta=``, ``noise=``, ``calibration=``, ``participation=``), moved into
``budget=Budget(...)`` (the library's loose spelling was removed in 0.5;
tests/keyed/test_budget.py checks it is refused, naming the replacement)."""

from __future__ import annotations

from typing import Any

from dpcount.keyed import engine, job, run
from dpcount.keyed.spec import from_keywords
from dpcount.privacy import Budget

#: the budget's fields that keyed_counts, KeyedMechanism and make_job accepted loose
#: until 0.4 (participation: KeyedMechanism only)
FIELDS = ("epsilon", "delta", "noise", "calibration", "participation")


def budgeted(kw: dict[str, Any]) -> dict[str, Any]:
    """``kw`` with its loose budget fields in ``budget=`` (None values left out: the
    budget's defaults); unchanged without loose fields."""
    fields = {name: kw.pop(name) for name in FIELDS if name in kw}
    if fields:
        kw["budget"] = Budget(**{k: v for k, v in fields.items() if v is not None})
    return kw


def keyed_counts(events: Any, **kw: Any) -> run.KeyedResult:
    """:func:`dpcount.keyed.run.keyed_counts` with :func:`budgeted` arguments, given
    in the 0.4 keyword spelling (:func:`dpcount.keyed.spec.from_keywords`)."""
    return run.keyed_counts(events, **from_keywords(**budgeted(kw)))


def keyed_mechanism(**kw: Any) -> engine.KeyedMechanism:
    """:class:`dpcount.keyed.engine.KeyedMechanism` with :func:`budgeted` arguments."""
    return engine.KeyedMechanism(**budgeted(kw))


def make_job(**kw: Any) -> tuple[job.KeyedJob, list[str]]:
    """:func:`dpcount.keyed.job.make_job` with :func:`budgeted` arguments."""
    return job.make_job(**budgeted(kw))
