"""First contact with the command line (issue 13, items 7-11): start-up time, install
hints, a closed pipe, errors in the CLI's language, ignored options, complete
``--help``, progress in logs and unwrapped log lines.

The subprocess tests run the installed ``dpcount`` entry point (next to the Python
running the tests) with this checkout's ``src`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dpcount
from dpcount.cli import SUBCOMMANDS, SUMMARIES, build_parser, main
from dpcount.privacy import Budget

SRC = str(Path(dpcount.__file__).resolve().parents[1])
ENTRY = Path(sys.executable).parent / "dpcount"


def run_entry(*args: str, extra_path: str | None = None, **kw: object) -> subprocess.Popen[str]:
    """The installed entry point (or ``python -m dpcount`` if it is not installed)."""
    path = SRC if extra_path is None else os.pathsep.join([extra_path, SRC])
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [str(ENTRY)] if ENTRY.exists() else [sys.executable, "-m", "dpcount"]
    return subprocess.Popen(
        [*cmd, *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,  # type: ignore[call-overload]
    )


def run_done(*args: str, extra_path: str | None = None) -> tuple[int, str, str]:
    proc = run_entry(*args, extra_path=extra_path)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


# -- start-up ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_import_no_heavy_module(argv: list[str]) -> None:
    code = (
        "import sys\nfrom dpcount.cli import main\n"
        f"status = main({argv!r})\n"
        "heavy = sorted(m for m in ('numpy', 'scipy', 'rich', 'matplotlib') if m in sys.modules)\n"
        "print('HEAVY', heavy, status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "HEAVY [] 0" in done.stdout, done.stdout


def test_version_entry_point_is_fast() -> None:
    """Best of 5 well under 0.3 s on an idle machine (1-2 s when every subcommand was
    imported); the bound leaves room for a loaded CI runner."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        code, out, _ = run_done("--version")
        times.append(time.perf_counter() - start)
        assert code == 0 and out.strip() == f"dpcount {dpcount.__version__}"
    assert min(times) < 0.5, times


def test_summaries_agree_with_the_subcommands() -> None:
    for name in SUBCOMMANDS:
        # a new subcommand needs its line here, or --version and --help import it
        assert name in SUMMARIES, f"add {name!r} to dpcount.cli.SUMMARIES"
        assert SUMMARIES[name] == importlib.import_module(f"dpcount._cli.{name}").HELP


def test_lazy_parser_runs_a_subcommand_like_the_full_one(tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1"]
    full = vars(build_parser().parse_args(argv))
    lazy = vars(build_parser("count", lazy=True).parse_args(argv))
    for d in (full, lazy):
        d.pop("_parser")
    assert full == lazy


# -- --help: every default, every choice ----------------------------------------------------


def _options(name: str) -> list[argparse.Action]:
    parser = build_parser(name, lazy=True)
    sub = parser._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]
    return [
        a for a in sub._actions if a.option_strings and not isinstance(a, (argparse._HelpAction,))
    ]


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_help_shows_every_default_and_every_choice(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([name, "--help"]) == 0
    text = "".join(capsys.readouterr().out.split())  # without argparse's line breaks
    parser = build_parser(name, lazy=True)
    sub = parser._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]
    for action in _options(name):
        flag = action.option_strings[-1]
        assert flag in text, flag
        for choice in action.choices or ():
            assert str(choice) in text, (flag, choice)
        if isinstance(action, argparse._StoreTrueAction) or action.required:
            continue
        shown = "".join(sub._get_formatter()._expand_help(action).split())
        assert "default" in shown, (flag, shown)
        assert shown in text, (flag, shown)  # as printed by --help


# -- install hints ----------------------------------------------------------------------------


def _no_matplotlib(tmp_path: Path) -> str:
    """A folder whose ``matplotlib`` module fails like an absent one."""
    fake = tmp_path / "nompl"
    fake.mkdir()
    (fake / "matplotlib.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'matplotlib'\", name='matplotlib')\n"
    )
    return str(fake)


