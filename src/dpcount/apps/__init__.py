"""Applications of continual counting over vector-valued streams (constant-matters §5, App. B).

Every app turns its input into a stream of vectors and releases their private
prefix sums with a counting mechanism chosen by name from
:mod:`dpcount.counting.registry`. Default (:class:`MechanismChoice`): apps with
integer-valued streams use ``"kary"`` (k = 19, subtraction) with integer noise,
``"discrete-laplace"`` or with a delta ``"discrete-gaussian"`` (no floating-point
leak, docs/safe-noise.md); apps with fractional data (running average,
synthetic graph) use ``"sqrt"`` with Gaussian noise when a delta is given, else
``"kary"`` with Laplace noise.
Every app takes its budget as ``budget=Budget(...)`` or the budget's keyword
fields (``epsilon``, ``delta``, ``noise``, ``calibration``; keyword-only after
the app's structure arguments), computes the step sensitivity from its own
bounds (a budget that sets one is refused), and exposes ``app.budget`` (with the
noise kind resolved) and ``app.dp_event()``.
Streaming apps share one shape: ``update(step_input)`` returns that step's
release, ``variances()`` the exact per-coordinate variances, ``privacy`` the
guarantee stated for the app's neighbouring relation, and
``with_sampler(ZeroNoise())`` a noiseless copy for testing. Apps with input
bounds refuse an out-of-bound record by default, a data-dependent signal no
guarantee covers; ``on_out_of_bounds="clip"`` clips it instead and reports the
(non-private) count in ``clipped`` (:mod:`dpcount.apps._bounds`, docs/apps.md).

* :class:`ContinualHistogram` — insertions/deletions, ``top1``/``topk`` (App. B.1, App. D).
* :class:`RunningAverage` — private running mean of a bounded stream.
* :class:`SyntheticGraph` — noisy weighted graph and (S, P)-cut queries (§5, Cor. 5.2).
* :class:`GraphStatistic` — graph functions from difference sequences (App. B.2),
  with worked examples for edge counts, degree histograms and triangle counts.
* :class:`SubstringCounter`, :class:`EpisodeCounter` — App. B.3–B.4.
* :func:`local_median`, :func:`local_risk_minimization` — non-interactive LDP (App. B.5).
"""

from dpcount.apps._common import StreamSensitivity
from dpcount.apps.average import RunningAverage
from dpcount.apps.graphs import (
    GraphStatistic,
    SimpleGraph,
    SyntheticGraph,
    degree_histogram_sensitivity,
    degree_histogram_statistic,
    edge_count_sensitivity,
    edge_count_statistic,
    triangle_count_sensitivity,
    triangle_count_statistic,
)
from dpcount.apps.histogram import (
    ContinualHistogram,
    TopItem,
    histogram_sensitivity,
    top1_counts,
    zipf_items,
)
from dpcount.apps.local import (
    LocalMedianProtocol,
    LocalMedianResult,
    local_median,
    local_risk_minimization,
)
from dpcount.apps.strings import (
    EpisodeCounter,
    MinimalOccurrenceCounter,
    SubstringCounter,
    episode_sensitivity,
    substring_sensitivity,
)

__all__ = [
    "ContinualHistogram",
    "EpisodeCounter",
    "GraphStatistic",
    "LocalMedianProtocol",
    "LocalMedianResult",
    "MinimalOccurrenceCounter",
    "RunningAverage",
    "SimpleGraph",
    "StreamSensitivity",
    "SubstringCounter",
    "SyntheticGraph",
    "TopItem",
    "degree_histogram_sensitivity",
    "degree_histogram_statistic",
    "edge_count_sensitivity",
    "edge_count_statistic",
    "episode_sensitivity",
    "histogram_sensitivity",
    "local_median",
    "local_risk_minimization",
    "substring_sensitivity",
    "top1_counts",
    "triangle_count_sensitivity",
    "triangle_count_statistic",
    "zipf_items",
]
