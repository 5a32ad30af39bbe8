"""One exception hierarchy for everything pycanal raises on purpose.

Every message says what was wrong and, where there is one, what to do about it. Messages never contain
credentials: code that formats a message from a config uses its redacted forms.
"""

from __future__ import annotations


class CanalError(Exception):
    """Root of every error pycanal raises on purpose."""


class MissingExtraError(CanalError, ImportError):
    """A feature needs a package of an optional extra that is not installed; the message names the extra to install
    (``pip install 'pycanal[query]'``), ``extra`` holds its name."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


def require_extra(module: str, extra: str, what: str) -> None:
    """:class:`MissingExtraError` unless ``module`` can be imported: ``what`` needs it, from the extra ``extra``."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"{what} needs {module}: pip install 'pycanal[{extra}]'", extra=extra) from None


class ConfigError(CanalError, ValueError):
    """A configuration value is missing, malformed or inconsistent. Nothing was started or changed."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class SecretError(ConfigError):
    """A setting that names a secret (``KEY.env``: an environment variable; ``KEY.file``: a file) cannot be read
    where it is used (the variable is unset or empty, the file missing, unreadable, empty or not text), names a
    setting that holds no secret, or gives a secret twice. The message names the setting and the variable or the
    file, never the secret (:mod:`canal.secrets`)."""


class StorageLocationError(ConfigError):
    """A location (a mirror's root, a spool directory) names storage pycanal cannot use: a URI of an unknown scheme,
    an object store for a mirror's root (only local paths and ``file://`` URIs there, so far), or object-store
    options the store does not take (the keys are named, never their values)."""


class FilterError(ConfigError):
    """A table or field filter expression (canal's regex syntax) does not compile."""


class PositionError(CanalError, ValueError):
    """A binlog position or its JSON form is malformed."""


class ParseError(CanalError):
    """The binlog could not be read or decoded."""


class SqlError(ParseError, ValueError):
    """A statement the schema must follow (CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE, indexes, databases) cannot be
    read. ``offset`` is where in the statement reading stopped."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class SchemaError(ParseError):
    """A table's schema cannot be known exactly: a DDL statement that does not apply to the schema history (an unknown
    table or column, a type that is not MySQL's), or a table map that does not match the history (its column count or
    types). ``table`` (``db.table``) and ``position`` (``file:offset``) name where, when known."""

    def __init__(self, message: str, *, table: str | None = None, position: str | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.position = position


class ColumnTypeError(SchemaError):
    """A column whose binlog type no decoder of pycanal reads (a type code no server version known here writes, or
    the pre-5.0 DECIMAL): there is no value ``SELECT`` shows to give. ``column`` is ``db.table.column``,
    ``column_type`` the type as the binlog names it. Its table's rows stop a destination that captures the table
    (nothing of them is handed out); one that filters the table out goes on."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        position: str | None = None,
        column: str | None = None,
        column_type: str | None = None,
    ) -> None:
        super().__init__(message, table=table, position=position)
        self.column = column
        self.column_type = column_type


class EncryptedBinlogError(ParseError):
    """A binlog file read from disk is encrypted (MariaDB ``encrypt_binlog=ON``): the events after its
    ``START_ENCRYPTION_EVENT`` are ciphertext that only the server holding the key can read. Not retried: read the
    binlog through the server (a ``MysqlBinlogSource``, which gets the events decrypted), or save decrypted copies
    with ``mariadb-binlog --read-from-remote-server --raw``. ``key_version`` is the encryption key's version the file
    names (never the key)."""

    def __init__(self, message: str, *, key_version: int | None = None) -> None:
        super().__init__(message)
        self.key_version = key_version


class UnmodeledStatementError(ParseError):
    """A statement on a captured table that pycanal neither follows nor knows to change nothing (the "stop" class
    of docs/concepts/fail-closed.md): a partition dropped or exchanged, a table renamed onto a captured name, DML
    logged as a statement, text the SQL reader cannot read in full, ... The destination stops before anything of
    it is handed off: its cursor stays before the statement.

    ``statement`` is its text, shortened and with every string literal left out (no password a statement holds is
    ever shown); ``shape`` the statement kind, as the contract page names it; ``tables`` the captured tables it
    touches (``db.table``; empty when it does not say which); ``position`` where it is (``file:offset``)."""

    def __init__(
        self, message: str, *, statement: str, shape: str, tables: tuple[str, ...], position: str | None
    ) -> None:
        super().__init__(message)
        self.statement = statement
        self.shape = shape
        self.tables = tables
        self.position = position


class SourceError(ParseError):
    """The binlog source (server, files, fake) failed or refused a request."""

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class SourceUnreachableError(SourceError):
    """The MySQL/MariaDB server could not be reached or refused the login. Retried with backoff (a server restarting
    refuses connections for a while), except for its subclasses :class:`SourceAccessDeniedError`,
    :class:`SourceHostUnknownError` and :class:`TlsError`, which no retry fixes."""


class SourceAccessDeniedError(SourceUnreachableError):
    """The server refused the login: a wrong user or password (MySQL errno 1044, 1045, 1698), an account locked,
    blocked after too many failed logins or with an expired password, or a connection aborted by the server's
    ``init_connect``. Not retried: retrying a wrong password changes nothing, and on a server with
    ``max_password_errors`` (MariaDB) or ``FAILED_LOGIN_ATTEMPTS`` (MySQL) it locks the account for everyone. A
    password rotated while a destination runs reaches it here at its next reconnect: restart it with the new one."""


class SourceHostUnknownError(SourceUnreachableError):
    """The server's host name does not resolve (DNS answers that no such name exists). Not retried before the
    destination's first connection to it: the address is wrong. A name that stops resolving after the destination
    was connected (a DNS record removed while its server restarts) is retried like any network error, and so is a
    temporary failure of name resolution."""


