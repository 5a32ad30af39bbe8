"""What of a statement's ``sql_mode`` changes how its text reads.

The server reads a statement under its session's ``sql_mode``, and a Query event logs that mode with it (a status
variable: the server's bit set; :mod:`canal.parse.mysql.query_status`). Four modes change what the same text says:

* ``NO_BACKSLASH_ESCAPES`` -- a backslash in a string is a character, not an escape: ``'C:\\'`` is a whole string,
  and ``'C:\\', DROP COLUMN s`` a string, then an action;
* ``ANSI_QUOTES`` -- ``"..."`` quotes a name, not a string: ``DEFAULT "a"`` refers to column ``a`` (an expression the
  server computes), and a backslash in it is a character of the name;
* ``EMPTY_STRING_IS_NULL`` (MariaDB) -- the literal ``''`` is NULL: ``DEFAULT ''`` is ``DEFAULT NULL``;
* ``ORACLE`` (MariaDB) -- another grammar: ``DATE`` is a DATETIME, ``NUMBER`` a DECIMAL, ``VARCHAR2`` a VARCHAR. The
  reader does not model it: a statement the schema follows is not read under it (fail closed).

``PIPES_AS_CONCAT`` changes what ``||`` computes, which only an expression shows: the reader never evaluates one (a
DEFAULT of an expression is "computed", whatever its operators), so it reads alike. A statement whose mode is not
known (not logged) is read as under the server's default mode, where none of these is set.

MariaDB's ``SET STATEMENT sql_mode = ... FOR statement`` logs the mode it sets, but the server read the text under
the session's mode, which the binlog does not hold: such a statement is read only when its text reads the same under
every mode (:func:`reads_alike`), and is an error otherwise.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = [
    "ANSI_QUOTES",
    "DEFAULT_MODE",
    "EMPTY_STRING_IS_NULL",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "ORACLE",
    "PIPES_AS_CONCAT",
    "SqlMode",
    "mode_bits",
]

# the server's sql_mode bits (MySQL's and MariaDB's alike below bit 32; ORACLE is a grammar of MariaDB's only, and
# bit 32 is EMPTY_STRING_IS_NULL on MariaDB, TIME_TRUNCATE_FRACTIONAL on MySQL 8)
PIPES_AS_CONCAT: Final = 1 << 1
ANSI_QUOTES: Final = 1 << 2
ORACLE: Final = 1 << 9
NO_AUTO_VALUE_ON_ZERO: Final = 1 << 19
NO_BACKSLASH_ESCAPES: Final = 1 << 20
EMPTY_STRING_IS_NULL: Final = 1 << 32

_NAMES: Final = {
    "REAL_AS_FLOAT": 1 << 0,
    "PIPES_AS_CONCAT": PIPES_AS_CONCAT,
    "ANSI_QUOTES": ANSI_QUOTES,
    "IGNORE_SPACE": 1 << 3,
    "IGNORE_BAD_TABLE_OPTIONS": 1 << 4,
    "ONLY_FULL_GROUP_BY": 1 << 5,
    "NO_UNSIGNED_SUBTRACTION": 1 << 6,
    "NO_DIR_IN_CREATE": 1 << 7,
    "POSTGRESQL": 1 << 8,
    "ORACLE": ORACLE,
    "MSSQL": 1 << 10,
    "DB2": 1 << 11,
    "MAXDB": 1 << 12,
    "NO_KEY_OPTIONS": 1 << 13,
    "NO_TABLE_OPTIONS": 1 << 14,
    "NO_FIELD_OPTIONS": 1 << 15,
    "MYSQL323": 1 << 16,
    "MYSQL40": 1 << 17,
    "ANSI": 1 << 18,
    "NO_AUTO_VALUE_ON_ZERO": NO_AUTO_VALUE_ON_ZERO,
    "NO_BACKSLASH_ESCAPES": NO_BACKSLASH_ESCAPES,
    "STRICT_TRANS_TABLES": 1 << 21,
    "STRICT_ALL_TABLES": 1 << 22,
    "NO_ZERO_IN_DATE": 1 << 23,
    "NO_ZERO_DATE": 1 << 24,
    "INVALID_DATES": 1 << 25,
    "ERROR_FOR_DIVISION_BY_ZERO": 1 << 26,
    "TRADITIONAL": 1 << 27,
    "NO_AUTO_CREATE_USER": 1 << 28,
    "HIGH_NOT_PRECEDENCE": 1 << 29,
    "NO_ENGINE_SUBSTITUTION": 1 << 30,
    "PAD_CHAR_TO_FULL_LENGTH": 1 << 31,
    "EMPTY_STRING_IS_NULL": EMPTY_STRING_IS_NULL,
    "SIMULTANEOUS_ASSIGNMENT": 1 << 33,
    "TIME_ROUND_FRACTIONAL": 1 << 34,
}
"""MariaDB's sql_mode names and their bits (as a Query event logs them)."""


