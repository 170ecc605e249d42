"""A local certificate authority for the ingress, with the ``cryptography`` package.

``LocalCA.create(directory)`` writes ``ca.pem`` (what clients trust) and keeps the CA key
beside it; :meth:`LocalCA.issue` signs a server certificate for the ingress's names. The
``cert-expired`` fault swaps in a certificate for the same key whose validity ended a day
ago: the TLS handshake then fails on the client with OpenSSL's ``certificate has expired``,
exactly as it does when a real certificate lapses.

Keys are ECDSA P-256 (fast to generate, accepted by every TLS stack in use); certificates carry
the extensions OpenSSL's strict verification expects (basic constraints, key usage, subject
and authority key identifiers, subjectAltName: RFC 5280 §4.2).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["LocalCA", "ServerCertificate"]

_CA_NAME = "devstack local CA"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True)
class ServerCertificate:
    """A server certificate and its key, as PEM files."""

    cert_path: Path
    key_path: Path
    not_after: dt.datetime


class LocalCA:
    """A CA key and self-signed certificate kept in one directory."""

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate):
        self.directory = directory
        self._key = key
        self._cert = cert

    @property
    def cert_path(self) -> Path:
        """The CA certificate clients verify against (``ca.pem``)."""
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path) -> LocalCA:
        """Make a new CA in ``directory`` (created; the key file is private to the user).

        Returns:
            The CA, its ``ca.pem`` written.
        """
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _CA_NAME)])
        now = _now()
        public = key.public_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=3))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(key, hashes.SHA256())
        )
        ca = cls(directory, key, cert)
        key_path = directory / "ca.key"
        key_path.touch(mode=0o600)
        key_path.write_bytes(_key_pem(key))
        ca.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ca

    def issue(
        self,
        name: str,
        *,
        hosts: list[str],
        key_path: Path,
        cert_path: Path,
        expired: bool = False,
    ) -> ServerCertificate:
        """Sign a server certificate for ``hosts`` (DNS names or IP addresses).

        The key at ``key_path`` is reused when it exists, so an expired certificate can be
        swapped in for a valid one without touching the key nginx holds.

        Args:
            name: the subject's common name.
            hosts: subjectAltName entries.
            key_path: the server key (created when missing).
            cert_path: where the certificate is written.
            expired: make a certificate whose validity ended a day ago.

        Returns:
            The certificate's files and its end of validity.
        """
        if key_path.exists():
            loaded = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            if not isinstance(loaded, ec.EllipticCurvePrivateKey):
                raise TypeError(f"{key_path} is not an EC key")
            key = loaded
        else:
            key = ec.generate_private_key(ec.SECP256R1())
            key_path.touch(mode=0o600)
            key_path.write_bytes(_key_pem(key))
        now = _now()
        if expired:
            start, end = now - dt.timedelta(days=2), now - dt.timedelta(days=1)
        else:
            start, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=7)
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        public = key.public_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._cert.subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ServerCertificate(cert_path, key_path, end)
