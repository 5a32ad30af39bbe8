"""What no retry fixes stops a destination at once, with a typed error its consumer gets; what a retry may fix (a
server restarting) is retried, and the metrics say so. Real MariaDB servers, the default ``RetryConfig``.

At start: a wrong password, a host that does not resolve, a user without REPLICATION SLAVE or BINLOG MONITOR, a
server whose binlog_format is STATEMENT or MIXED, or whose binlog_row_image is MINIMAL. While running: a password
rotated, a grant revoked, binlog_format changed -- the open dump goes on, and the next reconnect stops the
destination with the reason.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from canal.config import InstanceConfig, MasterConfig, RetryConfig
from canal.errors import (
    MissingPrivilegeError,
    NotRunningError,
    ServerNotReadyError,
    SourceAccessDeniedError,
    SourceHostUnknownError,
    SourceUnreachableError,
)
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration


def _wait(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _stop_reason(instance: Instance) -> BaseException:
    """The typed error a consumer's get raises, within seconds: a get waiting for a full batch ends when the parser
    stops (it waited its whole timeout, and then returned nothing, before)."""
    began = time.monotonic()
    with pytest.raises(NotRunningError) as raised:
        instance.get_without_ack(100, timeout=20.0)
    assert time.monotonic() - began < 5.0
    cause = raised.value.__cause__
    assert cause is not None and str(cause) in str(raised.value)
    return cause


def _assert_failed(instance: Instance, error: BaseException, *, retried: bool = False) -> None:
    m = instance.metrics()
    assert (m.running, m.state, m.connected, m.errors) == (False, "failed", False, 1)
    assert m.last_error_type == type(error).__name__
    if not retried:
        assert instance.parser.reconnects == 0  # the first attempt's answer was final: nothing retried


@attrs.frozen
class _User:
    name: str
    password: str


@pytest.fixture
def make_user(mariadb: MariaDBDatabase) -> Iterator[Callable[[str], _User]]:
    """Users on the session server with the grants given (dropped after the test)."""
    made: list[str] = []

    def make(grants: str) -> _User:
        user = _User(f"u{secrets.token_hex(5)}", secrets.token_hex(8))
        mariadb.server.execute(f"CREATE USER '{user.name}'@'%' IDENTIFIED BY '{user.password}'")
        made.append(user.name)
        mariadb.server.execute(f"GRANT {grants} ON *.* TO '{user.name}'@'%'")
        return user

    yield make
    for name in made:
        mariadb.server.execute(f"DROP USER IF EXISTS '{name}'@'%'")


def _config(master: MasterConfig, database: str = "d") -> InstanceConfig:
    return InstanceConfig(destination=f"r{secrets.token_hex(3)}", master=master, filter_regex=rf"{database}\..*")


@pytest.mark.parametrize("case", ["wrong password", "unknown host", "no REPLICATION SLAVE", "no BINLOG MONITOR"])
def test_what_no_retry_fixes_stops_the_destination_at_its_first_connection(
    mariadb: MariaDBDatabase, make_user: Callable[[str], _User], case: str
) -> None:
    master = mariadb.master()
    wrong = "wrong-" + secrets.token_hex(6)
    if case == "wrong password":
        master = attrs.evolve(master, password=wrong)
        expected: type[BaseException] = SourceAccessDeniedError
    elif case == "unknown host":
        master = attrs.evolve(master, address="no-such-host.invalid:3306")
        expected = SourceHostUnknownError
    else:
        grants = "SELECT, BINLOG MONITOR" if case == "no REPLICATION SLAVE" else "SELECT, REPLICATION SLAVE"
        user = make_user(grants)
        master = attrs.evolve(master, username=user.name, password=user.password)
        expected = MissingPrivilegeError
    with Instance(_config(master)) as instance:
        error = _stop_reason(instance)
        assert type(error) is expected, error
        _assert_failed(instance, error)
    if case == "wrong password":
        assert getattr(error, "errno", None) == 1045 and wrong not in str(error)
    if case == "no REPLICATION SLAVE":
        assert isinstance(error, MissingPrivilegeError) and error.privilege == "REPLICATION SLAVE"
        assert "GRANT REPLICATION SLAVE ON *.*" in str(error)
    if case == "no BINLOG MONITOR":
        assert isinstance(error, MissingPrivilegeError) and "BINLOG MONITOR" in error.privilege
        assert error.errno == 1227 and "GRANT BINLOG MONITOR ON *.*" in str(error)


def test_an_expired_password_stops_the_destination(mariadb: MariaDBDatabase, make_user: Callable[[str], _User]) -> None:
    # MariaDB logs a user with an expired password in (disconnect_on_expired_password=OFF, its default) and refuses
    # every statement with 1820: the side connection's first query raised pymysql's OperationalError, retried for
    # ever ("connecting", last_error_type OperationalError)
    user = make_user("SELECT, REPLICATION SLAVE, BINLOG MONITOR")
    mariadb.server.execute(f"ALTER USER '{user.name}'@'%' PASSWORD EXPIRE")
    master = attrs.evolve(mariadb.master(), username=user.name, password=user.password)
    with Instance(_config(master)) as instance:
        error = _stop_reason(instance)
        assert type(error) is SourceAccessDeniedError, error
        _assert_failed(instance, error)
    assert getattr(error, "errno", None) == 1820
    assert "expired" in str(error) and user.password not in str(error)


def _kill_dumps(server: MariaDBServer, user: str) -> None:
    """End the binlog dumps of ``user`` on the server (as a network drop would): the parser reconnects."""
    killed = 0
    for row in server.execute("SHOW PROCESSLIST"):
        if row[4] == "Binlog Dump" and row[1] == user:
            server.execute(f"KILL {int(row[0])}")
            killed += 1
    assert killed >= 1


def _rows(instance: Instance, want: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(got) < want and time.monotonic() < deadline:
        msg = instance.get(100, timeout=0.5)
        got += [row.after_dict() for e in msg.entries for row in e.iter_rows()]
    return got


@pytest.mark.parametrize("change", ["password rotated", "grant revoked"])
def test_a_login_or_grant_changed_while_running_stops_the_destination_at_its_next_reconnect(
    mariadb: MariaDBDatabase, make_user: Callable[[str], _User], change: str
) -> None:
    # the open dump goes on (the server checks a password at login and a grant at the dump's request), and the
    # reconnect after a dropped connection gets the server's answer, which no retry changes
    user = make_user("SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR")
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    master = attrs.evolve(mariadb.master(), username=user.name, password=user.password)
    with Instance(_config(master, mariadb.database)) as instance:
        mariadb.execute("INSERT INTO t VALUES (1)")
        assert _rows(instance, 1) == [{"id": 1}]
        if change == "password rotated":
            mariadb.server.execute(f"ALTER USER '{user.name}'@'%' IDENTIFIED BY 'rotated-{user.password}'")
        else:
            mariadb.server.execute(f"REVOKE REPLICATION SLAVE ON *.* FROM '{user.name}'@'%'")
        mariadb.execute("INSERT INTO t VALUES (2)")
        assert _rows(instance, 1) == [{"id": 2}]  # still streaming
        assert instance.metrics().connected
        _kill_dumps(mariadb.server, user.name)
        error = _stop_reason(instance)
        expected = SourceAccessDeniedError if change == "password rotated" else MissingPrivilegeError
        assert type(error) is expected, error
        _assert_failed(instance, error, retried=True)
        assert instance.parser.reconnects == 1  # one reconnect, refused for good


def test_a_server_not_set_up_for_capture_stops_the_destination(mariadb_factory: MariaDBFactory) -> None:
    server = mariadb_factory(extra_args=["--binlog-format=MIXED", "--binlog-row-image=MINIMAL"])
    master = MasterConfig(address=server.address, username=server.user, password=server.password)
    for setting, fix in (
        (None, "binlog_format=MIXED"),  # the server's defaults
        ("binlog_format='STATEMENT'", "binlog_format=STATEMENT"),
        ("binlog_format='ROW'", "binlog_row_image=MINIMAL"),
    ):
        if setting is not None:
            server.execute(f"SET GLOBAL {setting}")
        with Instance(_config(master)) as instance:
            error = _stop_reason(instance)
            assert type(error) is ServerNotReadyError and fix in str(error) and "SET GLOBAL" in str(error)
            _assert_failed(instance, error)
    # binlog_format changed while a destination runs: the open dump goes on, its next reconnect stops it
    server.execute("SET GLOBAL binlog_row_image='FULL'")
    with Instance(_config(master)) as instance:
        _wait("the dump to connect", lambda: instance.metrics().connected)
        server.execute("SET GLOBAL binlog_format='MIXED'")
        _kill_dumps(server, server.user)
        error = _stop_reason(instance)
        assert type(error) is ServerNotReadyError and "binlog_format=MIXED" in str(error)
        _assert_failed(instance, error, retried=True)


def test_a_server_restarting_is_retried_and_the_metrics_show_it(mariadb_factory: MariaDBFactory) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
    status = server.execute("SHOW MASTER STATUS")[0]
    master = MasterConfig(
        address=server.address,
        username=server.user,
        password=server.password,
        journal_name=str(status[0]),
        position=int(status[1]),
    )
    # heartbeats every 0.2 s: the acked lag of a caught-up destination stays small while the master is read
    config = attrs.evolve(_config(master), retry=RetryConfig(heartbeat_period_s=0.2))
    with Instance(config) as instance:
        server.execute("INSERT INTO d.t VALUES (1)")
        assert _rows(instance, 1) == [{"id": 1}]
        _wait("a heartbeat", lambda: (instance.metrics().ack_lag_ms or 10**9) < 2000)
        m = instance.metrics()
        assert (m.state, m.running, m.connected) == ("streaming", True, True)
        server.kill()  # a crash: connections are refused until it runs again, on the same port and data
        down = time.monotonic()
        _wait("the parser to see the server gone", lambda: instance.metrics().state == "connecting")
        assert instance.get(100, timeout=0.2).id == -1  # nothing to hand out, and no error: it retries
        _wait("two seconds of the server down", lambda: time.monotonic() - down > 2.0)
        m = instance.metrics()
        assert (m.running, m.connected, instance.parser.error) == (True, False, None)
        assert m.last_error_type is not None
        assert m.last_error_type == type(instance.parser.last_error).__name__
        assert isinstance(instance.parser.last_error, SourceUnreachableError)  # connection refused: retried
        assert m.ack_lag_ms is not None and m.ack_lag_ms >= 2000  # the master could not be read for 2 s
        server.restart()
        _wait("the dump to come back", lambda: instance.metrics().connected, timeout=60)
        server.execute("INSERT INTO d.t VALUES (2)")
        assert _rows(instance, 1) == [{"id": 2}]
        m = instance.metrics()
        assert (m.state, m.errors) == ("streaming", 0) and m.reconnects >= 1
