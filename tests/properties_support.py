"""Shared machinery for the bad-input property tests (tests/test_properties_*.py).

The error contract every public entry point of dpcount keeps (README "Errors"):

* a wrong *type* raises ``TypeError``, a wrong *value* raises ``ValueError``
  (``ImportError`` only for a missing optional extra);
* the message names the parameter (or the CSV line) and, for scalars, echoes the value;
* the error is raised by dpcount's own validation: the innermost traceback frame is a
  file of the dpcount package, never numpy's or scipy's;
* nothing is silently wrong: a value that is accepted gives the exact answer.

:func:`assert_rejects` checks the first three for one call. The ``bad_*`` strategies
draw values that must be refused, each paired with the exception type it must raise.
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

import dpcount

PACKAGE_DIR = Path(dpcount.__file__).resolve().parent

#: (value, expected exception type)
Bad = tuple[Any, type[Exception]]


def raising_frame(err: BaseException) -> str:
    """The file of the innermost frame of ``err``'s traceback (where it was raised)."""
    frames = traceback.extract_tb(err.__traceback__)
    return frames[-1].filename if frames else "<no frame>"


def echoes(message: str, value: Any) -> bool:
    """Whether ``message`` shows ``value`` (its repr, its str, or its float in any form)."""
    texts = {repr(value), str(value)}
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    ):
        x = float(value)
        texts |= {repr(x), str(x), f"{x:g}"}
        if x.is_integer() and math.isfinite(x):
            texts.add(str(int(x)))
    return any(t in message for t in texts)


def assert_rejects(
    call: Callable[[], Any],
    exc: type[Exception] | tuple[type[Exception], ...],
    names: str | Iterable[str],
    *,
    value: Any = None,
    echo: bool = False,
) -> BaseException:
    """``call()`` raises ``exc`` from dpcount's validation, naming one of ``names``.

    Args:
        call: the call under test.
        exc: the exception type(s) it must raise (never a bare ``Exception``).
        names: the parameter name(s) one of which the message must contain (a
            regular expression each).
        value: the offending value, echoed in the message when ``echo``.
        echo: require the message to echo ``value``.

    Returns:
        the exception (for further checks).
    """
    try:
        result = call()
    except Exception as err:
        if not isinstance(err, exc):
            raise AssertionError(
                f"expected {exc}, got {type(err).__name__}: {err}\n"
                + "".join(traceback.format_exception(err))
            ) from err
        msg = str(err)
        pats = [names] if isinstance(names, str) else list(names)
        if not any(re.search(p, msg) for p in pats):
            raise AssertionError(f"message does not name any of {pats}: {msg!r}") from err
        if echo and not echoes(msg, value):
            raise AssertionError(f"message does not echo {value!r}: {msg!r}") from err
        where = Path(raising_frame(err)).resolve()
        if PACKAGE_DIR not in where.parents:
            raise AssertionError(
                f"{type(err).__name__} raised outside dpcount ({where}): {msg}\n"
                + "".join(traceback.format_exception(err))
            ) from err
        return err
    raise AssertionError(f"expected {exc}, but the call returned {result!r}")


# -- bad scalar values -----------------------------------------------------------------

#: values of the wrong type for any real or integer parameter
WRONG_TYPES: tuple[Any, ...] = (
    True,
    False,
    "1",
    "",
    b"1",
    None,
    1 + 0j,
    np.complex128(1.0),
    [1.0],
    (1.0,),
    np.array([1.0]),
    object(),
)


def wrong_type(*, allow_none: bool = False) -> st.SearchStrategy[Bad]:
    values = [v for v in WRONG_TYPES if not (allow_none and v is None)]
    return st.sampled_from(values).map(lambda v: (v, TypeError))


def _non_finite() -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf"), -np.float64("inf")]
    )


def bad_positive_real(*, allow_none: bool = False) -> st.SearchStrategy[Bad]:
    """Refused by ``check_real(..., gt=0)``: NaN, ±inf, 0, negatives, wrong types."""
    values = st.one_of(
        _non_finite(),
        st.sampled_from([0, 0.0, -0.0, -1, np.int64(-3), np.float64(-1e-300), -1e308]),
        st.floats(max_value=0.0, allow_nan=False, allow_infinity=False),
        st.integers(max_value=0),
    )
    return st.one_of(values.map(lambda v: (v, ValueError)), wrong_type(allow_none=allow_none))


def bad_nonnegative_real() -> st.SearchStrategy[Bad]:
    values = st.one_of(
        _non_finite(),
        st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False),
        st.integers(max_value=-1),
    )
    return st.one_of(values.map(lambda v: (v, ValueError)), wrong_type())


def bad_probability(
    *, allow_none: bool = False, none_exc: type[Exception] = TypeError
) -> st.SearchStrategy[Bad]:
    """Refused as a δ: outside the open interval (0, 1), non-finite, wrong types.

    ``none_exc``: the error for None when None is not allowed (ValueError where None is
    a valid type but not for this noise, e.g. Gaussian noise without a delta).
    """
    values = st.one_of(
        _non_finite(),
        st.sampled_from([0, 0.0, 1, 1.0, -1e-9, 1 + 1e-12, 2, np.float64(1.0)]),
        st.floats(max_value=0.0, allow_nan=False, allow_infinity=False),
        st.floats(min_value=1.0, allow_nan=False, allow_infinity=False),
    )
    parts = [values.map(lambda v: (v, ValueError)), wrong_type(allow_none=True)]
    if not allow_none:
        parts.append(st.just((None, none_exc)))
    return st.one_of(*parts)


