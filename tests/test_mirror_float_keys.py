"""A FLOAT / DOUBLE primary key moved between 0.0 and -0.0 mirrors as the source holds it, from a binlog that keeps
-0.0 (MySQL does; MariaDB 10.11 stores 0.0 instead, tests/test_mirror_float_keys_mariadb.py).

The server compares keys by value, so 0.0 and -0.0 are one key: an UPDATE from one to the other changes the row in
place, and a batch may hold both spellings of one key. Tables ``s (k DOUBLE PRIMARY KEY, v INT)``, ``c (a INT,
k DOUBLE, v INT, PRIMARY KEY (a, k))`` and ``f (k FLOAT PRIMARY KEY, v INT)`` go through inserts, key updates
0.0 -> -0.0 and back (in one transaction too), value updates after, a key moved away and back, deletes and inserts
again, written to the fake binlog. Each phase is fed to a mirror in each mode, as change rows and as typed batches,
one entry a batch and the whole phase in one; after each phase, and after a fold, every table equals a model of the
source (one row per key, its values exactly as the last image has them: -0.0 stays -0.0).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from mirror_forms import batch_of

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.variant_changes import entries_to_variant_batch
from canal.lake.mirror import DeltaMirror
from canal.lake.settings import MODES
from canal.protocol import Entry, EntryType
from canal.testing.fake import FakeMysql

Row = dict[str, Any]
KEYS = {"s": ("k",), "c": ("a", "k"), "f": ("k",)}
COLUMNS = {"s": ("k", "v"), "c": ("a", "k", "v"), "f": ("k", "v")}

# a phase: transactions of (table, before, after) -- None before: an INSERT, None after: a DELETE
Op = tuple[str, Row | None, Row | None]
PHASES: list[list[list[Op]]] = [
    [
        [("s", None, {"k": 0.0, "v": 1}), ("s", None, {"k": 1.5, "v": 2}), ("f", None, {"k": -0.0, "v": 1})],
        [("c", None, {"a": 1, "k": 0.0, "v": 1}), ("c", None, {"a": 2, "k": -0.0, "v": 2})],
    ],
    [  # the key 0.0 -> -0.0
        [
            ("s", {"k": 0.0, "v": 1}, {"k": -0.0, "v": 1}),
            ("c", {"a": 1, "k": 0.0, "v": 1}, {"a": 1, "k": -0.0, "v": 1}),
        ],
        [("f", {"k": -0.0, "v": 1}, {"k": 0.0, "v": 1})],
    ],
    [  # a value updated after
        [
            ("s", {"k": -0.0, "v": 1}, {"k": -0.0, "v": 10}),
            ("c", {"a": 1, "k": -0.0, "v": 1}, {"a": 1, "k": -0.0, "v": 10}),
        ],
        [("f", {"k": 0.0, "v": 1}, {"k": 0.0, "v": 10})],
    ],
    [  # both spellings in one transaction: back, forth again, a value after
        [
            ("s", {"k": -0.0, "v": 10}, {"k": 0.0, "v": 10}),
            ("c", {"a": 2, "k": -0.0, "v": 2}, {"a": 2, "k": 0.0, "v": 2}),
            ("s", {"k": 0.0, "v": 10}, {"k": -0.0, "v": 10}),
            ("s", {"k": -0.0, "v": 10}, {"k": -0.0, "v": 11}),
            ("c", {"a": 1, "k": -0.0, "v": 10}, {"a": 1, "k": 0.0, "v": 12}),
            ("f", {"k": 0.0, "v": 10}, {"k": -0.0, "v": 11}),
        ]
    ],
    [  # moved away and back
        [("s", {"k": -0.0, "v": 11}, {"k": 2.5, "v": 11})],
        [("s", {"k": 2.5, "v": 11}, {"k": -0.0, "v": 11})],
    ],
    [  # deleted, inserted as the other spelling, touched as the first
        [("s", {"k": -0.0, "v": 11}, None), ("c", {"a": 2, "k": 0.0, "v": 2}, None)],
        [("s", None, {"k": 0.0, "v": 3}), ("f", {"k": -0.0, "v": 11}, None), ("f", None, {"k": 0.0, "v": 4})],
        [("s", {"k": 0.0, "v": 3}, {"k": -0.0, "v": 4}), ("f", {"k": 0.0, "v": 4}, {"k": -0.0, "v": 5})],
    ],
    [  # all gone in one batch with an insert and its move before
        [("s", None, {"k": 3.5, "v": 1}), ("s", {"k": 3.5, "v": 1}, {"k": 4.5, "v": 1})],
        [("s", {"k": -0.0, "v": 4}, None), ("c", {"a": 1, "k": 0.0, "v": 12}, None), ("f", {"k": -0.0, "v": 5}, None)],
    ],
]


def _identity(table: str, row: Row) -> tuple[Any, ...]:
    return tuple(row[k] + 0.0 if isinstance(row[k], float) else row[k] for k in KEYS[table])


def _exact(table: str, row: Row) -> tuple[str, ...]:
    return tuple(repr(row[c]) for c in COLUMNS[table])


def _model(upto: int) -> dict[str, list[tuple[str, ...]]]:
    """What the source holds after phase ``upto``: each key's row as its last image has it."""
    held: dict[str, dict[tuple[Any, ...], Row]] = {t: {} for t in KEYS}
    for phase in PHASES[: upto + 1]:
        for transaction in phase:
            for table, before, after in transaction:
                if before is not None:
                    del held[table][_identity(table, before)]
                if after is not None:
                    assert _identity(table, after) not in held[table], "the model's source keeps keys unique"
                    held[table][_identity(table, after)] = after
    return {t: sorted(_exact(t, r) for r in rows.values()) for t, rows in held.items()}


