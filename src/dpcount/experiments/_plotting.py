"""Shared plotting helpers of the reproductions: figures, labelled panels, legends.

Every figure goes through :func:`figure`, which lays the panels out with matplotlib's
constrained layout (so a legend placed outside a panel gets room instead of covering a
neighbour), saves the PNG, and refuses to save a figure with a visible panel that has
no y label. :func:`label_axes` sets the labels and the title of a panel in one call;
:func:`legend` places a legend either outside the panel (right of it: never over a
curve) or at matplotlib's ``"best"`` position inside it (the least-covering spot).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

__all__ = ["figure", "label_axes", "legend", "missing_ylabels"]


def missing_ylabels(fig: Any) -> list[int]:
    """Indices (in ``fig.axes``) of the visible panels that have no y label."""
    return [i for i, ax in enumerate(fig.axes) if ax.get_visible() and not ax.get_ylabel()]


@contextmanager
def figure(
    path: Path,
    ncols: int = 1,
    nrows: int = 1,
    size: tuple[float, float] = (7.0, 4.5),
    title: str | None = None,
) -> Iterator[Any]:
    """A matplotlib figure (Agg backend) of ``nrows × ncols`` panels, saved to ``path``.

    Yields ``(fig, axes)`` with ``axes[row][col]``; ``size`` is one panel's size in
    inches. On exit the figure is saved at 120 dpi, with ``title`` as its suptitle. A
    visible panel without a y label is an error (every panel must say what it plots).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(size[0] * ncols, size[1] * nrows),
        squeeze=False,
        layout="constrained",
    )
    try:
        yield fig, axes
        if title:
            fig.suptitle(title, fontsize=10)
        unlabelled = missing_ylabels(fig)
        if unlabelled:
            raise ValueError(f"{path.name}: panels {unlabelled} have no y label")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def label_axes(
    ax: Any,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    fontsize: float = 9,
    grid: bool = False,
) -> None:
    """Set a panel's x label, y label (required, non-empty) and title."""
    if not ylabel:
        raise ValueError("ylabel must be non-empty: every panel says what it plots")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=fontsize)
    if grid:
        ax.grid(True, which="major", alpha=0.3)


def legend(
    ax: Any,
    where: Literal["outside", "best", "below", "top"] = "best",
    fontsize: float = 7,
    ncol: int = 1,
    headroom: float = 0.4,
    source: Any = None,
) -> None:
    """A legend for ``ax`` that covers no curve.

    ``"outside"``: right of the panel; ``"below"``: under it; ``"top"``: inside at the
    top, after raising the y limit by ``headroom`` × the data's height (linear axes) or
    by that fraction of its decades (log axes), so the legend sits above every point;
    ``"best"``: matplotlib's position covering the fewest data points (for panels with
    free space). The constrained layout of :func:`figure` makes room outside.
    ``source``: take the entries from this panel (e.g. the one with every series).
    """
    entries = (source if source is not None else ax).get_legend_handles_labels()
    if where == "outside":
        ax.legend(
            *entries, fontsize=fontsize, ncol=ncol, loc="upper left", bbox_to_anchor=(1.02, 1.0)
        )
    elif where == "below":
        ax.legend(
            *entries, fontsize=fontsize, ncol=ncol, loc="upper center", bbox_to_anchor=(0.5, -0.2)
        )
    elif where == "top":
        lo, hi = ax.get_ylim()
        if ax.get_yscale() == "log":
            ax.set_ylim(lo, hi * (hi / lo) ** headroom)
        else:
            ax.set_ylim(lo, hi + headroom * (hi - lo))
        ax.legend(*entries, fontsize=fontsize, ncol=ncol, loc="upper left")
    else:
        ax.legend(*entries, fontsize=fontsize, ncol=ncol, loc="best")
