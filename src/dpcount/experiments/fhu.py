"""Reproductions of constant-matters (Fichtenberger, Henzinger, Upadhyay, ICML 2023).

* ``fhu-error`` (Fig 1 / Fig 3): ℓ∞ error and outputs over time of the square-root
  factorization and the binary tree mechanism, both with Gaussian noise (App. D),
  T = 2^16, δ = 1e−10, ε = 0.8 (Fig 1) and 0.5 (Fig 3), Bernoulli(p) streams.
* ``fhu-snr`` (Table 2): average signal-to-noise ratio per sparsity p.
* ``fhu-top1`` (Fig 4): the top-1 statistic of a continual histogram on a Zipf
  stream of 2048 items over a universe of 20, ε = 0.1, δ = 1e−10.
* ``fhu-cbnorm`` (Fig 2): Mathias' bounds on ‖M_count‖_cb, the paper's Ψ(T) and
  the exact Σ_{k<T} f(k)² of the explicit factorization.

Both mechanisms use the paper's calibration σ = C_{ε,δ}·Δ₂ (``calibration="fhu"``,
eq. 2; ε < 1) so that magnitudes are the paper's; the square-root factorization
uses ONE noise vector and the exact column norm √S(T) (errata, see
docs/factorization.md). The paper averaged 10^6 runs; the noise of both
mechanisms is Gaussian and data-independent, so every expected error here is
computed exactly from the per-step variances, and a smaller number of empirical
runs checks those exact figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri
from scipy.stats import chi2

from dpcount.analysis import cb_norm_bounds
from dpcount.apps import ContinualHistogram, top1_counts, zipf_items
from dpcount.counting import BinaryTree, CountingMechanism, SqrtFactorization
from dpcount.counting.toeplitz import psi_bound, sqrt_l2_norm_squared
from dpcount.experiments._framework import (
    Comparison,
    ExperimentConfig,
    ExperimentResult,
    figure,
    progress_iter,
    timed,
    write_csv,
)
from dpcount.privacy.calibration import fhu_constant

__all__ = ["fhu_cbnorm", "fhu_error", "fhu_snr", "fhu_top1"]

#: App. D's sparsity levels (the last stream is all zeros)
P_VALUES = (2.0**-4, 2.0**-5, 2.0**-6, 2.0**-7, 2.0**-8, 2.0**-9, 2.0**-10, 0.0)
#: Table 2 of the paper (ε = 0.5, δ = 1e-10), p = 2^-4 … 2^-10
PAPER_SNR = {
    "binary": (4.72, 2.40, 1.12, 0.61, 0.31, 0.15, 0.072),
    "sqrt": (14.50, 7.37, 3.46, 1.86, 0.96, 0.47, 0.22),
}
HORIZON = 2**16
DELTA = 1e-10
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# Columns per release: (2^16 × 64) float64 arrays stay near 32 MB.
_CHUNK = 64


def _mechanisms(
    horizon: int, epsilon: float, rng: np.random.Generator, calibration: str = "fhu"
) -> dict[str, CountingMechanism]:
    """App. D's two mechanisms: square root (Alg. 1) and binary tree, Gaussian noise."""
    return {
        "sqrt": SqrtFactorization(
            horizon, epsilon=epsilon, delta=DELTA, calibration=calibration, rng=rng
        ),
        "binary": BinaryTree(
            horizon,
            epsilon=epsilon,
            delta=DELTA,
            noise="gaussian",
            calibration=calibration,
            rng=rng,
        ),
    }


def _streams(rng: np.random.Generator, horizon: int) -> dict[float, NDArray[np.int64]]:
    """One Bernoulli(p) stream per sparsity level (App. D)."""
    return {p: rng.binomial(1, p, size=horizon).astype(np.int64) for p in P_VALUES}


