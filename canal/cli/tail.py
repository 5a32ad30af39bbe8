"""``canal tail``: stream a destination's changes to the terminal, one line per row (or JSON lines)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import attrs

from canal.cli.common import add_source_arguments, load_instance_config, parse_start, positive_float, positive_int
from canal.client import DEFAULT_CLIENT_ID, ClientIdentity
from canal.config import BatchMode, InstanceConfig, MasterConfig, MetaMode
from canal.errors import SourceError
from canal.filter import TableFilter, compile_table_filter
from canal.instance import Instance
from canal.meta import FileMetaManager
from canal.mysql_json import JsonDiff, JsonDiffOperation, json_text
from canal.parse.sources import open_source
from canal.protocol import ABSENT, EMPTY_MESSAGE_ID, Entry, EntryType, EventType, Message, RowData
from canal.value_text import render_text

_BATCH = 512  # entries per get when changes are waiting
_POLL_S = 0.2  # how long one idle get waits for the next entry


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "tail",
        help="stream a destination's changes to the terminal",
        description=(
            "Stream the row changes and DDL of a destination, one line per row: "
            "'2024-01-02 03:04:05 INSERT shop.orders id=1 amount=9.99', UPDATE lines show the key and "
            "'column: old -> new' for changed columns. Ctrl-C ends cleanly. Without --meta-dir nothing is persisted."
        ),
    )
    add_source_arguments(p)
    p.add_argument(
        "--from",
        dest="start",
        metavar="WHERE",
        help="start at a binlog position (mysql-bin.000003:4), an ISO 8601 time (2024-01-02T03:04:05, local time "
        "unless an offset is given) or now (the default unless --meta-dir holds a cursor or the properties "
        "name a position)",
    )
    p.add_argument("--filter", metavar="REGEX", help=r"canal table filter narrowing the source's, e.g. 'shop\..*'")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per row (keys: destination, schema, table, "
        "type, ts (ms since the epoch), file, offset, before, after, sql)",
    )
    p.add_argument("--limit", type=positive_int, metavar="N", help="stop after N rows (DDL lines count as rows)")
    p.add_argument("--timeout", type=positive_float, metavar="S", help="stop when no change arrived for S seconds")
    p.add_argument("--meta-dir", metavar="DIR", help="persist the cursor (client 1001) in DIR/{destination}/meta.dat")
    p.add_argument("--utc", action="store_true", help="print times in UTC instead of local time")
    p.add_argument("--show-position", action="store_true", help="append each row's binlog file:offset to text lines")
    p.set_defaults(run=run)


# -- formatting ------------------------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    return f"'{escaped}'"


def text_value(value: Any) -> str:
    """A value as a terminal line shows it: numbers bare, NULL, strings and times quoted, binary as x'..'."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | Decimal | float):
        return render_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"x'{bytes(value).hex()}'"
    return _quote(render_text(value))


