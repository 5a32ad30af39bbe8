"""MariaDB's UUID, INET6 and INET4 arrive as the text ``SELECT`` shows -- in entries, ``Column.text``, every change
form and the mirror -- whatever ``binlog_row_metadata`` says; without a schema to name them they never pass as text.

Measured here, on MariaDB 10.11: the binlog logs the three as BINARY(16) / BINARY(16) / BINARY(4) (the table map says
nothing more, even with FULL metadata) and a UUID's bytes in its text order, although the server stores a version-1
UUID with its time segments swapped (``ORDER BY`` sorts by the node first); INET6 prints one zero group as ``::`` too,
unlike RFC 5952 (``2001:db8::1:1:1:1:1``); an INET6 takes no IPv4 text. ``canal.sql.values`` is the model, tested
here against the server with random values, and on its own by hypothesis.
"""

from __future__ import annotations

import ipaddress
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")

from mirror_forms import FORMS, capture, mirror_all

from canal.config import InstanceConfig, MasterConfig, SchemaHistoryConfig, StoreConfig
from canal.instance import Instance
from canal.lake.forms.changes import entries_to_batch
from canal.lake.mirror import DeltaMirror
from canal.lake.types import MirrorTypeError
from canal.parse.events import RowsEvent
from canal.parse.mysql.files import LocalBinlogSource
from canal.parse.source import DumpRequest
from canal.protocol import EntryType, SqlType
from canal.spark.testing import master_position
from canal.sql.values import canonical_text, inet4_text, inet6_text, uuid_text
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

UUIDS = [
    "123e4567-e89b-12d3-a456-426655440000",
    "00000001-0000-1000-8000-000000000002",  # version 1: stored with its segments swapped
    "00000002-0000-1000-8000-000000000001",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
]
INET6 = ["::", "::1", "2001:db8::1:1:1:1:1", "::ffff:1.2.3.4", "::1.2.3.4", "fe80::1:0:0:1", "1::", "1:0:0:1::1"]
INET4 = ["0.0.0.0", "10.0.0.1", "192.168.0.255", "255.255.255.255", "1.2.3.4"]


@pytest.fixture
def binlog_row_metadata(mariadb: MariaDBDatabase, request: pytest.FixtureRequest) -> Any:
    """The server's ``binlog_row_metadata`` for the test (restored after it)."""
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield request.param
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


