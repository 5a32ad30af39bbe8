"""The two ways a batch's rows reach a table's base directly: the first rows of a table the mirror creates, and a
copy-on-write MERGE (the mirror's ``mode="copy_on_write"``). Merge-on-read appends go to the change log instead
(:mod:`canal.lake.apply.log_writer`)."""

from __future__ import annotations

from typing import Any

from canal.lake.store import changelog, fs
from canal.lake.store.changelog import OP as OP_COLUMN
from canal.lake.store.changelog import quote, record_only


def create_table(path: str, source: Any, commit: Any, file_bytes: int) -> None:
    """Create the table at ``path`` from the upserts of ``source`` (a typed source with its op column), committed
    with ``commit``; a change log left from an earlier life of the table goes first."""
    import pyarrow.compute as pc

    fs.rmtree(changelog.log_path(path))
    fs.write_delta(
        path,
        source.filter(pc.equal(source.column(OP_COLUMN), "u")).drop_columns([OP_COLUMN]),
        mode="append",
        commit_properties=commit,
        configuration={"delta.targetFileSize": str(file_bytes)},
        target_file_size=file_bytes,
    )


def merge_into(table: Any, source: Any, key_names: list[str], commit: Any, record: bool) -> None:
    """MERGE ``source`` into the Delta table ``table`` by ``key_names``, committed with ``commit``. A MERGE that
    changes nothing (deletes of rows the mirror does not hold) commits nothing, and so would not record the batch:
    with ``record``, the batch is recorded anyway, so a replay is recognised like any other."""
    predicate = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in key_names) + changelog.key_range(source, key_names)
    if not changelog.merge_changes(table, source, predicate, commit) and record:
        record_only(table, commit)
