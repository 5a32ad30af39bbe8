"""Reading the actions of ALTER TABLE (MySQL 8 and MariaDB 10/11 forms)."""

from __future__ import annotations

from typing import Final

from canal.errors import SqlError
from canal.sql.columns import read_column
from canal.sql.cursor import Cursor
from canal.sql.partitions import read_partition_action, starts_partition_action
from canal.sql.statements import (
    AddColumn,
    AddKey,
    AlterAction,
    AlterColumn,
    AlterOption,
    ChangeColumn,
    CheckDef,
    ConvertCharset,
    DropColumn,
    DropKey,
    ForeignKeyDef,
    IndexDef,
    OtherAction,
    RenameColumn,
    RenameIndex,
    RenameTo,
    SetTableOptions,
)
from canal.sql.tables import TableElements, opens_index, read_element, read_table_options, starts_table_option

__all__ = ["read_alter_actions"]

# where a column definition in ALTER TABLE ends besides ',': its position, or partition options
_COLUMN_END: Final = frozenset({"FIRST", "AFTER", "PARTITION", "REMOVE"})
# actions that change no column, read whole: (head, the words that follow it)
_OTHER_ACTIONS: Final = {
    "ENABLE": ("KEYS",),
    "DISABLE": ("KEYS",),
    "DISCARD": ("TABLESPACE",),
    "IMPORT": ("TABLESPACE",),
    "SECONDARY_LOAD": (),
    "SECONDARY_UNLOAD": (),
}
# partition options end the action list (no comma before them)
_PARTITION_OPTIONS: Final = (("PARTITION", "BY"), ("REMOVE", "PARTITIONING"))
# words that start an action: a name after ORDER BY's comma is not one of these
_ACTION_WORDS: Final = frozenset(
    {"ADD", "DROP", "MODIFY", "CHANGE", "RENAME", "ALTER", "CONVERT", "ALGORITHM", "LOCK", "FORCE", "ORDER",
     "TRUNCATE", "EXCHANGE", "COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR",
     "REMOVE", "UPGRADE"}
    | set(_OTHER_ACTIONS)
)  # fmt: skip


def read_alter_actions(c: Cursor, strict: bool) -> tuple[AlterAction, ...]:
    """The actions of an ALTER TABLE, in order, up to the end of the statement.

    ``strict``: an action that cannot be read raises :class:`~canal.errors.SqlError`. Otherwise it becomes an
    :class:`OtherAction` carrying the error, and reading goes on after the next top-level comma.
    """
    actions: list[AlterAction] = []
    while not c.at_end():
        start = c.pos
        try:
            actions.extend(_read_action(c))
        except SqlError as exc:
            if strict:
                raise
            c.pos = start
            actions.append(_other(c, str(exc)))
        if c.accept(","):
            if c.at_end():  # a comma the server would refuse: the statement was not read as the server read it
                error = c.error("expected an ALTER TABLE action after ','")
                if strict:
                    raise error
                actions.append(OtherAction(",", ",", str(error)))
            continue
        if not (c.at_end() or _at_partition_options(c) or starts_table_option(c)):
            error = c.error("unexpected text after an ALTER TABLE action")
            if strict:
                raise error
            actions.append(_other(c, str(error)))
            c.accept(",")
    return tuple(actions)


def _at_partition_options(c: Cursor) -> bool:
    return any(c.up() == a and c.up(1) == b for a, b in _PARTITION_OPTIONS)


def _other(c: Cursor, error: str | None = None) -> OtherAction:
    """Skip to the next top-level comma (partition options: to the end), keeping the action's text."""
    start = c.pos
    to_end = _at_partition_options(c)
    head = _head(c)
    while not c.at_end() and (to_end or c.up() != ","):
        c.skip_tolerant()
    return OtherAction(head, c.text_from(start), error)


