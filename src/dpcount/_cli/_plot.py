"""``dpcount count --plot``: the release with its ±2σ band over the true counts.

The picture shows the true running counts: it is for the data owner (checking a
release before publishing it), never for publication.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcount.counting.base import CountingMechanism

__all__ = ["plot_release"]


def plot_release(
    path: str,
    truth: NDArray[np.float64],
    raw: NDArray[Any],
    std: NDArray[np.float64],
    post: list[Any] | None,
    labels: list[str] | None,
    mech: CountingMechanism,
    time_name: str | None = None,
) -> Path:
    """Top: true and released running counts with the raw release's ±2σ band (and the
    post-processed release if any). Bottom: the error with the ±2σ band. The x axis
    shows ``labels`` (the time column, named ``time_name``) when given, else t."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(1, len(truth) + 1)
    raw_f = np.asarray(raw, dtype=np.float64)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, layout="constrained")
    top.fill_between(t, raw_f - 2 * std, raw_f + 2 * std, color="C0", alpha=0.2,
                     label="raw release ± 2σ (exact σ)")  # fmt: skip
    top.plot(t, raw_f, color="C0", lw=1, label="raw private release")
    if post is not None:
        top.plot(t, np.asarray(post, dtype=np.float64), color="C2", lw=1.2,
                 label="post-processed release")  # fmt: skip
    top.plot(t, truth, color="black", lw=1.2, ls="--", label="true running count")
    top.set_ylabel("running count")
    top.legend(loc="upper left", framealpha=0.9)
    top.set_title(
        f"{type(mech).__name__}: {mech.privacy.describe().split(',')[0] if mech.privacy else ''}"
        " — for the data owner only: shows the true counts"
    )
    bottom.fill_between(t, -2 * std, 2 * std, color="C0", alpha=0.2, label="± 2σ")
    bottom.plot(t, raw_f - truth, color="C0", lw=0.8, label="raw release − truth")
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_ylabel("error")
    # above the panel: the band is symmetric, so any inner corner would cover it
    bottom.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False)
    if labels is not None:
        ticks = np.unique(np.linspace(0, len(t) - 1, min(8, len(t))).astype(int))
        bottom.set_xticks(t[ticks], [labels[i] for i in ticks], rotation=30, ha="right")
        bottom.set_xlabel(time_name or "time")
    else:
        bottom.set_xlabel("step t")
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
