"""``dpcount count --checkpoint``: killed runs resume with no line lost, changed or repeated.

The reference is an uninterrupted run with the same seed. Killed runs are real
processes ended with SIGKILL: either from outside (stdin is a pipe the test
controls, so the kill lands after exactly k rows were released) or from inside at
an exact point of the protocol (a driver script wraps the checkpoint writer or the
output writer and kills its own process there: mid checkpoint write, before the
rename, after the checkpoint but before the output, mid output line).
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dpcount.cli import main
from dpcount.counting import KaryTree, load_stream, save_stream
from tests.scratch import scratch

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and POSIX locks")

N = 2000
OPTIONS = ["--mechanism", "kary", "--epsilon", "1", "--seed", "7"]


def write_data(folder: Path, n: int = N, seed: int = 0) -> Path:
    values = np.random.default_rng(seed).integers(0, 6, size=n)
    path = folder / "data.csv"
    path.write_text("x\n" + "".join(f"{v}\n" for v in values))
    return path


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder holding data.csv (N rows)."""
    with scratch(tmp_path) as folder:
        write_data(folder)
        yield folder


def count_argv(
    src: str, folder: Path, *extra: str, out: str = "out.csv", ck: str = "ck"
) -> list[str]:
    argv = ["count", src, *OPTIONS, "--checkpoint", str(folder / ck), "--output", str(folder / out)]
    if src == "-":
        argv += ["--horizon", str(N)]
    return [*argv, *extra]


def stderr(capsys: pytest.CaptureFixture[str]) -> str:
    """Captured stderr with rich's line wrapping undone."""
    return " ".join(capsys.readouterr().err.split())


