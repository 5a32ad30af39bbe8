"""Classify the SQL of binlog query events the way canal's DDL parser does.

:func:`classify_ddl` turns one query-event statement into :class:`DdlResult` values: the canal event type
(CREATE, ALTER, ERASE, TRUNCATE, RENAME, CINDEX, DINDEX, INSERT/UPDATE/DELETE for statement-form DML, QUERY for
everything else) and the schema and table it is about. :func:`query_kind` says which of canal's query filter flags
(``filter.query.dml`` / ``ddl`` / ``dcl``) a statement falls under, and recognises transaction control statements
(BEGIN, COMMIT, ROLLBACK, SAVEPOINT, XA ...).

The classifier is our own tokenizer plus a small recursive-descent reader of the statement heads that matter; it
never raises and never needs the whole grammar. It reads names as MySQL does: backtick-quoted identifiers (with dots,
spaces and doubled backticks inside), schema-qualified names, Unicode, comments anywhere, and executable version
comments (``/*!40101 ... */``, MariaDB's ``/*M!100100 ... */``) whose content counts as SQL.

Semantics follow canal's ``DruidDdlParser``, with these deliberate differences:

* a statement canal's parser accepts but does not map (CREATE VIEW, GRANT, ...) gives one QUERY result with the
  default schema instead of no result at all (canal then drops the event);
* ``ALTER TABLE ... ADD FOREIGN KEY`` / ``ADD CHECK`` gives ALTER (canal builds no result for it);
* ``REPLACE`` and ``LOAD DATA ... INTO TABLE`` in statement form are INSERT (as canal's ``SimpleDdlParser``);
* results of an ALTER TABLE with several clauses are deduplicated (canal gives one per clause); the first result is
  the one canal puts in the entry header, and it is the same as canal's.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterator

import attrs

from canal.protocol import EventType

__all__ = ["DdlResult", "QueryKind", "classify_ddl", "query_kind", "xa_xid"]


class QueryKind(enum.Enum):
    """What kind of statement a query event holds."""

    BEGIN = "begin"  # BEGIN [WORK], START TRANSACTION
    COMMIT = "commit"
    ROLLBACK = "rollback"  # a whole-transaction rollback (not ROLLBACK TO SAVEPOINT)
    SAVEPOINT = "savepoint"  # SAVEPOINT x, ROLLBACK TO [SAVEPOINT] x, RELEASE SAVEPOINT x
    XA_START = "xa_start"  # XA START | XA BEGIN
    XA_END = "xa_end"
    XA_PREPARE = "xa_prepare"
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    DML = "dml"  # INSERT / REPLACE / UPDATE / DELETE / LOAD DATA in statement form
    DDL = "ddl"  # table, index, database, view, routine, trigger, event, sequence, tablespace definitions
    DCL = "dcl"  # GRANT, REVOKE, users and roles, SET PASSWORD
    OTHER = "other"  # SET, FLUSH, ANALYZE/OPTIMIZE TABLE, CALL, SELECT, unparseable text ...

    @property
    def is_transaction_control(self) -> bool:
        """BEGIN, COMMIT, ROLLBACK, SAVEPOINT and the XA statements: the parser handles these itself."""
        return self in _TX_KINDS

    @property
    def filter_flag(self) -> str | None:
        """Which of canal's query filter flags covers the statement: ``"dml"``, ``"ddl"`` or ``"dcl"``.

        canal files every query that is neither table DDL nor DML under ``dcl`` (its ``filterQueryDcl``), so OTHER
        maps to ``"dcl"`` too. Transaction control statements are not filtered: None.
        """
        if self in _TX_KINDS:
            return None
        if self is QueryKind.DML:
            return "dml"
        if self is QueryKind.DDL:
            return "ddl"
        return "dcl"


_TX_KINDS = frozenset(
    {
        QueryKind.BEGIN,
        QueryKind.COMMIT,
        QueryKind.ROLLBACK,
        QueryKind.SAVEPOINT,
        QueryKind.XA_START,
        QueryKind.XA_END,
        QueryKind.XA_PREPARE,
        QueryKind.XA_COMMIT,
        QueryKind.XA_ROLLBACK,
    }
)

_DML_TYPES = frozenset({EventType.INSERT, EventType.UPDATE, EventType.DELETE})


@attrs.frozen(slots=True)
class DdlResult:
    """What one statement (or one table of a multi-table statement) is about.

    ``schema``/``table`` name the table the event concerns (for RENAME: the new name; ``ori_schema``/``ori_table``
    hold the old one). For CREATE/DROP DATABASE ``schema`` is that database and ``table`` is None. Names are
    unquoted and keep the case they were written in; an unqualified name takes the default schema.
    """

    event_type: EventType
    schema: str | None = None
    table: str | None = None
    ori_schema: str | None = None
    ori_table: str | None = None
    kind: QueryKind = QueryKind.OTHER

    @property
    def is_ddl(self) -> bool:
        """canal's ``RowChange.isDdl`` for the entry: true unless the statement is DML (INSERT/UPDATE/DELETE)."""
        return self.event_type not in _DML_TYPES


