"""No flag is silently dropped: every subcommand, every flag a chosen path ignores.

One table: each row is a command line where some flag would not be honoured by
the path the other options choose, and what must happen instead — an error that
names the flag (``error``), or a documented warning on stderr where ignoring it is
harmless (``warning``: the tree options given to a mechanism without them, as the
help says). A second test checks that the table is complete: every option of every
subcommand is either exercised by a row or listed in :data:`HONOURED`, the flags
that every path accepting them uses.

``dpcount keyed`` is left out of the completeness check: its options are another
module's (``dpcount.keyed``) and are checked in tests/keyed.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import SUBCOMMANDS, build_parser, main

#: (flag under test, argv, "error" or "warning", text stderr must contain); in argv,
#: {csv} is a one-column CSV of 6 whole numbers, {events} a histogram event log,
#: {npy} a 1-D histogram, {queries} a range-query CSV, {tmp} the test's folder, and
#: "-" reads 6 rows from stdin.
CASES: list[tuple[str, list[str], str, str]] = [
    # count: the unbounded counter (stdin without --horizon), the live, file,
    # durable and bucketed paths
    ("--participations", ["count", "-", "--epsilon", "1", "--participations", "3"],
     "error", "--participations 3 (--min-separation 1) needs --horizon"),
    ("--participations", ["count", "-", "--epsilon", "1", "--participations", "2",
                          "--checkpoint", "{tmp}/c.ckpt", "--output", "{tmp}/o.csv"],
     "error", "needs --horizon: stdin without --horizon runs the unbounded"),
    ("--bands", ["count", "-", "--epsilon", "1", "--delta", "1e-6", "--mechanism", "toeplitz",
                 "--bands", "2"], "error", "--bands needs --horizon"),
    ("--min-separation", ["count", "{csv}", "--epsilon", "1", "--min-separation", "2"],
     "error", "--min-separation 2 needs --participations"),
    ("--min-separation", ["count", "-", "--epsilon", "1", "--min-separation", "2"],
     "error", "--min-separation 2 needs --participations"),
    ("--k", ["count", "{csv}", "--epsilon", "1", "--mechanism", "binary", "--k", "3"],
     "warning", "--k ignored: --mechanism binary has no such option"),
    ("--no-subtract", ["count", "{csv}", "--epsilon", "1", "--mechanism", "honaker",
                       "--no-subtract"], "warning", "--no-subtract ignored"),
    ("--bands", ["count", "{csv}", "--epsilon", "1", "--mechanism", "binary", "--bands", "3"],
     "warning", "--bands ignored: --mechanism binary has no such option"),
    ("--k", ["count", "{csv}", "--epsilon", "1", "--k", "3"], "error",
     "--k and --no-subtract choose the k-ary tree"),
    ("--bands", ["count", "{csv}", "--epsilon", "1", "--delta", "1e-6", "--bands", "3"],
     "error", "--bands chooses the Toeplitz factorization"),
    ("--objective", ["count", "{csv}", "--epsilon", "1", "--mechanism", "binary",
                     "--objective", "max"],
     "warning", "--objective ignored: --mechanism binary has no such option"),
    ("--objective", ["count", "{csv}", "--epsilon", "1", "--delta", "1e-6", "--objective",
                     "max"], "error", "--objective chooses a factorization's parameters"),
    ("--objective", ["count", "-", "--epsilon", "1", "--delta", "1e-6", "--mechanism", "blt",
                     "--objective", "max"], "error", "--objective needs --horizon"),
    ("--checkpoint-every", ["count", "{csv}", "--epsilon", "1", "--checkpoint-every", "2"],
     "error", "--checkpoint-every needs --checkpoint"),
    ("--checkpoint-seconds", ["count", "{csv}", "--epsilon", "1", "--checkpoint-seconds", "2"],
     "error", "--checkpoint-seconds needs --checkpoint"),
    ("--checkpoint-seconds", ["count", "{csv}", "--epsilon", "1", "--checkpoint", "{tmp}/c",
                              "--output", "{tmp}/o.csv", "--checkpoint-every", "2",
                              "--checkpoint-seconds", "3"],
     "error", "--checkpoint-seconds is not used with --checkpoint-every"),
    ("--monotone", ["count", "{csv}", "--epsilon", "1", "--checkpoint", "{tmp}/c",
                    "--output", "{tmp}/o.csv", "--monotone"],
     "error", "--monotone is not available with --checkpoint"),
    ("--plot", ["count", "{csv}", "--epsilon", "1", "--checkpoint", "{tmp}/c",
                "--output", "{tmp}/o.csv", "--plot", "{tmp}/p.png"],
     "error", "--plot is not available with --checkpoint"),
    ("--step", ["count", "{csv}", "--epsilon", "1", "--step", "1D"], "error",
     "--step needs --time-column"),
    ("--start", ["count", "{csv}", "--epsilon", "1", "--start", "2020-01-01"], "error",
     "--start needs --step"),
    ("--above-bound", ["count", "{csv}", "--epsilon", "1", "--above-bound", "error"], "error",
     "--above-bound needs --step"),
    # plan: the continual-counting ranking and the range ranking
    ("--size", ["plan", "--horizon", "8", "--epsilon", "1", "--size", "4"], "error",
     "--size needs --ranges"),
    ("--workload", ["plan", "--horizon", "8", "--epsilon", "1", "--workload", "{queries}"],
     "error", "--workload needs --ranges"),
    ("--horizon", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta", "1e-6",
                   "--horizon", "8"], "error", "--horizon is for continual counting"),
    ("--metric", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta", "1e-6",
                  "--metric", "linf"], "error", "--metric is an option of continual counting"),
    ("--beta", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta", "1e-6",
                "--beta", "0.1"], "error", "--beta is an option of continual counting"),
    ("--sensitivity", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta", "1e-6",
                       "--sensitivity", "2"], "error", "--sensitivity is an option of"),
    ("--participations", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta",
                          "1e-6", "--participations", "2"], "error",
     "--participations is an option of continual counting"),
    ("--min-separation", ["plan", "--ranges", "--size", "8", "--epsilon", "1", "--delta",
                          "1e-6", "--min-separation", "2"], "error",
     "--min-separation is an option of continual counting"),
    ("--min-separation", ["plan", "--horizon", "8", "--epsilon", "1", "--min-separation", "2"],
     "error", "--min-separation 2 needs --participations"),
    # plan --open-keys: its flags without it, and the ranking's flags with it
    *[
        (flag, ["plan", "--horizon", "8", "--epsilon", "1", flag, value], "error",
         f"{flag} needs --open-keys")
        for flag, value in (("--max-keys", "2"), ("--max-steps", "2"), ("--max-weight", "2"),
                            ("--select-every", "2"), ("--key-events", "5"))
    ],
    ("--open-keys", ["plan", "--open-keys", "--horizon", "8", "--epsilon", "1", "--delta",
                     "1e-6", "--ranges"], "error", "--ranges is not used with --open-keys"),
    ("--min-separation", ["plan", "--open-keys", "--horizon", "8", "--epsilon", "1",
                          "--delta", "1e-6", "--min-separation", "2"], "error",
     "--min-separation bounds a unit over the run: it needs --max-keys"),
    # ranges
    ("--column", ["ranges", "{npy}", "--epsilon", "1", "--delta", "1e-6", "--output",
                  "{tmp}/o.csv", "--column", "c"], "error", "--column is for a CSV input"),
    ("--answers", ["ranges", "{npy}", "--epsilon", "1", "--delta", "1e-6", "--output",
                   "{tmp}/o.csv", "--answers", "{tmp}/a.csv"], "error",
     "--answers needs --queries"),
    ("--level", ["ranges", "{npy}", "--epsilon", "1", "--delta", "1e-6", "--output",
                 "{tmp}/o.csv", "--level", "0.9"], "error", "--level needs --queries"),
    # histogram
    ("--k", ["histogram", "{events}", "--time-column", "t", "--item-column", "item",
             "--items", "a,b", "--epsilon", "1", "--mechanism", "binary", "--k", "3"],
     "warning", "--k ignored: --mechanism binary has no such option"),
    ("--no-subtract", ["histogram", "{events}", "--time-column", "t", "--item-column", "item",
                       "--items", "a,b", "--epsilon", "1", "--mechanism", "honaker",
                       "--no-subtract"], "warning", "--no-subtract ignored"),
    # reproduce: listing ignores the options of a run
    ("--quick", ["reproduce", "--list", "--quick"], "error", "--quick is for running an"),
    ("--out", ["reproduce", "--out", "{tmp}/r"], "error", "--out is for running an experiment"),
    ("--seed", ["reproduce", "--list", "--seed", "3"], "error", "--seed is for running"),
    ("NAME", ["reproduce", "fhu-table", "--list"], "error", "NAME is for running an experiment"),
    # sample: --output without a NAME (the listing) would be ignored
    ("--output", ["sample", "--output", "{tmp}/s.csv"], "error", "--output needs NAME"),
    # plan --ranges: a static release, no stream
    ("--dim", ["plan", "--ranges", "--size", "64", "--epsilon", "1", "--dim", "10"],
     "error", "--dim is not used with --ranges"),
    ("--memory", ["plan", "--ranges", "--size", "64", "--epsilon", "1", "--memory", "1GiB"],
     "error", "--memory is not used with --ranges"),
    # keyed: the Dask options with the embedded engine, --workers with a real cluster
    *[
        (flag, ["keyed", "{events}", "--time-column", "t", "--key-column", "item", "--keys",
                "{tmp}/keys.txt", "--step", "1", "--epsilon", "1", "--secret", "{tmp}/s.key",
                "--output", "{tmp}/k.csv",
                flag, value],
         "error", f"{flag} needs --engine dask")
        for flag, value in (("--workers", "2"), ("--partitions", "3"),
                            ("--scheduler", "tcp://127.0.0.1:1"))
    ],
    ("--workers", ["keyed", "{events}", "--time-column", "t", "--key-column", "item", "--keys",
                   "{tmp}/keys.txt", "--step", "1", "--epsilon", "1", "--secret", "{tmp}/s.key",
                "--output", "{tmp}/k.csv",
                   "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"],
     "error", "--workers is not used with --scheduler"),
]  # fmt: skip

#: subcommand -> the options every path that accepts them honours (checked by reading
#: each path: a row of CASES covers every other option)
HONOURED: dict[str, set[str]] = {
    "count": {
        "--column", "--mechanism", "--epsilon", "--delta", "--seed", "--noise",
        "--calibration", "--sensitivity", "--horizon", "--output", "--time-column",
        "--missing", "--clamp", "--round", "--checkpoint", "--where", "--digits",
    },
    "plan": {"--ranges", "--epsilon", "--delta", "--format"},
    "ranges": {"--epsilon", "--delta", "--mechanism", "--noise", "--calibration", "--queries",
               "--seed", "--output"},
    "histogram": {
        "--time-column", "--item-column", "--items", "--step-width", "--start", "--horizon",
        "--max-items-per-step", "--max-count-per-item", "--drop-excess", "--mechanism",
        "--epsilon", "--delta", "--seed", "--noise", "--calibration", "--missing", "--output",
        "--digits",
    },
    "demo": {"--epsilon", "--replicates", "--output", "--seed"},
    "reproduce": {"--list"},
    "sample": set(),
}  # fmt: skip


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    (tmp_path / "in.csv").write_text("".join(f"{v}\n" for v in (1, 0, 2, 1, 0, 3)))
    (tmp_path / "events.csv").write_text("t,item\n1,a\n2,b\n3,a\n")
    np.save(tmp_path / "h.npy", np.arange(8.0))
    (tmp_path / "q.csv").write_text("0,3\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0\n2\n1\n0\n3\n"))
    monkeypatch.chdir(tmp_path)
    return {
        "csv": str(tmp_path / "in.csv"),
        "events": str(tmp_path / "events.csv"),
        "npy": str(tmp_path / "h.npy"),
        "queries": str(tmp_path / "q.csv"),
        "tmp": str(tmp_path),
    }


@pytest.mark.parametrize(("flag", "argv", "outcome", "message"), CASES)
def test_a_flag_the_path_ignores_is_never_silent(
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    flag: str,
    argv: list[str],
    outcome: str,
    message: str,
) -> None:
    status = main([a.format(**files) for a in argv])
    err = capsys.readouterr().err
    assert message in err, err
    if outcome == "error":
        assert status == 2 and err.startswith("dpcount: error: ")
    else:
        assert status == 0 and "warning:" in err


def test_every_option_of_every_subcommand_is_in_the_table() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    tested = {(argv[0], flag) for flag, argv, _, _ in CASES}
    missing = []
    for name in SUBCOMMANDS:
        if name == "keyed":
            continue  # see the module docstring
        options = {
            opt
            for action in sub.choices[name]._actions  # type: ignore[union-attr]
            for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"
        }
        missing += [
            f"{name} {opt}"
            for opt in sorted(options)
            if opt not in HONOURED[name] and (name, opt) not in tested
        ]
        stale = HONOURED[name] - options
        assert not stale, f"{name}: HONOURED lists options it does not have: {stale}"
    assert not missing, (
        f"options neither tested for being ignored nor listed as honoured: {missing}"
    )
