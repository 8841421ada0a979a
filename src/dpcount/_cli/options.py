"""The command line's shared options, each declared once.

An :class:`Option` is one flag: its names, its argparse settings and its help. A
subcommand adds options and groups of them with :func:`add`; where its flag means
something narrower (another default, help that names the subcommand's own rules), it
adds a variant, :meth:`Option.but`, of the one declaration here. Closed choices come
from where they are defined: ``--noise`` from :class:`~dpcount.privacy.NoiseKind`,
``--mechanism`` and ``--objective`` from the counting registry
(:data:`~dpcount.counting.registry.MECHANISMS`,
:func:`~dpcount.counting.registry.objectives`), ``--missing`` and ``--above-bound``
from the readers' policies. They are read when a subcommand's parser is built (a
callable ``choices`` or ``help``), so importing this module imports neither numpy nor
the registry: ``dpcount --help`` and ``dpcount sample`` stay light, and a flag a new
mechanism adds to the registry reaches the CLI without an edit here.

A flag is declared in one place only (``tests/cli/test_options.py``): here when two
subcommands take it, else in its subcommand's module.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    Lazy = Callable[[], Any]

__all__ = [
    "BUDGET",
    "CALIBRATION",
    "COLUMN",
    "DELTA",
    "DIGITS",
    "EPSILON",
    "HORIZON",
    "MAX_KEYS",
    "MAX_STEPS",
    "MAX_WEIGHT",
    "MECHANISM",
    "MIN_SEPARATION",
    "MISSING",
    "NOISE",
    "NO_SUBTRACT",
    "OBJECTIVE",
    "OUTPUT",
    "PARTICIPATION",
    "PARTICIPATIONS",
    "SEED",
    "SELECT_EVERY",
    "SENSITIVITY",
    "START",
    "STEP",
    "TIME_COLUMN",
    "K",
    "Option",
    "add",
    "count_at_least_one",
    "digits_of",
    "positive_float",
]


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return value


def count_at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


class Option:
    """One flag: ``names`` and ``settings`` as :meth:`argparse.ArgumentParser.add_argument`
    takes them. ``help`` and ``settings["choices"]`` may be callables, called when the
    option is added (the choices of a registry are read then, not at import). A plain
    class, not a dataclass: ``dpcount sample`` imports this module, and ``dataclasses``
    would cost it more than the module itself."""

    __slots__ = ("help", "names", "settings")

    def __init__(
        self, names: tuple[str, ...], help: str | Lazy, settings: dict[str, Any] | None = None
    ) -> None:
        self.names = names
        self.help = help
        self.settings = dict(settings or {})

    def __repr__(self) -> str:
        return f"Option({self.names!r}, {self.settings!r})"

    def but(self, **changes: Any) -> Option:
        """A subcommand's variant: other settings (``help=``, ``default=``, ...)."""
        text = changes.pop("help", self.help)
        return Option(self.names, text, {**self.settings, **changes})

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        settings = dict(self.settings)
        choices = settings.get("choices")
        if callable(choices):
            settings["choices"] = tuple(choices())
        text = self.help() if callable(self.help) else self.help
        parser.add_argument(*self.names, help=text, **settings)


def option(*names: str, help: str | Lazy, **settings: Any) -> Option:
    return Option(names, help, settings)


def add(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *options: Option | Sequence[Option],
) -> None:
    """Add options, and groups of them (sequences), in order."""
    for item in options:
        for one in [item] if isinstance(item, Option) else item:
            one.add_to(parser)


# -- choices, read from their homes when a parser is built --------------------------


def _noise_kinds() -> tuple[str, ...]:
    from dpcount.privacy.budget import NoiseKind

    return NoiseKind.choices()


def _counting_mechanisms() -> list[str]:
    from dpcount.counting.registry import MECHANISMS

    return sorted(MECHANISMS)


def _with_objective() -> list[str]:
    from dpcount.counting.registry import MECHANISMS, objectives

    return [name for name in MECHANISMS if objectives(name)]


def _objectives() -> Iterable[str]:
    from dpcount.counting.registry import objectives

    seen: dict[str, None] = {}
    for name in _with_objective():
        seen.update(dict.fromkeys(objectives(name)))
    return seen


def _missing_policies() -> tuple[str, ...]:
    from dpcount.io import MISSING_POLICIES

    return MISSING_POLICIES


def _objective_help() -> str:
    *first, last = _with_objective()
    return (
        f"the loss the shipped or optimized parameters of --mechanism {', '.join(first)} or "
        f"{last} minimize: mean (default) or max (the largest per-step variance; `dpcount plan "
        "--metric max_variance` ranks these presets); other mechanisms ignore it, with a warning"
    )


