"""The one way pycanal opens a connection to a MySQL/MariaDB server: the binlog dump, the side connection for
positions, metadata and detecting, and ``canal check`` all come through :func:`open_connection`.

TLS follows the configured :class:`~canal.config.SslMode` with the MySQL client's meaning, never pymysql's defaults
(which changed in pymysql 1.2 from "never" to "when offered"). Failures are typed: :class:`~canal.errors.TlsError`
when the connection cannot be secured as configured (a server's answer: no retry fixes it; a connection cut inside
the handshake is not one), :class:`~canal.errors.SourceAccessDeniedError` when the server
refuses the login (:data:`ACCESS_DENIED`), :class:`~canal.errors.SourceHostUnknownError` when the host name does not
resolve, :class:`~canal.errors.SourceUnreachableError` for anything else that stops the login (a refused or timed-out
connection: what a retry may fix). No message contains the password.

pymysql internals used here, and nowhere else, each watched by ``tests/test_tls.py``:

* PREFERRED: pymysql (>= 1.2) negotiates TLS opportunistically when given no TLS arguments (``Connection.ssl`` true,
  ``_ssl_required`` false); our context replaces its default one (``Connection.ctx``) before the handshake, so the
  configured TLS versions and client certificate apply. Older pymysql releases continue in plain text when TLS was
  asked for and the server offers none, which is why pycanal needs pymysql >= 1.2.
* Whether an open connection is encrypted, and how, is read from its socket (``Connection._sock``).
* pymysql makes its PREFERRED context in ``Connection._create_ssl_ctx({})`` while it is constructed: the system's
  trust store, read anew for every connection (60 ms of CPU here: most of a destination's start). Ours replaces it
  before the handshake anyway, so :class:`_Connection` makes none.

Contexts are shared: :func:`shared_ssl_context` makes one per TLS configuration (and version of its files) for the
whole process. An ``SSLContext`` is safe to use from several threads at once; it is never changed once made.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pymysql  # type: ignore[import-untyped]
import pymysql.err  # type: ignore[import-untyped]
from pymysql.connections import Connection  # type: ignore[import-untyped]
from pymysql.constants import CLIENT  # type: ignore[import-untyped]

from canal.config import TLS_VERSIONS, SslConfig, SslMode
from canal.errors import (
    CanalError,
    ConfigError,
    SourceAccessDeniedError,
    SourceHostUnknownError,
    SourceUnreachableError,
    TlsError,
)

log = logging.getLogger(__name__)

CR_CONN_HOST_ERROR = 2003
CR_SSL_CONNECTION_ERROR = 2026
ER_SECURE_TRANSPORT_REQUIRED = 3159  # MySQL 5.7+ with require_secure_transport=ON
ACCESS_DENIED = frozenset(
    {
        1044,  # ER_DBACCESS_DENIED_ERROR
        1045,  # ER_ACCESS_DENIED_ERROR: a wrong user or password
        1184,  # ER_NEW_ABORTING_CONNECTION: the server's init_connect failed for this user
        1251,  # ER_NOT_SUPPORTED_AUTH_MODE
        1698,  # ER_ACCESS_DENIED_NO_PASSWORD_ERROR
        1820,  # ER_MUST_CHANGE_PASSWORD
        1862,  # ER_MUST_CHANGE_PASSWORD_LOGIN: the password expired
        3118,  # MySQL ER_ACCOUNT_HAS_BEEN_LOCKED
        3955,  # MySQL: locked for a while after FAILED_LOGIN_ATTEMPTS
        4150,  # MariaDB ER_USER_IS_BLOCKED: max_password_errors reached
        4151,  # MariaDB ER_ACCOUNT_HAS_BEEN_LOCKED
    }
)
"""The server's answers to a login that a retry does not change (:class:`~canal.errors.SourceAccessDeniedError`)."""
EXPIRED_PASSWORD = frozenset({1820, 1862})
"""A password that has expired: refused at the login (1862), or -- MariaDB's default, ``disconnect_on_expired_password``
OFF -- let in and then every statement refused (1820, ER_MUST_CHANGE_PASSWORD)."""
_UNKNOWN_NAME = frozenset(
    code for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None)) if code is not None
)
"""getaddrinfo's answers that the name does not exist (not EAI_AGAIN, a temporary failure of the resolver)."""

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
assert set(_VERSIONS) == set(TLS_VERSIONS)