def _head(c: Cursor) -> str:
    """An action's first two words (``ADD CONSTRAINT [symbol] UNIQUE`` reads as ``ADD UNIQUE``)."""
    words = [c.up(), c.up(1)]
    if words == ["ADD", "CONSTRAINT"]:
        k = 5 if c.up(2) == "IF" else 2  # IF NOT EXISTS
        if c.up(k) not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            k += 1  # the symbol
        words[1] = c.up(k)
    return " ".join(w for w in words if w.isidentifier())


def _position(c: Cursor) -> tuple[bool, str | None]:
    if c.accept("FIRST"):
        return True, None
    if c.accept("AFTER"):
        return False, c.ident("a column name")
    return False, None


def _read_action(c: Cursor) -> list[AlterAction]:
    up = c.up()
    if starts_partition_action(c):
        return [read_partition_action(c)]
    if up == "ADD":
        return _add(c)
    if up == "DROP":
        return [_drop(c)]
    if up in ("MODIFY", "CHANGE"):
        c.next()
        c.accept("COLUMN")
        if_exists = c.accept_seq("IF", "EXISTS")
        old = c.ident("a column name") if up == "CHANGE" else None
        column = read_column(c, _COLUMN_END)
        first, after = _position(c)
        return [ChangeColumn(column.name if old is None else old, column, first, after, if_exists)]
    if up == "RENAME":
        return [_rename(c)]
    if up == "ALTER":
        return [_alter(c)]
    if up == "CONVERT":
        c.next()
        c.expect("TO")
        if c.accept("CHARACTER"):
            c.expect("SET")
        else:
            c.expect("CHARSET")
        c.accept_equals()
        charset = c.word_or_string("a character set").lower()
        collation = None
        if c.accept("COLLATE"):
            c.accept_equals()
            collation = c.word_or_string("a collation").lower()
        return [ConvertCharset(charset, collation)]
    if up in ("ALGORITHM", "LOCK"):
        c.next()
        c.accept_equals()
        return [AlterOption(up, c.word_or_string().upper())]
    if up == "FORCE":
        c.next()
        return [AlterOption(up)]
    if up in ("WITH", "WITHOUT") and c.up(1) == "VALIDATION":
        c.next()
        c.next()
        return [AlterOption(f"{up} VALIDATION")]
    if starts_table_option(c):
        return [SetTableOptions(read_table_options(c))]
    if up == "ORDER" and c.up(1) == "BY":
        return [_order_by(c)]
    if up in _OTHER_ACTIONS:
        start = c.pos
        c.next()
        for word in _OTHER_ACTIONS[up]:
            c.expect(word)
        return [OtherAction(" ".join((up, *_OTHER_ACTIONS[up])), c.text_from(start))]
    raise c.error("expected an ALTER TABLE action")


def _add(c: Cursor) -> list[AlterAction]:
    c.next()
    column = c.accept("COLUMN")
    if not column and c.up() == "SYSTEM":
        return [_versioning(c, "ADD")]
    if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
    if not column and (opens_index(c) or c.up() in ("CONSTRAINT", "FOREIGN", "CHECK", "PERIOD")):
        elements = TableElements()
        key_if_not_exists = read_element(c, elements)
        return _added(elements, if_not_exists or key_if_not_exists)
    if c.up() == "(":
        c.next()
        elements = TableElements()
        while True:
            read_element(c, elements)
            if not c.accept(","):
                break
        c.expect(")")
        return _added(elements, if_not_exists)
    col = read_column(c, _COLUMN_END)
    first, after = _position(c)
    return [AddColumn(col, first, after, if_not_exists)]


def _versioning(c: Cursor, verb: str) -> OtherAction:
    """``ADD SYSTEM VERSIONING`` / ``DROP SYSTEM VERSIONING`` (after the verb)."""
    start = c.pos - 1
    c.expect_seq("SYSTEM", "VERSIONING")
    return OtherAction(f"{verb} SYSTEM VERSIONING", c.text_from(start))


