"""One parser's sharing of its master's binlog: its :class:`~canal.parse.shared.member.SharedMember`, the key it is
registered under with the process's readers (:data:`~canal.parse.shared.reader.READERS`), and its dump's stream
(:class:`~canal.parse.shared.stream.SharedStream`) -- or its source's own dump, where it may not share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from canal.parse.events import BinlogEvent
from canal.parse.schema_tracking import SchemaTracker
from canal.parse.shared.member import SharedMember
from canal.parse.shared.reader import READERS
from canal.parse.shared.stream import SharedStream, share_key
from canal.parse.source import BinlogSource, DumpRequest, RowsForm


class Sharing:
    """The sharing of one parser, whose destination is ``member`` (None: its config does not share). ``lock`` is the
    parser's: the stream is set under it, and taken under it by a stop or a switch, which close it from another
    thread."""

    def __init__(self, member: SharedMember | None, lock: threading.Lock) -> None:
        self.member = member
        self.key: str | None = None  # the key the member is registered under
        self.stream: SharedStream | None = None  # the dump's stream while it dumps
        self._lock = lock

    @property
    def shared(self) -> bool:
        """Whether the dump reads through the process's shared reader of its master now."""
        stream = self.stream
        return stream is not None and stream.shared

    def events(
        self,
        source: BinlogSource,
        request: DumpRequest,
        marks: tuple[str, str] | None,
        rows_form: RowsForm,
        schemas: SchemaTracker | None,
        reopen: Callable[[], BinlogSource],
        stop: threading.Event,
    ) -> Iterable[BinlogEvent]:
        """The dump's events: through the process's shared reader of the master when this destination may share one,
        else the source's own dump. ``marks``: the snapshot's watermark table; ``reopen`` makes a source of the same
        server (a dump of its own until the stream joins a reader); ``stop``: the parser's, set when it stops."""
        member = self.member
        key = share_key(source, request) if member is not None else None
        if key != self.key:
            self.unshare()
        if member is None or key is None:
            return source.dump(request)
        member.heartbeat_s = request.heartbeat_period_s  # before it registers: a reader made now hears as often
        if self.key is None:
            READERS.register(key, member)
            self.key = key
        member.watermark = marks
        member.rows_form = rows_form
        member.schemas = schemas
        stream = SharedStream(READERS, key, member, source, request, reopen)
        with self._lock:
            self.stream = stream
            if stop.is_set():
                stream.close()
        return stream

    def unshare(self) -> None:
        """Leave the reader the member is registered with (if any)."""
        key, member = self.key, self.member
        self.key = None
        if key is not None and member is not None:
            READERS.unregister(key, member)