class TlsError(SourceUnreachableError):
    """A connection to the server could not be secured as configured: the server offers no TLS although the mode
    requires it, the TLS handshake failed, or the server's certificate did not verify (untrusted CA, wrong host name).
    Nothing was sent to the server after the failure; the password never travels over an unverified channel that the
    mode forbids. Not retried: the TLS settings or the server's must change (a connection cut inside the handshake
    is a plain :class:`SourceUnreachableError`, retried)."""


class BinlogPurgedError(SourceError):
    """The requested binlog position no longer exists on the server (MySQL errno 1236)."""


class UnknownBinlogPositionError(BinlogPurgedError):
    """A start position the server never had: its binlog file is newer than the server's newest, or has a name
    the server's files do not have (a position from another server, or one set by hand), or its offset lies past the
    end of its file. Not a purge: ``reset_on_purge`` does not skip to the server's current position over it. Set a
    position among the server's files (``SHOW BINARY LOGS``; ``canal position set`` checks it)."""


class XAPrepareLostError(BinlogPurgedError):
    """An ``XA COMMIT`` whose ``XA PREPARE`` (and so its rows) lies before the stream's start and is no longer in any
    binlog file on the server: the rows it made visible cannot be handed out. Raised before anything of the commit
    is handed off; not retried."""


class RolledBackHandOffError(ParseError):
    """A transaction ended in ``ROLLBACK`` after part of it was handed off: it held more than ``transaction_size``
    entries on a server that does not flag such a transaction ahead (MySQL; MariaDB's GTID event does), so rows that
    never happened may have reached the consumer. Not retried: raise ``transaction_size`` above the transaction's
    size and start again from before it."""


class ReplicaIdConflictError(SourceError):
    """Another replica is connected to the master with this dump's replica id (``server_id``), so the server ended
    one of the two dumps (MariaDB errno 4052, MySQL 1236 "A slave with the same server_uuid/server_id ..."), or two
    destinations of this process set the same ``slave_id`` for one master (``certain``). ``replica_id`` is the id.
    The fix is a ``slave_id`` of its own per destination (canal.instance.mysql.slaveId), or none: pycanal then derives
    one (:mod:`canal.parse.mysql.replica_ids`)."""

    def __init__(self, message: str, *, replica_id: int, errno: int | None = None, certain: bool = False) -> None:
        super().__init__(message, errno=errno)
        self.replica_id = replica_id
        self.certain = certain


class ServerNotReadyError(SourceError):
    """The server is reachable but not set up for capture: no binary log, ``binlog_format`` not ROW,
    ``binlog_row_image`` not FULL, or a missing grant (:class:`MissingPrivilegeError`). The message says which
    ``SET GLOBAL`` / my.cnf line or ``GRANT`` fixes it (``canal check`` lists them all). Not retried: a destination
    stops on it, at its first connection or at a reconnect after the server's settings changed."""


class MissingPrivilegeError(ServerNotReadyError):
    """The capture user lacks a privilege a request needs (MySQL errno 1227, 1142, 1143, or 1045 when the binlog
    dump registers as a replica): REPLICATION SLAVE for the dump, BINLOG MONITOR (MariaDB 10.5+) or REPLICATION
    CLIENT for ``SHOW MASTER STATUS`` / ``SHOW BINARY LOGS``, SELECT for table metadata and snapshots. ``privilege``
    names what the server asked for. A grant revoked while a destination runs reaches it here at its next
    reconnect."""

    def __init__(self, message: str, *, privilege: str, errno: int | None = None) -> None:
        super().__init__(message, errno=errno)
        self.privilege = privilege


class StoreError(CanalError):
    """The event store refused an operation (closed, wrong sequence)."""


class StoreClosedError(StoreError):
    """The store was stopped while a caller waited on it."""


class StoreSequenceError(StoreError, ValueError):
    """An ack named a sequence the store cannot ack (beyond what was handed out, or already acked). Nothing changed."""


class StoreBatchTooLargeError(StoreError, ValueError):
    """A batch holds more entries than the store has slots, so it could never be put. Nothing changed."""


class MetaError(CanalError):
    """A cursor, subscription or batch mark could not be read, written or matched."""


class UnknownBatchError(MetaError, KeyError):
    """A batch id that is not outstanding for this client (never handed out, or already acked/rolled back)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class BatchOrderError(MetaError):
    """A batch id acked out of order: batches must be acked in the order they were handed out."""


class FencedWriteError(MetaError):
    """A cursor write was rejected because this process no longer owns the destination."""


class SnapshotError(CanalError):
    """A snapshot cannot start (another is unfinished) or cannot go on."""


class HealError(SnapshotError):
    """A heal could not read its tables again (one is not on the server though the stream still has it, a read that
    failed): the destination stops with it, for a copy of those tables can no longer be made exact. Its cursor keeps
    the heal unfinished: a start after the cause is fixed reads them again."""


class ServerError(CanalError):
    """The embedded server refused a call."""


class UnknownDestinationError(ServerError, KeyError):
    """No destination of that name is configured or started."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotSubscribedError(ServerError):
    """The client identity has not subscribed to the destination."""


class NotRunningError(ServerError):
    """The destination is not running in this process (stopped, standing by, or lost ZooKeeper)."""


class OwnershipLostError(NotRunningError):
    """This process could not prove it still owns the destination (another process was activated since, or
    ZooKeeper could not confirm it): the call was not applied -- nothing handed out, no cursor written."""


class HAError(CanalError):
    """ZooKeeper coordination failed."""


class ServiceError(CanalError):
    """A private test/demo service (MariaDB, ZooKeeper) could not be started."""
