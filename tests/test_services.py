"""Private MariaDB / ZooKeeper servers (canal.testing.services) and the pytest plugin's fixtures."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pymysql  # type: ignore[import-untyped]
import pytest
from kazoo.client import KazooClient

from canal.errors import ServiceError
from canal.testing import MariaDBServer, ZooKeeperServer
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory, ZooKeeperChroot
from canal.testing.services import process as services

integration = pytest.mark.integration


def _wait_for(predicate: object, timeout: float = 10.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {predicate}"
        time.sleep(0.01)


# -- without servers ------------------------------------------------------------------------------------------------


def test_free_port_is_bindable() -> None:
    port = services.free_port()
    assert 1024 <= port <= 65535
    # outside the ephemeral range, whose ports any outgoing connection may take before the server binds one
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert port < low
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_liveness_comes_from_proc_state_so_zombies_are_dead() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        ticks = services._start_time(child.pid)
        assert ticks is not None
        # R, S or D (a just-exec'd child may be paging in): anything but a zombie or dead.
        assert services.process_state(child.pid) not in (None, "Z", "X", "x")
        assert services._alive(child.pid, ticks)
        assert not services._alive(child.pid, ticks + 1)  # same pid, another process
        os.kill(child.pid, signal.SIGKILL)
        _wait_for(lambda: services.process_state(child.pid) == "Z")
        os.kill(child.pid, 0)  # kill -0 still "succeeds" on the zombie...
        assert not services._alive(child.pid, ticks)  # ...but it is not alive
    finally:
        child.kill()
        child.wait()
    assert services.process_state(child.pid) is None


@pytest.fixture
def empty_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(services, "_SBIN_DIRS", ())


@pytest.mark.usefixtures("empty_path")
def test_missing_mariadbd_names_the_setup_script() -> None:
    server = MariaDBServer()
    with pytest.raises(ServiceError, match=r"'mariadbd'.*scripts/setup\.sh"):
        server.start()
    assert server.workdir is None
    assert server not in services.live_services()


def test_missing_install_db_names_the_setup_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MariaDBServer, "INSTALL_DB", "mariadb-install-db-not-installed")
    with pytest.raises(ServiceError, match=r"mariadb-install-db-not-installed.*scripts/setup\.sh"):
        MariaDBServer().start()


@pytest.mark.usefixtures("empty_path")
def test_missing_java_names_the_setup_script() -> None:
    with pytest.raises(ServiceError, match=r"'java'.*scripts/setup\.sh"):
        ZooKeeperServer().start()


def test_missing_zookeeper_jar_names_the_setup_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ZooKeeperServer, "ZOOKEEPER_JAR", str(tmp_path / "zookeeper.jar"))
    with pytest.raises(ServiceError, match=r"zookeeper\.jar.*scripts/setup\.sh"):
        ZooKeeperServer().start()


def test_repr_hides_passwords() -> None:
    master = MariaDBServer(password="s3cret-capture")
    replica = MariaDBServer(server_id=2, replica_of=master)
    for server in (master, replica):
        text = repr(server)
        assert "MariaDBServer(" in text and f"server_id={server.server_id}" in text
        assert server.password not in text
        assert server.replication_password not in text
    assert "s3cret-capture" not in repr(MariaDBDatabase(server=master, database="d"))


def test_replica_needs_its_own_server_id() -> None:
    with pytest.raises(ValueError, match="own server id"):
        MariaDBServer(server_id=1, replica_of=MariaDBServer(server_id=1))


# -- MariaDB --------------------------------------------------------------------------------------------------------


@integration
def test_mariadb_has_a_full_row_binlog(mariadb: MariaDBDatabase) -> None:
    variables = dict(
        mariadb.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN %s",
            (("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id", "port"),),
        )
    )
    assert variables == {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "server_id": "1",
        "port": str(mariadb.port),
    }
    assert mariadb.address == f"127.0.0.1:{mariadb.port}"
    assert mariadb.server.is_running
    assert mariadb.execute("SELECT DATABASE()") == [(mariadb.database,)]
    assert mariadb.execute("SHOW TABLES") == []  # a fresh database
    assert mariadb.password not in repr(mariadb) and mariadb.password not in repr(mariadb.server)


@integration
def test_root_logs_in_over_tcp(mariadb: MariaDBDatabase) -> None:
    conn = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", password="")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone() == ("root@127.0.0.1",)
    finally:
        conn.close()


@integration
def test_capture_user_reads_the_binlog(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))")
    mariadb.execute("INSERT INTO orders VALUES (1, 'first')")
    conn = mariadb.connect(root=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone() == (f"{mariadb.user}@%",)
            cur.execute("SHOW BINARY LOGS")
            logs = cur.fetchall()
            assert logs and logs[0][0].startswith("mysql-bin.")
            cur.execute("SHOW MASTER STATUS")
            status = cur.fetchone()
            assert status[0] == logs[-1][0] and status[1] > 4
            cur.execute("SELECT note FROM orders")
            assert cur.fetchall() == (("first",),)
            with pytest.raises(pymysql.err.OperationalError):  # capture only: no writes
                cur.execute("CREATE DATABASE not_allowed")
    finally:
        conn.close()

    # A real binlog dump (COM_BINLOG_DUMP) as the capture user sees the row, with column names (FULL metadata).
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={
            "host": mariadb.host,
            "port": mariadb.port,
            "user": mariadb.user,
            "password": mariadb.password,
        },
        server_id=4242,
        log_file=logs[0][0],
        log_pos=4,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=[mariadb.database],
    )
    try:
        rows = [row["values"] for event in stream for row in event.rows]
    finally:
        stream.close()
    assert rows == [{"id": 1, "note": "first"}]


@integration
def test_replica_replicates_with_log_slave_updates(mariadb_factory: MariaDBFactory) -> None:
    master = mariadb_factory()
    replica = mariadb_factory(replica_of=master)
    assert replica.server_id != master.server_id
    assert replica.variable("log_slave_updates") == "ON"
    assert master.variable("log_slave_updates") == "OFF"
    status = replica.replica_status()
    assert (status["Slave_IO_Running"], status["Slave_SQL_Running"]) == ("Yes", "Yes")
    assert status["Master_Port"] == master.port

    master.execute("CREATE DATABASE shop")
    master.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    master.execute("INSERT INTO shop.orders VALUES (7, 'replicated')")
    replica.wait_for_replication(timeout=20)
    assert replica.execute("SELECT id, note FROM shop.orders") == [(7, "replicated")]

    # log_slave_updates: the replica's own binlog holds the master's row event, stamped with the master's server id.
    replica_log = replica.execute("SHOW MASTER STATUS")[0][0]
    events = replica.execute(f"SHOW BINLOG EVENTS IN '{replica_log}'")
    assert any(e[2].startswith("Write_rows") and e[3] == master.server_id for e in events), events


@integration
def test_restart_keeps_data_and_port(mariadb_factory: MariaDBFactory) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE keep")
    server.execute("CREATE TABLE keep.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO keep.t VALUES (1), (2)")
    port, pid, datadir = server.port, server.pid, server.datadir
    logs_before = len(server.execute("SHOW BINARY LOGS"))

    server.restart()
    assert (server.port, server.datadir) == (port, datadir)
    assert server.pid != pid and server.is_running
    assert services.process_state(pid) is None  # the old process was reaped
    assert server.execute("SELECT id FROM keep.t ORDER BY id") == [(1,), (2,)]
    assert len(server.execute("SHOW BINARY LOGS")) == logs_before + 1  # a restart opens a new binlog file


@integration
def test_kill_is_a_crash_and_restart_recovers(mariadb_factory: MariaDBFactory) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE crash")
    server.execute("CREATE TABLE crash.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO crash.t VALUES (1)")
    pid = server.pid
    assert pid is not None and server.is_running

    server.kill()
    assert not server.is_running
    assert services.process_state(pid) is None
    with pytest.raises(pymysql.err.OperationalError):
        server.connect(connect_timeout=1)
    assert server.datadir.is_dir()  # kept for restart

    server.restart()
    assert server.is_running
    assert server.execute("SELECT id FROM crash.t") == [(1,)]  # committed before the crash


@integration
def test_custom_capture_user_and_pause_resume(mariadb_factory: MariaDBFactory) -> None:
    server = mariadb_factory(user="capture", password="it's a \\ test")
    conn = server.connect(root=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone() == ("capture@%",)
    finally:
        conn.close()

    pid = server.pid
    assert pid is not None
    server.pause()
    try:
        assert server.is_running and server.is_paused
        assert services.process_state(pid) == "T"
        with pytest.raises(pymysql.err.OperationalError):
            server.connect(connect_timeout=0.5, read_timeout=0.5)
    finally:
        server.resume()
    assert not server.is_paused
    assert server.execute("SELECT 1") == [(1,)]


@integration
def test_stop_removes_process_and_directory() -> None:
    server = MariaDBServer(server_id=9)
    with server:
        pid, workdir = server.pid, server.workdir
        assert pid is not None and workdir is not None
        assert server in services.live_services()
        server.pause()  # stop() must also end a paused server
    assert services.process_state(pid) is None
    assert not workdir.exists()
    assert server not in services.live_services()
    assert not server.is_running and server.pid is None
    server.stop()  # idempotent


@integration
def test_start_failure_shows_the_log_and_leaves_nothing() -> None:
    server = MariaDBServer(extra_args=("--no-such-option-pycanal",))
    with pytest.raises(ServiceError, match="no-such-option-pycanal") as info:
        server.start()
    assert "log tail" in str(info.value)
    assert server.password not in str(info.value)
    assert server.workdir is None and server.pid is None
    assert server not in services.live_services()


@integration
def test_install_failure_is_reported() -> None:
    server = MariaDBServer(install_args=("--no-such-install-option-pycanal",))
    with pytest.raises(ServiceError, match="mariadb-install-db failed"):
        server.start()
    assert server.workdir is None and server not in services.live_services()


@integration
def test_fresh_servers_are_independent(mariadb_factory: MariaDBFactory) -> None:
    first, second = mariadb_factory(), mariadb_factory()
    assert first.datadir != second.datadir and first.password != second.password
    first.execute("CREATE DATABASE only_here")
    assert ("only_here",) not in second.execute("SHOW DATABASES")
    assert first.execute("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (first.user,)) == [(1,)]
    assert second.execute("SHOW BINARY LOGS")[0][0] == "mysql-bin.000001"
    # Users are made with sql_log_bin=0: the binlog holds nothing but what the tests write.
    events = " ".join(str(e[5]) for e in second.execute("SHOW BINLOG EVENTS IN 'mysql-bin.000001'"))
    assert "CREATE USER" not in events.upper() and "GRANT" not in events.upper()


# -- ZooKeeper ------------------------------------------------------------------------------------------------------


@integration
def test_zookeeper_chroot_and_short_session(zookeeper: ZooKeeperChroot) -> None:
    assert zookeeper.hosts == f"127.0.0.1:{zookeeper.server.port}{zookeeper.chroot}"
    assert zookeeper.chroot.startswith("/pycanal-")
    client = zookeeper.client(timeout=1.5)
    assert client.connected
    assert client._session_timeout == 1500  # negotiated: minSessionTimeout allows 1-2 s sessions
    client.create("/hello", b"world", ephemeral=True)
    assert client.get("/hello")[0] == b"world"

    outside = KazooClient(hosts=zookeeper.server.hosts)
    outside.start(timeout=10)
    try:
        assert outside.get(f"{zookeeper.chroot}/hello")[0] == b"world"
    finally:
        outside.stop()
        outside.close()


@integration
def test_zookeeper_four_letter_words(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.four_letter_word("ruok") == "imok"
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")
    conf = zookeeper_server.four_letter_word("conf")
    assert "minSessionTimeout=1000" in conf and f"clientPort={zookeeper_server.port}" in conf


@integration
def test_zookeeper_restart_kill_pause() -> None:
    with ZooKeeperServer() as server:
        port, workdir = server.port, server.workdir
        client = KazooClient(hosts=server.hosts, timeout=10)
        client.start(timeout=10)
        try:
            client.create("/kept", b"1")
        finally:
            client.stop()
            client.close()

        pid = server.pid
        server.restart()
        assert server.port == port and server.pid != pid and server.is_running

        pid = server.pid
        assert pid is not None
        server.kill()
        assert not server.is_running and services.process_state(pid) is None
        with pytest.raises(OSError):
            server.four_letter_word("ruok")
        server.restart()

        server.pause()
        assert server.is_paused and server.is_running
        with pytest.raises(OSError):
            server.four_letter_word("ruok", timeout=0.5)
        server.resume()
        assert server.four_letter_word("ruok") == "imok"

        client = KazooClient(hosts=server.hosts, timeout=10)
        client.start(timeout=10)
        try:
            assert client.get("/kept")[0] == b"1"  # survived a restart and a SIGKILL
        finally:
            client.stop()
            client.close()
        pid = server.pid
    assert services.process_state(pid) is None if pid is not None else False
    assert workdir is not None and not workdir.exists()


# -- the plugin, as a user of the installed package sees it --------------------------------------------------------

_USER_TEST = """
import json
import os
from pathlib import Path

