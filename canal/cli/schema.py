"""``canal schema show|rebuild|dump``: a destination's schema history (the table layouts at any binlog position).

* ``show`` prints the layouts the history gives at a position (default: its newest state), as CREATE TABLE.
* ``rebuild`` starts a destination's history over at a position, from the server's layouts now -- after checking
  that no DDL lies between that position and now -- or from a snapshot file ``dump`` wrote. It is the recovery when a
  destination stops with a SchemaError: rebuild at its cursor (if no DDL followed it) and start it again.
* ``dump`` writes the server's layouts now as a history document with one snapshot, for destinations that read
  binlog files with no server to ask (``rebuild --snapshot FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any

from canal.cli.common import CliError, add_source_arguments, load_instance_config
from canal.cli.position import add_meta_arguments, check_not_running, meta_manager
from canal.errors import PositionError, SourceError
from canal.parse.schema_tracking import first_layout_ddl, read_layouts
from canal.parse.source import BinlogSource
from canal.parse.sources import open_source
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import SchemaHistory
from canal.schema.history_store import FileHistoryStore, MemoryHistoryStore

_AT = re.compile(r"^(?P<file>[^\s:/\\]+):(?P<offset>\d+)$")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "schema",
        help="show, rebuild or dump a destination's schema history",
        description="A destination's schema history: every table's layout at any binlog position, kept with its "
        "meta (file meta directory or ZooKeeper).",
    )
    ssub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    show = ssub.add_parser(
        "show",
        help="print the table layouts at a position",
        description="Print each table's layout as the history gives it at --at (default: its newest state), as "
        "CREATE TABLE statements. Exit status 1 when the destination has no history.",
    )
    add_meta_arguments(show, client=False)
    show.add_argument("--at", metavar="FILE:POS", help="binlog position, e.g. mysql-bin.000003:1234")
    show.add_argument("--table", metavar="DB.TABLE", help="only this table")
    show.set_defaults(run=run_show)

    rebuild = ssub.add_parser(
        "rebuild",
        help="start the history over at a position",
        description="Start the destination's schema history over at --at: from the server's layouts now (refused "
        "when a DDL lies between --at and now, unless --force) or from --snapshot FILE (canal schema dump). Stop "
        "the destination first.",
    )
    add_meta_arguments(rebuild, client=False)
    rebuild.add_argument("--at", metavar="FILE:POS", required=True, help="binlog position the layouts hold at")
    rebuild.add_argument("--snapshot", metavar="FILE", help="a history document written by canal schema dump")
    rebuild.add_argument("--force", action="store_true", help="rebuild even across DDL, or while a server runs it")
    add_source_arguments(rebuild, destination=False)
    rebuild.set_defaults(run=run_rebuild)

    dump = ssub.add_parser(
        "dump",
        help="write the server's table layouts now",
        description="Write the server's table layouts now as a schema history document (one snapshot), for "
        "destinations that read binlog files (canal schema rebuild --snapshot FILE).",
    )
    dump.add_argument("--out", metavar="FILE", default="-", help="output file (default: stdout)")
    add_source_arguments(dump)
    dump.set_defaults(run=run_dump)


def _parse_at(text: str) -> EntryPosition:
    match = _AT.match(text.strip())
    if match is None or int(match.group("offset")) < 4:
        raise PositionError(f"--at {text!r}: give a binlog position FILE:POS with POS >= 4, e.g. mysql-bin.000003:4")
    return EntryPosition(match.group("file"), int(match.group("offset")))


@contextlib.contextmanager
def _history(args: argparse.Namespace) -> Iterator[SchemaHistory]:
    with meta_manager(args) as meta:
        yield SchemaHistory(meta.schema_history_store(args.destination), destination=args.destination)


@contextlib.contextmanager
def _source(args: argparse.Namespace) -> Iterator[BinlogSource]:
    config = load_instance_config(args)
    source = open_source(config.master, config)
    try:
        source.open()
        yield source
    finally:
        with contextlib.suppress(SourceError, OSError):
            source.close()


def _print_catalog(catalog: SchemaCatalog, table: str | None, mariadb: bool) -> int:
    tables = sorted(catalog, key=lambda t: t.full_name)
    if table is not None:
        tables = [t for t in tables if t.full_name == table]
        if not tables:
            print(f"canal schema show: no table {table} at that position", file=sys.stderr)
            return 1
    for t in tables:
        print(f"-- {t.full_name}")
        print(t.show_create(mariadb=mariadb) + ";")
    return 0


def run_show(args: argparse.Namespace) -> int:
    with _history(args) as history:
        if history.is_empty:
            print(f"canal schema show: destination {args.destination!r} has no schema history", file=sys.stderr)
            return 1
        if args.at is not None:
            catalog = history.at(_parse_at(args.at))
        else:
            position = history.position
            assert position is not None
            catalog = history.at(EntryPosition(position.journal_name, position.position, included=True))
        return _print_catalog(catalog, args.table, history.mariadb)


def run_rebuild(args: argparse.Namespace) -> int:
    at = _parse_at(args.at)
    if args.snapshot is not None:
        if args.properties or args.address:
            raise CliError("give either --snapshot or a source (--properties / --address), not both")
        snapshot = SchemaHistory(FileHistoryStore(args.snapshot))
        if snapshot.is_empty:
            raise CliError(f"{args.snapshot} holds no schema history")
        newest = snapshot.position
        assert newest is not None
        catalog = snapshot.at(EntryPosition(newest.journal_name, newest.position, included=True))
        origin = None
    else:
        with _source(args) as source:
            catalog, read_at = read_layouts(source)
            ddl = first_layout_ddl(source, at, read_at)
            origin = source.address
        if ddl is not None and not args.force:
            raise CliError(
                f"{ddl} lies between {at} and now, so the layouts read now do not hold at {at}: pick a position after "
                "it, or pass --force"
            )
    check_not_running(args)
    with _history(args) as history:
        history.bootstrap(at, catalog, origin=origin)
    print(f"schema history of {args.destination!r} rebuilt at {at} with {len(catalog.tables)} tables")
    return 0


def run_dump(args: argparse.Namespace) -> int:
    with _source(args) as source:
        catalog, at = read_layouts(source)
    store = MemoryHistoryStore() if args.out == "-" else FileHistoryStore(args.out)
    SchemaHistory(store).bootstrap(at, catalog)
    if isinstance(store, MemoryHistoryStore):
        print(store.text)
    return 0