def json_value(value: Any) -> Any:
    """A value for a JSON line: JSON-native values as they are, others in canal's text form."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else render_text(value)
    if isinstance(value, dict | list):
        return value
    return render_text(value)


def _ts(ms: int, utc: bool) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    if not utc:
        when = when.astimezone()
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _pairs(names: Sequence[str], image: Sequence[Any]) -> str:
    # a column a partial row image does not carry is left out, never shown as NULL
    return " ".join(f"{n}={text_value(v)}" for n, v in zip(names, image, strict=True) if v is not ABSENT)


def row_line(entry: Entry, row: RowData, *, utc: bool = False, show_position: bool = False) -> str:
    h = entry.header
    kind = h.event_type
    table = row.table
    head = f"{_ts(h.execute_time, utc)} {kind.name} {table.schema}.{table.table}"
    if kind is EventType.UPDATE and row.before is not None and row.after is not None:
        keys = zip((table.names[i] for i in table.key_indexes), row.key(), strict=True)
        parts = [f"{n}={text_value(v)}" for n, v in keys if v is not ABSENT]
        diffs = row.diffs or {}
        for i, (name, old, new) in enumerate(zip(table.names, row.before, row.after, strict=True)):
            if i in diffs:  # a partial JSON update: how the document changed, not its value
                parts.append(f"{name}: " + "; ".join(_diff_text(d) for d in diffs[i]))
                continue
            if new is ABSENT:  # not carried by a partial after image: not changed
                continue
            if old is ABSENT:
                parts.append(f"{name}: -> {text_value(new)}")
            elif old != new:
                parts.append(f"{name}: {text_value(old)} -> {text_value(new)}")
        body = " ".join(parts)
    elif row.after is not None:
        body = _pairs(table.names, row.after)
    elif row.before is not None:
        body = _pairs(table.names, row.before)
    else:
        body = ""
    line = f"{head} {body}".rstrip()
    return f"{line} @{h.log_file}:{h.log_offset}" if show_position else line


def _diff_text(diff: JsonDiff) -> str:
    value = "" if diff.operation is JsonDiffOperation.REMOVE else " " + json_text(diff.value)
    return f"{diff.operation.name} {diff.path}{value}"


def ddl_line(entry: Entry, *, utc: bool = False, show_position: bool = False) -> str:
    h = entry.header
    rc = entry.row_change
    assert rc is not None
    target = ".".join(p for p in (h.schema or rc.ddl_schema, h.table) if p)
    sql = " ".join(rc.sql.split())
    line = f"{_ts(h.execute_time, utc)} {h.event_type.name} {target} {sql}".replace("  ", " ")
    return f"{line} @{h.log_file}:{h.log_offset}" if show_position else line


def _image(names: Sequence[str], image: Sequence[Any] | None) -> dict[str, Any] | None:
    if image is None:
        return None
    return {n: json_value(v) for n, v in zip(names, image, strict=True) if v is not ABSENT}


def json_line(destination: str, entry: Entry, row: RowData | None) -> str:
    h = entry.header
    rc = entry.row_change
    doc: Mapping[str, Any] = {
        "destination": destination,
        "schema": h.schema or (rc.ddl_schema if rc is not None else ""),
        "table": h.table,
        "type": h.event_type.name,
        "ts": h.execute_time,
        "file": h.log_file,
        "offset": h.log_offset,
        "before": None if row is None else _image(row.table.names, row.before),
        "after": None if row is None else _image(row.table.names, row.after),
        "sql": rc.sql if rc is not None and row is None else None,
    }
    if row is not None and row.diffs:  # a partial JSON update's diffs of columns "after" leaves out
        doc = {**doc, "json_diffs": {name: [d.to_list() for d in diffs] for name, diffs in row.json_diffs().items()}}
    return json.dumps(doc, ensure_ascii=False, separators=(", ", ": "))


def lines_of(entry: Entry, args: argparse.Namespace, destination: str) -> Iterator[str]:
    """The output lines of one entry: one per row, one for a DDL or query, none for anything else."""
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None:
        return
    if rc.is_ddl or not rc.rows:
        if rc.sql:
            yield (
                json_line(destination, entry, None)
                if args.json
                else ddl_line(entry, utc=args.utc, show_position=args.show_position)
            )
        return
    for row in rc.rows:
        if args.json:
            yield json_line(destination, entry, row)
        else:
            yield row_line(entry, row, utc=args.utc, show_position=args.show_position)


# -- the loop --------------------------------------------------------------------------------------------------------


def _tail_config(args: argparse.Namespace) -> InstanceConfig:
    config = load_instance_config(args)
    master = config.master
    if args.start is not None:
        master = parse_start(args.start).apply(master)
    return local_config(config, master, args.meta_dir)


def local_config(config: InstanceConfig, master: MasterConfig, meta_dir: str | None) -> InstanceConfig:
    """``config`` run by this process alone: ``master`` only (no standby), the cursor in ``meta_dir`` (client 1001)
    or in memory, a store counted in entries."""
    meta: dict[str, Any]
    if meta_dir:
        meta = {"meta_mode": MetaMode.FILE, "meta_dir": str(Path(meta_dir))}
    else:
        meta = {"meta_mode": MetaMode.MEMORY, "meta_dir": None}
    store = attrs.evolve(config.store, batch_mode=BatchMode.ITEMSIZE)
    return attrs.evolve(config, master=master, standby=None, store=store, **meta)


def _preflight(config: InstanceConfig) -> None:
    """Reach the source once, so an unreachable server or a wrong password fails at once instead of being retried."""
    source = open_source(config.master, config)
    try:
        source.open()
    finally:
        with contextlib.suppress(SourceError, OSError):
            source.close()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    config = _tail_config(args)
    client = ClientIdentity(config.destination, DEFAULT_CLIENT_ID)
    if args.meta_dir and args.start is not None:
        # an explicit --from wins over a stored cursor: drop it (a subscription holds the cursor)
        with FileMetaManager(config.meta_dir or args.meta_dir, flush_period_s=None) as meta:
            meta.unsubscribe(client)
    table_filter = compile_table_filter(args.filter, "--filter") if args.filter else None
    return run_instance(config, lambda instance: _loop(instance, args, sys.stdout, table_filter))


def run_instance(config: InstanceConfig, body: Callable[[Instance], None]) -> int:
    """Reach the source once, run the destination, call ``body`` with it, stop it. Ctrl-C, SIGTERM and a closed
    stdout (``| head``) end it quietly."""
    _preflight(config)
    with _sigterm_as_interrupt():
        instance = Instance(config)
        try:
            instance.start()
            body(instance)
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:  # `canal tail | head`: the reader left; end quietly
            _silence_stdout()
        finally:
            with contextlib.suppress(KeyboardInterrupt):
                instance.stop()
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not report the broken pipe again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _next_message(instance: Instance, batch: int) -> Message:
    msg = instance.get_without_ack(batch, None)  # what is there, at once
    if msg.id == EMPTY_MESSAGE_ID:
        msg = instance.get_without_ack(1, _POLL_S)  # else wait for the next entry
    return msg


def _loop(
    instance: Instance,
    args: argparse.Namespace,
    stream: TextIO,
    table_filter: TableFilter | None,
    *,
    finished: Callable[[], bool] | None = None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Print and ack the destination's changes until ``--limit`` / ``--timeout``, or until ``finished()`` holds
    when nothing is waiting (``canal snapshot``); ``tick()`` after every get (its progress bar)."""
    limit: int | None = getattr(args, "limit", None)
    timeout: float | None = getattr(args, "timeout", None)
    printed = 0
    last_change = time.monotonic()
    destination = instance.destination
    while True:
        want = _BATCH if limit is None else max(1, min(_BATCH, limit - printed))
        msg = _next_message(instance, want)
        if tick is not None:
            tick()
        if msg.id == EMPTY_MESSAGE_ID:
            if timeout is not None and time.monotonic() - last_change >= timeout:
                return
            if finished is not None and finished():
                return
            continue
        cut_at: int | None = None  # index of the first entry not shown in full
        out: list[str] = []
        for index, entry in enumerate(msg.entries):
            if table_filter is not None and not _kept(entry, table_filter):
                continue
            for line in lines_of(entry, args, destination):
                if limit is not None and printed >= limit:
                    cut_at = index
                    break
                out.append(line)
                printed += 1
            if cut_at is not None:
                break
        if out:
            stream.write("\n".join(out) + "\n")
            stream.flush()
            last_change = time.monotonic()
        if cut_at is None:
            instance.ack(msg.id)
        else:
            # the limit fell inside this batch: ack the entries shown in full, hand out the rest again next time
            instance.rollback()  # the only outstanding batch
            if cut_at > 0:
                shown = instance.get_without_ack(cut_at, None)
                if len(shown.entries) <= cut_at:
                    instance.ack(shown.id)
                else:  # a BEGIN took the entry after it along (no batch ends with one): not shown in full
                    instance.rollback(shown.id)
        if limit is not None and printed >= limit:
            return


def _kept(entry: Entry, table_filter: TableFilter) -> bool:
    h = entry.header
    if entry.entry_type is not EntryType.ROWDATA or not h.table:
        return True
    return table_filter.matches(h.schema, h.table)
