"""Every difference between canal's entries and pycanal's that the differential tests measured, each a rule that
recognises it, named after its section in ``docs/guides/from-canal.md`` ("Measured differences").

:func:`compare` aligns canal's entries and pycanal's (:mod:`canal_form`) by binlog position and entry type and
returns what no rule explains -- a difference nobody has looked at, which fails the test -- and how often each rule
matched. A rule only ever accepts canal's behaviour beside pycanal's: pycanal's side is checked against ``SELECT`` by
the test that pins each difference (``tests/test_peers_canal_mariadb.py``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
from canal_form import Form, by_key, differences, leaf

# name -> the guide's summary (the guide says more; tests/test_peers_canal_mariadb.py checks that every name is there)
DIFFERENCES: dict[str, str] = {
    "statement-text": "canal hands out each row event's statement text as a QUERY entry; pycanal does not",
    "no-begin-on-mariadb": "canal makes no TRANSACTIONBEGIN entry for MariaDB's transactions; pycanal does",
    "boundary-event-type": "canal's TRANSACTIONEND header says UPDATE (protobuf's unset value); pycanal's QUERY",
    "gtid-header": "canal's header gtid is empty unless canal runs in GTID mode; pycanal's holds the GTID",
    "mysql-type-text": "canal's mysqlType is the DDL's text (TSDB); pycanal's the server's column type",
    "sql-type-per-value": "canal's sqlType of an unsigned integer (and of a NULL SET) depends on the value",
    "enum-set-numbers": "canal's ENUM value is the label's index, its SET value the bit mask",
    "mariadb-types": "canal's UUID / INET6 / INET4 values are their stored bytes (CHAR); pycanal's SELECT's text",
    "binary-trailing-zeros": "canal drops a BINARY(n) value's trailing zero bytes",
    "column-charset": "canal decodes every text column as UTF-8 (a latin1 'é' becomes U+FFFD)",
    "negative-zero": "canal's FLOAT that underflowed is -0.0; SELECT (and pycanal) show 0",
    "geometry-srid": "canal's GEOMETRY holds the server's 4-byte SRID before the WKB; pycanal's is the WKB",
    "json-as-blob": "canal's MariaDB JSON is a BLOB (sqlType 2004, bytes as ISO-8859-1); pycanal's a CLOB of text",
    "canal-stops": "canal stops (and retries forever) at a table map its TSDB does not match, under FULL metadata",
}


@attrs.define
class Comparison:
    unexplained: list[str] = attrs.field(factory=list)
    fired: Counter[str] = attrs.field(factory=Counter)

    def report(self) -> str:
        return "\n".join(self.unexplained[:40]) + (f"\n... {len(self.unexplained) - 40} more" if len(self.unexplained) > 40 else "")


_INT_WIDTH = re.compile(r"\b(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)")
_UNSIGNED_SQL = {  # an unsigned integer's JDBC type, pycanal's (the one that holds every value) -> canal's signed one
    ("tinyint", 5): -6,
    ("smallint", 4): 5,
    ("mediumint", 4): 4,
    ("int", -5): 4,
    ("bigint", 3): -5,
}


def normal_type(text: str) -> str:
    """A column type without what the DDL's spelling adds: case, integer display widths, BOOLEAN for TINYINT(1),
    MariaDB's JSON for LONGTEXT, a COLLATE or CHARACTER SET clause."""
    t = " ".join(text.lower().split())
    t = re.sub(r"\b(character set|charset|collate) \w+", "", t).strip()
    t = re.sub(r"^bool(ean)?$", "tinyint(1)", t)
    t = "longtext" if t == "json" else t
    if t == "tinyint(1)":
        return t
    return _INT_WIDTH.sub(r"\1", t)


def _base(mysql_type: str) -> str:
    return mysql_type.lower().split("(", 1)[0].split(" ", 1)[0]


def _labels(mysql_type: str) -> list[str]:
    inner = mysql_type[mysql_type.index("(") + 1 : mysql_type.rindex(")")]
    return [label.replace("''", "'") for label in re.findall(r"'((?:[^']|'')*)'", inner)]


