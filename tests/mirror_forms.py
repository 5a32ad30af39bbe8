"""Phases of SQL run on a real MariaDB, captured by an Instance, then fed to a mirror in each form a mirror takes --
change rows with JSON images (``rows``), typed batches (``typed``), packed typed batches (``packed``), change rows
with VARIANT images (``variant``) -- and compared with ``SELECT`` after each phase.

``capture`` runs the phases (each ended by a row of a ``mark`` table the entries are cut at) and keeps each phase's
entries and ``SELECT *`` of the tables after it; ``mirror_all`` feeds them to one mirror, one batch a phase, and
returns the first difference (or error) instead of raising, so one test can try every form and mode.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.lake.compare import compare
from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.packed import pack, unpack_all
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.variant_changes import entries_to_variant_batch
from canal.lake.mirror import DeltaMirror
from canal.parse.mysql import binlog
from canal.protocol import Entry, EntryType
from canal.spark.testing import master_position, primary_key, select_all
from canal.testing.plugin import MariaDBDatabase

FORMS = ("rows", "typed", "packed", "variant")


@attrs.frozen
class Phase:
    """One phase's entries (without the mark's), and each table's ``SELECT *`` rows after it."""

    entries: list[Entry]
    selected: dict[str, list[dict[str, Any]]]


@attrs.frozen
class Captured:
    db: str
    tables: tuple[str, ...]
    keys: dict[str, list[str]]
    phases: list[Phase]

    def rows(self) -> list[Any]:
        """Every row change of every phase (RowData), in order."""
        return [
            row
            for phase in self.phases
            for entry in phase.entries
            if entry.entry_type is EntryType.ROWDATA and entry.row_change is not None and not entry.row_change.is_ddl
            for row in entry.row_change.rows
        ]


def capture(
    mariadb: MariaDBDatabase,
    meta_dir: Path,
    setup: Sequence[str],
    phases: Sequence[Sequence[str]],
    tables: Sequence[str],
    *,
    session: Sequence[str] = (),
    columnar: bool = False,
    **settings: Any,
) -> Captured:
    """Run ``setup`` (before the capture starts: the tables exist) and then each phase's statements (``{db}`` is the
    quoted test database) on one connection (``session`` statements first, e.g. a ``sql_mode``), capturing from
    the end of ``setup`` with an Instance (``settings``: more InstanceConfig fields; ``columnar``: its rows decoded
    column by column, as run_batches into a mirror and the Spark reader's typed forms decode them)."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    name = f"`{db}`"
    with conn.cursor() as cur:
        for sql in session:
            cur.execute(sql)
        cur.execute(f"CREATE TABLE {name}.mark (n INT AUTO_INCREMENT PRIMARY KEY)")
        for sql in setup:
            cur.execute(sql.format(db=name))
    start = master_position(conn)
    config = InstanceConfig(
        destination="forms",
        master=mariadb.master(start),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta_dir),
        flush_period_s=0,
        **settings,
    )
    captured: list[Phase] = []
    with pytest.MonkeyPatch.context() as patch, Instance(config) as inst:
        # a table of wide rows is decoded as tuples (binlog.COLUMNAR_MIN_ROWS) unless the parser is told to take
        # columns of every table
        patch.setattr(binlog, "COLUMNAR_MIN_ROWS", 0 if columnar else binlog.COLUMNAR_MIN_ROWS)
        inst.decode_rows_by_column(columnar)
        for statements in phases:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql.format(db=name))
                cur.execute(f"INSERT INTO {name}.mark VALUES ()")
            entries = _phase_entries(inst)
            captured.append(Phase(entries, {t: select_all(conn, db, t) for t in tables}))
    keys = {t: primary_key(conn, db, t) for t in tables}
    conn.close()
    return Captured(db, tuple(tables), keys, captured)


def _phase_entries(inst: Instance) -> list[Entry]:
    entries: list[Entry] = []
    deadline = time.monotonic() + 30
    while not any(e.header.table == "mark" and e.entry_type is EntryType.ROWDATA for e in entries):
        if inst.parser.error is not None:
            raise inst.parser.error
        assert time.monotonic() < deadline, f"the phase's entries did not come: {len(entries)}"
        entries.extend(inst.get(1000, timeout=0.2, linger=0.05).entries)
    return [e for e in entries if e.header.table != "mark"]


def batch_of(entries: Sequence[Entry], form: str, batch_id: int, zero_dates: Any = "error") -> Any:
    """``entries`` as one batch of the mirror form ``form`` (typed forms with their change rows, as run_batches and
    the Spark reader give them)."""
    rows = functools.partial(entries_to_batch, entries, "forms", batch_id)
    if form == "rows":
        return rows()
    if form == "variant":
        return entries_to_variant_batch(entries, "forms", batch_id)
    typed = attrs.evolve(
        entries_to_typed(entries, "forms", batch_id, zero_dates=zero_dates, collect_errors=form == "packed"),
        rows=rows,
    )
    return typed if form == "typed" else unpack_all(pack(typed))


def mirror_all(captured: Captured, root: Path, form: str, *, fold: bool = True, **mirror: Any) -> str | None:
    """Feed every phase to a new mirror at ``root`` (one batch a phase, in ``form``; each table folded after each
    phase when ``fold``) and compare each table with the phase's ``SELECT``; the first difference or error, as
    text, or None when every phase ended equal."""
    kept = DeltaMirror(root, background_folds=False, **mirror)
    try:
        for n, phase in enumerate(captured.phases):
            if any(e.entry_type is EntryType.ROWDATA for e in phase.entries):
                kept.apply(batch_of(phase.entries, form, n + 1, kept.zero_dates), n + 1)
            for table in captured.tables:
                for _ in range(2 if fold else 1):
                    differs = differences(kept, captured, table, phase.selected[table])
                    if differs:
                        return f"phase {n}: {differs}"
                    if fold and kept.table_path(captured.db, table).exists():
                        kept.fold(captured.db, table)
    except Exception as exc:  # the test names what failed
        return f"{type(exc).__name__}: {exc}"
    finally:
        kept.close()
    return None


def differences(mirror: DeltaMirror, captured: Captured, table: str, selected: list[dict[str, Any]]) -> str | None:
    """How the mirrored table differs from ``selected`` (None: equal, cell for cell in canal text)."""
    if mirror.table_path(captured.db, table).exists():
        mirrored = mirror.read(captured.db, table)
    else:
        mirrored = pa.table({k: pa.array([], pa.string()) for k in (selected[0] if selected else captured.keys[table])})
    found = compare(mirrored, selected, captured.keys[table], name=table)
    if found.missing or found.extra or found.different or found.column_mismatch:
        return str(found)
    return None