# --------------------------------------------------------------------------------------------------------------------
# tokenizer

_W = 0  # bare word (identifier, keyword, number)
_Q = 1  # `quoted identifier`
_S = 2  # 'string'
_D = 3  # "string" (an identifier under ANSI_QUOTES)
_P = 4  # punctuation, one character

_TOKEN_RE = re.compile(
    r"""
    (?P<skip>
        \s+
      | /\*M?!(?:\d{5}(?:\d(?=\s))?)?      # executable comment opener: its content is SQL
      | \*/                                # ... and its closer
      | /\*.*?(?:\*/|\Z)                   # ordinary comment, optimizer hint
      | (?:--(?=[\s\x00-\x1f]|\Z)|\#)[^\n]*
    )
  | (?P<q>`(?:[^`]|``)*(?:`|\Z))
  | (?P<s>'(?:[^'\\]|\\.|'')*(?:'|\Z))
  | (?P<d>"(?:[^"\\]|\\.|"")*(?:"|\Z))
  | (?P<w>[0-9A-Za-z_$\u0080-\U0010ffff]+)
  | (?P<p>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@attrs.frozen(slots=True)
class _Tok:
    kind: int
    text: str  # words: as written; quoted: unquoted; punct: the character
    up: str  # words: upper case; punct: the character; others: ""


_END = _Tok(_P, "", "")


def _tokens(sql: str) -> Iterator[_Tok]:
    for m in _TOKEN_RE.finditer(sql):
        group = m.lastgroup
        text = m.group()
        if group == "skip":
            continue
        if group == "w":
            yield _Tok(_W, text, text.upper())
        elif group == "q":
            body = text[1:-1] if len(text) >= 2 and text.endswith("`") else text[1:]
            yield _Tok(_Q, body.replace("``", "`"), "")
        elif group == "s":
            yield _Tok(_S, _unquote_string(text, "'"), "")
        elif group == "d":
            yield _Tok(_D, _unquote_string(text, '"'), "")
        else:
            yield _Tok(_P, text, text)


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def _unquote_string(text: str, quote: str) -> str:
    body = text[1:-1] if len(text) >= 2 and text.endswith(quote) else text[1:]
    if "\\" in body:
        body = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL)
    return body.replace(quote + quote, quote)


class _Stream:
    """A lazily filled token buffer: a huge INSERT is tokenized only as far as its table name."""

    __slots__ = ("_buf", "_it", "pos")

    def __init__(self, sql: str) -> None:
        self._it = _tokens(sql)
        self._buf: list[_Tok] = []
        self.pos = 0

    def peek(self, k: int = 0) -> _Tok:
        i = self.pos + k
        buf = self._buf
        while len(buf) <= i:
            tok = next(self._it, None)
            if tok is None:
                return _END
            buf.append(tok)
        return buf[i]

    def next(self) -> _Tok:
        tok = self.peek()
        if tok is not _END:
            self.pos += 1
        return tok

    def up(self, k: int = 0) -> str:
        return self.peek(k).up

    def at_end(self) -> bool:
        return self.peek() is _END

    def at_stmt_end(self) -> bool:
        tok = self.peek()
        return tok is _END or tok.up == ";"

    def accept(self, *words: str) -> bool:
        if self.peek().up in words:
            self.pos += 1
            return True
        return False

    def accept_seq(self, *words: str) -> bool:
        for i, w in enumerate(words):
            if self.peek(i).up != w:
                return False
        self.pos += len(words)
        return True

    def skip_parens(self) -> None:
        """At a '(': skip to just after its matching ')'."""
        depth = 0
        while True:
            tok = self.next()
            if tok is _END:
                return
            if tok.up == "(":
                depth += 1
            elif tok.up == ")":
                depth -= 1
                if depth <= 0:
                    return

    def skip_statement(self) -> None:
        """Skip to just after the next ';' outside parentheses (or to the end)."""
        depth = 0
        while True:
            tok = self.next()
            if tok is _END:
                return
            if tok.up == "(":
                depth += 1
            elif tok.up == ")":
                depth = max(0, depth - 1)
            elif tok.up == ";" and depth == 0:
                return


# --------------------------------------------------------------------------------------------------------------------
# the reader

_Name = tuple[str | None, str]

# objects whose definition carries a compound body: whatever follows belongs to it
_COMPOUND_OBJECTS = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"})
_NAMED_OBJECTS = frozenset({"VIEW", "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "SEQUENCE", "PACKAGE", "SYNONYM"})
_DCL_OBJECTS = frozenset({"USER", "ROLE"})
_INDEX_WORDS = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "PRIMARY", "VECTOR"})
_TABLE_OPTION_WORDS = frozenset(
    {
        "ENGINE",
        "TYPE",
        "AUTO_INCREMENT",
        "AVG_ROW_LENGTH",
        "DEFAULT",
        "CHARACTER",
        "CHARSET",
        "CHECKSUM",
        "TABLE_CHECKSUM",
        "COLLATE",
        "COMMENT",
        "COMPRESSION",
        "CONNECTION",
        "DATA",
        "DELAY_KEY_WRITE",
        "ENCRYPTION",
        "ENCRYPTED",
        "ENCRYPTION_KEY_ID",
        "INSERT_METHOD",
        "KEY_BLOCK_SIZE",
        "MAX_ROWS",
        "MIN_ROWS",
        "PACK_KEYS",
        "PASSWORD",
        "ROW_FORMAT",
        "STATS_AUTO_RECALC",
        "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES",
        "TABLESPACE",
        "UNION",
        "AUTOEXTEND_SIZE",
        "ENGINE_ATTRIBUTE",
        "SECONDARY_ENGINE",
        "SECONDARY_ENGINE_ATTRIBUTE",
        "PAGE_CHECKSUM",
        "PAGE_COMPRESSED",
        "PAGE_COMPRESSION_LEVEL",
        "TRANSACTIONAL",
        "IETF_QUOTES",
        "SEQUENCE",
        "WITH",
    }
)
# ALTER TABLE clauses that change nothing canal reports on their own
_NEUTRAL_ALTER_WORDS = frozenset({"ALGORITHM", "LOCK", "WAIT", "NOWAIT", "VALIDATION", "WITHOUT"})
_ALTER_DB_OPTION_WORDS = frozenset(
    {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "ENCRYPTION", "READ", "COMMENT", "UPGRADE"}
)


class _Reader:
    __slots__ = ("default", "s", "stop")

    def __init__(self, sql: str, default_schema: str | None) -> None:
        self.s = _Stream(sql)
        self.default = default_schema
        self.stop = False  # the rest of the text belongs to a compound body

    # ---- names

    def ident(self) -> str | None:
        tok = self.s.peek()
        if tok.kind in (_Q, _D) or (tok.kind == _W and tok.text):
            self.s.pos += 1
            return tok.text
        return None

    def qualified(self) -> _Name | None:
        first = self.ident()
        if first is None:
            return None
        if self.s.up() == ".":
            self.s.pos += 1
            second = self.ident()
            if second is not None:
                return first, second
            return None
        return None, first

    def full(self, name: _Name) -> tuple[str | None, str]:
        schema, table = name
        return (schema if schema is not None else self.default), table

    def skip_wait(self) -> None:
        s = self.s
        if s.accept("WAIT"):
            s.next()
        else:
            s.accept("NOWAIT")

    def skip_user(self) -> None:
        s = self.s
        if s.accept("CURRENT_USER"):
            if s.up() == "(" and s.up(1) == ")":
                s.pos += 2
            return
        s.next()
        if s.up() == "@":
            s.pos += 1
            s.next()
            while s.up() in (".", "%", "-", ":") and s.peek(1).kind == _W:  # an unquoted host: 10.0.0.1
                s.pos += 2

    def skip_create_modifiers(self) -> set[str]:
        """OR REPLACE, DEFINER=..., ALGORITHM=..., SQL SECURITY ..., TEMPORARY, ONLINE, UNIQUE, ..."""
        s = self.s
        seen: set[str] = set()
        while True:
            up = s.up()
            if up == "OR" and s.up(1) == "REPLACE":
                s.pos += 2
            elif up == "DEFINER":
                s.pos += 1
                s.accept("=")
                self.skip_user()
            elif up == "ALGORITHM":
                s.pos += 1
                s.accept("=")
                s.next()
            elif up == "SQL" and s.up(1) == "SECURITY":
                s.pos += 3
            elif up in ("TEMPORARY", "ONLINE", "OFFLINE", "IGNORE", "UNIQUE", "FULLTEXT", "SPATIAL", "AGGREGATE",
                        "GLOBAL", "LOCAL", "UNDO", "EXTERNAL", "VECTOR"):  # fmt: skip
                s.pos += 1
                seen.add(up)
            else:
                return seen

    # ---- results

    def query(self, kind: QueryKind, schema: str | None = None) -> list[DdlResult]:
        return [DdlResult(EventType.QUERY, schema if schema is not None else self.default, None, kind=kind)]

    def table_result(self, event_type: EventType, name: _Name | None, kind: QueryKind) -> DdlResult:
        if name is None:
            # no table event without a table: statement-form DML keeps its type (canal: multi-table UPDATE), DDL
            # whose table cannot be read falls back to QUERY
            return DdlResult(event_type if kind is QueryKind.DML else EventType.QUERY, self.default, None, kind=kind)
        schema, table = self.full(name)
        return DdlResult(event_type, schema, table, kind=kind)

    def object_query(self, kind: QueryKind = QueryKind.DDL) -> list[DdlResult]:
        """A QUERY about a named object (view, routine, trigger ...): the object's schema, else the default."""
        if not self.s.accept_seq("IF", "NOT", "EXISTS"):
            self.s.accept_seq("IF", "EXISTS")
        name = self.qualified()
        schema = name[0] if name is not None else None
        return self.query(kind, schema)

    # ---- statements

    def statements(self) -> list[DdlResult]:
        results: list[DdlResult] = []
        s = self.s
        while not s.at_end():
            if s.up() == ";":
                s.pos += 1
                continue
            results.extend(self.statement())
            if self.stop:
                break
            s.skip_statement()
        return results

    def statement(self) -> list[DdlResult]:
        s = self.s
        up = s.up()
        handler = _HANDLERS.get(up) if s.peek().kind == _W else None
        if handler is None:
            self.stop = True  # unknown text may hold a compound body: read no further statements
            return self.query(QueryKind.OTHER)
        s.pos += 1
        results = handler(self)
        if results and results[0].kind is QueryKind.DML:
            self.stop = True  # a statement-form DML can be megabytes long: never tokenize its values
        return results

    def create(self) -> list[DdlResult]:
        s = self.s
        self.skip_create_modifiers()
        obj = s.up()
        s.next()
        if obj == "TABLE":
            s.accept_seq("IF", "NOT", "EXISTS")
            return [self.table_result(EventType.CREATE, self.qualified(), QueryKind.DDL)]
        if obj == "INDEX":
            return [self.index_on(EventType.CINDEX)]
        if obj in ("DATABASE", "SCHEMA"):
            s.accept_seq("IF", "NOT", "EXISTS")
            return self.query(QueryKind.DDL, self.ident())
        if obj in _DCL_OBJECTS:
            return self.query(QueryKind.DCL)
        if obj in _NAMED_OBJECTS:
            if obj in _COMPOUND_OBJECTS:
                self.stop = True
            return self.object_query()
        self.stop = True
        return self.query(QueryKind.DDL)

    def index_on(self, event_type: EventType) -> DdlResult:
        """After CREATE ... INDEX / DROP INDEX: skip to ON at the top level and read the table name."""
        s = self.s
        depth = 0
        while not s.at_stmt_end():
            tok = s.next()
            if tok.up == "(":
                depth += 1
            elif tok.up == ")":
                depth -= 1
            elif depth == 0 and tok.kind == _W and tok.up == "ON":
                return self.table_result(event_type, self.qualified(), QueryKind.DDL)
        return self.table_result(event_type, None, QueryKind.DDL)

    def alter(self) -> list[DdlResult]:
        s = self.s
        self.skip_create_modifiers()
        obj = s.up()
        s.next()
        if obj == "TABLE":
            s.accept_seq("IF", "EXISTS")
            name = self.qualified()
            if name is None:
                return self.query(QueryKind.DDL)
            self.skip_wait()
            return self.alter_table_items(name)
        if obj in ("DATABASE", "SCHEMA"):
            tok = s.peek()
            if tok.kind in (_Q, _D) or (tok.kind == _W and tok.up not in _ALTER_DB_OPTION_WORDS):
                return self.query(QueryKind.DDL, self.ident())
            return self.query(QueryKind.DDL)
        if obj in _DCL_OBJECTS:
            return self.query(QueryKind.DCL)
        if obj in _NAMED_OBJECTS:
            if obj in _COMPOUND_OBJECTS:
                self.stop = True
            return self.object_query()
        self.stop = True
        return self.query(QueryKind.DDL)

    def alter_table_items(self, name: _Name) -> list[DdlResult]:
        s = self.s
        schema, table = self.full(name)
        kind = QueryKind.DDL
        has_options = False
        found: list[DdlResult] = []
        while not s.at_stmt_end():
            start = s.pos
            item = self.alter_item(schema, table)
            if isinstance(item, DdlResult):
                found.append(item)
            elif item == "option":
                has_options = True
            # skip the rest of the clause, to the next top-level comma
            depth = 0
            if s.pos == start:
                s.next()
            while not s.at_stmt_end():
                up = s.up()
                if up == "(":
                    depth += 1
                elif up == ")":
                    depth -= 1
                elif up == "," and depth <= 0:
                    s.pos += 1
                    break
                s.pos += 1
        results: list[DdlResult] = []
        if has_options or not found:
            results.append(DdlResult(EventType.ALTER, schema, table, kind=kind))
        for r in found:
            if r not in results:
                results.append(r)
        return results

    def alter_item(self, schema: str | None, table: str) -> DdlResult | str | None:
        s = self.s
        tok = s.peek()
        if tok.kind != _W:
            return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
        up = tok.up
        nxt = s.up(1)
        if up == "ADD":
            if nxt in _INDEX_WORDS:
                return DdlResult(EventType.CINDEX, schema, table, kind=QueryKind.DDL)
            if nxt == "CONSTRAINT":
                s.pos += 2
                if s.up() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                    s.accept_seq("IF", "NOT", "EXISTS")
                    s.next()  # the constraint's symbol
                if s.up() in ("PRIMARY", "UNIQUE"):
                    return DdlResult(EventType.CINDEX, schema, table, kind=QueryKind.DDL)
            return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
        if up == "DROP":
            if nxt in ("INDEX", "KEY", "CONSTRAINT"):
                return DdlResult(EventType.DINDEX, schema, table, kind=QueryKind.DDL)
            return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
        if up == "RENAME":
            if nxt in ("INDEX", "KEY", "COLUMN"):
                return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
            s.pos += 1
            s.accept("TO", "AS")
            new = self.qualified()
            if new is None:
                return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
            new_schema = new[0] if new[0] is not None else (self.default if self.default is not None else schema)
            return DdlResult(EventType.RENAME, new_schema, new[1], schema, table, kind=QueryKind.DDL)
        if up in _NEUTRAL_ALTER_WORDS:
            return None
        if up in _TABLE_OPTION_WORDS and (up != "DEFAULT" or nxt in ("CHARACTER", "CHARSET", "COLLATE")):
            if up == "DATA" and nxt != "DIRECTORY":
                return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)
            return "option"
        if up == "INDEX" and nxt == "DIRECTORY":
            return "option"
        return DdlResult(EventType.ALTER, schema, table, kind=QueryKind.DDL)

    def drop(self) -> list[DdlResult]:
        s = self.s
        self.skip_create_modifiers()
        obj = s.up()
        s.next()
        if obj in ("TABLE", "TABLES"):
            s.accept_seq("IF", "EXISTS")
            results: list[DdlResult] = []
            while True:
                name = self.qualified()
                if name is None:
                    break
                results.append(self.table_result(EventType.ERASE, name, QueryKind.DDL))
                if not s.accept(","):
                    break
            return results or [self.table_result(EventType.ERASE, None, QueryKind.DDL)]
        if obj == "INDEX":
            return [self.index_on(EventType.DINDEX)]
        if obj in ("DATABASE", "SCHEMA"):
            s.accept_seq("IF", "EXISTS")
            return self.query(QueryKind.DDL, self.ident())
        if obj in _DCL_OBJECTS:
            return self.query(QueryKind.DCL)
        if obj in _NAMED_OBJECTS:
            return self.object_query()
        if obj == "PREPARE":
            return self.query(QueryKind.OTHER)
        return self.query(QueryKind.DDL)

    def rename(self) -> list[DdlResult]:
        s = self.s
        obj = s.up()
        s.next()
        if obj in _DCL_OBJECTS:
            return self.query(QueryKind.DCL)
        if obj not in ("TABLE", "TABLES"):
            return self.query(QueryKind.OTHER)
        s.accept_seq("IF", "EXISTS")
        results: list[DdlResult] = []
        while True:
            old = self.qualified()
            if old is None:
                break
            self.skip_wait()
            if not s.accept("TO"):
                break
            new = self.qualified()
            if new is None:
                break
            old_schema, old_table = self.full(old)
            new_schema, new_table = self.full(new)
            results.append(DdlResult(EventType.RENAME, new_schema, new_table, old_schema, old_table, QueryKind.DDL))
            if not s.accept(","):
                break
        return results or self.query(QueryKind.DDL)

    def truncate(self) -> list[DdlResult]:
        s = self.s
        s.accept("TABLE")
        name = self.qualified()
        return [self.table_result(EventType.TRUNCATE, name, QueryKind.DDL)]

    def insert(self) -> list[DdlResult]:
        s = self.s
        while s.accept("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"):
            pass
        s.accept("INTO")
        return [self.table_result(EventType.INSERT, self.qualified(), QueryKind.DML)]

    def update(self) -> list[DdlResult]:
        s = self.s
        while s.accept("LOW_PRIORITY", "IGNORE"):
            pass
        name = self.qualified()
        if name is not None:
            if s.accept("AS"):
                s.next()
            elif s.peek().kind in (_W, _Q) and s.up() not in ("SET", "PARTITION"):
                s.next()  # alias
            if s.up() in ("SET", "PARTITION"):
                return [self.table_result(EventType.UPDATE, name, QueryKind.DML)]
        return [self.table_result(EventType.UPDATE, None, QueryKind.DML)]

    def delete(self) -> list[DdlResult]:
        s = self.s
        while s.accept("LOW_PRIORITY", "QUICK", "IGNORE"):
            pass
        if s.accept("FROM"):
            name = self.qualified()
            if name is not None:
                if s.accept("AS"):
                    s.next()
                elif s.peek().kind in (_W, _Q) and s.up() not in _DELETE_TAIL:
                    s.next()  # alias
                if s.at_stmt_end() or s.up() in _DELETE_TAIL:
                    return [self.table_result(EventType.DELETE, name, QueryKind.DML)]
        return [self.table_result(EventType.DELETE, None, QueryKind.DML)]

    def load(self) -> list[DdlResult]:
        s = self.s
        if not s.accept("DATA", "XML"):
            return self.query(QueryKind.OTHER)
        depth = 0
        while not s.at_stmt_end():
            tok = s.next()
            if tok.up == "(":
                depth += 1
            elif tok.up == ")":
                depth -= 1
            elif depth == 0 and tok.up == "INTO" and s.up() == "TABLE":
                s.pos += 1
                return [self.table_result(EventType.INSERT, self.qualified(), QueryKind.DML)]
        return [self.table_result(EventType.INSERT, None, QueryKind.DML)]

    def with_(self) -> list[DdlResult]:
        s = self.s
        s.accept("RECURSIVE")
        while True:
            if self.ident() is None:
                return self.query(QueryKind.OTHER)
            if s.up() == "(":
                s.skip_parens()
            if not s.accept("AS"):
                return self.query(QueryKind.OTHER)
            if s.up() != "(":
                return self.query(QueryKind.OTHER)
            s.skip_parens()
            if not s.accept(","):
                break
        up = s.up()
        if up in ("UPDATE", "DELETE", "INSERT", "REPLACE"):
            return self.statement()
        return self.query(QueryKind.OTHER)

    def begin(self) -> list[DdlResult]:
        s = self.s
        s.accept("WORK")
        if s.at_stmt_end():
            return self.query(QueryKind.BEGIN)
        self.stop = True  # BEGIN NOT ATOMIC ... END: a compound statement
        return self.query(QueryKind.OTHER)

    def start(self) -> list[DdlResult]:
        if self.s.accept("TRANSACTION"):
            return self.query(QueryKind.BEGIN)
        return self.query(QueryKind.OTHER)

    def commit(self) -> list[DdlResult]:
        return self.query(QueryKind.COMMIT)

    def rollback(self) -> list[DdlResult]:
        s = self.s
        s.accept("WORK")
        if s.up() == "TO":
            return self.query(QueryKind.SAVEPOINT)
        return self.query(QueryKind.ROLLBACK)

    def savepoint(self) -> list[DdlResult]:
        return self.query(QueryKind.SAVEPOINT)

    def release(self) -> list[DdlResult]:
        if self.s.up() == "SAVEPOINT":
            return self.query(QueryKind.SAVEPOINT)
        return self.query(QueryKind.OTHER)

    def xa(self) -> list[DdlResult]:
        kind = _XA_VERBS.get(self.s.up(), QueryKind.OTHER)
        return self.query(kind)

    def dcl(self) -> list[DdlResult]:
        return self.query(QueryKind.DCL)

    def set_(self) -> list[DdlResult]:
        s = self.s
        if s.up() in ("PASSWORD", "ROLE") or (s.up() == "DEFAULT" and s.up(1) == "ROLE"):
            return self.query(QueryKind.DCL)
        return self.query(QueryKind.OTHER)