# -- the budget -----------------------------------------------------------------------

EPSILON = option("--epsilon", type=positive_float, required=True, help="privacy parameter ε > 0")
DELTA = option(
    "--delta", type=positive_float, default=None, help="δ in (0, 1) (default: none, pure ε-DP)"
)
SEED = option(
    "--seed",
    type=int,
    default=None,
    help="seed for reproducible research ONLY: anyone with the seed can remove the noise; "
    "default: operating-system entropy",
)
#: ε, δ and the seed of a release
BUDGET = (EPSILON, DELTA, SEED)
NOISE = option(
    "--noise", choices=_noise_kinds, default=None, help="noise kind (default: see the subcommand)"
)
CALIBRATION = option(
    "--calibration",
    default=None,
    help="calibration rule: analytic (default), classic or fhu for Gaussian noise; theorem3 "
    "(default) or pld for Laplace noise with --delta",
)
SENSITIVITY = option(
    "--sensitivity",
    type=float,
    default=1.0,
    help="largest change of one step between neighbouring inputs (default 1)",
)
PARTICIPATIONS = option(
    "--participations",
    metavar="K",
    type=count_at_least_one,
    default=None,
    help="user-level privacy: each user contributes to at most K steps, any two at least "
    "--min-separation steps apart; neighbouring inputs differ in up to K such steps, each "
    "by at most --sensitivity, and the noise is calibrated to the exact (or certified) "
    "sensitivity under that schema (default 1: event level, one step)",
)
MIN_SEPARATION = option(
    "--min-separation",
    metavar="B",
    type=count_at_least_one,
    default=1,
    help="with --participations: the fewest steps between two contributions of one user "
    "(>= 1; 1 allows consecutive steps; default 1; without --participations an error: "
    "it would be ignored and the noise calibrated for one contribution)",
)
#: the (k, b)-participation schema
PARTICIPATION = (PARTICIPATIONS, MIN_SEPARATION)

# -- the mechanism ----------------------------------------------------------------------

MECHANISM = option(
    "--mechanism",
    choices=_counting_mechanisms,
    default=None,
    help="counting mechanism (dpcount plan ranks them by exact error)",
)
K = option("--k", type=int, default=None, help="branching factor of --mechanism kary")
NO_SUBTRACT = option(
    "--no-subtract", action="store_true", help="--mechanism kary without subtraction (Alg. 1)"
)
OBJECTIVE = option("--objective", choices=_objectives, default=None, help=_objective_help)

# -- the input and the output -----------------------------------------------------------

COLUMN = option(
    "--column",
    default=None,
    help="CSV header name of the column to read (default: the CSV's only column)",
)
MISSING = option(
    "--missing",
    choices=_missing_policies,
    default="error",
    help="a missing value (empty, NA, NaN, null): stop with an error naming the line, "
    "skip the row, or read it as zero",
)
OUTPUT = option("--output", default=None, help="output CSV (default: stdout)")
DIGITS = option(
    "--digits",
    metavar="N",
    type=int,
    default=4,
    help="significant digits of the std column (the exact error; 17 prints every bit of the float)",
)


def digits_of(columns: str) -> Option:
    """``--digits`` for a subcommand whose std columns are ``columns``."""
    return DIGITS.but(
        help=f"significant digits of the {columns} (the exact error; 17 prints every bit "
        "of the float)"
    )


# -- time ---------------------------------------------------------------------------------

TIME_COLUMN = option("--time-column", default=None, help="header of the time column")
STEP = option(
    "--step",
    default=None,
    help="bucket width: a number for numeric times; for dates a duration (1D, 6h, 15min, 30s) "
    "or a calendar step (MS months, QS quarters, YS years, W-MON weeks ending on Monday; "
    "binned and labelled as pandas' resample; 1M is refused as ambiguous)",
)
START = option("--start", default=None, help="start of step 1 (default: from the data)")
HORIZON = option("--horizon", type=int, default=None, help="number of steps T")

# -- a unit's bounds and open key sets (dpcount keyed, dpcount plan --open-keys) ---------

MAX_KEYS = option("--max-keys", type=int, default=None, help="keys per unit (default: none)")
MAX_STEPS = option(
    "--max-steps", type=int, default=None, help="steps per unit and key (default: every step)"
)
MAX_WEIGHT = option(
    "--max-weight",
    type=positive_float,
    default=1.0,
    help="largest weight of one event (or one unit per key and step); excess is cut",
)
SELECT_EVERY = option(
    "--select-every",
    default=None,
    help="open key set, sparse vector: check keys every N steps (and at the last) "
    "(default: every step)",
)
