"""Graphs under continual observation: a cut-preserving synthetic graph and graph statistics.

constant-matters (Fichtenberger, Henzinger, Upadhyay, ICML 2023):

* §5, Corollary 5.2 — :class:`SyntheticGraph`. The stream of edge-weight
  increments, one coordinate per vertex pair (d = n(n−1)/2), is summed by a
  continual counting mechanism (M_cut = M_count ⊗ I_d: the same factorization
  per coordinate, independent noise per coordinate). The release after each
  update is the noisy weighted graph Ḡ_t = G_t + (noise graph); (S, P)-cut
  queries are answered on it. §5 describes nothing else: no projection and no
  Laplacian perturbation — the Gaussian noise graph 𝓡 with i.i.d. edge weights
  is the whole mechanism, and the spectral bound K_𝓡 ⪯ 3σ√(ln n/n)·K_n is only
  used in the proof. :meth:`SyntheticGraph.cut_error_bound` replaces that
  proof's constants by an exact union bound (see there).
* App. B.2, Corollary B.3 — :class:`GraphStatistic`: a graph function f is
  released from the prefix sums of its difference sequence f(G_t) − f(G_{t−1}),
  so its error is that of counting, scaled by the difference sequence's
  sensitivity. Worked examples under edge insertions only, each with its
  sensitivity derived in its docstring: :func:`edge_count_statistic`,
  :func:`degree_histogram_statistic`, :func:`triangle_count_statistic`.

Corrections to the paper (see also ``docs/apps.md``): Corollary B.3 calls Γ an
"ℓ₂-sensitivity of the difference sequence" and uses it as one step's
sensitivity. A neighbouring graph stream changes the difference sequence at
*several* steps, and correlated mechanisms need the per-coordinate total
variation (:class:`~dpcount.apps.StreamSensitivity`), not the ℓ₂ norm of the
whole change. The examples state both Γ₁ and Γ₂ in that sense.

Notation (paper → code):

==================  ===============================================
n, V                ``n_vertices``; vertices 0, …, n − 1
(n choose 2)        ``n_pairs``; pair (i, j), i < j, has index
                    i·n − i(i+1)/2 + (j − i − 1) (row-major upper triangle)
Φ_{S,P}(G)          :meth:`SyntheticGraph.cut`
Γ                   ``difference_sensitivity`` (Γ₁, Γ₂)
==================  ===============================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_array_in_range,
    check_bool,
    check_choice,
    check_index_array,
    check_integer,
    check_iterable,
    check_real,
)
from dpcount.apps._bounds import check_on_out_of_bounds
from dpcount.apps._common import AppBase, AppFields, MechanismChoice, StreamSensitivity, app_budget
from dpcount.privacy.budget import Budget, BudgetFields
from dpcount.privacy.rng import RNGLike
from dpcount.privacy.tails import gaussian_two_sided_quantile

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "GraphStatistic",
    "SimpleGraph",
    "SyntheticGraph",
    "degree_histogram",
    "degree_histogram_sensitivity",
    "degree_histogram_statistic",
    "edge_count",
    "edge_count_sensitivity",
    "edge_count_statistic",
    "triangle_count",
    "triangle_count_sensitivity",
    "triangle_count_statistic",
]


def _check_vertex(name: str, value: object, n: int) -> int:
    return check_integer(name, value, ge=0, le=n - 1)


def _vertex_set(name: str, value: Any, n: int) -> NDArray[np.int64]:
    arr = check_index_array(name, check_iterable(name, value), n, one_dimensional=True)
    if arr.size == 0:
        raise ValueError(f"{name} must contain at least one vertex, got none")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} must not repeat a vertex, got {arr.tolist()}")
    return arr


# ---------------------------------------------------------------------------------------
# Synthetic graph (§5, Corollary 5.2)
# ---------------------------------------------------------------------------------------


class SyntheticGraph(AppBase):
    """Continually released noisy weighted graph answering (S, P)-cut queries (Cor. 5.2).

    Each update adds weights in [0, 1] to at most ``max_edges_per_step`` = m
    distinct vertex pairs (the paper: one (edge, weight) tuple, m = 1). After
    each update the stream releases the noisy weight of every vertex pair (the
    vector of all n(n−1)/2 pair weights, :meth:`adjacency` as a matrix): the
    true accumulated weights plus the counting mechanism's noise, independent
    per pair. Noisy weights can be negative; they are released as is (the
    paper does no post-processing).

    Neighbouring relation (event level, as in the privacy proof of Cor. 5.2):
    two update streams differ at one update, where the weights added to each of
    at most m pairs differ by at most 1. Sensitivity passed to the counting
    mechanism: ℓ₁ = m (Laplace), ℓ₂ = √m (Gaussian); m = 1 gives 1 and 1.

    Formal guarantee: for that event-level relation the releases of all T
    updates together are ε-DP without a delta and (ε, δ)-DP with one — the
    counting mechanism's guarantee (:attr:`privacy`, :meth:`dp_event`),
    calibrated for the sensitivity above; the cut answers are post-processing
    of the released graphs. Fichtenberger, Henzinger, Upadhyay, "Constant
    Matters: Fine-grained Error Bound on Differentially Private Continual
    Observation", ICML 2023 (arXiv:2202.11205), §5, Corollary 5.2.

    Out-of-bound updates (:mod:`dpcount.apps._bounds`): a weight outside [0, 1]
    or an update changing more than m pairs raises ValueError with
    ``on_out_of_bounds="error"`` (the default). That refusal is a
    data-dependent signal the guarantee does not cover (a stream that stops at
    update t reveals that update t was out of bounds); keep such errors with the
    data holder. With ``on_out_of_bounds="clip"`` every update is clipped by a
    rule that looks at that update only: weights to [0, 1], then the first m
    changed pairs kept (in the order given to :meth:`update`, in pair order for
    :meth:`update_many`). Clipped updates are within the bounds (weights in
    [0, 1], at most m pairs), so two raw streams differing in one update give
    clipped streams differing in that update only, and the guarantee holds with
    the same sensitivity whenever the two clipped updates differ on at most m
    pairs (e.g. one of them is empty, or both change the same pairs).
    ``clipped`` counts the clipped updates: exact and NOT private (for the
    caller only). Repeated pairs, unknown vertices and NaN always raise.

    Exact error: the noise on each pair at step t is independent with variance
    ``variances()[t − 1]``; the error of an (S, P)-cut is the sum of |S|·|P| of
    them, variance |S|·|P|·Var_t (:meth:`cut_variance`).

    Args:
        n_vertices: n ≥ 2.
        horizon: T, the number of updates.
        max_edges_per_step: m ≥ 1.
        mechanism, k, subtract, rng: as for :class:`~dpcount.apps.ContinualHistogram`.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon``, ``delta``, ``noise``, ``calibration``), as for
            :class:`~dpcount.apps.ContinualHistogram`, except that the default
            noise is continuous (Gaussian iff delta given, then on the
            square-root factorization, as in the paper): edge weights are
            fractional in [0, 1], and integer noise needs whole-number steps.
            The step sensitivity is computed from m (a budget that sets one is
            refused).
        on_out_of_bounds: ``"error"`` (default) or ``"clip"``, see above.

    Example:
        >>> from dpcount.apps import SyntheticGraph
        >>> from dpcount.privacy import ZeroNoise
        >>> g = SyntheticGraph(4, horizon=3, epsilon=1.0).with_sampler(ZeroNoise())
        >>> _ = g.update([(0, 1, 0.5)])
        >>> _ = g.update([(2, 1, 1.0)])
        >>> g.cut([1]), g.cut([0], [1, 2])
        (1.5, 0.5)
    """

    _shown = ("n_vertices", "horizon", "max_edges_per_step")

    def __init__(
        self,
        n_vertices: int,
        horizon: int,
        *,
        max_edges_per_step: int = 1,
        on_out_of_bounds: str = "error",
        budget: Budget | None = None,
        rng: RNGLike = None,
        **fields: Unpack[AppFields],
    ) -> None:
        user_budget, choice = self._options(budget, fields, bounds="max_edges_per_step")
        self.on_out_of_bounds = check_on_out_of_bounds(on_out_of_bounds)
        self.n_vertices = check_integer("n_vertices", n_vertices, ge=2)
        self.n_pairs = self.n_vertices * (self.n_vertices - 1) // 2
        self.max_edges_per_step = check_integer("max_edges_per_step", max_edges_per_step, ge=1)
        m = float(self.max_edges_per_step)
        self._setup_mechanism(
            choice,
            user_budget,
            StreamSensitivity(m, math.sqrt(m)),
            horizon=horizon,
            rng=rng,
            neighbouring="event-level: update streams differ at one update by at most 1 in the "
            f"weight added to each of at most {self.max_edges_per_step} vertex pair(s)",
        )
        self._rows, self._cols = np.triu_indices(self.n_vertices, 1)
        self._reset()

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        self._latest: NDArray[np.float64] | None = None
        self._adjacency: NDArray[np.float64] | None = None
        #: updates clipped into the bounds so far: exact, NOT private (caller only)
        self.clipped = 0

    @property
    def step(self) -> int:
        """Updates released so far."""
        return self._stream.step

    def pair_index(self, u: int, v: int) -> int:
        """Index of the vertex pair {u, v} in the released weight vector."""
        n = self.n_vertices
        a, b = _check_vertex("u", u, n), _check_vertex("v", v, n)
        if a == b:
            raise ValueError(f"u and v must differ (no self-loops), got u = v = {a}")
        i, j = min(a, b), max(a, b)
        return i * n - i * (i + 1) // 2 + (j - i - 1)

    def increments(self, edges: Iterable[tuple[int, int, float]]) -> NDArray[np.float64]:
        """The weight-increment vector of one update given as (u, v, weight) triples
        (clipped with ``on_out_of_bounds="clip"``)."""
        return self._increments(edges)[0]

    def _increments(
        self, edges: Iterable[tuple[int, int, float]]
    ) -> tuple[NDArray[np.float64], bool]:
        """The increment vector and whether clipping changed it."""
        clip = self.on_out_of_bounds == "clip"
        x = np.zeros(self.n_pairs)
        seen: set[int] = set()
        changed = False
        for position, edge in enumerate(check_iterable("edges", edges)):
            if not isinstance(edge, (tuple, list)) or len(edge) != 3:
                raise TypeError(f"edges[{position}] must be a (u, v, weight) triple, got {edge!r}")
            u, v, w = edge
            idx = self.pair_index(u, v)
            name = f"weight of edge ({u}, {v})"
            weight = check_real(name, w) if clip else check_real(name, w, ge=0.0, le=1.0)
            if idx in seen:
                raise ValueError(f"edge ({u}, {v}) appears twice in one update")
            seen.add(idx)
            if clip:
                kept = min(1.0, max(0.0, weight)) if len(seen) <= self.max_edges_per_step else 0.0
                changed = changed or kept != weight
                weight = kept
            x[idx] = weight
        if len(seen) > self.max_edges_per_step and not clip:
            raise ValueError(
                f"update {self.step + 1} changes {len(seen)} vertex pairs, more than "
                f"max_edges_per_step={self.max_edges_per_step}"
            )
        return x, changed

    def update(self, edges: Iterable[tuple[int, int, float]]) -> NDArray[np.float64]:
        """Add one update, a list of (u, v, weight) triples with weights in [0, 1].

        Returns the released noisy pair weights (length n(n−1)/2; an empty list
        is a step with no change).
        """
        x, changed = self._increments(edges)
        out = self._release_one(x)
        self.clipped += changed
        return out

    def _release_one(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.asarray(self._stream.update(x), dtype=np.float64)
        self._latest, self._adjacency = out, None
        return np.array(out)

    def update_many(self, increments: Any) -> NDArray[np.float64]:
        """Add several updates given as increment vectors, shape ``(steps, n(n−1)/2)``."""
        clip = self.on_out_of_bounds == "clip"
        low, high = (-math.inf, math.inf) if clip else (0.0, 1.0)
        arr = check_array_in_range(
            "increments", increments, low=low, high=high, shape=(-1, self.n_pairs)
        )
        n_clipped = 0
        if clip:  # weights to [0, 1], then the first m changed pairs of each update
            raw = arr
            arr = np.clip(raw, 0.0, 1.0)
            arr[np.cumsum(arr != 0, axis=1) > self.max_edges_per_step] = 0.0
            n_clipped = int(np.count_nonzero((arr != raw).any(axis=1)))
        changed = (arr != 0).sum(axis=1)
        if (changed > self.max_edges_per_step).any():
            i = int(np.argmax(changed > self.max_edges_per_step))
            raise ValueError(
                f"increments: update {self.step + i + 1} changes {int(changed[i])} vertex pairs, "
                f"more than max_edges_per_step={self.max_edges_per_step}"
            )
        out = self._stream.update_many(arr)
        self.clipped += n_clipped
        self._latest, self._adjacency = out[-1].copy(), None
        return out

    # -- queries on the latest release ---------------------------------------------
    def _require_release(self) -> NDArray[np.float64]:
        if self._latest is None:
            raise ValueError("no graph released yet: call update() first")
        return self._latest

    def weights(self) -> NDArray[np.float64]:
        """The latest released pair weights (a copy)."""
        return np.array(self._require_release())

    def adjacency(self) -> NDArray[np.float64]:
        """The latest released graph as a symmetric n×n weight matrix (zero diagonal)."""
        return np.array(self._matrix())

    def _matrix(self) -> NDArray[np.float64]:
        if self._adjacency is None:
            w = self._require_release()
            a = np.zeros((self.n_vertices, self.n_vertices))
            a[self._rows, self._cols] = w
            a[self._cols, self._rows] = w
            self._adjacency = a
        return self._adjacency

    def _cut_sets(
        self, s: Iterable[int], p: Iterable[int] | None
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        n = self.n_vertices
        sv = _vertex_set("S", s, n)
        if p is None:
            pv = np.setdiff1d(np.arange(n), sv)
            if pv.size == 0:
                raise ValueError("S must not contain every vertex when P is omitted (V ∖ S = ∅)")
        else:
            pv = _vertex_set("P", p, n)
        common = np.intersect1d(sv, pv)
        if common.size:
            raise ValueError(f"S and P must be disjoint, both contain vertex {int(common[0])}")
        return sv, pv

    def cut(self, s: Iterable[int], p: Iterable[int] | None = None) -> float:
        """Φ_{S,P}(Ḡ_t) = Σ_{u∈S, v∈P} w̄(u, v) on the latest release (P = V ∖ S if omitted)."""
        sv, pv = self._cut_sets(s, p)
        return float(self._matrix()[np.ix_(sv, pv)].sum())

    def cut_variance(self, s_size: int, p_size: int) -> NDArray[np.float64]:
        """Exact variance of the error of any (S, P)-cut with |S|, |P| given, at each step."""
        s, p = self._cut_sizes(s_size, p_size)
        return s * p * self.variances()

    def _cut_sizes(self, s_size: int, p_size: int) -> tuple[int, int]:
        n = self.n_vertices
        s = check_integer("s_size", s_size, ge=1, le=n - 1)
        p = check_integer("p_size", p_size, ge=1, le=n - s)
        return s, p

    def cut_error_bound(
        self,
        s_size: int,
        p_size: int,
        *,
        beta: float = 1 / 3,
        scope: Literal["all", "complement", "one"] = "all",
    ) -> NDArray[np.float64]:
        """Error bound for (S, P)-cuts with |S| = s_size, |P| = p_size, at every step.

        Corollary 5.2 with exact norms. At step t the error of a fixed cut is
        exactly N(0, |S|·|P|·Var_t) (a sum of |S|·|P| independent pair noises of
        variance Var_t = ``variances()[t − 1]``; Gaussian noise only). The bound
        is α_t = √(|S|·|P|·Var_t)·z with P(|N(0,1)| > z) = β′:

        * ``scope="all"`` (Cor. 5.2's statement): with probability ≥ 1 − β,
          simultaneously for all steps t ≤ T and *all* disjoint non-empty S, P,
          the error is ≤ α_t(|S|, |P|). Union bound: β is split equally over
          the T steps and the n(n−1)/2 size classes (|S|, |P|), and within a
          class over its C(n, |S|)·C(n − |S|, |P|) cuts, so
          β′ = β / (T · n(n−1)/2 · C(n,|S|) · C(n−|S|,|P|)).
        * ``scope="complement"``: the same for all cuts (S, V ∖ S) only (p_size
          must be n − s_size): β′ = β / (T · (n − 1) · C(n, |S|)). Then
          ln(1/β′) = O(|S| ln n + ln(T/β)) and α_t = O(|S|·√(n·ln(nT/β)·Var_t)),
          the order of Cor. 5.2's |S|·√(n ln n)·ψ(t) with every constant explicit.
          (For general P the term ln C(n−|S|, |P|) can reach (n−|S|)·ln 2; the
          paper avoids it with a spectral inequality K_𝓡 ⪯ 3σ√(ln n/n)·K_n whose
          probability it does not state, so dpcount does not use it.)
        * ``scope="one"``: for one cut fixed in advance and one step,
          P(error > α_t) = β exactly (β′ = β).

        Args:
            s_size, p_size: |S| ≥ 1 and |P| ≥ 1 with |S| + |P| ≤ n.
            beta: failure probability in (0, 1).
            scope: ``"all"``, ``"complement"`` or ``"one"``.

        Returns:
            α_t for t = 1..horizon.

        Raises:
            ValueError: Laplace noise (the bound is a Gaussian tail bound).
        """
        s, p = self._cut_sizes(s_size, p_size)
        b = check_real("beta", beta, gt=0, lt=1)
        check_choice("scope", scope, ("all", "complement", "one"))
        if scope == "complement" and s + p != self.n_vertices:
            raise ValueError(
                f"p_size must be n_vertices - s_size = {self.n_vertices - s} for "
                f"scope='complement', got {p}"
            )
        if self.noise != "gaussian":
            raise ValueError(
                "cut_error_bound needs Gaussian noise (Corollary 5.2 is a Gaussian tail bound), "
                f"this graph uses {self.noise!r} noise"
            )
        log_beta = math.log(b)
        n = self.n_vertices
        if scope == "all":
            log_cuts = _log_binomial(n, s) + _log_binomial(n - s, p)
            log_beta -= math.log(self.horizon) + math.log(self.n_pairs) + log_cuts
        elif scope == "complement":
            log_beta -= math.log(self.horizon) + math.log(n - 1) + _log_binomial(n, s)
        z = gaussian_two_sided_quantile(log_beta)
        return np.sqrt(self.cut_variance(s, p)) * z


def _log_binomial(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


# ---------------------------------------------------------------------------------------
# Graph statistics from difference sequences (App. B.2, Corollary B.3)
# ---------------------------------------------------------------------------------------


class SimpleGraph:
    """An undirected simple graph on vertices 0..n−1, grown by edge insertions.

    :class:`GraphStatistic` passes its current graph to the user's function;
    treat it as read-only. Insertions are validated: no self-loops, no repeated
    edge, vertices in range, degrees at most ``max_degree`` (if given).
    """

    def __init__(self, n_vertices: int, max_degree: int | None = None) -> None:
        self.n_vertices = check_integer("n_vertices", n_vertices, ge=1)
        self.max_degree = (
            None if max_degree is None else check_integer("max_degree", max_degree, ge=1)
        )
        self._adj: list[set[int]] = [set() for _ in range(self.n_vertices)]
        self._degrees = np.zeros(self.n_vertices, dtype=np.int64)
        self._n_edges = 0

    @property
    def n_edges(self) -> int:
        return self._n_edges

    def degrees(self) -> NDArray[np.int64]:
        """Degree of every vertex (a copy)."""
        return np.array(self._degrees)

    def neighbours(self, v: int) -> frozenset[int]:
        return frozenset(self._adj[_check_vertex("v", v, self.n_vertices)])

    def has_edge(self, u: int, v: int) -> bool:
        return v in self._adj[_check_vertex("u", u, self.n_vertices)]

    def common_neighbours(self, u: int, v: int) -> int:
        """Number of vertices adjacent to both u and v."""
        n = self.n_vertices
        return len(self._adj[_check_vertex("u", u, n)] & self._adj[_check_vertex("v", v, n)])

    def edges(self) -> Iterator[tuple[int, int]]:
        """Every edge once, as (u, v) with u < v."""
        for u, nbrs in enumerate(self._adj):
            for v in sorted(nbrs):
                if u < v:
                    yield u, v

    def check_insertions(self, edges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Validate one step's insertions against the current graph (nothing is changed)."""
        n = self.n_vertices
        out: list[tuple[int, int]] = []
        new: set[tuple[int, int]] = set()
        extra: dict[int, int] = {}
        for position, edge in enumerate(check_iterable("edges", edges)):
            if not isinstance(edge, (tuple, list)) or len(edge) != 2:
                raise TypeError(f"edges[{position}] must be a (u, v) pair, got {edge!r}")
            u, v = _check_vertex("u", edge[0], n), _check_vertex("v", edge[1], n)
            if u == v:
                raise ValueError(f"edge ({u}, {v}) is a self-loop")
            key = (min(u, v), max(u, v))
            if key in new:
                raise ValueError(f"edge ({u}, {v}) appears twice in one step")
            if v in self._adj[u]:
                raise ValueError(f"edge ({u}, {v}) is already in the graph (insertions only)")
            new.add(key)
            for w in key:
                extra[w] = extra.get(w, 0) + 1
                if self.max_degree is not None and self._degrees[w] + extra[w] > self.max_degree:
                    degree = int(self._degrees[w]) + extra[w]
                    raise ValueError(
                        f"inserting edge ({u}, {v}) gives vertex {w} degree {degree}, "
                        f"more than max_degree={self.max_degree}"
                    )
            out.append(key)
        return out

    def insert(self, edges: Iterable[tuple[int, int]]) -> None:
        """Insert a step's edges (validated first; nothing changes if one is invalid)."""
        for u, v in self.check_insertions(edges):
            self._adj[u].add(v)
            self._adj[v].add(u)
            self._degrees[u] += 1
            self._degrees[v] += 1
            self._n_edges += 1


class GraphStatistic(AppBase):
    """Continual release of a graph function from its difference sequence (Cor. B.3).

    After each step (a set of edge insertions, possibly empty) the stream
    computes f(G_t) on the true graph, feeds the difference
    d_t = f(G_t) − f(G_{t−1}) to a continual counting mechanism and releases
    f(G_0) + (private prefix sum of d) ≈ f(G_t); G_0 is the empty graph on n
    vertices, so f(G_0) is public. f may be scalar or vector valued (fixed
    length).

    Neighbouring relation (edge level, insertions only, as in Fichtenberger et
    al. 2021): two insertion streams differ by one edge insertion — present at
    one step of one stream and absent from the other — and both are valid
    (simple graphs, degrees ≤ ``max_degree`` if given). The caller states the
    sensitivity of f's difference sequence under this relation, in the sense of
    :class:`~dpcount.apps.StreamSensitivity` (the change of d spans many steps):

    * ``difference_sensitivity`` Γ₁ = max Σ_c Σ_t |d_t[c] − d'_t[c]|,
    * ``difference_l2_sensitivity`` Γ₂ = max (Σ_c (Σ_t |d_t[c] − d'_t[c]|)²)^½
      (default Γ₁, always valid since Γ₂ ≤ Γ₁; equal for scalar f).

    Formal guarantee: for that edge-level relation the releases of all T steps
    together are ε-DP without a delta and (ε, δ)-DP with one — the counting
    mechanism's guarantee (:attr:`privacy`, :meth:`dp_event`), calibrated with
    step sensitivity Γ₁ (Laplace) or Γ₂ (Gaussian), provided the caller's Γ₁,
    Γ₂ bound f's difference sequence as above. Fichtenberger, Henzinger,
    Upadhyay, "Constant Matters: Fine-grained Error Bound on Differentially
    Private Continual Observation", ICML 2023 (arXiv:2202.11205), App. B.2,
    Corollary B.3 (with the sensitivity corrected, see the module docstring).

    Out-of-bound insertions: an insertion that would exceed ``max_degree`` (or a
    self-loop, a repeated edge, an unknown vertex) raises ValueError and the
    step is not released. That refusal is a data-dependent signal the guarantee
    does not cover (a stream that stops at step t reveals that step t's edges
    were invalid for the graph so far); keep such errors with the data holder,
    never let them decide what is published. There is no clipping mode here
    (:mod:`dpcount.apps._bounds`): dropping the insertions that would exceed the
    degree bound is not a per-step rule — whether an insertion is dropped
    depends on the earlier ones, so one differing insertion can change which
    later insertions are dropped, and Γ₁/Γ₂ (stated for one differing
    insertion) would no longer bound the change. Bound the degrees in the data
    before streaming it, with a rule that looks at one insertion at a time.

    Exact error: each coordinate of the release at step t has variance
    ``variances()[t − 1]`` (Cor. B.3's error is this variance's tail bound).

    Args:
        function: f, called as ``function(graph)`` with the current
            :class:`SimpleGraph`; returns a real or a 1-D real array.
        difference_sensitivity: Γ₁ > 0.
        n_vertices: n ≥ 1.
        horizon: T, the number of steps.
        difference_l2_sensitivity: Γ₂ (0 < Γ₂ ≤ Γ₁).
        max_degree: if given, insertions exceeding it raise ValueError (the
            sensitivities of degree histograms and triangle counts need it).
        mechanism, k, subtract, rng: as for :class:`~dpcount.apps.ContinualHistogram`.
        budget: a :class:`~dpcount.privacy.Budget`, or its fields as keywords
            (``epsilon``, ``delta``, ``noise``, ``calibration``), as for
            :class:`~dpcount.apps.ContinualHistogram`. The step sensitivity is
            Γ₁/Γ₂ above (a budget that sets one is refused).
        integer_valued: f returns whole numbers (counts). Then, with a whole Γ₁
            and ``noise=None``, the default is integer noise on the k-ary tree
            (docs/safe-noise.md), and a fractional f value raises ValueError.
            The builders below set it; a custom f defaults to continuous noise.
    """

    def __init__(
        self,
        function: Callable[[SimpleGraph], Any],
        difference_sensitivity: float,
        *,
        n_vertices: int,
        horizon: int,
        difference_l2_sensitivity: float | None = None,
        max_degree: int | None = None,
        mechanism: str | None = None,
        k: int = 19,
        subtract: bool = True,
        budget: Budget | None = None,
        rng: RNGLike = None,
        name: str | None = None,
        integer_valued: bool = False,
        **fields: Unpack[BudgetFields],
    ) -> None:
        user_budget = app_budget(
            budget,
            fields,
            owner="GraphStatistic",
            bounds="difference_sensitivity and difference_l2_sensitivity",
        )
        if not callable(function):
            raise TypeError(f"function must be callable, got {function!r}")
        self.function = function
        self.name = getattr(function, "__name__", "f") if name is None else str(name)
        self.n_vertices = check_integer("n_vertices", n_vertices, ge=1)
        self.max_degree = (
            None if max_degree is None else check_integer("max_degree", max_degree, ge=1)
        )
        g1 = check_real("difference_sensitivity", difference_sensitivity, gt=0)
        g2 = (
            g1
            if difference_l2_sensitivity is None
            else check_real("difference_l2_sensitivity", difference_l2_sensitivity, gt=0)
        )
        integer = check_bool("integer_valued", integer_valued)
        degree = "" if self.max_degree is None else f", degrees <= {self.max_degree}"
        self._setup_mechanism(
            MechanismChoice(mechanism, k, subtract),
            user_budget,
            StreamSensitivity(g1, g2),
            horizon=horizon,
            rng=rng,
            neighbouring="edge-level, insertions only: insertion streams differ by one edge "
            "insertion" + degree,
            integer=integer,
        )
        initial = self._evaluate(SimpleGraph(self.n_vertices, self.max_degree), None, first=True)
        self.initial_value = initial
        self.dim: int | None = None if np.ndim(initial) == 0 else int(np.size(initial))
        self._reset()

    def _reset(self) -> None:
        self._stream = self.mechanism.stream()
        self.graph = SimpleGraph(self.n_vertices, self.max_degree)
        self._value: Any = self.initial_value

    _shown = ("n_vertices", "horizon", "max_degree")

    def _structure(self) -> str:
        return f"{self.name}, {super()._structure()}"

    @property
    def step(self) -> int:
        """Steps released so far."""
        return self._stream.step

    def _evaluate(self, graph: SimpleGraph, dim: int | None, *, first: bool = False) -> Any:
        value = as_array("function", self.function(graph))
        if not (np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.floating)):
            raise TypeError(f"function must return real numbers, got dtype {value.dtype}")
        if value.ndim > 1:
            raise ValueError(f"function must return a real or a 1-D array, got shape {value.shape}")
        if not first and (
            (dim is None and value.ndim != 0) or (dim is not None and value.shape != (dim,))
        ):
            want = "a real" if dim is None else f"shape ({dim},)"
            raise ValueError(f"function must return {want} every step, got shape {value.shape}")
        out = value.astype(np.float64)
        if not np.isfinite(out).all():
            raise ValueError(f"function must return finite values, got {out!r}")
        return float(out) if out.ndim == 0 else out

    def update(self, edges: Iterable[tuple[int, int]] = ()) -> Any:
        """Insert this step's edges; return the private f(G_t) (a float or an array)."""
        if self.step >= self.horizon:
            raise ValueError(
                f"stream is at its horizon ({self.horizon} steps released); "
                "no further steps can be released"
            )
        checked = self.graph.check_insertions(edges)
        self.graph.insert(checked)
        value = self._evaluate(self.graph, self.dim)
        difference = value - self._value
        self._value = value
        noisy_sum = self._stream.update(difference)
        return self.initial_value + noisy_sum


