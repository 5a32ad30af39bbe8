"""``canal check`` against real MariaDB servers and ``canal ha status`` / ``canal position`` against ZooKeeper."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from canal.cli import main
from canal.client import ClientIdentity
from canal.ha import ClusterRegistration, ServerRunningMonitor
from canal.meta import ZooKeeperMetaManager
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory, ZooKeeperChroot

pytestmark = pytest.mark.integration

ADDRESS = "10.1.2.3:11111"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def by_check(lines: list[str]) -> dict[str, str]:
    """{check name: its line}."""
    out = {}
    for line in lines:
        status, rest = line.split(" ", 1)
        assert status in ("OK", "FAIL", "WARN", "SKIP"), line
        out[rest.strip().split(":", 1)[0]] = line
    return out


# -- check -----------------------------------------------------------------------------------------------------------


def test_check_passes_on_a_capture_ready_server(mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", "--address", mariadb.address, "--user", mariadb.user, "--password",
                         mariadb.password)  # fmt: skip
    checks = by_check(out)
    assert code == 0, out
    for name in ("connect", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
                 "grant REPLICATION SLAVE", "grant BINLOG MONITOR", "grant SELECT"):  # fmt: skip
        assert checks[name].startswith("OK "), checks[name]
    assert checks["tls"] == "OK   tls: not encrypted (sslMode PREFERRED)"  # the session server offers no TLS
    assert checks["snapshot"] == "OK   snapshot: chunks placed at the consistent snapshot's binlog position (no writes)"
    assert mariadb.password not in "\n".join(out) + err


def test_check_names_the_fix_on_a_statement_binlog(
    mariadb_factory: MariaDBFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = mariadb_factory(extra_args=["--binlog-format=STATEMENT", "--binlog-row-metadata=MINIMAL"])
    monkeypatch.setenv("CANAL_PASSWORD", server.password)
    code, out, err = run(capsys, "check", "--address", server.address, "--user", server.user)
    checks = by_check(out)
    assert code == 1
    assert checks["binlog_format"].startswith("FAIL binlog_format: STATEMENT, must be ROW")
    assert "SET GLOBAL binlog_format = 'ROW';" in checks["binlog_format"]
    assert "my.cnf [mysqld]: binlog_format = ROW" in checks["binlog_format"]
    # any binlog_row_metadata works: below FULL the schema history names the rows
    assert (
        checks["binlog_row_metadata"] == "OK   binlog_row_metadata: MINIMAL: column names come from the schema history"
    )
    assert checks["binlog_row_image"].startswith("OK")
    assert "1 of " in err
    assert server.password not in "\n".join(out) + err


def test_check_names_missing_grants(mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    user, password = "weak_" + mariadb.database[-8:], "weak-pass-123"
    mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    try:
        mariadb.execute(f"GRANT SELECT ON `{mariadb.database}`.* TO '{user}'@'%'")
        code, out, _err = run(capsys, "check", "--address", mariadb.address, "--user", user, "--password", password)
        checks = by_check(out)
        assert code == 1
        assert f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'%';" in checks["grant REPLICATION SLAVE"]
        assert f"GRANT BINLOG MONITOR ON *.* TO '{user}'@'%';" in checks["grant BINLOG MONITOR"]
        assert checks["grant SELECT"].startswith("OK")  # SELECT on the test database only is reported, not failed
        assert password not in "\n".join(out)
    finally:
        mariadb.execute(f"DROP USER '{user}'@'%'")


def test_check_wrong_password(mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = "definitely-wrong-secret"
    code, out, err = run(capsys, "check", "--address", mariadb.address, "--user", mariadb.user, "--password", wrong)
    assert code == 1
    assert out[0].startswith("FAIL connect:") and "1045" in out[0] and "check the user and password" in out[0]
    assert wrong not in "\n".join(out) + err


def test_check_an_expired_password(mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    # MariaDB lets the login in and refuses every statement (1820): check stopped with an error, no FAIL line
    user = f"exp_{mariadb.database[-8:]}"
    mariadb.server.execute("CREATE USER %s@'%%' IDENTIFIED BY 'exp-pw' PASSWORD EXPIRE", (user,))
    try:
        code, out, err = run(capsys, "check", "--address", mariadb.address, "--user", user, "--password", "exp-pw")
    finally:
        mariadb.server.execute("DROP USER %s@'%%'", (user,))
    assert code == 1
    assert out[0].startswith("FAIL connect:") and "password has expired (errno 1820)" in out[0], out
    assert "ALTER USER CURRENT_USER()" in out[0] and "exp-pw" not in "\n".join(out) + err


def test_check_a_failure_after_the_login_is_a_clear_error(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a query refused after a successful login used to escape as a pymysql traceback
    user = f"lim_{mariadb.database[-8:]}"
    mariadb.server.execute("CREATE USER %s@'%%' IDENTIFIED BY 'lim-pw' WITH MAX_QUERIES_PER_HOUR 2", (user,))
    monkeypatch.setenv("CANAL_PASSWORD", "lim-pw")
    try:
        code, _out, err = run(capsys, "check", "--address", mariadb.address, "--user", user)
    finally:
        mariadb.server.execute("DROP USER %s@'%%'", (user,))
    assert code == 2
    assert f"canal check: error: reading the settings of {mariadb.address} failed: (1226," in err


# -- ha status and position in ZooKeeper -----------------------------------------------------------------------------


@pytest.fixture
def running(zookeeper: ZooKeeperChroot) -> Any:
    """A destination 'example' run by ADDRESS (a ServerRunningMonitor), registered, with a cursor for client 1001."""
    zk: KazooClient = zookeeper.client()
    active = threading.Event()
    monitor = ServerRunningMonitor(zk, "example", ADDRESS, on_active=lambda token: active.set(),
                                   on_standby=lambda reason: active.clear(), delay_s=0)  # fmt: skip
    registration = ClusterRegistration(zk, ADDRESS, ["example"])
    monitor.start()
    registration.start()
    assert monitor.wait_active(10)
    with ZooKeeperMetaManager(zk) as meta:
        client = ClientIdentity("example", 1001)
        meta.subscribe(client)
        meta.update_cursor(client, LogPosition(LogIdentity("10.0.0.9:3306"), EntryPosition("mysql-bin.000007", 1234)))
    yield monitor
    registration.stop()
    monitor.stop()


def test_ha_status(
    zookeeper: ZooKeeperChroot, running: ServerRunningMonitor, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = run(capsys, "ha", "status", "--zk", zookeeper.hosts)
    assert code == 0
    text = "\n".join(out)
    assert out[0] == f"cluster: {ADDRESS}"
    assert "destination example" in out
    assert f"  running: {ADDRESS} " in text and '"active":true' in text
    assert f"  members: {ADDRESS}" in out
    client_line = next(line for line in out if line.startswith("  client 1001"))
    assert '"journalName":"mysql-bin.000007"' in client_line and '"position":1234' in client_line

    code, out, _ = run(capsys, "ha", "status", "--zk", zookeeper.hosts, "--destination", "example", "--json")
    doc = json.loads("\n".join(out))
    (dest,) = doc["destinations"]
    assert dest["running"]["address"] == ADDRESS
    assert dest["clients"][0]["cursor"]["postion"]["position"] == 1234

    running.stop()  # hands the destination over: nobody runs it
    code, out, _ = run(capsys, "ha", "status", "--zk", zookeeper.hosts)
    assert "  running: nobody" in out or "  running: nobody (released)" in out


def test_position_in_zookeeper_refuses_while_running(
    zookeeper: ZooKeeperChroot, running: ServerRunningMonitor, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "position", "show", "--zk", zookeeper.hosts)
    assert code == 0 and json.loads(out[0])["postion"]["position"] == 1234
    args = ("position", "set", "--zk", zookeeper.hosts, "--file", "mysql-bin.000008")
    code, _out, err = run(capsys, *args)
    assert code == 2 and f"running on {ADDRESS}" in err
    code, _out, _ = run(capsys, *args, "--force")
    assert code == 0
    code, out, _ = run(capsys, "position", "show", "--zk", zookeeper.hosts)
    assert json.loads(out[0])["postion"] == {"journalName": "mysql-bin.000008", "position": 4, "included": False}


def test_position_set_refuses_when_the_running_node_cannot_be_read(
    zookeeper: ZooKeeperChroot, capsys: pytest.CaptureFixture[str]
) -> None:
    # a running node this client may not read (another tool's ACL) used to count as "not running"
    zk: KazooClient = zookeeper.client()
    path = "/otter/canal/destinations/example/running"
    zk.ensure_path("/otter/canal/destinations/example")
    zk.add_auth("digest", "other:pw")
    zk.create(path, b'{"address":"10.9.9.9:11111"}', acl=[make_digest_acl("other", "pw", all=True)])
    args = ("position", "set", "--zk", zookeeper.hosts, "--file", "mysql-bin.000008")
    code, _out, err = run(capsys, *args)
    assert code == 2 and "NoAuthError" in err and "--force" in err
    assert not zk.exists("/otter/canal/destinations/example/1001")  # no cursor was written
    code, _out, _ = run(capsys, *args, "--force")
    assert code == 0 and zk.exists("/otter/canal/destinations/example/1001/cursor")


def test_ha_status_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "ha", "status", "--zk", "127.0.0.1:1", "--timeout", "0.5")
    assert code == 2 and "cannot connect to ZooKeeper" in err


# -- tail against a real server --------------------------------------------------------------------------------------


def test_tail_real_server(mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))")
    file, pos = mariadb.server.execute("SHOW MASTER STATUS")[0][:2]
    mariadb.execute("INSERT INTO orders VALUES (1, 9.99, 'a'), (2, 1.50, NULL)")
    mariadb.execute("UPDATE orders SET amount = 5 WHERE id = 1")
    code, out, err = run(
        capsys, "tail", "--address", mariadb.address, "--user", mariadb.user, "--password", mariadb.password,
        "--from", f"{file}:{pos}", "--filter", rf"{mariadb.database}\..*", "--limit", "3", "--timeout", "20",
    )  # fmt: skip
    assert code == 0, err
    rows = [line.split(" ", 2)[2] for line in out]
    table = f"{mariadb.database}.orders"
    assert rows == [
        f"INSERT {table} id=1 amount=9.99 note='a'",
        f"INSERT {table} id=2 amount=1.50 note=NULL",
        f"UPDATE {table} id=1 amount: 9.99 -> 5.00",
    ]
    assert mariadb.password not in err


# -- snapshot against a real server ----------------------------------------------------------------------------------


def test_snapshot_prints_a_copy_with_a_progress_bar_and_resumes(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2))")
    mariadb.execute("INSERT INTO items SELECT seq, CONCAT('n', seq), seq / 4 FROM seq_1_to_2500")
    mariadb.execute("CREATE TABLE tags (id INT PRIMARY KEY, tag VARCHAR(10))")
    mariadb.execute("INSERT INTO tags VALUES (1, 'red'), (2, NULL)")
    db = mariadb.database
    source = ("--address", mariadb.address, "--user", mariadb.user, "--password", mariadb.password)
    code, out, err = run(
        capsys, "snapshot", *source, "--tables", f"{db}.items,{db}.tags", "--json", "--chunk-rows", "400",
        "--progress", "--meta-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    rows = [json.loads(line) for line in out]
    assert {r["type"] for r in rows} == {"SNAPSHOT"}
    items = {r["after"]["id"]: r["after"] for r in rows if r["table"] == "items"}
    assert len(items) == 2500 and items[10] == {"id": 10, "name": "n10", "price": "2.50"}
    assert [r["after"] for r in rows if r["table"] == "tags"] == [{"id": 1, "tag": "red"}, {"id": 2, "tag": None}]
    bar = err.strip().split("\r")[-1]
    assert "100%" in bar and "2,502" in bar and "2/2 tables" in bar, err
    assert mariadb.password not in err

    # the copy is complete: run again with the same meta dir, nothing is copied twice
    code, out, err = run(
        capsys, "snapshot", *source, "--tables", f"{db}.items", "--meta-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and out == [] and "already complete" in err

    # a table that does not exist is a clear error, and nothing is printed
    code, out, err = run(capsys, "snapshot", *source, "--tables", f"{db}.nope")
    assert code == 2 and out == [] and f"{db}.nope" in err, err


def test_check_warns_when_sessions_may_log_statements(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str]
) -> None:
    """An account with SUPER may SET SESSION binlog_format = STATEMENT: the mirror would stop at its DML. Such an
    account is named in a warning (here the checking account itself, which sees its own privileges); the check still
    passes. The capture user (it may read the mysql schema) sees every such account: root's too."""
    user, password = f"super_{mariadb.database[-8:]}", "pw-Super1"
    mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    try:
        mariadb.execute(f"GRANT SUPER, REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO '{user}'@'%'")
        code, out, _err = run(capsys, "check", "--address", mariadb.address, "--user", user, "--password", password)
        assert code == 0, out
        line = by_check(out)["session_binlog_format"]
        assert line.startswith("WARN session_binlog_format: "), line
        assert f"'{user}'@'%'" in line and "UnmodeledStatementError" in line and "-- fix: " in line
    finally:
        mariadb.execute(f"DROP USER '{user}'@'%'")
    code, out, _err = run(capsys, "check", "--address", mariadb.address, "--user", mariadb.user, "--password",
                          mariadb.password)  # fmt: skip
    line = by_check(out)["session_binlog_format"]
    assert line.startswith("WARN ") and "'root'@'localhost'" in line and user not in line, line
