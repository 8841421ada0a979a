"""compare(..., dim=, memory=) and ``dpcount plan --dim/--memory`` (issue 20 item 2): only
mechanisms whose structure and one stream fit are ranked, each row with its declared
stream state."""

from __future__ import annotations

import pytest

from dpcount.analysis.compare import compare
from dpcount.cli import main
from dpcount.counting.base import format_bytes
from dpcount.counting.registry import memory_estimate
from dpcount.privacy import Budget

O_T_STREAMS = {"sqrt", "normalized-sqrt", "dense-optimum", "toeplitz"}

B = Budget(epsilon=1.0, delta=1e-6)


def test_rows_that_do_not_fit_are_left_out() -> None:
    rows = compare(1024, budget=B, dim=10**5, memory="1GiB")
    names = {r.mechanism for r in rows}
    assert "blt" in names and not names & O_T_STREAMS
    for r in rows:
        opts = {"k": r.k, "subtract": r.subtract, "bands": r.bands}
        assert r.dim == 10**5
        assert r.stream_bytes == memory_estimate(r.mechanism, 1024, 10**5, **opts).stream
        assert memory_estimate(r.mechanism, 1024, 10**5, **opts).total <= 2**30
    # the O(T·d) mechanisms fit a larger limit (1024 · 10^5 · 48 bytes ≈ 4.6 GiB)
    wide = {r.mechanism for r in compare(1024, budget=B, dim=10**5, memory="64GiB")}
    assert wide >= O_T_STREAMS


def test_without_dim_every_row_shows_its_scalar_stream() -> None:
    rows = compare(64, budget=B)
    assert {"sqrt", "blt", "binary"} <= {r.mechanism for r in rows}
    assert all(r.dim is None and r.stream_bytes is not None for r in rows)


def test_nothing_fits_is_an_error() -> None:
    with pytest.raises(ValueError, match="no mechanism's structure and stream fit in the memory"):
        compare(64, budget=B, dim=10, memory="1KiB")
    with pytest.raises(ValueError, match="dim must be >= 1"):
        compare(64, budget=B, dim=0)


def test_plan_with_dim_and_memory(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--horizon", "1024", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--dim", "100000", "--memory", "1GiB"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # the row-scaled BLT: (buffers + 2)·d floats, like BLT, and a block of column norms
    blt = format_bytes(memory_estimate("row-scaled-blt", 1024, 10**5).stream)
    assert "stream" in out and blt in out
    assert "Memory limit 1.0 GiB for the mechanism and one stream of steps of length 100,000" in (
        out
    )
    assert "left out (need): sqrt (4.6 GiB)" in out
    assert "Recommendation: row-scaled-blt" in out and f"Stream state {blt}." in out


@pytest.mark.slow
def test_plan_at_a_million_steps_recommends_a_stream_that_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's acceptance run: T = 2^20, d = 10^5, the machine's memory or 2 GiB."""
    argv = ["plan", "--horizon", "1048576", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--dim", "100000", "--memory", "2GiB"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # the scaled BLTs (26.461, 26.848): their float model is measured up to 2^20
    assert (
        "Recommendation: row-scaled-blt" in out and "Stream state 16.8 MiB." in out
    )  # pairs in the long forms
    assert "mean loss 26.461" in out and "(row-scaled blt (mean-optimized), 26.461)" in out
    assert "next: normalized-blt, its MSE 1.5% larger" in out
