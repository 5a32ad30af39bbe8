"""The parser's failure policy: bounded, jittered reconnect backoff and purged-binlog detection.

canal sleeps a blind 10-20 s after any dump error and retries forever. Here each consecutive failure waits
``RetryConfig.backoff_s(n)`` (exponential, capped, jittered), ``max_attempts`` consecutive failures end the parser
with the last error, and any progress (entries handed off) resets the count. A purged binlog (errno 1236) repeated
``purge_threshold`` times at the same position becomes a :class:`~canal.errors.BinlogPurgedError` naming the position,
or -- with ``reset_on_purge`` -- a reset to the server's current position.

:func:`after_failure` decides for each failed dump of :class:`~canal.parse.parser.EventParser`: a backoff before the
next dump, a start elsewhere (:class:`Restart`), or the error raised -- what no retry fixes (:func:`is_permanent`, an
event the parser refuses, a fenced write, ...) stops the parser at once.
"""

from __future__ import annotations

import enum
import random
import time
from collections import deque
from collections.abc import Callable, Sequence

import attrs

from canal.config import MasterConfig, RetryConfig
from canal.errors import (
    BinlogPurgedError,
    ConfigError,
    FencedWriteError,
    HealError,
    ParseError,
    ReplicaIdConflictError,
    RolledBackHandOffError,
    ServerNotReadyError,
    SourceAccessDeniedError,
    SourceError,
    SourceHostUnknownError,
    StoreBatchTooLargeError,
    StoreClosedError,
    TlsError,
    UnknownBinlogPositionError,
    XAPrepareLostError,
)
from canal.log import DestinationAdapter
from canal.parse.convert import NeedTransactionBeginError
from canal.parse.source import BinlogSource
from canal.position import LogPosition, journal_number

PURGED_ERRNO = 1236
CONFLICTS_TO_STOP = 3
"""Replica-id clashes (:class:`~canal.errors.ReplicaIdConflictError`) within :data:`CONFLICT_WINDOW_S` that stop the
parser: one or two are retried, as the other dump may be this destination's own predecessor (a process handing the
destination over, or a dump of it the server has not seen closing) that is about to end."""
CONFLICT_WINDOW_S = 60.0
CONFLICT_BACKOFF_S = 1.0
"""At least this long before a dump that lost its replica id connects again: time for a predecessor to end."""


def is_permanent(exc: BaseException, *, connected_before: bool) -> bool:
    """Whether a source's failure is one no retry fixes, so the parser stops on it at once (with the default
    ``RetryConfig`` everything else is retried forever):

    * a login the server refuses (:class:`~canal.errors.SourceAccessDeniedError`): the configured password does
      not change while the process runs, and retrying a wrong one can lock the account (MariaDB's
      ``max_password_errors``, MySQL's ``FAILED_LOGIN_ATTEMPTS``) -- a password rotated on the server while the
      destination runs stops it at its next reconnect;
    * a server not set up for capture (:class:`~canal.errors.ServerNotReadyError`: no binary log, ``binlog_format``
      not ROW, ``binlog_row_image`` not FULL, and :class:`~canal.errors.MissingPrivilegeError`): a DBA must change
      it. A grant revoked or ``binlog_format`` changed with ``SET GLOBAL`` while the destination runs leaves the
      open dump going (the server checks them for new sessions and requests; statement-logged DML on a captured
      table heals or stops as the heal policy says), and stops the destination at its next reconnect;
    * a connection that cannot be secured as configured (:class:`~canal.errors.TlsError`: a certificate that does
      not verify, a server offering no TLS where the mode requires it or requiring it where the mode is DISABLED, no
      TLS version or cipher in common): the TLS settings or the server's must change. A connection cut during the
      handshake is a :class:`~canal.errors.SourceUnreachableError`, retried; a certificate rotated on the server to
      one the settings do not trust stops the destination at its next reconnect;
    * a host name that does not resolve (:class:`~canal.errors.SourceHostUnknownError`) before ``connected_before``:
      the address is wrong. Once the parser has connected, a name that stops resolving (a Kubernetes headless
      service while its pod restarts) is retried like a refused connection.
    """
    if isinstance(exc, ServerNotReadyError | SourceAccessDeniedError | TlsError):
        return True
    return isinstance(exc, SourceHostUnknownError) and not connected_before


def is_purged(exc: BaseException) -> bool:
    """A purged/unknown binlog position: BinlogPurgedError, or a SourceError with MySQL errno 1236."""
    return isinstance(exc, BinlogPurgedError) or (isinstance(exc, SourceError) and exc.errno == PURGED_ERRNO)


