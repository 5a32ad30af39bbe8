"""The reading position over a statement's tokens, with the small vocabulary every statement reader uses: keywords,
names, literals, expressions, balanced groups, and the typed error for text that cannot be read."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Final, TypeVar

from canal.errors import SqlError
from canal.sql.charsets import CHARSETS
from canal.sql.lexer import DSTRING, END, NUMBER, PUNCT, QUOTED, STRING, WORD, Token, TokenStream
from canal.sql.modes import DEFAULT_MODE, SqlMode
from canal.sql.statements import Expression, Literal, TableName

__all__ = ["Cursor"]

_T = TypeVar("_T")

_OPERATOR_CHARS: Final = frozenset("+-*/%|&^<>=!~")
_WORD_OPERATORS: Final = frozenset({"AND", "OR", "XOR", "DIV", "MOD"})
_UNARY: Final = frozenset("-+~!")
# the words between CREATE / ALTER / DROP and the kind of object that say how it is made (TEMPORARY, UNIQUE, ...)
_CREATE_MODIFIERS: Final = frozenset(
    {"TEMPORARY", "ONLINE", "OFFLINE", "IGNORE", "UNIQUE", "FULLTEXT", "SPATIAL", "AGGREGATE", "GLOBAL", "LOCAL",
     "UNDO", "EXTERNAL", "VECTOR"}
)  # fmt: skip
_SHOWN: Final = 60  # characters of the statement shown in an error


class Cursor:
    """A read position in one SQL text. Methods named ``accept*`` consume only on a match and say whether they did;
    ``expect*`` and the readers of names and literals raise :class:`~canal.errors.SqlError` instead."""

    __slots__ = ("s",)

    def __init__(self, sql: str, mode: SqlMode = DEFAULT_MODE) -> None:
        self.s = TokenStream(sql, mode)

    # -- looking ------------------------------------------------------------------------------------------------------

    @property
    def pos(self) -> int:
        return self.s.pos

    @pos.setter
    def pos(self, value: int) -> None:
        self.s.pos = value

    @property
    def sql(self) -> str:
        return self.s.sql

    @property
    def mode(self) -> SqlMode:
        """The sql_mode the text is read under (:mod:`canal.sql.modes`)."""
        return self.s.mode

    def peek(self, k: int = 0) -> Token:
        return self.s.peek(k)

    def up(self, k: int = 0) -> str:
        """The upper-case text of the token ``k`` ahead: a keyword or a punctuation character ("" for quoted)."""
        return self.s.peek(k).up

    def next(self) -> Token:
        return self.s.next()

    def at_end(self) -> bool:
        """At the end of the text or of the statement (``;``)."""
        tok = self.s.peek()
        return tok is END or tok.up == ";"

    def text(self, first: int, stop: int) -> str:
        """Tokens ``first`` to ``stop - 1`` as written (blanks and comments between them as one space)."""
        return self.s.text(first, stop)

    def text_from(self, first: int) -> str:
        return self.s.text(first, self.s.pos)

    # -- errors -------------------------------------------------------------------------------------------------------

    def error(self, what: str) -> SqlError:
        tok = self.s.peek()
        sql = self.s.sql
        offset = len(sql) if tok is END else tok.start
        near = sql[offset : offset + _SHOWN].split("\n", 1)[0]
        head = " ".join(sql[:_SHOWN].split())
        where = f"near {near!r}" if near else "at the end"
        return SqlError(f"cannot read SQL {head!r}...: {what} {where} (offset {offset})", offset=offset)

    # -- keywords and punctuation -------------------------------------------------------------------------------------

    def accept(self, *words: str) -> bool:
        """Consume the next token if it is one of ``words`` (upper case, or a punctuation character)."""
        if self.s.peek().up in words:
            self.s.pos += 1
            return True
        return False

    def accept_seq(self, *words: str) -> bool:
        """Consume ``words`` if they come next, in order; otherwise consume nothing."""
        for i, w in enumerate(words):
            if self.s.peek(i).up != w:
                return False
        self.s.pos += len(words)
        return True

    def expect(self, *words: str) -> str:
        """Consume one of ``words``; return it."""
        up = self.s.peek().up
        if up and up in words:
            self.s.pos += 1
            return up
        raise self.error(f"expected {' or '.join(words)}")

    def expect_seq(self, *words: str) -> None:
        if not self.accept_seq(*words):
            raise self.error(f"expected {' '.join(words)}")

    def accept_equals(self) -> None:
        """An optional ``=`` (table and index options allow one)."""
        if self.s.peek().up == "=":
            self.s.pos += 1

    def skip_user(self) -> None:
        """A user as DEFINER = names it: ``CURRENT_USER[()]``, ``name``, ``name@host`` (quoted or not)."""
        if self.accept("CURRENT_USER"):
            if self.up() == "(" and self.up(1) == ")":
                self.s.pos += 2
            return
        self.next()
        if self.up() == "@":
            self.s.pos += 1
            self.next()
            while self.up() in (".", "%", "-", ":") and self.peek(1).kind == WORD:  # an unquoted host: 10.0.0.1
                self.s.pos += 2

    def create_modifiers(self) -> set[str]:
        """OR REPLACE, DEFINER=..., ALGORITHM=..., SQL SECURITY ..., TEMPORARY, ONLINE, UNIQUE, ... (as seen), after
        CREATE / ALTER / DROP and before the kind of object."""
        seen: set[str] = set()
        while True:
            up = self.up()
            if up == "OR" and self.up(1) == "REPLACE":
                self.s.pos += 2
                seen.add("OR REPLACE")
            elif up == "DEFINER":
                self.s.pos += 1
                self.accept("=")
                self.skip_user()
            elif up == "ALGORITHM":
                self.s.pos += 1
                self.accept("=")
                self.next()
            elif up == "SQL" and self.up(1) == "SECURITY":
                self.s.pos += 3
            elif up in _CREATE_MODIFIERS:
                self.s.pos += 1
                seen.add(up)
            else:
                return seen

    # -- names --------------------------------------------------------------------------------------------------------

    def is_name(self, k: int = 0) -> bool:
        tok = self.s.peek(k)
        return tok.kind in (QUOTED, DSTRING) or (tok.kind == WORD and bool(tok.text))

    def opt_ident(self) -> str | None:
        """A name (unquoted word, `quoted`, or "quoted" as under ANSI_QUOTES), or None without consuming."""
        tok = self.s.peek()
        if tok.kind in (QUOTED, DSTRING) or (tok.kind == WORD and tok.text):
            self.s.pos += 1
            return tok.text
        return None

    def ident(self, what: str = "a name") -> str:
        name = self.opt_ident()
        if name is None:
            raise self.error(f"expected {what}")
        return name

    def opt_table_name(self) -> TableName | None:
        """``name`` or ``schema.name``; None (consuming nothing) when no complete name is there."""
        start = self.s.pos
        first = self.opt_ident()
        if first is None:
            return None
        if self.s.peek().up == ".":
            self.s.pos += 1
            second = self.opt_ident()
            if second is None:
                self.s.pos = start
                return None
            return TableName(first, second)
        return TableName(None, first)

    def table_name(self, what: str = "a table name") -> TableName:
        name = self.opt_table_name()
        if name is None:
            raise self.error(f"expected {what}")
        return name

    def name_list(self) -> tuple[str, ...]:
        """``(a, b, ...)``: a parenthesized list of names."""
        return self.paren_list(lambda: self.ident("a column name"))

    def paren_list(self, item: Callable[[], _T]) -> tuple[_T, ...]:
        """``(item, item, ...)``: one or more items read by ``item``, in parentheses."""
        self.expect("(")
        items = [item()]
        while self.accept(","):
            items.append(item())
        self.expect(")")
        return tuple(items)

    # -- literals -----------------------------------------------------------------------------------------------------

    def string(self, what: str = "a string") -> str:
        tok = self.s.peek()
        if tok.kind not in (STRING, DSTRING):
            raise self.error(f"expected {what}")
        self.s.pos += 1
        parts = [tok.text]
        while self.s.peek().kind == STRING:  # adjacent literals concatenate: 'a' 'b'
            parts.append(self.s.next().text)
        return "".join(parts)

    def integer(self, what: str = "a number") -> int:
        tok = self.s.peek()
        if tok.kind != WORD or not tok.text.isdigit():
            raise self.error(f"expected {what}")
        self.s.pos += 1
        return int(tok.text)

    def word_or_string(self, what: str = "a value") -> str:
        """An option value: a string (unquoted), a name or a number, as written."""
        tok = self.s.peek()
        if tok.kind in (STRING, DSTRING):
            return self.string()
        if tok.kind in (WORD, QUOTED, NUMBER) and tok.text:
            self.s.pos += 1
            return tok.text
        raise self.error(f"expected {what}")

    # -- groups and expressions ---------------------------------------------------------------------------------------

    def skip_group(self) -> tuple[int, int]:
        """At ``(``: skip to just after its matching ``)``; return the token range inside (first, stop)."""
        self.expect("(")
        first = self.s.pos
        depth = 1
        while True:
            tok = self.s.next()
            if tok is END:
                raise self.error("expected ')'")
            if tok.kind == PUNCT:
                if tok.up == "(":
                    depth += 1
                elif tok.up == ")":
                    depth -= 1
                    if depth == 0:
                        return first, self.s.pos - 1

    def skip_tolerant(self) -> None:
        """Skip one token, or a whole ``( ... )`` group -- to the end of the text if it is never closed (for
        skipping over text that is not read)."""
        if self.s.next().up != "(":
            return
        depth = 1
        while depth:
            tok = self.s.next()
            if tok is END:
                return
            if tok.kind == PUNCT:
                if tok.up == "(":
                    depth += 1
                elif tok.up == ")":
                    depth -= 1

    def group_text(self) -> str:
        """At ``(``: the text inside the balanced group, as written."""
        first, stop = self.skip_group()
        return self.text(first, stop)

    def expression(self) -> Expression:
        """A value expression as DEFAULT, ON UPDATE and SET DEFAULT take it: a literal, a name, a call, a
        parenthesized expression, joined by operators."""
        first = self.s.pos
        value = self._operand()
        literal = value is not _NOT_LITERAL
        while True:
            tok = self.s.peek()
            if (tok.kind == PUNCT and tok.up in _OPERATOR_CHARS) or (tok.kind == WORD and tok.up in _WORD_OPERATORS):
                self.s.pos += 1
                while self.s.peek().kind == PUNCT and self.s.peek().up in _OPERATOR_CHARS:  # ||, <=, <<
                    self.s.pos += 1
                self._operand()
                literal = False
                continue
            break
        text = self.text_from(first)
        if literal:
            return Expression(text, True, value)  # type: ignore[arg-type]
        return Expression(text)

    def _operand(self) -> Literal | object:
        """Read one operand; return its literal value, or ``_NOT_LITERAL``."""
        tok = self.s.peek()
        kind = tok.kind
        if kind == PUNCT:
            if tok.up == "(":
                self.skip_group()
                return _NOT_LITERAL
            digits = self.s.peek(1)
            if tok.up == "." and digits.kind == WORD and digits.text.isdigit():
                self.s.pos += 2  # .5
                return Decimal("." + digits.text)
            if tok.up == "@":  # @@var, @@session.var, @@global.var (a DEFAULT MariaDB evaluates per statement)
                self.s.pos += 1
                self.accept("@")
                self.ident("a variable name")
                if self.s.peek().up == ".":
                    self.s.pos += 1
                    self.ident("a variable name")
                return _NOT_LITERAL
            if tok.up in _UNARY:
                signs = []
                while self.s.peek().kind == PUNCT and self.s.peek().up in _UNARY:  # a loop: no recursion depth
                    signs.append(self.s.next().up)
                inner = self._operand()
                if not isinstance(inner, int | Decimal | float) or isinstance(inner, bool) or {"~", "!"} & set(signs):
                    return _NOT_LITERAL
                return -inner if signs.count("-") % 2 else inner
            raise self.error("expected an expression")
        if kind in (STRING, DSTRING):
            text = self.string()
            return None if text == "" and self.s.mode.empty_string_is_null else text
        if kind == NUMBER:
            self.s.pos += 1
            return _number(tok.text)
        if kind == QUOTED:
            self.s.pos += 1
            if self.s.peek().up == ".":  # t.c
                self.s.pos += 1
                self.ident("a column name")
            return _NOT_LITERAL
        if kind != WORD:
            raise self.error("expected an expression")
        self.s.pos += 1
        up = tok.up
        nxt = self.s.peek()
        if nxt.kind == STRING and nxt.start == tok.end:  # X'0f', B'01', N'x', _utf8mb4'x'
            self.s.pos += 1
            if up == "X":
                return _hex_bytes(nxt.text, odd=False)
            if up == "B":
                return _bit_bytes(nxt.text)
            if up == "N" or up.startswith("_"):
                return nxt.text
            return _NOT_LITERAL
        if up.startswith("_") and nxt.kind == STRING:  # _utf8mb4 'x'
            self.s.pos += 1
            return nxt.text
        if up.startswith("_") and nxt.kind == WORD and _introduced_number(nxt, self.s.peek(1)):
            # _latin1 X'41', _utf8mb4 0x41, _binary b'1': the bytes of a hex or bit literal, read in that charset
            value = self._operand()
            return _introduced_text(up[1:], value)
        if up in ("NEXT", "PREVIOUS") and nxt.up == "VALUE" and self.s.peek(1).up == "FOR":
            self.s.pos += 2  # NEXT VALUE FOR [db.]seq (MariaDB sequences)
            self.ident("a sequence name")
            if self.s.peek().up == ".":
                self.s.pos += 1
                self.ident("a sequence name")
            return _NOT_LITERAL
        if tok.text.isdigit():
            return int(tok.text)
        mantissa, e, exponent = tok.text.lower().partition("e")
        if e and mantissa.isdigit() and exponent.isdigit():  # 1e3 (a signed exponent is a NUMBER token)
            return float(tok.text)
        if up.startswith("0X") and len(up) > 2:
            return _hex_bytes(tok.text[2:], odd=True)
        if up.startswith("0B") and len(up) > 2:
            return _bit_bytes(up[2:])
        if up == "NULL":
            return None
        if up in ("TRUE", "FALSE"):
            return up == "TRUE"
        if nxt.up == "(":
            self.skip_group()  # a call: NOW(), CURRENT_TIMESTAMP(6), uuid()
        elif nxt.up == "." and self.is_name(1):
            self.s.pos += 2  # t.c
        elif up in ("DATE", "TIME", "TIMESTAMP") and nxt.kind == STRING:
            self.s.pos += 1  # DATE '2024-01-01'
        elif up == "INTERVAL":
            self.skip_tolerant()  # the amount
            self.s.next()  # the unit
        return _NOT_LITERAL


_NOT_LITERAL: Final = object()


def _introduced_number(word: Token, after: Token) -> bool:
    """Whether ``word`` (after a charset introducer) starts a hex or bit literal: X'..', B'..', 0x.., 0b.."""
    up = word.up
    if up in ("X", "B") and after.kind == STRING and after.start == word.end:
        return True
    return (up.startswith("0X") or up.startswith("0B")) and len(up) > 2


def _hex_bytes(digits: str, *, odd: bool) -> bytes | object:
    """The bytes of a hexadecimal literal's digits (``X'0041'``: two bytes, leading zeros kept; ``0x41``'s may be odd
    in number, a zero before them)."""
    if odd and len(digits) % 2:
        digits = "0" + digits
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return _NOT_LITERAL


def _bit_bytes(digits: str) -> bytes | object:
    """The bytes of a bit literal's digits (``b'000000001'``: two bytes, as many as its digits fill)."""
    if not set(digits) <= {"0", "1"}:
        return _NOT_LITERAL
    return int(digits, 2).to_bytes((len(digits) + 7) // 8, "big") if digits else b""


def _introduced_text(charset: str, value: Literal | object) -> Literal | object:
    """A hex or bit literal after ``_charset``: the string its bytes are in that charset (``_binary``: the bytes
    read as latin-1, one character a byte, as the other binary literals are held)."""
    if not isinstance(value, bytes):
        return _NOT_LITERAL
    data = value
    if charset.lower() == "binary":
        return data.decode("latin-1")
    known = CHARSETS.get(charset.lower())
    codec = known.codec if known is not None else None
    if codec is None:
        return _NOT_LITERAL
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        return _NOT_LITERAL


def _number(text: str) -> Decimal | float:
    """A NUMBER token's value (the lexer makes them of digits, one '.' and an optional exponent only)."""
    return float(text) if "e" in text or "E" in text else Decimal(text)
