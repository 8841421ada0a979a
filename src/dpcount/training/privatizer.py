"""Correlated Gaussian noise for training loops, from any streaming counting mechanism.

Matrix-factorization DP-FTRL (Kairouz et al. 2021; Denisov et al. 2022;
Choquette-Choo et al. 2023) privatizes the *prefix sums* of clipped gradients:
step t releases P_t = Σ_{s≤t} g_s + N_t, where g_s is the sum over the batch of
per-example gradients each clipped to ℓ₂ norm ≤ C, and N = B·z is the correlated
noise of a continual-counting mechanism (a tree, a square-root or BLT
factorization, …). Every mechanism in :mod:`dpcount.counting` with a streaming
noise process drives it here, over one vector per step (a model's parameters
flattened).

What is released (``release=``):

* ``"gradient"`` (default): the noisy per-step gradient ĝ_t = P_t − P_{t−1} =
  g_t + (N_t − N_{t−1}), post-processing of the prefix sums. Plain SGD with a
  constant learning rate η applied to ĝ gives θ_t = θ_0 − η·P_t: the parameters
  carry exactly the prefix-sum noise N_t, whose exact variance per coordinate is
  :meth:`GradientPrivatizer.prefix_variance`. (For independent noise — the
  ``"input"`` mechanism, DP-SGD without amplification — N_t − N_{t−1} is i.i.d.)
* ``"prefix-sum"``: P_t itself, for DP-FTRL-style updates θ_t = θ_0 − η·P_t.

Participation schema (epochs × batches). The training data are split once into
``batches_per_epoch`` = b fixed batches, and the run visits them cyclically in the
same order for ``epochs`` = k epochs: step t (1-based) uses batch (t − 1) mod b, so
T = k·b steps. Each example then contributes to at most k steps, any two exactly b
apart: the (k, b)-participation of Choquette-Choo et al. (2023), to which the
mechanism's sensitivity is calibrated (:mod:`dpcount.counting.participation`).
Reshuffling the batches between epochs breaks the schema (two participations could
be adjacent): use :func:`fixed_batches` once and keep its order.

Formal guarantee:
    Neighbouring relation: two datasets that differ by adding or removing one
    example (``neighbouring="add-remove"``; the clipped sum of every step the
    example is in changes by at most C in ℓ₂ norm), or by replacing one
    (``"replace-one"``; at most 2C), with the data order above. The whole run — the
    T released vectors, in either ``release`` form — is (ε, δ)-DP: it is
    post-processing of C_enc·G + z, the Gaussian mechanism (σ from the budget's
    calibration, the analytic Gaussian mechanism of Balle & Wang 2018, Theorem 8,
    by default) on the encoder's image of the T × d gradient matrix G, whose ℓ₂
    sensitivity under the schema is the mechanism's
    (``mechanism.participation_sensitivities``, exact or a certified upper bound)
    times C. :meth:`GradientPrivatizer.dp_event` states it for dp_accounting. The
    guarantee assumes the caller clips each example's gradient (its whole
    contribution to the flattened vector) to norm ≤ C before summing
    (:func:`clip_and_sum` does) and normalizes by a public constant (e.g. the
    nominal batch size), never by the data-dependent count.

    Float safety: every released prefix sum is snapped to a power-of-two grid
    (:mod:`dpcount.privacy.float_safe`; the gradient form is the difference of two
    snapped prefix sums), so the run's T·d released values cost
    (1 + e^ε)·T·d·η more δ than the exact-real mechanism
    (:meth:`GradientPrivatizer.guarantee`).

The noise state. :meth:`GradientPrivatizer.init` starts a run and returns its
:class:`NoiseState`; :meth:`GradientPrivatizer.privatize` consumes the latest state
and returns the next (optax style). The state wraps the mechanism's noise process
(for BLT (buffers + 1)·d floats plus d for the previous noise; for the trees
O(log T · d); for ``sqrt``/``normalized-sqrt`` O(T·d)) and, for ``"prefix-sum"``,
the running sum of the clipped gradients: **it is as sensitive as the raw
gradients** (whoever holds it can subtract the noise from the releases). Never log,
release or share it. Passing an older state raises ValueError (its noise process
has moved on; a redraw would spend budget twice). Each :meth:`init` starts a fresh
run with fresh noise: two runs over the same data spend the budget twice.

References:
    * P. Kairouz, B. McMahan, S. Song, O. Thakkar, A. Thakurta, Z. Xu. "Practical
      and private (deep) learning without sampling or shuffling". ICML 2021.
      https://arxiv.org/abs/2103.00039
    * S. Denisov, H. B. McMahan, K. Rush, A. Smith, A. G. Thakurta. "Improved
      differential privacy for SGD via optimal private linear operators on
      adaptive streams". NeurIPS 2022. https://arxiv.org/abs/2202.08312
    * C. A. Choquette-Choo, A. Ganesh, R. McKenna, H. B. McMahan, K. Rush,
      A. Thakurta, Z. Xu. "(Amplified) Banded Matrix Factorization: A unified
      approach to private training". NeurIPS 2023. https://arxiv.org/abs/2306.08153
    * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
      privacy: analytical calibration and optimal denoising". ICML 2018.
      https://arxiv.org/abs/1805.06530
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import check_choice, check_instance, check_integer, check_real
from dpcount.counting.base import CountingMechanism, NoiseProcess
from dpcount.counting.registry import MECHANISMS, build_mechanism
from dpcount.privacy.budget import (
    Budget,
    CalibrationRule,
    NoiseKind,
    Participation,
    refuses_loose_budget,
)
from dpcount.privacy.calibration import gaussian_sigma
from dpcount.privacy.float_safe import release_grids, snap_release
from dpcount.privacy.guarantee import PrivacyGuarantee
from dpcount.privacy.rng import RNGLike, as_generator
from dpcount.privacy.source import NoiseSource
from dpcount.training._tree import Layout, flatten, layout_of_shapes, walk
from dpcount.training.balls_in_bins import (
    BallsInBinsAccountant,
    MonteCarlo,
    MonteCarloCertificate,
)
from dpcount.training.renyi_allocation import (
    AllocationAccounting,
    RenyiAllocationAccountant,
    RenyiCertificate,
)
from dpcount.training.sampling import (
    Amplification,
    Sampling,
    amplified_noise_multiplier,
)

__all__ = [
    "GradientPrivatizer",
    "NoiseState",
    "clip_and_sum",
    "gaussian_privatizer",
]

Release = Literal["gradient", "prefix-sum"]
RELEASES: tuple[str, ...] = ("gradient", "prefix-sum")
NEIGHBOURINGS: tuple[str, ...] = ("add-remove", "replace-one")
#: relative amount a clipped gradient's norm stays below the clip norm
_CLIP_MARGIN = 1e-12


class _Run:
    """The mutable part of one training run (held by its :class:`NoiseState`)."""

    def __init__(self, owner: GradientPrivatizer, layout: Layout, process: NoiseProcess) -> None:
        self.owner = owner
        self.layout = layout
        self.process = process
        self.step = 0
        #: N_{t-1} (release "gradient" without a grid) or the raw running sum S_{t-1}
        self.previous = np.zeros(layout.size)
        #: the released (float-safe) prefix sum P_{t-1} (release "gradient")
        self.released = np.zeros(layout.size)
        #: whether releases are float-safe (dpcount.privacy.float_safe)
        self.snapped = owner.mechanism.float_safety is not None
        #: the exact std of the steps still to come (their grids), made at the first step
        self.sds: Iterator[float] | None = None


class NoiseState:
    """The state of one privatized run: opaque, and **as sensitive as the raw data**.

    It holds the noise still to be added (and, for ``release="prefix-sum"``, the
    running sum of clipped gradients). Do not log, release or share it. Its
    ``repr`` shows only the step and the vector length.

    Attributes:
        step: steps privatized before this state (0 after ``init``).
    """

    __slots__ = ("_run", "step")

    def __init__(self, run: _Run, step: int) -> None:
        self._run = run
        self.step = step

    @property
    def dim(self) -> int:
        """The length of the flattened vector."""
        return self._run.layout.size

    def __repr__(self) -> str:
        return f"NoiseState(step={self.step}, dim={self.dim})"


@dataclass(frozen=True)
class BallsInBinsAmplification:
    """The balls-in-bins accounting of one privatizer (module docstring).

    Attributes:
        certificate: the statement for σ per unit of the clip bound: the Monte Carlo
            certificate, or the deterministic Rényi one
            (:class:`~dpcount.training.renyi_allocation.RenyiCertificate`), whichever
            the privatizer's ``accounting`` chose.
        unit_sensitivity: the step sensitivity (the clip bound C): σ = certificate's
            noise multiplier × C.
    """

    certificate: MonteCarloCertificate | RenyiCertificate
    unit_sensitivity: float

    def dp_event(self, sigma: float) -> object:
        """No dp_accounting event states either certificate: raises ValueError."""
        raise ValueError(
            "balls-in-bins sampling has no dp_accounting event (its guarantee is a Monte Carlo "
            "or a Rényi certificate): see privatizer.amplification.certificate "
            f"({self.certificate})"
        )


@dataclass(frozen=True, eq=False)
class GradientPrivatizer:
    """Adds a counting mechanism's correlated Gaussian noise to clipped-gradient sums.

    See the module docstring (:mod:`dpcount.training.privatizer`) for what is
    released, the participation schema and the formal guarantee. Build one with
    :func:`gaussian_privatizer`, or from a mechanism calibrated by hand (Gaussian
    noise, ``step_sensitivity`` = the clipped sum's ℓ₂ bound, ``participation`` =
    ``Participation(epochs, batches_per_epoch)``).

    A mechanism from ``with_sampler`` (e.g. ``ZeroNoise()``, for structure tests)
    runs, but carries no guarantee: its :meth:`dp_event` raises.

    Attributes:
        mechanism: the calibrated counting mechanism (horizon T = the number of steps).
        release: ``"gradient"`` (per-step noisy gradients) or ``"prefix-sum"``.
        rng: the Generator every run draws from (``rng=None``: a cryptographically
            secure generator keyed from OS entropy; an int seed is for tests only).
        amplification: None (fixed batches: the mechanism's own guarantee), the
            cyclic Poisson accounting (:mod:`dpcount.training.sampling`), which
            :meth:`dp_event` and :attr:`noise_multiplier` then state, or the
            balls-in-bins certificate (Monte Carlo, :mod:`dpcount.training.balls_in_bins`,
            or Rényi, :mod:`dpcount.training.renyi_allocation`; :meth:`dp_event` then
            raises).

    Raises:
        TypeError: ``mechanism`` is not a CountingMechanism.
        ValueError: its noise is not Gaussian, or an unknown ``release``.
    """

    mechanism: CountingMechanism
    release: Release = "gradient"
    rng: Any = None
    amplification: Amplification | BallsInBinsAmplification | None = None

    def __post_init__(self) -> None:
        check_instance("mechanism", self.mechanism, CountingMechanism, "a CountingMechanism")
        if self.mechanism.budget.noise != NoiseKind.GAUSSIAN:
            raise ValueError(
                f"mechanism must use noise='gaussian' (gradients are clipped in l2 norm), "
                f"got noise={self.mechanism.budget.noise}"
            )
        check_choice("release", self.release, RELEASES)
        object.__setattr__(self, "rng", as_generator(self.rng))

    # -- the schema ---------------------------------------------------------------
    @property
    def steps(self) -> int:
        """T: the number of steps the run may privatize (the mechanism's horizon)."""
        return self.mechanism.horizon

    @property
    def participation(self) -> Participation:
        """The (k, b) schema the noise is calibrated to (k = 1: each example in one step)."""
        schema = self.mechanism.budget.participation
        return Participation() if schema is None else schema

    @property
    def clip_norm_bound(self) -> float:
        """The ℓ₂ bound on one example's change to one step's clipped sum (C for
        add/remove, 2C for replace-one): the mechanism's step sensitivity."""
        return float(self.mechanism.step_sensitivity)

    @property
    def noise_multiplier(self) -> float:
        """σ / Δ₂ for the whole run (Δ₂: the ℓ₂ sensitivity of the encoded gradients
        under the schema), the number dp_accounting's ``GaussianDpEvent`` takes."""
        privacy = self.mechanism.privacy
        if privacy is None:
            raise ValueError("the mechanism carries no privacy guarantee (with_sampler)")
        if self.amplification is not None:  # per participation, composed k times
            return float(self.mechanism.noise_scale / self.amplification.unit_sensitivity)
        return float(self.mechanism.noise_scale / privacy.l2_sensitivity)

    # -- exact error --------------------------------------------------------------
    def prefix_variance(self, t: int) -> float:
        """Exact variance of each coordinate of the noise N_t in the t-th prefix sum
        (1 ≤ t ≤ T); coordinates are independent and identically distributed.

        With plain SGD at a constant learning rate η on the ``"gradient"`` release,
        the parameters after t steps carry noise η·N_t (variance η²·this)."""
        return self.mechanism.variance_at(t)

    def prefix_variances(self) -> NDArray[np.float64]:
        """:meth:`prefix_variance` for t = 1..T."""
        return self.mechanism.variances()

    def guarantee(self, dim: int) -> PrivacyGuarantee:
        """The whole run's guarantee for vectors of ``dim`` values: the mechanism's
        exact-real (ε, δ) plus the float-safety term for its T·dim released values.
        With cyclic Poisson sampling this is the mechanism's own, unamplified guarantee
        (true, and weaker); the amplified one is :meth:`dp_event`'s, to whose δ this
        guarantee's ``float_delta`` adds. With balls-in-bins sampling likewise: the
        amplified statement is ``amplification.certificate`` (Monte Carlo at its
        confidence, or the deterministic Rényi bound), to whose δ ``float_delta`` adds.

        Raises:
            ValueError: the mechanism carries no privacy guarantee (with_sampler).
        """
        dim = check_integer("dim", dim, ge=1)
        privacy = self.mechanism.privacy
        if privacy is None:
            raise ValueError("the mechanism carries no privacy guarantee (with_sampler)")
        safety = self.mechanism.float_safety
        if safety is None:
            return privacy
        return privacy.with_float_safety(safety.eta, self.steps * dim)

    def dp_event(self) -> Any:
        """The whole run (all T steps, every participation) as a dp_accounting
        ``DpEvent`` (needs the ``accounting`` extra): the mechanism's
        ``GaussianDpEvent`` (:meth:`~dpcount.counting.CountingMechanism.dp_event`) for
        fixed batches, the k-fold composition of the Poisson-subsampled Gaussian for
        cyclic Poisson sampling (:mod:`dpcount.training.sampling`). Balls-in-bins
        sampling has none (a Monte Carlo or Rényi certificate): ValueError."""
        if self.amplification is not None:
            if self.mechanism.privacy is None:
                raise ValueError("this copy carries no privacy guarantee (with_sampler)")
            return self.amplification.dp_event(float(self.mechanism.noise_scale))
        return self.mechanism.dp_event()

    # -- the run ------------------------------------------------------------------
    def init(self, shapes: Any) -> NoiseState:
        """Start a run over vectors shaped like ``shapes``.

        Args:
            shapes: a shape (tuple of ints), an array (its shape is used: e.g. the
                model parameters), or a dict/list/tuple nesting of them. The run
                privatizes one flattened vector of their total size per step.

        Returns:
            the run's first :class:`NoiseState` (as sensitive as the data).
        """
        layout = layout_of_shapes("shapes", shapes)
        m = self.mechanism
        source = NoiseSource.generator(m.sampler, self.rng, layout.size)
        process = m.noise_process(source, layout.size)
        return NoiseState(_Run(self, layout, process), 0)

    def privatize(self, state: NoiseState, clipped_sum: Any) -> tuple[Any, NoiseState]:
        """Privatize one step.

        Args:
            state: the latest state of the run (from :meth:`init` or the previous call).
            clipped_sum: the sum over the batch of per-example gradients each clipped
                to ℓ₂ norm ≤ C (see :func:`clip_and_sum`), with the structure and
                shapes given to :meth:`init`; real, finite (numpy, jax, … arrays).

        Returns:
            ``(noisy, new_state)``: ``noisy`` has ``clipped_sum``'s structure with numpy
            arrays (each in its leaf's floating dtype, else float64): the noisy
            gradient g_t + N_t − N_{t−1} (``release="gradient"``) or the noisy prefix
            sum Σ_{s≤t} g_s + N_t (``"prefix-sum"``).

        Raises:
            TypeError: ``state`` is not a NoiseState of this privatizer, or
                ``clipped_sum`` has another structure or non-real leaves.
            ValueError: a stale state, a run at its last step, a leaf of another
                shape or a value that is not finite.
        """
        check_instance("state", state, NoiseState, "a NoiseState from init()")
        run = state._run
        if run.owner is not self:
            raise TypeError("state comes from another privatizer's init()")
        if state.step != run.step:
            raise ValueError(
                f"state is stale: it is the state after step {state.step}, the run is at step "
                f"{run.step}; pass the state the last privatize() returned"
            )
        if run.step >= self.steps:
            raise ValueError(
                f"the run is at its horizon ({self.steps} steps): the privacy guarantee covers "
                "no further steps"
            )
        vector, dtypes = flatten("clipped_sum", clipped_sum, run.layout)
        noise = np.array(run.process.next(), dtype=np.float64, copy=True).reshape(-1)
        if run.snapped:
            if run.sds is None:  # the std of each step from here on, one step at a time
                run.sds = (math.sqrt(v) for v in self.mechanism.iter_variances(run.step + 1))
            grid = release_grids(next(run.sds))
            vector = self._float_safe(run, vector, noise, grid)
        elif self.release == "gradient":  # no guarantee (with_sampler): as computed
            vector += noise
            vector -= run.previous
            run.previous = noise
        else:
            vector += run.previous  # S_t = S_{t-1} + g_t
            run.previous = vector.copy()
            vector += noise
        run.step += 1
        return run.layout.split(vector, dtypes), NoiseState(run, run.step)

    @staticmethod
    def _float_safe(run: _Run, vector: NDArray[np.float64], noise: Any, grid: float) -> Any:
        """The float-safe release of step t (:mod:`dpcount.privacy.float_safe`): P_t =
        ``snap_release(S_t, N_t)``, a multiple of the grid with the sum's grid part out of
        every rounding; the gradient form is P_t − P_{t−1}, one rounding of the exact
        difference of two released values (post-processing)."""
        vector += run.previous  # S_t = S_{t-1} + g_t
        run.previous = vector.copy()
        prefix = snap_release(vector, noise, grid)
        if run.owner.release != "gradient":
            return prefix
        gradient = prefix - run.released
        run.released = prefix
        return gradient


@refuses_loose_budget()
def gaussian_privatizer(
    mechanism: str = "blt",
    *,
    epochs: int,
    batches_per_epoch: int,
    clip_norm: float,
    budget: Budget,
    neighbouring: str = "add-remove",
    release: Release = "gradient",
    rng: RNGLike = None,
    sampling: Sampling | str = Sampling.FIXED,
    sampling_probability: float | None = None,
    bands: int | None = None,
    monte_carlo: MonteCarlo | None = None,
    accounting: AllocationAccounting | str | None = None,
) -> GradientPrivatizer:
    """A :class:`GradientPrivatizer` calibrated for a training run.

    Args:
        mechanism: a registry name (:data:`dpcount.counting.registry.MECHANISMS`):
            ``"blt"``, ``"normalized-sqrt"``, ``"toeplitz"``, ``"sqrt"``,
            ``"binary"``, ``"honaker"``, ``"input"`` (independent noise per step:
            DP-SGD without amplification), …
        epochs: k ≥ 1 passes over the data.
        batches_per_epoch: b ≥ 1 fixed batches, visited cyclically (T = k·b steps).
        clip_norm: C > 0, the ℓ₂ bound each example's gradient is clipped to.
        budget: the :class:`~dpcount.privacy.Budget` of the whole run: (ε, δ) and an
            optional Gaussian calibration rule (None: analytic Gaussian). Its noise kind,
            if given, must be Gaussian; the step sensitivity (from ``clip_norm`` and
            ``neighbouring``) and the participation schema (``epochs`` ×
            ``batches_per_epoch``) are the run's, so a budget that sets them is refused.
        neighbouring: ``"add-remove"`` (one example added or removed: step
            sensitivity C) or ``"replace-one"`` (2C).
        release: ``"gradient"`` or ``"prefix-sum"`` (module docstring).
        rng: None (secure, for production), a Generator, or an int seed (tests).
        sampling: ``"fixed-batches"`` (default; :func:`fixed_batches`) or
            ``"cyclic-poisson"`` (:func:`~dpcount.training.sampling.cyclic_poisson_batches`
            with ``sampling_probability``; for ``"toeplitz"`` with ``bands ≤
            batches_per_epoch`` and ``"input"``): σ is then calibrated with the
            amplified accounting of :mod:`dpcount.training.sampling` (needs the
            ``accounting`` extra), or to the fixed-batch σ where that is smaller.
            ``"balls-in-bins"``
            (:func:`~dpcount.training.balls_in_bins.balls_in_bins_batches`; for
            ``"blt"``, ``"toeplitz"`` and ``"input"``, add/remove only): σ is the
            smallest the Monte Carlo accounting of
            :mod:`dpcount.training.balls_in_bins` certifies (upper confidence bound
            at 1 − ``monte_carlo.alpha``) or the sampling-free Rényi bound of
            :mod:`dpcount.training.renyi_allocation` states (deterministic), as
            ``accounting`` says, or the fixed-batch σ if neither beats it; the
            certificate is ``privatizer.amplification.certificate``.
        sampling_probability: q in (0, 1], for ``"cyclic-poisson"`` only.
        bands: the encoder's bands, for ``"toeplitz"`` only (None: full).
        monte_carlo: the sampling of the balls-in-bins accounting
            (:class:`~dpcount.training.balls_in_bins.MonteCarlo`; None: its defaults).
        accounting: for ``"balls-in-bins"`` only
            (:class:`~dpcount.training.renyi_allocation.AllocationAccounting`; None:
            ``"auto"``, both, the smaller σ — each is a valid statement at its own σ;
            ``"renyi"``: the deterministic bound only, no samples and no confidence
            level; ``"monte-carlo"``: the Monte Carlo certificate only).

    Raises:
        ValueError, TypeError: naming the parameter.
    """
    check_choice("mechanism", mechanism, MECHANISMS)
    k = check_integer("epochs", epochs, ge=1)
    b = check_integer("batches_per_epoch", batches_per_epoch, ge=1)
    c = check_real("clip_norm", clip_norm, gt=0)
    check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    given = Budget.check(budget, owner="gaussian_privatizer")
    if given.noise not in (None, NoiseKind.GAUSSIAN):
        raise ValueError(f"budget.noise must be gaussian (or None), got {given.noise}")
    if given.step_sensitivity != 1 or given.step_l2_sensitivity is not None:
        raise ValueError(
            "budget.step_sensitivity must be 1 and budget.step_l2_sensitivity None for "
            f"gaussian_privatizer, got {given.step_sensitivity!r} and "
            f"{given.step_l2_sensitivity!r}: the run derives it from clip_norm and neighbouring"
        )
    # a participation schema in the budget is refused by Budget.check: the run's
    # schema is epochs × batches_per_epoch
    run_budget = replace(
        given,
        noise=NoiseKind.GAUSSIAN,
        step_sensitivity=c if neighbouring == "add-remove" else 2.0 * c,
        participation=Participation(max_participations=k, min_separation=b),
    )
    how = Sampling.parse("sampling", sampling)
    options: dict[str, Any] = {}
    if bands is not None:
        if mechanism != "toeplitz":
            raise ValueError(f"bands is an option of mechanism='toeplitz', got {mechanism!r}")
        options["bands"] = check_integer("bands", bands, ge=1, le=k * b)
    mech = build_mechanism(mechanism, horizon=k * b, budget=run_budget, **options)
    way = _sampling_options(how, monte_carlo, accounting, sampling_probability)
    if how is Sampling.FIXED:
        return GradientPrivatizer(mech, release=release, rng=rng)
    if how is Sampling.BALLS_IN_BINS:
        if neighbouring != "add-remove":
            raise ValueError(
                "sampling='balls-in-bins' is accounted for neighbouring='add-remove' only, "
                f"got {neighbouring!r}"
            )
        bins = _balls_in_bins(mech, run_budget, monte_carlo or MonteCarlo(), c, way)
        if not bins.certificate.amplified:
            return GradientPrivatizer(mech, release=release, rng=rng)
        target = bins.certificate.noise_multiplier * c
        return _rebuilt(mech, bins, target, run_budget, options, release, rng)
    if sampling_probability is None:
        raise ValueError("sampling='cyclic-poisson' needs sampling_probability (q in (0, 1])")
    if run_budget.calibration not in (None, CalibrationRule.ANALYTIC):
        raise ValueError(
            "sampling='cyclic-poisson' calibrates with the analytic Gaussian (budget.calibration "
            f"None or 'analytic'), got calibration={run_budget.calibration}"
        )
    amplification = _cyclic_poisson(mechanism, run_budget, sampling_probability, options)
    return _amplified(mech, amplification, run_budget, options, release, rng)


def _sampling_options(
    how: Sampling,
    monte_carlo: MonteCarlo | None,
    accounting: AllocationAccounting | str | None,
    sampling_probability: float | None,
) -> AllocationAccounting:
    """The balls-in-bins accounting, refusing the options of another sampling."""
    if how is not Sampling.BALLS_IN_BINS and monte_carlo is not None:
        raise ValueError("monte_carlo is for sampling='balls-in-bins' only")
    if how is not Sampling.BALLS_IN_BINS and accounting is not None:
        raise ValueError("accounting is for sampling='balls-in-bins' only")
    way: AllocationAccounting = AllocationAccounting.parse(
        "accounting", AllocationAccounting.AUTO if accounting is None else accounting
    )
    if way is AllocationAccounting.RENYI and monte_carlo is not None:
        raise ValueError("monte_carlo is for accounting='monte-carlo' or 'auto', not 'renyi'")
    if how is not Sampling.CYCLIC_POISSON and sampling_probability is not None:
        raise ValueError("sampling_probability is for sampling='cyclic-poisson' only")
    return way


def _amplified(
    fixed: CountingMechanism,
    amplification: Amplification,
    budget: Budget,
    options: dict[str, Any],
    release: Release,
    rng: RNGLike,
) -> GradientPrivatizer:
    """The privatizer with σ from the amplified accounting (or the fixed one if smaller).

    The mechanism is rebuilt with the largest ε′ whose own worst-case calibration gives
    σ ≥ the amplified σ: its stated (ε′, δ) guarantee without amplification stays true,
    and the privatizer's dp_event states the amplified (ε, δ)."""
    assert budget.epsilon is not None and budget.delta is not None
    z = amplified_noise_multiplier(
        sampling_probability=amplification.sampling_probability,
        epochs=amplification.epochs,
        budget=budget,
    )
    target = z * amplification.unit_sensitivity
    if fixed.noise_scale <= target:  # amplification does not help: the fixed-batch σ
        return GradientPrivatizer(fixed, release=release, rng=rng)
    return _rebuilt(fixed, amplification, target, budget, options, release, rng)


def _rebuilt(
    fixed: CountingMechanism,
    amplification: Amplification | BallsInBinsAmplification,
    target: float,
    budget: Budget,
    options: dict[str, Any],
    release: Release,
    rng: RNGLike,
) -> GradientPrivatizer:
    """The mechanism rebuilt with the largest ε′ whose worst-case σ is ≥ ``target``."""
    assert budget.epsilon is not None and budget.delta is not None
    lo, hi = budget.epsilon, 2.0 * budget.epsilon  # σ(lo) > target
    while _sigma(fixed, hi, budget) >= target:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _sigma(fixed, mid, budget) >= target else (lo, mid)
    mech = build_mechanism(
        fixed.name, horizon=fixed.horizon, budget=replace(budget, epsilon=lo), **options
    )
    if not mech.noise_scale >= target:  # pragma: no cover - the bisection keeps σ(lo) ≥ target
        raise ArithmeticError("amplified calibration: the rebuilt mechanism's sigma is too small")
    return GradientPrivatizer(mech, release=release, rng=rng, amplification=amplification)


def _balls_in_bins(
    mech: CountingMechanism,
    budget: Budget,
    how: MonteCarlo,
    clip: float,
    way: AllocationAccounting,
) -> BallsInBinsAmplification:
    """The certificate (Monte Carlo, Rényi, or the one with the smaller σ: ``way``) for
    the mechanism's Toeplitz encoder (other encoders refused)."""
    from dpcount.counting.factorization.blt import BLT, encoder_coefficients
    from dpcount.counting.factorization.toeplitz import ToeplitzFactorization
    from dpcount.counting.input_perturbation import InputPerturbation

    schema = budget.participation
    assert schema is not None and budget.epsilon is not None and budget.delta is not None
    if isinstance(mech, BLT):
        encoder = encoder_coefficients(mech.buffer_decay, mech.output_scale, mech.horizon)
    elif isinstance(mech, ToeplitzFactorization):
        encoder = np.asarray(mech.coefficients, dtype=np.float64)
    elif isinstance(mech, InputPerturbation):
        encoder = np.ones(1)
    else:
        raise ValueError(
            "sampling='balls-in-bins' needs a Toeplitz encoder: mechanism='blt', 'toeplitz' "
            f"or 'input', got mechanism={mech.name!r}"
        )
    check_instance("monte_carlo", how, MonteCarlo, "a MonteCarlo")
    k, b = schema.max_participations, schema.min_separation
    found: list[MonteCarloCertificate | RenyiCertificate] = []
    if way is not AllocationAccounting.MONTE_CARLO:
        renyi = RenyiAllocationAccountant(encoder, epochs=k, batches_per_epoch=b)
        found.append(renyi.calibrate(budget.epsilon, budget.delta))
    if way is not AllocationAccounting.RENYI:
        accountant = BallsInBinsAccountant(encoder, epochs=k, batches_per_epoch=b)
        found.append(
            accountant.calibrate(
                budget.epsilon,
                budget.delta,
                samples=how.sample_count(budget.delta),
                alpha=how.alpha,
                rng=how.rng,
            )
        )
    # each is a valid statement at its own σ; ties keep the first (the Rényi one)
    certificate = min(found, key=lambda cert: cert.noise_multiplier)
    return BallsInBinsAmplification(certificate, clip)


def _sigma(mech: CountingMechanism, epsilon: float, budget: Budget) -> float:
    """σ the mechanism's own calibration would give at ``epsilon`` (its sensitivity)."""
    assert mech.privacy is not None and budget.delta is not None
    return gaussian_sigma(mech.privacy.l2_sensitivity, epsilon, budget.delta)


def _cyclic_poisson(name: str, budget: Budget, q: float, options: dict[str, Any]) -> Amplification:
    """The cyclic Poisson accounting of a banded strategy (refusing the others)."""
    schema = budget.participation
    assert schema is not None  # set by gaussian_privatizer
    b = schema.min_separation
    bands = options.get("bands")
    if name == "input":
        bands = 1
    if name not in ("toeplitz", "input") or bands is None or bands > b:
        raise ValueError(
            "sampling='cyclic-poisson' needs a banded strategy with bands <= batches_per_epoch "
            f"({b}): mechanism='toeplitz' with bands=..., or 'input'; got mechanism={name!r}"
            + ("" if name != "toeplitz" else f" with bands={bands!r}")
        )
    horizon = schema.max_participations * b
    single = build_mechanism(
        name, horizon=horizon, budget=replace(budget, participation=None), **options
    )
    assert single.privacy is not None
    return Amplification(
        sampling_probability=check_real("sampling_probability", q, gt=0, le=1),
        epochs=schema.max_participations,
        unit_sensitivity=float(single.privacy.l2_sensitivity),
    )


def clip_and_sum(per_example: Any, clip_norm: float) -> Any:
    """Clip each example's gradient to ℓ₂ norm ≤ ``clip_norm`` and sum over examples.

    Args:
        per_example: an array or a dict/list/tuple of arrays, each with the examples
            on its leading axis (same length n for every leaf). An example's norm is
            taken over all its leaves together (its whole contribution).
        clip_norm: C > 0.

    Returns:
        the same structure without the leading axis, float64: Σ_i g_i·min(1, C/‖g_i‖).
    """
    c = check_real("clip_norm", clip_norm, gt=0)
    found: list[tuple[str, Any]] = []
    root = walk(per_example, "per_example", lambda v: not isinstance(v, (dict, list, tuple)), found)
    arrays = []
    for path, value in found:
        arr = np.asarray(value)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{path} must hold real numbers, got dtype {arr.dtype}")
        if arr.ndim == 0:
            raise ValueError(f"{path} must have a leading examples axis, got a scalar")
        arrays.append(arr.astype(np.float64).reshape(arr.shape[0], -1))
    if not arrays:
        raise ValueError("per_example must hold at least one array")
    n = arrays[0].shape[0]
    for (path, _), arr in zip(found, arrays, strict=True):
        if arr.shape[0] != n:
            raise ValueError(f"{path} has {arr.shape[0]} examples, the first leaf {n}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{path} must be finite, got a NaN or infinite value")
    norms = np.sqrt(sum(np.einsum("ij,ij->i", a, a) for a in arrays))
    # min(1, C'/‖g‖) with C' = C(1 − 1e-12): the rounding of the norm and of the
    # product (a few ulp) cannot lift a clipped norm above C
    target = c * (1.0 - _CLIP_MARGIN)
    factor = np.minimum(1.0, target / np.maximum(norms, np.finfo(np.float64).tiny))
    sums = [factor @ a for a in arrays]
    shapes = [np.shape(np.asarray(v))[1:] for _, v in found]
    return Layout(root, tuple(p for p, _ in found), tuple(shapes)).unflatten(
        [s.reshape(shape) for s, shape in zip(sums, shapes, strict=True)]
    )