from kazoo.client import KazooClient

from canal.testing import services

RECORD = Path(os.environ["PYCANAL_PLUGIN_RECORD"])
seen = {}


def test_a_nothing_started_before_a_test_asks():
    assert services.live_services() == []


def test_b_fixtures(mariadb, zookeeper, mariadb_factory):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO t VALUES (1)")
    assert mariadb.execute("SELECT id FROM t") == [(1,)]
    conn = mariadb.connect(root=False)
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        assert cur.fetchone()[0].startswith("mysql-bin.")
    conn.close()
    extra = mariadb_factory(server_id=42)
    assert extra.execute("SELECT @@server_id") == [(42,)]
    client = zookeeper.client(timeout=1.5)
    client.create("/hello", b"world")
    assert client.get("/hello")[0] == b"world"
    seen.update(database=mariadb.database, chroot=zookeeper.chroot)
    servers = [mariadb.server, zookeeper.server, extra]
    RECORD.write_text(json.dumps({"pids": [s.pid for s in servers], "dirs": [str(s.workdir) for s in servers]}))


def test_c_teardown_cleaned_up(mariadb_server, zookeeper_server):
    assert seen["database"] not in [row[0] for row in mariadb_server.execute("SHOW DATABASES")]
    admin = KazooClient(hosts=zookeeper_server.hosts)
    admin.start()
    try:
        assert admin.exists(seen["chroot"]) is None
    finally:
        admin.stop()
        admin.close()
    assert len(services.live_services()) == 2  # the factory's server is gone, the session servers remain