def test_reproduce_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    code, _, err = run_done(
        "reproduce",
        "elders-constants",
        "--quick",
        "--out",
        str(tmp_path / "r"),
        extra_path=_no_matplotlib(tmp_path),
    )
    assert code == 2
    assert err.strip() == (
        "dpcount: error: matplotlib is not installed: pip install 'dpcount[plot]'"
    ), err
    assert not (tmp_path / "r").exists()  # refused before any work


def test_demo_hint_keeps_its_brackets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    argv = ["demo", "--replicates", "3", "--seed", "1", "--output", str(tmp_path / "d.png")]
    assert main(argv) == 0
    assert "pip install 'dpcount[plot]' for the plot" in capsys.readouterr().out


def test_file_names_with_brackets_are_printed_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    ck, out = tmp_path / "ck[plot]", tmp_path / "out.csv"
    argv = ["count", str(src), "--mechanism", "binary", "--epsilon", "1", "--seed", "0"]
    argv += ["--checkpoint", str(ck), "--output", str(out)]
    assert main(argv) == 0
    assert main(argv) == 0  # the second run resumes and names the checkpoint
    err = " ".join(capsys.readouterr().err.split())
    assert f"checkpoint {ck}: 3 steps already released, continuing at step 4" in err, err


# -- a closed pipe ------------------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly_with_status_0(tmp_path: Path) -> None:
    src = tmp_path / "big.csv"
    src.write_text("".join(f"{i % 3}\n" for i in range(200_000)))
    proc = run_entry("count", str(src), "--mechanism", "kary", "--epsilon", "1")
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline() for _ in range(3)]  # | head -3
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 0, err
    assert head[0] == "t,private_count,std\n"
    assert err == "", err


def test_a_closed_pipe_on_live_input_ends_quietly(tmp_path: Path) -> None:
    proc = run_entry("count", "-", "--horizon", "100000", "--epsilon", "1", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("1\n0\n1\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "t,private_count,std\n"
    proc.stdout.close()
    with contextlib.suppress(BrokenPipeError):  # dpcount may be gone already
        proc.stdin.write("".join(f"{i % 2}\n" for i in range(50_000)))  # writes hit the pipe
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 0, err
    assert "Broken pipe" not in err and "Traceback" not in err, err


# -- errors in the CLI's language, ignored options -------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sensitivity", "-1"], "dpcount: error: --sensitivity must be > 0, got -1.0"),
        (["--mechanism", "kary", "--k", "1"], "dpcount: error: --k must be >= 2, got 1"),
        (["--delta", "2"], "dpcount: error: --delta must be in (0, 1), got 2.0"),
    ],
)
def test_errors_name_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n")
    assert main(["count", str(src), "--epsilon", "1", *extra]) == 2
    assert message in capsys.readouterr().err


def test_ranges_level_error_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "h.npy", np.arange(8.0))
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--level", "2", "--output", str(tmp_path / "o.npy")]) == 2
    assert "dpcount: error: --level must be in (0, 1)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("lo,hi\n0,3\n5,400\n", "q.csv: line 3: hi = 400 is outside 0..49"),
        ("0,3\n\n-1,2\n", "q.csv: line 3: lo = -1 is outside 0..49"),
        ("lo,hi\n7,2\n", "q.csv: line 2: lo = 7 is after hi = 2"),
    ],
)
def test_query_file_errors_name_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str, message: str
) -> None:
    np.save(tmp_path / "h.npy", np.arange(50.0))
    (tmp_path / "q.csv").write_text(rows)
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--queries", str(tmp_path / "q.csv"), "--output", str(tmp_path / "o.npy")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()


def test_query_file_errors_name_the_line_in_2d(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "h.npy", np.ones((4, 6)))
    (tmp_path / "q.csv").write_text("0,0,3,5\n0,0,3,6\n")
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--queries", str(tmp_path / "q.csv"), "--output", str(tmp_path / "o.npy")]
    assert main(argv) == 2
    assert "q.csv: line 2: col_hi = 6 is outside 0..5" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "warning"),
    [
        (["--mechanism", "sqrt", "--k", "5"], "warning: --k ignored: --mechanism sqrt"),
        (["--mechanism", "binary", "--no-subtract"], "warning: --no-subtract ignored"),
    ],
)
def test_an_ignored_option_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], warning: str
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    assert main(["count", str(src), "--epsilon", "1", "--noise", "laplace", *extra]) == 0
    assert warning in capsys.readouterr().err


