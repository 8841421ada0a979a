"""The one exactly-once protocol (:mod:`dpcount.durable.once`)."""

from __future__ import annotations

import pytest

from dpcount.durable.once import ExactlyOnce


class _Log:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def begin(self, release: str) -> None:
        self.log.append(f"begin {self.name} {release}")

    def commit(self, release: str) -> None:
        self.log.append(f"commit {self.name} {release}")


def test_journals_begin_in_order_and_commit_in_reverse_around_the_write() -> None:
    log: list[str] = []
    once = ExactlyOnce([_Log("record", log), _Log("mark", log)])
    once.run("1..3", lambda: log.append("write"))
    assert log == [
        "begin record 1..3",
        "begin mark 1..3",
        "write",
        "commit mark 1..3",
        "commit record 1..3",
    ]
    assert once.pending is None
    once.commit()  # nothing begun: nothing recorded
    assert len(log) == 5


def test_a_failed_write_leaves_the_release_pending_and_blocks_another() -> None:
    log: list[str] = []
    once = ExactlyOnce([_Log("mark", log)])

    def crash() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        once.run("4..5", crash)
    assert log == ["begin mark 4..5"] and once.pending == "4..5"
    with pytest.raises(RuntimeError, match="already in progress"):
        once.begin("6..7")