_plain_noted: set[str] = set()
_plain_lock = threading.Lock()
_plain_level = logging.WARNING


@contextlib.contextmanager
def plain_connections_noted_at(level: int) -> Iterator[None]:
    """The level of the one note per server and process that a PREFERRED connection went unencrypted (the server
    offers no TLS), inside the ``with`` block: a warning by default, for a long-running process's log; the ``canal``
    command line's short commands log it at INFO (``canal check`` reports TLS in a line of its own). The level
    before comes back when the block ends: a process that ran a short command (an embedder calling
    :func:`canal.cli.main`) still warns afterwards."""
    global _plain_level
    before, _plain_level = _plain_level, level
    try:
        yield
    finally:
        _plain_level = before


_CONTEXTS: dict[tuple[SslConfig, tuple[tuple[str, int, int] | None, ...]], ssl.SSLContext | None] = {}
_CONTEXTS_LOCK = threading.Lock()
_MAX_CONTEXTS = 64


class _Connection(Connection):  # type: ignore[misc]
    """pymysql's connection, without the default context it makes for opportunistic TLS (see the module docstring):
    :func:`open_connection` sets the configured one before the handshake."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            return None
        return super()._create_ssl_ctx(sslp)


@attrs.frozen
class TlsState:
    """How an open connection is protected: the TLS version and cipher, or None for both when it is plain."""

    mode: SslMode
    version: str | None = None
    cipher: str | None = None

    @property
    def encrypted(self) -> bool:
        return self.version is not None

    def describe(self) -> str:
        """``TLSv1.3, TLS_AES_256_GCM_SHA384 (sslMode VERIFY_IDENTITY)`` or ``not encrypted (sslMode DISABLED)``."""
        what = f"{self.version}, {self.cipher}" if self.encrypted else "not encrypted"
        return f"{what} (sslMode {self.mode.value})"


def ssl_context(config: SslConfig) -> ssl.SSLContext | None:
    """The client TLS context for ``config`` (None for DISABLED). Reads the CA, certificate and key files now;
    a file that cannot be read or parsed raises ConfigError naming the SslConfig field."""
    mode = config.mode
    if mode is SslMode.DISABLED:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = [_VERSIONS[v] for v in (config.tls_versions or TLS_VERSIONS)]
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    if mode.verifies:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = mode is SslMode.VERIFY_IDENTITY
        if config.ca is not None:
            try:
                context.load_verify_locations(cafile=config.ca)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise ConfigError(
                    f"invalid SslConfig.ca = {config.ca!r}: cannot read CA certificates from it: {_reason(exc)}",
                    key="ssl.ca",
                ) from None
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        # PREFERRED and REQUIRED encrypt without authenticating the server, as the MySQL client does
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.cert is not None:
        try:
            context.load_cert_chain(config.cert, keyfile=config.key, password=config.key_password)
        except (OSError, ValueError) as exc:
            files = config.cert if config.key is None else f"{config.cert} and {config.key}"
            raise ConfigError(
                f"invalid SslConfig.cert: cannot load the client certificate and key from {files}: {_reason(exc)}",
                key="ssl.cert",
            ) from None
    return context


def _file_version(path: str | None) -> tuple[str, int, int] | None:
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (path, -1, -1)  # ssl_context names the unreadable file
    return (path, found.st_mtime_ns, found.st_size)


def shared_ssl_context(config: SslConfig) -> ssl.SSLContext | None:
    """:func:`ssl_context` for ``config``, made once per process for each version of its files (a renewed CA,
    certificate or key file, by its modification time and size, makes a new one: the next connection picks it up).
    Raises what :func:`ssl_context` raises, and keeps nothing then."""
    if config.mode is SslMode.DISABLED:
        return None
    key = (config, tuple(_file_version(p) for p in (config.ca, config.cert, config.key)))
    context = _CONTEXTS.get(key)  # read without the lock: a dict lookup is atomic, and a value never changes
    if context is not None:
        return context
    with _CONTEXTS_LOCK:
        context = _CONTEXTS.get(key)
        if context is None:
            context = ssl_context(config)
            _CONTEXTS[key] = context
            if len(_CONTEXTS) > _MAX_CONTEXTS:
                del _CONTEXTS[next(iter(_CONTEXTS))]
        return context


def open_connection(
    *,
    address: str,
    host: str,
    port: int,
    user: str,
    password: str,
    ssl_config: SslConfig,
    context: ssl.SSLContext | None = None,
    charset: str = "utf8mb4",
    connect_timeout: float = 10.0,
    read_timeout: float | None = None,
    autocommit: bool = True,
    conv: dict[Any, Any] | None = None,
) -> Connection:
    """A logged-in pymysql connection to ``host:port`` with TLS as ``ssl_config`` says.

    ``context`` is a context :func:`ssl_context` made for the same config (default: :func:`shared_ssl_context`);
    ``address`` is how messages name the server. Raises TlsError or SourceUnreachableError (errno set).
    """
    mode = ssl_config.mode
    if context is None:
        context = shared_ssl_context(ssl_config)
    kwargs: dict[str, Any] = {
        "host": host,
        "port": port,
        "user": user,
        "password": password,
        "charset": charset,
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
        "autocommit": autocommit,
        "defer_connect": True,
    }
    if conv is not None:
        kwargs["conv"] = conv  # {}: every value as the server's text (the snapshot reader converts it itself)
    if mode is SslMode.DISABLED or context is None:
        kwargs["ssl_disabled"] = True
    elif mode.requires_tls:
        kwargs["ssl"] = context  # pymysql refuses to continue if the server offers no TLS
    conn = _Connection(**kwargs)
    if mode is SslMode.PREFERRED and context is not None:
        _prefer_tls(conn, context)
    try:
        conn.connect()
    except pymysql.err.MySQLError as exc:
        raise _connect_error(exc, conn, address, user, password, mode) from None
    state = tls_state(conn, mode)
    if mode.requires_tls and not state.encrypted:
        # defence in depth: pymysql >= 1.2 already refused before logging in
        conn.close()
        raise TlsError(
            f"MySQL server {address}: the connection is not encrypted although sslMode is {mode}", errno=2026
        )
    if not state.encrypted and mode is SslMode.PREFERRED:
        with _plain_lock:
            first = address not in _plain_noted
            _plain_noted.add(address)
        if first:
            log.log(
                _plain_level,
                "MySQL server %s offers no TLS: connected unencrypted (sslMode PREFERRED); set sslMode REQUIRED or "
                "stronger to refuse this",
                address,
            )
    log.debug("connected to %s as %r: %s", address, user, state.describe())
    return conn


def expired_password_error(address: str, user: str, code: int, text: str) -> SourceAccessDeniedError:
    """The typed refusal of a statement by a server that let user ``user`` in with an expired password (1820)."""
    return SourceAccessDeniedError(
        f"MySQL server {address} refuses every statement of user {user!r}: its password has expired (errno {code}: "
        f"{text}); set a new one (as that user: ALTER USER CURRENT_USER() IDENTIFIED BY '...') and give it to the "
        "destination",
        errno=code,
    )


def tls_state(conn: Connection, mode: SslMode) -> TlsState:
    """Whether and how ``conn`` is encrypted."""
    sock = getattr(conn, "_sock", None)
    if isinstance(sock, ssl.SSLSocket):
        cipher = sock.cipher()
        return TlsState(mode, sock.version(), cipher[0] if cipher else None)
    return TlsState(mode)


def _prefer_tls(conn: Connection, context: ssl.SSLContext) -> None:
    if getattr(conn, "ssl", None) is not True or getattr(conn, "_ssl_required", None) is not False:
        raise CanalError(
            f"pymysql {pymysql.__version__} negotiates TLS differently from the 1.2 releases pycanal was built "
            "for, so sslMode PREFERRED cannot be honoured: install pymysql>=1.2,<2, or choose DISABLED or REQUIRED"
        )
    conn.ctx = context


def _connect_error(
    exc: pymysql.err.MySQLError, conn: Connection, address: str, user: str, password: str, mode: SslMode
) -> SourceUnreachableError:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    text = _redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc), password, f"{user}{address}")
    cause = getattr(exc, "original_exception", None)
    if isinstance(cause, ssl.SSLCertVerificationError):
        detail = (cause.verify_message or _reason(cause)).rstrip(".")
        if "hostname" in detail.lower() or "ip address mismatch" in detail.lower():
            fix = (
                f"the certificate does not name {conn.host!r}: connect by a name it holds, or use sslMode VERIFY_CA "
                "to check the CA only"
            )
        else:
            fix = "give the CA that signed the server's certificate (SslConfig.ca / trustCertificateKeyStoreUrl)"
        return TlsError(
            f"MySQL server {address}: its TLS certificate did not verify (sslMode {mode}): {detail}; {fix}",
            errno=code,
        )
    if isinstance(cause, ssl.SSLEOFError | ssl.SSLSyscallError | ssl.SSLZeroReturnError):
        # the connection ended inside the handshake (a server shutting down, a proxy or network cutting it): no
        # answer about TLS itself, so retried like any connection the network broke
        return SourceUnreachableError(
            f"MySQL server {address}: the connection was closed during the TLS handshake (sslMode {mode}): "
            f"{_reason(cause)}",
            errno=code,
        )
    if isinstance(cause, ssl.SSLError):
        return TlsError(
            f"MySQL server {address}: the TLS handshake failed (sslMode {mode}): {_reason(cause)}", errno=code
        )
    if code == CR_SSL_CONNECTION_ERROR:
        return TlsError(
            f"MySQL server {address} offers no TLS, but sslMode is {mode}: enable TLS on the server (ssl_cert, "
            f"ssl_key) or lower the mode ({text})",
            errno=code,
        )
    if code == ER_SECURE_TRANSPORT_REQUIRED:
        return TlsError(
            f"MySQL server {address} requires TLS (require_secure_transport=ON) and refused the unencrypted "
            f"login of user {user!r}: set sslMode REQUIRED or stronger",
            errno=code,
        )
    if code in ACCESS_DENIED:
        hint = ""
        offers_tls = bool(getattr(conn, "server_capabilities", 0) & CLIENT.SSL)
        if offers_tls and mode is SslMode.DISABLED:  # every other mode encrypts when the server offers TLS
            # MariaDB answers a plain login under require_secure_transport=ON with a bare "access denied"
            hint = (
                "; the connection was not encrypted although the server offers TLS: if it sets "
                "require_secure_transport=ON, set sslMode REQUIRED or stronger"
            )
        return SourceAccessDeniedError(
            f"MySQL server {address} refused the login of user {user!r}: {text}{hint}", errno=code
        )
    if isinstance(cause, socket.gaierror) and cause.errno in _UNKNOWN_NAME:
        return SourceHostUnknownError(
            f"MySQL server {address}: the host name {conn.host!r} does not resolve ({cause.strerror}): check the "
            "address",
            errno=code,
        )
    return SourceUnreachableError(f"MySQL server {address} could not be reached as user {user!r}: {text}", errno=code)


def _redact(text: str, password: str, allowed: str) -> str:
    # a password that is part of the user or address would mask those too; messages never hold it otherwise
    if password and password not in allowed:
        return text.replace(password, "***")
    return text


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.reason} ({exc.library})" if exc.library else str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