# -- worked examples (insertions only) ----------------------------------------------------


def edge_count(graph: SimpleGraph) -> float:
    """Number of edges."""
    return float(graph.n_edges)


def edge_count_sensitivity() -> StreamSensitivity:
    """Γ₁ = Γ₂ = 1: one insertion more changes the edge count's differences at one step by 1."""
    return StreamSensitivity.scalar(1.0)


def degree_histogram(graph: SimpleGraph, max_degree: int) -> NDArray[np.float64]:
    """Number of vertices of each degree 0..max_degree (length max_degree + 1)."""
    return np.bincount(graph.degrees(), minlength=max_degree + 1).astype(np.float64)


def degree_histogram_sensitivity(max_degree: int) -> StreamSensitivity:
    """Sensitivity of the degree histogram's difference sequence, degrees ≤ D.

    Let the streams differ by the insertion of {u, v} at step τ. For t ≥ τ the
    histograms differ by g_t = h(deg_t u) + h(deg_t v), h(a) = e_a − e_{a−1},
    and the difference sequences by g_t − g_{t−1}. The u part: ℓ₁ 2 at τ, then
    ℓ₁ ≤ 4 for each later change of deg u, at most D − 1 of them (deg u goes
    from ≥ 1 to ≤ D): total ≤ 4D − 2, and each bin's value runs through at most
    0 → 1 → −1 → 0 (total variation ≤ 4). Same for v. Hence

    * Γ₁ ≤ 2(4D − 2) = 8D − 4,
    * Γ₂² ≤ Σ_c (A_c + B_c)² ≤ 2Σ_c A_c² + 2Σ_c B_c² ≤ 2·4·(4D − 2)·2 = 64D − 32
      (A_c, B_c the u and v parts' per-bin total variations, each ≤ 4, summing
      to ≤ 4D − 2), and Γ₂ ≤ Γ₁.

    Checked against brute force over small insertion streams in the tests.
    """
    d = check_integer("max_degree", max_degree, ge=1)
    g1 = 8.0 * d - 4.0
    return StreamSensitivity(g1, min(g1, math.sqrt(64.0 * d - 32.0)))


