"""The parser's retry policy on the fake binlog: what no retry fixes stops the destination, and a consumer waiting in
``get`` learns of it at once; what a retry may fix is retried, visibly (``connected``, ``state``,
``last_error_type``). The same answers from a real MariaDB: tests/test_source_refusals_mariadb.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from decimal import Decimal

import pytest

from canal.config import InstanceConfig, MasterConfig, RetryConfig
from canal.errors import (
    MissingPrivilegeError,
    NotRunningError,
    ServerNotReadyError,
    SourceAccessDeniedError,
    SourceError,
    SourceHostUnknownError,
    SourceUnreachableError,
    TlsError,
)
from canal.instance import Instance
from canal.parse.retry import is_permanent
from canal.parse.source import BinlogSource
from canal.testing.fake import FakeMysql


def _wait(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _rows(instance: Instance) -> list[dict[str, object]]:
    """The rows of the next batch that holds any (the CREATE TABLE before them has none)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        msg = instance.get(10, timeout=1.0, linger=0.05)
        rows = [r.after_dict() for e in msg.entries for r in e.iter_rows()]
        if rows:
            return rows
    return []


def _config(fake: FakeMysql, **kwargs: object) -> InstanceConfig:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    return InstanceConfig(destination="retry", master=master, **kwargs)  # type: ignore[arg-type]


def test_which_failures_are_permanent() -> None:
    assert is_permanent(SourceAccessDeniedError("denied", errno=1045), connected_before=True)
    assert is_permanent(MissingPrivilegeError("grant", privilege="REPLICATION SLAVE"), connected_before=True)
    assert is_permanent(ServerNotReadyError("binlog_format=STATEMENT"), connected_before=True)
    assert is_permanent(SourceHostUnknownError("no such host"), connected_before=False)
    assert is_permanent(TlsError("offers no TLS", errno=2026), connected_before=False)
    assert is_permanent(TlsError("did not verify"), connected_before=True)  # a certificate rotated meanwhile
    # a name that resolved before (a DNS record gone while its server restarts), and network errors: retried
    assert not is_permanent(SourceHostUnknownError("no such host"), connected_before=True)
    assert not is_permanent(SourceUnreachableError("refused", errno=2003), connected_before=False)
    assert not is_permanent(SourceError("lost", errno=2013), connected_before=True)


@pytest.mark.parametrize("errno", [1045, 1227])
def test_a_get_blocked_for_a_full_batch_raises_the_refusal_at_once(fake_mysql: FakeMysql, errno: int) -> None:
    fake_mysql.refuse(errno=errno, times=100)
    raised: list[BaseException] = []
    with Instance(_config(fake_mysql)) as instance:

        def consume() -> None:
            try:
                instance.get(100, timeout=-1)  # waits for a full batch: nothing will come
            except BaseException as exc:
                raised.append(exc)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        consumer.join(5)
        assert not consumer.is_alive(), "the get still waits for entries the stopped parser will never put"
        m = instance.metrics()
    assert len(raised) == 1 and isinstance(raised[0], NotRunningError)
    expected = SourceAccessDeniedError if errno == 1045 else MissingPrivilegeError
    assert type(raised[0].__cause__) is expected
    assert (m.state, m.running, m.connected, m.errors, m.reconnects) == ("failed", False, False, 1, 0)
    assert m.last_error_type == expected.__name__
    assert fake_mysql.connect_attempts + fake_mysql.dump_attempts == 1  # no retry


def test_a_refusal_a_get_raised_is_already_counted(fake_mysql: FakeMysql) -> None:
    """The parser thread is held on its "fatal error" log record -- after the error is published, before anything
    after it runs: the get that raised it and the metrics read then agree (once counted the error only after
    publishing it, so a consumer that saw the error could read ``errors == 0``)."""
    fake_mysql.refuse(errno=1045, times=100)
    held, release = threading.Event(), threading.Event()

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "fatal error" in record.getMessage() and threading.current_thread() is not threading.main_thread():
                held.set()
                release.wait(10)

    hold = Hold()
    parser_log = logging.getLogger("canal.parse.parser")
    parser_log.addHandler(hold)
    try:
        with Instance(_config(fake_mysql)) as instance:
            assert held.wait(10), "the parser did not stop on the refusal"
            with pytest.raises(NotRunningError):
                instance.get(10, timeout=0)
            m = instance.metrics()
            release.set()
    finally:
        release.set()
        parser_log.removeHandler(hold)
    assert (m.errors, m.running, m.last_error_type) == (1, False, "SourceAccessDeniedError")