"""


@integration
def test_fixtures_work_from_an_outside_test_suite(tmp_path: Path) -> None:
    (tmp_path / "test_user_suite.py").write_text(textwrap.dedent(_USER_TEST))
    record = tmp_path / "servers.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")}
    env["PYCANAL_PLUGIN_RECORD"] = str(record)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user_suite.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    recorded = json.loads(record.read_text())
    assert len(recorded["pids"]) == 3
    for pid in recorded["pids"]:
        assert services.process_state(pid) is None, f"server pid {pid} outlived the pytest session"
    for directory in recorded["dirs"]:
        assert not Path(directory).exists()


@integration
def test_a_taken_port_is_reported_or_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        fixed = MariaDBServer(port=taken)
        with pytest.raises(ServiceError, match=f"port {taken} is in use"):
            fixed.start()
        assert fixed.workdir is None and fixed not in services.live_services()

        # A port picked automatically but taken before the server binds it: start() retries on another one.
        real_free_port = services.free_port
        ports = iter([taken])
        monkeypatch.setattr(services, "free_port", lambda host="127.0.0.1": next(ports, None) or real_free_port())
        with ZooKeeperServer() as server:
            assert server.port != taken
            assert server.four_letter_word("ruok") == "imok"


def test_stale_directories_of_dead_processes_are_swept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(services.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(services, "_swept", False)
    child = subprocess.Popen(["true"])
    child.wait()
    me = os.getpid()
    stale, live, foreign = tmp_path / "pycanal-mariadb-stale", tmp_path / "pycanal-zookeeper-live", tmp_path / "other"
    for directory in (stale, live, foreign):
        directory.mkdir()
    (stale / "owner").write_text(f"{child.pid} 1 {child.pid} 1\n")
    (live / "owner").write_text(f"{child.pid} 1 {me} {services._start_time(me)}\n")  # the server still runs
    (foreign / "owner").write_text(f"{child.pid} 1\n")
    services._sweep_stale_workdirs()
    assert not stale.exists()
    assert live.exists() and foreign.exists()
