"""canal's entries and pycanal's in one form, to compare them field by field.

:func:`from_canal` takes an ``entry`` line of the canal peer (``io.pycanal.peers.CanalPeer``: every field of canal's
protobuf entry), :func:`from_pycanal` a :class:`canal.protocol.Entry`; both give the fields a consumer of canal's
entries reads -- the header (file, offset, server id, execute time, schema, table, event type, gtid), the entry type,
a transaction's id and thread, a row change's event type, DDL flag, SQL and DDL schema, and each column's index, name,
``isKey``, ``updated``, ``isNull``, value text, ``sqlType`` and ``mysqlType``. :func:`differences` lists where two
such forms differ, as paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from canal.protocol import Column, Entry, EntryType

Form = dict[str, Any]


def from_canal(line: dict[str, Any]) -> Form:
    h = line["header"]
    out: Form = {
        "entryType": line["entryType"],
        "logfileName": h["logfileName"],
        "logfileOffset": h["logfileOffset"],
        "serverId": h["serverId"],
        "executeTime": h["executeTime"],
        "schemaName": h["schemaName"],
        "tableName": h["tableName"],
        "eventType": h["eventType"],
        "gtid": h["gtid"],
    }
    if line["entryType"] == "TRANSACTIONBEGIN":
        out["threadId"] = line["begin"]["threadId"]
    elif line["entryType"] == "TRANSACTIONEND":
        out["transactionId"] = line["end"]["transactionId"]
    elif line["entryType"] == "ROWDATA":
        rc = line["rowChange"]
        out.update(
            rowEventType=rc["eventType"],
            isDdl=rc["isDdl"],
            sql=rc["sql"],
            ddlSchemaName=rc["ddlSchemaName"],
            rows=[
                {
                    "before": [_canal_column(c) for c in r["beforeColumns"]],
                    "after": [_canal_column(c) for c in r["afterColumns"]],
                }
                for r in rc["rowDatas"]
            ],
        )
    return out


def _canal_column(c: dict[str, Any]) -> Form:
    return {
        "index": c["index"],
        "name": c["name"],
        "isKey": c["isKey"],
        "updated": c["updated"],
        "isNull": c["isNull"],
        "value": c["value"],
        "sqlType": c["sqlType"],
        "mysqlType": c["mysqlType"],
    }


def from_pycanal(entry: Entry) -> Form:
    h = entry.header
    out: Form = {
        "entryType": entry.entry_type.name,
        "logfileName": h.log_file,
        "logfileOffset": h.log_offset,
        "serverId": h.server_id,
        "executeTime": h.execute_time,
        "schemaName": h.schema,
        "tableName": h.table,
        "eventType": h.event_type.name,
        "gtid": h.gtid or "",
    }
    if entry.entry_type is EntryType.TRANSACTIONBEGIN:
        out["threadId"] = entry.thread_id or 0
    elif entry.entry_type is EntryType.TRANSACTIONEND:
        out["transactionId"] = "" if entry.xid is None else str(entry.xid)
    elif entry.entry_type is EntryType.ROWDATA:
        rc = entry.row_change
        assert rc is not None
        out.update(
            rowEventType=rc.event_type.name,
            isDdl=rc.is_ddl,
            sql=rc.sql,
            ddlSchemaName=rc.ddl_schema,
            rows=[
                {
                    "before": [_pycanal_column(c) for c in r.before_columns],
                    "after": [_pycanal_column(c) for c in r.after_columns],
                }
                for r in rc.rows
            ],
        )
    return out


def _pycanal_column(c: Column) -> Form:
    return {
        "index": c.index,
        "name": c.name,
        "isKey": c.is_key,
        "updated": c.updated,
        "isNull": c.is_null,
        "value": c.text,
        "sqlType": int(c.sql_type),
        "mysqlType": c.mysql_type,
    }


def key(form: Form) -> tuple[str, int, str]:
    """Where an entry is: its binlog file, offset and entry type (one row entry per rows event, in both)."""
    return (form["logfileName"], form["logfileOffset"], form["entryType"])


def differences(canal: Form, ours: Form, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every ``(path, canal's, pycanal's)`` where the two forms differ (``rows[0].after[2].value``)."""
    out: list[tuple[str, Any, Any]] = []
    if isinstance(canal, dict) and isinstance(ours, dict):
        for k in canal.keys() | ours.keys():
            out += differences(canal.get(k), ours.get(k), f"{path}.{k}" if path else k)
    elif isinstance(canal, list) and isinstance(ours, list) and len(canal) == len(ours):
        for i, (a, b) in enumerate(zip(canal, ours, strict=True)):
            out += differences(a, b, f"{path}[{i}]")
    elif canal != ours:
        out.append((path, canal, ours))
    return out


def leaf(path: str) -> str:
    """The field a difference's path ends in (``rows[0].after[2].value`` -> ``value``)."""
    return path.rsplit(".", 1)[-1]


def describe(forms: Iterable[Form]) -> str:
    return "\n".join(
        f"  {f['logfileName']}:{f['logfileOffset']} {f['entryType']} {f['eventType']} "
        f"{f['schemaName']}.{f['tableName']}" + (f" {f.get('sql', '')[:80]!r}" if f.get("sql") else "")
        for f in forms
    )


def by_key(forms: Sequence[Form]) -> dict[tuple[str, int, str], Form]:
    return {key(f): f for f in forms}
