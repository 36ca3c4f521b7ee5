"""The gRPC port's certificates (``server.grpc.tls``): a given certificate served as is, client
certificates required with a client CA, the generated certificate's names, and the files refused at
start-up with a message saying which and why (``serve`` exits 2 before opening the store).

The CA, server and client certificates are made here with ``cryptography``; the TLS calls are
grpcio's own client, trusting that CA only.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.grpc.tls import ENFORCING, GrpcTls, TlsConfigError, certificate_names, load_files, self_signed
from server.grpc.v2 import Code, definition, service, service_grpc
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import META
from tests.support.paths import REPO_ROOT

Pem = tuple[bytes, bytes]  # certificate, key


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pem:
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def make_ca(common: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], common: str, ip: str | None = None) -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ip is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
        )
    return _pem(builder.sign(ca[1], hashes.SHA256()), key)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[WritableStore]:
    writable = WritableStore(StoreConfig.for_store(tmp_path / "store", broker_name="b1"))
    writable.create_topic("Plain", 4)
    yield writable
    writable.close()


async def query_route(port: int, credentials: grpc.ChannelCredentials) -> int:
    """QueryRoute over TLS; the answer's status code (grpc's error propagates)."""
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        answer = await service_grpc.MessagingServiceStub(channel).QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name="Plain")), metadata=META, timeout=5
        )
    return int(answer.status.code)


async def test_a_given_certificate_is_served_and_a_client_ca_requires_client_certificates(
    store: WritableStore,
) -> None:
    ca = make_ca("test CA")
    server_cert, server_key = issue(ca, "server", ip="127.0.0.1")
    client_cert, client_key = issue(ca, "client")
    stranger_cert, stranger_key = issue(make_ca("another CA"), "stranger")
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    tls = GrpcTls(mode=ENFORCING, cert_pem=server_cert, key_pem=server_key, client_ca_pem=ca_pem)
    srv = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1", grpc_port=0, grpc_tls=tls))
    await srv.start()
    try:
        port = srv.grpc_port
        served = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port), timeout=5)
        assert ssl.PEM_cert_to_DER_cert(served) == ssl.PEM_cert_to_DER_cert(server_cert.decode())
        with_cert = grpc.ssl_channel_credentials(
            ca_pem, private_key=client_key, certificate_chain=client_cert
        )
        assert await query_route(port, with_cert) == Code.OK
        for refused in (
            grpc.ssl_channel_credentials(ca_pem),  # no client certificate
            grpc.ssl_channel_credentials(ca_pem, private_key=stranger_key, certificate_chain=stranger_cert),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await query_route(port, refused)
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await srv.stop()


def test_the_generated_certificate_names_what_clients_dial() -> None:
    names = certificate_names("0.0.0.0", "10.0.0.7", "brokerhost")
    assert names == ["10.0.0.7", "brokerhost", "localhost", "127.0.0.1", "::1"]
    assert certificate_names("192.168.1.2", "192.168.1.2", "h") == [
        "192.168.1.2",
        "h",
        "localhost",
        "127.0.0.1",
        "::1",
    ]
    cert = x509.load_pem_x509_certificate(self_signed(names)[0])
    alternatives = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert alternatives.get_values_for_type(x509.DNSName) == ["brokerhost", "localhost"]
    assert [str(ip) for ip in alternatives.get_values_for_type(x509.IPAddress)] == [
        "10.0.0.7",
        "127.0.0.1",
        "::1",
    ]
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "10.0.0.7"


def test_files_that_cannot_serve_are_refused_with_the_flag_named(tmp_path: Path) -> None:
    ca = make_ca("test CA")
    cert, key = issue(ca, "server", ip="127.0.0.1")
    _, other_key = issue(ca, "other")
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    (tmp_path / "other.pem").write_bytes(other_key)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    assert load_files(tmp_path / "cert.pem", tmp_path / "key.pem", None) == (cert, key, None)
    for args, said in (
        ((tmp_path / "cert.pem", tmp_path / "other.pem", None), "not a PEM certificate and its private key"),
        ((tmp_path / "cert.pem", tmp_path / "missing.pem", None), "--grpc-tls-key"),
        ((tmp_path / "cert.pem", None, None), "go together"),
        ((None, None, tmp_path / "junk.pem"), "--grpc-tls-client-ca"),
    ):
        with pytest.raises(TlsConfigError, match=said):
            load_files(*args)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--grpc-tls", "disabled", "--grpc-tls-cert", "c.pem", "--grpc-tls-key", "k.pem"],
            "would be ignored",
        ),
        (["--grpc-tls-cert", "c.pem"], "go together"),
        (["--grpc-tls", "sometimes"], "invalid choice"),
        (
            ["--grpc-tls-cert", "/nonexistent/c.pem", "--grpc-tls-key", "/nonexistent/k.pem"],
            "cannot serve gRPC",
        ),
    ],
)
def test_serve_refuses_tls_flags_that_cannot_work(flags: list[str], said: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(tmp_path / "s"), *flags],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
    assert not (tmp_path / "s").exists()  # refused before the store was created


async def test_a_client_trusting_any_certificate_gets_h2_by_alpn_as_grpc_clients_require(
    store: WritableStore,
) -> None:
    """The Go and Java 5.x clients' default: TLS that trusts any certificate, ALPN ``h2`` (grpc-go
    refuses a server that selects none). The default server (permissive, a generated certificate)
    selects it over TLS 1.3 and 1.2."""
    srv = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1", grpc_port=0))
    await srv.start()
    try:

        def handshake(version: ssl.TLSVersion) -> tuple[str | None, str | None]:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.minimum_version = context.maximum_version = version
            context.set_alpn_protocols(["h2"])
            with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    return tls.selected_alpn_protocol(), tls.version()

        assert await asyncio.to_thread(handshake, ssl.TLSVersion.TLSv1_3) == ("h2", "TLSv1.3")
        assert await asyncio.to_thread(handshake, ssl.TLSVersion.TLSv1_2) == ("h2", "TLSv1.2")
    finally:
        await srv.stop()