_DELETE_TAIL = frozenset({"WHERE", "ORDER", "LIMIT", "PARTITION", "RETURNING", ";"})

_XA_VERBS = {
    "START": QueryKind.XA_START,
    "BEGIN": QueryKind.XA_START,
    "END": QueryKind.XA_END,
    "PREPARE": QueryKind.XA_PREPARE,
    "COMMIT": QueryKind.XA_COMMIT,
    "ROLLBACK": QueryKind.XA_ROLLBACK,
}

_HANDLERS = {
    "CREATE": _Reader.create,
    "ALTER": _Reader.alter,
    "DROP": _Reader.drop,
    "RENAME": _Reader.rename,
    "TRUNCATE": _Reader.truncate,
    "INSERT": _Reader.insert,
    "REPLACE": _Reader.insert,
    "UPDATE": _Reader.update,
    "DELETE": _Reader.delete,
    "LOAD": _Reader.load,
    "WITH": _Reader.with_,
    "BEGIN": _Reader.begin,
    "START": _Reader.start,
    "COMMIT": _Reader.commit,
    "ROLLBACK": _Reader.rollback,
    "SAVEPOINT": _Reader.savepoint,
    "RELEASE": _Reader.release,
    "XA": _Reader.xa,
    "GRANT": _Reader.dcl,
    "REVOKE": _Reader.dcl,
    "SET": _Reader.set_,
}


