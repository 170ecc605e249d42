"""Certificates for the wording captures, in one directory (default /tmp/wording/certs).

- ``ca.pem``: a local CA (devstack.ca.LocalCA), the one clients trust;
- ``valid.pem``/``valid.key``: signed by that CA for 127.0.0.1 and localhost;
- ``expired.pem``/``expired.key``: signed by that CA for the same names, validity ended a day ago;
- ``wronghost.pem``/``wronghost.key``: signed by that CA for ``wrong.example`` only;
- ``selfsigned.pem``/``selfsigned.key``: self-signed for 127.0.0.1 and localhost (no CA).

Run from the repository root: ``python tests/agent_logging/owner/programs/make_certs.py DIR``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from devstack.ca import LocalCA

HOSTS = ["127.0.0.1", "localhost"]


def _self_signed(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "self-signed server")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (directory / "selfsigned.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "selfsigned.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make(directory: Path) -> Path:
    """Write every certificate into ``directory``; returns it."""
    ca = LocalCA.create(directory)
    ca.issue(
        "127.0.0.1",
        hosts=HOSTS,
        key_path=directory / "valid.key",
        cert_path=directory / "valid.pem",
    )
    ca.issue(
        "127.0.0.1",
        hosts=HOSTS,
        key_path=directory / "expired.key",
        cert_path=directory / "expired.pem",
        expired=True,
    )
    ca.issue(
        "wrong.example",
        hosts=["wrong.example"],
        key_path=directory / "wronghost.key",
        cert_path=directory / "wronghost.pem",
    )
    _self_signed(directory)
    return directory


if __name__ == "__main__":
    print(make(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/wording/certs")))
