"""The process's watchdog (canal.parse.watchdog): every parser's read-timeout check at its own tick on one thread,
which ends with the last check; a failing check is said and runs again, and the others go on."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

import pytest

from canal.config import InstanceConfig, MasterConfig
from canal.parse.watchdog import WATCHDOG, Watchdog
from canal.server import EmbeddedServer
from canal.testing import FakeMysql


def _await(what: str, check: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_checks_run_at_their_own_tick_on_one_thread_that_ends_with_the_last() -> None:
    dog = Watchdog("test-watchdog")
    runs: dict[str, list[str]] = {"fast": [], "slow": []}
    fast = dog.watch(0.01, lambda: runs["fast"].append(threading.current_thread().name))
    slow = dog.watch(0.2, lambda: runs["slow"].append(threading.current_thread().name))
    thread = dog.thread
    assert thread is not None and thread.is_alive()
    _await("ten fast checks", lambda: len(runs["fast"]) >= 10)
    # 0.2 s apart, while the fast one ran (at least) ten times 0.01 s apart: a late thread delays both alike
    assert len(runs["slow"]) <= max(1, len(runs["fast"]) // 5)
    assert set(runs["fast"]) == {"test-watchdog"} and set(runs["slow"]) <= {"test-watchdog"}
    dog.unwatch(fast)
    count = len(runs["fast"])
    _await("a slow check", lambda: len(runs["slow"]) >= 2)
    assert len(runs["fast"]) <= count + 1  # withdrawn: at most the one under way
    dog.unwatch(slow)
    thread.join(5)
    assert not thread.is_alive() and dog.thread is None
    again = dog.watch(0.01, lambda: runs["fast"].append("again"))  # a new check starts a new thread
    _await("the new thread's check", lambda: "again" in runs["fast"])
    dog.unwatch(again)


def test_checks_started_at_different_moments_fall_into_step() -> None:
    """A wake runs every check due within a quarter of its tick: 8 checks started 30 ms apart are not 8 wakes a
    tick."""
    dog = Watchdog("test-watchdog")
    runs: list[float] = []
    keys = []
    for _ in range(8):
        keys.append(dog.watch(0.4, lambda: runs.append(time.monotonic())))
        time.sleep(0.03)
    _await("five ticks of checks", lambda: len(runs) >= 48)
    for key in keys:
        dog.unwatch(key)
    late = runs[8:]  # after each check's first run
    wakes = 1 + sum(1 for a, b in itertools.pairwise(late) if b - a > 0.015)
    assert wakes <= len(late) / 2, (wakes, len(late))


def test_a_failing_check_is_said_runs_again_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    dog = Watchdog("test-watchdog")
    failed: list[int] = []
    fine: list[int] = []

    def failing() -> None:
        failed.append(1)
        raise RuntimeError("broken check")

    keys = [dog.watch(0.01, failing), dog.watch(0.01, lambda: fine.append(1))]
    with caplog.at_level(logging.ERROR, logger="canal.parse.watchdog"):
        _await("checks after a failure", lambda: len(failed) >= 3 and len(fine) >= 3)
    for key in keys:
        dog.unwatch(key)
    assert "broken check" in caplog.text


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread it ends says so
def test_a_check_that_ends_its_thread_leaves_the_next_watch_a_thread_of_its_own() -> None:
    dog = Watchdog("test-watchdog")

    def fatal() -> None:
        raise SystemExit("a check ended its thread")

    key = dog.watch(0.01, fatal)
    thread = dog.thread
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive() and dog.thread is None
    dog.unwatch(key)
    runs: list[int] = []
    again = dog.watch(0.01, lambda: runs.append(1))
    _await("the new thread's check", lambda: bool(runs))
    dog.unwatch(again)


@pytest.mark.parametrize("tick", [0, -1.0])
def test_a_tick_must_be_positive(tick: float) -> None:
    dog = Watchdog("test-watchdog")
    with pytest.raises(ValueError, match="tick"):
        dog.watch(tick, lambda: None)
    assert dog.thread is None  # nothing registered, no thread


def test_destinations_of_a_process_share_one_watchdog_thread_that_ends_when_they_stop() -> None:
    fake = FakeMysql(name="one_dog", mariadb=True)
    try:
        fake.execute("CREATE TABLE a.t (id INT PRIMARY KEY)")
        start = fake.master_status()
        master = MasterConfig(address=fake.address, journal_name=start.journal_name, position=start.position)
        before = WATCHDOG.watching  # parsers other tests of this process left running, if any
        server = EmbeddedServer()
        server.start()
        try:
            for i in range(3):
                server.start_destination(InstanceConfig(destination=f"w{i}", master=master, filter_regex=r"a\.t"))
            assert WATCHDOG.watching == before + 3
            watchdogs = [t for t in threading.enumerate() if t.name.startswith("canal-watchdog")]
            assert [t.name for t in watchdogs] == ["canal-watchdog"]
        finally:
            server.stop()
        assert WATCHDOG.watching == before
        if before == 0:
            thread = WATCHDOG.thread
            if thread is not None:
                thread.join(5)
            assert WATCHDOG.thread is None
            assert not [t for t in threading.enumerate() if t.name.startswith("canal-watchdog")]
    finally:
        fake.unregister()
