"""The embedded engine: private running counts for every key, vectorized over (steps × keys).

One strategy, any engine. A keyed run is the single-stream counting problem with
vector steps: step s holds the vector (x_{s,1}, …, x_{s,n}) of every key's
contribution. So a keyed run *is* a counting mechanism of :mod:`dpcount.counting`
(any registry mechanism: the k-ary trees with or without subtraction, Honaker, the
square root and normalized square root factorizations, BLT, Toeplitz, the dense
optimum, …) run with the keys as the trailing ``dim`` axis of its noise process
(:meth:`~dpcount.counting.base.CountingMechanism.noise_process`), calibrated by the
mechanism's own calibration and released as ``exact running count + noise``
(:func:`~dpcount.counting.base.add_noise`, the single stream's release). Nothing here
re-implements a mechanism.

Privacy (the neighbouring relation is stated in :mod:`dpcount.keyed.events`): a
neighbouring change touches one step, with per-step sensitivity Δ₁ (ℓ₁ across keys)
and Δ₂ (ℓ₂ across keys): Δ₁ = Δ₂ = w at event level (one event of weight ≤ w
changes one key at one step), Δ₁ = m·w and Δ₂ = √m·w at unit-step level (m =
``max_keys`` keys, each by ≤ w). That is a vector-step change of the counting
problem: for the mechanism's encoder C (the perturbed vector of key i is C x_i) it
changes the perturbed matrix by C[:, j]·δᵀ, whose ℓ₁ norm is ‖C[:, j]‖₁·‖δ‖₁ ≤ r₁·Δ₁
and ℓ₂ (Frobenius) norm ‖C[:, j]‖₂·‖δ‖₂ ≤ r₂·Δ₂ — exactly the vector-step
sensitivity the mechanism calibrates to with ``step_sensitivity`` Δ₁ (Δ₂ for
Gaussian noise) and ``step_l2_sensitivity`` Δ₂ (:class:`~dpcount.privacy.Budget`;
each mechanism's class docstring cites its r₁, r₂). The calibration is therefore
the mechanism's own, with no norm re-derived here; ``calibration="pld"`` is
computed for one scalar step's profile and is refused at unit-step level.

Noise (:class:`~dpcount.keyed.prf.PRFWords`): the noise process draws from a
:class:`~dpcount.privacy.source.NoiseSource` on the PRF's words, so row r of its draws
for key i is the exact sample at PRF position (r, i) of the run's secret. Every process draws a
deterministic sequence of rows for a given sequence of calls (it never sees the
data), and the engine always makes the same calls: ``next_many`` over the aligned
blocks of :data:`STEP_BLOCK` steps from step 1, for aligned blocks of ``key_block``
keys (a chunk is padded to whole key blocks, so every noise computation has the same
width whatever the chunking). The noise of (key, step) is then a function of the
secret, the key and the step alone — not of the chunking, the partitioning, the
engine, retries or where a run was resumed; floating-point noise is bit-identical too.

Resuming across time (``--state``) without replaying noise: the stored state holds
the exact running sums at the last released step and, per key, the noise state of
the key's block there (:class:`NoiseLayout`): the noise process's own
``state_dict`` (a tree's live node sums, BLT's buffers), the PRF row the process
will draw next, and the noise already computed for the steps after the last
released one up to the end of its block of :data:`STEP_BLOCK` steps. A resumed run
restores the process, releases those pending steps from the stored noise and then
drives the process on over the same aligned blocks as one uninterrupted run — the
same calls, so the same bits — drawing only PRF rows no earlier run drew: its cost
is that of its new steps (and at most one block ahead). Mechanisms whose process
keeps more than :data:`STATE_VALUES_LIMIT` values per key (the square-root and dense
factorizations keep every past draw) or computes exact rational noise (Python
integers) store no noise state; their resumed runs regenerate the noise of steps
1..last from the PRF and discard the released prefix (same bits, cost of the whole
prefix).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass, replace
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from dpcount.counting.base import CountingMechanism, add_noise
from dpcount.counting.registry import MECHANISMS, capabilities
from dpcount.keyed.events import Contributions
from dpcount.keyed.prf import PRF_SCHEME, PositionPRF, PRFKey, PRFWords
from dpcount.privacy import Budget, CalibrationRule, NoiseKind, Participation, PrivacyGuarantee
from dpcount.privacy.budget import accept_participation, refuses_loose_budget
from dpcount.privacy.float_safe import snap_release
from dpcount.privacy.source import NoiseSource

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "STATE_VALUES_LIMIT",
    "STEP_BLOCK",
    "KeyedMechanism",
    "NoiseLayout",
    "exact_running",
]

#: the owner name for Budget.resolve (messages; it calibrates to a participation schema:
#: the keyed counting mechanism is a registry mechanism calibrated to it)
accept_participation("KeyedMechanism")

#: Steps per ``next_many`` call: the engine always drives a noise process in the
#: aligned blocks 1..B, B+1..2B, … (the call sequence fixes which rows each step's
#: noise uses); memory per key block is a few B × key_block arrays.
STEP_BLOCK = 1024

#: Most noise-process values per key a stored state holds (beyond: no noise state is
#: stored and a resumed run replays the noise; see the module docstring)
STATE_VALUES_LIMIT = 512

#: ``mechanism="tree"`` (the 0.3 name): the k-ary tree, by default binary
TREE_ALIAS = "tree"


def keyed_budget(budget: Budget, owner: str) -> Budget:
    """``budget`` with the keyed defaults: noise exact discrete Laplace when it names
    none; a step sensitivity other than 1 is refused (a keyed run derives one step's
    ℓ₁/ℓ₂ bounds across keys from its weight and unit bounds: ``l1_step``, ``l2_step``).

    Raises:
        ValueError: ``budget.step_sensitivity`` ≠ 1 or ``budget.step_l2_sensitivity`` set.
    """
    if budget.step_sensitivity != 1 or budget.step_l2_sensitivity is not None:
        raise ValueError(
            f"budget.step_sensitivity must be 1 and budget.step_l2_sensitivity None for "
            f"{owner}, got {budget.step_sensitivity!r} and {budget.step_l2_sensitivity!r}: "
            "a keyed run derives one step's sensitivity from max_weight (and max_keys)"
        )
    return budget.with_default_noise(NoiseKind.DISCRETE_LAPLACE)


def exact_running(
    counts: NDArray[Any], base: NDArray[Any] | None, *, overwrite: bool = False
) -> NDArray[Any]:
    """Exact running counts of a window of steps, continuing from ``base``.

    ``counts`` (W × keys) holds the contributions of steps first..first+W−1 and
    ``base`` (keys,) the exact running count of step first−1 (None: 0). Row i is
    (((base + x₀) + x₁) + …) + x_i, added strictly in step order (row by row), so a run
    split at any step gives the same bits as one run, for floating-point weights too
    (0 + x₀ = x₀ exactly). ``overwrite``: compute in ``counts``' own memory.
    """
    out = counts if overwrite else np.array(counts, copy=True)
    if base is not None and out.shape[0]:
        out[0] = base + out[0]
    # row by row: numpy's cumsum along axis 0 is ~40x slower (same additions, same order)
    for i in range(1, out.shape[0]):
        np.add(out[i - 1], out[i], out=out[i])
    return out


# --------------------------------------------------------------------------------------
# The noise state of a key block, as per-key columns
# --------------------------------------------------------------------------------------
class _NotStorable(Exception):
    """A noise state that is not kept (Python-int noise, too many values per key)."""


_KEYED_DTYPES = ("<f8", "<i8")
_SMALL_ARRAY = 64  # arrays without a key axis are written into the layout up to this size


def _flatten(value: Any, width: int, rows: list[NDArray[np.uint64]]) -> Any:
    """``value`` (a state tree) as JSON: arrays whose last axis is the key axis (length
    ``width``) become row ranges of the per-key columns (64-bit patterns, appended to
    ``rows``); everything else is shared by the keys and written out."""
    if isinstance(value, np.ndarray):
        return _flatten_array(value, width, rows)
    if isinstance(value, np.generic):
        dtype = value.dtype.newbyteorder("<").str
        if dtype not in (*_KEYED_DTYPES, "|b1"):
            raise _NotStorable(f"numpy scalar of dtype {value.dtype}")
        return {"$scalar": [dtype, _flatten(value.item(), width, rows)]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return _plain(value)
    if isinstance(value, Fraction):
        return {"$fraction": [value.numerator, value.denominator]}
    if isinstance(value, (list, tuple)):
        return [_flatten(v, width, rows) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) and k[:1] != "$" for k in value):
        return {k: _flatten(v, width, rows) for k, v in value.items()}
    raise _NotStorable(f"a value of type {type(value).__name__}")


def _flatten_array(value: NDArray[Any], width: int, rows: list[NDArray[np.uint64]]) -> Any:
    """:func:`_flatten` of an array: per-key (its last axis the keys') or small shared."""
    dtype = value.dtype.newbyteorder("<").str
    if value.ndim >= 1 and value.shape[-1] == width:
        if dtype not in _KEYED_DTYPES:
            raise _NotStorable(f"per-key array of dtype {value.dtype}")
        at = sum(len(r) for r in rows)
        rows.append(np.ascontiguousarray(value, dtype=dtype).reshape(-1, width).view("<u8"))
        return {"$keyed": [at, dtype, list(value.shape[:-1])]}
    if value.size > _SMALL_ARRAY or dtype not in (*_KEYED_DTYPES, "|b1"):
        raise _NotStorable(f"shared array of shape {value.shape}, dtype {value.dtype}")
    return {"$array": [dtype, list(value.shape), value.ravel().tolist()]}


def _plain(value: bool | int | float | str | None) -> Any:
    """A JSON scalar as is (a non-finite float or an integer beyond int64 refused)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _NotStorable("a non-finite float")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise _NotStorable("a Python integer beyond int64")
    return value


def _unflatten(node: Any, columns: NDArray[np.uint64]) -> Any:
    """Inverse of :func:`_flatten` for columns of shape (rows, width) (trusted layout:
    the state file's MAC was checked and the layout equals the one recomputed here)."""
    if isinstance(node, list):
        return [_unflatten(v, columns) for v in node]
    if not isinstance(node, dict):
        return node
    if "$keyed" in node:
        at, dtype, shape = node["$keyed"]
        n = math.prod(shape)
        block = columns[at : at + n].view(dtype).astype(np.dtype(dtype).newbyteorder("="))
        return block.reshape(*shape, columns.shape[1])
    if "$array" in node:
        dtype, shape, values = node["$array"]
        return np.array(values, dtype=np.dtype(dtype).newbyteorder("=")).reshape(shape)
    if "$scalar" in node:
        dtype, value = node["$scalar"]
        return np.dtype(dtype).newbyteorder("=").type(value)
    if "$fraction" in node:
        return Fraction(*node["$fraction"])
    return {k: _unflatten(v, columns) for k, v in node.items()}


@dataclass(frozen=True)
class NoiseLayout:
    """Where each per-key value of a key block's noise state after step ``step`` sits.

    The state is ``{"rows": PRF rows drawn, "process": the noise process's state_dict(),
    "pending": noise of steps step+1.. up to the end of their block of STEP_BLOCK}``;
    ``text`` is it as canonical JSON with every per-key array replaced by a range of
    ``rows`` per-key 64-bit values (the state file stores ``rows`` × keys values and
    ``text``). It depends only on the public configuration and ``step``.
    """

    step: int
    text: str
    rows: int

    def flatten(self, state: dict[str, Any], width: int) -> NDArray[np.uint64]:
        """The per-key columns (rows × width) of ``state``, a key block's state with this
        layout (anything else is a defect: RuntimeError)."""
        rows: list[NDArray[np.uint64]] = []
        text = _canonical(_flatten(state, width, rows))
        if text != self.text:
            raise RuntimeError("noise state layout differs between key blocks (a defect)")
        if not rows:
            return np.zeros((0, width), dtype=np.uint64)
        return np.concatenate(rows, axis=0)

    def unflatten(self, columns: NDArray[np.uint64]) -> dict[str, Any]:
        state: dict[str, Any] = _unflatten(json.loads(self.text), columns)
        return state


def _canonical(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"), allow_nan=False)


class Window(TypedDict, total=False):
    """The steps a release computes (:meth:`KeyedMechanism.release`): ``first`` (default
    1), ``last`` (default the horizon) and ``base``, the exact running counts of step
    first − 1 (None: zero)."""

    first: int
    last: int | None
    base: NDArray[Any] | None


@dataclass(frozen=True)
class KeyedMechanism:
    """The calibrated counting mechanism of one keyed run (public configuration, no secret).

    Args:
        n_keys: size of the public key universe.
        horizon: T, the number of steps.
        mechanism: a registry name (:data:`dpcount.counting.registry.MECHANISMS`), or
            ``"tree"`` (the k-ary tree, binary by default: 0.3's keyed tree).
        budget: the :class:`~dpcount.privacy.Budget`: ε, δ, noise kind (default exact
            discrete Laplace), calibration rule (see :func:`dpcount.privacy.calibrate`)
            and the per-key (k, b)-participation schema of a run-level unit bound
            (:mod:`dpcount.keyed.bounds`; None: one step). Its step sensitivity is
            left at 1: the keyed step bounds are ``l1_step`` and ``l2_step``.
        l1_step, l2_step: per-step sensitivity across keys (Δ₁, Δ₂).
        neighbouring: text of the neighbouring relation.
        key_block: PRF layout constant B (power of two): noise is computed for aligned
            blocks of B keys.
        k, subtract: the k-ary tree's options (``"kary"``/``"tree"`` only).
        bands: the Toeplitz factorization's band count (``"toeplitz"`` only; None: full).

    Raises:
        TypeError: ``budget`` not a :class:`~dpcount.privacy.Budget`, or its fields given
            loose (removed in 0.5: the error names them and ``budget=Budget(...)``).
        ValueError: a bad key count, horizon, mechanism or mechanism option (naming
            it), a budget step sensitivity other than 1 (:func:`keyed_budget`), or
            ``calibration="pld"`` at unit-step level.
    """

    n_keys: int
    horizon: int
    mechanism: str
    _: KW_ONLY
    budget: Budget
    l1_step: float
    l2_step: float
    neighbouring: str
    key_block: int
    k: int | None = None
    subtract: bool | None = None
    bands: int | None = None

    def __post_init__(self) -> None:
        budget = Budget.check(self.budget, owner="KeyedMechanism")
        object.__setattr__(self, "budget", keyed_budget(budget, "KeyedMechanism"))
        self._check()

    def _check(self) -> None:
        for name in ("n_keys", "horizon"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        name = self.mechanism
        if name != TREE_ALIAS and name not in MECHANISMS:
            choices = ", ".join(sorted([*MECHANISMS, TREE_ALIAS, "auto"]))
            raise ValueError(f"mechanism must be one of {choices}; got {name!r}")
        # the options each mechanism declares (its registry capabilities)
        caps = capabilities("kary" if name == TREE_ALIAS else name)
        if caps.option("k") is None and (self.k is not None or self.subtract is not None):
            raise ValueError(
                f"k and subtract are options of the k-ary tree (mechanism='kary'), not of "
                f"mechanism={name!r}"
            )
        if self.bands is not None and caps.option("bands") is None:
            raise ValueError(f"bands is an option of mechanism='toeplitz', not of {name!r}")
        if self.k is not None and (
            isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2
        ):
            raise ValueError(f"k must be an integer >= 2, got {self.k!r}")
        pld = self.budget.calibration is CalibrationRule.PLD
        if pld and self.l1_step != self.l2_step:
            raise ValueError(
                "calibration='pld' is computed for one scalar step's sensitivity profile (event "
                "level); at unit-step level use the noise kind's default calibration"
            )

    @property
    def noise(self) -> NoiseKind:
        """The budget's noise kind."""
        assert self.budget.noise is not None  # keyed_budget gives it its default
        return self.budget.noise

    @property
    def epsilon(self) -> float:
        return self.budget.epsilon

    @property
    def delta(self) -> float | None:
        return self.budget.delta

    @property
    def calibration(self) -> str | None:
        """The budget's calibration rule as its name (None: the noise kind's default)."""
        rule = self.budget.calibration
        return None if rule is None else str(rule)

    @property
    def participation(self) -> Participation | None:
        return self.budget.participation

    @cached_property
    def counting(self) -> CountingMechanism:
        """The single-stream mechanism with the keyed vector-step sensitivity (Δ₁, Δ₂),
        calibrated by its own rules (see the module docstring)."""
        name = "kary" if self.mechanism == TREE_ALIAS else self.mechanism
        options: dict[str, Any] = {}
        if name == "kary":
            default_tree = self.mechanism == TREE_ALIAS
            options["k"] = (2 if default_tree else 19) if self.k is None else self.k
            options["subtract"] = (not default_tree) if self.subtract is None else self.subtract
        if self.bands is not None:
            options["bands"] = self.bands
        # Gaussian noise reads step_sensitivity as the l2 bound; the others the l1 bound
        # and step_l2_sensitivity (Laplace with a delta, the discrete Gaussian).
        gaussian = self.noise is NoiseKind.GAUSSIAN
        budget = self.budget.replace(
            step_sensitivity=self.l2_step if gaussian else self.l1_step,
            step_l2_sensitivity=None if gaussian or self.l2_step == self.l1_step else self.l2_step,
        )
        return MECHANISMS[name](horizon=self.horizon, budget=budget, **options)

    @property
    def privacy(self) -> PrivacyGuarantee:
        guarantee = self.counting.privacy
        assert guarantee is not None  # built with its calibration, never with_sampler
        # a float-safe release pays per released value: every key at every step
        values = guarantee.float_values and self.n_keys * self.horizon
        return replace(guarantee, neighbouring=self.neighbouring, float_values=values)

    @property
    def structure(self) -> str:
        """The mechanism as it is built: ``repr`` without the budget (e.g. ``KaryTree(horizon=365,
        k=28, subtract=True, height=3)``)."""
        fields = "".join(f", {k}={v}" for k, v in self.counting._repr_fields().items())
        return f"{type(self.counting).__name__}(horizon={self.horizon}{fields})"

    def describe(self) -> str:
        """The guarantee in one line, naming the keyed sampler used (:attr:`structure`
        names the mechanism)."""
        import re

        text = re.sub(r"[,;] exact sampler \([^)]*Alg\. 2\)", "", self.privacy.describe())
        sampler = {
            NoiseKind.DISCRETE_LAPLACE: "exact discrete Laplace as the difference of two "
            "geometric variables",
            NoiseKind.DISCRETE_GAUSSIAN: "exact discrete Gaussian by CKS 2020 Alg. 3",
            NoiseKind.LAPLACE: "floating-point Laplace",
            NoiseKind.GAUSSIAN: "floating-point Gaussian (Box-Muller)",
        }[self.noise]
        return f"{text}; noise: {sampler}, from AES-CTR PRF bits of (secret, draw, key)"

    def dp_event(self) -> Any:
        """The keyed release's privacy as a dp_accounting ``DpEvent`` (one run).

        The event of :attr:`counting`, the single-stream mechanism calibrated for the
        keyed vector-step sensitivity (Δ₁, Δ₂) across keys, so it holds for
        :attr:`neighbouring` (see :meth:`dpcount.counting.CountingMechanism.dp_event`
        for the event of each noise kind). The noise of every key comes from the
        PRF of (secret, run, position) instead of a Generator; the event assumes, as
        every guarantee of a keyed run does, that the secret is secret and the PRF
        (AES) indistinguishable from random. The keys are public (the key universe
        is given, not learned from the data). Needs the ``accounting`` extra.
        """
        return self.counting.dp_event()

    def std(self) -> NDArray[np.float64]:
        """Exact standard deviation of the private count of each step (same for all keys):
        the single-stream mechanism's ``variances()``."""
        out: NDArray[np.float64] = np.sqrt(self.counting.variances())
        return out

    def config(self) -> dict[str, Any]:
        """The public configuration, with a digest of the noise structure (its per-step
        coefficients): a run cannot continue under another mechanism's noise."""
        coefficients = np.ascontiguousarray(self.counting.noise_coefficients(), dtype="<f8")
        schema = (
            {} if self.participation is None else {"participation": self.participation.as_dict()}
        )
        return {
            **schema,
            "scheme": PRF_SCHEME,
            "mechanism": self.mechanism,
            "structure": self.structure,
            "structure_sha256": hashlib.sha256(coefficients.tobytes()).hexdigest(),
            "n_keys": self.n_keys,
            "horizon": self.horizon,
            "k": self.k,
            "subtract": self.subtract,
            "bands": self.bands,
            "noise": str(self.noise),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "calibration": self.calibration,
            "l1_step": self.l1_step,
            "l2_step": self.l2_step,
            "key_block": self.key_block,
        }

    def noise_layout(self, step: int) -> NoiseLayout | None:
        """The layout of a key block's noise state after releasing steps 1..``step``, or
        None when no noise state is kept (see the module docstring): from a dry run of
        the noise process on zeros (public configuration only)."""
        return _noise_layout(self, step, STEP_BLOCK, STATE_VALUES_LIMIT)

    def check_window(self, first: int, last: int) -> None:
        if not 1 <= first <= last <= self.horizon:
            raise ValueError(
                f"steps {first}..{last} outside 1..{self.horizon} (the horizon, fixed at the "
                "first run)"
            )

    def counts(
        self, contributions: Contributions, key_lo: int, key_hi: int, first: int, last: int
    ) -> NDArray[Any]:
        """Dense contributions of steps first..last of keys [key_lo, key_hi)."""
        if not 0 <= key_lo < key_hi <= self.n_keys:
            raise ValueError(f"key range [{key_lo}, {key_hi}) outside [0, {self.n_keys})")
        self.check_window(first, last)
        dtype = np.int64 if self.noise.is_discrete else np.float64
        dense = contributions.dense(key_lo, key_hi, last, first)
        out: NDArray[Any] = dense.astype(dtype, copy=False)
        return out

    def release(
        self,
        secret: PRFKey | bytes,
        contributions: Contributions,
        key_lo: int,
        key_hi: int,
        **window: Unpack[Window],
    ) -> NDArray[Any]:
        """Private running counts of keys [key_lo, key_hi) at steps first..last (default
        1..T): shape (last − first + 1, key_hi − key_lo). ``window``: ``first``,
        ``last`` and ``base``, the exact running counts of step first − 1 of these keys
        (from a stored state; None: zero), as :meth:`release_with_state` takes them. The
        noise of steps before ``first`` is regenerated."""
        unknown = sorted(set(window) - set(Window.__annotations__))
        if unknown:
            raise TypeError(f"release() got an unexpected keyword argument {unknown[0]!r}")
        values, _ = self.release_with_state(secret, contributions, key_lo, key_hi, **window)
        return values

    def release_with_state(
        self,
        secret: PRFKey | bytes,
        contributions: Contributions,
        key_lo: int,
        key_hi: int,
        *,
        first: int = 1,
        last: int | None = None,
        base: NDArray[Any] | None = None,
        noise_state: NDArray[np.uint64] | None = None,
        keep_state: bool = False,
    ) -> tuple[NDArray[Any], NDArray[np.uint64] | None]:
        """:meth:`release`, continuing the noise from ``noise_state`` and returning the
        noise state after ``last``.

        Args:
            noise_state: the per-key noise state of these keys after step first − 1
                (shape (layout rows, key_hi − key_lo), :meth:`noise_layout`), or None:
                the noise of steps 1..first − 1 is regenerated from the PRF.
            keep_state: return the noise state after ``last`` (None when
                :meth:`noise_layout` keeps none).

        Returns:
            The releases, shape (last − first + 1, key_hi − key_lo), and the noise state.
        """
        last = self.horizon if last is None else last
        width = key_hi - key_lo
        start = self._start_layout(noise_state, first, width)
        counts = self.counts(contributions, key_lo, key_hi, first, last)
        if base is not None:
            base = np.asarray(base, dtype=counts.dtype)
            if base.shape != (width,):
                raise ValueError(f"base must have shape ({width},), got {base.shape}")
        end = self.noise_layout(last) if keep_state else None
        ends = None if end is None else np.zeros((end.rows, width), dtype=np.uint64)
        exact = exact_running(counts, base, overwrite=True)
        snapped = self.counting.float_safety is not None  # continuous noise: float-safe
        if snapped and exact.dtype != np.float64:
            exact = exact.astype(np.float64)  # exact: running counts are below 2^53
        into = _Released(exact, first, last, snapped, self.key_block)
        B = self.key_block
        for block_lo in range((key_lo // B) * B, key_hi, B):
            lo, hi = max(key_lo, block_lo), min(key_hi, block_lo + B)
            keys = (slice(lo - key_lo, hi - key_lo), slice(lo - block_lo, hi - block_lo))
            restore = None
            if start is not None:
                assert noise_state is not None
                restore = np.zeros((start.rows, B), dtype=np.uint64)  # keys outside: unused
                restore[:, keys[1]] = noise_state[:, keys[0]]
            stream = _BlockNoise(self, secret, block_lo, start, restore)
            for t0, n, noise in stream.blocks(last):
                into.add(self.counting, stream.denominator, t0, n, noise, keys)
            if ends is not None and end is not None:
                ends[:, keys[0]] = stream.state_columns(end)[:, keys[1]]
        assert into.out is not None  # first <= last: at least one block
        return into.out, ends

    def _start_layout(
        self, noise_state: NDArray[np.uint64] | None, first: int, width: int
    ) -> NoiseLayout | None:
        """The layout of ``noise_state`` after step first − 1 (None: none given)."""
        if noise_state is None:
            return None
        start = self.noise_layout(first - 1)
        if start is None or noise_state.shape != (start.rows, width):
            raise ValueError(
                f"noise_state: shape {noise_state.shape} is not the noise state of "
                f"{width} keys after step {first - 1} of {self.structure} "
                f"({'none is kept' if start is None else f'{start.rows} values per key'})"
            )
        return start


# the dataclass writes __init__; the budget's fields given loose (0.4's spelling) are
# refused by name, with the replacement budget=Budget(...)
KeyedMechanism.__init__ = refuses_loose_budget()(KeyedMechanism.__init__)  # type: ignore[method-assign]


class _Released:
    """The releases of a chunk of keys, filled block by block of steps and keys: in place
    in the exact running sums where the noise adds without a temporary."""

    def __init__(
        self, exact: NDArray[Any], first: int, last: int, snapped: bool, block: int
    ) -> None:
        self.exact, self.first, self.last, self.snapped = exact, first, last, snapped
        self.block = block
        self.out: NDArray[Any] | None = None

    def add(
        self,
        counting: CountingMechanism,
        denominator: int | None,
        t0: int,
        n: int,
        noise: Any,
        keys: tuple[slice, slice],
    ) -> None:
        """Add the noise of 0-based steps [t0, t0 + n) of one key block (``keys``: the
        chunk's and the block's columns) to the steps of the window among them."""
        exact, first = self.exact, self.first
        a, b = max(t0, first - 1), min(t0 + n, self.last)  # 0-based steps [a, b)
        if a >= b:
            return
        at = (slice(a - first + 1, b - first + 1), keys[0])
        there = (slice(a - t0, b - t0), keys[1])
        if self.snapped:  # continuous noise: the float-safe release, one grid a step
            grids = counting.release_grids(a + 1, b - a)
            assert grids is not None  # float_safety is set
            self.out = exact
            exact[at] = snap_release(exact[at], np.array(noise[there]), grids[:, None])
            return
        if denominator is None and noise.dtype == exact.dtype:
            # add_noise's sum (int64: exact; float: one rounding, commutative),
            # in place in the exact sums: no temporaries
            self.out = exact
            np.add(exact[at], noise[there], out=exact[at])
            return
        sums = np.zeros((n, self.block), dtype=exact.dtype)
        sums[there] = exact[at]
        released = add_noise(sums, noise, denominator)
        if self.out is None:
            self.out = np.empty(exact.shape, dtype=released.dtype)
        self.out[at] = released[there]


class _BlockNoise:
    """The noise of one key block: its noise process driven with the PRF as its source in
    the aligned blocks of :data:`STEP_BLOCK` steps, from step 1 or from a stored state."""

    def __init__(
        self,
        m: KeyedMechanism,
        secret: PRFKey | bytes | None,
        block_lo: int,
        start: NoiseLayout | None = None,
        restore: NDArray[np.uint64] | None = None,
        width: int | None = None,
    ) -> None:
        c = m.counting
        width = m.key_block if width is None else width
        self.horizon = m.horizon
        self.pending: tuple[int, NDArray[Any]] | None = None  # (t0, noise of t0+1..)
        state = None if start is None or restore is None else start.unflatten(restore)
        words = None  # no secret: zeros (the state layout of a dry run)
        if secret is not None:
            prf = PositionPRF(secret, f"stream/{m.noise}", width)
            words = PRFWords(prf, block_lo, block_lo + width)
        # A restored process is built on zeros (some processes draw when built: those
        # rows are in the stored state) and then given its PRF words from the stored row.
        source = NoiseSource(c.sampler, words if state is None else None, width)
        self.process = c.noise_process(source, width)
        self.denominator = c._exact_denominator(self.process) if m.noise.is_discrete else None
        self.t = 0  # steps the process has computed
        if state is not None and start is not None:
            self.process.load_state_dict(state["process"])
            source.words, source.rows_drawn = words, int(state["rows"])
            pending = np.asarray(state["pending"])
            if pending.dtype.kind == "f" and not np.isfinite(pending).all():
                raise ValueError("corrupt keyed noise state: non-finite pending noise")
            self.t = start.step + len(pending)
            self.pending = (start.step, pending)
        self.source = source
        self.width = width
        self._tail: tuple[int, NDArray[Any]] | None = None  # the last block handed out

    def blocks(self, last: int) -> Iterator[tuple[int, int, Any]]:
        """(t0, n, noise of steps t0+1..t0+n) covering the steps after the stored state
        (or step 1) up to ``last``: the stored pending noise, then the process's blocks."""
        if self.pending is not None and len(self.pending[1]):
            t0, noise = self.pending
            self._tail = (t0, noise)
            yield t0, len(noise), noise
        while self.t < last:
            t0, n = self.t, min(STEP_BLOCK, self.horizon - self.t)
            noise = self.process.next_many(n)
            self.t += n
            self._tail = (t0, noise)
            yield t0, n, noise

    def state(self, last: int) -> dict[str, Any]:
        """The state after releasing steps ..``last`` (after :meth:`blocks` reached it)."""
        pending: NDArray[Any] = np.zeros((0, self.width))
        if self._tail is not None:
            t0, noise = self._tail
            pending = np.asarray(noise)[last - t0 :]
        elif self.pending is not None:  # nothing released: keep the stored pending noise
            pending = self.pending[1]
        return {
            "rows": self.source.rows_drawn,
            "process": self.process.state_dict(),
            "pending": pending,
        }

    def state_columns(self, layout: NoiseLayout) -> NDArray[np.uint64]:
        return layout.flatten(self.state(layout.step), self.width)


#: width of the first, cheap dry run (which decides whether a noise state is kept)
_DRY_WIDTH = 3


def _dry_state(m: KeyedMechanism, step: int, width: int) -> tuple[str, int] | None:
    """The layout text and rows of the noise state after ``step`` of a process of
    ``width`` keys run on zeros, or None if it keeps none (exact rational noise, more
    than :data:`STATE_VALUES_LIMIT` values per key at some block, or values that are
    not 64-bit numbers)."""
    stream = _BlockNoise(m, None, 0, width=width)
    if stream.denominator is not None:
        return None  # exact rational noise: Python integers
    for _ in stream.blocks(step):
        if stream.process.live_count() > STATE_VALUES_LIMIT:
            return None  # full-memory processes grow past it: stop early
    rows: list[NDArray[np.uint64]] = []
    try:
        node = _flatten(stream.state(step), width, rows)
    except _NotStorable:
        return None
    return _canonical(node), sum(len(r) for r in rows)


@lru_cache(maxsize=64)
def _noise_layout(m: KeyedMechanism, step: int, *constants: int) -> NoiseLayout | None:
    """:meth:`KeyedMechanism.noise_layout` (``constants``: the module constants it
    depends on, part of the cache key)."""
    if step < 1 or _dry_state(m, step, _DRY_WIDTH) is None:
        return None
    # the layout at the run's own width (a process's state may record its width)
    found = _dry_state(m, step, m.key_block)
    return None if found is None else NoiseLayout(step, *found)


def chunk_bounds(n_keys: int, chunk_keys: int) -> list[tuple[int, int]]:
    if isinstance(chunk_keys, bool) or not isinstance(chunk_keys, int) or chunk_keys < 1:
        raise ValueError(f"chunk_keys must be a positive integer, got {chunk_keys!r}")
    return [(lo, min(lo + chunk_keys, n_keys)) for lo in range(0, n_keys, chunk_keys)]