def column_rule(path: str, canal: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """The rule that explains a difference in one column (``leaf(path)`` names the field), or None."""
    field = leaf(path)
    base = _base(ours["mysqlType"])
    if field == "mysqlType":
        return "mysql-type-text" if normal_type(canal["mysqlType"]) == normal_type(ours["mysqlType"]) else None
    if base in ("uuid", "inet6", "inet4") and field in ("value", "sqlType"):
        return "mariadb-types"
    if field == "sqlType":
        signed = _UNSIGNED_SQL.get((base, ours["sqlType"]))
        if "unsigned" in ours["mysqlType"] and signed == canal["sqlType"]:
            return "sql-type-per-value"
        if base == "set" and ours["isNull"] and canal["sqlType"] == 2004:
            return "sql-type-per-value"
        if base == "longtext" and normal_type(canal["mysqlType"]) == "longtext" and canal["sqlType"] == 2004:
            return "json-as-blob"
        return None
    if field != "value":
        return None
    a, b = canal["value"], ours["value"]
    if base == "enum" and b in _labels(ours["mysqlType"]) and a == str(_labels(ours["mysqlType"]).index(b) + 1):
        return "enum-set-numbers"
    if base == "set":
        labels = _labels(ours["mysqlType"])
        chosen = [x for x in b.split(",") if x] if b else []
        if all(x in labels for x in chosen) and a == str(sum(1 << labels.index(x) for x in chosen)):
            return "enum-set-numbers"
    if base == "binary" and a == b.rstrip("\x00"):
        return "binary-trailing-zeros"
    if base == "float" and a == "-0.0" and b == "0.0":
        return "negative-zero"
    if base in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                "geometrycollection") and len(a) == len(b) + 4 and a.endswith(b):  # fmt: skip
        return "geometry-srid"
    if base == "longtext" and normal_type(canal["mysqlType"]) == "longtext":
        try:
            if a == b.encode("utf-8").decode("latin-1"):
                return "json-as-blob"
        except UnicodeError:
            return None
    if base in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext") and "\ufffd" in a and len(a) <= len(b):
        return "column-charset"
    return None


def _column(form: Form, path: str) -> dict[str, Any]:
    node: Any = form
    for part in re.findall(r"\w+|\[\d+\]", path.rsplit(".", 1)[0]):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node  # type: ignore[no-any-return]


def compare(canal: Sequence[Form], ours: Sequence[Form], *, canal_gtid: bool = False, canal_stopped: bool = False) -> Comparison:
    """What differs between canal's entries and pycanal's beyond the rules (``canal_stopped``: canal raised an
    alarm, and pycanal's entries past canal's last are :data:`canal-stops`)."""
    out = Comparison()
    ck, ok = by_key(canal), by_key(ours)
    last = max(((f["logfileName"], f["logfileOffset"]) for f in canal), default=("", 0))
    for k in sorted(ck.keys() - ok.keys()):
        f = ck[k]
        if f["entryType"] == "ROWDATA" and f["eventType"] == "QUERY" and not f["isDdl"] and not f["tableName"]:
            out.fired["statement-text"] += 1
        else:
            out.unexplained.append(f"canal only: {k} {f['eventType']} {f.get('sql', '')[:80]!r}")
    for k in sorted(ok.keys() - ck.keys()):
        f = ok[k]
        if canal_stopped and (f["logfileName"], f["logfileOffset"]) > last:
            out.fired["canal-stops"] += 1
        elif f["entryType"] == "TRANSACTIONBEGIN":
            out.fired["no-begin-on-mariadb"] += 1
        else:
            out.unexplained.append(f"pycanal only: {k} {f['eventType']} {f.get('sql', '')[:80]!r}")
    for k in sorted(ck.keys() & ok.keys()):
        for path, a, b in differences(ck[k], ok[k]):
            field = leaf(path)
            rule: str | None = None
            if field == "eventType" and path == "eventType" and ck[k]["entryType"] == "TRANSACTIONEND":
                rule = "boundary-event-type" if a == "UPDATE" else None
            elif path == "gtid" and not canal_gtid and a == "":
                rule = "gtid-header"
            elif path.startswith("rows["):
                rule = column_rule(path, _column(ck[k], path), _column(ok[k], path))
            if rule is None:
                out.unexplained.append(f"{k} {ck[k]['eventType']} {path}: canal {a!r} pycanal {b!r}")
            else:
                out.fired[rule] += 1
    return out
