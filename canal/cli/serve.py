"""``canal serve CONF_DIR``: run a canal conf directory as a long-running server with its Prometheus exporter, as
canal's ``bin/startup.sh`` does.

Every destination of the directory starts (under ZooKeeper HA, each competes for its running node). Each gets a
consumer thread that waits until this process serves the destination, then hands every batch to the consumer and
acks it when the consumer returns: by default one JSON line per row on stdout (``canal tail --json``'s lines, for a
pipe), or ``--consumer MODULE:CALLABLE``, called as ``callable(destination, message)``. A consumer that raises
rolls its batch back and stops the server (exit status 2): nothing is acked past what it took. A destination this
process stops serving (another took it over, ZooKeeper lost) goes back to waiting; one that stopped on an error no
retry fixes stays stopped -- its metrics say so (``canal_instance_running`` 0, ``canal_instance_last_error_info``)
-- while the others go on.

SIGTERM, SIGINT or SIGHUP stops it cleanly: the consumers end after the batch in hand (a slow one is waited for up to
the server's ``stop_timeout_s``; past it, its batch is delivered again by the next run), the destinations stop (their
cursors flushed, bounded when ZooKeeper does not answer: ``EmbeddedServer.stop``), the exporter closes, and the
command exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TextIO

from canal.cli.common import CliError
from canal.cli.tail import json_line
from canal.client import ClientIdentity
from canal.errors import CanalError, NotRunningError
from canal.log import destination_logger
from canal.protocol import EMPTY_MESSAGE_ID, EntryType, Message
from canal.server import EmbeddedServer

DEFAULT_METRICS_PORT = 11112
"""canal's ``canal.metrics.pull.port`` default."""
BATCH_SIZE = 1000
POLL_S = 0.5  # a consumer's get waits this long, so it sees a stop within it
_log = destination_logger(__name__, "-")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Each stops the server cleanly (SIGHUP: its terminal closed; canal's JVM runs its shutdown hook on each)."""

Consumer = Callable[[str, Message], object]


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run a conf directory as a long-running server with its Prometheus exporter",
        description="Run every destination of a canal conf directory (canal.properties and "
        "{destination}/instance.properties) until SIGTERM, SIGINT or SIGHUP, as canal's startup.sh does, with the "
        "Prometheus exporter (extra 'prometheus'). Each destination's batches go to the consumer and are acked when it "
        "returns: by default one JSON line per row on stdout (as 'canal tail --json' prints them). A consumer that "
        "raises stops the server (exit status 2). SIGTERM stops it cleanly (exit status 0).",
    )
    p.add_argument("conf_dir", metavar="CONF_DIR", help="the canal conf directory")
    p.add_argument(
        "--consumer",
        metavar="MODULE:CALLABLE",
        help="called as CALLABLE(destination, message) for each batch, which is acked when it returns",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help=f"the exporter's port (default: canal.metrics.pull.port, else {DEFAULT_METRICS_PORT}; 0: a free one)",
    )
    p.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDR", help="the exporter's address")
    p.add_argument("--no-metrics", action="store_true", help="run without the exporter")
    p.add_argument("--address", metavar="NAME", help="this process's name in ZooKeeper (default host:pid)")
    p.set_defaults(run=run)


def load_consumer(spec: str) -> Consumer:
    """``MODULE:CALLABLE`` imported: the consumer it names."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise CliError(f"--consumer {spec!r}: give MODULE:CALLABLE, e.g. myapp.handlers:on_batch")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"--consumer {spec!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    if not callable(found):
        raise CliError(f"--consumer {spec!r} is not callable")
    consumer: Consumer = found
    return consumer


class JsonLines:
    """The default consumer: a JSON line per row (and per DDL) on ``stream``, flushed before the batch is acked."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()  # destinations write whole batches, one at a time

    def __call__(self, destination: str, message: Message) -> None:
        lines = []
        for entry in message.entries:
            rc = entry.row_change
            if entry.entry_type is not EntryType.ROWDATA or rc is None:
                continue
            if rc.is_ddl or not rc.rows:
                if rc.sql:
                    lines.append(json_line(destination, entry, None))
                continue
            lines.extend(json_line(destination, entry, row) for row in rc.rows)
        if lines:
            with self._lock:
                self._stream.write("\n".join(lines) + "\n")
                self._stream.flush()


