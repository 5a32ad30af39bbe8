"""What a mirror reports of its batches: each batch's outcome (:class:`ApplyResult`) and each table's running
statistics (:class:`TableStats`)."""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class TableStats:
    applied: int = 0  # batches applied
    skipped: int = 0  # batches skipped as already applied
    upserts: int = 0
    deletes: int = 0
    changes: int = 0  # change rows seen (before the last-per-key reduction)


@attrs.define(slots=True)
class ApplyResult:
    batch_id: int
    # table (its directory name, canal.lake.store.names: ``schema.table`` for plain names) -> "applied" | "skipped"
    tables: dict[str, str] = attrs.field(factory=dict)
    rows: int = 0
    merge_s: float = 0.0
    prepare_s: float = 0.0
    maintenance_s: float = 0.0  # scheduled compaction and vacuum after the batch (``optimize_every``, ...)
    folds: list[str] = attrs.field(factory=list)  # tables whose fold the batch started (merge_on_read)
    staged: list[str] = attrs.field(factory=list)  # tables whose part the batch staged (canal.lake.store.staged)
    flushed: list[str] = attrs.field(factory=list)  # tables whose staged parts the batch appended to their logs
    newest: tuple[str, int] | None = None  # (binlog file, offset) of the batch's newest change (None: no position)
    newest_time_ms: int | None = None  # the newest execute time of its changes, ms since the epoch
    destination: str | None = None  # the destination its changes came from (None: its rows name none)

    def names_held(self) -> int:
        """The table names it holds: its weight in a mirror's bounded ``history`` (:mod:`canal.lake.upkeep.records`)."""
        return len(self.tables) + len(self.folds) + len(self.staged) + len(self.flushed)
