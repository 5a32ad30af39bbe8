"""A table's name as one string -- the one form, and the one reader of it.

A MariaDB database or table name may hold any character but NUL: ``shop.eu`` is a database, ``a.b`` a table. So
``schema.table`` split at its first dot is not a name: ``shop.eu.t`` would be table ``eu.t`` of database ``shop``.
Where a table's name travels as one string -- a snapshot's list of tables (kept in cursors), the tables a heal reads
again, the schema catalog's keys, the ``snapshot.tables`` setting -- it is written by :func:`qualified` and read back
by :func:`split_qualified`, never split at a dot:

* a part that holds no dot and no backquote stands for itself, so plain names read as they always did:
  ``shop.orders``;
* any other part is backquoted as SQL quotes an identifier, a backquote in it doubled: ```shop.eu`.t``,
  ``db.`a``b```.

The form is injective (two tables never share a string) and a string holds one name only, so a list of them, or a
set, is one of tables. Display text in logs and errors may use it too: it is what a user types in SQL.
"""

from __future__ import annotations

__all__ = ["qualified", "split_qualified"]


def _part(name: str) -> str:
    if "." in name or "`" in name:
        return "`" + name.replace("`", "``") + "`"
    return name


def qualified(schema: str, table: str) -> str:
    """``schema.table`` as one string, each part backquoted where it holds a dot or a backquote (module docstring)."""
    return f"{_part(schema)}.{_part(table)}"


def split_qualified(name: str) -> tuple[str, str]:
    """The ``(schema, table)`` a :func:`qualified` string names; ValueError for a string that is not one (no dot, a
    third part, an unclosed backquote). A part may be empty (a statement of a session without a database)."""
    schema, rest = _read_part(name, 0)
    if rest >= len(name) or name[rest] != ".":
        raise ValueError(f"{name!r} is not a table name of the form schema.table")
    table, end = _read_part(name, rest + 1)
    if end != len(name):
        raise ValueError(f"{name!r} names more than schema.table: backquote a name that holds a dot (`shop.eu`.orders)")
    return schema, table


def _read_part(text: str, at: int) -> tuple[str, int]:
    """The name starting at ``at`` and where it ends: backquoted (to its closing backquote), else up to a dot."""
    if at < len(text) and text[at] == "`":
        out: list[str] = []
        i = at + 1
        while i < len(text):
            ch = text[i]
            if ch == "`":
                if i + 1 < len(text) and text[i + 1] == "`":
                    out.append("`")
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(ch)
            i += 1
        raise ValueError(f"{text!r} has an unclosed backquote")
    end = text.find(".", at)
    end = len(text) if end < 0 else end
    part = text[at:end]
    if "`" in part:
        raise ValueError(f"{text!r}: a name holding a backquote is written backquoted, the backquote doubled")
    return part, end
