"""Certificates for the test control plane, made with `cryptography`.

One throwaway CA signs the API server's serving certificate (valid for 127.0.0.1 and localhost),
so clients and the fault proxy can verify TLS for real instead of turning verification off.
A separate RSA key signs and verifies ServiceAccount tokens (TokenRequest).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = timedelta(days=2)
_CLOCK_SKEW = timedelta(minutes=5)  # valid from a little before now
CA_NAME = "checkpoint-testenv-ca"


@dataclass(frozen=True)
class Certificates:
    """Paths of the PEM files one control plane uses."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_pub: Path


def generate(folder: Path, extra_names: Sequence[str] = ()) -> Certificates:
    """Write a CA, a serving cert/key and a ServiceAccount key pair into `folder`.

    The serving cert is valid for 127.0.0.1, localhost and `extra_names` (IP addresses or DNS
    names).
    """
    folder.mkdir(parents=True, exist_ok=True)
    certs = Certificates(
        ca_cert=folder / "ca.crt",
        ca_key=folder / "ca.key",
        serving_cert=folder / "serving.crt",
        serving_key=folder / "serving.key",
        service_account_key=folder / "sa.key",
        service_account_pub=folder / "sa.pub",
    )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = _name(CA_NAME)
    ca = (
        _builder(ca_subject, ca_subject, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(certs.ca_key, ca_key)
    certs.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    names = ["127.0.0.1", "localhost", *extra_names]
    _issue(
        certs,
        certs.serving_cert,
        certs.serving_key,
        _name("127.0.0.1"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        x509.SubjectAlternativeName([_alt_name(name) for name in dict.fromkeys(names)]),
    )

    account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(certs.service_account_key, account_key)
    certs.service_account_pub.write_bytes(
        account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return certs


def client_certificate(
    certs: Certificates, folder: Path, name: str, user: str, group: str
) -> tuple[Path, Path]:
    """A client cert/key (`name`.crt, `name`.key) for `user` in `group`, signed by the CA."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    _issue(certs, cert, key, _name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH, None)
    return cert, key


def _issue(
    certs: Certificates,
    cert_path: Path,
    key_path: Path,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    alt_names: x509.SubjectAlternativeName | None,
) -> None:
    """A leaf certificate for `subject`, signed by the CA in `certs`, with a new P-256 key."""
    ca = x509.load_pem_x509_certificate(certs.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(certs.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{certs.ca_key} is not the CA's EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if alt_names is not None:
        builder = builder.add_extension(alt_names, critical=False)
    _write_key(key_path, key)
    cert_path.write_bytes(
        builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = (
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []
    )
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
