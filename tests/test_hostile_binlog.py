"""Hostile and broken binlog bytes, fuzzed with hypothesis from real events a private MariaDB wrote.

The corpus (:mod:`binlog_corpus`, recorded once a session) holds a file written with CRC32 checksums and one without.
Mutations -- flipped or overwritten bytes, truncations, inserted and deleted bytes, event sizes set to anything up to
4 GiB, corrupted checksums, lengths inside bodies set to their maximum, whole events duplicated -- are read back

* through :class:`~canal.parse.mysql.LocalBinlogSource` (the files path), and
* through :class:`~canal.parse.mysql.MysqlBinlogSource` over a real loopback socket from a scripted server
  (:mod:`mysql_wire`), so pymysql's handshake and our packet reader handle them as they would a server's; packet
  framing is broken too (cut streams, wrong lengths and sequence ids, empty, short error and unexpected packets).

Every outcome is either a clean read or a :class:`~canal.errors.ParseError` (``SourceError`` is one) whose message
names the file and the offset: never another exception type, never a hang (hypothesis' deadline), never more memory
than the input holds. With checksums, every event delivered before the error is exactly the original event: no
corrupted row is delivered. Without them, every event before the first changed byte still is.
"""

from __future__ import annotations

import re
import struct
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from binlog_corpus import Corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mysql_wire import event_packets, packet, serving

from canal.errors import ParseError
from canal.parse.events import BinlogEvent, RotateEvent
from canal.parse.mysql import LocalBinlogSource, MysqlBinlogSource
from canal.parse.source import DumpRequest

pytestmark = pytest.mark.integration