def purged_error(where: str, address: str, exc: BaseException, *, switched: bool) -> BinlogPurgedError:
    """The stop for a position the server no longer has, past the purge threshold (``switched``: in GTID mode
    after a switch to the standby)."""
    if switched:
        # after a switch, a GTID the new server does not have was written on the old master and never replicated: no
        # newer start position recovers it
        return BinlogPurgedError(
            f"binlog position {where} is not on {address}, the server the parser switched to (errno {PURGED_ERRNO}: "
            f"{exc}): this server purged it, or a transaction its GTIDs name was written on the old master and never "
            "reached this server -- lost in the failover, after it was handed to consumers. What they applied of it "
            "is not on this server: rebuild them from a snapshot of it",
            errno=PURGED_ERRNO,
        )
    return BinlogPurgedError(
        f"binlog position {where} is no longer on {address} (purged, errno {PURGED_ERRNO}: {exc}); set a newer start "
        "position, or enable reset_on_purge to restart from the current position",
        errno=PURGED_ERRNO,
    )


def position_problem(files: Sequence[tuple[str, int]], journal: str, offset: int | None) -> str | None:
    """What is wrong with ``journal:offset`` on a server whose binlog files are ``files`` (``SHOW BINARY LOGS``:
    name and size, oldest first), when it is not a purge: a file newer than the newest or of a name the server does
    not write, or an offset past the file's end. None when the position is there, or purged (a file older than the
    oldest), or when there are no files to tell."""
    if not files:
        return None
    names = {name: size for name, size in files}
    oldest, newest = files[0][0], files[-1][0]
    if journal in names:
        size = names[journal]
        if offset is not None and offset > size:
            return f"offset {offset} is past the end of {journal} ({size} bytes)"
        return None
    base, number = journal.rpartition(".")[0], journal_number(journal)
    if base == oldest.rpartition(".")[0] and 0 <= number < journal_number(oldest):
        return None  # purged
    if base == newest.rpartition(".")[0] and number > journal_number(newest):
        return f"{journal} is newer than its newest binlog file, {newest}"
    return f"it has no {journal} (its binlog files: {oldest} .. {newest})"


def unknown_position_error(where: str, address: str, problem: str) -> UnknownBinlogPositionError:
    return UnknownBinlogPositionError(
        f"binlog position {where} was never on {address}: {problem}. It is not a purged position (a position from "
        "another server, or set by hand?): set a start position the server has (SHOW BINARY LOGS)",
        errno=PURGED_ERRNO,
    )


@attrs.define
class RetryState:
    """Consecutive-failure bookkeeping for one parser."""

    config: RetryConfig
    rng: random.Random = attrs.field(factory=random.Random)
    failures: int = 0  # consecutive failures since the last progress
    purged: int = 0  # consecutive purge errors at ``purged_at``
    purged_at: str | None = None

    def progress(self) -> None:
        """Entries were handed off: the connection works, start counting afresh."""
        self.failures = 0
        self.purged = 0
        self.purged_at = None

    def failure(self) -> float | None:
        """Count a failure; the delay before the next attempt, or None when ``max_attempts`` is exhausted."""
        self.failures += 1
        limit = self.config.max_attempts
        if limit is not None and self.failures >= limit:
            return None
        return self.config.backoff_s(self.failures, self.rng)

    def purge(self, where: str) -> bool:
        """Count a purge error at ``where``; True once it happened ``purge_threshold`` times in a row there."""
        if where != self.purged_at:
            self.purged_at = where
            self.purged = 0
        self.purged += 1
        return self.purged >= self.config.purge_threshold

    def clear_purge(self) -> None:
        self.purged = 0
        self.purged_at = None


@attrs.define
class ConflictWindow:
    """The times of the replica-id clashes of the last :data:`CONFLICT_WINDOW_S` seconds."""

    window_s: float = CONFLICT_WINDOW_S
    times: deque[float] = attrs.field(factory=deque)

    def note(self, now: float) -> int:
        """Count a clash at ``now`` (monotonic seconds); how many fell within the window."""
        times = self.times
        times.append(now)
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return len(times)


class Restart(enum.Enum):
    """Where the next dump starts after a failure that is not backed off (:func:`after_failure`)."""

    AT_BEGIN = "the BEGIN of the transaction the dump started inside"
    AT_MASTER = "the server's position now (reset_on_purge: the changes in between are lost)"


