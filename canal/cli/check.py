"""``canal check``: is a MySQL/MariaDB server ready for capture? One OK/FAIL line per check, with the fix."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pymysql  # type: ignore[import-untyped]

from canal.cli.common import CliError, add_source_arguments, load_instance_config
from canal.errors import SourceError, SourceUnreachableError, TlsError
from canal.parse.mysql.connect import EXPIRED_PASSWORD, TlsState, open_connection, tls_state
from canal.sql import Grant, read_statements


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="check a server is ready for capture",
        description="Check that a MySQL/MariaDB server is set up for binlog capture: binlog enabled, "
        "binlog_format=ROW, binlog_row_image=FULL (binlog_row_metadata is reported: below FULL, rows are named by "
        "the schema history), "
        "binlog compression off, server_id set, and the user's grants (REPLICATION SLAVE, REPLICATION CLIENT / "
        "BINLOG MONITOR, SELECT); it also reports whether the connection uses TLS, with its version and cipher, "
        "and how a snapshot of existing rows is placed in the binlog (MariaDB's consistent snapshot position, or "
        "the configured pycanal.snapshot.watermark.table). "
        "Prints one line per check and the statement that fixes a failed one. "
        "Exit status 0 only when every check passes.",
    )
    add_source_arguments(p, destination=False)
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S", help="seconds (default 10)")
    p.set_defaults(run=run)


@attrs.frozen
class Check:
    name: str
    status: str  # OK, FAIL, WARN or SKIP
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4} {self.name}: {self.detail}"
        return f"{text} -- fix: {self.fix}" if self.fix and self.status in ("FAIL", "WARN") else text


@attrs.frozen
class ServerFacts:
    """What the checks look at, read once from the server."""

    version: str
    variables: Mapping[str, str]
    grants: Sequence[str]
    current_user: str
    snapshot_position: bool = False  # the server reports a consistent snapshot's binlog position (MariaDB)
    # accounts (as far as this user may see them) that may change their session's binlog_format
    statement_loggers: Sequence[str] = ()

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.version.lower()

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        match = re.match(r"(\d+)\.(\d+)\.(\d+)", self.version)
        return (int(match[1]), int(match[2]), int(match[3])) if match else (0, 0, 0)


_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "server_id",
    "log_bin_compress",
    "binlog_transaction_compression",
    "binlog_row_value_options",
)


def read_facts(conn: Any) -> ServerFacts:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), CURRENT_USER()")
        version, current_user = cur.fetchone()
        names = ", ".join(f"'{n}'" for n in _VARIABLES)
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        variables = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        cur.execute("SHOW GRANTS")
        grants = [str(row[0]) for row in cur.fetchall()]
        cur.execute("SHOW GLOBAL STATUS LIKE 'binlog_snapshot_file'")
        snapshot_position = bool(cur.fetchall())
        cur.execute(
            "SELECT DISTINCT GRANTEE FROM information_schema.USER_PRIVILEGES "
            "WHERE PRIVILEGE_TYPE IN ('SUPER', 'BINLOG ADMIN') ORDER BY GRANTEE"
        )
        loggers = [str(row[0]) for row in cur.fetchall()]
    return ServerFacts(str(version), variables, grants, str(current_user), snapshot_position, loggers)


def _account(current_user: str) -> str:
    user, _, host = current_user.rpartition("@")
    return f"'{user}'@'{host}'" if user else f"'{current_user}'"


def _setting(name: str, want: str, facts: ServerFacts, *, quote: bool = True) -> Check:
    have = facts.variables.get(name)
    if have is None:
        return Check(name, "FAIL", "the server does not report it", f"set {name} = {want} in my.cnf [mysqld]")
    if have.upper() == want.upper():
        return Check(name, "OK", have)
    value = f"'{want}'" if quote else want
    return Check(
        name,
        "FAIL",
        f"{have}, must be {want}",
        f"SET GLOBAL {name} = {value}; and in my.cnf [mysqld]: {name} = {want} (new connections see it; restart "
        "capture)",
    )


def _global_privileges(grants: Sequence[str]) -> tuple[set[str], set[str]]:
    """(privileges ON *.*, 'db' names with SELECT); ALL PRIVILEGES expands to everything."""
    on_all: set[str] = set()
    select_dbs: set[str] = set()
    for text in grants:
        grant = next(iter(read_statements(text, strict=False)), None)
        if not isinstance(grant, Grant):
            continue
        privileges = set(grant.privileges)
        target = grant.target
        if target == "*.*":
            on_all |= privileges
        elif "SELECT" in privileges or "ALL PRIVILEGES" in privileges:
            select_dbs.add(target)
    return on_all, select_dbs


def check_grants(facts: ServerFacts) -> list[Check]:
    on_all, select_dbs = _global_privileges(facts.grants)
    everything = "ALL PRIVILEGES" in on_all or "ALL" in on_all
    account = _account(facts.current_user)
    major, minor, _patch = facts.version_tuple
    monitor_name = "BINLOG MONITOR" if facts.is_mariadb and (major, minor) >= (10, 5) else "REPLICATION CLIENT"
    needed = [
        ("REPLICATION SLAVE", {"REPLICATION SLAVE", "REPLICATION REPLICA"}, "to request the binlog dump"),
        (monitor_name, {"REPLICATION CLIENT", "BINLOG MONITOR"}, "for SHOW MASTER STATUS / SHOW BINARY LOGS"),
    ]
    out = []
    for name, accepted, why in needed:
        if everything or on_all & accepted:
            out.append(Check(f"grant {name}", "OK", f"{account} has it"))
        else:
            fix = f"GRANT {name} ON *.* TO {account};"
            out.append(Check(f"grant {name}", "FAIL", f"{account} lacks it ({why})", fix))
    if everything or "SELECT" in on_all:
        out.append(Check("grant SELECT", "OK", f"{account} has it on *.*"))
    elif select_dbs:
        shown = ", ".join(sorted(select_dbs))
        out.append(Check("grant SELECT", "OK", f"{account} has it on {shown} only (enough for those tables)"))
    else:
        out.append(
            Check("grant SELECT", "FAIL", f"{account} lacks it (table metadata)", f"GRANT SELECT ON *.* TO {account};")
        )
    return out


def snapshot_check(facts: ServerFacts, watermark_table: str | None) -> Check:
    """How a snapshot would place its chunks: at MariaDB's consistent snapshot position (read-only), or between
    watermarks written to the configured table (its layout and grant are checked when a snapshot starts); SKIP on a
    server without that position and no table (capture works; snapshots of existing rows would be refused)."""
    if watermark_table is not None:
        return Check("snapshot", "OK", f"chunks placed by watermarks in {watermark_table} (needs INSERT and UPDATE)")
    if facts.snapshot_position:
        return Check("snapshot", "OK", "chunks placed at the consistent snapshot's binlog position (no writes)")
    return Check(
        "snapshot",
        "SKIP",
        f"{facts.version} reports no consistent snapshot position: a snapshot of existing rows needs "
        "pycanal.snapshot.watermark.table (DBLog's watermarks)",
    )


def run_checks(facts: ServerFacts, watermark_table: str | None = None) -> list[Check]:
    checks: list[Check] = []
    log_bin = facts.variables.get("log_bin", "OFF").upper()
    if log_bin in ("ON", "1"):
        checks.append(Check("log_bin", "OK", "ON"))
    else:
        checks.append(
            Check(
                "log_bin",
                "FAIL",
                f"{log_bin}: the binary log is disabled",
                "in my.cnf [mysqld]: log_bin = mysql-bin, then restart the server",
            )
        )
    checks.append(_setting("binlog_format", "ROW", facts))
    checks.append(_setting("binlog_row_image", "FULL", facts))
    major, minor, patch = facts.version_tuple
    has_metadata = (major, minor) >= (10, 5) if facts.is_mariadb else (major, minor, patch) >= (8, 0, 1)
    if "binlog_row_metadata" in facts.variables or has_metadata:
        metadata = facts.variables.get("binlog_row_metadata", "")
        if metadata.upper() == "FULL":
            checks.append(Check("binlog_row_metadata", "OK", metadata))
        else:
            # any setting works: without names in the binlog, rows are named by the destination's schema history
            checks.append(
                Check("binlog_row_metadata", "OK", f"{metadata or '?'}: column names come from the schema history")
            )
    else:
        checks.append(
            Check("binlog_row_metadata", "SKIP", f"not available on {facts.version}; column names come from the schema")
        )
    compression = "log_bin_compress" if facts.is_mariadb else "binlog_transaction_compression"
    if compression in facts.variables:
        checks.append(_setting(compression, "OFF", facts, quote=False))
    partial = facts.variables.get("binlog_row_value_options")
    if partial is not None and not facts.is_mariadb:
        # a partial JSON update logs a diff of the document; with the before image's document (binlog_row_image=FULL,
        # checked above) the decoder applies it, so the after image is whole
        shown = f"{partial} (partial JSON updates: their diffs applied to the before image's document)"
        checks.append(Check("binlog_row_value_options", "OK", shown if partial.strip() else "'' (full JSON images)"))
    server_id = facts.variables.get("server_id", "0")
    if server_id.isdigit() and int(server_id) > 0:
        checks.append(Check("server_id", "OK", server_id))
    else:
        checks.append(
            Check(
                "server_id",
                "FAIL",
                f"{server_id}: a server with server_id 0 refuses replicas",
                "SET GLOBAL server_id = 1; and in my.cnf [mysqld]: server_id = 1",
            )
        )
    checks.extend(check_grants(facts))
    checks.append(snapshot_check(facts, watermark_table))
    checks.append(statement_logging_check(facts))
    return checks


def statement_logging_check(facts: ServerFacts) -> Check:
    """Whether sessions may log DML as statements although the server's binlog_format is ROW: an account with SUPER
    or BINLOG ADMIN may ``SET SESSION binlog_format`` to STATEMENT or MIXED. canal hands such DML out as statement
    entries; pycanal reads the table again in the stream from there (a heal), and a heal costs a read of the table."""
    if not facts.statement_loggers:
        return Check(
            "session_binlog_format",
            "OK",
            "no account this user can see may change its session's binlog_format (SUPER or BINLOG ADMIN)",
        )
    accounts = ", ".join(facts.statement_loggers)
    on_all, _dbs = _global_privileges(facts.grants)
    blind = [p for p in ("TRIGGER", "SHOW VIEW") if not on_all & {p, "ALL", "ALL PRIVILEGES"}]
    unseen = (
        f"; {_account(facts.current_user)} lacks {' and '.join(blind)}, so what such a statement reaches through "
        "triggers and views cannot be told, and every captured table is read again"
        if blind
        else ""
    )
    return Check(
        "session_binlog_format",
        "WARN",
        f"{accounts} may SET SESSION binlog_format (SUPER or BINLOG ADMIN): DML such a session logs as statements "
        "has every captured table it reaches (its own, a view's base tables, what its triggers, the functions it "
        "calls and its foreign keys' actions change) read again in the stream (a heal), or stops the destination "
        f"under heal=stop (UnmodeledStatementError){unseen}",
        "make sure no application changes its session's binlog_format, or take SUPER / BINLOG ADMIN from its account"
        + (f"; GRANT {', '.join(blind)} ON *.* TO {_account(facts.current_user)};" if blind else ""),
    )


def tls_check(state: TlsState) -> Check:
    """The ``tls`` line: the version and cipher, or that the connection is plain (which the mode allowed: a mode
    that requires TLS fails at connect instead)."""
    return Check("tls", "OK", state.describe())


def run(args: argparse.Namespace) -> int:
    config = load_instance_config(args)
    master = config.master
    if master.is_fake or master.is_local:
        raise CliError(f"check needs a MySQL/MariaDB server address (host:port), not {master.address}")
    try:
        conn = open_connection(
            address=master.address,
            host=master.host,
            port=master.port,
            user=master.username,
            password=master.password,
            ssl_config=master.ssl,
            charset=config.charset,
            connect_timeout=args.connect_timeout,
            read_timeout=args.connect_timeout,
        )
    except SourceUnreachableError as exc:
        if isinstance(exc, TlsError):
            name, fix = "tls", "fix the server's certificate or the ssl settings (see the message)"
        elif exc.errno in (1044, 1045, 1698):
            name, fix = "connect", "check the user and password, and that the user may connect from this host"
        else:
            name, fix = "connect", f"is the server running and reachable at {master.address}?"
        errno = f" (errno {exc.errno})" if exc.errno is not None else ""
        print(Check(name, "FAIL", f"{master.username}@{master.address}: {exc}{errno}", fix).line())
        return 1
    try:
        state = tls_state(conn, master.ssl.mode)
        facts = read_facts(conn)
    except pymysql.err.MySQLError as exc:  # after the login: a lost connection, a limit, a statement refused
        if exc.args and exc.args[0] in EXPIRED_PASSWORD:  # let in, and every statement refused
            fix = "set a new password (as that user: ALTER USER CURRENT_USER() IDENTIFIED BY '...')"
            detail = f"{master.username}@{master.address}: the password has expired (errno {exc.args[0]})"
            print(Check("connect", "FAIL", detail, fix).line())
            return 1
        raise SourceError(f"reading the settings of {master.address} failed: {exc}", errno=exc.args[0]) from None
    finally:
        conn.close()
    checks = [
        Check("connect", "OK", f"{master.username}@{master.address}, {facts.version}"),
        tls_check(state),
        *run_checks(facts, config.snapshot.watermark_table),
    ]
    for check in checks:
        print(check.line())
    failed = [c for c in checks if c.status == "FAIL"]
    if failed:
        print(f"{len(failed)} of {len(checks)} checks failed", file=sys.stderr)
        return 1
    return 0
