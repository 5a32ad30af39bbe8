"""Shared pieces of the ``canal`` command line: source selection, the password, position arguments, output helpers.

Secrets are kept out of the output by what they are, never by their text: every message is made from redacted
forms (a config's ``redacted()``, :func:`canal.secrets.is_secret_key`, the connection's own redaction of a server's
answer), so no output is searched for a password's text -- which, for canal's default password ``canal``, masked the
user's name and the word wherever it stood."""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

import attrs

from canal.config import InstanceConfig, MasterConfig, SslConfig, SslMode
from canal.errors import CanalError, ConfigError, PositionError

PASSWORD_ENV = "CANAL_PASSWORD"
DEFAULT_DESTINATION = "example"
ZK_TIMEOUT_S = 5.0
"""How long a command waits for ZooKeeper by default (``canal position``, ``canal ha``): it fails fast rather than
hangs."""


class CliError(CanalError):
    """A command-line usage problem found after argument parsing (exit status 2, one line on stderr)."""


# -- source selection ------------------------------------------------------------------------------------------------


def add_source_arguments(parser: argparse.ArgumentParser, *, destination: bool = True) -> None:
    group = parser.add_argument_group(
        "source", "either --properties (canal's instance.properties) or --address with --user and --password"
    )
    group.add_argument("--properties", metavar="FILE", help="canal instance.properties of the destination")
    group.add_argument(
        "--address", metavar="HOST:PORT", help="the MySQL/MariaDB server (also fake://NAME or file://DIR)"
    )
    group.add_argument("--user", metavar="USER", help="the capture user (default: canal)")
    group.add_argument(
        "--password",
        metavar="PASSWORD",
        nargs="?",
        const="",
        default=None,
        help=f"its password; without a value it is asked for; default: ${PASSWORD_ENV}. Never printed",
    )
    group.add_argument(
        "--ssl-mode",
        metavar="MODE",
        type=str.upper,
        choices=[m.value for m in SslMode],
        help="TLS to the server: DISABLED, PREFERRED (default), REQUIRED, VERIFY_CA or VERIFY_IDENTITY "
        "(overrides sslMode of --properties)",
    )
    group.add_argument("--ssl-ca", metavar="PEM", help="CA certificates to verify the server with (implies VERIFY_CA)")
    group.add_argument("--ssl-cert", metavar="PEM", help="client certificate (the file may hold its key too)")
    group.add_argument("--ssl-key", metavar="PEM", help="client private key, if not in --ssl-cert")
    if destination:
        group.add_argument(
            "--destination",
            metavar="NAME",
            help=f"destination name (default: from the properties, else {DEFAULT_DESTINATION!r})",
        )


def positive_int(text: str) -> int:
    """An argparse type: an integer > 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def resolve_password(args: argparse.Namespace) -> str | None:
    """--password VALUE, --password (prompt), else $CANAL_PASSWORD, else None."""
    password: str | None = args.password
    if password == "":
        password = getpass.getpass("password: ")
    elif password is None:
        password = os.environ.get(PASSWORD_ENV)
    return password


def load_instance_config(args: argparse.Namespace) -> InstanceConfig:
    """The instance config named by the source arguments (--properties, or --address/--user/--password)."""
    password = resolve_password(args)
    destination: str | None = getattr(args, "destination", None)
    if args.properties:
        path = Path(args.properties)
        if not path.is_file():
            raise CliError(f"--properties {args.properties}: no such file")
        config = InstanceConfig.from_properties(path, destination=destination)
        master = config.master
        changes: dict[str, Any] = {}
        if args.address:
            changes["address"] = args.address
        if args.user:
            changes["username"] = args.user
        if password is not None:
            changes["password"] = password
        ssl = _ssl_arguments(args, master.ssl)
        if ssl is not master.ssl:
            changes["ssl"] = ssl
        if changes:
            config = attrs.evolve(config, master=attrs.evolve(master, **changes))
        return config
    if not args.address:
        raise CliError("name the source: --properties FILE, or --address HOST:PORT --user USER [--password]")
    master = MasterConfig(
        address=args.address,
        username=args.user or "canal",
        password=password if password is not None else "",
        ssl=_ssl_arguments(args, SslConfig()),
    )
    return InstanceConfig(destination=destination or DEFAULT_DESTINATION, master=master)


def _ssl_arguments(args: argparse.Namespace, base: SslConfig) -> SslConfig:
    """``base`` with the --ssl-* arguments given on the command line applied (``base`` itself when none were)."""
    given = {
        field: value
        for field, value in (
            ("mode", getattr(args, "ssl_mode", None)),
            ("ca", getattr(args, "ssl_ca", None)),
            ("cert", getattr(args, "ssl_cert", None)),
            ("key", getattr(args, "ssl_key", None)),
        )
        if value is not None
    }
    if not given:
        return base
    if "ca" in given and "mode" not in given and not base.mode.verifies:
        given["mode"] = SslMode.VERIFY_CA  # as the MySQL client: a CA without a mode means verify against it
    return attrs.evolve(base, **given)


# -- positions -------------------------------------------------------------------------------------------------------

_FILE_POSITION = re.compile(r"^(?P<file>[\w.-]+\.\d+)(?::(?P<offset>\d+))?$")


@attrs.frozen
class StartSpec:
    """A parsed ``--from``: a file (+ offset), a timestamp (ms since the epoch), or now (all None)."""

    journal_name: str | None = None
    position: int | None = None
    timestamp_ms: int | None = None

    @property
    def is_now(self) -> bool:
        return self.journal_name is None and self.timestamp_ms is None

    def apply(self, master: MasterConfig) -> MasterConfig:
        """The master config with this start position instead of its own."""
        return attrs.evolve(
            master, journal_name=self.journal_name, position=self.position, timestamp=self.timestamp_ms, gtid=None
        )


def parse_timestamp(text: str) -> int:
    """ISO 8601 (a date, or date and time; no offset means local time) to milliseconds since the epoch."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise PositionError(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-01-02T03:04:05 or 2024-01-02T03:04:05+00:00)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as `date` reads it
    return int(when.timestamp() * 1000)


def parse_start(text: str) -> StartSpec:
    """``now``, ``mysql-bin.000003[:4]`` or an ISO 8601 time."""
    value = text.strip()
    if value.lower() == "now":
        return StartSpec()
    match = _FILE_POSITION.match(value)
    if match:
        offset = match.group("offset")
        return StartSpec(journal_name=match.group("file"), position=4 if offset is None else int(offset))
    try:
        return StartSpec(timestamp_ms=parse_timestamp(value))
    except PositionError:
        raise PositionError(
            f"--from {text!r}: give a binlog position (mysql-bin.000003:4), an ISO 8601 time "
            "(2024-01-02T03:04:05) or now"
        ) from None


def parse_hosts(text: str) -> str:
    if not text.strip():
        raise ConfigError("--zk needs ZooKeeper hosts, e.g. 127.0.0.1:2181")
    return text.strip()


def out() -> TextIO:
    return sys.stdout


def err() -> TextIO:
    return sys.stderr
