"""What every private server shares: free ports, liveness from ``/proc``, the child process's life cycle, and the
sweep of work directories left by killed test runs."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Self

from canal.errors import ServiceError

if TYPE_CHECKING:
    pass


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
    """A TCP port on ``host`` that was free a moment ago, below the kernel's ephemeral range where one is: every
    outgoing connection takes its local port from that range, so a port picked there (bind to port 0) may be taken by
    any client's connect before the server binds it (seen: a Spark source's metrics port taken so in a full run).
    Drawn at random (two processes picking at once rarely meet) and tried with a bind."""
    low = _ephemeral_low()
    draw = random.SystemRandom()
    for _ in range(64) if low > _PRIVATE_FIRST + 1024 else ():
        port = draw.randrange(_PRIVATE_FIRST, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:  # in use (or lingering): another
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        picked: int = sock.getsockname()[1]
        return picked


_PRIVATE_FIRST = 10_000  # below it, the well-known services' registered ports


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768, its default, elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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


def listens_on(pid: int, host: str, port: int) -> bool:
    """True if process ``pid`` holds a TCP socket listening on ``host:port`` (IPv4), read from ``/proc``: a server
    that answers on a port is ours only if the listening socket is, not another process's that took the port first
    (its own start then fails, but possibly after a probe was answered by the other one)."""
    local = f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"  # /proc/net/tcp: little-endian address
    inodes: set[str] = set()
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if fields[1] == local and fields[3] == "0A":  # 0A: LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd) in inodes:
                return True
    return False


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

    def _environment(self) -> dict[str, str] | None:
        """The server's environment; None: this process's."""
        return None

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
            # wait until the kernel has stopped it (or it died), without reaping it: a caller may check its state
            os.waitid(os.P_PID, self._proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
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
                env=self._environment(),
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