def test_the_binlog_logs_a_uuid_in_its_text_order_not_as_stored(mariadb: MariaDBDatabase) -> None:
    """The facts the decoding rests on, byte by byte: BINARY(n) in the table map, the value's text order in the row
    image, whereas ``ORDER BY`` shows the swapped order the server stores a version-1 UUID in."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.f (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4)")
        start = master_position(conn)
        for n, (u, i6, i4) in enumerate(zip(UUIDS, INET6, INET4, strict=False)):
            cur.execute(f"INSERT INTO `{db}`.f VALUES (%s, %s, %s, %s)", (n, u, i6, i4))
        cur.execute(f"SELECT id, HEX(u), HEX(i6), HEX(i4), u, i6, i4 FROM `{db}`.f ORDER BY id")
        stored = {r[0]: r[1:] for r in cur.fetchall()}
        cur.execute(f"SELECT u FROM `{db}`.f WHERE id IN (1, 2) ORDER BY u")
        ordered = [r[0] for r in cur.fetchall()]
    conn.close()
    assert ordered == [UUIDS[2], UUIDS[1]], "the server orders version-1 UUIDs by their node first"
    files = Path(mariadb.server.datadir)
    source = LocalBinlogSource(files)  # no schema: what the binlog alone says
    source.open()
    try:
        events = list(source.dump(DumpRequest(start[0], start[1], blocking=False)))
    finally:
        source.close()
    rows = [r.after for ev in events if isinstance(ev, RowsEvent) and ev.table.table == "f" for r in ev.rows]
    schema = next(ev.table for ev in events if isinstance(ev, RowsEvent) and ev.table.table == "f")
    assert [c.mysql_type for c in schema.columns[1:]] == ["binary(16)", "binary(16)", "binary(4)"]
    assert len(rows) == len(stored)
    for row in rows:
        hex_u, hex_6, hex_4, u, i6, i4 = stored[row[0]]
        assert [v.hex().upper() for v in row[1:]] == [hex_u, hex_6, hex_4], "the row image holds the text order"
        assert (uuid_text(row[1]), inet6_text(row[2]), inet4_text(row[3])) == (u, i6, i4)


@pytest.mark.parametrize("binlog_row_metadata", ["FULL", "MINIMAL", "NO_LOG"], indirect=True)
def test_entries_and_every_mirror_form_hold_the_text_select_shows(
    mariadb: MariaDBDatabase, binlog_row_metadata: str, tmp_path: Path
) -> None:
    """A UUID-keyed table and one of INET columns, their keys moved, columns added (NULL, NOT NULL: the zero value,
    a DEFAULT the server prints canonically), under each ``binlog_row_metadata``: every entry's value is the
    ``str`` SELECT shows, typed ``uuid`` / ``inet6`` / ``inet4``, and a mirror fed the entries in each form equals
    ``SELECT`` after every phase. A MODIFY to BINARY(16) keeps the table map's bytes: its rows are bytes again."""
    setup = [
        "CREATE TABLE {db}.k (u UUID PRIMARY KEY, v INT, b BINARY(16))",
        "CREATE TABLE {db}.a (id INT PRIMARY KEY, i6 INET6, i4 INET4 NOT NULL, b4 BINARY(4))",
    ]
    phases = [
        [
            "INSERT INTO {db}.k VALUES (UUID(), 1, x'00112233445566778899aabbccddeeff')",
            *(f"INSERT INTO {{db}}.k VALUES ('{u}', {n}, NULL)" for n, u in enumerate(UUIDS, 2)),
            *(
                f"INSERT INTO {{db}}.a VALUES ({n}, '{i6}', '{INET4[n % len(INET4)]}', x'01020304')"
                for n, i6 in enumerate(INET6)
            ),
        ],
        [
            f"UPDATE {{db}}.k SET u = 'ABCDEF01-2345-6789-ABCD-EF0123456789' WHERE u = '{UUIDS[3]}'",  # a key moved
            f"UPDATE {{db}}.k SET v = v + 10 WHERE u = '{UUIDS[1]}'",
            f"DELETE FROM {{db}}.k WHERE u = '{UUIDS[2]}'",
            "UPDATE {db}.a SET i6 = '0:0:0:0:0:0:0:2', i4 = '9.9.9.9' WHERE id < 3",
            "DELETE FROM {db}.a WHERE id = 3",
        ],
        [
            "ALTER TABLE {db}.a ADD COLUMN u UUID, ADD COLUMN z UUID NOT NULL, ADD COLUMN n6 INET6 NOT NULL, "
            "ADD COLUMN d6 INET6 DEFAULT '2001:0DB8:0:0:0:0:0:0001', ADD COLUMN d4 INET4 DEFAULT '010.1.1.1'",
            "INSERT INTO {db}.a (id, i4, u, z, n6) VALUES (20, '1.1.1.1', UUID(), UUID(), '::2')",
        ],
    ]
    captured = capture(mariadb, tmp_path / "meta", setup, phases, ["k", "a"], columnar=binlog_row_metadata != "FULL")
    rows = captured.rows()
    types = {c.name: (c.mysql_type, c.sql_type) for r in rows for c in r.after_columns or r.before_columns}
    assert types["u"] == ("uuid", SqlType.VARCHAR) and types["i6"] == ("inet6", SqlType.VARCHAR)
    assert types["i4"] == ("inet4", SqlType.VARCHAR) and types["b"][0] == "binary(16)"
    for row in rows:
        for column in (*row.before_columns, *row.after_columns):
            if column.name in ("u", "i6", "i4", "z", "n6", "d6", "d4") and column.value is not None:
                assert isinstance(column.value, str) and column.text == column.value, column
            if column.name in ("b", "b4") and column.value is not None:
                assert isinstance(column.value, bytes), column  # BINARY(n) stays bytes
    last = captured.phases[-1].selected
    assert {r["d6"] for r in last["a"]} == {"2001:db8::1"} and {r["n6"] for r in last["a"]} >= {"::", "::2"}
    # every form and mode once; below FULL metadata (a question of decoding: the rows decoded column by column,
    # as run_batches into a mirror decodes them) the typed form
    tried = [("merge_on_read", form) for form in FORMS] + [("copy_on_write", "rows"), ("copy_on_write", "typed")]
    failures = {
        (mode, form): mirror_all(captured, tmp_path / f"{mode}-{form}", form, mode=mode)
        for mode, form in (tried if binlog_row_metadata == "FULL" else [("merge_on_read", "typed")])
    }
    assert {k: v for k, v in failures.items() if v} == {}