def bad_integer(minimum: int, *, maximum: int | None = None) -> st.SearchStrategy[Bad]:
    """Refused by ``check_integer(..., ge=minimum)``: small ints, floats, wrong types."""
    small = st.integers(max_value=minimum - 1).map(lambda v: (v, ValueError))
    parts: list[st.SearchStrategy[Bad]] = [
        small,
        st.sampled_from([np.int64(minimum - 1), np.int8(minimum - 1)]).map(
            lambda v: (v, ValueError)
        ),
        # a float is a wrong type for an integer parameter, even a whole one
        st.sampled_from([float(minimum) + 0.5, float(minimum + 1), math.nan, math.inf]).map(
            lambda v: (v, TypeError)
        ),
        st.sampled_from([np.float64(minimum + 1), Fraction(minimum + 1)]).map(
            lambda v: (v, TypeError)
        ),
        wrong_type(),
    ]
    if maximum is not None:
        parts.append(st.integers(min_value=maximum + 1).map(lambda v: (v, ValueError)))
    return st.one_of(*parts)


def bad_choice(options: Iterable[str]) -> st.SearchStrategy[Bad]:
    """Not one of ``options``: other strings (ValueError), non-strings (TypeError)."""
    opts = set(options)
    strings = st.one_of(
        st.sampled_from(["", " ", "LAPLACE", "gauss", "none", "analytic "]),
        st.text(max_size=8),
    ).filter(lambda s: s not in opts)
    return st.one_of(
        strings.map(lambda v: (v, ValueError)),
        st.sampled_from([1, 1.0, b"laplace", ["laplace"], True]).map(lambda v: (v, TypeError)),
    )


def bad_bool() -> st.SearchStrategy[Bad]:
    return st.sampled_from([1, 0, "True", "false", None, 1.0, [True]]).map(lambda v: (v, TypeError))


def bad_rng() -> st.SearchStrategy[Bad]:
    return st.one_of(
        st.integers(max_value=-1).map(lambda v: (v, ValueError)),
        st.sampled_from([1.5, "seed", True, [1, 2], np.random.RandomState(0), object(), 2.0]).map(
            lambda v: (v, TypeError)
        ),
    )


# -- bad arrays --------------------------------------------------------------------------


def bad_dtype_array(n: int, *, extra_shape: tuple[int, ...] = ()) -> st.SearchStrategy[Bad]:
    """Arrays of the right shape but a non-real dtype (TypeError)."""
    shape = (n, *extra_shape)
    return st.sampled_from(
        [
            np.full(shape, "a", dtype=object),
            np.full(shape, "1"),
            np.ones(shape, dtype=np.complex128),
            np.full(shape, None),
            np.full(shape, np.datetime64("2020-01-01")),
        ]
    ).map(lambda v: (v, TypeError))


@st.composite
def non_finite_array(
    draw: st.DrawFn, n: int, *, extra_shape: tuple[int, ...] = ()
) -> tuple[Any, tuple[int, ...], float]:
    """A finite float array with one NaN/±inf at a random position; returns (x, index, bad)."""
    shape = (n, *extra_shape)
    x = np.ones(shape)
    index = tuple(draw(st.integers(0, s - 1)) for s in shape)
    bad = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    x[index] = bad
    return x, index, bad


def ragged(n: int) -> list[Any]:
    """A ragged nested list (numpy cannot make an array of it)."""
    return [[1.0, 2.0]] + [[1.0]] * max(n - 1, 1)


# -- table-driven scalar cases ------------------------------------------------------------

BadStrategy = Callable[[], st.SearchStrategy[Bad]]


class ScalarCase:
    """One public callable, a valid keyword set, and a bad-value strategy per parameter.

    Args:
        name: an id (the public name, e.g. ``"privacy.laplace_scale"``).
        call: the callable, invoked with keyword arguments.
        valid: keyword arguments for which ``call`` succeeds.
        bad: parameter -> strategy of (bad value, expected exception type).
        names: parameter -> regex(es) the message must contain (default: the parameter).
    """

    def __init__(
        self,
        name: str,
        call: Callable[..., Any],
        valid: dict[str, Any],
        bad: dict[str, st.SearchStrategy[Bad]],
        names: dict[str, str | tuple[str, ...]] | None = None,
    ) -> None:
        self.name = name
        self.call = call
        self.valid = valid
        self.bad = bad
        self.names = names or {}

    def __repr__(self) -> str:
        return self.name

    def params(self) -> list[tuple[ScalarCase, str]]:
        return [(self, p) for p in self.bad]

    def check(self, param: str, value: Any, exc: type[Exception]) -> None:
        """Calling with ``param=value`` (the rest valid) raises ``exc`` naming ``param``."""
        kwargs = {**self.valid, param: value}
        # ValueErrors about a scalar echo it (TypeErrors echo their value too, but
        # containers and objects have unwieldy reprs).
        scalar = isinstance(value, (int, float, np.integer, np.floating, str))
        assert_rejects(
            lambda: self.call(**kwargs),
            exc,
            self.names.get(param, re.escape(param)),
            value=value,
            echo=scalar,
        )


def case_params(cases: Iterable[ScalarCase]) -> list[Any]:
    """pytest parameters ``(case, param)`` with readable ids."""
    import pytest

    return [pytest.param(c, p, id=f"{c.name}-{p}") for case in cases for c, p in case.params()]