def triangle_count(graph: SimpleGraph) -> float:
    """Number of triangles."""
    total = 0
    for u, v in graph.edges():
        total += graph.common_neighbours(u, v)
    return float(total // 3)


def triangle_count_sensitivity(max_degree: int) -> StreamSensitivity:
    """Γ₁ = Γ₂ = D − 1 for triangle counts under insertions with degrees ≤ D (D ≥ 2).

    With {u, v} inserted at τ in one stream only, the triangle counts differ by
    g_t = |N_t(u) ∩ N_t(v)| (triangles through {u, v}) for t ≥ τ, non-decreasing
    (insertions only) and ≤ D − 1 (u has at most D − 1 neighbours besides v).
    The difference sequences differ by g_t − g_{t−1} ≥ 0, summing to g_T ≤ D − 1.
    """
    d = check_integer("max_degree", max_degree, ge=2)
    return StreamSensitivity.scalar(float(d - 1))


def _statistic(
    function: Callable[[SimpleGraph], Any],
    sensitivity: StreamSensitivity,
    name: str,
    n_vertices: int,
    horizon: int,
    max_degree: int | None,
    options: dict[str, Any],
) -> GraphStatistic:
    return GraphStatistic(
        function,
        sensitivity.l1,
        difference_l2_sensitivity=sensitivity.l2,
        n_vertices=n_vertices,
        horizon=horizon,
        max_degree=max_degree,
        name=name,
        integer_valued=True,
        **options,
    )


def edge_count_statistic(n_vertices: int, horizon: int, **options: Any) -> GraphStatistic:
    """Private edge count under insertions (Γ₁ = Γ₂ = 1, :func:`edge_count_sensitivity`).

    ``options``: ``max_degree``, the mechanism options of :class:`GraphStatistic`
    and its budget (``budget=`` or ``epsilon=``, ``delta=``, …), keyword only.
    The guarantee is :class:`GraphStatistic`'s for this sensitivity.
    """
    max_degree = options.pop("max_degree", None)
    return _statistic(
        edge_count,
        edge_count_sensitivity(),
        "edge_count",
        n_vertices,
        horizon,
        max_degree,
        options,
    )


def degree_histogram_statistic(
    n_vertices: int, max_degree: int, horizon: int, **options: Any
) -> GraphStatistic:
    """Private degree histogram (bins 0..D) under insertions with degrees ≤ D (enforced).

    Sensitivity :func:`degree_histogram_sensitivity`: Γ₁ = 8D − 4,
    Γ₂ = min(Γ₁, √(64D − 32)). ``options``: the mechanism options of
    :class:`GraphStatistic` and its budget (``budget=`` or ``epsilon=``,
    ``delta=``, …), keyword only; the guarantee is :class:`GraphStatistic`'s.
    """
    d = check_integer("max_degree", max_degree, ge=1)

    def histogram(graph: SimpleGraph) -> NDArray[np.float64]:
        return degree_histogram(graph, d)

    return _statistic(
        histogram,
        degree_histogram_sensitivity(d),
        "degree_histogram",
        n_vertices,
        horizon,
        d,
        options,
    )


def triangle_count_statistic(
    n_vertices: int, max_degree: int, horizon: int, **options: Any
) -> GraphStatistic:
    """Private triangle count under insertions with degrees ≤ D (enforced), Γ₁ = Γ₂ = D − 1.

    ``options``: the mechanism options of :class:`GraphStatistic` and its budget
    (``budget=`` or ``epsilon=``, ``delta=``, …), keyword only; the guarantee is
    :class:`GraphStatistic`'s.
    """
    d = check_integer("max_degree", max_degree, ge=2)
    return _statistic(
        triangle_count,
        triangle_count_sensitivity(d),
        "triangle_count",
        n_vertices,
        horizon,
        d,
        options,
    )