def test_connection_errors_are_retried_and_the_metrics_show_it(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    fake_mysql.down()
    config = _config(fake_mysql, retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.05))
    with Instance(config) as instance:
        _wait("a retried failure", lambda: instance.parser.reconnects >= 3)
        m = instance.metrics()
        assert (m.state, m.running, m.connected, m.errors) == ("connecting", True, False, 0)
        assert m.last_error_type == "SourceUnreachableError" and m.ack_lag_ms is None  # nothing read yet
        assert instance.get(10, timeout=None).id == -1  # nothing, and no error
        fake_mysql.up()
        fake_mysql.insert("shop.t", {"id": 1})
        assert _rows(instance) == [{"id": 1}]
        _wait("connected", lambda: instance.metrics().connected)
        assert instance.metrics().state == "streaming"


class _ForgetsItsName:
    """A source factory whose sources stop resolving the host after the first one opened (a DNS record removed
    while the server restarts), for ``failures`` attempts."""

    def __init__(self, fake: FakeMysql, failures: int) -> None:
        self.fake = fake
        self.failures = failures
        self.opened = 0

    def __call__(self, master: MasterConfig) -> BinlogSource:
        source = self.fake.source()
        if self.opened and self.failures:
            self.failures -= 1

            def refuse() -> None:
                raise SourceHostUnknownError(f"MySQL server {master.address}: the host name does not resolve")

            source.open = refuse  # type: ignore[method-assign]
        self.opened += 1
        return source


def test_a_host_name_that_stops_resolving_after_the_first_connection_is_retried(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    factory = _ForgetsItsName(fake_mysql, failures=3)
    config = _config(fake_mysql, retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.05))
    with Instance(config, source_factory=factory) as instance:
        _wait("connected", lambda: instance.metrics().connected)
        fake_mysql.down()  # the dump drops, and the next attempts find the name gone, three times
        _wait("the name to be missed three times", lambda: factory.failures == 0)
        fake_mysql.up()
        fake_mysql.insert("shop.t", {"id": 1})
        assert _rows(instance) == [{"id": 1}]
        assert instance.parser.error is None and instance.metrics().errors == 0


def test_a_host_name_that_never_resolved_stops_the_destination(fake_mysql: FakeMysql) -> None:
    factory = _ForgetsItsName(fake_mysql, failures=1)
    factory.opened = 1  # the first source already cannot resolve
    with Instance(_config(fake_mysql), source_factory=factory) as instance, pytest.raises(NotRunningError) as raised:
        instance.get(10, timeout=5.0)
    assert type(raised.value.__cause__) is SourceHostUnknownError


def test_the_acked_lag_follows_heartbeats_and_waiting_entries(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v DECIMAL(5,1))")
    config = _config(fake_mysql, retry=RetryConfig(heartbeat_period_s=0.05))
    with Instance(config) as instance:
        _wait("a heartbeat", lambda: instance.metrics().ack_lag_ms is not None)
        fake_mysql.set_clock(time.time() - 600)  # the next change was executed ten minutes ago
        fake_mysql.insert("shop.t", {"id": 1, "v": Decimal(1)})
        _wait("the change in the store", lambda: instance.metrics().delay_put_ms is not None)
        m = instance.metrics()
        # not acked: the lag is the waiting change's age, whatever the heartbeats say
        assert m.ack_lag_ms is not None and m.ack_lag_ms >= 590_000
        assert m.delay_put_ms is not None and m.delay_put_ms >= 590_000
        fake_mysql.set_clock(time.time())
        instance.get(10, timeout=1.0, linger=0.05)  # acked: caught up, as the heartbeats that follow say
        _wait("a heartbeat after the ack", lambda: (instance.metrics().ack_lag_ms or 10**9) < 5_000)
