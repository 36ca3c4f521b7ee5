"""The gRPC port's TLS, as the 5.x Proxy serves it: its modes, the certificate, the client CA.

The official 5.x clients differ in what they dial: the Go and Java clients TLS by default (trusting
any certificate), the Python and Node clients plaintext unless told. The Proxy's default mode is
``permissive``: one port takes both (``server.grpc.relay`` tells them apart by their first bytes),
with a self-signed certificate unless one is configured. ``enforcing`` takes TLS clients only,
``disabled`` plaintext only (grpcio's own port, no relay in front). With a client CA
(``tlsServerNeedClientAuth``) a TLS client must show a certificate it signed.

Only the libraries' TLS is used: grpcio's (BoringSSL) speaks it, the standard library's ``ssl``
checks the given files at start-up, ``cryptography`` makes the self-signed certificate. This
module does not import grpcio, so that settings and the command line can name it cheaply.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

PERMISSIVE = "permissive"
ENFORCING = "enforcing"
DISABLED = "disabled"
TLS_MODES = (PERMISSIVE, ENFORCING, DISABLED)

#: Seconds a new connection has to show what it speaks (a whole TLS ClientHello record or the HTTP/2
#: preface) and, for TLS, to finish its handshake with grpcio.
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
#: Connections the relay serves at once (each holds three descriptors: the client's, the relay's to
#: grpcio and grpcio's); past it the oldest that has not shown what it speaks is dropped, else the
#: new one is refused.
DEFAULT_MAX_CONNECTIONS = 1024
#: Days the generated certificate is valid (it is made anew at each start).
SELF_SIGNED_DAYS = 365


class TlsConfigError(ValueError):
    """A certificate, key or CA file that cannot serve (unreadable, not PEM, key and cert unpaired)."""


@dataclass(frozen=True, slots=True)
class GrpcTls:
    """How the gRPC port speaks TLS. ``cert_pem``/``key_pem`` None: a self-signed certificate is
    made at start (``self_signed``); ``client_ca_pem``: TLS clients must show a certificate it signed."""

    mode: str = PERMISSIVE
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    client_ca_pem: bytes | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if self.mode not in TLS_MODES:
            raise ValueError(f"gRPC TLS mode must be one of {', '.join(TLS_MODES)}, not {self.mode!r}")
        if (self.cert_pem is None) != (self.key_pem is None):
            raise ValueError("a gRPC TLS certificate needs its key and a key its certificate")


def load_files(cert: Path | None, key: Path | None, client_ca: Path | None) -> tuple[bytes | None, ...]:
    """The PEM bytes of ``--grpc-tls-cert``, ``--grpc-tls-key`` and ``--grpc-tls-client-ca``, checked
    with the standard library's ``ssl`` (the key must be the certificate's, the CA must parse), so
    that a bad file stops the start with a clear message instead of failing every handshake."""
    if (cert is None) != (key is None):
        raise TlsConfigError("--grpc-tls-cert and --grpc-tls-key go together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    pems: list[bytes | None] = []
    for flag, path in (
        ("--grpc-tls-cert", cert),
        ("--grpc-tls-key", key),
        ("--grpc-tls-client-ca", client_ca),
    ):
        if path is None:
            pems.append(None)
            continue
        try:
            pems.append(path.read_bytes())
        except OSError as exc:
            raise TlsConfigError(f"{flag} {path}: {exc.strerror or exc}") from None
    if cert is not None and key is not None:
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(
                f"--grpc-tls-cert {cert} / --grpc-tls-key {key}: not a PEM certificate and its private "
                f"key ({exc})"
            ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(client_ca))
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(
                f"--grpc-tls-client-ca {client_ca}: not PEM CA certificates ({exc})"
            ) from None
    return tuple(pems)


def self_signed(names: list[str]) -> tuple[bytes, bytes]:
    """A new self-signed certificate and its key (PEM) for ``names`` (host names and IP addresses,
    the first one its common name): what the Proxy's test mode serves when no certificate is given.

    An EC P-256 key: made in a millisecond, spoken by every client's TLS."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:  # pragma: no cover - a declared dependency
        raise TlsConfigError(
            "making a self-signed certificate needs the cryptography package: install it, or give "
            "--grpc-tls-cert and --grpc-tls-key, or serve --grpc-tls disabled"
        ) from None
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alternatives: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def certificate_names(host: str, advertised_host: str, machine: str) -> list[str]:
    """The names a generated certificate is made for: the advertised host (what routes tell clients
    to dial), the bound host unless a wildcard, the machine's name, and loopback's."""
    names = [advertised_host]
    if host not in ("", "0.0.0.0", "::"):
        names.append(host)
    names += [machine, "localhost", "127.0.0.1", "::1"]
    return [name for name in dict.fromkeys(names) if name]


def fingerprint(cert_pem: bytes) -> str:
    """The (first) certificate's SHA-256 fingerprint (``AB:CD:...``), as ``openssl x509
    -fingerprint`` shows it."""
    first = cert_pem.decode("ascii").split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))
