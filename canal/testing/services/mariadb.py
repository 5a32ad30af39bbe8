"""A private MariaDB server (see :mod:`canal.testing.services`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pymysql  # type: ignore[import-untyped]
from pymysql.connections import Connection  # type: ignore[import-untyped]

from canal.errors import ServiceError

if TYPE_CHECKING:
    from canal.testing.tls import TlsFiles

from canal.testing.services.process import _LOG, _POLL_S, _find_executable, _Service, _wait_port_open


class MariaDBServer(_Service):
    """A private ``mariadbd`` with a ROW binlog (FULL row image and metadata) on a free loopback port.

    ``root`` logs in over TCP from 127.0.0.1 without a password; ``user``/``password`` is the capture user (SELECT,
    SHOW VIEW, TRIGGER, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR: the last three to read the binlog,
    SHOW VIEW and TRIGGER to see what a statement logged as a statement reaches); a replication user is kept for
    replicas. With
    ``replica_of`` the server replicates from that (started) master from the start of its first binlog, with
    ``log_slave_updates``. Binlog files are ``mysql-bin.NNNNNN`` in :attr:`datadir`.

    A new server's datadir is a copy of a template that ``mariadb-install-db`` makes once per MariaDB build and
    ``install_args`` (kept under the temporary directory); the capture and replication users are created at the first
    start with ``sql_log_bin=0``, so the binlog holds only what is written afterwards. ``extra_args`` are appended to
    the ``mariadbd`` command line.

    ``tls`` (a :class:`~canal.testing.tls.TlsFiles`, e.g. ``make_certificates(d).server()``) makes the server offer
    TLS with that CA, certificate and key; ``require_secure_transport`` then refuses unencrypted connections. The
    root connections of :meth:`connect` and :meth:`execute` use TLS trusting that CA (without checking the host name).
    """

    kind: ClassVar[str] = "mariadb"
    server_id: int
    MARIADBD: ClassVar[str] = "mariadbd"
    INSTALL_DB: ClassVar[str] = "mariadb-install-db"

    def __init__(
        self,
        server_id: int = 1,
        replica_of: MariaDBServer | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        *,
        user: str = "canal",
        password: str | None = None,
        install_args: Sequence[str] = (),
        tls: TlsFiles | None = None,
        require_secure_transport: bool = False,
    ) -> None:
        if not re.fullmatch(r"\w{1,32}", user):
            raise ValueError(f"user must be 1-32 word characters, got {user!r}")
        if require_secure_transport and tls is None:
            raise ValueError("require_secure_transport needs tls= (the server's CA, certificate and key)")
        if replica_of is not None and server_id == replica_of.server_id:
            raise ValueError(f"a replica needs its own server id; {server_id} is the master's")
        super().__init__(port)
        self.server_id = server_id
        self.replica_of = replica_of
        self.extra_args = tuple(extra_args)
        self.install_args = tuple(install_args)  # mariadbd options that must hold from the first boot on
        self.tls = tls
        self.require_secure_transport = require_secure_transport
        self.user = user
        self.password = password if password is not None else secrets.token_hex(12)
        self.root_user = "root"
        self.root_password = ""
        self.replication_user = "repl"
        self.replication_password = secrets.token_hex(12)

    def __repr__(self) -> str:
        role = f", replica_of={self.replica_of.address!r}" if self.replica_of is not None else ""
        return (
            f"MariaDBServer(server_id={self.server_id}, address={self.address!r}, user={self.user!r}{role}, "
            f"pid={self.pid}, running={self.is_running})"
        )

    @property
    def datadir(self) -> Path:
        """The data directory (binlogs included); valid while the server exists."""
        if self.workdir is None:
            raise ServiceError(f"{self!r} has not been started")
        return self.workdir / "data"

    @property
    def socket_path(self) -> Path:
        if self.workdir is None:
            raise ServiceError(f"{self!r} has not been started")
        return self.workdir / "mysqld.sock"

    # -- lifecycle hooks --------------------------------------------------------------------------------------------

    def _check_binaries(self) -> None:
        self._mariadbd = _find_executable(self.MARIADBD, "MariaDBServer")
        self._install_db = _find_executable(self.INSTALL_DB, "MariaDBServer")

    def _initialize(self, workdir: Path) -> None:
        # A fresh datadir is a copy of a template made once per MariaDB build and install options (and kept in the
        # temporary directory): copying takes a fraction of what mariadb-install-db takes.
        shutil.copytree(self._template(), workdir / "data", symlinks=True)
        (workdir / "tmp").mkdir(exist_ok=True)

    def _template(self) -> Path:
        install_args = [
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            *self._innodb_args(),
            *self._user_args(),
            *self.install_args,
        ]
        build = [
            f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
            for path in (os.path.realpath(self._mariadbd), os.path.realpath(self._install_db))
            for stat in [os.stat(path)]
        ]
        key = hashlib.sha256("\0".join([*build, *install_args]).encode()).hexdigest()[:16]
        cache = Path(tempfile.gettempdir()) / f"pycanal.cache-{os.geteuid()}"
        template = cache / f"mariadb-datadir-{key}"
        if template.is_dir():
            return template
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="staging-", dir=cache))
        try:
            init_sql = staging / "init.sql"
            init_sql.write_text(
                "FLUSH PRIVILEGES;\n"
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';\n"
                "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n"
            )
            command = [
                self._install_db,
                "--no-defaults",  # must come first
                f"--datadir={staging / 'data'}",
                f"--extra-file={init_sql}",
                *install_args,
            ]
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, cwd=staging, check=False)
            if result.returncode != 0:
                output = (result.stdout + result.stderr).decode(errors="replace")
                raise ServiceError(f"mariadb-install-db failed (exit {result.returncode}):\n{output[-3000:]}")
            with contextlib.suppress(OSError):  # another process may have made the same template meanwhile
                os.rename(staging / "data", template)
            _LOG.info("made MariaDB datadir template %s", template)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return template

    def _innodb_args(self) -> list[str]:
        return ["--innodb-log-file-size=32M"]  # the default 96M redo log is written out on every fresh datadir

    def _user_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses to run as root unless told to

    def _command(self) -> list[str]:
        assert self.workdir is not None
        command = [
            self._mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            f"--socket={self.socket_path}",
            f"--pid-file={self.workdir / 'mysqld.pid'}",
            f"--tmpdir={self.workdir / 'tmp'}",  # its temporary tables in its own directory, not the shared /tmp
            f"--log-error={self.log_path}",
            f"--bind-address={self.host}",
            "--skip-name-resolve",
            f"--server-id={self.server_id}",
            "--log-bin=mysql-bin",
            "--relay-log=relay-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            *self._innodb_args(),
            *self._user_args(),
        ]
        if self.replica_of is not None:
            command.append("--log-slave-updates")
        if self.tls is not None:
            command += [f"--ssl-ca={self.tls.ca}", f"--ssl-cert={self.tls.cert}", f"--ssl-key={self.tls.key}"]
        if self.require_secure_transport:
            command.append("--require-secure-transport=ON")
        command.extend(self.extra_args)
        return command

    def _probe(self) -> bool:
        if not _wait_port_open(self.host, self.port, 1.0):
            return False
        try:
            conn = pymysql.connect(
                host=self.host,
                port=self.port,
                user=self.root_user,
                password=self.root_password,
                connect_timeout=2,
                read_timeout=1,  # whatever listens there may never send a handshake
                write_timeout=1,
                **self._ssl_args(),
            )
        except pymysql.err.MySQLError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@datadir")
                (datadir,) = cur.fetchone()
        except pymysql.err.MySQLError:
            return False
        finally:
            conn.close()
        # Answering, but is it ours and not another server that took the port first?
        return Path(str(datadir)).resolve() == self.datadir.resolve()

    def _launch(self) -> None:
        try:
            super()._launch()
        except ServiceError as exc:
            if "Address already in use" in str(exc) or "Can't start server: Bind" in str(exc):
                raise ServiceError(f"mariadb port {self.port} is in use: {exc}") from exc
            raise

    def _after_first_start(self) -> None:
        # Not binlogged, so a replica replaying its master's binlog from the start never collides with them.
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.user, self.password))
                cur.execute(
                    "GRANT SELECT, SHOW VIEW, TRIGGER, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* "
                    "TO %s@'%%'",
                    (self.user,),
                )
                cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.replication_user, self.replication_password))
                cur.execute("GRANT REPLICATION SLAVE ON *.* TO %s@'%%'", (self.replication_user,))
        finally:
            conn.close()
        if self.replica_of is not None:
            self._start_replication(self.replica_of)

    def _start_replication(self, master: MariaDBServer, timeout: float = 30.0) -> None:
        if not master.is_running:
            raise ServiceError(f"cannot replicate from {master!r}: it is not running")
        first_log = master.execute("SHOW BINARY LOGS")[0][0]
        tls = ", MASTER_SSL=1, MASTER_SSL_CA=%s" if master.tls is not None else ""
        self.execute(
            "CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
            f"MASTER_LOG_FILE=%s, MASTER_LOG_POS=4, MASTER_CONNECT_RETRY=1{tls}",
            (
                master.host,
                master.port,
                master.replication_user,
                master.replication_password,
                first_log,
                *([str(master.tls.ca)] if master.tls is not None else []),
            ),
        )
        self.execute("START SLAVE")
        deadline = time.monotonic() + timeout
        while True:
            status = self.replica_status()
            if status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes":
                break
            errors = [str(status.get(k)) for k in ("Last_IO_Error", "Last_SQL_Error") if status.get(k)]
            if time.monotonic() > deadline or (errors and status.get("Slave_SQL_Running") == "No"):
                raise ServiceError(f"replica {self.address} of {master.address} did not start: {errors or status}")
            time.sleep(_POLL_S)
        _LOG.info("mariadb %s replicates from %s", self.address, master.address)

    # -- using the server -------------------------------------------------------------------------------------------

    def connect(self, database: str | None = None, *, root: bool = True, **kwargs: Any) -> Connection:
        """A new pymysql connection (autocommit, utf8mb4) as root, or as the capture user with ``root=False``."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.root_user if root else self.user,
            "password": self.root_password if root else self.password,
            "database": database,
            "autocommit": True,
            "charset": "utf8mb4",
            "connect_timeout": 10,
            **self._ssl_args(),
        }
        params.update(kwargs)
        return pymysql.connect(**params)

    def client_ssl_context(self) -> ssl.SSLContext:
        """A client TLS context trusting this server's CA (host name unchecked); needs ``tls``."""
        if self.tls is None:
            raise ServiceError(f"{self!r} was started without tls")
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        context.check_hostname = False
        return context

    def _ssl_args(self) -> dict[str, Any]:
        # explicit either way: pymysql's own default (TLS when offered, since 1.2) is not what a test should rely on
        return {"ssl": self.client_ssl_context()} if self.tls is not None else {"ssl_disabled": True}

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None, *, database: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement as root on a fresh connection; the rows it returned (empty if none)."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())
        finally:
            conn.close()

    def variable(self, name: str) -> str | None:
        """A global server variable's value, as SHOW GLOBAL VARIABLES prints it."""
        rows = self.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
        return str(rows[0][1]) if rows else None

    def replica_status(self) -> dict[str, Any]:
        """SHOW SLAVE STATUS as a dict (empty if this server replicates from nothing)."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone()
                if row is None:
                    return {}
                return {d[0]: v for d, v in zip(cur.description, row, strict=True)}
        finally:
            conn.close()

    def wait_for_replication(self, timeout: float = 30.0) -> None:
        """Block until this replica has applied everything its master has binlogged so far."""
        if self.replica_of is None:
            raise ServiceError(f"{self!r} is not a replica")
        log_file, log_pos = self.replica_of.execute("SHOW MASTER STATUS")[0][:2]
        waited = self.execute("SELECT MASTER_POS_WAIT(%s, %s, %s)", (log_file, log_pos, timeout))[0][0]
        if waited is None or waited < 0:
            raise ServiceError(
                f"replica {self.address} did not reach {log_file}:{log_pos} within {timeout} s: "
                f"{self.replica_status().get('Last_SQL_Error') or self.replica_status().get('Last_IO_Error')}"
            )
