"""What MariaDB and MySQL statements about tables take besides DDL: the settings of ``SET STATEMENT ... FOR`` and
the options of OPTIMIZE / ANALYZE / CHECK / CHECKSUM / REPAIR TABLE (:mod:`canal.sql.reader` reads the statements)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from canal.errors import SqlError
from canal.sql.cursor import Cursor
from canal.sql.partitions import CHECK_OPTIONS, REPAIR_OPTIONS
from canal.sql.statements import Setting

__all__ = ["MAINTENANCE_OPTIONS", "read_setting_list", "read_settings"]


def read_settings(sql: str) -> tuple[Setting, ...]:
    """The settings of MariaDB's ``SET STATEMENT name = value [, ...] FOR statement`` in front of the (first)
    statement of ``sql``; none when it has no such prefix or the prefix cannot be read. (The statement itself is
    what :func:`read_statements` reads.)"""
    c = Cursor(sql)
    if not c.accept_seq("SET", "STATEMENT"):
        return ()
    try:
        settings = read_setting_list(c)
        c.expect("FOR")
    except SqlError:
        return ()
    return settings


def read_setting_list(c: Cursor) -> tuple[Setting, ...]:
    """``name = value [, name = value ...]`` (before SET STATEMENT's FOR)."""
    settings = []
    while True:
        name = c.ident("a system variable").lower()
        if not c.accept("="):
            c.expect_seq(":", "=")
        settings.append(Setting(name, c.expression()))
        if not c.accept(","):
            return tuple(settings)


def _analyze_options(c: Cursor) -> None:
    if c.accept_seq("PERSISTENT", "FOR"):  # MariaDB: engine-independent statistics
        if c.accept("ALL"):
            return
        for part in ("COLUMNS", "INDEXES"):
            if c.accept(part):
                c.skip_group()
        return
    if c.up() in ("UPDATE", "DROP") and c.up(1) == "HISTOGRAM":  # MySQL 8
        c.next()
        c.next()
        c.expect("ON")
        c.ident("a column name")
        while c.accept(","):
            c.ident("a column name")
        if c.accept("WITH"):
            c.integer("a number of buckets")
            c.expect("BUCKETS")
        elif c.accept_seq("USING", "DATA"):
            c.string("a histogram")


def _wait(c: Cursor) -> None:
    if c.accept("WAIT"):
        c.integer("a number of seconds")
    else:
        c.accept("NOWAIT")


def _words(*words: str, for_upgrade: bool = False) -> Callable[[Cursor], None]:
    def read(c: Cursor) -> None:
        while c.accept(*words) or (for_upgrade and c.accept_seq("FOR", "UPGRADE")):
            pass

    return read


MAINTENANCE_OPTIONS: Final[dict[str, Callable[[Cursor], None]]] = {
    "OPTIMIZE": _wait,
    "ANALYZE": _analyze_options,
    "CHECK": _words(*CHECK_OPTIONS, for_upgrade=True),
    "CHECKSUM": _words("QUICK", "EXTENDED"),
    "REPAIR": _words(*REPAIR_OPTIONS),
}
"""What each maintenance statement takes after its tables."""