# --------------------------------------------------------------------------------------------------------------------
# public entry points

_CACHE_MAX_SQL = 4096  # longer statements (big INSERTs) are not worth keeping in the memo


@functools.lru_cache(maxsize=1024)
def _classify_cached(sql: str, default_schema: str | None) -> tuple[DdlResult, ...]:
    return _classify(sql, default_schema)


def _classify(sql: str, default_schema: str | None) -> tuple[DdlResult, ...]:
    try:
        results = _Reader(sql, default_schema).statements()
    except Exception:  # never raise on odd input: canal falls back to QUERY too
        results = []
    if not results:
        return (DdlResult(EventType.QUERY, default_schema, None, kind=QueryKind.OTHER),)
    return tuple(results)


def classify_ddl(sql: str, default_schema: str | None) -> list[DdlResult]:
    """Classify a query event's statement(s) as canal's DDL parser does; never raises.

    ``default_schema`` is the query event's current database (None or "" when there is none); unqualified names
    take it. Multi-table statements (DROP TABLE a, b / RENAME TABLE a TO b, c TO d) give one result per table; an
    ALTER TABLE gives one result per distinct kind of change (ALTER, CINDEX, DINDEX, RENAME), table options first
    as in canal. The first result is the one for the entry header; every result counts for filtering (the event is
    kept when any of them passes) and for invalidating table metadata. Unparseable or empty text gives one QUERY
    result with the default schema.
    """
    default = default_schema or None
    if len(sql) <= _CACHE_MAX_SQL:
        return list(_classify_cached(sql, default))
    return list(_classify(sql, default))


def query_kind(sql: str) -> QueryKind:
    """The kind of the (first) statement of a query event: transaction control, DML, DDL, DCL or OTHER."""
    return classify_ddl(sql, None)[0].kind


_XA_PREFIX_RE = re.compile(r"\s*XA\s+(?:START|BEGIN|END|PREPARE|COMMIT|ROLLBACK)\b\s*(.*?)\s*;?\s*\Z", re.I | re.S)


def xa_xid(sql: str) -> str | None:
    """The xid text of an XA statement (``X'..',X'..',1`` or a quoted string), as canal's ``XA_XID`` prop; else None."""
    m = _XA_PREFIX_RE.match(sql)
    return m.group(1) if m else None
