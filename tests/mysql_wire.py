"""A minimal MySQL wire-protocol server on a loopback port that replays a scripted binlog dump, for tests that feed
hostile bytes to :class:`~canal.parse.mysql.MysqlBinlogSource` exactly as a server would: pymysql's real handshake
over a real socket, then the dump packets the test scripted (well-formed or not).

It answers what the source asks before a dump -- the version and server id, ``@@GLOBAL.binlog_checksum``, ``SET``
statements, COM_REGISTER_SLAVE -- and on COM_BINLOG_DUMP sends ``dump`` (raw bytes: packet headers included, so a
test can break the framing itself), then closes the connection. Any password is accepted.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterable, Iterator

_CAPABILITIES = 0x0001 | 0x0004 | 0x0200 | 0x2000 | 0x8000 | 0x20000 | 0x80000


def packet(payload: bytes, seq: int) -> bytes:
    """One protocol packet (payloads under 16 MiB)."""
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def packets(payloads: Iterable[bytes], first_seq: int = 1) -> bytes:
    """Packets for ``payloads`` with consecutive sequence ids, payloads of 16 MiB or more split as the protocol
    splits them."""
    out = []
    seq = first_seq
    for payload in payloads:
        while True:
            chunk, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            out.append(packet(chunk, seq))
            seq += 1
            if len(chunk) < 0xFFFFFF:
                break
    return b"".join(out)


def event_packets(events: Iterable[bytes], *, eof: bool = True) -> bytes:
    """A dump stream: each event after the OK status byte, then (for a non-blocking dump) the EOF packet."""
    payloads = [b"\x00" + ev for ev in events]
    if eof:
        payloads.append(b"\xfe\x00\x00\x02\x00")
    return packets(payloads)


def _lenenc(n: int) -> bytes:
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def _lenenc_str(b: bytes) -> bytes:
    return _lenenc(len(b)) + b


_OK = b"\x00\x00\x00\x02\x00\x00\x00"
_EOF = b"\xfe\x00\x00\x02\x00"


def _result_set(names: list[str], rows: list[tuple[str | None, ...]]) -> list[bytes]:
    out = [_lenenc(len(names))]
    for name in names:
        out.append(
            _lenenc_str(b"def")
            + _lenenc_str(b"")
            + _lenenc_str(b"")
            + _lenenc_str(b"")
            + _lenenc_str(name.encode())
            + _lenenc_str(name.encode())
            + b"\x0c"
            + struct.pack("<HIBHB", 33, 255, 0xFD, 0, 0)
            + b"\x00\x00"
        )
    out.append(_EOF)
    for row in rows:
        out.append(b"".join(b"\xfb" if v is None else _lenenc_str(v.encode()) for v in row))
    out.append(_EOF)
    return out


class WireServer:
    """``with WireServer(dump=..., checksum="CRC32") as server: MysqlBinlogSource(server.address, ...)``.

    ``dump`` is what follows COM_BINLOG_DUMP, verbatim. ``version`` is what ``SELECT VERSION()`` returns.
    """

    def __init__(self, dump: bytes, *, checksum: str = "CRC32", version: str = "10.11.6-MariaDB-log") -> None:
        self.dump = dump
        self.checksum = checksum
        self.version = version
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, name="wire-accept", daemon=True)
        self.dumps_served = 0
        self.queries: list[str] = []  # every COM_QUERY, in order

    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()
        return f"{host}:{port}"

    def __enter__(self) -> WireServer:
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._accepting.join(5)
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), name="wire-conn", daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.closing(conn):
            try:
                self._session(conn)
            except (OSError, EOFError):
                return  # the client went away (or the test closed the server)

    def _session(self, conn: socket.socket) -> None:
        version = self.version.encode() + b"\x00"
        greeting = (
            b"\x0a"
            + version
            + struct.pack("<I", 7)
            + b"abcdefgh\x00"
            + struct.pack("<H", _CAPABILITIES & 0xFFFF)
            + b"\x21"
            + struct.pack("<H", 2)
            + struct.pack("<H", _CAPABILITIES >> 16)
            + b"\x15"
            + bytes(10)
            + b"ijklmnopqrst\x00"
            + b"mysql_native_password\x00"
        )
        conn.sendall(packet(greeting, 0))
        self._read_packet(conn)  # the handshake response: any user, any password
        conn.sendall(packet(_OK, 2))
        while True:
            payload = self._read_packet(conn)
            command, arg = payload[0], payload[1:]
            if command == 0x01:  # COM_QUIT
                return
            if command == 0x03:  # COM_QUERY
                conn.sendall(packets(self._answer(arg.decode("utf-8", "replace"))))
            elif command == 0x12 or command == 0x1E:  # COM_BINLOG_DUMP(_GTID)
                self.dumps_served += 1
                conn.sendall(self.dump)
                return  # closing the connection ends what the client may still wait for
            else:  # COM_REGISTER_SLAVE, COM_PING, ...
                conn.sendall(packet(_OK, 1))

    def _answer(self, sql: str) -> list[bytes]:
        self.queries.append(sql)
        text = sql.strip().upper()
        if text.startswith("SELECT VERSION()"):
            return _result_set(["VERSION()", "@@server_id"], [(self.version, "1")])
        if text.startswith("SELECT @@GLOBAL.BINLOG_CHECKSUM"):
            return _result_set(["@@GLOBAL.binlog_checksum"], [(self.checksum,)])
        if text.startswith("SHOW GLOBAL VARIABLES"):
            rows = [("binlog_format", "ROW"), ("binlog_row_image", "FULL"), ("log_bin", "ON")]
            return _result_set(["Variable_name", "Value"], [*rows, ("binlog_row_metadata", "FULL")])
        return [_OK]

    @staticmethod
    def _read_packet(conn: socket.socket) -> bytes:
        header = _recv_exact(conn, 4)
        length = header[0] | header[1] << 8 | header[2] << 16
        return _recv_exact(conn, length)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = conn.recv(n)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


@contextlib.contextmanager
def serving(dump: bytes, **kwargs: str) -> Iterator[WireServer]:
    with WireServer(dump, **kwargs) as server:
        yield server
