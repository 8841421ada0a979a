"""A counter without a horizon in bounded state: a BLT calibrated for the infinite stream.

A buffered linear Toeplitz (BLT) encoder C = BLT(θ, ω) (c_0 = 1, c_k = Σ_i ω_i θ_i^{k−1},
Dvijotham et al. 2024) whose decays are all < 1 has square-summable coefficients, so
every column of the infinite encoder has the same finite ℓ₂ norm

    ‖c‖² = Σ_{k≥0} c_k² = 1 + Σ_{i,j} ω_i ω_j / (1 − θ_i θ_j),

and ONE calibration serves every prefix of an endless stream. The decoder B = A·C⁻¹ is
again Toeplitz with b_k = a + Σ_i β_i λ_i^k (:func:`~dpcount.counting.factorization.blt.
blt_inverse`), so the noise needs n + 1 running values per coordinate (the n buffers and
the running sum) whatever the stream's length: vector streams run in bounded memory.

The price of a finite state is linear growth far out: b_k → a = 1/c(1) > 0, so the
variance grows like a²·t once t passes the longest time scale 1/(1 − θ_max). The shipped
parameters (:data:`HORIZON_FREE_BLT_PARAMETERS`) were fitted to the largest ratio of
‖c‖²·Σ_{k<t} b_k² to the plain square root's variance told the horizon t,
(Σ_{k<t} f(k)²)² with f(k) = C(2k, k)/4^k, over t = 2^4 … 2^24 (a soft minimax over
four, then eight points per octave; ``benchmarks/make_horizon_free_blt.py``): 17
buffers, largest ratio 1.5603 (at every t ≤ 2^16, and on sixteen points per octave to
2^24), 2.07 at 2^26 and 4.33 at 2^28, where the doubling counter overtakes it
(``benchmarks/bench_unbounded.py --horizon-free``, docs/unbounded.md, with the
frontier of buffers against ratio).

Notation (paper → code):

=========  =========================================================================
θ, ω       :data:`HORIZON_FREE_BLT_PARAMETERS` (``buffer_decay``, ``output_scale``)
‖c‖²       :func:`infinite_sensitivity_squared` — exact rational arithmetic, rounded up
λ, β, a    the decoder (:func:`~dpcount.counting.factorization.blt.blt_inverse`)
V(t)/σ²    Σ_{k<t} b_k² (``noise_coefficients``, ``variance_at``)
=========  =========================================================================

Certified sensitivity: the floats θ_i, ω_i are exact dyadic rationals, so the closed form
above is evaluated exactly with :class:`fractions.Fraction` (every 1 − θ_iθ_j > 0 is
exact) and converted to the next float at or above it; the ℓ₂ sensitivity is its square
root enlarged by a relative 10⁻¹² (BLT's margin), so rounding can only add noise.

References:
    * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta. "Efficient and
      near-optimal noise generation for streaming differential privacy". FOCS 2024.
      https://arxiv.org/abs/2404.16706
    * B. Jacobsen, K. Fawaz. "Private Continual Counting of Unbounded Streams".
      NeurIPS 2025. https://arxiv.org/abs/2506.15018
    * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential privacy:
      analytical calibration and optimal denoising". ICML 2018.
      https://arxiv.org/abs/1805.06530
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpcount._validate import check_integer
from dpcount.counting.base import MAX_HORIZON, MemoryEstimate
from dpcount.counting.factorization._types import Array
from dpcount.counting.factorization.blt import BLT, check_blt_parameters
from dpcount.counting.factorization.horizon_free import single_participation
from dpcount.counting.factorization.sqrt import SENSITIVITY_MARGIN
from dpcount.privacy.budget import Budget, BudgetFields, Participation
from dpcount.privacy.rng import RNGLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from dpcount.counting.participation import Sensitivity

__all__ = [
    "HORIZON_FREE_BLT_PARAMETERS",
    "HorizonFreeBLT",
    "infinite_l1_norm",
    "infinite_sensitivity_squared",
]

#: (buffer_decay θ, output_scale ω) fitted to the largest ratio to the plain square root
#: told t over t = 2^4 … 2^24 (module docstring)
HORIZON_FREE_BLT_PARAMETERS: tuple[tuple[float, ...], tuple[float, ...]] = (
    (
        0.2522228481556076,
        0.8941458924036229,
        0.9536641672406664,
        0.9796453386425099,
        0.9907304221793936,
        0.9957108645689925,
        0.9981698382535413,
        0.9991046063874143,
        0.9996313254279154,
        0.9998258090905909,
        0.9999182216064832,
        0.9999667883708957,
        0.9999848498648074,
        0.9999923623194906,
        0.9999974080465163,
        0.9999987770951867,
        0.9999998915331798,
    ),
    (
        0.123554293860025,
        0.33144038820285104,
        0.0016669253101482054,
        0.0010887874308884615,
        0.0219148204163263,
        0.010712827295969798,
        0.00520742662244718,
        0.0050943553189140185,
        0.002725073584311835,
        0.0014933311455405213,
        0.0014695200785799511,
        0.0005762880798131725,
        0.0006593490345070074,
        0.00018908698902923583,
        0.00032726262752559994,
        0.00012212208110713854,
        0.0001958255107977653,
    ),
)
#: largest horizon whose full variance table ``noise_coefficients`` builds
_TABLE_LIMIT = 1 << 26


def _round_up(x: Fraction) -> float:
    """The smallest float ≥ x (x ≥ 0, below the largest float)."""
    f = float(x)  # correctly rounded to nearest
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _exact(theta: Array, omega: Array) -> tuple[list[Fraction], list[Fraction]]:
    return [Fraction(float(v)) for v in theta], [Fraction(float(v)) for v in omega]


def infinite_sensitivity_squared(buffer_decay: Any, output_scale: Any) -> float:
    """Σ_{k≥0} c_k² = 1 + Σ_{i,j} ω_iω_j/(1 − θ_iθ_j) for C = BLT(θ, ω), evaluated in exact
    rational arithmetic and rounded up to a float (a certified upper bound, off by at
    most one ulp).

    Raises:
        ValueError: parameters outside the BLT domain
            (:func:`~dpcount.counting.factorization.blt.check_blt_parameters`).
    """
    th, om = _exact(*check_blt_parameters(buffer_decay, output_scale))
    total = Fraction(1)
    for i in range(len(th)):
        total += om[i] * om[i] / (1 - th[i] * th[i])
        for j in range(i + 1, len(th)):
            total += 2 * om[i] * om[j] / (1 - th[i] * th[j])
    return _round_up(total)


def infinite_l1_norm(buffer_decay: Any, output_scale: Any) -> float:
    """Σ_{k≥0} c_k = c(1) = 1 + Σ_i ω_i/(1 − θ_i), exactly and rounded up."""
    th, om = _exact(*check_blt_parameters(buffer_decay, output_scale))
    return _round_up(1 + sum((w / (1 - t) for t, w in zip(th, om, strict=True)), Fraction(0)))


class HorizonFreeBLT(BLT):
    """A BLT calibrated for the infinite stream: a counter without a horizon whose stream
    holds n + 1 values per coordinate (module docstring).

    Formal guarantee:
        Neighbouring relation: event level, single participation — two streams (of any
        length, finite or infinite) that differ at one step by at most Δ =
        ``step_sensitivity`` (ℓ₂ norm of the change for vector steps). The release
        S_t + (B z)_t is (B(C x + z))_t, post-processing of C x + z with ONE Gaussian
        z for the whole stream; a change at one step moves C x by Δ times a column
        of the infinite Toeplitz C, whose ℓ₂ norm is ‖c‖ for every column
        (:func:`infinite_sensitivity_squared`: exact, rounded up, then enlarged by a
        relative 10⁻¹²). Gaussian z calibrated to Δ·‖c‖ gives (ε, δ)-DP for the whole
        infinite release (analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8,
        by default), so every prefix of any length has the guarantee; ``horizon``
        only bounds the steps one instance releases. Gaussian noise only; no
        participation schema.

        Exact variance: Var_t = σ²·Σ_{k<t} b_k², b_k = a + Σ_i β_i λ_i^k, the same for
        every horizon (O(t·n) in bounded memory).

    References:
        * K. Dvijotham, H. B. McMahan, K. Pillutla, T. Steinke, A. Thakurta.
          "Efficient and near-optimal noise generation for streaming differential
          privacy". FOCS 2024. https://arxiv.org/abs/2404.16706
        * B. Jacobsen, K. Fawaz. "Private Continual Counting of Unbounded Streams".
          NeurIPS 2025. https://arxiv.org/abs/2506.15018
        * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
          privacy: analytical calibration and optimal denoising". ICML 2018.
          https://arxiv.org/abs/1805.06530

    Args:
        horizon: the most steps this instance releases, 1 … 2^53 (nothing is built
            for it up front).
        buffer_decay: θ (None: the shipped :data:`HORIZON_FREE_BLT_PARAMETERS`, given
            together with ``output_scale``).
        output_scale: ω (None: the shipped parameters).
        budget: a :class:`~dpcount.privacy.Budget` with δ (Gaussian noise), or its
            fields as keywords.
        rng: None (OS entropy), or a Generator / int seed (research and tests only).

    Raises:
        ValueError: a horizon outside [1, 2^53], only one of ``buffer_decay`` and
            ``output_scale``, parameters outside the BLT domain, a noise kind other
            than Gaussian, or a participation schema (naming them).
    """

    name = "horizon-free-blt"

    def __init__(
        self,
        horizon: int,
        *,
        buffer_decay: Any = None,
        output_scale: Any = None,
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[BudgetFields],
    ) -> None:
        if (buffer_decay is None) != (output_scale is None):
            raise ValueError(
                "give both buffer_decay and output_scale, or neither (the shipped parameters)"
            )
        if buffer_decay is None:
            buffer_decay, output_scale = HORIZON_FREE_BLT_PARAMETERS
        super().__init__(
            horizon,
            buffer_decay=buffer_decay,
            output_scale=output_scale,
            budget=budget,
            rng=rng,
            **fields,
        )

    @classmethod
    def memory_estimate(
        cls, horizon: int, dim: int | None = None, **options: Any
    ) -> MemoryEstimate:
        """Stream: n buffers and the running sum, (n + 1)·d floats, plus the step's draw,
        independent of the horizon (n = 17 shipped buffers unless ``buffers``)."""
        T = check_integer("horizon", horizon, ge=1, le=MAX_HORIZON)
        buffers = options.get("buffers")
        n = len(HORIZON_FREE_BLT_PARAMETERS[0]) if buffers is None else int(buffers)
        return MemoryEstimate(structure=64 * n, stream=cls._stream_bytes(T, dim, n))

    def _accept_budget(self, budget: Budget) -> Budget:
        return single_participation(budget, "HorizonFreeBLT")

    def _unit_sensitivities(self) -> tuple[float, float]:
        theta, omega = self.buffer_decay, self.output_scale
        l1 = infinite_l1_norm(theta, omega)  # recorded only (Gaussian noise)
        l2 = math.sqrt(infinite_sensitivity_squared(theta, omega))
        return l1 * (1.0 + SENSITIVITY_MARGIN), l2 * (1.0 + SENSITIVITY_MARGIN)

    def _schema_sensitivities(self, schema: Participation) -> tuple[Sensitivity, Sensitivity]:
        raise ValueError("HorizonFreeBLT takes no participation schema")  # refused above

    def noise_coefficients(self) -> Array:
        """Σ_{k<t} b_k² for t = 1..T (T ≤ 2^26: the whole table is built)."""
        check_integer("horizon", self.horizon, le=_TABLE_LIMIT)
        return super().noise_coefficients()

    def _repr_fields(self) -> dict[str, object]:
        return {"buffers": len(self.buffer_decay)}
