"""A private Spark standalone cluster and a Spark Connect server, from the pip ``pyspark`` (see
:mod:`canal.testing.services`)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any, ClassVar, Self

from canal.errors import ServiceError
from canal.testing.services.process import _find_executable, _Service, free_port, listens_on
from canal.testing.services.spark_archive import driver_java_options, spark_home


def _daemon_java_opts() -> str:
    """The options of the daemons' JVMs and their executors': the drivers' (with the setup's class archive when there
    is one, :mod:`canal.testing.services.spark_archive`), IPv4 only."""
    return f"{driver_java_options()} -Djava.net.preferIPv4Stack=true"


def _q(path: Path) -> str:
    return shlex.quote(str(path))


def _absolute_pythonpath() -> str:
    """This process's ``PYTHONPATH`` with absolute entries: executors run in the worker's directory, where relative
    entries would name other directories."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(os.path.abspath(entry) for entry in entries if entry)


class _SparkDaemon(_Service):
    """A Spark JVM started through ``bin/spark-class`` or ``bin/spark-submit``, which ``exec`` the JVM: the pid we
    hold is the JVM's, so stopping it by pid and the parent-death signal reach the JVM itself."""

    start_timeout: float = 90.0
    daemon_memory: ClassVar[str] = "512m"

    def _check_binaries(self) -> None:
        _find_executable("java", type(self).__name__)
        self.spark_home = spark_home()

    def _initialize(self, workdir: Path) -> None:
        (workdir / "conf").mkdir()

    def _conf_dir(self) -> Path:
        """An empty configuration directory, never spark-defaults from anywhere else: pyspark's own ``conf``, which
        the pip package does not have -- the class path the drivers' class archive was written with, so this JVM
        maps it too -- else the empty one in the run directory."""
        assert self.workdir is not None
        shipped = self.spark_home / "conf"
        return self.workdir / "conf" if shipped.exists() else shipped

    def _environment(self) -> dict[str, str]:
        assert self.workdir is not None
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self.spark_home),
            SPARK_CONF_DIR=str(self._conf_dir()),
            SPARK_LOG_DIR=str(self.workdir),
            SPARK_PID_DIR=str(self.workdir),
            SPARK_LOCAL_IP=self.host,
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_DAEMON_JAVA_OPTS=_daemon_java_opts(),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        return env

    def _launch(self) -> None:
        try:
            super()._launch()
        except ServiceError as exc:
            if "Address already in use" in str(exc) or "BindException" in str(exc):
                raise ServiceError(f"{self.kind} port {self.port} is in use: {exc}") from exc
            raise