def test_a_modify_to_binary_gives_bytes_again_under_the_same_table_map(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """``MODIFY u BINARY(16)`` leaves the table map's bytes as they were (BINARY(16) both): the decoder built under
    the UUID must not be reused for the rows after it (the schema history's version says the type changed)."""
    setup = ["CREATE TABLE {db}.m (id INT PRIMARY KEY, u UUID)"]
    phases = [
        [f"INSERT INTO {{db}}.m VALUES (1, '{UUIDS[0]}')"],
        ["ALTER TABLE {db}.m MODIFY u BINARY(16)", f"INSERT INTO {{db}}.m VALUES (2, x'{UUIDS[0].replace('-', '')}')"],
        ["ALTER TABLE {db}.m MODIFY u UUID", f"INSERT INTO {{db}}.m VALUES (3, '{UUIDS[1]}')"],
    ]
    # heal="stop": the decoding under one table map is what is tested (by default the capture reads m again after
    # the MODIFYs, conversions of UUID and BINARY the mirror does not repeat, and its snapshot rows hold the UUIDs)
    captured = capture(mariadb, tmp_path / "meta", setup, phases, ["m"], heal="stop")
    values = {r.after_dict()["id"]: (r.after_dict()["u"], r.after_columns[1].mysql_type) for r in captured.rows()}
    raw = bytes.fromhex(UUIDS[0].replace("-", ""))
    assert values == {1: (UUIDS[0], "uuid"), 2: (raw, "binary(16)"), 3: (UUIDS[1], "uuid")}
    assert [r["u"] for r in captured.phases[1].selected["m"]] == [raw, raw], "the server converted row 1 too"


def test_a_first_start_before_a_later_alter_types_the_rows_by_the_history(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """A destination's first start at a position before a table's rows and a later ALTER of it, on a server that
    logs column names (FULL metadata): the rows before the ALTER are typed by the history the dump builds from the
    CREATE, not by the binlog alone (found by the randomized mirror differential: the history started at the read,
    so those rows carried a UUID's 16 bytes and a FLOAT(7,4) at 6 digits, and the mirror stopped typed)."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.h (id INT PRIMARY KEY, u UUID, i4 INET4, f FLOAT(7,4))")
        cur.execute(f"INSERT INTO `{db}`.h VALUES (1, '{UUIDS[0]}', '{INET4[1]}', 123.45678)")
        cur.execute(f"ALTER TABLE `{db}`.h ADD COLUMN n INT")
        cur.execute(f"INSERT INTO `{db}`.h VALUES (2, '{UUIDS[1]}', '{INET4[2]}', 999.9999, 1)")
    conn.close()
    assert mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0] == "FULL"
    config = InstanceConfig(
        destination="first-start",
        master=mariadb.master(start),
        filter_regex=rf"{db}\.h",
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    rows = []
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        while len(rows) < 2:
            assert time.monotonic() < deadline and inst.parser.error is None, inst.parser.error
            entries = inst.get(100, timeout=0.2).entries
            rows += [r.after_dict() for e in entries if e.row_change is not None for r in e.row_change.rows]
    assert [(r["id"], r["u"], r["i4"], r["f"]) for r in rows] == [
        (1, UUIDS[0], INET4[1], 123.4568),
        (2, UUIDS[1], INET4[2], 999.9999),
    ]


def test_a_snapshot_of_a_uuid_keyed_table_reads_the_binlogs_values(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """A UUID-keyed table read in chunks by its key (``canal.snapshot.values``, the chunks' bounds compared in the
    server's UUID order): the rows are the text SELECT shows, each once, and a mirror of them equals SELECT."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.s (u UUID PRIMARY KEY, i6 INET6, i4 INET4)")
        for n in range(40):  # version-1 UUIDs (their stored order differs from their text's) and others
            u = "UUID()" if n % 2 else f"'{n:08x}-0000-4000-8000-{40 - n:012x}'"
            cur.execute(f"INSERT INTO `{db}`.s VALUES ({u}, %s, %s)", (f"2001:db8::{n:x}", f"10.0.0.{n}"))
        cur.execute(f"SELECT u, i6, i4 FROM `{db}`.s")
        selected = sorted(cur.fetchall())
    conn.close()
    config = InstanceConfig(
        destination="uuid-snapshot",
        master=mariadb.master(),
        filter_regex=rf"{db}\.s",
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    entries = []
    with Instance(config) as inst:
        inst.snapshot([f"{db}.s"], chunk_rows=7)
        deadline = time.monotonic() + 30
        while not (inst.snapshots and inst.snapshots[-1].progress().done):
            assert time.monotonic() < deadline, "the snapshot did not come"
            assert inst.snapshots[-1].error is None
            entries.extend(e for e in inst.get(100, timeout=0.2).entries if e.entry_type is EntryType.ROWDATA)
        entries.extend(e for e in inst.get(100, timeout=0.2).entries if e.entry_type is EntryType.ROWDATA)
    rows = sorted(tuple(r.after) for e in entries for r in e.row_change.rows)  # type: ignore[union-attr]
    assert rows == selected and all(isinstance(v, str) for row in rows for v in row)
    mirror = DeltaMirror(tmp_path / "mirror", background_folds=False)
    mirror.apply(entries_to_batch(entries, "s", 1), 1)
    assert sorted(tuple(r.values()) for r in mirror.read(db, "s").to_pylist()) == selected
    mirror.close()


def test_without_a_schema_the_bytes_never_pass_as_text(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """Binlog files read with the schema history off: the binlog alone says BINARY(16), so the value is its bytes
    typed ``binary(16)``; a mirror whose DDL declared the column UUID stops with MirrorTypeError naming it rather
    than store the bytes as text (its table stays as the CREATE made it: empty), again on a replay."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.u (id INT PRIMARY KEY, u UUID, i4 INET4)")
        cur.execute(f"INSERT INTO `{db}`.u VALUES (1, UUID(), '10.0.0.1')")  # both bytes valid UTF-8 or not
        cur.execute(f"CREATE TABLE `{db}`.mark (n INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO `{db}`.mark VALUES (1)")
    conn.close()
    files = tmp_path / "binlogs"
    files.mkdir()
    for path in Path(mariadb.server.datadir).glob("mysql-bin.[0-9]*"):
        shutil.copy(path, files)
    config = InstanceConfig(
        destination="no-schema",
        master=MasterConfig(address=f"file://{files}", journal_name=start[0], position=start[1]),
        filter_regex=rf"{db}\..*",
        schema_history=SchemaHistoryConfig(enable=False),
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )
    entries = []
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        while not any(e.header.table == "mark" and e.entry_type is EntryType.ROWDATA for e in entries):
            assert time.monotonic() < deadline
            entries.extend(inst.get(100, timeout=0.2).entries)
    entries = [e for e in entries if e.header.table != "mark"]
    (row,) = [r for e in entries if e.row_change is not None and not e.row_change.is_ddl for r in e.row_change.rows]
    assert [c.mysql_type for c in row.after_columns] == ["int(11)", "binary(16)", "binary(4)"]
    assert row.after_dict()["i4"] == b"\n\x00\x00\x01"
    mirror = DeltaMirror(tmp_path / "mirror", background_folds=False)
    for _ in range(2):  # the batch, then its replay
        with pytest.raises(MirrorTypeError, match=rf"{db}\.u: column 'u' is text in the mirror .* rows carry binary"):
            mirror.apply(entries_to_batch(entries, "no-schema", 1), 1)
        assert mirror.read(db, "u").num_rows == 0
    mirror.close()


# -- the model, against the server and on its own -------------------------------------------------------------------

_UUID_BYTES = st.binary(min_size=16, max_size=16).filter(lambda b: not (b[6] & 0x80 and 1 <= b[8] <= 0x80))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    uuids=st.lists(_UUID_BYTES, min_size=1, max_size=20),
    inet6=st.lists(
        st.one_of(
            st.binary(min_size=16, max_size=16),
            st.lists(st.sampled_from([0, 0, 0, 1, 0xFFFF, 0xDB8]), min_size=8, max_size=8).map(
                lambda words: b"".join(w.to_bytes(2, "big") for w in words)
            ),
        ),
        min_size=20,
        max_size=20,
    ),
    inet4=st.lists(st.binary(min_size=4, max_size=4), min_size=20, max_size=20),
)
def test_random_values_decode_to_the_text_select_shows(
    mariadb: MariaDBDatabase, uuids: list[bytes], inet6: list[bytes], inet4: list[bytes]
) -> None:
    """Random stored bytes, assigned as binary strings: the decoder's text (through an Instance reading FULL
    metadata rows named by the schema history) equals the server's."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE OR REPLACE TABLE `{db}`.r (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4)")
        start = master_position(conn)
        values = [(n, uuids[n % len(uuids)], inet6[n], inet4[n]) for n in range(20)]
        cur.executemany(f"INSERT INTO `{db}`.r VALUES (%s, %s, %s, %s)", values)
        cur.execute(f"SELECT id, u, i6, i4 FROM `{db}`.r")
        selected = {r[0]: r[1:] for r in cur.fetchall()}
    conn.close()
    source_rows = {}
    config = InstanceConfig(
        destination="random-inet", master=mariadb.master(start), filter_regex=rf"{db}\.r", store=StoreConfig()
    )
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        while len(source_rows) < 20:
            assert time.monotonic() < deadline
            for e in inst.get(100, timeout=0.2).entries:
                if e.row_change is not None and not e.row_change.is_ddl:
                    source_rows.update({r.after[0]: tuple(r.after[1:]) for r in e.row_change.rows})
    assert source_rows == selected


@given(raw=st.binary(min_size=16, max_size=16))
@example(raw=bytes(16))
@example(raw=bytes(15) + b"\x01")
@example(raw=bytes.fromhex("20010db8000000010001000100010001"))
@example(raw=bytes.fromhex("00000000000000000000ffff01020304"))
@example(raw=bytes.fromhex("00000000000000000000000001020304"))
def test_inet6_text_is_an_address_of_the_same_bytes_in_canonical_form(raw: bytes) -> None:
    text = inet6_text(raw)
    assert ipaddress.IPv6Address(text).packed == raw
    assert canonical_text("inet6", text) == text == text.lower()
    groups = text.replace("::", ":").strip(":").split(":")
    assert "::" not in text.replace("::", "", 1), "one gap at most"
    assert all(g == "0" or not g.startswith("0") for g in groups if "." not in g), "no leading zeros"


@given(raw=st.binary(min_size=16, max_size=16))
def test_uuid_text_round_trips(raw: bytes) -> None:
    text = uuid_text(raw)
    assert [len(part) for part in text.split("-")] == [8, 4, 4, 4, 12] and text == text.lower()
    assert canonical_text("uuid", text.upper()) == text
    assert canonical_text("uuid", text.replace("-", "")) == text
