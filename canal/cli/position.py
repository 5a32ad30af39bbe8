"""``canal position show|set``: a client's cursor in a file meta directory or in ZooKeeper."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from canal.cli.common import (
    ZK_TIMEOUT_S,
    CliError,
    add_source_arguments,
    load_instance_config,
    parse_hosts,
    parse_timestamp,
    positive_float,
)
from canal.client import DEFAULT_CLIENT_ID, ClientIdentity
from canal.config import to_zk_auth
from canal.errors import HAError, PositionError, SourceError
from canal.ha.running import RELEASED
from canal.meta import FileMetaManager, MetaManager, ZooKeeperMetaManager
from canal.meta.zkclient import make_client
from canal.parse.retry import position_problem
from canal.parse.source import BinlogSource
from canal.parse.sources import open_source
from canal.parse.start_position import StartPosition, align_to_transaction, find_by_timestamp
from canal.position import EntryPosition, LogIdentity, LogPosition


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "position",
        help="show or set a client's cursor",
        description="Show or set the cursor of a destination's client (where its next get resumes), kept in a file "
        "meta directory (canal's file-instance: DIR/{destination}/meta.dat) or in ZooKeeper (canal's layout).",
    )
    psub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    show = psub.add_parser(
        "show",
        help="print the cursor JSON",
        description="Print the client's cursor as canal's "
        "cursor JSON (one line). Exit status 1 when the client has no cursor.",
    )
    add_meta_arguments(show)
    show.set_defaults(run=run_show)

    set_ = psub.add_parser(
        "set",
        help="set the cursor",
        description="Set the client's cursor: --file/--offset (a transaction boundary; with a source the offset is "
        "moved back to its transaction's start), --timestamp (resolved against the source to the last transaction "
        "boundary before it) or --json (a cursor document as 'show' prints it; - reads stdin). Stop the consumers "
        "of the destination first: a running one overwrites the cursor with its own.",
    )
    add_meta_arguments(set_)
    what = set_.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", metavar="BINLOG", help="binlog file name, e.g. mysql-bin.000003")
    what.add_argument("--timestamp", metavar="TIME", help="ISO 8601 time (local time unless an offset is given)")
    what.add_argument("--json", dest="document", metavar="DOC", help="a cursor JSON document, or - for stdin")
    set_.add_argument("--offset", type=int, metavar="N", help="offset in --file (default 4, the file's start)")
    set_.add_argument("--force", action="store_true", help="ZooKeeper: set even while a server runs the destination")
    add_source_arguments(set_, destination=False)
    set_.set_defaults(run=run_set)


def add_meta_arguments(p: argparse.ArgumentParser, *, client: bool = True) -> None:
    """--meta-dir or --zk (with --zk-auth), --destination and, with ``client``, --client-id."""
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--meta-dir", metavar="DIR", help="file meta directory (canal.file.data.dir)")
    where.add_argument("--zk", metavar="HOSTS", help="ZooKeeper hosts, e.g. 127.0.0.1:2181[/chroot]")
    p.add_argument(
        "--zk-auth",
        metavar="SCHEME:CREDENTIAL",
        default=os.environ.get("PYCANAL_ZK_AUTH"),
        help="ZooKeeper authentication, e.g. digest:user:password (default: $PYCANAL_ZK_AUTH)",
    )
    p.add_argument(
        "--zk-timeout",
        type=positive_float,
        default=ZK_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for a connection to ZooKeeper before failing (default {ZK_TIMEOUT_S:g})",
    )
    p.add_argument("--destination", default="example", metavar="NAME", help="destination (default: example)")
    if client:
        p.add_argument(
            "--client-id", type=int, default=DEFAULT_CLIENT_ID, metavar="ID", help="client id (default 1001)"
        )


@contextlib.contextmanager
def meta_manager(args: argparse.Namespace) -> Iterator[MetaManager]:
    """The meta manager --meta-dir or --zk names, started."""
    manager: MetaManager
    if args.meta_dir:
        manager = FileMetaManager(args.meta_dir, flush_period_s=None)
    else:
        manager = ZooKeeperMetaManager(parse_hosts(args.zk), timeout_s=args.zk_timeout, auth=to_zk_auth(args.zk_auth))
    with manager:
        yield manager


def _where(args: argparse.Namespace) -> str:
    return f"meta dir {args.meta_dir}" if args.meta_dir else f"ZooKeeper {args.zk}"


def run_show(args: argparse.Namespace) -> int:
    client = ClientIdentity(args.destination, args.client_id)
    with meta_manager(args) as meta:
        cursor = meta.get_cursor(client)
    if cursor is None:
        print(f"canal position show: client {client} has no cursor in {_where(args)}", file=sys.stderr)
        return 1
    print(cursor.to_json())
    return 0


def _cursor_from_args(args: argparse.Namespace) -> LogPosition:
    has_source = bool(args.properties or args.address)
    if args.document is not None:
        if args.offset is not None:
            raise CliError("--offset goes with --file, not --json")
        text = sys.stdin.read() if args.document == "-" else args.document
        cursor = LogPosition.from_json(text)
        if has_source and cursor.position.journal_name:
            with _source(args) as source:
                check_on_server(source, cursor.position)
        return cursor
    if args.file is not None:
        offset = 4 if args.offset is None else args.offset
        if offset < 4:
            raise PositionError(f"--offset must be at least 4 (a binlog file's first event), got {offset}")
        start = StartPosition(EntryPosition(args.file, offset), reason="canal position set", aligned=False)
        if not has_source:
            print(
                f"canal position set: {args.file}:{offset} is not checked against the server (give --properties or "
                "--address to check that it has it, and to move the offset to its transaction's start)",
                file=sys.stderr,
            )
            return LogPosition(LogIdentity(), start.position)
        with _source(args) as source:
            check_on_server(source, start.position)
            aligned = align_to_transaction(source, start, None)
            return LogPosition(LogIdentity(source.address, -1), aligned.position, aligned.rows_done)
    if args.offset is not None:
        raise CliError("--offset goes with --file")
    ms = parse_timestamp(args.timestamp)
    if not has_source:
        raise CliError(
            "--timestamp is resolved against the server: add --properties FILE or --address HOST:PORT --user USER"
        )
    with _source(args) as source:
        found = find_by_timestamp(source, ms, reason="canal position set")
        return LogPosition(LogIdentity(source.address, -1), found.position, found.rows_done)


def check_on_server(source: BinlogSource, position: EntryPosition) -> None:
    """:class:`~canal.errors.PositionError` unless the server has ``position`` (its file, and the offset within
    it): a position it never had, or purged, would stop the next start."""
    journal = position.journal_name or ""
    files = source.binlog_files()
    problem = position_problem([(f.name, f.size) for f in files], journal, position.position)
    if problem is None and files and journal not in {f.name for f in files}:
        problem = f"{journal} was purged (its oldest binlog file is {files[0].name})"
    if problem is not None:
        raise PositionError(f"{journal}:{position.position} is not a position on {source.address}: {problem}")


@contextlib.contextmanager
def _source(args: argparse.Namespace) -> Iterator[BinlogSource]:
    """The source the arguments name, opened (and closed after)."""
    config = load_instance_config(args)
    source = open_source(config.master, config)
    try:
        source.open()
        yield source
    finally:
        # the position is found (or its error is on its way out); a connection that fails to close changes neither
        with contextlib.suppress(SourceError, OSError):
            source.close()


def check_not_running(args: argparse.Namespace) -> None:
    """CliError when a server runs the destination (ZooKeeper's running node), unless --force."""
    if not args.zk or args.force:
        return
    from kazoo.exceptions import KazooException, NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError

    from canal.meta import zkpaths

    zk = make_client(parse_hosts(args.zk), args.zk_timeout, to_zk_auth(args.zk_auth))
    path = zkpaths.destination_running_path(args.destination)
    try:
        zk.start(timeout=args.zk_timeout)
        try:
            data, _ = zk.get(path)
        except NoNodeError:
            return  # nobody runs the destination
        except KazooException as exc:  # not knowing is not "not running": the cursor could be overwritten under it
            raise HAError(
                f"cannot read {path} to check that destination {args.destination!r} is not running "
                f"({type(exc).__name__}); pass --force to set the position anyway"
            ) from None
    except KazooTimeoutError:
        raise HAError(f"cannot connect to ZooKeeper at {args.zk} within {args.zk_timeout:g} s") from None
    finally:
        zk.stop()
        zk.close()
    if not data or data == RELEASED:
        return
    try:
        owner = json.loads(data).get("address", "?")
    except (ValueError, AttributeError):
        owner = "?"
    raise CliError(
        f"destination {args.destination!r} is running on {owner}: stop it first (its cursor would be overwritten), "
        "or pass --force"
    )


def run_set(args: argparse.Namespace) -> int:
    client = ClientIdentity(args.destination, args.client_id)
    cursor = _cursor_from_args(args)
    check_not_running(args)
    with meta_manager(args) as meta:
        if not meta.has_subscribe(client):
            meta.subscribe(client)
        meta.update_cursor(client, cursor)
        if isinstance(meta, FileMetaManager):
            meta.flush()
    print(cursor.to_json())
    return 0
