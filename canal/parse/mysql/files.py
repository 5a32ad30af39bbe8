"""Local binlog files: a directory of ``mysql-bin.NNNNNN`` files read with the network source's event parser.

The files may be copied from a server's datadir or saved with ``mariadb-binlog --raw`` / ``mysqlbinlog --raw``.
Only the transport differs from :class:`~canal.parse.mysql.source.MysqlBinlogSource`: every event is parsed and
every row decoded by the same code. Column names come from the table maps, so the files must have been written with
``binlog_row_metadata=FULL`` (there is no information_schema to fall back on); otherwise columns are named
``UNKNOWN_COLn``. For the same reason, fractional-second temporal columns created on MariaDB with
``mysql56_temporal_format=OFF`` cannot be read from files, and where no schema history knows a table (one created
before the files' start), the binlog alone types its columns: a MariaDB UUID / INET6 / INET4 is its BINARY(n) bytes,
a ``FLOAT(M,D)`` has 6 significant digits rather than its ``D`` decimals (:mod:`canal.sql.values`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from canal.errors import BinlogPurgedError, ParseError, SourceError, SourceUnreachableError
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    HeartbeatEvent,
    RotateEvent,
    TransactionPayloadEvent,
)
from canal.parse.mysql import packets as P
from canal.parse.mysql.binlog import EventDecoder
from canal.parse.source import BinlogFile, DumpRequest
from canal.position import EntryPosition, journal_number

_NAME = re.compile(r"^(?P<base>.+)\.(?P<num>\d{6,})$")
_POLL_S = 0.05


class LocalBinlogSource:
    """A directory of binlog files as a ``BinlogSource`` (address ``file://DIR``).

    A non-blocking dump ends at the end of the newest file; a blocking one follows the files as they grow (or as new
    ones appear), yielding a :class:`HeartbeatEvent` every ``heartbeat_period_s`` while idle.

    An event cut short at the end of the newest file is one the server is still writing: a non-blocking dump ends
    before it, a blocking one waits for the rest. Once a newer file exists, such a remainder is a truncated or corrupt
    file and a :class:`~canal.errors.ParseError`. Events are checked against their header's position and (with
    ``verify_checksum``, the default) their CRC32 before they are decoded.
    """

    def __init__(self, directory: str | Path, *, verify_checksum: bool = True) -> None:
        self._dir = Path(directory)
        self._verify = verify_checksum
        self._closed = threading.Event()
        self._server_id: int | None = None
        self._known: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"LocalBinlogSource({str(self._dir)!r})"

    @property
    def address(self) -> str:
        return f"file://{self._dir}"

    @property
    def is_mariadb(self) -> bool:
        files = self._files()
        if not files:
            return False
        return "mariadb" in self._first_fde(files[0]).server_version.lower()

    def open(self) -> None:
        if not self._dir.is_dir():
            raise SourceUnreachableError(f"binlog directory {self._dir} does not exist")
        self._closed.clear()

    def close(self) -> None:
        self._closed.set()

    def _files(self) -> list[Path]:
        try:
            paths = [p for p in self._dir.iterdir() if _NAME.match(p.name) and p.is_file()]
        except OSError as e:
            raise SourceUnreachableError(f"cannot list binlog directory {self._dir}: {e}") from None
        return sorted((p for p in paths if self._is_binlog(p)), key=lambda p: journal_number(p.name))

    def _is_binlog(self, path: Path) -> bool:
        # other numbered files share a datadir with the binlogs (aria_log.00000001, ...): check the magic number
        if path.name not in self._known:
            try:
                with path.open("rb") as f:
                    magic = f.read(4)
            except FileNotFoundError:  # purged between listing and opening: gone, nothing to read
                return False
            except OSError as e:  # unreadable: it may be a binlog, and skipping it would skip its changes
                raise SourceError(f"cannot read {path} (a binlog file?): {e.strerror or e}") from None
            if len(magic) < 4:
                return False
            self._known[path.name] = magic == P.BINLOG_MAGIC
        return self._known[path.name]

    def binlog_files(self) -> list[BinlogFile]:
        return [BinlogFile(p.name, p.stat().st_size) for p in self._files()]

    def _first_fde(self, path: Path) -> FormatDescriptionEvent:
        with path.open("rb") as f:
            parser = EventDecoder(path.name)
            if f.read(4) != P.BINLOG_MAGIC:
                raise ParseError(f"{path} is not a binlog file (bad magic number at {path.name}:0)")
            data = self._read_event(f, path)
            if data is None:
                raise ParseError(f"{path} has no whole format description event at {path.name}:4")
            ev = parser.parse(data)
            if not isinstance(ev, FormatDescriptionEvent):
                raise ParseError(f"{path} does not start with a format description event at {path.name}:4")
            return ev

    def server_id(self) -> int:
        if self._server_id is None:
            files = self._files()
            if not files:
                raise SourceError(f"no binlog files in {self._dir}")
            self._server_id = self._first_fde(files[0]).server_id
        return self._server_id

    def master_status(self) -> EntryPosition:
        files = self._files()
        if not files:
            raise SourceError(f"no binlog files in {self._dir}")
        last = files[-1]
        return EntryPosition(last.name, last.stat().st_size, None, self.server_id(), None)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        raise SourceError(f"{self.address} is a directory of binlog files: it cannot run SQL ({sql!r})")

    @staticmethod
    def _read_event(f: BinaryIO, path: Path) -> bytes | None:
        """The next whole event, or None at the (current) end of the file; the file is left before a partial one.

        A declared size is trusted only as far as the file holds bytes: nothing is read (or allocated) for an event
        that is not all there yet. A size no event can have is a :class:`ParseError` at once.
        """
        start = f.tell()
        header = f.read(P.EVENT_HEADER_LEN)
        if len(header) < P.EVENT_HEADER_LEN:
            f.seek(start)
            return None
        size = int.from_bytes(header[9:13], "little")
        if not P.EVENT_HEADER_LEN <= size <= P.MAX_EVENT_SIZE:
            raise ParseError(f"corrupt event header at {path.name}:{start} (size {size})")
        if start + size > os.fstat(f.fileno()).st_size:
            f.seek(start)
            return None
        body = f.read(size - P.EVENT_HEADER_LEN)
        if len(body) < size - P.EVENT_HEADER_LEN:
            f.seek(start)
            return None
        return header + body

    @staticmethod
    def _check_position(data: bytes, start: int, path: Path) -> None:
        # a server writes each event's end offset into its header (modulo 2^32 past 4 GiB): a record whose header
        # says otherwise was not written there (no checksum needed to see it)
        log_pos = int.from_bytes(data[13:17], "little")
        flags = data[17] | data[18] << 8
        if log_pos and not flags & P.LOG_EVENT_ARTIFICIAL_F and log_pos != (start + len(data)) & 0xFFFFFFFF:
            raise ParseError(
                f"event at {path.name}:{start} says it ends at {log_pos}, but it ends at {start + len(data)}: "
                "a corrupt file"
            )

    def dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        if request.gtid_set is not None:
            raise SourceError(
                f"{self.address}: GTID dumps are not supported from local files; give a file and position"
            )
        files = self._files()
        names = [p.name for p in files]
        start = request.journal_name or (names[0] if names else None)
        if start is None or start not in names:
            raise BinlogPurgedError(
                f"{self.address} has no binlog file {request.journal_name}:{request.position} (files: {names})",
                errno=1236,
            )
        return self._dump(start, request)

    def _dump(self, name: str, request: DumpRequest) -> Iterator[BinlogEvent]:
        parser = EventDecoder(
            name,
            verify_checksum=self._verify,
            decode_rows=request.decode_rows,
            schema_lookup=request.schema,
            rows_form=request.rows_form,
        )
        position = request.position
        last_activity = time.monotonic()
        while True:
            path = self._dir / name
            with path.open("rb") as f:
                if f.read(4) != P.BINLOG_MAGIC:
                    raise ParseError(f"{path} is not a binlog file (bad magic number at {path.name}:0)")
                parser.log_file = name
                parser.position = 4
                fde = self._read_event(f, path)
                if fde is None:
                    raise ParseError(f"{path} has no whole format description event at {path.name}:4")
                ev = parser.parse(fde)
                if position <= 4:
                    yield ev
                else:  # like a server, send the file's format description first, as an artificial event
                    yield attrs.evolve(ev, offset=position, next_offset=position)
                    # and, as a server does, read the event after it: in an encrypted file (MariaDB) it says so,
                    # and the events at the position are ciphertext (a typed stop, not a checksum mismatch there)
                    after = self._read_event(f, path)
                    if after is not None and after[4] == P.START_ENCRYPTION_EVENT:
                        parser.position = f.tell() - len(after)
                        mark = parser.parse(after)  # refused unless the file holds the events decrypted
                        yield attrs.evolve(mark, offset=position, next_offset=position)
                    f.seek(position)
                    parser.position = position
                rotated_to: str | None = None
                while True:
                    if self._closed.is_set():
                        raise SourceError(f"{self.address}: dump stopped: source closed", errno=2013)
                    data = self._read_event(f, path)
                    if data is None:
                        nxt = self._next_file(name)
                        if nxt is not None:
                            self._check_complete(f, path)
                            rotated_to = nxt  # crashed server: no rotate event at the end of the file
                            break
                        if not request.blocking:
                            return
                        now = time.monotonic()
                        if 0 < request.heartbeat_period_s <= now - last_activity:
                            last_activity = now
                            yield HeartbeatEvent(
                                log_file=name,
                                offset=f.tell(),
                                next_offset=f.tell(),
                                timestamp=0,
                                server_id=self.server_id(),
                            )
                        self._closed.wait(_POLL_S)
                        continue
                    last_activity = time.monotonic()
                    start = f.tell() - len(data)
                    self._check_position(data, start, path)
                    parser.position = start
                    ev = parser.parse(data)
                    if isinstance(ev, TransactionPayloadEvent):
                        yield from parser.expand(ev)
                        continue
                    yield ev
                    if isinstance(ev, RotateEvent) and not ev.artificial:
                        rotated_to = ev.next_file
                        position = ev.next_position
                        break
            assert rotated_to is not None
            name = rotated_to
            if not (self._dir / name).exists():
                if not request.blocking:
                    return
                while not (self._dir / name).exists():
                    if self._closed.wait(_POLL_S):
                        raise SourceError(f"{self.address}: dump stopped: source closed", errno=2013)
            position = 4

    @staticmethod
    def _check_complete(f: BinaryIO, path: Path) -> None:
        """A file followed by a newer one is complete: bytes after its last whole event are a cut or corrupt event,
        never skipped silently."""
        here = f.tell()
        size = os.fstat(f.fileno()).st_size
        if here < size:
            header = f.read(P.EVENT_HEADER_LEN)
            f.seek(here)
            declared = int.from_bytes(header[9:13], "little") if len(header) == P.EVENT_HEADER_LEN else None
            raise ParseError(
                f"{path.name} ends inside an event at {path.name}:{here} ({size - here} bytes left"
                + (f", {declared} declared" if declared is not None else "")
                + ") although a newer binlog file exists: the file is truncated or corrupt"
            )

    def _next_file(self, name: str) -> str | None:
        num = journal_number(name)
        for p in self._files():
            if journal_number(p.name) > num:
                return p.name
        return None
