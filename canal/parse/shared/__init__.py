"""One binlog read for many destinations: the destinations of one master in one process share a reader.

Every destination used to dump and decode the whole binlog itself, then filter it: N destinations of one server cost
N dumps on the server and N decodes of every event here. A :class:`~canal.parse.shared.reader.SharedReader` dumps
the server once for all of them, decodes the rows of only the tables some destination captures, and routes each
event to the destinations that need it, each through its own queue into its own parser thread. Everything after the
queue is the destination's own, as before: its converter, transaction buffer, snapshot merge, schema history, store,
cursor, acks and HA. Sharing never changes what a destination receives nor how its binlog is read.

The package's modules import one way, each only those above it here:

* :mod:`~canal.parse.shared.groups` -- where a stream rests between groups of events, and where a dump left events out;
* :mod:`~canal.parse.shared.routes` -- which destinations capture a table;
* :mod:`~canal.parse.shared.member` -- what a reader knows of a destination, and what its own dump would be;
* :mod:`~canal.parse.shared.queue` -- a destination's queue, read by its parser thread or on the reader's;
* :mod:`~canal.parse.shared.reader` -- the reader and the process's readers (:data:`READERS`);
* :mod:`~canal.parse.shared.stream` -- a destination's dump: through a reader, or alone until it can join one.
* :mod:`~canal.parse.shared.sharing` -- a parser's sharing: the key its destination is registered under, its dump's
  stream.

**Who shares.** A destination shares when its config allows it (``InstanceConfig.share_reader``, on by default), its
source can say what a read of it is valid for (its ``share_key``), and another destination with the same key runs in
the process: a destination alone reads alone, as it always did. For a MySQL/MariaDB server the key holds everything
that decides what the connection is and how it reads (:attr:`MysqlBinlogSource.share_key
<canal.parse.mysql.source.MysqlBinlogSource.share_key>`): the address, the user and which password (a number the
process gives each, never the password), the TLS mode, CA, client certificate and key and TLS versions, the
charset and checksum verification; and whether rows are decoded with a schema history (:func:`share_key
<canal.parse.shared.stream.share_key>`). So a destination that requires TLS, or verifies the server, never reads
through a dump made with weaker settings, nor one of another login. A reader serves the key it was made for; a
destination that switches to its standby leaves it.

**Routing.** The reader follows the stream's groups of events (:mod:`~canal.parse.shared.groups`). An event outside
every group, and every group that is not plain (DDL, XA, savepoints, statements, rolled-back transactions), goes to
every destination. A plain transaction goes whole to each destination that captures one of its tables (or the table
of its snapshot watermarks), from its first event, however late in it that table's first row comes; the others get,
later, a :class:`~canal.parse.events.PassedEvent` naming it with its GTID, BEGIN and end -- at the next event they
do get, or within :data:`~canal.parse.shared.reader.FLUSH_S` -- from which their parser makes exactly the entries it
would have made of the whole transaction (:meth:`canal.parse.parser.EventParser`; empty transactions the sink keeps
included). A destination's entries are therefore the ones it would get reading alone; what differs is only when it
learns that nothing happened to its tables.

**Decoding.** A destination with a schema history decodes alone with it; a reader of such destinations decodes with
its own fork of the history of the destination that made it, which follows every statement the reader reads before
the next event is decoded, as a destination's history does alone. Each table map carries what that history held of
its table; before a destination takes the map of a table it captures, it compares that with its own history at that
very event, and leaves for reading alone where they differ (:mod:`~canal.parse.shared.member`): a history that names
or types a table otherwise never gets the reader's naming. A table map whose table the reader's history cannot name
gives its rows a ``schema_error``, and the destinations capturing the table read alone, where their own history
decides. Destinations without a history share readers that decode as they do (information_schema names unnamed
columns). The rows of a table no destination captures are not decoded (:attr:`DumpRequest.decode_table
<canal.parse.source.DumpRequest.decode_table>`), unless their statement maps one that is: a parent's rows tell a
destination capturing its child whether a foreign key's action reached it, as they do alone. Rows are decoded
column by column when any destination of the reader asks for that (:class:`~canal.parse.source.RowsForm`).

**Joining and leaving.** A destination joins at a point between groups. At its start: where the reader stands, or
where it stood -- the reader keeps its last :data:`~canal.parse.shared.reader.RING_EVENTS` events (and
:data:`~canal.parse.shared.reader.RING_BYTES` bytes of binlog) --, or up to
:data:`~canal.parse.shared.reader.AHEAD_BYTES` ahead of it in the same file (it waits there for the reader); otherwise
it reads alone, and after each event of its own dump looks whether the reader has reached (or still holds) that
point, and joins there. A point is one to join only where the reader's dump went on without a gap: a dump from a GTID
set leaves out the groups the set holds, and a destination that starts from a file position never joins before such
a gap, nor stays across one. A destination that starts from a GTID set joins a reader only after its own dump sent it
a group with nothing left out since, and leaves before any group its own dump would leave out
(:mod:`~canal.parse.shared.member`). With no reader running, a destination that starts while another with its key
runs makes one at its own start. A destination leaves when it stops (its connection and threads go, the reader's
stay for the others), when its source closes (a master/standby switch), when the reader cannot name a captured
table's rows as its own history does, and when it is slow: the reader never holds more than
:data:`~canal.parse.shared.reader.QUEUE_EVENTS` events for one destination, and waits at most
:data:`~canal.parse.shared.reader.SLOW_WAIT_S` for room before that destination leaves and reads alone from its last
handed-off position (it may join again :data:`~canal.parse.shared.reader.REJOIN_AFTER_S` later). A reader left alone
with one destination keeps it and waits for it, as its own dump would. A reader with no destination left ends. A
reader asks the server for heartbeats as often as the destinations of its key registered when it starts do (at least
every :data:`~canal.parse.shared.reader.HEARTBEAT_S`); a destination asking more often joins none that asks less
often, and each destination's watchdog counts the reader's connection dead by its own read timeout when the reader
received nothing for that long (:attr:`SharedStream.read_at <canal.parse.shared.stream.SharedStream.read_at>`).

**Errors.** An error of the reader's dump (a lost connection, a purged position, a refused event) ends it and is
raised in every destination's parser after the events before it, as its own dump would have raised it (a dump the
server ends, shutting down, ends each destination's stream, which its parser takes for a failed dump): each retries
or stops by its own policy, and comes back alone or to a new reader. A destination's own error (a typed stop, a
failed hand-off) ends only its subscription. A statement the reader's history cannot follow ends the reader, and
every destination reads alone past it, where its own history decides.

**Cost.** Per event the reader does the decoding once and a queue append per destination that gets the event (and
per table map, with a schema history, a copy that carries what the history held: each destination compares it with
its own once per table and state of its history). At the end of a group it takes the group through the parser's
steps itself, on its own thread, for each destination it gave the group to whose parser thread waits and whose store
has room (:mod:`~canal.parse.shared.queue`): no thread is woken for it. Other destinations' parsers are woken once
per group (at its end, or once :data:`~canal.parse.shared.queue.WAKE_EVENTS` wait). A plain transaction a
destination does not capture costs it nothing until its next delivery, where the run of them since the last is one
PassedEvent: a slice of the reader's list, the empty-transaction policy over it at once while all lie within its
interval, the position moved to the last, and in GTID mode one GTID set update per run of one source's consecutive
GTIDs -- a few steps per run, not per transaction.
"""

from canal.parse.shared.member import SharedMember, SharedReaderLeft
from canal.parse.shared.reader import READERS, SharedReader, SharedReaders
from canal.parse.shared.sharing import Sharing
from canal.parse.shared.stream import SharedStream, share_key

__all__ = [
    "READERS",
    "SharedMember",
    "SharedReader",
    "SharedReaderLeft",
    "SharedReaders",
    "SharedStream",
    "Sharing",
    "share_key",
]