class SparkMaster(_SparkDaemon):
    """A standalone master (``org.apache.spark.deploy.master.Master``) on a free loopback port; its web UI's JSON
    (``/json/``) tells readiness and which workers are registered."""

    kind: ClassVar[str] = "spark-master"

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.webui_port = free_port()

    def __repr__(self) -> str:
        return f"SparkMaster(url={self.url!r}, pid={self.pid}, running={self.is_running})"

    @property
    def url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return f"spark://{self.address}"

    def state(self) -> dict[str, Any]:
        """The master's ``/json/`` document (status, workers, applications)."""
        with urllib.request.urlopen(f"http://{self.host}:{self.webui_port}/json/", timeout=2.0) as response:
            state: dict[str, Any] = json.loads(response.read())
            return state

    def alive_workers(self) -> list[dict[str, Any]]:
        """The registered workers in state ALIVE."""
        return [worker for worker in self.state().get("workers", []) if worker.get("state") == "ALIVE"]

    def _command(self) -> list[str]:
        return [
            str(self.spark_home / "bin" / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            *("--host", self.host, "--port", str(self.port), "--webui-port", str(self.webui_port)),
        ]

    def _probe(self) -> bool:
        try:
            state = self.state()
        except (OSError, ValueError):
            return False
        if state.get("url") != self.url or state.get("status") != "ALIVE":
            return False
        return self.pid is not None and listens_on(self.pid, self.host, self.port)


class SparkWorker(_SparkDaemon):
    """A standalone worker registered with ``master``, in its own mount namespace: a tmpfs is mounted over this
    machine's temporary directory (``tempfile.gettempdir()``, where the driver's and the tests' files are) before
    the JVM starts, so the worker and its executors see an empty one of their own, as on another host; the rest of
    the file system is shared, as software installed on every host is. What the executors run -- this interpreter's
    environment, pyspark, the ``canal`` package's checkout and the ``PYTHONPATH`` entries (:meth:`shared_paths`) --
    may lie in the temporary directory (a clone in ``/tmp``): each is bound into the worker's tmpfs at its own path,
    read-only, and nothing else of the directory is.

    Needs root (``unshare -m``). The worker's directory (executors' logs, ``work/``) is inside that tmpfs: from
    outside, read it as ``/proc/PID/root/<its path>`` while the worker runs.
    """

    kind: ClassVar[str] = "spark-worker"
    daemon_memory: ClassVar[str] = "256m"

    def __init__(self, master: SparkMaster, cores: int = 1, memory: str = "2g", port: int | None = None) -> None:
        super().__init__(port)
        self.master = master
        self.cores = cores
        self.memory = memory
        self.webui_port = free_port()
        self.hidden = Path(tempfile.gettempdir()).resolve()
        """What the worker cannot see: it gets an empty tmpfs there."""

    def __repr__(self) -> str:
        return f"SparkWorker(address={self.address!r}, master={self.master.url!r}, pid={self.pid})"

    def shared_paths(self) -> list[Path]:
        """What of :attr:`hidden` the worker and its executors still see: the paths that what they run lies in and
        that lie in the hidden directory, none inside another. ServiceError if one is the hidden directory itself."""
        import canal

        needed = [
            sys.prefix,
            sys.base_prefix,
            str(spark_home()),
            str(Path(canal.__file__).parent.parent),  # the checkout (an editable install, or PYTHONPATH's)
            *_absolute_pythonpath().split(os.pathsep),
        ]
        inside = {path for path in (Path(e).resolve() for e in needed if e) if path.is_relative_to(self.hidden)}
        if self.hidden in inside:
            raise ServiceError(
                f"SparkWorker hides {self.hidden} from its executors, but they need all of it (the Python "
                "environment, the checkout or a PYTHONPATH entry is that directory): put them in a directory of "
                "their own"
            )
        return sorted(p for p in inside if p.exists() and not any(p != q and p.is_relative_to(q) for q in inside))

    def _check_binaries(self) -> None:
        super()._check_binaries()
        self._unshare = _find_executable("unshare", "SparkWorker")
        if os.geteuid() != 0:
            raise ServiceError("SparkWorker needs root for its own mount namespace (unshare -m, mount -t tmpfs)")
        self.shared_paths()

    def _command(self) -> list[str]:
        assert self.workdir is not None
        worker = [
            str(self.spark_home / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            *("--host", self.host, "--port", str(self.port), "--webui-port", str(self.webui_port)),
            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(self.workdir / "work")),
            self.master.url,
        ]
        # The tmpfs is made aside, in the worker's directory, the shared paths bound into it at their places, and
        # then moved over the hidden directory: a path is bound while its original can still be reached.
        view = self.workdir / "view"
        steps = [f"mkdir -p {_q(view)}", f"mount -t tmpfs -o mode=1777 pycanal-worker {_q(view)}"]
        for path in self.shared_paths():
            target = view / path.relative_to(self.hidden)
            make = f"mkdir -p {_q(target)}" if path.is_dir() else f"mkdir -p {_q(target.parent)} && : > {_q(target)}"
            bind = f"mount --bind {_q(path)} {_q(target)} && mount -o remount,bind,ro {_q(target)}"
            steps += [make, bind]
        steps += [
            f"mount --move {_q(view)} {_q(self.hidden)}",
            f"mkdir -p {_q(self.workdir / 'work')}",
            f"exec {shlex.join(worker)}",
        ]
        # unshare without --fork exec()s sh, which exec()s spark-class, which exec()s the JVM: one pid throughout.
        # Mount propagation is private (unshare's default), so the mounts stay inside the namespace.
        return [self._unshare, "--mount", "--", "/bin/sh", "-c", " && ".join(steps)]

    def _probe(self) -> bool:
        try:
            workers = self.master.alive_workers()
        except (OSError, ValueError):
            return False
        return any(worker.get("host") == self.host and worker.get("port") == self.port for worker in workers)


class SparkCluster:
    """A standalone master and ``workers`` workers (each with ``cores`` cores and ``memory`` for executors) on
    127.0.0.1, each worker in its own mount namespace (:class:`SparkWorker`).

    A driver connects with ``spark.master`` = :attr:`master_url`; :meth:`driver_conf` gives the settings that keep a
    two-core machine's executors small. One Python process holds one SparkContext: a test whose process already has
    a local SparkSession runs its cluster driver in a subprocess.
    """

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "2g") -> None:
        self.master = SparkMaster()
        self.workers = [SparkWorker(self.master, cores=cores, memory=memory) for _ in range(workers)]
        self.ready_seconds: float | None = None
        """How long the last :meth:`start` took, master and workers."""

    def __repr__(self) -> str:
        return f"SparkCluster(master_url={self.master_url!r}, workers={len(self.workers)}, running={self.is_running})"

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return self.master.url

    @property
    def is_running(self) -> bool:
        return self.master.is_running and all(worker.is_running for worker in self.workers)

    def driver_conf(self, executor_memory: str = "512m") -> dict[str, str]:
        """SparkSession settings for a driver on this cluster: one executor per worker, one core each, small heaps,
        loopback addresses, this interpreter for the Python workers; the driver maps the setup's class archive when
        there is one (:mod:`canal.testing.services.spark_archive`)."""
        return {
            "spark.master": self.master_url,
            "spark.executor.instances": str(len(self.workers)),
            "spark.executor.cores": "1",
            "spark.cores.max": str(len(self.workers)),
            "spark.executor.memory": executor_memory,
            "spark.driver.extraJavaOptions": _daemon_java_opts(),
            "spark.executor.extraJavaOptions": _daemon_java_opts(),
            "spark.driver.host": self.master.host,
            "spark.driver.bindAddress": self.master.host,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            # executors of one host read each other's shuffle files from disk by default; these hosts are one
            # machine whose workers cannot see each other's files: fetch over the network, as between hosts
            "spark.shuffle.readHostLocalDisk": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": _absolute_pythonpath(),
        }

    def driver_env(self) -> dict[str, str]:
        """Environment variables a driver process on this cluster needs (merge them into ``os.environ`` of a driver
        subprocess): PySpark's RDD path takes the executors' Python from ``PYSPARK_PYTHON`` of the driver, not from
        ``spark.pyspark.python``; the Python workers import from ``PYTHONPATH`` with absolute entries."""
        return {
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": self.master.host,
            "PYTHONPATH": _absolute_pythonpath(),
        }

    def start(self) -> Self:
        """Start the master, then the workers (each waits until the master lists it ALIVE). Raises ServiceError;
        whatever started is stopped again."""
        import time

        began = time.monotonic()
        try:
            self.master.start()
            for worker in self.workers:
                worker.start()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - began
        return self

    def ensure_running(self) -> None:
        """Restart whichever process an earlier test stopped or killed."""
        if not self.master.is_running:
            self.master.restart()
        for worker in self.workers:
            if not worker.is_running:
                worker.restart()

    def stop(self) -> None:
        """Stop the workers (their executors end with them), then the master."""
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SparkConnectServer(_SparkDaemon):
    """A Spark Connect server (``org.apache.spark.sql.connect.service.SparkConnectServer``, the jar pyspark ships)
    on a free loopback port, with its own master (``local[2]`` unless given, e.g. a :class:`SparkCluster`'s URL).

    ``sbin/start-connect-server.sh`` either daemonizes the server (``nohup``, a pid file: the JVM is no child of
    ours and outlives a killed test run) or, with ``--wait``, keeps a shell between us and the JVM; this service
    runs the same class through ``bin/spark-submit``, which ``exec``\\ s the JVM, with ``SPARK_LOG_DIR`` and
    ``SPARK_PID_DIR`` in its run directory as the script would set them.
    """

    kind: ClassVar[str] = "spark-connect"
    daemon_memory: ClassVar[str] = "1g"

    def __init__(self, master: str = "local[2]", port: int | None = None, conf: dict[str, str] | None = None) -> None:
        super().__init__(port)
        self.master = master
        self.conf = dict(conf or {})

    def __repr__(self) -> str:
        return f"SparkConnectServer(url={self.url!r}, master={self.master!r}, pid={self.pid})"

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:PORT``, what ``SparkSession.builder.remote()`` takes."""
        return f"sc://{self.address}"

    def _check_binaries(self) -> None:
        super()._check_binaries()
        if not any((self.spark_home / "jars").glob("spark-connect_*.jar")):
            raise ServiceError(f"SparkConnectServer needs spark-connect_*.jar in {self.spark_home / 'jars'}")

    def _command(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.driver.memory": self.daemon_memory,
            "spark.driver.extraJavaOptions": _daemon_java_opts(),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            **self.conf,
        }
        return [
            str(self.spark_home / "bin" / "spark-submit"),
            *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
            *("--name", "Spark Connect server", "--master", self.master),
            *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")),
            "spark-internal",
        ]

    def _probe(self) -> bool:
        # The server creates its SparkSession before it binds the gRPC port: its listening socket is a ready server
        # (one that lost the port to another process exits with a BindException, which the start-up loop reports).
        return self.pid is not None and listens_on(self.pid, self.host, self.port)


__all__ = ["SparkCluster", "SparkConnectServer", "SparkMaster", "SparkWorker", "spark_home"]
