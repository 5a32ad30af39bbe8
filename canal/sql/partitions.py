"""Reading partitioning: the ``PARTITION BY`` clause of CREATE and ALTER TABLE, and ALTER TABLE's partition actions.

Everything is read whole (MariaDB 10/11 and MySQL 8 forms): a word the grammar does not allow is a
:class:`~canal.errors.SqlError`, never skipped -- a partition action decides whether rows change (``DROP
PARTITION`` deletes them, ``REORGANIZE PARTITION`` keeps them), so what follows its head must be known.
Expressions inside parentheses (``HASH (expr)``, ``VALUES LESS THAN (expr)``) are balanced groups read as text.
"""

from __future__ import annotations

from typing import Final

from canal.sql.cursor import Cursor
from canal.sql.lexer import NUMBER, STRING, WORD
from canal.sql.statements import PartitionAction, TableName

__all__ = ["read_partition_action", "read_partitioning", "starts_partition_action"]

# ALTER TABLE actions made of a verb and PARTITION (``DROP PARTITION p``)
_VERBS: Final = frozenset(
    {"ADD", "DROP", "TRUNCATE", "EXCHANGE", "COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
     "REPAIR", "DISCARD", "IMPORT", "CONVERT"}
)  # fmt: skip
# CHECK PARTITION's and REPAIR PARTITION's options (CHECK TABLE's and REPAIR TABLE's)
CHECK_OPTIONS: Final = frozenset({"QUICK", "FAST", "MEDIUM", "EXTENDED", "CHANGED"})
REPAIR_OPTIONS: Final = frozenset({"QUICK", "EXTENDED", "USE_FRM", "FORCE"})
_INTERVAL_UNITS: Final = frozenset(
    {"SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}
)  # fmt: skip
_NUMBERED_OPTIONS: Final = frozenset({"MAX_ROWS", "MIN_ROWS", "NODEGROUP"})


def starts_partition_action(c: Cursor) -> bool:
    """Whether a partition action starts here (``PARTITION BY`` and ``REMOVE PARTITIONING`` included)."""
    up, second = c.up(), c.up(1)
    if up == "CONVERT":
        return second in ("PARTITION", "TABLE")
    if up in _VERBS:
        return second == "PARTITION"
    return (up, second) in (("PARTITION", "BY"), ("REMOVE", "PARTITIONING"), ("UPGRADE", "PARTITIONING"))


def read_partition_action(c: Cursor) -> PartitionAction:
    """One partition action of ALTER TABLE, whole (at :func:`starts_partition_action`)."""
    start = c.pos
    up = c.up()
    if up == "PARTITION":
        read_partitioning(c)
        return PartitionAction("PARTITION BY", text=c.text_from(start))
    if up in ("REMOVE", "UPGRADE"):
        c.next()
        c.next()
        return PartitionAction(f"{up} PARTITIONING", text=c.text_from(start))
    c.next()
    if up == "CONVERT" and c.accept("TABLE"):
        # CONVERT TABLE t TO PARTITION p VALUES ...: the table becomes a partition
        source = c.table_name()
        c.expect("TO")
        name, _listed = _definition(c)
        _validation(c)
        return PartitionAction("CONVERT TABLE", (name,), source, c.text_from(start))
    c.expect("PARTITION")
    verb = f"{up} PARTITION"
    table: TableName | None = None
    names: tuple[str, ...] = ()
    if up == "ADD":
        c.accept_seq("IF", "NOT", "EXISTS")
        _no_binlog(c)
        if c.accept("PARTITIONS"):
            c.integer("a number of partitions")
        elif c.up() == "(":
            names = tuple(name for name, _listed in _definitions(c))
    elif up == "DROP":
        c.accept_seq("IF", "EXISTS")
        names = _names(c, all_allowed=False)
    elif up == "COALESCE":
        _no_binlog(c)
        c.integer("a number of partitions")
    elif up == "REORGANIZE":
        _no_binlog(c)
        if not c.at_end():
            names = _names(c, all_allowed=False)
            c.expect("INTO")
            lists = any(listed for _name, listed in _definitions(c))
            return PartitionAction(verb, names, None, c.text_from(start), lists)
    elif up == "EXCHANGE":
        names = (c.ident("a partition name"),)
        c.expect("WITH")
        c.expect("TABLE")
        table = c.table_name()
        _validation(c)
    elif up == "CONVERT":
        names = (c.ident("a partition name"),)
        c.expect("TO")
        c.expect("TABLE")
        table = c.table_name()
    elif up in ("DISCARD", "IMPORT"):
        names = _names(c, all_allowed=True)
        c.expect("TABLESPACE")
    else:  # TRUNCATE, ANALYZE, CHECK, OPTIMIZE, REBUILD, REPAIR
        if up != "TRUNCATE":
            _no_binlog(c)
        names = _names(c, all_allowed=True)
        if up == "CHECK":
            _check_options(c)
        elif up == "REPAIR":
            while c.accept(*REPAIR_OPTIONS):
                pass
        elif up == "OPTIMIZE":
            _no_binlog(c)
    return PartitionAction(verb, names, table, c.text_from(start))


def _no_binlog(c: Cursor) -> None:
    c.accept("NO_WRITE_TO_BINLOG", "LOCAL")


def _validation(c: Cursor) -> None:
    if c.up() in ("WITH", "WITHOUT") and c.up(1) == "VALIDATION":
        c.next()
        c.next()


def _check_options(c: Cursor) -> None:
    while True:
        if c.accept_seq("FOR", "UPGRADE"):
            continue
        if not c.accept(*CHECK_OPTIONS):
            return


def _names(c: Cursor, *, all_allowed: bool) -> tuple[str, ...]:
    if all_allowed and c.accept("ALL"):
        return ("ALL",)
    names = [c.ident("a partition name")]
    while c.up() == "," and c.is_name(1):
        c.next()
        names.append(c.ident("a partition name"))
    return tuple(names)


def read_partitioning(c: Cursor) -> None:
    """``PARTITION BY ...``: the partitioning type, PARTITIONS n, the subpartitioning and the partition
    definitions."""
    c.expect_seq("PARTITION", "BY")
    _partition_type(c, sub=False)
    if c.accept("PARTITIONS"):
        c.integer("a number of partitions")
    if c.accept_seq("SUBPARTITION", "BY"):
        _partition_type(c, sub=True)
        if c.accept("SUBPARTITIONS"):
            c.integer("a number of subpartitions")
    if c.up() == "(":
        _definitions(c)


def _partition_type(c: Cursor, *, sub: bool) -> None:
    linear = c.accept("LINEAR")
    kind = c.expect("HASH", "KEY") if sub or linear else c.expect("HASH", "KEY", "RANGE", "LIST", "SYSTEM_TIME")
    if kind == "KEY":
        if c.accept("ALGORITHM"):
            c.accept_equals()
            c.integer("a key algorithm")
        c.skip_group()  # the columns (may be none)
    elif kind in ("RANGE", "LIST"):
        if c.accept("COLUMNS"):
            c.name_list()
        else:
            c.skip_group()
    elif kind == "HASH":
        c.skip_group()
    else:  # SYSTEM_TIME [INTERVAL n unit [STARTS time]] [LIMIT n] [AUTO]
        if c.accept("INTERVAL"):
            _number(c)
            c.expect(*_INTERVAL_UNITS)
            if c.accept("STARTS"):
                c.accept("TIMESTAMP")
                c.expression()
        if c.accept("LIMIT"):
            _number(c)
        c.accept("AUTO")


def _number(c: Cursor) -> None:
    tok = c.peek()
    if tok.kind not in (WORD, NUMBER, STRING) or (tok.kind == WORD and not tok.text.isdigit()):
        raise c.error("expected a number")
    c.next()


def _definitions(c: Cursor) -> list[tuple[str, bool]]:
    """``(PARTITION p ..., ...)``: each partition's name, and whether it lists its values (``VALUES IN``)."""
    return list(c.paren_list(lambda: _definition(c)))


def _definition(c: Cursor) -> tuple[str, bool]:
    """``PARTITION name [VALUES ...] [options] [(SUBPARTITION ...)]``: its name, and whether it lists its values."""
    c.expect("PARTITION")
    name = c.ident("a partition name")
    listed = False
    if c.accept("VALUES"):
        if c.accept("IN"):
            listed = True
            c.skip_group()
        else:
            c.expect_seq("LESS", "THAN")
            if not c.accept("MAXVALUE"):
                c.skip_group()
    else:
        c.accept("DEFAULT", "CURRENT", "HISTORY")  # a LIST's default partition; a SYSTEM_TIME partition
    _options(c)
    if c.up() == "(":
        c.paren_list(lambda: _subpartition(c))
    return name, listed


def _subpartition(c: Cursor) -> str:
    c.expect("SUBPARTITION")
    name = c.ident("a subpartition name")
    _options(c)
    return name


def _options(c: Cursor) -> None:
    while True:
        up = c.up()
        if up == "STORAGE" and c.up(1) == "ENGINE":
            c.next()
            up = "ENGINE"
        if up in ("ENGINE", "TABLESPACE"):
            c.next()
            c.accept_equals()
            c.word_or_string(f"a value for {up}")
        elif up == "COMMENT":
            c.next()
            c.accept_equals()
            c.string("a comment")
        elif up in ("DATA", "INDEX") and c.up(1) == "DIRECTORY":
            c.next()
            c.next()
            c.accept_equals()
            c.string("a directory")
        elif up in _NUMBERED_OPTIONS:
            c.next()
            c.accept_equals()
            c.integer(f"a value for {up}")
        else:
            return