def test_no_warning_when_nothing_is_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    assert main(["count", str(src), "--epsilon", "1", "--mechanism", "kary", "--k", "5"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_histogram_warns_about_an_ignored_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "e.csv").write_text("t,item\n0.5,a\n1.5,b\n")
    argv = ["histogram", str(tmp_path / "e.csv"), "--time-column", "t", "--item-column", "item"]
    argv += ["--items", "a,b", "--epsilon", "1", "--mechanism", "binary", "--k", "4"]
    assert main([*argv, "--output", str(tmp_path / "o.csv")]) == 0
    assert "warning: --k ignored: --mechanism binary" in capsys.readouterr().err


# -- logs: progress and whole lines --------------------------------------------------------------


def test_reproduce_reports_progress_in_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcount.experiments import _framework

    monkeypatch.setattr(_framework, "LOG_INTERVAL", 0.0)  # a line per item
    argv = ["reproduce", "elders-constants", "--quick", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    progress = [line for line in err if line.startswith("elders-constants: ")]
    assert progress[0].endswith(" started")
    total = int(progress[0].split("/")[1].split()[0])
    assert len(progress) == total + 1 and progress[-1].startswith(
        f"elders-constants: {total}/{total} done"
    )


def test_log_lines_are_not_wrapped_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x.csv"
    src.write_text("1\n0\n1\n")
    assert main(["count", str(src), "--epsilon", "1", "--mechanism", "kary"]) == 0
    err = capsys.readouterr().err.splitlines()
    privacy = next(line for line in err if line.startswith("privacy"))
    assert len(privacy) > 80 and privacy.rstrip().endswith(")"), err
    assert len(err) == 3, err  # mechanism, privacy, exact error: one line each


# -- the demo's coverage column, ranges' one table per stream -------------------------------


def test_demo_coverage_is_over_all_replicates() -> None:
    """Independent recomputation from the same seed: the fraction of every (replicate,
    step) pair within ±2σ; and it lies where the noise puts it (for a sum of Laplace
    variables, between one Laplace's 1 − e^{−2√2} = 0.9409 and the normal 0.9545),
    within 5 standard errors of the worst case over 200 × 4096 pairs."""
    from dpcount.analysis.advisor import best_k
    from dpcount.counting.tree import BinaryTree, KaryTree
    from dpcount.data import load_searchlogs
    from dpcount.demo import demo_rows
    from dpcount.privacy.rng import as_generator

    _, rows = demo_rows(1.0, 200, 11)
    gen = as_generator(11)
    x = load_searchlogs()
    T = len(x)
    truth = np.cumsum(x).astype(np.float64)
    choice = best_k(T, budget=Budget(epsilon=1.0))
    mechs = [
        KaryTree(T, epsilon=1.0, k=choice.k, subtract=choice.subtract, rng=gen),
        BinaryTree(T, epsilon=1.0, rng=gen),
    ]
    for m, row in zip(mechs, rows, strict=True):
        stream = m.stream()
        for v in x:
            stream.update(float(v))
        reps = m.release(np.repeat(x[:, None].astype(np.float64), 200, axis=1))
        inside = np.abs(reps - truth[:, None]) <= 2 * np.sqrt(m.variances())[:, None]
        assert row.coverage == float(inside.mean())
        se = np.sqrt(0.05 * 0.95 / 200)  # replicates independent; steps within one correlated
        assert 0.9409 - 5 * se <= row.coverage <= 0.9545 + 5 * se, row.coverage


def test_ranges_refuses_two_tables_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "h.npy", np.arange(8.0))
    (tmp_path / "q.csv").write_text("0,3\n")
    argv = ["ranges", str(tmp_path / "h.npy"), "--epsilon", "1", "--delta", "1e-6"]
    argv += ["--queries", str(tmp_path / "q.csv")]
    assert main([*argv, "--output", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "two CSV tables in one stream: give --answers FILE" in captured.err
    # one table per stream is fine
    assert main([*argv, "--output", "-", "--answers", str(tmp_path / "a.csv")]) == 0
    out = capsys.readouterr().out
    assert out.count("index,noisy_count,std") == 1 and "answer" not in out
