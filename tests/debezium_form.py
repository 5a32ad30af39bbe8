"""Debezium's change events (Kafka's JsonConverter, schemas on: what ``io.pycanal.peers.DebeziumPeer`` prints) as
typed Python values, to compare with pycanal's.

:func:`decode` turns one field's JSON value into a Python value by its Connect schema: the logical type's ``name``
(``org.apache.kafka.connect.data.Decimal``, ``io.debezium.time.MicroTimestamp``, ``io.debezium.data.Enum`` ...) and
its ``parameters`` say how Debezium encoded it. :func:`changes` gives each data change of a record list as
``(table, op, before, after)`` with decoded images.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable
from decimal import Context, Decimal
from typing import Any

EPOCH = dt.datetime(1970, 1, 1)
UTC = dt.UTC
_EXACT = Context(prec=200)  # DECIMAL holds 65 digits: no rounding by the default context's 28


def decode(value: Any, schema: dict[str, Any]) -> Any:
    """One field's value as Debezium's schema for it says it is encoded."""
    if value is None:
        return None
    name = schema.get("name")
    kind = schema["type"]
    params = schema.get("parameters") or {}
    if name == "org.apache.kafka.connect.data.Decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return Decimal(unscaled).scaleb(-int(params["scale"]), _EXACT)
    if name == "io.debezium.data.VariableScaleDecimal":
        unscaled = int.from_bytes(base64.b64decode(value["value"]), "big", signed=True)
        return Decimal(unscaled).scaleb(-int(value["scale"]), _EXACT)
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return (EPOCH + dt.timedelta(days=int(value))).date()
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return EPOCH + dt.timedelta(milliseconds=int(value))
    if name == "io.debezium.time.MicroTimestamp":
        return EPOCH + dt.timedelta(microseconds=int(value))
    if name == "io.debezium.time.NanoTimestamp":
        return EPOCH + dt.timedelta(microseconds=int(value) // 1000)
    if name == "io.debezium.time.ZonedTimestamp":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if name == "io.debezium.time.MicroTime":
        return dt.timedelta(microseconds=int(value))
    if name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
        return dt.timedelta(milliseconds=int(value))
    if name == "io.debezium.data.Bits":
        return int.from_bytes(base64.b64decode(value), "little")
    if name == "io.debezium.data.EnumSet":
        return frozenset(v for v in value.split(",") if v)
    if name in ("io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Point"):
        return {"wkb": base64.b64decode(value["wkb"]), "srid": value.get("srid")}
    if kind == "bytes":
        return base64.b64decode(value)
    if kind in ("float", "double") and isinstance(value, str):  # NaN, Infinity as strings
        return float(value)
    return value


def _image(image: dict[str, Any] | None, schema: dict[str, Any]) -> dict[str, Any] | None:
    if image is None:
        return None
    fields = {f["field"]: f for f in schema["fields"]}
    return {name: decode(v, fields[name]) for name, v in image.items()}


def changes(records: Iterable[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]:
    """Every data change among the records (not schema changes, not tombstones): ``(db.table, op, before, after)``,
    ``op`` Debezium's c / u / d."""
    out = []
    for record in records:
        value = record["value"]
        if value is None or "payload" not in value or value["payload"] is None:
            continue
        payload, schema = value["payload"], value["schema"]
        if "op" not in payload or payload["op"] not in ("c", "u", "d", "r"):
            continue
        fields = {f["field"]: f for f in schema["fields"]}
        source = payload["source"]
        out.append(
            (
                f"{source['db']}.{source['table']}",
                payload["op"],
                _image(payload["before"], fields["before"]),
                _image(payload["after"], fields["after"]),
            )
        )
    return out


def schema_of(record: dict[str, Any], side: str = "after") -> dict[str, dict[str, Any]]:
    """The Connect schema of each column of a change record's image."""
    fields = {f["field"]: f for f in record["value"]["schema"]["fields"]}
    return {f["field"]: f for f in fields[side]["fields"]}


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record["value"]["payload"], default=str)[:600]
