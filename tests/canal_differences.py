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
from decimal import Decimal
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
    "ddl-kind": "canal reads some DDL (partition maintenance ...) as a QUERY naming no table; pycanal names its kind "
    "and table",
    "rotate-file-name": "canal's entries of the first transaction after a binlog rotation name the file before it",
    "statement-dml": "canal hands out DML the server logged as a statement as an entry of SQL and no rows, filtered "
    "tables' too; pycanal follows it or stops, typed (docs/concepts/fail-closed.md)",
    "database-ddl": "canal's CREATE / DROP DATABASE entries are QUERY entries naming the database with its quotes, "
    "and come for databases the filter takes nothing of; pycanal's DROP is an ERASE, unquoted, for captured ones",
    "decimal-scale": "canal's DECIMAL with a zero fraction has one digit after the point (1.0 for 1.00: canal #2081)",
    "ddl-dropped": "canal hands out no entry for some DDL its parser cannot read (ALTER TABLE ... REMOVE PARTITIONING)",
    "xa-outcome": "pycanal's XA COMMIT / ROLLBACK entries are DDL-flagged boundaries naming the session's database",
    "canal-stops": "canal stops, retrying forever, at rows its TSDB does not match (MariaDB's SET STATEMENT ... FOR "
    "DDL, system versioning, compressed columns; under FULL metadata, MariaDB's signedness bits of YEAR)",
    "tsdb-layout": "canal names some rows after DDL with another layout than the table had (its TSDB's replay)",
    "empty-transaction": "both drop most transactions that hold nothing captured, and let one through now and then",
}


@attrs.define
class Comparison:
    unexplained: list[str] = attrs.field(factory=list)
    fired: Counter[str] = attrs.field(factory=Counter)

    def report(self) -> str:
        return "\n".join(self.unexplained[:40]) + (
            f"\n... {len(self.unexplained) - 40} more" if len(self.unexplained) > 40 else ""
        )


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
    if base == "decimal" and "." in b and _same_number(a, b) and len(a) < len(b) and a.endswith(".0"):
        return "decimal-scale"
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


def _same_number(a: str, b: str) -> bool:
    try:
        return Decimal(a) == Decimal(b)
    except ArithmeticError:
        return False


def _column(form: Form, path: str) -> dict[str, Any]:
    node: Any = form
    for part in re.findall(r"\w+|\[\d+\]", path.rsplit(".", 1)[0]):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node  # type: ignore[no-any-return]


def _renamed_after_rotation(canal: Sequence[Form], out: Comparison) -> list[Form]:
    """canal's entries with the file they were read from: an offset below the one before it, in the same file,
    is in the next file (:data:`rotate-file-name`)."""
    fixed: list[Form] = []
    for f in canal:
        if fixed and f["logfileName"] <= fixed[-1]["logfileName"] and f["logfileOffset"] < fixed[-1]["logfileOffset"]:
            name = fixed[-1]["logfileName"]
            stem, _, number = name.rpartition(".")
            f = {**f, "logfileName": f"{stem}.{int(number) + 1:0{len(number)}d}"}
            out.fired["rotate-file-name"] += 1
        elif fixed and f["logfileName"] < fixed[-1]["logfileName"]:
            f = {**f, "logfileName": fixed[-1]["logfileName"]}
            out.fired["rotate-file-name"] += 1
        fixed.append(f)
    return fixed


def _layout(form: Form) -> list[tuple[str, bool, str]]:
    """The columns a row entry's first image names: (name, key, type without the DDL's spelling)."""
    rows = form.get("rows") or []
    if not rows:
        return []
    image = rows[0]["after"] or rows[0]["before"]
    return [(c["name"], c["isKey"], normal_type(c["mysqlType"])) for c in image]


def _empty(forms: Sequence[Form], key: tuple[str, int, str]) -> bool:
    """No row or DDL entry in the transaction that ends at ``key`` (since the boundary before it), in ``forms``."""
    at = (key[0], key[1])
    before = [f for f in forms if (f["logfileName"], f["logfileOffset"]) < at]
    for f in reversed(before):
        if f["entryType"] == "TRANSACTIONEND" or f.get("isDdl"):
            return True
        if f["entryType"] == "ROWDATA" and f.get("rows"):
            return False
    return True


_DATABASE_DDL = re.compile(r"^\s*(create|drop|alter)\s+(or\s+replace\s+)?(database|schema)\b", re.IGNORECASE)


