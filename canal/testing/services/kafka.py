"""A private Kafka broker in KRaft mode (broker and controller in one process), from Maven Central's Kafka jars (see
:mod:`canal.testing.services` and :mod:`canal.testing.jars`)."""

from __future__ import annotations

import base64
import os
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

from canal.errors import ServiceError
from canal.testing.services.process import _find_executable, _Service, _tail, free_port, listens_on


class KafkaServer(_Service):
    """One Kafka broker (``kafka.Kafka``, the jars of ``jars/kafka``) on a free loopback port, its controller on
    another, its log in its own temporary directory: formatted once with a fresh cluster id, then started; stopped
    by pid like every service here. Topics are created with :meth:`create_topic` (automatic creation is off, so a
    misspelt topic fails a write instead of making a topic of one partition).

    ``bootstrap`` is what clients take (``kafka.bootstrap.servers`` for Spark's Kafka sink, ``bootstrap.servers``
    for a client library).
    """

    kind: ClassVar[str] = "kafka"
    start_timeout: float = 90.0
    JVM_ARGS: ClassVar[tuple[str, ...]] = (
        "-Xms64m",
        "-Xmx512m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # a test broker lives for minutes: the client compiler only, as ZooKeeper's
        "-Djava.net.preferIPv4Stack=true",
        "-Djava.awt.headless=true",
    )

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.controller_port = free_port()
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()

    def __repr__(self) -> str:
        return f"KafkaServer(bootstrap={self.bootstrap!r}, pid={self.pid}, running={self.is_running})"

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``."""
        return self.address

    def _check_binaries(self) -> None:
        from canal.testing import jars

        self._java = _find_executable("java", "KafkaServer")
        reason = jars.skip_reason()
        if reason is not None:
            raise ServiceError(f"KafkaServer needs the Kafka jars: {reason}")
        self._classpath = jars.classpath("kafka")

    def _properties(self) -> Path:
        assert self.workdir is not None
        path = self.workdir / "server.properties"
        path.write_text(
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.voters=1@{self.host}:{self.controller_port}\n"
            f"listeners=PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}\n"
            f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={self.workdir / 'data'}\n"
            "num.partitions=1\n"
            "auto.create.topics.enable=false\n"
            "offsets.topic.replication.factor=1\n"
            "offsets.topic.num.partitions=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "log.flush.interval.messages=9223372036854775807\n"
            "num.io.threads=2\n"
            "num.network.threads=2\n"
            "background.threads=2\n"
        )
        (self.workdir / "log4j2.properties").write_text(
            "rootLogger.level=WARN\nrootLogger.appenderRef.out.ref=out\n"
            "appender.out.type=Console\nappender.out.name=out\nappender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=%d %p %c{1}: %m%n\n"
        )
        return path

    def _java_command(self, main: str, *args: str) -> list[str]:
        assert self.workdir is not None
        return [
            self._java,
            *self.JVM_ARGS,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    def _initialize(self, workdir: Path) -> None:
        import subprocess

        (workdir / "data").mkdir()
        properties = self._properties()
        done = subprocess.run(
            # --option=value: a cluster id is base64url and may begin with "-", which argparse takes for an option
            self._java_command(
                "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}", f"--config={properties}"
            ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=workdir,
            timeout=120,
        )
        if done.returncode != 0:
            raise ServiceError(f"formatting Kafka's log failed (rc {done.returncode}): {done.stdout}{done.stderr}")

    def _command(self) -> list[str]:
        return self._java_command("kafka.Kafka", str(self._properties()))  # rewritten: the port may have changed

    def _probe(self) -> bool:
        return self.pid is not None and listens_on(self.pid, self.host, self.port)

    def _after_first_start(self) -> None:
        # the broker listens before its metadata is ready: a topic made and described is a broker that serves
        self.create_topic(f"pycanal-ready-{os.getpid()}", partitions=1)

    def _launch(self) -> None:
        try:
            super()._launch()
        except ServiceError as exc:
            if "Address already in use" in str(exc) or "BindException" in str(exc):
                raise ServiceError(f"kafka port {self.port} is in use: {exc}") from exc
            raise

    def admin(self) -> Any:
        """A ``confluent_kafka.admin.AdminClient`` on this broker (PyPI ``confluent-kafka``, pycanal's dev extra)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 60.0) -> None:
        """Create topic ``name`` with ``partitions`` partitions (one replica) and wait until it has a leader."""
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        admin = self.admin()
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        try:
            futures[name].result(timeout)
        except Exception as exc:
            tail = _tail(self.log_path)
            raise ServiceError(f"creating Kafka topic {name!r} failed: {exc}; log tail:\n{tail}") from exc

        deadline = time.monotonic() + timeout
        while True:
            topics = admin.list_topics(name, timeout=timeout).topics
            described = topics.get(name)
            if (
                described is not None
                and described.error is None
                and len(described.partitions) == partitions
                and all(p.leader >= 0 for p in described.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise ServiceError(f"Kafka topic {name!r} has no leader after {timeout:.0f} s")
            time.sleep(0.05)


__all__ = ["KafkaServer"]
