"""Every difference between Debezium's values and pycanal's that the differential tests measured, each a rule that
recognises it, named after its section in ``docs/guides/from-debezium.md``: a Debezium choice (documented by
Debezium, or a setting changes it) or a Debezium defect. pycanal's side of each is checked against ``SELECT`` by the
test that pins it (``tests/test_peers_debezium_mariadb.py``).

:func:`compare` takes Debezium's data changes (:func:`debezium_form.changes`) and pycanal's in the same shape
(:func:`debezium_side_by_side.pycanal_changes`), with pycanal's column types, and returns what no rule explains.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import attrs

# name -> kind and summary (the guide says more; the test checks that every name is there)
DIFFERENCES: dict[str, str] = {
    "bigint-unsigned-long": "choice: BIGINT UNSIGNED as a signed long (bigint.unsigned.handling.mode=long): "
    "2^64-1 is -1",
    "zero-date-null": "choice: dates of year 0 (0000-00-00, 0000-01-01) are null; pycanal hands out the server's text",
    "geometry-struct": "choice: GEOMETRY is a struct of the WKB and an SRID (null); pycanal's value is the WKB",
    "decimal-string": "choice: decimal.handling.mode=string hands DECIMAL out as its text",
    "connect-precision": "choice: time.precision.mode=connect keeps milliseconds: DATETIME(6)'s microseconds dropped",
    "connect-time-range": "choice: time.precision.mode=connect has no TIME outside 00:00-24:00: such values are null",
    "year-zero": "defect: YEAR 0000 is 1900 (osheroff/mysql-binlog-connector-java #183)",
    "uuid-trailing-zeros": "defect: a UUID whose last bytes are zeros is shifted (logged without them: "
    "osheroff/mysql-binlog-connector-java #139; padded back for BINARY(n) by DBZ-254, not for UUID)",
    "one-alter-swap": "defect: an ALTER that swaps two columns' names (CHANGE a b ..., CHANGE b a ...) leaves the "
    "DDL parser's table a column short: the connector stops at the table's next row",
    "xa-rollback": "defect: XA statements are ignored (DBZ-168): a rolled-back XA transaction's rows arrive as "
    "committed",
    "mariadb-ddl": "defect: the MariaDB DDL parser knows no INET6 / INET4 column and no COMPRESSED attribute: the "
    "connector stops at the CREATE TABLE",
}


@attrs.define
class Comparison:
    unexplained: list[str] = attrs.field(factory=list)
    fired: Counter[str] = attrs.field(factory=Counter)

    def report(self) -> str:
        return "\n".join(self.unexplained[:40])


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _zero_date(value: Any) -> bool:
    """A DATE / DATETIME of year 0 (the zero date, or '0000-01-01'): Python's date cannot hold it, pycanal hands
    out the server's text."""
    return isinstance(value, str) and value.startswith("0000-")


def value_rule(mode: str, mysql_type: str, fsp: int, theirs: Any, ours: Any) -> str | None:
    """The rule that explains Debezium's value ``theirs`` beside pycanal's ``ours`` of a column, or None (equal is
    ``"equal"``); ``mode`` names the engine's choices, joined by ``-`` (``default``, ``string-connect``)."""
    base = mysql_type.split("(", 1)[0].split(" ", 1)[0].lower()
    if (theirs == ours and type(theirs) is not bool) or (isinstance(theirs, bool) and int(theirs) == ours):
        return "equal"
    if base == "float" and isinstance(theirs, float) and isinstance(ours, float) and _float32(theirs) == _float32(ours):
        return "equal"
    choices = set(mode.split("-"))
    if "string" in choices and base == "decimal" and isinstance(theirs, str) and Decimal(theirs) == ours:
        return "decimal-string"
    if (
        base == "bigint"
        and "unsigned" in mysql_type
        and isinstance(ours, int)
        and ours >= 2**63
        and theirs == ours - 2**64
    ):
        return "bigint-unsigned-long"
    if theirs is None and _zero_date(ours):
        return "zero-date-null"
    if isinstance(theirs, dict) and "wkb" in theirs and theirs["wkb"] == ours:
        return "geometry-struct"
    if base == "year" and ours == 0 and theirs == 1900:
        return "year-zero"
    if base == "uuid" and isinstance(ours, str) and isinstance(theirs, str):
        raw = uuid.UUID(ours).bytes
        if raw.endswith(b"\0") and str(uuid.UUID(bytes=raw.rstrip(b"\0").rjust(16, b"\0"))) == theirs:
            return "uuid-trailing-zeros"
    if "connect" in choices:
        out_of_day = isinstance(ours, dt.timedelta) and not dt.timedelta(0) <= ours < dt.timedelta(days=1)
        if base == "time" and theirs is None and out_of_day:
            return "connect-time-range"
        truncated = ours
        if isinstance(ours, dt.datetime | dt.time):
            truncated = ours.replace(microsecond=ours.microsecond // 1000 * 1000)
        elif isinstance(ours, dt.timedelta):
            truncated = dt.timedelta(milliseconds=ours // dt.timedelta(milliseconds=1))
        if fsp > 3 and theirs == truncated:
            return "connect-precision"
    return None


Change = tuple[str, str, Mapping[str, Any] | None, Mapping[str, Any] | None]


def compare(
    mode: str, theirs: Sequence[Change], ours: Sequence[Change], types: Sequence[Mapping[str, tuple[str, int]]]
) -> Comparison:
    """Debezium's data changes against pycanal's, in order; ``types`` holds pycanal's (mysql type, fsp) of each
    column of each of its changes."""
    out = Comparison()
    if [(t, op) for t, op, _b, _a in theirs] != [(t, op) for t, op, _b, _a in ours]:
        out.unexplained.append(
            f"the changes differ: Debezium {[(t, op) for t, op, _b, _a in theirs][:20]} "
            f"pycanal {[(t, op) for t, op, _b, _a in ours][:20]}"
        )
        return out
    for i, ((table, op, tb, ta), (_t, _op, ob, oa)) in enumerate(zip(theirs, ours, strict=True)):
        for side, t_image, o_image in (("before", tb, ob), ("after", ta, oa)):
            if (t_image is None) != (o_image is None):
                out.unexplained.append(f"change {i} {table} {op}: {side} image only on one side")
                continue
            if t_image is None or o_image is None:
                continue
            if set(t_image) != set(o_image):
                out.unexplained.append(
                    f"change {i} {table} {op} {side}: columns {sorted(t_image)} vs {sorted(o_image)}"
                )
                continue
            for name, value in o_image.items():
                mysql_type, fsp = types[i].get(name, ("", 0))
                rule = value_rule(mode, mysql_type, fsp, t_image[name], value)
                if rule is None:
                    out.unexplained.append(
                        f"change {i} {table} {op} {side}.{name} ({mysql_type}): "
                        f"Debezium {t_image[name]!r} pycanal {value!r}"
                    )
                elif rule != "equal":
                    out.fired[rule] += 1
    return out
