"""Throw-away certificates for TLS tests: a CA, a server certificate and a client certificate signed by it.

>>> certs = make_certificates(tmp_dir)                                  # doctest: +SKIP
>>> server = MariaDBServer(tls=certs.server(), require_secure_transport=True)
>>> SslConfig(mode="VERIFY_IDENTITY", ca=str(certs.ca), cert=str(certs.client_cert), key=str(certs.client_key))

Keys are ECDSA P-256 (generated in milliseconds), certificates are valid from an hour ago for a day, and every file is
PEM, readable only by this user. ``hosts`` become the server certificate's subject alternative names (IP addresses
as IP entries, anything else as DNS names) and its common name (the first one): ``VERIFY_IDENTITY`` accepts exactly
those names.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Certificates", "TlsFiles", "make_certificates"]


@attrs.frozen
class TlsFiles:
    """The PEM files one end of a TLS connection needs: the CA it trusts, its certificate and its private key."""

    ca: Path
    cert: Path
    key: Path


@attrs.frozen
class Certificates:
    """What :func:`make_certificates` wrote (all PEM)."""

    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    hosts: tuple[str, ...]

    def server(self) -> TlsFiles:
        """The server's files (for ``MariaDBServer(tls=...)``)."""
        return TlsFiles(self.ca, self.server_cert, self.server_key)

    def client(self) -> TlsFiles:
        """The client's files (for ``SslConfig(ca=..., cert=..., key=...)``)."""
        return TlsFiles(self.ca, self.client_cert, self.client_key)


def make_certificates(
    directory: str | os.PathLike[str],
    *,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    client_name: str = "canal",
    ca_name: str = "pycanal test CA",
) -> Certificates:
    """Write a new CA and a server and a client certificate signed by it into ``directory`` (created if missing)."""
    if not hosts:
        raise ValueError("the server certificate needs at least one host name or IP address")
    out = Path(directory)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (
        _builder(ca_subject, ca_subject, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca_subject, key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    server_cert, server_key = leaf(hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, [_san(h) for h in hosts])
    client_cert, client_key = leaf(client_name, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    files = {
        "ca.pem": ca_cert.public_bytes(serialization.Encoding.PEM),
        "ca-key.pem": _key_pem(ca_key),
        "server-cert.pem": server_cert,
        "server-key.pem": server_key,
        "client-cert.pem": client_cert,
        "client-key.pem": client_key,
    }
    for name, data in files.items():
        path = out / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    return Certificates(
        ca=out / "ca.pem",
        ca_key=out / "ca-key.pem",
        server_cert=out / "server-cert.pem",
        server_key=out / "server-key.pem",
        client_cert=out / "client-cert.pem",
        client_key=out / "client-key.pem",
        hosts=tuple(hosts),
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))  # tolerate a clock a little behind
        .not_valid_after(now + dt.timedelta(days=1))
    )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
