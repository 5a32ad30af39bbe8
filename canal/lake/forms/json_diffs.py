"""Partial JSON updates in change rows: the ``json_diffs`` column, and a diff applied to a JSON cell's text.

MySQL's ``binlog_row_value_options=PARTIAL_JSON`` logs a JSON column an UPDATE changed with JSON_SET /
JSON_REPLACE / JSON_REMOVE as diffs of the document (:class:`~canal.mysql_json.JsonDiff`). Where the row's before
image does not carry the document (``binlog_row_image`` MINIMAL / NOBLOB) the decoder cannot apply them: the after
image does not carry the column (it is in ``after_absent``) and the change row's ``json_diffs`` holds its diffs, a
JSON object of column name to a list of ``[operation, path, value]`` (the value as MySQL prints it, as a JSON
string; null for REMOVE)::

    {"doc":[["REPLACE","$.age","26"],["REMOVE","$.tags[0]",null]]}

null where the row has none. Change rows (:mod:`canal.lake.forms.changes`), typed batches' metadata
(:mod:`canal.lake.forms.typed_batch`) and the VARIANT form carry it alike; the mirror applies it to the document it
holds
(:mod:`canal.lake.apply.partial`) with :func:`apply_text`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from canal.mysql_json import JsonDiff, JsonDiffError, apply_json_diffs, json_text, read_json_text
from canal.protocol import TableSchema

JSON_DIFFS: Final = "json_diffs"
"""The change-row column of a partial JSON update's diffs (see the module docstring)."""


def diffs_json(table: TableSchema, diffs: Mapping[int, Sequence[JsonDiff]] | None) -> str | None:
    """A row's diffs (:attr:`canal.protocol.RowData.diffs`, by column index) as the ``json_diffs`` text; None for
    none."""
    if not diffs:
        return None
    names = table.names
    return dumps({names[i]: diffs[i] for i in sorted(diffs)})


def dumps(diffs: Mapping[str, Sequence[JsonDiff]]) -> str | None:
    """Diffs by column name as the ``json_diffs`` text; None for none."""
    if not diffs:
        return None
    return json.dumps(
        {name: [d.to_list() for d in column] for name, column in diffs.items()},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def loads(text: str | None) -> dict[str, list[JsonDiff]]:
    """The diffs a ``json_diffs`` text holds, by column name (empty for null); ``ValueError`` for other text."""
    if text is None:
        return {}
    found = json.loads(text)
    if not isinstance(found, dict) or not all(isinstance(v, list) for v in found.values()):
        raise ValueError(f"not a json_diffs object: {text[:80]!r}")
    return {str(name): [JsonDiff.from_list(item) for item in items] for name, items in found.items()}


def apply_text(text: str | None, diffs: Sequence[JsonDiff]) -> str:
    """A JSON cell as a change row or the mirror holds it (MySQL's printed text, :func:`~canal.mysql_json.json_text`)
    with ``diffs`` applied, in the same text. :class:`~canal.mysql_json.JsonDiffError` where they do not apply: SQL
    NULL, text that is no JSON object or array, a path the document lacks."""
    if text is None:
        raise JsonDiffError("a JSON diff does not apply to SQL NULL")
    try:
        document = read_json_text(text)
    except ValueError:
        raise JsonDiffError(f"a JSON diff does not apply to {text[:40]!r}: not a JSON document") from None
    return json_text(apply_json_diffs(document, diffs))


def merge(earlier: Mapping[str, Sequence[JsonDiff]], later: Mapping[str, Sequence[JsonDiff]]) -> dict[str, Any]:
    """The diffs of two changes of one row, one after the other, by column: ``earlier``'s then ``later``'s."""
    out: dict[str, list[JsonDiff]] = {name: list(column) for name, column in earlier.items()}
    for name, column in later.items():
        out.setdefault(name, []).extend(column)
    return out
