"""MySQL/MariaDB character sets: the Python codec that decodes each, its widest character, and the charset of each
collation id (what a binlog table map names a column's character set by).

The collation ids are MariaDB 10.11's (``information_schema.COLLATIONS``) plus the ones only MySQL 8 has (76,
248-250, 255-323); the two servers agree wherever both define an id. An id neither defines is read as utf8mb4.
"""

from __future__ import annotations

import codecs
from typing import Final

import attrs


@attrs.frozen(slots=True)
class Charset:
    """A server character set: ``codec`` decodes its bytes (None: binary, kept as bytes); ``maxlen`` is the byte
    width of its widest character (a CHAR(n) column holds up to ``n * maxlen`` bytes)."""

    name: str
    codec: str | None
    maxlen: int


# Python has no codec for a few rare 8-bit charsets (armscii8, dec8, geostd8, hp8, keybcs2, swe7): their values are
# read byte for byte as latin-1, so ASCII text is exact and nothing is lost (the bytes come back with latin-1).
_CHARSETS: Final[tuple[Charset, ...]] = tuple(
    Charset(name, codec if codec is None else codecs.lookup(codec).name, maxlen)
    for name, codec, maxlen in (
        ("armscii8", "latin-1", 1),
        ("ascii", "ascii", 1),
        ("big5", "big5", 2),
        ("binary", None, 1),
        ("cp1250", "cp1250", 1),
        ("cp1251", "cp1251", 1),
        ("cp1256", "cp1256", 1),
        ("cp1257", "cp1257", 1),
        ("cp850", "cp850", 1),
        ("cp852", "cp852", 1),
        ("cp866", "cp866", 1),
        ("cp932", "cp932", 2),
        ("dec8", "latin-1", 1),
        ("eucjpms", "euc_jp", 3),  # EUC-JP with Microsoft's extensions; Python's euc_jp lacks only those
        ("euckr", "euc_kr", 2),
        ("gb18030", "gb18030", 4),
        ("gb2312", "gb2312", 2),
        ("gbk", "gbk", 2),
        ("geostd8", "latin-1", 1),
        ("greek", "iso8859-7", 1),
        ("hebrew", "iso8859-8", 1),
        ("hp8", "latin-1", 1),
        ("keybcs2", "latin-1", 1),
        ("koi8r", "koi8-r", 1),
        ("koi8u", "koi8-u", 1),
        ("latin1", "cp1252", 1),  # MySQL's latin1 is cp1252 (the decoder maps cp1252's five gaps itself)
        ("latin2", "iso8859-2", 1),
        ("latin5", "iso8859-9", 1),
        ("latin7", "iso8859-13", 1),
        ("macce", "mac-latin2", 1),
        ("macroman", "mac-roman", 1),
        ("sjis", "shift_jis", 2),
        ("swe7", "latin-1", 1),
        ("tis620", "tis-620", 1),
        ("ucs2", "utf-16-be", 2),
        ("ujis", "euc_jp", 3),
        ("utf16", "utf-16-be", 4),
        ("utf16le", "utf-16-le", 4),
        ("utf32", "utf-32-be", 4),
        ("utf8mb3", "utf-8", 3),
        ("utf8mb4", "utf-8", 4),
    )
)
CHARSETS: Final[dict[str, Charset]] = {c.name: c for c in _CHARSETS} | {"utf8": Charset("utf8mb3", "utf-8", 3)}
"""Charsets by name (``utf8`` is the old name of ``utf8mb3``)."""

# charset -> its collation ids, as "a" or "a-b" ranges
_COLLATION_IDS: Final[dict[str, str]] = {
    "armscii8": "32 64 1056 1088",
    "ascii": "11 65 1035 1089",
    "big5": "1 84 1025 1108",
    "binary": "63",
    "cp1250": "26 34 44 66 99 1050 1090",
    "cp1251": "14 23 50-52 1074-1075",
    "cp1256": "57 67 1081 1091",
    "cp1257": "29 58-59 1082-1083",
    "cp850": "4 80 1028 1104",
    "cp852": "40 81 1064 1105",
    "cp866": "36 68 1060 1092",
    "cp932": "95-96 1119-1120",
    "dec8": "3 69 1027 1093",
    "eucjpms": "97-98 1121-1122",
    "euckr": "19 85 1043 1109",
    "gb18030": "248-250",
    "gb2312": "24 86 1048 1110",
    "gbk": "28 87 1052 1111",
    "geostd8": "92-93 1116-1117",
    "greek": "25 70 1049 1094",
    "hebrew": "16 71 1040 1095",
    "hp8": "6 72 1030 1096",
    "keybcs2": "37 73 1061 1097",
    "koi8r": "7 74 1031 1098",
    "koi8u": "22 75 1046 1099",
    "latin1": "5 8 15 31 47-49 94 1032 1071",
    "latin2": "2 9 21 27 77 1033 1101",
    "latin5": "30 78 1054 1102",
    "latin7": "20 41-42 79 1065 1103",
    "macce": "38 43 1062 1067",
    "macroman": "39 53 1063 1077",
    "sjis": "13 88 1037 1112",
    "swe7": "10 82 1034 1106",
    "tis620": "18 89 1042 1113",
    "ucs2": "35 90 128-151 159 640-642 1059 1114 1152 1174",
    "ujis": "12 91 1036 1115",
    "utf16": "54-55 101-124 672-674 1078-1079 1125 1147",
    "utf16le": "56 62 1080 1086",
    "utf32": "60-61 160-183 736-738 1084-1085 1184 1206",
    "utf8mb3": "33 76 83 192-215 223 576-578 1057 1107 1216 1238",
    "utf8mb4": "45-46 224-247 255-323 608-610 1069-1070 1248 1270",
}


def _expand(ranges: str) -> list[int]:
    ids: list[int] = []
    for part in ranges.split():
        low, _, high = part.partition("-")
        ids.extend(range(int(low), int(high or low) + 1))
    return ids


COLLATION_CHARSETS: Final[dict[int, str]] = {
    collation_id: charset for charset, ranges in _COLLATION_IDS.items() for collation_id in _expand(ranges)
}
"""Collation id -> charset name."""

BINARY_COLLATION: Final = 63
_DEFAULT: Final = CHARSETS["utf8mb4"]


def charset_of_collation(collation_id: int | None) -> Charset:
    """The charset of a collation id; utf8mb4 for an id this table does not know (or none given)."""
    if collation_id is None:
        return _DEFAULT
    name = COLLATION_CHARSETS.get(collation_id)
    return _DEFAULT if name is None else CHARSETS[name]


def charset_named(name: str) -> Charset:
    """A charset by (case-insensitive) name; utf8mb4 for a name this table does not know."""
    return CHARSETS.get(name.lower(), _DEFAULT)


def collation_of_charset(name: str) -> int | None:
    """A collation id of the named charset (any of its collations decodes the same), None for a name not known."""
    wanted = name.lower()
    return next((cid for cid, charset in sorted(COLLATION_CHARSETS.items()) if charset == wanted), None)
