"""The client/server packet layer (``packets.read_packet``) on a real socket pair, and a 17 MB event through the
network source: payloads of 16 MiB - 1 bytes continue in the next packet, sequence ids must follow, and a declared
length never allocates more than arrives."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import mysql8_events as M
import pytest
from mysql_wire import event_packets, packet, packets, serving

from canal.parse.events import RowsEvent
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.mysql import packets as P
from canal.parse.source import DumpRequest


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _reader(sock: socket.socket) -> object:
    stream = sock.makefile("rb")

    def read(n: int) -> bytes:
        data = stream.read(n)
        if len(data) < n:
            raise ConnectionError("the stream ended")
        return data

    return read


def _send(sock: socket.socket, data: bytes) -> threading.Thread:
    # a writer thread: the pair's buffers hold less than these payloads
    t = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("size", [0, 1, 0xFFFFFE, 0xFFFFFF, 0xFFFFFF + 1, 2 * 0xFFFFFF + 5])
def test_payloads_around_the_16_mib_boundary(pair: tuple[socket.socket, socket.socket], size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    writer = _send(pair[0], packets([payload, b"next"], first_seq=250))
    read = _reader(pair[1])
    data, seq = P.read_packet(read, 250)  # type: ignore[arg-type]
    assert data == payload
    chunks = size // 0xFFFFFF + 1
    assert seq == (250 + chunks) & 0xFF
    assert P.read_packet(read, seq) == (b"next", (seq + 1) & 0xFF)  # type: ignore[arg-type]
    writer.join(10)


def test_a_wrong_sequence_id_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    _send(pair[0], packet(b"abc", 7)).join(5)
    with pytest.raises(ValueError, match="sequence id 7 where 6 was due"):
        P.read_packet(_reader(pair[1]), 6)  # type: ignore[arg-type]


def test_a_declared_length_past_the_limit_reads_nothing_more(pair: tuple[socket.socket, socket.socket]) -> None:
    # the header promises 16 MiB - 1 bytes and more to come; only 10 arrive
    _send(pair[0], struct.pack("<I", 0xFFFFFF)[:3] + b"\x01" + bytes(10)).join(5)
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        P.read_packet(_reader(pair[1]), 1, limit=1000)  # type: ignore[arg-type]


def test_a_17_mb_event_through_the_network_source() -> None:
    blob = bytes(range(256)) * (17 * 4096)  # 17 MiB: two continuation packets
    table = M.table_map(5, "big", "t", [("id", 3, b"", False), ("data", 252, b"\x04", False)], collation=63)
    rows = M.rows_v2(5, 2, b"\x00" + struct.pack("<i", 1) + M.blob(blob))
    rotate = M.event(P.ROTATE_EVENT, struct.pack("<Q", 4) + b"binlog.000001", 0, flags=P.LOG_EVENT_ARTIFICIAL_F)
    fde = M.fde()
    events = [rotate, fde, M.event(P.TABLE_MAP_EVENT, table, 4 + len(fde) + 200)]
    events.append(M.event(P.WRITE_ROWS_EVENT_V2, rows, 4 + len(fde) + 200 + len(rows) + 23))
    with serving(event_packets(events), version="8.0.36") as server:
        source = MysqlBinlogSource(server.address, "u", "p", schema_fallback=False, read_timeout=30.0)
        got = list(source.dump(DumpRequest("binlog.000001", 4, blocking=False)))
        source.close()
    (written,) = [e for e in got if isinstance(e, RowsEvent)]
    assert written.rows[0].after == (1, blob)
