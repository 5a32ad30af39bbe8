"""What the binlog event decoder does with each event type, by type code: the rows events it decodes
(:data:`ROWS_KINDS`: kind, change type, v2 layout; :data:`COMPRESSED_ROWS`: MariaDB's zlib-compressed ones), the
types it ignores on purpose (:data:`IGNORED`, each with the reason: their position still advances the cursor), the
types that stop the dump (:data:`REFUSED`, each with the reason it names), and the heartbeats (:data:`HEARTBEATS`).
A type in none of these and not handled by :class:`~canal.parse.mysql.binlog.EventDecoder` stops the dump too, unless
the server flagged it ignorable.

MariaDB's ``START_ENCRYPTION_EVENT`` (``encrypt_binlog=ON``) is the decoder's to judge: a server decrypts the events
after it and flags it ignorable in the dump (so does a file saved from a dump by ``mariadb-binlog --raw``), and it is
read (:class:`~canal.parse.events.StartEncryptionEvent`); in a file copied from the server's disk it is unflagged and
the events after it are ciphertext: :class:`~canal.errors.EncryptedBinlogError`.
"""

from __future__ import annotations

from typing import Final

from canal.parse.mysql import packets as P
from canal.protocol import EventType

__all__ = ["COMPRESSED_ROWS", "HEARTBEATS", "IGNORED", "REFUSED", "ROWS_KINDS"]

# Rows events: the decoder's kind (write, update, delete, partial JSON update), the change type, the v2 layout
ROWS_KINDS: Final[dict[int, tuple[str, EventType, bool]]] = {
    P.WRITE_ROWS_EVENT_V1: ("w", EventType.INSERT, False),
    P.UPDATE_ROWS_EVENT_V1: ("u", EventType.UPDATE, False),
    P.DELETE_ROWS_EVENT_V1: ("d", EventType.DELETE, False),
    P.WRITE_ROWS_EVENT_V2: ("w", EventType.INSERT, True),
    P.UPDATE_ROWS_EVENT_V2: ("u", EventType.UPDATE, True),
    P.DELETE_ROWS_EVENT_V2: ("d", EventType.DELETE, True),
    # MySQL binlog_row_value_options=PARTIAL_JSON: an update whose after image may hold JSON diffs
    P.PARTIAL_UPDATE_ROWS_EVENT: ("p", EventType.UPDATE, True),
    # MariaDB log_bin_compress=ON: the row images are zlib-compressed
    P.WRITE_ROWS_COMPRESSED_EVENT_V1: ("w", EventType.INSERT, False),
    P.UPDATE_ROWS_COMPRESSED_EVENT_V1: ("u", EventType.UPDATE, False),
    P.DELETE_ROWS_COMPRESSED_EVENT_V1: ("d", EventType.DELETE, False),
    P.WRITE_ROWS_COMPRESSED_EVENT: ("w", EventType.INSERT, True),
    P.UPDATE_ROWS_COMPRESSED_EVENT: ("u", EventType.UPDATE, True),
    P.DELETE_ROWS_COMPRESSED_EVENT: ("d", EventType.DELETE, True),
}
COMPRESSED_ROWS: Final = frozenset(range(P.WRITE_ROWS_COMPRESSED_EVENT_V1, P.DELETE_ROWS_COMPRESSED_EVENT + 1))

# Event types that carry nothing pycanal delivers, ignored on purpose (their position still advances the cursor).
IGNORED: Final[dict[int, str]] = {
    P.START_EVENT_V3: "the v3 file header (pre-5.0 servers)",
    P.STOP_EVENT: "the server stopped; the next file follows",
    P.INTVAR_EVENT: "AUTO_INCREMENT context of a statement-based query (rows arrive as rows events)",
    P.RAND_EVENT: "RAND() seed of a statement-based query",
    P.USER_VAR_EVENT: "user variable of a statement-based query",
    P.SLAVE_EVENT: "never written by any server",
    P.IGNORABLE_LOG_EVENT: "flagged ignorable by the server",
    P.ROWS_QUERY_LOG_EVENT: "the statement text beside its rows (binlog_rows_query_log_events)",
    P.ANONYMOUS_GTID_LOG_EVENT: "a transaction without GTID (gtid_mode=OFF): no GTID to record",
    P.TRANSACTION_CONTEXT_EVENT: "group replication certification data",
    P.VIEW_CHANGE_EVENT: "group replication membership change",
    # XA END (a query event) closes the transaction's entries; the prepare marker carries no rows
    P.XA_PREPARE_LOG_EVENT: "the XA PREPARE marker after XA END",
    P.ANNOTATE_ROWS_EVENT: "the statement text beside its rows (MariaDB binlog_annotate_row_events)",
    P.BINLOG_CHECKPOINT_EVENT: "MariaDB crash-recovery checkpoint",
    # a statement-format LOAD DATA: the file's bytes, then the statement (EXECUTE_LOAD_QUERY_EVENT, read as a query
    # event), which the capture judges as it judges DML logged as a statement (canal.parse.unmodeled)
    P.BEGIN_LOAD_QUERY_EVENT: "the first bytes of a statement-format LOAD DATA's file",
    P.APPEND_BLOCK_EVENT: "more bytes of a statement-format LOAD DATA's file",
    P.DELETE_FILE_EVENT: "a statement-format LOAD DATA that failed: its file is dropped",
}

# Event types that carry changes pycanal cannot decode: the dump stops there, naming the event.
REFUSED: Final[dict[int, str]] = {
    P.INCIDENT_EVENT: "the server logged an incident: changes may be missing from the binlog at this point (a "
    "replica stops here too); check the source, then restart the capture after this position",
    **dict.fromkeys(
        (P.LOAD_EVENT, P.CREATE_FILE_EVENT, P.EXEC_LOAD_EVENT, P.NEW_LOAD_EVENT),
        "statement-based LOAD DATA events of servers before 5.0.3 carry rows pycanal cannot decode; use "
        "binlog_format=ROW",
    ),
    **dict.fromkeys(
        (P.PRE_GA_WRITE_ROWS_EVENT, P.PRE_GA_UPDATE_ROWS_EVENT, P.PRE_GA_DELETE_ROWS_EVENT),
        "pre-GA rows events (MySQL 5.1.0-5.1.15) are not supported",
    ),
}

HEARTBEATS: Final = frozenset({P.HEARTBEAT_LOG_EVENT, P.HEARTBEAT_LOG_EVENT_V2})
