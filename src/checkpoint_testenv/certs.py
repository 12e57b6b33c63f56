"""Certificates for the test control plane, made with the `openssl` CLI.

One throwaway CA signs the API server's serving certificate (valid for 127.0.0.1 and localhost),
so clients and the fault proxy can verify TLS for real instead of turning verification off.
A separate RSA key signs and verifies ServiceAccount tokens (TokenRequest).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_DAYS = "2"
_SERVING_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = {names}
"""
_CLIENT_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
"""


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
    _ec_key(certs.ca_key)
    _openssl(
        "req", "-x509", "-new", "-key", certs.ca_key, "-out", certs.ca_cert, "-days", _DAYS,
        "-subj", "/CN=checkpoint-testenv-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _ec_key(certs.serving_key)
    request = folder / "serving.csr"
    extensions = folder / "serving.ext"
    names = ["IP:127.0.0.1", "DNS:localhost", *map(_alt_name, extra_names)]
    extensions.write_text(_SERVING_EXTENSIONS.format(names=", ".join(names)))
    _openssl("req", "-new", "-key", certs.serving_key, "-out", request, "-subj", "/CN=127.0.0.1")
    _openssl(
        "x509", "-req", "-in", request, "-CA", certs.ca_cert, "-CAkey", certs.ca_key,
        "-CAcreateserial", "-out", certs.serving_cert, "-days", _DAYS, "-extfile", extensions,
    )  # fmt: skip
    _openssl("genrsa", "-out", certs.service_account_key, "2048")
    _openssl("rsa", "-in", certs.service_account_key, "-pubout", "-out", certs.service_account_pub)
    return certs


def client_certificate(
    certs: Certificates, folder: Path, name: str, user: str, group: str
) -> tuple[Path, Path]:
    """A client cert/key (`name`.crt, `name`.key) for `user` in `group`, signed by the CA."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    request, extensions = folder / f"{name}.csr", folder / f"{name}.ext"
    extensions.write_text(_CLIENT_EXTENSIONS)
    _ec_key(key)
    _openssl("req", "-new", "-key", key, "-out", request, "-subj", f"/O={group}/CN={user}")
    _openssl(
        "x509", "-req", "-in", request, "-CA", certs.ca_cert, "-CAkey", certs.ca_key,
        "-CAcreateserial", "-out", cert, "-days", _DAYS, "-extfile", extensions,
    )  # fmt: skip
    return cert, key


def _alt_name(name: str) -> str:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return f"DNS:{name}"
    return f"IP:{name}"


def _ec_key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path)


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(
        ["openssl", *map(str, args)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")