def after_failure(
    exc: Exception,
    state: RetryState,
    conflicts: ConflictWindow,
    *,
    connected_before: bool,
    address: str,
    switched: bool,
    resume_at: Callable[[], str],
    not_on_server: Callable[[], str | None],
    log: DestinationAdapter,
) -> float | Restart:
    """What a failed dump of the server at ``address`` leads to: the seconds to back off before the next dump, a
    :class:`Restart` elsewhere at once, or ``exc`` (or the typed error it means) raised when no retry fixes it.
    ``state`` counts the failures, ``conflicts`` the replica-id clashes; ``connected_before``: a dump of the parser
    opened its source once (a name resolved then); ``switched``: the dump switched servers in GTID mode (a purge
    then names that); ``resume_at`` describes the position the dumps ask for (:func:`describe_resume`),
    ``not_on_server`` says why it is not on the server when that is not a purge (:func:`missing_position`)."""
    config = state.config
    if isinstance(exc, NeedTransactionBeginError):
        log.warning("%s; moving the start back to its transaction", exc)
        return Restart.AT_BEGIN
    if isinstance(
        exc,
        FencedWriteError
        | ConfigError
        | StoreBatchTooLargeError
        | XAPrepareLostError
        | RolledBackHandOffError
        | HealError,
    ) or (isinstance(exc, ParseError) and not isinstance(exc, SourceError)):
        # a fenced write, a bad setting (e.g. an unreadable CA file), a hand-off the store can never hold, an XA
        # PREPARE purged from the server, a rollback of what went out or a heal that could not read its tables
        # (canal.snapshot.merge.SnapshotMerge.fail) does not heal by retrying; nor does an
        # event the parser refuses (bytes it cannot decode, a schema the history cannot know, a statement the
        # capture cannot follow, an encrypted file on disk): the same bytes come again. Only the source's own
        # failures are retried.
        raise exc
    if is_permanent(exc, connected_before=connected_before):
        # a refused login, a missing grant, a server not set up for capture, an address that names no host:
        # the same answer comes again, and retrying a wrong password can lock the account
        raise exc
    if isinstance(exc, ReplicaIdConflictError):
        clashes = conflicts.note(time.monotonic())
        if exc.certain or clashes >= CONFLICTS_TO_STOP:
            raise exc
        wait = max(CONFLICT_BACKOFF_S, config.backoff_s(clashes, state.rng))
        log.warning("%s (clash %d of %d allowed); retrying in %.2f s", exc, clashes, CONFLICTS_TO_STOP, wait)
        return wait
    if isinstance(exc, StoreClosedError):
        # the owner stopped the store before stopping the parser: wait for stop() without counting a failure
        log.debug("the store was closed under the parser; waiting for stop")
        return config.max_backoff_s
    if is_purged(exc):
        where = resume_at()
        if state.purge(where):
            problem = not_on_server()
            if problem is not None:  # never on the server: no reset_on_purge skips over it
                raise unknown_position_error(where, address, problem) from exc
            if config.reset_on_purge:
                log.error(
                    "BINLOG PURGED: position %s is no longer on %s (errno %d); resetting to the current master "
                    "position -- the changes in between are LOST",
                    where,
                    address,
                    PURGED_ERRNO,
                )
                state.clear_purge()
                return Restart.AT_MASTER
            raise purged_error(where, address, exc, switched=switched) from exc
        purge_delay = config.backoff_s(state.purged, state.rng)
        log.warning(
            "binlog position %s is not on %s (%s); asking again in %.2f s (attempt %d of %d)",
            where,
            address,
            exc,
            purge_delay,
            state.purged,
            config.purge_threshold,
        )
        return purge_delay
    delay = state.failure()
    if delay is None:
        raise exc
    log.warning(
        "dump from %s failed (%s: %s); retry %d in %.2f s",
        address,
        type(exc).__name__,
        exc,
        state.failures,
        delay,
    )
    return delay


def describe_resume(resume: LogPosition | None, active: MasterConfig) -> str:
    """The position the dumps ask for, as a purge's messages name it: ``resume``, else ``active``'s configured start."""
    if resume is None:
        if active.journal_name:
            return f"{active.journal_name}:{active.position or 4} (the configured start)"
        if active.gtid:
            return f"GTID set {active.gtid} (the configured start)"
        return "the configured start"
    return str(resume.position) + (f" +{resume.rows_done} rows" if resume.rows_done else "")


def missing_position(
    source_factory: Callable[[MasterConfig], BinlogSource],
    resume: LogPosition | None,
    active: MasterConfig,
    gtid_mode: bool,
    log: DestinationAdapter,
) -> str | None:
    """Why the position the dumps ask for is not on the server when that is not a purge (a file it never had,
    an offset past a file's end: :func:`position_problem`), read from its binlog files on a
    connection of its own (``resume``, else ``active``'s configured start; none in GTID mode); None when it is purged,
    or cannot be told."""
    journal, offset = (
        (resume.position.journal_name, resume.position.position)
        if resume is not None
        else (active.journal_name, active.position)
    )
    if not journal or gtid_mode:
        return None
    source = source_factory(active)
    try:
        source.open()
        files = source.binlog_files()
    except Exception as exc:  # the server cannot be asked now: say purged, as the server did
        log.debug("cannot list the binlog files of %s: %s", active.address, exc)
        return None
    finally:
        try:
            source.close()
        except Exception as exc:
            log.debug("closing the source failed: %s", exc)
    return position_problem([(f.name, f.size) for f in files], journal, offset)
