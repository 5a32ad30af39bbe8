"""Private MariaDB and ZooKeeper servers for tests and the demo.

Each server runs as a child process on a free 127.0.0.1 port with its own temporary directory, never touching the
system services or their configuration. Servers are stopped by pid: explicitly (:meth:`stop`), by leaving a ``with``
block, or at interpreter exit for anything still running. When started from the main thread the child also gets a
parent-death signal, so it dies with the Python process even if that process is killed outright.

Liveness is read from ``/proc/PID/stat`` (a crashed, unreaped child is a zombie, which ``kill -0`` reports alive).

The binaries come from the system packages ``mariadb-server``, ``zookeeper`` and a JRE, installed by
``scripts/setup.sh``; a missing binary raises :class:`~canal.errors.ServiceError` naming that script.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

import pymysql  # type: ignore[import-untyped]
from pymysql.connections import Connection  # type: ignore[import-untyped]

from canal.errors import ServiceError

if TYPE_CHECKING:
    from canal.testing.tls import TlsFiles

__all__ = [
    "SETUP_COMMAND",
    "MariaDBServer",
    "ZooKeeperServer",
    "free_port",
    "live_services",
    "process_state",
]

_LOG = logging.getLogger(__name__)

SETUP_COMMAND = "scripts/setup.sh"
"""The command that installs what the services need (named in every missing-binary error)."""

LOCALHOST = "127.0.0.1"

# Where system daemons live when they are not on a non-root user's PATH.
_SBIN_DIRS: tuple[str, ...] = ("/usr/sbin", "/usr/local/sbin", "/sbin")

_POLL_S = 0.01  # readiness poll interval
_MAX_PORT_ATTEMPTS = 3  # a port picked by free_port() can be taken by someone else before the server binds it

_live: set[_Service] = set()
_live_lock = threading.Lock()


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port on ``host`` that was free a moment ago (bind to port 0, read it back, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def process_state(pid: int) -> str | None:
    """The one-letter state of process ``pid`` from ``/proc/PID/stat`` (``R``, ``S``, ``T``, ``Z``...), or None if
    there is no such process."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "PID (comm) STATE ..." where comm may itself contain spaces and parentheses.
    return raw[raw.rindex(")") + 2 :].split()


def _start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None  # field 22 of stat: start time in clock ticks after boot


def live_services() -> list[_Service]:
    """Every server of this process that has been started and not yet stopped."""
    with _live_lock:
        return list(_live)


def _stop_all_at_exit() -> None:
    for service in live_services():
        try:
            service.stop()
        except Exception:  # at exit, stop what can be stopped
            _LOG.exception("could not stop %r at exit", service)


atexit.register(_stop_all_at_exit)