_WHERE = re.compile(r"mysql-bin\.\d{6}:\d+")
_FUZZ = settings(
    max_examples=120,
    deadline=10_000,  # ms: a clean read takes ~0.1 s; a hang or a runaway loop would not end
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
_MUTATIONS = ("flip", "set", "truncate", "insert", "delete", "size", "crc", "huge", "duplicate")


# -- reading ----------------------------------------------------------------------------------------------------------


def read_files(data: bytes, name: str) -> tuple[list[BinlogEvent], BaseException | None]:
    """Every event a non-blocking dump of the one file yields, and the error that ended it (None: a clean end)."""
    with tempfile.TemporaryDirectory(prefix="pycanal-fuzz-") as tmp:
        (Path(tmp) / name).write_bytes(data)
        source = LocalBinlogSource(tmp)
        source.open()
        events: list[BinlogEvent] = []
        try:
            for event in source.dump(DumpRequest(name, 4, blocking=False)):
                events.append(event)
        except Exception as e:  # the assertions check its type
            return events, e
        finally:
            source.close()
        return events, None


def read_network(stream: bytes, name: str, checksum: bool) -> tuple[list[BinlogEvent], BaseException | None]:
    """Every event a non-blocking dump yields when the server sends ``stream`` after COM_BINLOG_DUMP."""
    with serving(stream, checksum="CRC32" if checksum else "NONE") as server:
        source = MysqlBinlogSource(
            server.address, "fuzz", "secret", verify_checksum=True, schema_fallback=False, read_timeout=5.0
        )
        events: list[BinlogEvent] = []
        try:
            for event in source.dump(DumpRequest(name, 4, blocking=False)):
                events.append(event)
        except Exception as e:
            return events, e
        finally:
            source.close()
        return events, None


def assert_typed(error: BaseException | None) -> None:
    if error is not None:
        assert isinstance(error, ParseError), f"{type(error).__name__}: {error}"
        assert _WHERE.search(str(error)), f"no file:offset in {error}"


def original(corpus: Corpus, name: str, cache: dict[str, list[BinlogEvent]] = {}) -> list[BinlogEvent]:  # noqa: B006
    if name not in cache:
        events, error = read_files(corpus.files[name], name)
        assert error is None, error
        cache[name] = events
    return cache[name]


# -- mutations --------------------------------------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, data: bytes, events: list[tuple[int, bytes]]) -> tuple[str, bytes, int]:
    """(what, the mutated bytes, the offset of the first changed byte) for a binlog file or one event."""
    kind = draw(st.sampled_from(_MUTATIONS))
    off, raw = draw(st.sampled_from(events))
    inside = draw(st.integers(off, off + len(raw) - 1))
    out = bytearray(data)
    at = inside
    if kind == "flip":
        out[inside] ^= draw(st.integers(1, 255))
    elif kind == "set":
        out[inside] = draw(st.integers(0, 255))
    elif kind == "truncate":
        del out[inside:]
    elif kind == "insert":
        at = draw(st.sampled_from([off, inside]))
        out[at:at] = draw(st.binary(min_size=1, max_size=32))
    elif kind == "delete":
        del out[inside : inside + draw(st.integers(1, 32))]
    elif kind == "size":
        size = draw(
            st.one_of(
                st.sampled_from([0, 18, 19, len(raw) - 1, len(raw) + 1, 1 << 30, (1 << 32) - 1]),
                st.integers(0, (1 << 32) - 1),
            )
        )
        struct.pack_into("<I", out, off + 9, size)
        at = off
    elif kind == "crc":
        end = off + len(raw)
        out[end - 4 : end] = bytes(b ^ 0x5A for b in out[end - 4 : end])
        at = end - 4
    elif kind == "huge":  # a length, count or offset inside the body at its maximum
        at = draw(st.integers(min(off + 19, off + len(raw) - 1), off + len(raw) - 1))
        n = min(draw(st.sampled_from([1, 2, 3, 4, 8])), off + len(raw) - at)
        out[at : at + n] = b"\xff" * n
    else:  # duplicate a whole, valid event somewhere else
        _, copy = draw(st.sampled_from(events))
        at = draw(st.sampled_from([o for o, _ in events]))
        out[at:at] = copy
    return kind, bytes(out), at


def _artificial_rotate(name: str, checksum: bool) -> bytes:
    body = struct.pack("<Q", 4) + name.encode()
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", 0, 4, 11, size, 0, 0x20) + body
    return raw + struct.pack("<I", zlib.crc32(raw)) if checksum else raw


def _stream_events(corpus: Corpus, name: str) -> list[bytes]:
    return [_artificial_rotate(name, name == corpus.crc_name), *(raw for _, raw in corpus.events(name))]


def _without_dump_rotate(events: list[BinlogEvent]) -> list[BinlogEvent]:
    # the server's artificial rotate opens every dump; the files path has no such event
    if events and isinstance(events[0], RotateEvent) and events[0].artificial:
        return events[1:]
    return events


def _intact_prefix(events: list[BinlogEvent], reference: list[BinlogEvent], at: int) -> None:
    """Events that end before the first changed byte are delivered exactly (a mutation there cannot be seen
    without a checksum, so nothing is promised after it)."""
    before = [e for e in reference if 0 < e.next_offset <= at]
    assert events[: len(before)] == before


# -- the files path ---------------------------------------------------------------------------------------------------


@_FUZZ
@given(data=st.data())
def test_checksummed_file_delivers_only_intact_events(binlog_corpus: Corpus, data: st.DataObject) -> None:
    name = binlog_corpus.crc_name
    kind, raw, at = data.draw(mutated(binlog_corpus.files[name], binlog_corpus.events(name)), label="mutation")
    events, error = read_files(raw, name)
    assert_typed(error)
    reference = original(binlog_corpus, name)
    assert events == reference[: len(events)], f"{kind} at {at}: a changed event was delivered"


@_FUZZ
@given(data=st.data())
def test_file_without_checksums_fails_typed(binlog_corpus: Corpus, data: st.DataObject) -> None:
    name = binlog_corpus.plain_name
    _, raw, at = data.draw(mutated(binlog_corpus.files[name], binlog_corpus.events(name)), label="mutation")
    events, error = read_files(raw, name)
    assert_typed(error)
    _intact_prefix(events, original(binlog_corpus, name), at)


# -- the network path -------------------------------------------------------------------------------------------------


@st.composite
def broken_stream(draw: st.DrawFn, events: list[bytes]) -> tuple[str, bytes, int]:
    """A dump stream with one event mutated (framing intact) or its packet framing broken; with the index of the
    first event touched."""
    if draw(st.booleans()):
        index = draw(st.integers(1, len(events) - 1))
        raw = events[index]
        kind, changed, _ = draw(mutated(raw, [(0, raw)]))
        return kind, event_packets([*events[:index], changed, *events[index + 1 :]]), index
    stream = bytearray(event_packets(events))
    starts = []  # packet header offsets
    pos = 0
    while pos < len(stream):
        starts.append(pos)
        pos += 4 + int.from_bytes(stream[pos : pos + 3], "little")
    index = draw(st.integers(0, len(starts) - 1))
    at = starts[index]
    kind = draw(st.sampled_from(["cut", "length", "seq", "empty", "short_error", "first_byte", "long_eof"]))
    if kind == "cut":
        del stream[draw(st.integers(at, len(stream) - 1)) :]
    elif kind == "length":
        stream[at : at + 3] = draw(st.integers(0, (1 << 24) - 1)).to_bytes(3, "little")
    elif kind == "seq":
        stream[at + 3] = (stream[at + 3] + draw(st.integers(1, 255))) & 0xFF
    elif kind == "empty":
        stream[at:at] = packet(b"", stream[at + 3])
    elif kind == "short_error":
        stream[at:at] = packet(b"\xff\x01", stream[at + 3])
    elif kind == "first_byte":
        stream[at + 4] = draw(st.sampled_from([0x01, 0x7F, 0xFB, 0xFC]))
    else:
        stream[at:at] = packet(b"\xfe" + bytes(9), stream[at + 3])
    return kind, bytes(stream), index


@_FUZZ
@given(data=st.data())
def test_network_dump_of_checksummed_events_delivers_only_intact_events(
    binlog_corpus: Corpus, data: st.DataObject
) -> None:
    name = binlog_corpus.crc_name
    kind, stream, _ = data.draw(broken_stream(_stream_events(binlog_corpus, name)), label="stream")
    events, error = read_network(stream, name, checksum=True)
    assert_typed(error)
    delivered = _without_dump_rotate(events)
    reference = original(binlog_corpus, name)
    assert delivered == reference[: len(delivered)], f"{kind}: a changed event was delivered"


@_FUZZ
@given(data=st.data())
def test_network_dump_without_checksums_fails_typed(binlog_corpus: Corpus, data: st.DataObject) -> None:
    name = binlog_corpus.plain_name
    stream_events = _stream_events(binlog_corpus, name)
    _, stream, index = data.draw(broken_stream(stream_events), label="stream")
    events, error = read_network(stream, name, checksum=False)
    assert_typed(error)
    delivered = _without_dump_rotate(events)
    intact = max(index - 1, 0)  # stream events before the touched one, the dump's rotate aside
    assert delivered[:intact] == original(binlog_corpus, name)[:intact]


def test_unmutated_corpus_reads_the_same_through_both_paths(binlog_corpus: Corpus) -> None:
    for name in (binlog_corpus.crc_name, binlog_corpus.plain_name):
        stream = event_packets(_stream_events(binlog_corpus, name))
        events, error = read_network(stream, name, checksum=name == binlog_corpus.crc_name)
        assert error is None
        assert _without_dump_rotate(events) == original(binlog_corpus, name)
        rows = sum(len(getattr(e, "rows", ())) for e in events)
        assert rows > 10


# -- bounded memory ---------------------------------------------------------------------------------------------------


def _peak_bytes(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_huge_declared_lengths_allocate_nothing_beyond_the_input(binlog_corpus: Corpus) -> None:
    """4-byte windows of the first event of each type in the checksum-free file set to 0xFFFFFFFF (its size, then
    counts, offsets and lengths in its body, up to 4 GiB): reading never holds more than a few times the file."""
    name = binlog_corpus.plain_name
    data = binlog_corpus.files[name]
    limit = 16 * len(data) + (8 << 20)
    worst = 0
    first_of_type = {raw[4]: (off, raw) for off, raw in reversed(binlog_corpus.events(name))}
    for off, raw in first_of_type.values():
        for at in range(off + 9, off + min(len(raw), 48), 4):
            mutated_file = data[:at] + b"\xff\xff\xff\xff" + data[at + 4 :]
            outcome: list[tuple[list[BinlogEvent], BaseException | None]] = []
            worst = max(worst, _peak_bytes(lambda m=mutated_file, out=outcome: out.append(read_files(m, name))))
            assert_typed(outcome[0][1])
    assert worst < limit, f"peak {worst} bytes reading a {len(data)}-byte file"


# -- the failures these tests found -----------------------------------------------------------------------------------


def test_a_cut_event_in_an_older_file_is_an_error_not_a_skip(binlog_corpus: Corpus, tmp_path: Path) -> None:
    """A file followed by a newer one ends inside an event: before, the rest of the file was skipped silently."""
    name = binlog_corpus.crc_name
    events = binlog_corpus.events(name)
    off, raw = events[len(events) // 2]
    (tmp_path / name).write_bytes(binlog_corpus.files[name][: off + len(raw) // 2])
    newer = sorted(binlog_corpus.files)[-1]
    assert newer != name
    (tmp_path / newer).write_bytes(binlog_corpus.files[newer])
    source = LocalBinlogSource(tmp_path)
    source.open()
    with pytest.raises(ParseError, match=rf"{re.escape(name)}:{off}.*truncated or corrupt"):
        list(source.dump(DumpRequest(name, 4, blocking=False)))


def test_a_duplicated_event_is_refused_by_its_position(binlog_corpus: Corpus) -> None:
    """A whole valid event copied elsewhere passes its checksum; its header's position gives it away."""
    name = binlog_corpus.crc_name
    events = binlog_corpus.events(name)
    rows = next((o, r) for o, r in events if r[4] == 23)  # a WRITE_ROWS_EVENT_V1
    data = binlog_corpus.files[name]
    at = events[-1][0]
    changed = data[:at] + rows[1] + data[at:]
    delivered, error = read_files(changed, name)
    assert isinstance(error, ParseError) and f"{name}:{at}" in str(error)
    assert delivered == original(binlog_corpus, name)[: len(delivered)]
