"""keyed_counts' option groups (dpcount.keyed.spec): each validated on its own, the
0.4 keyword spelling mapped onto them, and the CLI building the same groups."""

from __future__ import annotations

import argparse
import inspect
from typing import Any

import pandas as pd
import pytest

from dpcount._cli import keyed as cli
from dpcount.keyed.events import EventColumns
from dpcount.keyed.run import keyed_counts
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.keyed.spec import (
    Bounds,
    Counting,
    Dask,
    Embedded,
    Engine,
    Keys,
    Late,
    Output,
    Spark,
    Steps,
    UnitScope,
    Window,
    from_keywords,
    to_keywords,
)
from dpcount.privacy import Budget

SECRET = unsafe_testing_secret(b"option groups test secret")
BUDGET = Budget(epsilon=1.0)


def _kw(**extra: Any) -> dict[str, Any]:
    base = dict(
        keys=["a", "b"], time_column="t", key_column="key", step=1, start=1, horizon=4,
        budget=BUDGET, secret=SECRET,
    )  # fmt: skip
    return {**base, **extra}


def test_keyed_counts_takes_at_most_ten_parameters() -> None:
    params = inspect.signature(keyed_counts).parameters
    assert len(params) <= 10
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert params["counting"].kind is inspect.Parameter.KEYWORD_ONLY


def test_each_group_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError, match="max_steps bounds a unit over the whole run"):
        Bounds(max_keys=2, max_steps=3)
    with pytest.raises(ValueError, match="unit_scope must be one of"):
        Bounds(scope="user")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="late must be one of refuse, next-step"):
        Window(late="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="late='next-step' needs state="):
        Window(late=Late.NEXT_STEP).check()
    with pytest.raises(ValueError, match="state= needs until="):
        Window("run.state").check()
    Window("run.state", until=3).check()  # a window that can be released
    with pytest.raises(ValueError, match="either output= or on_chunk="):
        Output("out.csv", on_chunk=lambda lo, values: None)
    with pytest.raises(ValueError, match="sink= alone"):
        Output("out.csv", sink=lambda job, chunks: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="chunk_keys must be a positive integer"):
        Output(chunk_keys=True)
    with pytest.raises(ValueError, match="std_digits"):
        Output(std_digits=18)
    with pytest.raises(TypeError, match="budget must be a Budget"):
        Counting(budget=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k and subtract are options of the k-ary tree"):
        Counting(budget=BUDGET, k=3)
    with pytest.raises(TypeError, match="selection must be a KeySelection"):
        Keys(selection=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Dask(workers=0)
    with pytest.raises(TypeError, match="partitions must be an integer"):
        Spark(partitions=1.5)  # type: ignore[arg-type]


def test_closed_choices_are_enums_taking_their_old_strings() -> None:
    assert Bounds(scope="run").scope is UnitScope.RUN  # type: ignore[arg-type]
    assert Window("s", until=2, late="next-step").late is Late.NEXT_STEP  # type: ignore[arg-type]
    assert [r.engine for r in (Embedded(), Dask(), Spark())] == list(Engine)
    assert Engine.DASK == "dask" and f"{Late.NEXT_STEP}" == "next-step"


def test_a_group_in_the_wrong_place_is_a_type_error_naming_it() -> None:
    events = pd.DataFrame({"t": [1, 2], "key": ["a", "b"]})
    groups = from_keywords(**_kw())
    groups["columns"], groups["keys"] = groups["keys"], groups["columns"]
    with pytest.raises(TypeError, match="columns must be a EventColumns option group"):
        keyed_counts(events, **groups)
    with pytest.raises(TypeError, match="runner must be a runner option group"):
        keyed_counts(events, **{**from_keywords(**_kw()), "runner": "dask"})


def test_the_old_keywords_map_onto_the_groups_and_back() -> None:
    groups = from_keywords(
        **_kw(weight_column="w", unit_column="u", max_keys=2, unit_scope="run", max_steps=2)
    )
    assert groups["columns"] == EventColumns("t", "key", "w", "u")
    assert groups["bounds"] == Bounds(1, 2, UnitScope.RUN, 2, None)
    assert groups["counting"] == Counting("auto", budget=BUDGET)
    assert groups["keys"] == Keys(["a", "b"]) and groups["steps"] == Steps(1, 1, 4)
    assert groups["runner"] == Embedded() and groups["window"] == Window()
    again = from_keywords(**to_keywords(groups))
    assert {k: v for k, v in again.items() if k != "window"} == {
        k: v for k, v in groups.items() if k != "window"
    }
    dask = from_keywords(**_kw(engine="dask", workers=3, partitions=4))["runner"]
    assert dask == Dask(None, 3, 4)
    with pytest.raises(ValueError, match="master= is a Spark option"):
        from_keywords(**_kw(master="local[2]"))
    with pytest.raises(ValueError, match="scheduler= is a Dask option"):
        from_keywords(**_kw(engine="spark", scheduler="tcp://x:1"))
    with pytest.raises(ValueError, match="engine must be one of"):
        from_keywords(**_kw(engine="flink"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        from_keywords(**_kw(colour=1))
    with pytest.raises(TypeError, match="missing required keyword argument 'step'"):
        from_keywords(**{k: v for k, v in _kw().items() if k != "step"})


def _cli_args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(flags))


def test_the_cli_builds_the_same_groups_as_the_library() -> None:
    args = _cli_args(
        "events.csv", "--time-column", "t", "--key-column", "key", "--keys", "keys.txt",
        "--step", "1", "--start", "1", "--horizon", "4", "--epsilon", "1", "--secret",
        "run.key", "--output", "out.csv", "--unit-column", "u", "--max-keys", "2",
        "--unit-scope", "run", "--engine", "dask", "--partitions", "3",
        "--state", "run.state", "--until", "2", "--late", "next-step",
    )  # fmt: skip
    groups = cli._groups(args, None, progress=print)
    library = from_keywords(
        keys="keys.txt", time_column="t", key_column="key", unit_column="u", step="1",
        start="1", horizon=4, budget=Budget(epsilon=1.0, noise="discrete-laplace"),
        max_keys=2, unit_scope="run", secret="run.key", engine="dask", partitions=3,
        state="run.state", until=2, late="next-step", output="out.csv", std_digits=4,
        progress=print,
    )  # fmt: skip
    assert groups == library
    assert groups["runner"] == Dask(None, 2, 3) and groups["window"].late is Late.NEXT_STEP