def _added(elements: TableElements, if_not_exists: bool) -> list[AlterAction]:
    out: list[AlterAction] = [AddColumn(col, if_not_exists=if_not_exists) for col in elements.columns]
    keys: list[IndexDef | ForeignKeyDef | CheckDef] = [*elements.indexes, *elements.foreign_keys, *elements.checks]
    out.extend(AddKey(key, if_not_exists) for key in keys)
    out.extend(OtherAction("ADD PERIOD", "ADD " + text) for text in elements.periods)
    return out


def _drop(c: Cursor) -> AlterAction:
    c.next()
    if c.up() == "SYSTEM":
        return _versioning(c, "DROP")
    if c.up() == "PERIOD":
        start = c.pos - 1
        c.next()
        c.accept_seq("IF", "EXISTS")
        c.expect("FOR")
        c.ident("a period name")
        return OtherAction("DROP PERIOD", c.text_from(start))
    if c.accept_seq("PRIMARY", "KEY"):
        return DropKey("PRIMARY KEY")
    kind = None
    if c.accept("INDEX", "KEY"):
        kind = "INDEX"
    elif c.accept_seq("FOREIGN", "KEY"):
        kind = "FOREIGN KEY"
    elif c.up() in ("CHECK", "CONSTRAINT"):
        kind = c.next().up
    if kind is not None:
        if_exists = c.accept_seq("IF", "EXISTS")
        return DropKey(kind, c.ident("a key or constraint name"), if_exists)
    c.accept("COLUMN")
    if_exists = c.accept_seq("IF", "EXISTS")
    name = c.ident("a column name")
    c.accept("RESTRICT", "CASCADE")
    return DropColumn(name, if_exists)


def _rename(c: Cursor) -> AlterAction:
    c.next()
    if c.accept("COLUMN"):
        if_exists = c.accept_seq("IF", "EXISTS")
        old = c.ident("a column name")
        c.expect("TO")
        return RenameColumn(old, c.ident("a column name"), if_exists)
    if c.accept("INDEX", "KEY"):
        old = c.ident("an index name")
        c.expect("TO")
        return RenameIndex(old, c.ident("an index name"))
    c.accept("TO", "AS")
    return RenameTo(c.table_name("the new table name"))


def _alter(c: Cursor) -> AlterAction:
    start = c.pos
    what = c.up(1)
    if what in ("INDEX", "KEY"):  # ALTER INDEX i [NOT] IGNORED | VISIBLE | INVISIBLE
        c.pos += 2
        c.ident("an index name")
        if not c.accept("VISIBLE", "INVISIBLE"):
            c.accept("NOT")
            c.expect("IGNORED")
        return OtherAction("ALTER INDEX", c.text_from(start))
    if what in ("CHECK", "CONSTRAINT"):  # MySQL 8: ALTER CHECK c [NOT] ENFORCED
        c.pos += 2
        c.ident("a constraint name")
        c.accept("NOT")
        c.expect("ENFORCED")
        return OtherAction(f"ALTER {what}", c.text_from(start))
    c.next()
    c.accept("COLUMN")
    c.accept_seq("IF", "EXISTS")
    name = c.ident("a column name")
    if c.accept_seq("DROP", "DEFAULT"):
        return AlterColumn(name, drop_default=True)
    c.expect("SET")
    if c.accept("DEFAULT"):
        return AlterColumn(name, default=c.expression())
    visibility = c.expect("VISIBLE", "INVISIBLE")
    return AlterColumn(name, visible=visibility == "VISIBLE")


def _order_by(c: Cursor) -> OtherAction:
    start = c.pos
    c.next()
    c.next()
    while True:
        c.ident("a column name")
        c.accept("ASC", "DESC")
        if not (c.up() == "," and c.is_name(1) and c.up(1) not in _ACTION_WORDS):
            break
        c.next()
    return OtherAction("ORDER BY", c.text_from(start))
