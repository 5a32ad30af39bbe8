"""The SQL tokenizer: MySQL/MariaDB lexical rules, read lazily so a megabyte INSERT costs only its first tokens.

* Comments (``-- `` to the end of the line, ``#``, ``/* ... */``, optimizer hints) are skipped. The content of
  executable version comments (``/*! ... */``, ``/*!NNNNN ... */``, MariaDB's ``/*M! ... */`` and
  ``/*M!NNNNNN ... */``) is SQL: MariaDB executes every one of them (they only hide syntax from older servers), so
  the reader reads them too. ``--`` not followed by a blank is an operator, not a comment (MySQL's rule).
* Backtick-quoted identifiers (doubled backticks inside) become :data:`QUOTED` tokens, unquoted.
* ``'...'`` strings become :data:`STRING`, ``"..."`` :data:`DSTRING` under MySQL's default sql_mode. A name
  position accepts both (a string there is a syntax error, so it cannot reach a binlog); a value position reads a
  string. Backslash escapes and doubled quotes are undone. The statement's sql_mode changes that
  (:mod:`canal.sql.modes`): under ``NO_BACKSLASH_ESCAPES`` a backslash is a character of the string, and under
  ``ANSI_QUOTES`` ``"..."`` is a :data:`QUOTED` name (doubled quotes undone, no escapes).
* Words (keywords, unquoted names, numbers) are :data:`WORD`; a decimal number with a fraction or signed exponent
  (``1.5``, ``2e-3``) is one :data:`NUMBER` token; every other character is one :data:`PUNCT` token (so ``x.5`` is
  a name, ``.`` and a name, and ``.5`` reads as ``.`` and ``5``).

Every token keeps its offsets in the statement, so a reader can hand back text exactly as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, NamedTuple

from canal.sql.modes import DEFAULT_MODE, SqlMode

__all__ = [
    "DSTRING",
    "END",
    "NUMBER",
    "PUNCT",
    "QUOTED",
    "STRING",
    "WORD",
    "Token",
    "TokenStream",
    "tokens",
    "unescape",
    "without_strings",
]

WORD: Final = 0  # keyword, unquoted identifier or integer
QUOTED: Final = 1  # `quoted identifier`
STRING: Final = 2  # 'string'
DSTRING: Final = 3  # "string" (an identifier under ANSI_QUOTES)
PUNCT: Final = 4  # one character
NUMBER: Final = 5  # 1.5, 1., 2E-4

# Blanks are matched as the prefix of the token after them (one match per token, not two); words come first as
# the most frequent tokens. How quotes read depends on the statement's sql_mode (canal.sql.modes): whether a
# backslash escapes in a string, and whether "..." is a string or a name.
_HEAD = r"""
    \s*(?:
        (?P<skip>
            /\*M?!(?:\d{5}(?:\d(?=\s))?)?    # executable comment opener: its content is SQL
          | \*/                              # ... and its closer
          | /\*.*?(?:\*/|\Z)                 # ordinary comment, optimizer hint
          | (?:--(?=[\s\x00-\x1f]|\Z)|\#)[^\n]*
        )
      | (?P<n>\d+\.\d*(?:[eE][-+]?\d+)?(?![0-9A-Za-z_$\u0080-\U0010ffff])
             | \d+[eE][-+]\d+(?![0-9A-Za-z_$\u0080-\U0010ffff]))
      | (?P<w>[0-9A-Za-z_$\u0080-\U0010ffff]+)
      | (?P<q>`(?:[^`]|``)*(?:`|\Z))
"""
_TAIL = r"""
      | (?P<p>\S)
    )
"""


def _quoted(group: str, quote: str, escapes: bool) -> str:
    body = rf"[^{quote}\\]|\\.|{quote}{quote}" if escapes else rf"[^{quote}]|{quote}{quote}"
    return rf"      | (?P<{group}>{quote}(?:{body})*(?:{quote}|\Z))" + "\n"


def _pattern(backslash_escapes: bool, ansi_quotes: bool) -> re.Pattern[str]:
    """The token pattern of a mode: ``'...'`` strings with or without backslash escapes, ``"..."`` a string alike or
    (``ansi_quotes``) a name -- group ``a``, doubled quotes only, as in a `name`."""
    strings = _quoted("s", "'", backslash_escapes)
    strings += _quoted("a", '"', False) if ansi_quotes else _quoted("d", '"', backslash_escapes)
    return re.compile(_HEAD + strings + _TAIL, re.VERBOSE | re.DOTALL)


_PATTERNS: Final = {(b, a): _pattern(b, a) for b in (True, False) for a in (False, True)}


class Token(NamedTuple):
    """One token: its kind, its text (quoted tokens unquoted), upper-case text for words and punctuation (``""``
    for quoted tokens, so a quoted name never reads as a keyword), and its offsets in the statement. (A named tuple:
    tokens are made by the thousand, and a tuple is made several times faster than a frozen attrs instance.)"""

    kind: int
    text: str
    up: str
    start: int
    end: int


END: Final = Token(PUNCT, "", "", -1, -1)
"""Returned past the last token: its ``up`` matches no word and no punctuation."""

_ESCAPES: Final = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_ESCAPE_RES: Final = {q: re.compile(rf"\\(.)|{q}{q}", re.DOTALL) for q in "'\""}


def unescape(body: str, quote: str, backslash_escapes: bool = True) -> str:
    """A quoted string's content: backslash escapes (unless the mode has none: NO_BACKSLASH_ESCAPES) and doubled
    quotes undone, in one pass from the left (``\\"\\"`` is two quotes, not one; ``\\%`` and ``\\_`` keep
    their backslash, as MySQL does outside LIKE patterns)."""
    if backslash_escapes and "\\" in body:
        return _ESCAPE_RES[quote].sub(lambda m: quote if m.group(1) is None else _ESCAPES.get(m[1], m[1]), body)
    return body.replace(quote + quote, quote)


def _tokens(sql: str, mode: SqlMode = DEFAULT_MODE) -> Iterator[Token]:
    escapes = mode.backslash_escapes
    for m in _PATTERNS[(escapes, mode.ansi_quotes)].finditer(sql):
        group = m.lastgroup
        if group == "w":
            start, end = m.span(group)
            text = sql[start:end]
            yield Token(WORD, text, text.upper(), start, end)
        elif group == "p":
            start, end = m.span(group)
            text = sql[start:end]
            yield Token(PUNCT, text, text, start, end)
        elif group == "q" or group == "a":
            start, end = m.span(group)
            text = sql[start:end]
            quote = text[0]
            body = text[1:-1] if len(text) >= 2 and text.endswith(quote) else text[1:]
            yield Token(QUOTED, body.replace(quote + quote, quote), "", start, end)
        elif group == "s" or group == "d":
            start, end = m.span(group)
            text = sql[start:end]
            quote = text[0]
            body = text[1:-1] if len(text) >= 2 and text.endswith(quote) else text[1:]
            yield Token(STRING if quote == "'" else DSTRING, unescape(body, quote, escapes), "", start, end)
        elif group == "n":
            start, end = m.span(group)
            text = sql[start:end]
            yield Token(NUMBER, text, text, start, end)
        # "skip": a comment or a version comment's delimiter


def tokens(sql: str, mode: SqlMode = DEFAULT_MODE) -> Iterator[Token]:
    """Every token of ``sql`` read under ``mode``, lazily."""
    return _tokens(sql, mode)


class TokenStream:
    """A lazily filled token buffer with a read position."""

    __slots__ = ("_buf", "_it", "mode", "pos", "sql")

    def __init__(self, sql: str, mode: SqlMode = DEFAULT_MODE) -> None:
        self.sql = sql
        self.mode = mode
        self._it = _tokens(sql, mode)
        self._buf: list[Token] = []
        self.pos = 0

    def peek(self, k: int = 0) -> Token:
        i = self.pos + k
        buf = self._buf
        while len(buf) <= i:
            tok = next(self._it, None)
            if tok is None:
                return END
            buf.append(tok)
        return buf[i]

    def up(self, k: int = 0) -> str:
        return self.peek(k).up

    def next(self) -> Token:
        tok = self.peek()
        if tok is not END:
            self.pos += 1
        return tok

    def token(self, index: int) -> Token:
        """An already read token by its index."""
        return self._buf[index]

    def text(self, first: int, stop: int) -> str:
        """The statement's text of tokens ``first`` to ``stop - 1`` as written, with each run of blanks and comments
        between them shown as one space (none where the tokens touch)."""
        if stop <= first:
            return ""
        buf = self._buf
        sql = self.sql
        parts = [sql[buf[first].start : buf[first].end]]
        for i in range(first + 1, stop):
            tok = buf[i]
            if tok.start != buf[i - 1].end:
                parts.append(" ")
            parts.append(sql[tok.start : tok.end])
        return "".join(parts)


def without_strings(sql: str, limit: int = 200, mode: SqlMode | None = None) -> str:
    """``sql`` as an error message may show it: every string literal left out (``'***'``: passwords, connection
    strings and hashes are string literals), comments dropped, the blanks between tokens one space, cut to about
    ``limit`` characters (``...`` then). Only the tokens shown are read (a megabyte INSERT costs its head).
    ``mode``: the statement's sql_mode; when it is not known (None), a token that is part of a string under any mode
    is left out (under NO_BACKSLASH_ESCAPES, ``'a\\' , 'secret'`` holds two strings; read with escapes, ``secret``
    would be a word)."""
    others = [] if mode is not None else [_string_spans(sql, other) for other in _OTHER_LEXINGS]
    current: list[tuple[int, int] | None] = [next(spans, None) for spans in others]
    parts: list[str] = []
    size = 0
    end = None
    for tok in _tokens(sql, DEFAULT_MODE if mode is None else mode):
        hidden = tok.kind in (STRING, DSTRING)
        for i, spans in enumerate(others):
            span = current[i]
            while span is not None and span[1] <= tok.start:
                span = current[i] = next(spans, None)
            hidden = hidden or (span is not None and span[0] < tok.end)
        piece = "'***'" if hidden else sql[tok.start : tok.end]
        if end is not None and tok.start != end:
            piece = " " + piece
        parts.append(piece)
        size += len(piece)
        end = tok.end
        if size > limit:
            return "".join(parts)[:limit] + "..."
    return "".join(parts)


_OTHER_LEXINGS: Final = (
    SqlMode(backslash_escapes=False),
    SqlMode(ansi_quotes=True),
    SqlMode(backslash_escapes=False, ansi_quotes=True),
)


def _string_spans(sql: str, mode: SqlMode) -> Iterator[tuple[int, int]]:
    """The offsets of the string literals of ``sql`` read under ``mode``, in order."""
    return ((tok.start, tok.end) for tok in _tokens(sql, mode) if tok.kind in (STRING, DSTRING))