def run_stdin(monkeypatch: pytest.MonkeyPatch, argv: list[str], text: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return main(argv)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The uninterrupted run's output (file input, checkpoint every step)."""
    with scratch(tmp_path_factory.mktemp("reference")) as folder:
        src = write_data(folder)
        assert main(count_argv(str(src), folder)) == 0
        return (folder / "out.csv").read_text()


def test_checkpointed_runs_match_plain_stdin_and_each_other(
    work: Path, reference: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step goes through the stream: stdin with or without a checkpoint, a file,
    and any --checkpoint-every give the same lines for the same seed."""
    text = (work / "data.csv").read_text()
    plain = ["count", "-", *OPTIONS, "--horizon", str(N), "--output", str(work / "plain.csv")]
    assert run_stdin(monkeypatch, plain, text) == 0
    assert (work / "plain.csv").read_text() == reference
    assert run_stdin(monkeypatch, count_argv("-", work, "--checkpoint-every", "7"), text) == 0
    assert (work / "out.csv").read_text() == reference
    lines = reference.splitlines()
    assert lines[0] == "t,private_count,std" and len(lines) == N + 1
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(1, N + 1))


def test_producer_resends_and_the_run_continues(
    work: Path, reference: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The input ends early twice; each restart re-reads from the start, skips and
    verifies the consumed rows, and continues."""
    rows = (work / "data.csv").read_text().splitlines(keepends=True)
    argv = count_argv("-", work, "--checkpoint-every", "3")
    for n in (700, 1301, N):
        assert run_stdin(monkeypatch, argv, "".join(rows[: n + 1])) == 0
        assert load_stream(work / "ck").step == n
    assert (work / "out.csv").read_text() == reference


def test_a_complete_run_releases_nothing_again(
    work: Path, reference: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = count_argv(str(work / "data.csv"), work, "--checkpoint-every", "50")
    assert main(argv) == 0
    before = (work / "ck").read_bytes()
    capsys.readouterr()
    assert main(argv) == 0
    assert "is complete: all 2000 steps were released" in stderr(capsys)
    assert (work / "out.csv").read_text() == reference
    assert (work / "ck").read_bytes() == before
    text = (work / "data.csv").read_text() + "1\n"
    stdin_argv = count_argv("-", work, "--checkpoint-every", "50")
    assert run_stdin(monkeypatch, stdin_argv, text) == 0  # rows after the horizon: dropped
    assert "dropped: the input continues after --horizon 2000" in stderr(capsys)
    assert (work / "out.csv").read_text() == reference
    assert (work / "ck").read_bytes() == before


def test_lost_tail_and_partial_line_are_completed_from_the_checkpoint(
    work: Path, reference: str
) -> None:
    """A run killed after its checkpoint but before (or while) writing the lines."""
    src = str(work / "data.csv")
    argv = count_argv(src, work, "--checkpoint-every", "9")
    assert main(argv) == 0
    full = (work / "out.csv").read_text()
    assert full == reference
    lines = full.splitlines(keepends=True)
    # The last checkpoint (step 2000) holds the lines of steps 1999-2000 (2000 = 9*222 + 2).
    (work / "out.csv").write_text("".join(lines[:-2]) + lines[-2][:7])
    assert main(argv) == 0
    assert (work / "out.csv").read_text() == reference


def test_time_column_round_and_clamp_resume_to_the_uninterrupted_lines(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--time-column, --round, --clamp with a checkpoint: per-row, so the lines equal a
    plain live run's (same seed); an input that ends early twice and a crash that lost
    the output's tail (mid line) resume to the same lines, none twice or lost."""
    values = np.random.default_rng(3).integers(0, 3, size=300)
    text = "day,x\n" + "".join(f"d{i},{v}\n" for i, v in enumerate(values, 1))
    rows = text.splitlines(keepends=True)
    post = ["--column", "x", "--time-column", "day", "--round", "--clamp", "--noise", "laplace"]
    plain = ["count", "-", *OPTIONS, "--horizon", "300", *post, "--output", str(work / "p.csv")]
    assert run_stdin(monkeypatch, plain, text) == 0
    reference = (work / "p.csv").read_text()
    lines = reference.splitlines(keepends=True)
    assert lines[0] == "t,day,private_count,raw_private_count,raw_std\n" and len(lines) == 301
    assert lines[5].startswith("5,d5,")
    # a raw value at the clamp's bound (step 5: -0.39 before the float-safe grid of 2 snapped
    # it to 0), and every clamped value at or above it
    assert any(float(line.split(",")[3]) <= 0 for line in lines[1:])
    assert all(float(line.split(",")[2]) >= 0 for line in lines[1:])
    argv = [*count_argv("-", work, "--checkpoint-every", "7"), *post]
    argv[argv.index("--horizon") + 1] = "300"
    for n in (100, 211):  # the input ends early: each run resumes and continues
        assert run_stdin(monkeypatch, argv, "".join(rows[: n + 1])) == 0
        assert (work / "out.csv").read_text() == "".join(lines[: n + 1])
    # killed after saving the checkpoint of step 217 but while writing its lines
    assert run_stdin(monkeypatch, argv, "".join(rows[:218])) == 0
    (work / "out.csv").write_text("".join(lines[:213]) + lines[213][:6])
    assert run_stdin(monkeypatch, argv, text) == 0
    assert (work / "out.csv").read_text() == reference
    # the options shaping the lines are part of the checkpoint: changing them is refused
    capsys.readouterr()
    assert run_stdin(monkeypatch, [a for a in argv if a != "--round"], text) == 2
    assert "refusing to continue with different options" in stderr(capsys)
    relabelled = text.replace("d5,", "e5,")
    assert run_stdin(monkeypatch, argv, relabelled) == 2
    assert "the first 300 input rows differ from those checkpoint" in stderr(capsys)
    assert (work / "out.csv").read_text() == reference


# -- refusals -----------------------------------------------------------------------------
def test_refusals(
    work: Path, reference: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = (work / "data.csv").read_text().splitlines(keepends=True)
    argv = count_argv("-", work, "--checkpoint-every", "1")
    assert run_stdin(monkeypatch, argv, "".join(rows[:501])) == 0
    capsys.readouterr()
    out_before = (work / "out.csv").read_text()
    ck_before = (work / "ck").read_bytes()

    def refused(args: list[str], message: str, stdin: str | None = None) -> None:
        code = main(args) if stdin is None else run_stdin(monkeypatch, args, stdin)
        assert code == 2
        assert message in stderr(capsys)
        assert (work / "out.csv").read_text() == out_before
        assert (work / "ck").read_bytes() == ck_before

    changed = [*rows[:100], "5\n" if rows[100] != "5\n" else "4\n", *rows[101:]]
    refused(argv, "the first 500 input rows differ from those checkpoint", "".join(changed))
    refused(argv, "the input has 300 rows, but checkpoint", "".join(rows[:301]))
    binary = [*argv, "--mechanism", "binary"]
    refused(binary, "it holds a KaryTree stream, expected a BinaryTree", "".join(rows))
    eps = [a if a != "1" else "2" for a in argv]
    refused(eps, "epsilon: saved 1.0, expected 2.0", "".join(rows))
    seed = [a if a != "7" else "8" for a in argv]
    refused(seed, "was made with {'column': None, 'seed': 7}", "".join(rows))
    refused([*argv[:-2], "--horizon", "3000"], "horizon: saved 2000, expected 3000", "".join(rows))
    no_out = [a for a in argv if a not in ("--output", str(work / "out.csv"))]
    refused(no_out, "--checkpoint needs --output FILE", "".join(rows))
    refused([*argv, "--checkpoint-every", "0"], "--checkpoint-every must be >= 1, got 0", "")
    plain = [a for a in argv if a not in ("--checkpoint", str(work / "ck"))]
    refused([*plain, "--checkpoint-every", "5"], "--checkpoint-every needs --checkpoint FILE", "")
    # Holding the lock: another process is using the checkpoint.
    with open(str(work / "ck") + ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        refused(argv, "is in use by another process", "".join(rows))
    # Output lines the checkpoint does not hold are gone: refuse rather than guess.
    lines = out_before.splitlines(keepends=True)
    (work / "out.csv").write_text("".join(lines[:-3]))
    out_before = (work / "out.csv").read_text()
    refused(argv, "lines 498..499 are lost and cannot be recomputed", "".join(rows))
    # A different run's output.
    (work / "out.csv").write_text("".join(lines[:-1]) + "500,1.5,2.0\n")
    out_before = (work / "out.csv").read_text()
    refused(argv, "the line of step 500 differs from the checkpoint's", "".join(rows))
    # No checkpoint, but the output already holds released lines.
    (work / "ck").unlink()
    ck_before = b""
    code = run_stdin(monkeypatch, argv, "".join(rows))
    assert code == 2 and "already holds data but checkpoint" in stderr(capsys)
    assert (work / "out.csv").read_text() == out_before


def test_a_growing_file_continues_with_an_explicit_horizon(
    work: Path, reference: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = work / "data.csv"
    rows = src.read_text().splitlines(keepends=True)
    src.write_text("".join(rows[:1001]))
    argv = count_argv(str(src), work, "--horizon", str(N))
    assert main(argv) == 0  # input ends at step 1000 of 2000
    src.write_text("".join(rows))
    assert main(argv) == 0  # continues at step 1001
    assert (work / "out.csv").read_text() == reference
    (work / "out.csv").unlink()
    (work / "ck").unlink()
    src.write_text("".join(rows[:1001]))
    assert main(count_argv(str(src), work)) == 0
    src.write_text("".join(rows))
    assert main(count_argv(str(src), work)) == 2
    err = stderr(capsys)
    assert "horizon: saved 1000, expected 2000" in err
    assert "a file that grows needs the same explicit --horizon in every run" in err


def test_a_library_checkpoint_is_not_a_cli_checkpoint(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_data(work, 50)
    s = KaryTree(50, epsilon=1.0, noise="discrete-laplace", rng=7).stream()  # the CLI's default
    s.update(1)
    save_stream(s, work / "ck")
    assert main(count_argv(str(src), work)) == 2
    assert "was not written by dpcount count --checkpoint" in stderr(capsys)


# -- SIGKILL --------------------------------------------------------------------------------
DRIVER = r"""
import os, signal, sys
import dpcount._cli._durable as durable
import dpcount.durable.atomic as atomic
mode, k, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
calls = [0]
def die():
    os.kill(os.getpid(), signal.SIGKILL)
if mode in ("after-save", "mid-output"):
    deliver = durable._deliver
    def patched(out, lines):
        calls[0] += 1
        if calls[0] == k:
            if mode == "mid-output":
                text = "".join(lines)
                out.write(text[: len(text) // 2 + 3])
                out.flush()
            die()
        deliver(out, lines)
    durable._deliver = patched
else:
    write = atomic.write_atomic
    def patched(path, pieces):
        calls[0] += 1
        if calls[0] == k:
            data = b"".join(pieces)
            folder, name = os.path.split(os.path.abspath(os.fspath(path)))
            with open(os.path.join(folder, "." + name + ".crash123.tmp"), "wb") as fh:
                fh.write(data if mode == "before-rename" else data[: len(data) // 2])
                fh.flush()
                os.fsync(fh.fileno())
            die()
        write(path, pieces)
    atomic.write_atomic = patched
from dpcount.cli import main
sys.exit(main(argv))
"""


def killed_inside(work: Path, mode: str, k: int, argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, mode, str(k), *argv],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


@pytest.mark.parametrize(
    ("mode", "k", "every"),
    [
        ("mid-checkpoint", 40, 1),
        pytest.param("before-rename", 41, 3, marks=pytest.mark.slow),
        pytest.param("after-save", 42, 1, marks=pytest.mark.slow),
        ("mid-output", 43, 5),
    ],
)
def test_killed_at_each_point_of_the_protocol(
    work: Path, reference: str, mode: str, k: int, every: int
) -> None:
    argv = count_argv(str(work / "data.csv"), work, "--checkpoint-every", str(every))
    killed_inside(work, mode, k, argv)
    step = load_stream(work / "ck").step
    # The checkpoint being written when killed is lost (mid write / before rename):
    # the run restarts from the one before; otherwise from the one just written.
    assert step == every * (k - 1 if mode in ("mid-checkpoint", "before-rename") else k)
    if mode in ("mid-checkpoint", "before-rename"):
        assert (work / ".ck.crash123.tmp").exists()  # the unfinished write is left over
    out = (work / "out.csv").read_text()
    if mode == "mid-output":
        assert not out.endswith("\n")  # a partial line
    assert main(argv) == 0
    assert (work / "out.csv").read_text() == reference
    assert not (work / ".ck.crash123.tmp").exists()


def test_killed_mid_output_with_time_column_round_and_clamp(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL while writing labelled, post-processed lines (one with a quoted label):
    the restart cuts the partial line and completes the output to the lines of a plain
    live run with the same seed."""
    values = np.random.default_rng(4).integers(0, 3, size=120)
    labels = [f'"d,{i}"' if i == 33 else f"d{i}" for i in range(1, 121)]
    text = "day,x\n" + "".join(f"{d},{v}\n" for d, v in zip(labels, values, strict=True))
    post = ["--column", "x", "--time-column", "day", "--round", "--clamp", "--noise", "laplace"]
    plain = ["count", "-", *OPTIONS, "--horizon", "120", *post, "--output", str(work / "p.csv")]
    assert run_stdin(monkeypatch, plain, text) == 0
    reference = (work / "p.csv").read_text()
    assert '\n33,"d,33",' in reference
    src = work / "days.csv"
    src.write_text(text)
    argv = count_argv(str(src), work, "--checkpoint-every", "5", *post)
    killed_inside(work, "mid-output", 7, argv)
    assert not (work / "out.csv").read_text().endswith("\n")  # a partial line
    assert main(argv) == 0
    assert (work / "out.csv").read_text() == reference


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Wait until ``path`` holds at least n complete lines (header included)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.005)
    raise AssertionError(f"{path} did not reach {n} lines")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kills", "every"),
    [([1, 613], 1), ([300], 7)],
)
def test_sigkill_through_a_pipe_then_restart(
    work: Path, reference: str, kills: list[int], every: int
) -> None:
    """``python -m dpcount count - --checkpoint`` fed through a pipe, killed with SIGKILL
    after k rows; the producer re-sends from the start each time."""
    rows = (work / "data.csv").read_text().splitlines(keepends=True)
    argv = count_argv("-", work, "--checkpoint-every", str(every))
    for k in kills:
        with subprocess.Popen(
            [sys.executable, "-m", "dpcount", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        ) as proc:
            assert proc.stdin is not None
            proc.stdin.write("".join(rows[: k + 1]).encode())
            proc.stdin.flush()
            # Released lines appear once their checkpoint is durable: every `every` rows.
            wait_for_lines(work / "out.csv", 1 + k - k % every, proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert load_stream(work / "ck").step == k - k % every
    final = subprocess.run(
        [sys.executable, "-m", "dpcount", *argv],
        input="".join(rows).encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert final.returncode == 0, final.stderr.decode()
    assert (work / "out.csv").read_text() == reference


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_sigkill_at_a_random_moment_repeatedly(work: Path, reference: str, seed: int) -> None:
    """File input, killed at random moments (anywhere, including mid-write) until done."""
    rng = np.random.default_rng(seed)
    argv = count_argv(str(work / "data.csv"), work, "--checkpoint-every", str(1 + seed))
    for _ in range(3):
        at = int(rng.integers(1, N // 3))
        out = work / "out.csv"
        with subprocess.Popen(
            [sys.executable, "-m", "dpcount", *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as proc:
            end = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < end:
                if out.exists() and out.read_bytes().count(b"\n") >= at:
                    break
                time.sleep(0.001)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    assert main(argv) == 0
    assert (work / "out.csv").read_text() == reference


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mid-checkpoint", "before-rename", "after-save", "mid-output"])
@pytest.mark.parametrize("k", [1, 2, 222, 223])
def test_killed_at_each_point_many_steps(work: Path, reference: str, mode: str, k: int) -> None:
    argv = count_argv(str(work / "data.csv"), work, "--checkpoint-every", "9")
    killed_inside(work, mode, k, argv)
    # Killed in the first checkpoint write: no checkpoint, the output holds the header
    # only, and the run starts afresh (nothing was released).
    step = load_stream(work / "ck").step if (work / "ck").exists() else 0
    if -(-(N - step) // 9) >= 2:  # commits left in the resumed run
        killed_inside(work, mode, 2, argv)  # and again, in the resumed run
    assert main(argv) == 0
    assert (work / "out.csv").read_text() == reference


def test_an_older_copy_of_the_checkpoint_is_not_resumed_twice(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Finding 9: resuming one saved state twice would add its noise to two different
    continuations. Put back after the stream moved on, the older copy is refused
    (the output holds lines past its step), with the output and checkpoint untouched."""
    src = work / "data.csv"
    rows = src.read_text().splitlines(keepends=True)
    src.write_text("".join(rows[:301]))
    argv = count_argv(str(src), work, "--horizon", str(N), "--checkpoint-every", "1")
    assert main(argv) == 0  # 300 steps released
    shutil.copy(work / "ck", work / "ck-300")
    src.write_text("".join(rows))
    assert main([*argv, "--checkpoint-every", "500"]) == 0  # continues to step 2000
    changed = rows[:301] + [f"{int(r) + 1}\n" for r in rows[301:]]
    src.write_text("".join(changed))  # other data after step 300
    shutil.copy(work / "ck-300", work / "ck")
    out_before, ck_before = (work / "out.csv").read_bytes(), (work / "ck").read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    err = stderr(capsys)
    assert "ends at step 2000, but checkpoint holds the lines of steps 300..300" in err
    assert "the output has lines the checkpoint never released" in err
    assert (work / "out.csv").read_bytes() == out_before
    assert (work / "ck").read_bytes() == ck_before


def test_checkpoint_runs_and_resumes_compute_the_std_step_by_step(
    work: Path, reference: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 8: --checkpoint never builds the horizon-long variance array, and a
    resumed run continues the std column at the checkpoint's step."""
    from dpcount.counting import base

    def refuse(self: object) -> None:
        raise AssertionError("the CLI computed all horizon variances")

    monkeypatch.setattr(base.CountingMechanism, "variances", refuse)
    monkeypatch.setattr(KaryTree, "noise_coefficients", refuse)
    rows = (work / "data.csv").read_text().splitlines(keepends=True)
    argv = count_argv("-", work, "--checkpoint-every", "5")
    for n in (1, 999, N):
        assert run_stdin(monkeypatch, argv, "".join(rows[: n + 1])) == 0
    assert (work / "out.csv").read_text() == reference