@pytest.fixture(scope="module")
def phases() -> list[list[Entry]]:
    """Each phase's entries, as an Instance reads them from the fake binlog."""
    with FakeMysql(name="float_keys", mariadb=True) as fake:
        fake.execute("CREATE DATABASE db")
        fake.execute("CREATE TABLE db.s (k DOUBLE NOT NULL PRIMARY KEY, v INT)")
        fake.execute("CREATE TABLE db.c (a INT NOT NULL, k DOUBLE NOT NULL, v INT, PRIMARY KEY (a, k))")
        fake.execute("CREATE TABLE db.f (k FLOAT NOT NULL PRIMARY KEY, v INT)")
        for n, phase in enumerate(PHASES):
            for transaction in phase:
                with fake.transaction() as tx:
                    for table, before, after in transaction:
                        if before is None:
                            tx.insert(f"db.{table}", after or {})
                        elif after is None:
                            tx.delete(f"db.{table}", before)
                        else:
                            tx.update(f"db.{table}", before, after)
            fake.execute(f"CREATE TABLE db.mark{n} (n INT PRIMARY KEY)")
        entries = _read_all(fake, f"CREATE TABLE db.mark{len(PHASES) - 1}")
    out: list[list[Entry]] = [[]]
    for entry in entries:
        rc = entry.row_change
        if rc is not None and rc.is_ddl and rc.sql.startswith("CREATE TABLE db.mark"):
            out.append([])
        elif entry.entry_type is EntryType.ROWDATA and rc is not None and not rc.is_ddl:
            out[-1].append(entry)
    assert len(out) == len(PHASES) + 1 and not out[-1]
    return out[:-1]


def _read_all(fake: FakeMysql, until: str) -> list[Entry]:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    config = InstanceConfig(
        destination="fk", master=master, filter_regex=r"db\..*", store=StoreConfig(buffer_size=1024)
    )
    with Instance(config) as inst:
        seen: list[Entry] = []
        deadline = time.monotonic() + 20
        while not any(e.row_change is not None and e.row_change.sql.startswith(until) for e in seen):
            assert time.monotonic() < deadline, f"timed out after {len(seen)} entries"
            seen.extend(inst.get(1000, timeout=0.5).entries)
        return seen


def test_the_binlog_holds_both_spellings(phases: list[list[Entry]]) -> None:
    """The fake keeps -0.0 as MySQL does: the batches really hold both spellings of one key."""
    keys = [
        repr(image[0])
        for phase in phases
        for entry in phase
        for row in (entry.row_change.rows if entry.row_change is not None else [])
        for image in (row.before, row.after)
        if image is not None and entry.header.table == "s"
    ]
    assert "-0.0" in keys and "0.0" in keys


def _mirrored(mirror: DeltaMirror) -> dict[str, list[tuple[str, ...]]]:
    mirror.flush_staged()
    out = {}
    for table in KEYS:
        rows = mirror.read("db", table).to_pylist()
        out[table] = sorted(_exact(table, r) for r in rows)
    return out


@pytest.mark.parametrize("per_entry", [True, False], ids=["one-entry-batches", "one-batch"])
@pytest.mark.parametrize("form", ["rows", "typed", "packed", "variant"])
@pytest.mark.parametrize("mode", MODES)
def test_zero_and_negative_zero_are_one_key(
    phases: list[list[Entry]], tmp_path: Path, mode: Any, form: str, per_entry: bool
) -> None:
    # folds only when asked (after each phase): the change log holds every batch of a phase, both spellings of a key
    mirror = DeltaMirror(tmp_path / "m", mode=mode, background_folds=False, fold_ratio=1e9, fold_files=10**9)
    batch_id = 0
    try:
        for n, entries in enumerate(phases):
            chunks: Sequence[Sequence[Entry]] = [[e] for e in entries] if per_entry else [entries]
            for chunk in chunks:
                batch_id += 1
                if form == "packed":  # as the canal source's images=packed carry them
                    mirror.apply(batch_of(chunk, form, batch_id), batch_id)
                elif form == "typed":
                    mirror.apply(entries_to_typed(chunk, "fk", batch_id, before_keys_only=True), batch_id)
                elif form == "variant":  # the canal source's images=variant rows
                    mirror.apply(entries_to_variant_batch(chunk, "fk", batch_id), batch_id)
                else:
                    mirror.apply(entries_to_batch(chunk, "fk", batch_id), batch_id)
            expected = _model(n)
            assert _mirrored(mirror) == expected, f"after phase {n}"
            for table in KEYS:
                mirror.fold("db", table)
            assert _mirrored(mirror) == expected, f"after phase {n} and a fold"
    finally:
        mirror.close()
