"""The few statements the fake server answers (what a parser sends for detecting and status), read with the SQL
reader's cursor: SELECT 1, SHOW MASTER STATUS, SHOW BINARY LOGS, SELECT @@var, SHOW VARIABLES LIKE, SELECT VERSION(),
SELECT UNIX_TIMESTAMP(), SELECT DATABASE(), SHOW DATABASES, SHOW CREATE TABLE and SELECT * FROM t."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from canal.errors import SourceError
from canal.sql import Cursor, SqlError

if TYPE_CHECKING:
    from canal.testing.fake.server import FakeMysql

__all__ = ["answer"]


def _like(pattern: str, text: str) -> bool:
    """SQL ``LIKE`` (``%`` any run, ``_`` one character), case-insensitive."""
    translated = "".join(
        "*" if ch == "%" else "?" if ch == "_" else f"[{ch}]" if ch in "*?[]" else ch for ch in pattern.lower()
    )
    return fnmatch.fnmatchcase(text.lower(), translated)


def answer(fake: FakeMysql, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql``; SourceError errno 1064 for anything else."""
    try:
        rows = _answer(fake, Cursor(sql))
    except SqlError:
        rows = None
    if rows is None:
        raise SourceError(f"FakeMysql {fake.address} cannot answer {sql!r}", errno=1064)
    return rows


def _at_end(c: Cursor) -> bool:
    c.accept(";")
    return c.at_end()


def _answer(fake: FakeMysql, c: Cursor) -> list[tuple[Any, ...]] | None:
    if c.accept("DO"):
        return [] if c.accept("1") and _at_end(c) else None
    if c.accept("SHOW"):
        return _show(fake, c)
    if not c.accept("SELECT"):
        return None
    if c.accept("1"):
        if c.accept("FROM"):
            c.expect("DUAL")
        return [(1,)] if _at_end(c) else None
    if c.up() == "@":
        return _variables(fake, c)
    if c.accept("*"):
        c.expect("FROM")
        name = str(c.table_name())
        if not _at_end(c):
            return None
        names = fake.table(name).names
        return [tuple(row[n] for n in names) for row in fake.rows(name)]
    function = c.ident("a function").upper()
    c.expect("(")
    argument = c.opt_ident()
    if argument is not None:
        c.expect("(")
        c.expect(")")
    c.expect(")")
    if not _at_end(c):
        return None
    if function == "VERSION" and argument is None:
        return [(fake._variables()["version"],)]
    if function == "UNIX_TIMESTAMP" and (argument is None or argument.upper() == "NOW"):
        return [(fake.now,)]
    if function == "DATABASE" and argument is None:
        return [(fake.database or None,)]
    return None


def _variables(fake: FakeMysql, c: Cursor) -> list[tuple[Any, ...]] | None:
    variables = fake._variables()
    out = []
    while True:
        c.expect("@")
        c.expect("@")
        name = c.ident("a variable name")
        if c.accept("."):  # @@global.x, @@session.x, @@local.x
            name = c.ident("a variable name")
        var = name.lower()
        if var not in variables:
            raise SourceError(f"Unknown system variable '{var}' (FakeMysql)", errno=1193)
        out.append(variables[var])
        if not c.accept(","):
            break
    return [tuple(out)] if _at_end(c) else None


def _show(fake: FakeMysql, c: Cursor) -> list[tuple[Any, ...]] | None:
    log = fake._log
    if c.accept_seq("MASTER", "STATUS") or c.accept_seq("BINARY", "LOG", "STATUS"):
        if not _at_end(c):
            return None
        last = log.files[-1]
        if fake.is_mariadb:
            return [(last.name, last.end, "", "")]
        return [(last.name, last.end, "", "", fake.gtid_executed() if fake.gtid_enabled else "")]
    if c.accept_seq("BINARY", "LOGS") or c.accept_seq("MASTER", "LOGS"):
        return [(f.name, f.end) for f in log.files] if _at_end(c) else None
    if c.accept("DATABASES", "SCHEMAS"):
        if not _at_end(c):
            return None
        catalog = fake._catalog
        return [(d,) for d in sorted(catalog.databases | {t.db for t in catalog.tables.values()})]
    if c.accept_seq("CREATE", "TABLE"):
        name = str(c.table_name())
        if not _at_end(c):
            return None
        t = fake._catalog.table(name)
        return [(t.name, fake._catalog.show_create(t))]
    c.accept("GLOBAL", "SESSION")
    if c.accept("VARIABLES"):
        c.expect("LIKE")
        pattern = c.string("a LIKE pattern")
        if not _at_end(c):
            return None
        return [(k, str(v)) for k, v in sorted(fake._variables().items()) if _like(pattern, k)]
    return None