def _database_ddl(canal: Form, ours: Form) -> bool:
    """A CREATE / DROP / ALTER DATABASE both hand out: canal's QUERY naming the database as quoted in the statement,
    pycanal's naming it unquoted (an ERASE for DROP)."""
    return (
        canal.get("sql") == ours.get("sql")
        and bool(_DATABASE_DDL.match(canal.get("sql") or ""))
        and canal["schemaName"].strip("`") == ours["schemaName"]
        and canal["eventType"] == "QUERY"
        and ours["eventType"] in ("QUERY", "ERASE")
    )


def _ddl_kind(canal: Form, ours: Form) -> bool:
    """canal's DDL parser read the statement as a QUERY of no table; pycanal's names it (the same SQL)."""
    return (
        canal.get("isDdl") is True
        and ours.get("isDdl") is True
        and canal["eventType"] == "QUERY"
        and not canal["tableName"]
        and canal.get("sql") == ours.get("sql")
    )


def compare(
    canal: Sequence[Form], ours: Sequence[Form], *, canal_gtid: bool = False, canal_stopped: bool = False
) -> Comparison:
    """What differs between canal's entries and pycanal's beyond the rules (``canal_stopped``: canal raised an
    alarm, and pycanal's entries past canal's last are :data:`canal-stops`)."""
    out = Comparison()
    canal = _renamed_after_rotation(canal, out)
    ck, ok = by_key(canal), by_key(ours)
    last = max(((f["logfileName"], f["logfileOffset"]) for f in canal), default=("", 0))
    for k in sorted(ck.keys() - ok.keys()):
        f = ck[k]
        if f["entryType"] == "ROWDATA" and f["eventType"] == "QUERY" and not f["isDdl"] and not f["tableName"]:
            out.fired["statement-text"] += 1
        elif f["entryType"] == "TRANSACTIONEND" and _empty(canal, k) and _empty(ours, k):
            out.fired["empty-transaction"] += 1
        elif f["entryType"] == "ROWDATA" and f["isDdl"] and _DATABASE_DDL.match(f["sql"]):
            out.fired["database-ddl"] += 1
        elif (
            f["entryType"] == "ROWDATA"
            and f["eventType"] in ("INSERT", "UPDATE", "DELETE")
            and f["sql"]
            and not f["rows"]
        ):
            out.fired["statement-dml"] += 1
        else:
            out.unexplained.append(f"canal only: {k} {f['eventType']} {f.get('sql', '')[:80]!r}")
    for k in sorted(ok.keys() - ck.keys()):
        f = ok[k]
        if canal_stopped and (f["logfileName"], f["logfileOffset"]) > last:
            out.fired["canal-stops"] += 1
        elif f["entryType"] == "TRANSACTIONBEGIN":
            out.fired["no-begin-on-mariadb"] += 1
        elif f["entryType"] == "TRANSACTIONEND" and _empty(canal, k) and _empty(ours, k):
            out.fired["empty-transaction"] += 1
        elif f["entryType"] == "ROWDATA" and f["isDdl"] and f["sql"]:
            out.fired["ddl-dropped"] += 1
        else:
            out.unexplained.append(f"pycanal only: {k} {f['eventType']} {f.get('sql', '')[:80]!r}")
    for k in sorted(ck.keys() & ok.keys()):
        relaid = _layout(ck[k]) != _layout(ok[k])
        for path, a, b in differences(ck[k], ok[k]):
            field = leaf(path)
            rule: str | None = None
            if field == "eventType" and path == "eventType" and ck[k]["entryType"] == "TRANSACTIONEND":
                rule = "boundary-event-type" if a == "UPDATE" else None
            elif _database_ddl(ck[k], ok[k]) and path in ("schemaName", "eventType", "rowEventType", "ddlSchemaName"):
                rule = "database-ddl"
            elif _ddl_kind(ck[k], ok[k]) and path in (
                "tableName",
                "schemaName",
                "eventType",
                "rowEventType",
                "ddlSchemaName",
            ):
                rule = "ddl-kind"
            elif ck[k]["eventType"] in ("XACOMMIT", "XAROLLBACK") and path in ("isDdl", "schemaName", "ddlSchemaName"):
                rule = "xa-outcome" if a in (False, "") else None
            elif path == "gtid" and not canal_gtid and a == "":
                rule = "gtid-header"
            elif path.startswith("rows[") and relaid and leaf(path) != "updated":
                rule = "tsdb-layout"
            elif path.startswith("rows["):
                rule = column_rule(path, _column(ck[k], path), _column(ok[k], path))
            if rule is None:
                out.unexplained.append(f"{k} {ck[k]['eventType']} {path}: canal {a!r} pycanal {b!r}")
            else:
                out.fired[rule] += 1
    return out
