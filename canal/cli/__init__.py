"""The ``canal`` command line.

::

    canal tail      --properties conf/example/instance.properties [--from mysql-bin.000003:4 | 2024-01-02T03:04:05]
    canal snapshot  --properties conf/example/instance.properties [--tables shop.orders,shop.items] [--json]
    canal position  show|set --meta-dir DIR | --zk HOSTS  --destination D [--client-id 1001] ...
    canal check     --address HOST:PORT --user canal [--password]
    canal ha status --zk HOSTS [--destination D]
    canal serve     CONF_DIR [--consumer MODULE:CALLABLE] [--metrics-port 11112]

Exit status: 0 on success, 1 when a check failed or there was nothing to show, 2 on an error (one line on stderr, no
traceback; credentials never appear). ``main(argv)`` returns the status instead of exiting, for tests and embedding.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from canal import __version__
from canal.cli import check as check
from canal.cli import ha as ha
from canal.cli import position as position
from canal.cli import schema as schema
from canal.cli import serve as serve
from canal.cli import snapshot as snapshot
from canal.cli import tail as tail
from canal.errors import CanalError
from canal.parse.mysql.connect import plain_connections_noted_at

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canal",
        description="pycanal: MySQL/MariaDB binlog change capture, embedded. Tail changes, copy tables, manage "
        "cursors, check a server's setup, inspect ZooKeeper HA state, run a conf directory as a server.",
    )
    parser.add_argument("--version", action="version", version=f"pycanal {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    tail.add_parser(sub)
    snapshot.add_parser(sub)
    position.add_parser(sub)
    check.add_parser(sub)
    ha.add_parser(sub)
    schema.add_parser(sub)
    serve.add_parser(sub)
    return parser


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    root = logging.getLogger("canal")
    root.setLevel(level)
    if not any(getattr(h, "_canal_cli", False) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("canal: %(levelname)s %(message)s"))
        root.addHandler(handler)
    # kazoo logs every failed connection attempt; our own error line says what matters
    logging.getLogger("kazoo").setLevel(logging.CRITICAL if verbosity <= 0 else level)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (tests and embedders replace it)."""

    _canal_cli = True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version, usage errors
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_ERROR)
    _setup_logging(args.verbose)
    # a short command: its user chose the mode (check reports TLS in a line); serve keeps the warning
    plain_level = logging.WARNING if args.command == "serve" else logging.INFO
    try:
        with plain_connections_noted_at(plain_level):
            status: int = args.run(args)
        return status
    except CanalError as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"canal {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_OK
