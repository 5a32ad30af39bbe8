"""Real binlog bytes for the hostile-bytes tests: one private MariaDB, a varied workload, its binlog files.

The workload touches every column type MariaDB has (integers signed and unsigned at their limits, DECIMAL(65,30),
FLOAT/DOUBLE, BIT(64), every temporal type with and without fractions, zero dates, CHAR/VARCHAR in utf8mb4 and
latin1, BINARY/VARBINARY, every BLOB and TEXT size with a 300 KB value, ENUM, SET, JSON, GEOMETRY), in single and
multi-row statements, updates, deletes, a DDL, an XA transaction, a non-transactional (MyISAM) table, and events
compressed by ``log_bin_compress``. It is written once with CRC32 checksums and then, after ``SET GLOBAL
binlog_checksum=NONE``, partly again without.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import attrs

from canal.testing.services import MariaDBServer

TYPES_DDL = """CREATE TABLE fz.all_types (
    id INT PRIMARY KEY,
    ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
    i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
    d DECIMAL(65,30), d2 DECIMAL(10,2) UNSIGNED, f FLOAT, db DOUBLE, b BIT(64), b1 BIT(1),
    dt DATE, dtm DATETIME(6), dtm0 DATETIME, ts TIMESTAMP(6) NULL, tm TIME(6), tm0 TIME, y YEAR,
    c CHAR(10), vc VARCHAR(300) CHARACTER SET utf8mb4, l1 VARCHAR(20) CHARACTER SET latin1,
    bn BINARY(8), vb VARBINARY(300),
    tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB, tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
    e ENUM('a','b','c'), s SET('x','y','z'), j JSON, g GEOMETRY, pt POINT
) CHARACTER SET utf8mb4"""

_COLUMNS = (
    "id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, d, d2, f, db, b, b1, dt, dtm, dtm0, ts, tm, tm0, y, c, vc, l1, "
    "bn, vb, tb, bl, mb, lb, tt, tx, mt, lt, e, s, j, g, pt"
)


def _row(rng: random.Random, row_id: int, big: bool = False) -> str:
    """One row of literal SQL values (limits, NULLs and random values mixed)."""
    limit = rng.random() < 0.3

    def pick(lo: int, hi: int) -> str:
        return str(rng.choice([lo, hi]) if limit else rng.randint(lo, hi))

    def maybe(text: str) -> str:
        return "NULL" if rng.random() < 0.15 else text

    text = "".join(rng.choice("abcxyz é€😀'") for _ in range(rng.randint(0, 40)))

    def q(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    blob = "0x" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))).hex() if rng.random() < 0.9 else "''"
    values = [
        str(row_id),
        maybe(pick(-128, 127)),
        maybe(pick(0, 255)),
        maybe(pick(-32768, 32767)),
        maybe(pick(0, 65535)),
        maybe(pick(-8388608, 8388607)),
        maybe(pick(0, 16777215)),
        maybe(pick(-(2**31), 2**31 - 1)),
        maybe(pick(0, 2**32 - 1)),
        maybe(pick(-(2**63), 2**63 - 1)),
        maybe(pick(0, 2**64 - 1)),
        maybe("'" + ("-" if rng.random() < 0.5 else "") + "9" * 35 + "." + "9" * 30 + "'" if limit else "'12.5'"),
        maybe(f"{rng.randint(0, 99999999)}.{rng.randint(0, 99):02d}"),
        maybe(repr(rng.uniform(-1e6, 1e6))),
        maybe(repr(rng.uniform(-1e300, 1e300))),
        maybe(pick(0, 2**64 - 1)),
        maybe(pick(0, 1)),
        maybe(rng.choice(["'1000-01-01'", "'9999-12-31'", "'0000-00-00'", "'2024-02-29'"])),
        maybe(rng.choice(["'9999-12-31 23:59:59.999999'", "'1000-01-01 00:00:00'", "'2024-05-06 07:08:09.123456'"])),
        maybe(rng.choice(["'0000-00-00 00:00:00'", "'2020-01-02 03:04:05'"])),
        maybe(rng.choice(["'2038-01-19 03:14:07.999999'", "'1970-01-01 00:00:01'"])),
        maybe(rng.choice(["'-838:59:59.000000'", "'838:59:59'", "'-00:00:00.000001'", "'12:34:56.5'"])),
        maybe(rng.choice(["'-838:59:59'", "'00:00:00'"])),
        maybe(rng.choice(["1901", "2155", "0", "2024"])),
        maybe(q(text[:10])),
        maybe(q(text)),
        maybe(rng.choice(["'café'", "'plain'", "''"])),
        maybe(blob if len(blob) <= 18 else "0x0102"),
        maybe(blob),
        maybe(blob),
        maybe(blob),
        maybe(blob),
        maybe("REPEAT('z', 300000)" if big else blob),
        maybe(q(text)),
        maybe(q(text)),
        maybe(q(text)),
        maybe(q(text)),
        maybe(rng.choice(["'a'", "'b'", "'c'"])),
        maybe(rng.choice(["''", "'x'", "'x,z'", "'x,y,z'"])),
        maybe(rng.choice(['\'{"a": [1, 2.5, null, true], "b": {"c": "é"}}\'', "'[]'", "'\"s\"'", "'12'"])),
        maybe(rng.choice(["ST_GeomFromText('POINT(1 2)')", "ST_GeomFromText('LINESTRING(0 0, 1 1, 2 5)')"])),
        maybe("ST_GeomFromText('POINT(3 4)')"),
    ]
    return "(" + ", ".join(values) + ")"


def _workload(server: MariaDBServer, rng: random.Random, first_id: int, rows: int) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # zero dates
            row_id = first_id
            for n in range(rows):
                if n % 5 == 0:  # a multi-row statement
                    batch = [_row(rng, row_id + k) for k in range(3)]
                    cur.execute(f"INSERT INTO fz.all_types ({_COLUMNS}) VALUES " + ", ".join(batch))
                    row_id += 3
                else:
                    cur.execute(f"INSERT INTO fz.all_types ({_COLUMNS}) VALUES {_row(rng, row_id)}")
                    row_id += 1
            for victim in range(first_id, row_id, 4):
                cur.execute(f"UPDATE fz.all_types SET vc = CONCAT(IFNULL(vc, ''), 'ü'), biu = 7 WHERE id = {victim}")
            cur.execute(f"UPDATE fz.all_types SET id = id + 100000 WHERE id = {first_id + 1}")  # a key change
            cur.execute(f"DELETE FROM fz.all_types WHERE id BETWEEN {first_id + 2} AND {first_id + 4}")
    finally:
        conn.close()


@attrs.frozen(repr=False)
class Corpus:
    """Binlog files of one MariaDB after the workload: ``files`` by name, ``crc_name`` (CRC32 checksums, the whole
    workload) and ``plain_name`` (no checksums)."""

    files: dict[str, bytes]
    crc_name: str
    plain_name: str

    def __repr__(self) -> str:
        return f"Corpus({ {name: len(data) for name, data in self.files.items()} }, crc={self.crc_name})"

    def events(self, name: str) -> list[tuple[int, bytes]]:
        """(offset, raw bytes) of every event of a file."""
        return list(split_events(self.files[name]))


def split_events(data: bytes) -> Iterator[tuple[int, bytes]]:
    pos = 4
    while pos + 19 <= len(data):
        (size,) = struct.unpack_from("<I", data, pos + 9)
        yield pos, data[pos : pos + size]
        pos += size


def record_corpus() -> Corpus:
    """Start a private MariaDB, run the workload, return its binlog files (the server is stopped again)."""
    rng = random.Random(20261122)
    server = MariaDBServer(server_id=11)
    server.start()
    try:
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            assert row is not None
            crc_name = str(row[0])
            cur.execute("CREATE DATABASE fz")
            cur.execute(TYPES_DDL)
            cur.execute("CREATE TABLE fz.plain (id INT PRIMARY KEY, note VARCHAR(40)) ENGINE=MyISAM")
        _workload(server, rng, 1, 12)
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(f"INSERT INTO fz.all_types ({_COLUMNS}) VALUES {_row(rng, 900, big=True)}")
            cur.execute("INSERT INTO fz.plain VALUES (1, 'not transactional'), (2, 'two')")
            cur.execute("XA START 'fz1'")
            cur.execute("INSERT INTO fz.plain VALUES (3, 'in XA')")
            cur.execute(f"INSERT INTO fz.all_types ({_COLUMNS}) VALUES {_row(rng, 901)}")
            cur.execute("XA END 'fz1'")
            cur.execute("XA PREPARE 'fz1'")
            cur.execute("XA COMMIT 'fz1'")
            cur.execute("ALTER TABLE fz.all_types ADD COLUMN extra INT DEFAULT 5")
            cur.execute("SET GLOBAL log_bin_compress_min_len = 10")
            cur.execute("SET GLOBAL log_bin_compress = ON")
            cur.execute("CREATE TABLE fz.compressed_ddl (id INT PRIMARY KEY, note VARCHAR(40) DEFAULT 'compressed')")
        conn.close()
        _workload(server, rng, 1000, 5)  # MariaDB compressed query and rows events
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL log_bin_compress = OFF")
            cur.execute("SET GLOBAL binlog_checksum = NONE")  # rotates: the next file has no checksums
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            assert row is not None
            plain_name = str(row[0])
        conn.close()
        _workload(server, rng, 2000, 6)
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
        conn.close()
        files = {p.name: p.read_bytes() for p in sorted(server.datadir.glob("mysql-bin.[0-9]*"))}
    finally:
        server.stop()
    assert crc_name != plain_name
    return Corpus(files=files, crc_name=crc_name, plain_name=plain_name)
