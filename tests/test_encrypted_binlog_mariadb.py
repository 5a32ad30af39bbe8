"""An encrypted binlog (MariaDB ``encrypt_binlog=ON`` with ``file_key_management``) on a real server.

Read through the server, the events arrive decrypted after a ``START_ENCRYPTION_EVENT`` the server flags ignorable:
rows written across a rotation (each file starts with its own such event), captured from the start and again from
a cursor inside a file (the server then sends the event with no position of its own), mirror equal to ``SELECT``.
The same files copied from the datadir are ciphertext after that event: reading them from disk stops typed
(:class:`EncryptedBinlogError`, nothing handed out, no cursor moved), while copies saved decrypted by
``mariadb-binlog --read-from-remote-server --raw`` read as any other.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import EncryptedBinlogError
from canal.instance import Instance
from canal.parse.events import RowsEvent, StartEncryptionEvent
from canal.parse.mysql import LocalBinlogSource, MysqlBinlogSource
from canal.parse.source import DumpRequest
from canal.spark import DeltaMirror
from canal.spark.testing import compare_tables, master_position, run_caught_up
from canal.testing.plugin import MariaDBFactory
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

MARKER = "plain-text-marker-7f3a"  # a value that is in the binlog only if the file is not encrypted


@pytest.fixture
def server(mariadb_factory: MariaDBFactory, tmp_path: Path) -> MariaDBServer:
    keys = tmp_path / "keys.txt"
    keys.write_text(f"1;{secrets.token_hex(32)}\n")
    return mariadb_factory(
        extra_args=[
            "--plugin-load-add=file_key_management",
            f"--file-key-management-filename={keys}",
            "--encrypt-binlog=ON",
        ]
    )


def _write(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _config(server: MariaDBServer, tmp_path: Path, address: str, start: tuple[str, int]) -> InstanceConfig:
    return InstanceConfig(
        destination="encrypted",
        master=MasterConfig(
            address=address, username=server.user, password=server.password, journal_name=start[0], position=start[1]
        ),
        filter_regex=r"d\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / f"meta-{address.replace('/', '_').replace(':', '_')}"),
    )


def test_an_encrypted_binlog_read_through_the_server_mirrors_equal_to_select(
    server: MariaDBServer, tmp_path: Path
) -> None:
    conn = server.connect(autocommit=True)
    start = master_position(conn)
    _write(
        conn,
        "CREATE DATABASE d",
        "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(8,2), at DATETIME(3))",
        f"INSERT INTO d.t VALUES (1, '{MARKER}', 1.50, '2024-01-02 03:04:05.678'), (2, 'two', NULL, NULL)",
        "UPDATE d.t SET n = 9.99 WHERE id = 2",
    )
    on_disk = (server.datadir / start[0]).read_bytes()
    assert MARKER.encode() not in on_disk, "the binlog file is not encrypted: the test would prove nothing"
    _write(conn, "FLUSH BINARY LOGS", "INSERT INTO d.t VALUES (3, 'three', 3, NOW(3))", "DELETE FROM d.t WHERE id = 1")

    # what the server sends: one flagged START_ENCRYPTION_EVENT after each file's format description, then plain
    # events; a dump that starts inside a file gets that file's at the start, with no position (no bytes) of its own
    source = MysqlBinlogSource(server.address, server.user, server.password)
    source.open()
    try:
        events = list(source.dump(DumpRequest(*start, blocking=False)))
    finally:
        source.close()
    marks = [e for e in events if isinstance(e, StartEncryptionEvent)]
    assert start[1] > 256
    assert [(e.log_file, e.offset, e.length, e.scheme, e.key_version, len(e.nonce)) for e in marks] == [
        (start[0], start[1], 0, 1, 1, 12),
        ("mysql-bin.000002", 256, 40, 1, 1, 12),
    ]
    assert marks[0].nonce != marks[1].nonce  # each file has a nonce of its own
    rows = [r.after for e in events if isinstance(e, RowsEvent) and e.table.table == "t" for r in e.rows]
    assert rows[0][:2] == (1, MARKER)

    mirror = DeltaMirror(tmp_path / "mirror")
    config = _config(server, tmp_path, server.address, start)
    run_caught_up(conn, config, None, mirror)
    assert all(c.equal for c in compare_tables(conn, mirror, "d", ["t"])), compare_tables(conn, mirror, "d", ["t"])

    # a restart resumes inside mysql-bin.000002: the server reads the file's START_ENCRYPTION_EVENT to decrypt and
    # sends it without a position of its own, ahead of the events after the cursor
    _write(conn, "UPDATE d.t SET v = 'changed' WHERE id = 3", "INSERT INTO d.t VALUES (4, 'four', 4, NULL)")
    stats = run_caught_up(conn, config, None, mirror)
    assert stats.rows == 2
    assert all(c.equal for c in compare_tables(conn, mirror, "d", ["t"])), compare_tables(conn, mirror, "d", ["t"])


def test_an_encrypted_binlog_file_read_from_disk_is_a_typed_stop(server: MariaDBServer, tmp_path: Path) -> None:
    conn = server.connect(autocommit=True)
    start = master_position(conn)
    _write(conn, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(40))")
    _write(conn, f"INSERT INTO d.t VALUES (1, '{MARKER}')", "FLUSH BINARY LOGS")
    copied = tmp_path / "copied"
    copied.mkdir()
    shutil.copy(server.datadir / start[0], copied / start[0])

    files = LocalBinlogSource(copied)
    files.open()
    for position in (4, start[1]):  # from the file's start, and from inside it (the event is read ahead, as a
        # server does, so the ciphertext is never taken for a corrupt event)
        with pytest.raises(EncryptedBinlogError, match=rf"{start[0]}:256: this binlog file is encrypted") as caught:
            list(files.dump(DumpRequest(start[0], position, blocking=False)))
        assert caught.value.key_version == 1

    # an instance on the copied files stops on it: nothing handed out, no cursor written, not retried
    with Instance(_config(server, tmp_path, f"file://{copied}", start)) as inst:
        assert inst.parser.join(30), "the parser did not stop"
        assert isinstance(inst.parser.error, EncryptedBinlogError)
        assert inst.store.get(100, None).entries == []
        assert inst.get_cursor() is None

    # copies the server decrypted (mariadb-binlog --raw keeps its flagged START_ENCRYPTION_EVENT) read as any other
    saved = tmp_path / "saved"
    saved.mkdir()
    subprocess.run(
        [
            "mariadb-binlog",
            "--read-from-remote-server",
            f"--host={server.host}",
            f"--port={server.port}",
            "--user=root",
            "--raw",
            f"--result-file={saved}/",
            start[0],
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    events = list(LocalBinlogSource(saved).dump(DumpRequest(*start, blocking=False)))
    assert [r.after for e in events if isinstance(e, RowsEvent) for r in e.rows] == [(1, MARKER)]