def _write_table(path: Path, header: list[str], columns: list[NDArray[np.float64]]) -> Path:
    """A numeric CSV (one column per array), written by numpy: large per-step tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(
        path,
        np.column_stack(columns),
        fmt="%.10g",
        delimiter=",",
        header=",".join(header),
        comments="",
    )
    return path


def _fmt_p(p: float) -> str:
    return "0" if p == 0 else f"2^{round(math.log2(p))}"


@dataclass
class _ErrorStats:
    """Running sums over empirical runs of one mechanism (errors = release − truth)."""

    horizon: int
    runs: int = 0
    abs_sum: NDArray[np.float64] = field(init=False)
    sq_sum: NDArray[np.float64] = field(init=False)
    runmax_sum: NDArray[np.float64] = field(init=False)
    #: 1-based steps whose errors are kept run by run (for the exact χ² test)
    probe_steps: tuple[int, ...] = ()
    linf: list[float] = field(default_factory=list)
    probes: dict[float, list[NDArray[np.float64]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.abs_sum = np.zeros(self.horizon)
        self.sq_sum = np.zeros(self.horizon)
        self.runmax_sum = np.zeros(self.horizon)

    def add(self, err: NDArray[np.float64], p: float) -> None:
        a = np.abs(err)
        self.runs += err.shape[1]
        self.abs_sum += a.sum(axis=1)
        self.sq_sum += (err * err).sum(axis=1)
        self.runmax_sum += np.maximum.accumulate(a, axis=0).sum(axis=1)
        self.linf.extend(a.max(axis=0).tolist())
        idx = np.asarray(self.probe_steps, dtype=np.int64) - 1
        self.probes.setdefault(p, []).append(err[idx, :])

    def mean_abs(self) -> NDArray[np.float64]:
        return self.abs_sum / self.runs

    def mean_abs_se(self) -> NDArray[np.float64]:
        m = self.mean_abs()
        var = np.maximum(self.sq_sum / self.runs - m * m, 0.0)
        return np.sqrt(var / self.runs)

    def rmse(self) -> NDArray[np.float64]:
        return np.sqrt(self.sq_sum / self.runs)

    def mean_runmax(self) -> NDArray[np.float64]:
        return self.runmax_sum / self.runs


def _run(
    mech: CountingMechanism,
    streams: dict[float, NDArray[np.int64]],
    runs_per_stream: int,
    stats: _ErrorStats,
    show: bool,
    label: str,
) -> dict[float, NDArray[np.float64]]:
    """Release every stream ``runs_per_stream`` times; return one sample output per stream."""
    samples: dict[float, NDArray[np.float64]] = {}
    jobs = [(p, start) for p in streams for start in range(0, runs_per_stream, _CHUNK)]
    for p, start in progress_iter(jobs, label, show):
        x = streams[p]
        n = min(_CHUNK, runs_per_stream - start)
        out = np.asarray(mech.release(np.repeat(x[:, None], n, axis=1)), dtype=np.float64)
        truth = np.cumsum(x).astype(np.float64)
        if p not in samples:
            samples[p] = out[:, 0].copy()
        stats.add(out - truth[:, None], p)
    return samples


def _probe_covariance(mech: CountingMechanism, steps: tuple[int, ...]) -> NDArray[np.float64]:
    """Exact covariance of the noise N_t at the given 1-based steps.

    Square root (Alg. 1, one z): N_t = Σ_{s≤t} f(t − s)·z_s, so for a ≤ b
    Cov(N_a, N_b) = σ_z²·Σ_{k<a} f(k)·f(b − a + k). Binary tree (Alg. 1 with k = 2):
    N_t sums the noise of the dyadic nodes of t's binary digits, so Cov = σ_z² × the
    number of nodes two prefixes share.
    """
    var = mech.sampler.variance
    n = len(steps)
    cov = np.zeros((n, n))
    if isinstance(mech, SqrtFactorization):
        f = mech.coefficients()
        for i, a in enumerate(steps):
            for j, b in enumerate(steps):
                lo, hi = min(a, b), max(a, b)
                cov[i, j] = var * float(np.dot(f[:lo], f[hi - lo : hi]))
        return cov
    if isinstance(mech, BinaryTree):

        def nodes(t: int) -> set[tuple[int, int]]:
            out, start = set(), 0
            for level in range(t.bit_length() - 1, -1, -1):
                if t >> level & 1:
                    out.add((start, level))
                    start += 1 << level
            return out

        sets = [nodes(t) for t in steps]
        for i in range(n):
            for j in range(n):
                cov[i, j] = var * len(sets[i] & sets[j])
        return cov
    raise TypeError(f"no probe covariance for {type(mech).__name__}")


def _chi2_z(q: float, df: int) -> float:
    """The standard-normal quantile z of a χ²_df statistic q (P(Z ≤ z) = P(χ²_df ≤ q)).

    Exact (``chi2`` and ``ndtri``) while the tail probability is above 1e-300; beyond,
    where only a wrong answer can land, the Wilson–Hilferty transformation
    z = ((q/df)^(1/3) − 1 + 2/(9df))/√(2/(9df)) keeps the value finite.
    """
    tail = chi2.cdf(q, df) if q < df else chi2.sf(q, df)
    if tail > 1e-300:
        z = float(ndtri(tail))
        return z if q < df else -z
    c = 2.0 / (9.0 * df)
    return float(((q / df) ** (1.0 / 3.0) - 1.0 + c) / math.sqrt(c))


def _ratio_se(a: float, se_a: float, b: float, se_b: float) -> tuple[float, float]:
    """a/b and its standard error by the delta method (independent a, b)."""
    r = a / b
    return r, r * math.hypot(se_a / a, se_b / b)


# ---------------------------------------------------------------------------------------
# fhu-error (Fig 1, Fig 3)
# ---------------------------------------------------------------------------------------
@timed
def fhu_error(config: ExperimentConfig) -> ExperimentResult:
    """Fig 1/3: ℓ∞ error and outputs over time, square root vs binary tree (Gaussian)."""
    T = HORIZON
    eps_values = (0.8, 0.5)  # Fig 1, Fig 3
    runs_per_stream = 8 if config.quick else 128  # × 8 streams
    rng = np.random.default_rng(config.seed)
    streams = _streams(rng, T)
    t = np.arange(1, T + 1)
    probe_steps = tuple(2**i - 1 for i in range(1, int(math.log2(T)) + 1))
    sd: dict[tuple[float, str], NDArray[np.float64]] = {}
    stats: dict[tuple[float, str], _ErrorStats] = {}
    samples: dict[tuple[float, str], dict[float, NDArray[np.float64]]] = {}
    mechs: dict[tuple[float, str], CountingMechanism] = {}
    for eps in eps_values:
        for name, mech in _mechanisms(T, eps, rng).items():
            key = (eps, name)
            mechs[key] = mech
            sd[key] = np.sqrt(mech.variances())
            stats[key] = _ErrorStats(T, probe_steps=probe_steps)
            label = f"fhu-error ε={eps} {name}"
            samples[key] = _run(
                mech, streams, runs_per_stream, stats[key], config.show_progress, label
            )
    runs = stats[(0.8, "sqrt")].runs

    # Per-step data (exact and empirical).
    header = ["t"]
    columns: list[NDArray[np.float64]] = [t.astype(np.float64)]
    for eps in eps_values:
        for name in ("sqrt", "binary"):
            s = stats[(eps, name)]
            header += [
                f"eps{eps}_{name}_sd_exact",
                f"eps{eps}_{name}_mean_abs_exact",
                f"eps{eps}_{name}_mean_abs_empirical",
                f"eps{eps}_{name}_mean_running_linf_empirical",
            ]
            columns += [sd[(eps, name)], sd[(eps, name)] * _SQRT_2_OVER_PI]
            columns += [s.mean_abs(), s.mean_runmax()]
    csv_path = _write_table(config.out / "fhu-error.csv", header, columns)

    # Sample outputs (Fig 3, ε = 0.5): one run per stream and mechanism.
    out_header = ["t"]
    out_cols: list[NDArray[np.float64]] = [t.astype(np.float64)]
    for p in P_VALUES:
        out_header += [f"p{_fmt_p(p)}_true", f"p{_fmt_p(p)}_sqrt", f"p{_fmt_p(p)}_binary"]
        out_cols += [np.cumsum(streams[p]).astype(np.float64)]
        out_cols += [samples[(0.5, "sqrt")][p], samples[(0.5, "binary")][p]]
    _write_table(config.out / "fhu-error-outputs.csv", out_header, out_cols)

    # The "about 4x at t = 2^i − 1" claim.
    exps = list(range(1, int(math.log2(T)) + 1))
    pow_rows: list[list[object]] = []
    emp_ratio: dict[float, dict[int, tuple[float, float]]] = {e: {} for e in eps_values}
    for i in exps:
        tm = 2**i - 1  # t = 2^i − 1 (1-based step), index tm − 1
        exact_m1 = float(sd[(0.8, "binary")][tm - 1] / sd[(0.8, "sqrt")][tm - 1])
        tp = min(2**i, T)
        exact_p = float(sd[(0.8, "binary")][tp - 1] / sd[(0.8, "sqrt")][tp - 1])
        row: list[object] = [i, tm, exact_m1, tp, exact_p]
        for eps in eps_values:
            sb, ss = stats[(eps, "binary")], stats[(eps, "sqrt")]
            r, se = _ratio_se(
                float(sb.mean_abs()[tm - 1]),
                float(sb.mean_abs_se()[tm - 1]),
                float(ss.mean_abs()[tm - 1]),
                float(ss.mean_abs_se()[tm - 1]),
            )
            emp_ratio[eps][i] = (r, se)
            row += [r, se]
        pow_rows.append(row)
    pow_header = ["i", "t=2^i-1", "exact_sd_ratio_binary_over_sqrt", "t=2^i", "exact_ratio_at_2^i"]
    for eps in eps_values:
        pow_header += [f"eps{eps}_empirical_mean_abs_ratio", f"eps{eps}_ratio_se"]
    write_csv(config.out / "fhu-error-powers.csv", pow_header, pow_rows)

    ratio_t = sd[(0.8, "binary")] / sd[(0.8, "sqrt")]
    exact_last = float(ratio_t[T - 2])  # t = T − 1
    exact_first = float(ratio_t[0])
    frac_sqrt_better = float(np.mean(ratio_t > 1.0))
    first_binary_better = min(i for i in exps if ratio_t[min(2**i, T) - 1] < 1.0)
    r08, se08 = emp_ratio[0.8][exps[-1]]
    r05, se05 = emp_ratio[0.5][exps[-1]]
    binary = mechs[(0.8, "binary")]
    assert isinstance(binary, BinaryTree)
    max_nodes = int(np.max(binary.noise_coefficients()))
    h = binary.height
    binary_norm = math.sqrt(max_nodes * h)
    sqrt_norm = sqrt_l2_norm_squared(T)
    # Theorem 1.2 at ε = 0.8, β = 1/3: paper's expression vs ours.
    beta = 1.0 / 3.0
    sq08 = mechs[(0.8, "sqrt")]
    assert isinstance(sq08, SqrtFactorization)
    paper_bound = sq08.paper_linf_bound(beta)
    our_bound = sq08.linf_bound(beta)
    linf_q = float(np.quantile(stats[(0.8, "sqrt")].linf, 1.0 - beta))
    exceed = float(np.mean(np.array(stats[(0.8, "sqrt")].linf) > paper_bound))
    # Empirical vs exact, jointly at the probe steps t = 2^i − 1: with the exact covariance Σ
    # of the noise there, Σ_runs eᵀΣ⁻¹e ~ χ² with (probes × runs) degrees of freedom exactly
    # (independent runs, Gaussian noise). The same test against twice the variance (q/2)
    # shows it rejects a wrong answer.
    z_scores: dict[str, float] = {}
    z_by_p: dict[float, float] = {}
    for (eps, name), st in stats.items():
        prec = np.linalg.inv(_probe_covariance(mechs[(eps, name)], st.probe_steps))
        q_total, df_total = 0.0, 0
        for p, blocks in st.probes.items():
            e = np.concatenate(blocks, axis=1)
            q = float(np.einsum("ir,ij,jr->", e, prec, e))
            q_total, df_total = q_total + q, df_total + e.size
            if (eps, name) == (0.8, "sqrt"):
                z_by_p[p] = _chi2_z(q, e.size)
        z_scores[f"z_eps{eps}_{name}"] = _chi2_z(q_total, df_total)
        z_scores[f"z_wrong_eps{eps}_{name}"] = _chi2_z(q_total / 2.0, df_total)
    max_z = max(abs(z) for z in z_by_p.values())
    comparisons = [
        Comparison(
            "error ratio binary/√A at t = 2^16 − 1 (exact std)",
            "≈ 4",
            round(exact_last, 3),
            f"over t = 2^i − 1, i = 1..16: {exact_first:.2f} … {exact_last:.2f}",
        ),
        Comparison(
            "same, empirical mean |error| ratio (ε = 0.8)",
            "≈ 4",
            round(r08, 3),
            f"± {se08:.3f} (SE, {runs} runs); ε = 0.5: {r05:.3f} ± {se05:.3f}",
        ),
        Comparison(
            "√A error below binary at every t",
            "consistently",
            round(frac_sqrt_better, 4),
            f"fraction of t (exact std); binary is lower at t = 2^i for i ≥ {first_binary_better}",
        ),
        Comparison(
            "binary ‖L‖2→∞‖R‖1→2 at T = 2^16 (Remark 1.3)",
            f"log2T(log2T+1) = {16 * 17}",
            round(binary_norm, 3),
            f"√({max_nodes}·{h}): the paper's expression is the square",
        ),
        Comparison(
            "binary / √A norm product (ℓ∞ suboptimality)",
            f"π·log2(e) = {math.pi * math.log2(math.e):.3f}",
            round(binary_norm / sqrt_norm, 3),
            "at T = 2^16 (asymptotic limit π·log2 e)",
        ),
        Comparison(
            "Thm 1.2 bound, ε = 0.8, β = 1/3 (2/3-quantile of max_t |error|)",
            f"C·Ψ(T)·√ln(6T/β) = {paper_bound:.1f}",
            round(linf_q, 2),
            f"empirical quantile: the paper's bound is exceeded in {exceed:.0%} of runs "
            f"(> β); our exact union bound {our_bound:.1f}",
        ),
        Comparison(
            "the error does not depend on p",
            "confirmed",
            round(max_z, 2),
            "largest |z| over the 8 streams of the exact χ² test of √A's errors (ε = 0.8) "
            "at t = 2^i − 1 against the data-independent covariance",
        ),
    ]
    c08 = fhu_constant(0.8, DELTA)
    notes = [
        f"both mechanisms: Gaussian noise with σ = C_ε,δ·Δ2 (C = {c08:.2f} at ε = 0.8); √A "
        f"with ONE noise vector and the exact S(T) = {sqrt_norm:.4f} (Ψ(T) = "
        f"{psi_bound(T):.4f} would under-noise); binary tree height {h}.",
        "the paper averaged 10^6 runs; here E|error_t| = σ_t·√(2/π) exactly (Gaussian, "
        f"data-independent noise), checked by {runs} empirical runs per mechanism and ε "
        f"({runs_per_stream} per stream).",
        "binary/√A ratios do not depend on ε or on the calibration (both scale σ by the "
        "same factor).",
        "exact χ² test of the empirical errors at t = 2^i − 1 against their covariance: z = "
        + ", ".join(f"{v:.2f}" for k, v in z_scores.items() if k.startswith("z_eps"))
        + " (ε = 0.8/0.5 × √A/binary); against twice the variance: z = "
        + ", ".join(f"{v:.1f}" for k, v in z_scores.items() if k.startswith("z_wrong"))
        + ".",
        "extra data: fhu-error-outputs.csv (Fig 3 sample outputs), fhu-error-powers.csv "
        "(ratios at t = 2^i − 1 and 2^i).",
    ]
    fig_path = config.out / "fhu-error.png"
    with figure(fig_path, ncols=4, nrows=3, size=(4.6, 3.3)) as (_, axes):
        colors = {"sqrt": "tab:blue", "binary": "tab:orange"}
        for col, eps in enumerate(eps_values):
            ax = axes[0][col]
            for name in ("binary", "sqrt"):
                s = stats[(eps, name)]
                ax.plot(t, s.mean_abs(), color=colors[name], lw=0.3, alpha=0.5)
                ax.plot(
                    t,
                    sd[(eps, name)] * _SQRT_2_OVER_PI,
                    color=colors[name],
                    lw=1.2,
                    label=f"{name}: exact E|error|",
                )
            ax.set_xlabel("t")
            ax.set_ylabel("|error_t|")
            ax.set_title(f"Fig {1 if eps == 0.8 else 3}: ε = {eps}, δ = 1e-10 (thin: {runs} runs)")
            ax.legend(fontsize=7, loc="upper left")
        ax = axes[0][2]
        ax.semilogx(t, ratio_t, color="0.7", lw=0.3, label="exact std ratio, all t")
        ax.semilogx(
            [2**i - 1 for i in exps],
            [ratio_t[2**i - 2] for i in exps],
            "o-",
            ms=3,
            color="tab:red",
            label="exact, t = 2^i − 1",
        )
        ax.errorbar(
            [2**i - 1 for i in exps],
            [emp_ratio[0.8][i][0] for i in exps],
            yerr=[2 * emp_ratio[0.8][i][1] for i in exps],
            fmt="x",
            color="k",
            ms=4,
            label="empirical mean|error| ratio ±2SE",
        )
        ax.semilogx(
            [min(2**i, T) for i in exps],
            [ratio_t[min(2**i, T) - 1] for i in exps],
            "s",
            ms=3,
            color="tab:green",
            label="exact, t = 2^i",
        )
        ax.axhline(4.0, color="k", ls="--", lw=0.8, label="paper: ≈ 4")
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_xlabel("t")
        ax.set_ylabel("binary / √A")
        ax.set_title("error ratio binary / square root")
        ax.legend(fontsize=6, loc="upper left")
        ax = axes[0][3]
        for name in ("binary", "sqrt"):
            ax.plot(
                t,
                stats[(0.8, name)].mean_runmax(),
                color=colors[name],
                label=f"{name}: E max_(s≤t) |error_s|",
            )
        ax.axhline(paper_bound, color="k", ls="--", lw=0.8, label="Thm 1.2 (β = 1/3)")
        ax.set_xlabel("t")
        ax.set_title("running ℓ∞ error, ε = 0.8")
        ax.legend(fontsize=7, loc="upper left")
        for j, p in enumerate(P_VALUES):
            ax = axes[1 + j // 4][j % 4]
            ax.plot(t, samples[(0.5, "binary")][p], color=colors["binary"], lw=0.5, label="binary")
            ax.plot(t, samples[(0.5, "sqrt")][p], color=colors["sqrt"], lw=0.5, label="√A (ours)")
            ax.plot(t, np.cumsum(streams[p]), "k", lw=1.0, label="true count")
            ax.set_title(f"Fig 3: p = {_fmt_p(p)}, ε = 0.5 (one run)", fontsize=9)
            ax.set_xlabel("t")
            if j == 0:
                ax.legend(fontsize=7, loc="upper left")
    return ExperimentResult(
        name="fhu-error",
        title="Fig 1/3: ℓ∞ error over time, square root vs binary tree (Gaussian), T = 2^16",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "exact_ratio_last": exact_last,
            "exact_ratio_min_over_powers": min(float(ratio_t[2**i - 2]) for i in exps),
            "empirical_ratio_last": r08,
            "empirical_ratio_last_se": se08,
            "fraction_sqrt_better": frac_sqrt_better,
            "first_i_binary_better_at_power": float(first_binary_better),
            "binary_norm_product": binary_norm,
            "linf_quantile": linf_q,
            "paper_linf_bound": paper_bound,
            "our_linf_bound": our_bound,
            "p_max_abs_z": max_z,
            **z_scores,
            "paper_bound_exceeded": exceed,
            "runs": float(runs),
        },
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# fhu-snr (Table 2)
# ---------------------------------------------------------------------------------------
SNR_DEFINITION = (
    "SNR = (1/T) Σ_t S_t / √E[(release_t − S_t)²] (true count over the root-mean-square "
    "error at t, averaged over all t)"
)


@timed
def fhu_snr(config: ExperimentConfig) -> ExperimentResult:
    """Table 2: average signal-to-noise ratio per sparsity p (definition stated in the notes)."""
    T = HORIZON
    eps = 0.5
    runs_per_stream = 4 if config.quick else 64
    rng = np.random.default_rng(config.seed)
    streams = _streams(rng, T)
    ps = P_VALUES[:-1]  # the all-zero stream has no signal
    t = np.arange(1, T + 1, dtype=np.float64)
    mechs = _mechanisms(T, eps, rng)
    analytic = _mechanisms(T, eps, rng, calibration="analytic")
    stats = {name: _ErrorStats(T) for name in mechs}
    for name, mech in mechs.items():
        _run(
            mech,
            {p: streams[p] for p in ps},
            runs_per_stream,
            stats[name],
            config.show_progress,
            f"fhu-snr {name}",
        )
    rows: list[list[object]] = []
    ours: dict[str, list[float]] = {name: [] for name in mechs}
    crossing: dict[str, float] = {}
    for name, mech in mechs.items():
        sd = np.sqrt(mech.variances())
        sd_an = np.sqrt(analytic[name].variances())
        rmse = stats[name].rmse()
        runmax = stats[name].mean_runmax()
        crossing[name] = 1.0 / float(np.mean(t / sd))  # expected S_t = p·t: SNR = 1 here
        for j, p in enumerate(ps):
            S = np.cumsum(streams[p]).astype(np.float64)
            snr = float(np.mean(S / sd))
            ours[name].append(snr)
            rows.append(
                [
                    _fmt_p(p),
                    p,
                    name,
                    PAPER_SNR[name][j],
                    snr,
                    float(np.mean(S / rmse)),
                    float(np.mean(S / (sd * _SQRT_2_OVER_PI))),
                    float(np.mean(S) / np.mean(sd)),
                    float(np.mean(S / runmax)),
                    float(np.mean(S / sd_an)),
                ]
            )
    header = [
        "p",
        "p_value",
        "mechanism",
        "paper_table2",
        "snr_ours (chosen: mean_t S_t/std_t, exact)",
        "snr_empirical (mean_t S_t/empirical RMSE_t)",
        "alt: mean_t S_t/E|error_t|",
        "alt: mean_t S_t / mean_t std_t",
        "alt: mean_t S_t / E max_(s<=t)|error_s| (empirical)",
        "alt: chosen definition, analytic Gaussian calibration",
    ]
    csv_path = write_csv(config.out / "fhu-snr.csv", header, rows)
    by_key = {(r[2], r[0]): r for r in rows}
    comparisons = []
    for name in ("binary", "sqrt"):
        for j, p in enumerate(ps):
            comparisons.append(
                Comparison(
                    f"Table 2 SNR, {'√A (ours)' if name == 'sqrt' else 'binary'}, p = {_fmt_p(p)}",
                    PAPER_SNR[name][j],
                    round(ours[name][j], 3),
                    f"ours/paper = {ours[name][j] / PAPER_SNR[name][j]:.2f}",
                )
            )
    ratio_1024 = ours["sqrt"][-1] / ours["binary"][-1]
    comparisons += [
        Comparison(
            "√A / binary SNR at p = 2^-10",
            "about 3",
            round(ratio_1024, 3),
            f"paper's table: {PAPER_SNR['sqrt'][-1] / PAPER_SNR['binary'][-1]:.2f}",
        ),
        Comparison(
            "p where binary's SNR drops below 1",
            "about 1/80",
            round(crossing["binary"], 5),
            f"= 1/{1 / crossing['binary']:.0f}",
        ),
        Comparison(
            "p where √A's SNR drops below 1",
            "≤ 1/250",
            round(crossing["sqrt"], 5),
            f"= 1/{1 / crossing['sqrt']:.0f}",
        ),
        Comparison(
            "'three times sparser streams' (ratio of those p)",
            "3",
            round(crossing["binary"] / crossing["sqrt"], 3),
        ),
    ]
    rel = {
        name: [o / pp for o, pp in zip(ours[name], PAPER_SNR[name], strict=True)] for name in ours
    }
    notes = [
        f"definition (ours; the paper does not define it): {SNR_DEFINITION}. The error is "
        "unbiased Gaussian, so the RMSE is the exact standard deviation; the 'empirical' "
        f"column estimates it from {stats['sqrt'].runs} runs.",
        "the paper's numbers are NOT reproduced under any natural definition we tried "
        "(CSV columns): with the chosen one ours are "
        f"{min(rel['binary']):.2f}–{max(rel['binary']):.2f}× the paper's for the binary tree "
        f"and {min(rel['sqrt']):.2f}–{max(rel['sqrt']):.2f}× for √A; the running-ℓ∞ "
        "definition gives about half the paper's values, |error| or the analytic "
        "calibration give more. Both tables agree that SNR ∝ p and that √A is ~3× better "
        f"(ours {ratio_1024:.2f}×, the exact std ratio averaged over t).",
        f"ε = {eps}, δ = 1e-10, C_ε,δ calibration (as the paper); one Bernoulli stream per p.",
    ]
    fig_path = config.out / "fhu-snr.png"
    with figure(fig_path, ncols=2) as (_, axes):
        ax = axes[0][0]
        colors = {"sqrt": "tab:blue", "binary": "tab:orange"}
        alt_cols = {5: ":", 8: "-."}
        for name in ("sqrt", "binary"):
            c = colors[name]
            ax.plot(ps, PAPER_SNR[name], "o", color=c, label=f"paper, {name}")
            ax.plot(ps, ours[name], "-", color=c, label=f"ours (chosen def.), {name}")
            for col, ls in alt_cols.items():
                ax.plot(
                    ps,
                    [by_key[(name, _fmt_p(p))][col] for p in ps],
                    ls,
                    color=c,
                    lw=0.8,
                    label=f"{header[col]}, {name}" if name == "sqrt" else None,
                )
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("p (fraction of ones)")
        ax.set_ylabel("average SNR")
        ax.set_title("Table 2: average SNR, ε = 0.5, δ = 1e-10, T = 2^16")
        ax.legend(fontsize=6, loc="upper left")
        ax = axes[0][1]
        for name in ("sqrt", "binary"):
            ax.plot(ps, rel[name], "o-", color=colors[name], label=f"{name}: ours / paper")
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 3)
        ax.set_xlabel("p")
        ax.set_ylabel("ours / paper")
        ax.set_title("the paper's Table 2 is not reproduced")
        ax.legend(fontsize=7, loc="upper left")
    return ExperimentResult(
        name="fhu-snr",
        title="Table 2: average signal-to-noise ratio per sparsity level",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "ratio_sqrt_binary_p1024": ratio_1024,
            "crossing_binary": crossing["binary"],
            "crossing_sqrt": crossing["sqrt"],
            "snr_sqrt_p16": ours["sqrt"][0],
            "snr_binary_p16": ours["binary"][0],
            "snr_sqrt_p16_empirical": float(by_key[("sqrt", "2^-4")][5]),  # type: ignore[arg-type]
            "runs": float(stats["sqrt"].runs),
        },
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# fhu-top1 (Fig 4)
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Top1Runs:
    """Per-step summaries of the private top-1 statistic of one mechanism."""

    sample: NDArray[np.float64]  # one run through the streaming app
    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    rmse: NDArray[np.float64]
    bias: NDArray[np.float64]
    sd: NDArray[np.float64]  # exact std of one histogram coordinate
    sd_analytic: NDArray[np.float64]  # the same with the analytic Gaussian calibration


@timed
def fhu_top1(config: ExperimentConfig) -> ExperimentResult:
    """Fig 4: private top-1 statistic on a Zipf stream (2048 items, universe 20)."""
    T, u, eps = 2048, 20, 0.1
    runs = 64 if config.quick else 2000
    rng = np.random.default_rng(config.seed)
    items = zipf_items(u, T, rng=rng)
    X = np.eye(u, dtype=np.int64)[items]
    true_top = top1_counts(np.cumsum(X, axis=0))
    t = np.arange(1, T + 1)
    results: dict[str, _Top1Runs] = {}
    for name in progress_iter(["sqrt", "binary"], "fhu-top1", config.show_progress):
        hist = ContinualHistogram(
            u, T, eps, DELTA, mechanism=name, noise="gaussian", calibration="fhu", rng=rng
        )
        sample = top1_counts(hist.update_many(X))  # one run through the streaming app
        tops = np.empty((T, runs))
        per = max(1, 4096 // u)  # runs per batch release (T × u·per values)
        for start in range(0, runs, per):
            n = min(per, runs - start)
            rel = hist.mechanism.release(np.tile(X, (1, n))).reshape(T, n, u)
            tops[:, start : start + n] = rel.max(axis=2)
        err = tops - true_top[:, None]
        sd = np.sqrt(hist.variances())
        an = ContinualHistogram(
            u, T, eps, DELTA, mechanism=name, noise="gaussian", calibration="analytic", rng=rng
        )
        results[name] = _Top1Runs(
            sample=sample,
            mean=tops.mean(axis=1),
            std=tops.std(axis=1, ddof=1),
            rmse=np.sqrt((err * err).mean(axis=1)),
            bias=err.mean(axis=1),
            sd=sd,
            sd_analytic=np.sqrt(an.variances()),
        )
    snr: dict[str, float] = {}
    snr_sd: dict[str, float] = {}
    snr_an: dict[str, float] = {}
    for name, r in results.items():
        snr[name] = float(np.mean(true_top / r.rmse))
        snr_sd[name] = float(np.mean(true_top / r.sd))
        snr_an[name] = float(np.mean(true_top / r.sd_analytic))
    rows = []
    for i in range(T):
        row: list[object] = [i + 1, int(items[i]), float(true_top[i])]
        for name in ("sqrt", "binary"):
            r = results[name]
            row += [float(a[i]) for a in (r.sample, r.mean, r.std, r.rmse, r.sd)]
        rows.append(row)
    header = ["t", "item", "true_top1"]
    for name in ("sqrt", "binary"):
        header += [f"{name}_{k}" for k in ("one_run", "mean", "std", "rmse", "coordinate_sd")]
    csv_path = write_csv(config.out / "fhu-top1.csv", header, rows)
    comparisons = [
        Comparison(
            "average SNR of the top-1 statistic, √A (ours)",
            1.47,
            round(snr["sqrt"], 3),
            f"per-coordinate std instead of RMSE: {snr_sd['sqrt']:.3f}; analytic σ: "
            f"{snr_an['sqrt']:.3f}",
        ),
        Comparison(
            "average SNR of the top-1 statistic, binary",
            0.52,
            round(snr["binary"], 3),
            f"per-coordinate std: {snr_sd['binary']:.3f}; analytic σ: {snr_an['binary']:.3f}",
        ),
        Comparison(
            "√A / binary", "about 3 (1.47/0.52 = 2.83)", round(snr["sqrt"] / snr["binary"], 3)
        ),
    ]
    bias_end = {name: float(r.bias[-1]) for name, r in results.items()}
    notes = [
        f"{SNR_DEFINITION}, with the private top-1 statistic max_j h_t[j] in place of the "
        f"release and the RMSE estimated from {runs} runs (the max of noisy counts is biased "
        f"upward: mean bias at t = T is {bias_end['sqrt']:.0f} for √A, "
        f"{bias_end['binary']:.0f} for binary).",
        f"stream: {T} items i.i.d. from Zipf's law P(j) ∝ 1/(j+1) on {u} items; neighbouring "
        "streams differ by one item insertion at one step (ℓ2 sensitivity 1, Cor B.1 with "
        f"b = 1); ε = {eps}, δ = 1e-10, C_ε,δ calibration.",
        "the paper's 1.47 is matched only by the per-coordinate std with the analytic "
        f"calibration ({snr_an['sqrt']:.2f}), which then gives {snr_an['binary']:.2f} for binary "
        "(paper 0.52) — we consider the match a coincidence; the ratio √A/binary "
        f"({snr['sqrt'] / snr['binary']:.2f}) agrees with the paper's ~3.",
    ]
    fig_path = config.out / "fhu-top1.png"
    with figure(fig_path, ncols=2) as (_, axes):
        ax = axes[0][0]
        j = np.arange(u)
        w = 1.0 / (j + 1.0)
        ax.bar(j, w / w.sum(), color="0.6", label="Zipf P(j) ∝ 1/(j+1)")
        ax.plot(j, np.bincount(items, minlength=u) / T, "ko", ms=3, label="empirical frequency")
        ax.set_xlabel("item j")
        ax.set_ylabel("probability")
        ax.set_title(f"Fig 4 (left): Zipf law, universe {u}, {T} items")
        ax.legend(fontsize=8, loc="upper left")
        ax = axes[0][1]
        ax.plot(t, true_top, "k", lw=1.2, label="true top-1 count")
        for name, color in (("binary", "tab:orange"), ("sqrt", "tab:blue")):
            r = results[name]
            ax.plot(t, r.sample, color=color, lw=0.6, label=f"{name}: one run")
            ax.fill_between(
                t,
                r.mean - r.std,
                r.mean + r.std,
                color=color,
                alpha=0.2,
                label=f"{name}: mean ± std ({runs} runs)",
            )
        ax.set_xlabel("t")
        ax.set_ylabel("top-1 count")
        ax.set_title(f"Fig 4 (right): ε = {eps}, δ = 1e-10")
        ax.legend(fontsize=7, loc="upper left")
    return ExperimentResult(
        name="fhu-top1",
        title="Fig 4: private top-1 statistic on a Zipf stream, √A vs binary (Gaussian)",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "snr_sqrt": snr["sqrt"],
            "snr_binary": snr["binary"],
            "snr_sd_sqrt": snr_sd["sqrt"],
            "snr_sd_binary": snr_sd["binary"],
            "bias_end_sqrt": bias_end["sqrt"],
            "bias_end_binary": bias_end["binary"],
            "runs": float(runs),
        },
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# fhu-cbnorm (Fig 2)
# ---------------------------------------------------------------------------------------
@timed
def fhu_cbnorm(config: ExperimentConfig) -> ExperimentResult:
    """Fig 2: Mathias' bounds on ‖M_count‖_cb vs the paper's Ψ(T) and the exact Σf(k)²."""
    dense = list(range(1, 1025))
    n_log = 60 if config.quick else 400
    sparse = sorted({round(float(x)) for x in np.geomspace(1025, 2.0**44, n_log)})
    horizons = dense + [T for T in sparse if T > 1024]
    rows: list[list[object]] = []
    b = [cb_norm_bounds(T) for T in progress_iter(horizons, "fhu-cbnorm", config.show_progress)]
    for r in b:
        rows.append(
            [
                r.horizon,
                r.gamma_hat,
                r.mathias_lower,
                r.mathias_upper,
                r.psi,
                r.sqrt_factorization,
                r.psi - r.mathias_lower,
                r.mathias_upper - r.psi,
                r.sqrt_factorization - r.mathias_lower,
                r.mathias_upper - r.sqrt_factorization,
            ]
        )
    header = [
        "T",
        "gamma_hat",
        "mathias_lower",
        "mathias_upper",
        "psi",
        "exact_sum_f2",
        "psi_minus_lower",
        "upper_minus_psi",
        "exact_minus_lower",
        "upper_minus_exact",
    ]
    csv_path = write_csv(config.out / "fhu-cbnorm.csv", header, rows)

    def from_on(pred: list[bool]) -> int:
        """Smallest T from which ``pred`` holds for every larger T in the grid."""
        first = len(pred)
        while first > 0 and pred[first - 1]:
            first -= 1
        return horizons[first] if first < len(pred) else -1

    psi_below_upper_from = from_on([r.psi < r.mathias_upper for r in b])
    psi_below_exact_from = from_on([r.psi < r.sqrt_factorization for r in b])
    exact_above_upper_from = from_on([r.sqrt_factorization > r.mathias_upper for r in b])
    big = [r for r in b if r.horizon >= 50]
    mid = [r for r in b if r.horizon >= 32]
    imp_psi = (min(r.mathias_upper - r.psi for r in big), max(r.mathias_upper - r.psi for r in big))
    imp_exact = (
        min(r.mathias_upper - r.sqrt_factorization for r in big),
        max(r.mathias_upper - r.sqrt_factorization for r in big),
    )
    gap_psi = (min(r.psi - r.mathias_lower for r in mid), max(r.psi - r.mathias_lower for r in mid))
    gap_exact = (
        min(r.sqrt_factorization - r.mathias_lower for r in mid),
        max(r.sqrt_factorization - r.mathias_lower for r in mid),
    )
    last = b[-1]
    lim_ratio = last.gamma_hat / (2.0 * math.log(last.horizon) / math.pi)
    above = min(r.gamma_hat - 2.0 * math.log(r.horizon) / math.pi for r in b)
    comparisons = [
        Comparison(
            "Ψ(T) below Mathias' upper bound",
            "for 8 ≤ T ≤ 2^44",
            float(psi_below_upper_from),
            f"ours: from T = {psi_below_upper_from}",
        ),
        Comparison(
            "improvement Mathias upper − Ψ(T), 50 ≤ T ≤ 2^44",
            "≈ 0.35",
            round(imp_psi[1], 4),
            f"range {imp_psi[0]:.3f} … {imp_psi[1]:.3f}",
        ),
        Comparison(
            "Ψ(T) − Mathias lower, 2^5 ≤ T ≤ 2^44",
            "< 0.1",
            round(gap_psi[1], 4),
            f"range {gap_psi[0]:.3f} … {gap_psi[1]:.3f}",
        ),
        Comparison(
            "Thm 1.1: ‖L‖2→∞‖R‖1→2 = Σf(k)² ≤ Ψ(T)",
            "for all T",
            float(psi_below_exact_from),
            f"false: Ψ < Σf² from T = {psi_below_exact_from} on (gap → "
            f"{last.sqrt_factorization - last.psi:.4f})",
        ),
        Comparison(
            "exact Σf(k)² improves on Mathias' upper bound",
            "yes (via Ψ)",
            round(imp_exact[1], 4),
            f"no: upper − Σf² ∈ [{imp_exact[0]:.3f}, {imp_exact[1]:.3f}] < 0 for "
            f"T ≥ 50 (above the upper bound from T = {exact_above_upper_from})",
        ),
        Comparison(
            "exact Σf(k)² − Mathias lower, 2^5 ≤ T ≤ 2^44",
            "(< 0.1 for Ψ)",
            round(gap_exact[1], 4),
            f"range {gap_exact[0]:.3f} … {gap_exact[1]:.3f}",
        ),
        Comparison(
            "Lemma C.4: γ̂(T) → 2 ln(T)/π from above",
            "ratio → 1",
            round(lim_ratio, 4),
            f"at T = 2^44; min γ̂ − 2lnT/π = {above:.4f} > 0",
        ),
    ]
    notes = [
        "Ψ(T) is BELOW the exact Σ_{k<T} f(k)² = ‖L‖2→∞‖R‖1→2 for every T ≥ 11 (erratum); "
        "dpcount calibrates with the exact value.",
        "the exact Σf(k)² lies ABOVE Mathias' upper bound γ̂/2 + 1/2 (by ≈ 0.085 for large T): "
        "the explicit factorization does not improve on Mathias; only the (invalid) Ψ does, "
        f"and by {imp_psi[0]:.3f}–{imp_psi[1]:.3f}, not ≈ 0.35.",
        "the paper's two gaps look swapped: Ψ − lower ≈ "
        f"{gap_psi[0]:.2f}–{gap_psi[1]:.2f} (paper: < 0.1) and upper − Ψ ≈ "
        f"{imp_psi[0]:.2f}–{imp_psi[1]:.2f} (paper: ≈ 0.35); upper − lower = 1/2 − γ̂/(2T).",
        f"grid: every T ≤ 1024 and {len(sparse)} log-spaced T up to 2^44; γ̂ is summed directly "
        "below T = 256 and from its Euler–Maclaurin expansion above.",
    ]
    fig_path = config.out / "fhu-cbnorm.png"
    Ts = np.array(horizons, dtype=np.float64)

    def col(i: int) -> NDArray[np.float64]:
        return np.array([r[i] for r in rows], dtype=np.float64)

    with figure(fig_path, ncols=3, size=(5.5, 4.3)) as (_, axes):
        ax = axes[0][0]
        for i, label, style in (
            (2, "Mathias lower", "tab:green"),
            (3, "Mathias upper", "tab:red"),
            (4, "paper's Ψ(T)", "tab:orange"),
            (5, "exact Σ_{k<T} f(k)²", "tab:blue"),
        ):
            ax.plot(Ts, col(i), color=style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("T")
        ax.set_ylabel("bound on ‖M_count‖_cb")
        ax.set_title("cb-norm bounds")
        ax.legend(fontsize=8, loc="upper left")
        ax = axes[0][1]
        ax.plot(Ts, col(6), color="tab:orange", label="Ψ(T) − Mathias lower")
        ax.plot(Ts, col(8), color="tab:blue", label="exact − Mathias lower")
        ax.axhline(0.1, color="k", ls="--", lw=0.8, label="paper: < 0.1 for T ≥ 2^5")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.0)
        ax.set_xlabel("T")
        ax.set_title("Fig 2 (left): gap to Mathias' lower bound")
        ax.legend(fontsize=8, loc="upper left")
        ax = axes[0][2]
        ax.plot(Ts, col(7), color="tab:orange", label="Mathias upper − Ψ(T)")
        ax.plot(Ts, col(9), color="tab:blue", label="Mathias upper − exact")
        ax.axhline(0.35, color="k", ls="--", lw=0.8, label="paper: ≈ 0.35 for T ≥ 50")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.3, 0.5)
        ax.set_xlabel("T")
        ax.set_title("Fig 2 (right): improvement on Mathias' upper bound")
        ax.legend(fontsize=8, loc="upper left")
    return ExperimentResult(
        name="fhu-cbnorm",
        title="Fig 2: cb-norm bounds — Mathias, the paper's Ψ(T), the exact Σf(k)²",
        csv=csv_path,
        figure=fig_path,
        comparisons=comparisons,
        key={
            "psi_below_exact_from": float(psi_below_exact_from),
            "psi_below_upper_from": float(psi_below_upper_from),
            "exact_above_upper_from": float(exact_above_upper_from),
            "max_improvement_psi": imp_psi[1],
            "max_improvement_exact": imp_exact[1],
            "min_gap_psi_lower": gap_psi[0],
            "gap_limit": last.sqrt_factorization - last.psi,
            "gamma_ratio_at_max": lim_ratio,
            "gamma_min_excess": above,
        },
        notes=notes,
    )
