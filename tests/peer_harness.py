"""The Java peers (``peers/``, a Maven project of pycanal's own) run as processes beside pycanal: canal's embedded
server and Debezium's embedded engine, against the same MariaDB.

``scripts/setup.sh`` builds the harness when Maven is there; :func:`skip_reason` says why it cannot run otherwise (no
``java``, no build, or a build older than the sources), and the tests that need it skip with that reason.

A :class:`PeerProcess` is one JVM: commands go to its stdin as JSON lines, what the peer delivers comes back on its
stdout as JSON lines (``kind``: ready, started, entry, batch, ack, record, count, error, closed ...), read on a thread
into :attr:`PeerProcess.lines`. It stops cleanly when its stdin closes (the harness stops every destination and
engine it started), and by pid (SIGKILL) when it does not. :class:`CanalPeer` and :class:`DebeziumPeer` add their
commands.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from canal.testing.services import process_state

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "peers"
STAMP = PEERS / "target" / "build-stamp"
MODULES = ("common", "canal", "debezium")

CANAL_VERSION = "1.1.7"
DEBEZIUM_VERSION = "3.5.0.Final"

# a JVM for tests: quick to start and light on a shared 2-core machine (the benchmark runs with the defaults)
TEST_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx768m")


def sources_digest() -> str:
    """What ``scripts/setup.sh`` writes to the build stamp: the SHA-256 of ``sha256sum``'s lines for every file
    under ``peers/`` outside ``target/`` directories, in byte order of their paths (``./common/pom.xml`` ...)."""
    files = []
    for path in PEERS.rglob("*"):
        rel = path.relative_to(PEERS)
        if "target" in rel.parts or not path.is_file():
            continue
        files.append("./" + rel.as_posix())
    lines = []
    for name in sorted(files, key=lambda n: n.encode()):
        lines.append(f"{hashlib.sha256((PEERS / name).read_bytes()).hexdigest()}  {name}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def skip_reason() -> str | None:
    """Why the peers cannot run here (None: they can)."""
    if shutil.which("java") is None:
        return "no java on PATH: the peers' harness needs Java 17 (scripts/setup.sh installs a JRE)"
    if not STAMP.exists() or any(not (PEERS / m / "target" / "classpath.txt").exists() for m in MODULES[1:]):
        if shutil.which("mvn") is None:
            return (
                "the peers' harness (peers/) is not built and Maven is not installed: install maven, then run "
                "scripts/setup.sh"
            )
        return "the peers' harness (peers/) is not built: run scripts/setup.sh"
    if STAMP.read_text().strip() != sources_digest():
        return "the peers' harness (peers/) is older than its sources: run scripts/setup.sh"
    return None


def classpath(module: str) -> str:
    """The class path of a peer module: its classes, the common classes, then its jars (from ``~/.m2``)."""
    jars = (PEERS / module / "target" / "classpath.txt").read_text().strip()
    parts = [str(PEERS / module / "target" / "classes"), str(PEERS / "common" / "target" / "classes")]
    return ":".join([*parts, jars] if jars else parts)


class PeerError(AssertionError):
    """The peer reported an error, exited, or did not say what was awaited in time."""


class PeerProcess:
    """One harness JVM running ``main_class`` of ``module``."""

    def __init__(
        self,
        module: str,
        main_class: str,
        *,
        jvm_args: Sequence[str] = TEST_JVM,
        extra_classpath: Sequence[str] = (),
        log_dir: Path | None = None,
        name: str | None = None,
    ) -> None:
        reason = skip_reason()
        if reason is not None:
            raise PeerError(reason)
        self.name = name or module
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix=f"pycanal-peer-{module}-"))
        self.stderr_path = self.log_dir / f"{self.name}.stderr.log"
        cp = ":".join([*extra_classpath, classpath(module)])
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self.started_at = time.monotonic()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                ["java", *jvm_args, "-cp", cp, main_class],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=str(self.log_dir),
            )
        self._reader = threading.Thread(target=self._read, name=f"peer-{self.name}", daemon=True)
        self._reader.start()
        self._ids = 0
        self.ready = self.wait_for(lambda line: line["kind"] == "ready", 60, "ready")
        self.ready_s = time.monotonic() - self.started_at

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return process_state(self.pid) not in (None, "Z", "X", "x")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = json.loads(raw)
            line["_t"] = time.monotonic()  # when it arrived (a test orders what two processes did by it)
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def stderr_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float, what: str, *, start: int = 0
    ) -> dict[str, Any]:
        """The first line from index ``start`` on satisfying ``predicate``; :class:`PeerError` on timeout, on the
        process's end, or on an error line that is not a command's answer."""
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self.lines):
                    line = self.lines[i]
                    i += 1
                    if predicate(line):
                        return line
                    if line["kind"] == "error" and "cmd" not in line:
                        raise PeerError(f"{self.name}: {line['where']}: {line['error']}\n{line.get('trace', '')}")
                if self._eof:
                    raise PeerError(
                        f"{self.name} ended (rc {self.proc.poll()}) waiting for {what}\n{self.stderr_tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerError(f"{self.name}: no {what} within {timeout}s\n{self.stderr_tail()}")
                self._cond.wait(left)

    def wait_more(self, mark: int, timeout: float) -> bool:
        """Waits until the peer wrote a line after the first ``mark`` ones; False after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.lines) <= mark:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return False
                self._cond.wait(left)
            return True

    def send(self, cmd: dict[str, Any]) -> int:
        """Sends a command; returns its id."""
        self._ids += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({**cmd, "id": self._ids}) + "\n").encode())
        self.proc.stdin.flush()
        return self._ids

    def command(self, cmd: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """Sends a command and waits for its answer (``done``); :class:`PeerError` if it failed."""
        mark = len(self.lines)
        ident = self.send(cmd)
        answer = self.wait_for(
            lambda line: line["kind"] in ("done", "error") and line.get("id") == ident,
            timeout,
            f"answer to {cmd['cmd']}",
            start=mark,
        )
        if answer["kind"] == "error":
            raise PeerError(f"{self.name}: {cmd['cmd']} failed: {answer['error']}\n{answer.get('trace', '')}")
        return answer

    def select(self, kind: str, **fields: Any) -> list[dict[str, Any]]:
        with self._cond:
            return [
                line for line in self.lines if line["kind"] == kind and all(line.get(k) == v for k, v in fields.items())
            ]

    def cpu_seconds(self) -> float:
        """User + system CPU the process used so far (from ``/proc/PID/stat``)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text()
        rest = fields[fields.rindex(")") + 2 :].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")

    def close(self, timeout: float = 30.0) -> None:
        """Ends stdin (the harness stops what it started and exits), then kills by pid what is still running."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)

    def kill(self) -> None:
        """SIGKILL (the owner of a destination dying), and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CanalPeer(PeerProcess):
    """canal 1.1.7's ``CanalServerWithEmbedded`` (``io.pycanal.peers.CanalPeer``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("canal", "io.pycanal.peers.CanalPeer", **kwargs)

    def start_destination(self, destination: str, **settings: Any) -> dict[str, Any]:
        """Starts ``destination`` (settings: address, username, password, position {journalName, position,
        timestamp}, filter, black_filter, meta, index, zk, ha, server_address, tsdb, batch_size, consume, print ...:
        see ``CanalPeer.java``); returns its ``started`` line (``standby`` / ``active`` under ``ha``)."""
        mark = len(self.lines)
        self.command({"cmd": "start", "destination": destination, **settings})
        kinds = ("started", "active", "standby") if settings.get("ha") else ("started",)
        return self.wait_for(
            lambda line: line["kind"] in kinds and line.get("destination") == destination,
            60,
            f"start of {destination}",
            start=mark,
        )

    def entries(self, destination: str) -> list[dict[str, Any]]:
        return self.select("entry", destination=destination)

    def wait_entries(
        self,
        destination: str,
        until: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 60.0,
        *,
        stop_on_alarm: bool = False,
    ) -> list[dict[str, Any]]:
        """The destination's entries once ``until`` holds of them (checked again after each line the peer writes);
        with ``stop_on_alarm``, also as soon as canal raised an alarm for the destination (a parse error it retries
        forever: nothing more will come)."""
        deadline = time.monotonic() + timeout
        while True:
            mark = len(self.lines)
            entries = self.entries(destination)
            if until(entries) or (stop_on_alarm and self.alarms(destination)):
                return entries
            if not self.wait_more(mark, deadline - time.monotonic()):
                raise PeerError(f"canal: {destination}'s {len(entries)} entries never satisfied the wait")

    def alarms(self, destination: str) -> list[str]:
        """canal's alarms for the destination, and the errors its threads for it logged (canal names a
        destination's threads after it: ``destination = NAME , address = ...``, ``...-Parser-NAME-0``)."""
        named = re.compile(rf"(destination = {re.escape(destination)} ,)|(-{re.escape(destination)}-\d+$)")
        logged = [
            f"{line['message']}\n{line['causes']}" for line in self.select("log_error") if named.search(line["thread"])
        ]
        return [line["message"] for line in self.select("alarm", destination=destination)] + logged


class DebeziumPeer(PeerProcess):
    """Debezium 3.5.0.Final's embedded engine with its MariaDB connector (``io.pycanal.peers.DebeziumPeer``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("debezium", "io.pycanal.peers.DebeziumPeer", **kwargs)

    def start_engine(self, name: str, properties: dict[str, Any], **settings: Any) -> None:
        self.command({"cmd": "start", "name": name, "properties": properties, **settings})

    def records(self, name: str) -> list[dict[str, Any]]:
        return self.select("record", name=name)


def mariadb_properties(host: str, port: int, user: str, password: str, server_id: int) -> dict[str, str]:
    """Debezium's MariaDB connector settings for a private server: streaming from where the binlog is when it starts
    (``snapshot.mode=no_data``: the schema is read, no rows), no locks."""
    return {
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": str(server_id),
        "snapshot.mode": "no_data",
        "snapshot.locking.mode": "none",
        "include.schema.changes": "true",
        "database.ssl.mode": "disable",
        # the schema of the captured tables only: another test's table Debezium cannot parse is not its business
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
    }


def wait_all(peers: Iterable[PeerProcess]) -> None:
    for peer in peers:
        peer.close()