class _Consuming:
    """One destination's consumer thread (module docstring)."""

    def __init__(
        self, server: EmbeddedServer, destination: str, consumer: Consumer, stop: threading.Event, failed: list[str]
    ) -> None:
        self.server = server
        self.destination = destination
        self.consumer = consumer
        self.stop = stop
        self.failed = failed
        self.log = destination_logger(__name__, destination)
        self.thread = threading.Thread(target=self.run, name=f"canal-serve-{destination}", daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            if not self.server.wait_serving(self.destination, POLL_S):
                continue
            # through the server's calls, not the instance's: a hand-over to another replica (a balance group)
            # refuses new batches there while the batch in hand is acked, so that nothing printed is delivered again
            client = ClientIdentity(self.destination)
            try:
                while not self.stop.is_set():
                    message = self.server.get_without_ack(client, BATCH_SIZE, POLL_S)
                    if message.id == EMPTY_MESSAGE_ID:
                        continue
                    try:
                        self.consumer(self.destination, message)
                    except BaseException:
                        self.server.rollback(client, message.id)
                        raise
                    self.server.ack(client, message.id)
            except NotRunningError as exc:
                cause = exc.__cause__
                if cause is not None and not isinstance(cause, NotRunningError):
                    # the destination stopped on an error no retry fixes: it stays so, in its metrics (running 0,
                    # its error's class), and the other destinations go on
                    self.log.error("stopped on %s: %s; the other destinations go on", type(cause).__name__, cause)
                    return
                self.log.info("not served here now (%s); waiting", exc)
                # a hand-over refuses batches before this process stops serving: look again after a while, not in
                # a loop of refusals meanwhile
                self.stop.wait(POLL_S)
            except CanalError as exc:
                self._fail(f"{type(exc).__name__}: {exc}")
                return
            except Exception as exc:
                self.log.exception("the consumer failed; its batch was rolled back")
                self._fail(f"the consumer raised {type(exc).__name__}: {exc}")
                return

    def _fail(self, why: str) -> None:
        self.failed.append(f"destination {self.destination}: {why}")
        self.stop.set()


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run(args: argparse.Namespace) -> int:
    if threading.current_thread() is not threading.main_thread():
        raise CliError("canal serve runs in the main thread (it stops on SIGTERM)")
    consumer: Consumer = load_consumer(args.consumer) if args.consumer else JsonLines(sys.stdout)
    kwargs = {"address": args.address} if args.address else {}
    server = EmbeddedServer.from_conf_dir(args.conf_dir, **kwargs)
    assert server.server_config is not None
    exporter = None
    if not args.no_metrics:
        from canal.metrics import require_prometheus, start_http_server

        require_prometheus()
        port = args.metrics_port
        if port is None:
            configured = server.server_config.metrics_port
            port = DEFAULT_METRICS_PORT if configured is None else configured
    stop = threading.Event()
    failed: list[str] = []
    with _stop_on_signals(stop):
        server.start()
        try:
            if not args.no_metrics:
                exporter = start_http_server(port, args.metrics_address, server=server)
                print(f"canal serve: metrics at {exporter.url}", file=sys.stderr, flush=True)
            threads: list[_Consuming] = []
            for name in server.destinations:
                server.start_destination(name)
                consuming = _Consuming(server, name, consumer, stop, failed)
                consuming.thread.start()
                threads.append(consuming)
            print(
                f"canal serve: {len(threads)} destinations ({', '.join(server.destinations) or 'none'}); SIGTERM stops",
                file=sys.stderr,
                flush=True,
            )
            while not stop.wait(1.0):
                pass
            # each consumer finishes the batch in hand and acks it before the server stops: a batch it handled and
            # could not ack would be handed to the consumer again by the next run. Bounded as the server's stop is
            deadline = time.monotonic() + server.stop_timeout_s
            for consuming in threads:
                consuming.thread.join(max(0.0, deadline - time.monotonic()))
            busy = [c.destination for c in threads if c.thread.is_alive()]
            if busy:
                _log.warning(
                    "the consumers of %s did not return within %.1fs: their batches in hand are delivered again "
                    "by the next run",
                    ", ".join(busy),
                    server.stop_timeout_s,
                )
        finally:
            if exporter is not None:
                exporter.stop()
            server.stop()
    if failed:
        raise CliError("; ".join(failed))
    print("canal serve: stopped", file=sys.stderr, flush=True)
    return 0