def _alive(pid: int, ticks: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X", "x") and int(fields[19]) == ticks


_swept = False


def _sweep_stale_workdirs() -> None:
    """Remove temporary directories left by processes that were killed outright (no atexit ran): those whose
    owning Python process and server process are both gone."""
    global _swept
    if _swept:
        return
    _swept = True
    for workdir in Path(tempfile.gettempdir()).glob("pycanal-*-*"):
        try:
            numbers = [int(n) for n in (workdir / "owner").read_text().split()]
        except (OSError, ValueError):
            continue
        pairs = list(zip(numbers[0::2], numbers[1::2], strict=False))
        if pairs and not any(_alive(pid, ticks) for pid, ticks in pairs):
            _LOG.info("removing %s, left behind by a process that no longer exists", workdir)
            shutil.rmtree(workdir, ignore_errors=True)
    # Half-made datadir templates of processes killed while running mariadb-install-db.
    for staging in (Path(tempfile.gettempdir()) / f"pycanal.cache-{os.geteuid()}").glob("staging-*"):
        with contextlib.suppress(OSError):
            if time.time() - staging.stat().st_mtime > 600:
                shutil.rmtree(staging, ignore_errors=True)


def _find_executable(name: str, what: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN_DIRS))
    if found is None:
        raise ServiceError(f"{what} needs the executable {name!r}, which is not installed: run {SETUP_COMMAND}")
    return found


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def _wait_port_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class _Service:
    """Process management shared by the servers: spawn, readiness wait, stop/kill/pause/resume/restart, cleanup."""

    kind: ClassVar[str] = "service"
    start_timeout: float = 30.0
    stop_timeout: float = 20.0

    def __init__(self, port: int | None) -> None:
        self.host = LOCALHOST
        self._fixed_port = port is not None
        self.port: int = port if port is not None else free_port()
        self.workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._start_ticks: int | None = None
        self._paused = False
        self._initialized = False
        self._lock = threading.RLock()
        self.ready_seconds: float | None = None
        """How long the last start or restart took until the server answered."""

    # -- what subclasses provide ------------------------------------------------------------------------------------

    def _check_binaries(self) -> None:
        raise NotImplementedError

    def _initialize(self, workdir: Path) -> None:
        """Create the data directory and configuration (first start only)."""
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _probe(self) -> bool:
        """True once the server answers a real request."""
        raise NotImplementedError

    def _after_first_start(self) -> None:
        """Set-up that needs the running server (first start only)."""

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / f"{self.kind}.log"

    # -- public lifecycle -------------------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The process id of the server's latest process (kept after :meth:`kill`), None before start and after
        :meth:`stop`."""
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the server process exists and is not a zombie (a paused server is running)."""
        proc, ticks = self._proc, self._start_ticks
        # The start time guards against some later process that reused the pid.
        return proc is not None and ticks is not None and _alive(proc.pid, ticks)

    @property
    def is_paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._paused and self.is_running

    def start(self) -> Self:
        """Start the server and return once it answers; a no-op if it is running. Raises ServiceError."""
        with self._lock:
            if self.is_running:
                return self
            self._check_binaries()
            _sweep_stale_workdirs()
            first = not self._initialized
            attempts = 1 if (self._fixed_port or not first) else _MAX_PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                if self.workdir is None:
                    self.workdir = Path(tempfile.mkdtemp(prefix=f"pycanal-{self.kind}-"))
                try:
                    if not self._initialized:
                        self._initialize(self.workdir)
                        self._initialized = True
                    self._launch()
                    break
                except ServiceError as exc:
                    if attempt < attempts and "in use" in str(exc):
                        _LOG.info("%s port %d was taken, retrying on another port", self.kind, self.port)
                        self.port = free_port()
                        continue
                    self._discard()
                    raise
                except BaseException:
                    self._discard()
                    raise
            if first:
                try:
                    self._after_first_start()
                except BaseException:
                    self._discard()
                    raise
            return self

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``stop_timeout``) and remove its temporary directory."""
        with self._lock:
            self._terminate()
            self._discard()

    def restart(self) -> Self:
        """Stop the server gracefully (if it runs) and start it again on the same port with the same data."""
        with self._lock:
            if not self._initialized:
                return self.start()
            self._terminate()
            self._launch()
            return self

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; its data stays for :meth:`restart`."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            self._paused = False
            _LOG.info("%s killed (pid %d)", self.kind, proc.pid)

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open but nothing is answered until :meth:`resume`."""
        with self._lock:
            if not self.is_running:
                raise ServiceError(f"{self!r} is not running")
            assert self._proc is not None
            self._proc.send_signal(signal.SIGSTOP)
            self._paused = True

    def resume(self) -> None:
        """SIGCONT a paused server."""
        with self._lock:
            if self._proc is not None and self.is_running:
                self._proc.send_signal(signal.SIGCONT)
            self._paused = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals --------------------------------------------------------------------------------------------------

    def _launch(self) -> None:
        """Spawn the process and wait until it answers; on failure kill it and raise ServiceError with the log."""
        assert self.workdir is not None
        command = self._command()
        if threading.current_thread() is threading.main_thread():
            setpriv = shutil.which("setpriv")
            if setpriv is not None:  # exec()s the server: same pid, but it dies with this process
                command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        began = time.monotonic()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a terminal's Ctrl-C goes to Python, which then stops the server
            )
        self._start_ticks = _start_time(self._proc.pid)
        self._paused = False
        me = os.getpid()
        (self.workdir / "owner").write_text(f"{me} {_start_time(me)} {self._proc.pid} {self._start_ticks}\n")
        with _live_lock:
            _live.add(self)
        deadline = began + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                self._proc = None
                raise ServiceError(
                    f"{self.kind} exited during start-up on port {self.port}; log tail:\n{_tail(self.log_path)}"
                )
            if self._probe():
                break
            if time.monotonic() > deadline:
                self._terminate()
                raise ServiceError(
                    f"{self.kind} did not answer on {self.address} within {self.start_timeout:.0f} s; "
                    f"log tail:\n{_tail(self.log_path)}"
                )
            time.sleep(_POLL_S)
        self.ready_seconds = time.monotonic() - began
        _LOG.info("%s ready on %s (pid %d) in %.2f s", self.kind, self.address, self._proc.pid, self.ready_seconds)

    def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a paused server acts on SIGTERM only once continued
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                _LOG.warning("%s pid %d ignored SIGTERM for %.0f s: killing it", self.kind, proc.pid, self.stop_timeout)
                proc.kill()
                proc.wait()
        self._paused = False
        _LOG.info("%s stopped (pid %d)", self.kind, proc.pid)

    def _discard(self) -> None:
        """Forget the process (already stopped or never started) and remove the temporary directory."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._start_ticks = None
        with _live_lock:
            _live.discard(self)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None
        self._initialized = False


class MariaDBServer(_Service):
    """A private ``mariadbd`` with a ROW binlog (FULL row image and metadata) on a free loopback port.

    ``root`` logs in over TCP from 127.0.0.1 without a password; ``user``/``password`` is the capture user (SELECT,
    REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR); a replication user is kept for replicas. With
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
                    "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO %s@'%%'",
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


