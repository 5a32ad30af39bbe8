"""A private ZooKeeper server (see :mod:`canal.testing.services`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from canal.errors import ServiceError

if TYPE_CHECKING:
    pass

from canal.testing.services.process import SETUP_COMMAND, _find_executable, _Service


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