def mode_bits(names: str) -> int:
    """The bit set of a ``sql_mode`` given by names (``'NO_BACKSLASH_ESCAPES,ANSI_QUOTES'``), as MariaDB logs it --
    the names of single modes only (a ValueError names one it does not know)."""
    bits = 0
    for name in names.upper().replace(" ", "").split(","):
        if not name:
            continue
        if name not in _NAMES:
            raise ValueError(f"unknown sql_mode {name!r}")
        bits |= _NAMES[name]
    return bits


@attrs.frozen(slots=True)
class SqlMode:
    """How a statement's text reads (module docstring): ``backslash_escapes`` (not under NO_BACKSLASH_ESCAPES),
    ``ansi_quotes``, ``empty_string_is_null``, ``oracle``; ``bits`` the logged bit set it came from (None: not
    known, read as the default mode) and ``mariadb`` whether a MariaDB server logged it."""

    backslash_escapes: bool = True
    ansi_quotes: bool = False
    empty_string_is_null: bool = False
    oracle: bool = False
    bits: int | None = attrs.field(default=None, eq=False)
    mariadb: bool = attrs.field(default=True, eq=False)

    @classmethod
    def of(cls, bits: int | None, *, mariadb: bool = True) -> SqlMode:
        """The mode of a logged bit set (None: not known -- the default mode). ``mariadb``: whether a MariaDB
        server logged it (its bits 9 and 32 are ORACLE and EMPTY_STRING_IS_NULL there, not on MySQL)."""
        if not bits:
            return DEFAULT_MODE if bits is None else SqlMode(bits=0, mariadb=mariadb)
        return cls(
            backslash_escapes=not bits & NO_BACKSLASH_ESCAPES,
            ansi_quotes=bool(bits & ANSI_QUOTES),
            empty_string_is_null=mariadb and bool(bits & EMPTY_STRING_IS_NULL),
            oracle=mariadb and bool(bits & ORACLE),
            bits=bits,
            mariadb=mariadb,
        )

    @classmethod
    def named(cls, names: str, *, mariadb: bool = True) -> SqlMode:
        """The mode of ``sql_mode`` names (:func:`mode_bits`)."""
        return cls.of(mode_bits(names), mariadb=mariadb)

    @property
    def reads_as_default(self) -> bool:
        """Whether text reads under this mode as under the default one."""
        return self == DEFAULT_MODE

    @property
    def no_auto_value_on_zero(self) -> bool:
        """Whether a 0 written to an AUTO_INCREMENT column stays 0 (NO_AUTO_VALUE_ON_ZERO); False when the mode is
        not known."""
        return self.bits is not None and bool(self.bits & NO_AUTO_VALUE_ON_ZERO)

    def describe(self) -> str:
        """The modes that change how text reads, for a message."""
        names = [
            name
            for name, on in (
                ("NO_BACKSLASH_ESCAPES", not self.backslash_escapes),
                ("ANSI_QUOTES", self.ansi_quotes),
                ("EMPTY_STRING_IS_NULL", self.empty_string_is_null),
                ("ORACLE", self.oracle),
            )
            if on
        ]
        return ",".join(names) or "the default sql_mode"


DEFAULT_MODE: Final = SqlMode()
"""The server's default mode, as far as reading goes: backslash escapes, ``"`` quotes strings."""

LEXINGS: Final = tuple(
    SqlMode(backslash_escapes=b, ansi_quotes=a, empty_string_is_null=e)
    for b in (True, False)
    for a in (False, True)
    for e in (False, True)
)
"""Every way a session's mode may make a text read (:func:`canal.sql.reader` asks them of a SET STATEMENT that sets
sql_mode, whose session's mode is not logged)."""