class ZooKeeperServer(_Service):
    """A private standalone ZooKeeper (``ZooKeeperServerMain``) on a free loopback port.

    ``minSessionTimeout`` is 1 s so short sessions (1-2 s) can be tested; the four-letter words ruok, srvr, stat,
    mntr, conf and cons are enabled; the admin server is off.
    """

    kind: ClassVar[str] = "zookeeper"
    JAVA: ClassVar[str] = "java"
    ZOOKEEPER_JAR: ClassVar[str] = "/usr/share/java/zookeeper.jar"  # its manifest Class-Path names its dependencies
    LOGGING_JARS: ClassVar[tuple[str, ...]] = ("/usr/share/java/slf4j-simple.jar",)
    JVM_ARGS: ClassVar[tuple[str, ...]] = (
        "-XX:TieredStopAtLevel=1",  # starts faster; a test server needs no peak JIT performance
        "-XX:+UseSerialGC",
        "-Xms32m",
        "-Xmx256m",
        "-Djava.net.preferIPv4Stack=true",
    )

    def __init__(self, tick_ms: int = 500, port: int | None = None, *, jvm_args: Sequence[str] = ()) -> None:
        super().__init__(port)
        self.tick_ms = tick_ms
        self.jvm_args = tuple(jvm_args)

    def __repr__(self) -> str:
        return (
            f"ZooKeeperServer(hosts={self.hosts!r}, tick_ms={self.tick_ms}, pid={self.pid}, running={self.is_running})"
        )

    @property
    def hosts(self) -> str:
        """A kazoo/ZooKeeper connect string: ``127.0.0.1:PORT``."""
        return self.address

    @property
    def datadir(self) -> Path:
        if self.workdir is None:
            raise ServiceError(f"{self!r} has not been started")
        return self.workdir / "data"

    def _check_binaries(self) -> None:
        self._java = _find_executable(self.JAVA, "ZooKeeperServer")
        if not Path(self.ZOOKEEPER_JAR).is_file():
            raise ServiceError(
                f"ZooKeeperServer needs {self.ZOOKEEPER_JAR} (Debian package zookeeper), which is not installed: "
                f"run {SETUP_COMMAND}"
            )

    def _initialize(self, workdir: Path) -> None:
        (workdir / "data").mkdir()

    def _write_config(self) -> Path:
        config = self.datadir.parent / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.datadir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={max(1000, 2 * self.tick_ms)}\n"
            f"maxSessionTimeout={max(60000, 20 * self.tick_ms)}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,cons\n"
            "snapCount=10000\n"
        )
        return config

    def _command(self) -> list[str]:
        assert self.workdir is not None
        classpath = [self.ZOOKEEPER_JAR, *(jar for jar in self.LOGGING_JARS if Path(jar).is_file())]
        return [
            self._java,
            *self.JVM_ARGS,
            *self.jvm_args,
            "-cp",
            os.pathsep.join(classpath),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self._write_config()),  # rewritten each launch: the port may have changed
        ]

    def four_letter_word(self, word: str, timeout: float = 2.0) -> str:
        """Send a four-letter command (``ruok``, ``srvr``, ``stat``, ``mntr``...) and return the answer."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def _probe(self) -> bool:
        try:
            if "Mode: standalone" not in self.four_letter_word("srvr", timeout=1.0):
                return False
            # Serving, but is it ours and not another server that took the port first?
            return f"dataDir={self.datadir}" in self.four_letter_word("conf", timeout=1.0)
        except OSError:
            return False

    def _launch(self) -> None:
        try:
            super()._launch()
        except ServiceError as exc:
            if "Address already in use" in str(exc) or "BindException" in str(exc):
                raise ServiceError(f"zookeeper port {self.port} is in use: {exc}") from exc
            raise
