"""DNS rebinding and cross-site request forgery against the HTTP port (issue 31, item 2).

A page of ``attacker.example`` that rebinds its name to this server's address makes the browser send
``Host: attacker.example:PORT``: every such request, read or POST, must be refused (421) before it
reads or writes anything. A POST must carry the token of ``GET /api/csrf-token``; without it, or with
another, nothing is stored. The expected answers are the rules of ``server.http.host_check`` and
``server.http.csrf``, written out here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clients.cli.serve import add_arguments, settings_from
from clients.cli.store_options import config_from_args
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.http.host_check import AllowedHosts, host_name
from server.remoting.write_path import WritePath, write_path
from store.config.store_config import StoreConfig
from tests.support.http_csrf import csrf_headers

ATTACKER = "attacker.example"
#: A name the operator allows (``--http-allow-host``).
ALIAS = "console.example"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[QueryServer, WritableStore, WritePath, str]]:
    config = StoreConfig.for_store(tmp_path / "store", broker_name="b1")
    store = WritableStore(config, auto_create_topics=False)
    store.create_topic("Orders", 4)
    path = write_path(store)
    settings = ServerSettings(port=0, broker_name="b1", http_port=0, http_allowed_hosts=(ALIAS,))
    server = QueryServer(store.reader, settings, configure=path)
    await server.start()
    try:
        yield server, store, path, f"http://127.0.0.1:{server.http_port}"
    finally:
        await server.stop()
        store.close()


def stored_id(path: WritePath) -> str:
    """One message stored by the remoting port's SEND processor; its offset message id."""
    from protocol.codes import RequestCode, ResponseCode
    from protocol.command import RemotingCommand
    from protocol.send_message import SendMessageRequestHeader

    header = SendMessageRequestHeader(
        producer_group="pg", topic="Orders", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0, properties="KEYS\x01k1\x02",
    )  # fmt: skip
    request = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2, ext_fields=header.to_ext_fields(v2=True), body=b"payload"
    )
    assert path.sends is not None
    answer = path.sends.handle(request, ("10.0.0.9", 5555))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields["msgId"]  # type: ignore[index]


def orders_max(store: WritableStore) -> int:
    return sum(store.reader.max_offset("Orders", q) for q in range(4))


READS = ("/", "/static/app.js", "/openapi.json", "/metrics", "/api/csrf-token", "/api/topics",
         "/api/topics/Orders", "/api/groups", "/no/such/route")  # fmt: skip


async def test_a_rebound_name_is_refused_on_every_read_and_on_the_post(served: Any) -> None:
    server, store, path, base = served
    msg_id = stored_id(path)
    foreign = {"Host": f"{ATTACKER}:{server.http_port}"}
    async with aiohttp.ClientSession(base_url=base) as session:
        token = await csrf_headers(session)
        for route in (*READS, f"/api/messages/{msg_id}", f"/api/messages/{msg_id}/body"):
            async with session.get(route, headers=foreign) as response:
                body = await response.json()
                assert (response.status, body["error"]) == (421, "host_not_allowed"), route
                assert body["status"] == 421
                assert ATTACKER in body["message"] and "--http-allow-host" in body["message"]
        before = orders_max(store)
        # the attacker's page is "same origin" under the rebound name and could even read a token
        headers = {**foreign, **token, "Origin": f"http://{ATTACKER}:{server.http_port}"}
        async with session.post(f"/api/messages/{msg_id}/resend", json={}, headers=headers) as response:
            assert response.status == 421
            assert (await response.json())["error"] == "host_not_allowed"
        assert orders_max(store) == before
        # the same requests naming this server are answered
        for host in ("127.0.0.1", "localhost", "LocalHost.", "app.localhost", "[::1]", "10.1.2.3", ALIAS):
            async with session.get("/api/topics/Orders", headers={"Host": f"{host}:{server.http_port}"}) as r:
                assert r.status == 200, host
        own = {"Host": f"{ALIAS}:{server.http_port}", "Origin": f"http://{ALIAS}:{server.http_port}"}
        async with session.post(f"/api/messages/{msg_id}/resend", json={}, headers={**own, **token}) as r:
            assert r.status == 201, await r.text()
        assert orders_max(store) == before + 1


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no token at all: what a form or a script of another site sends
        {"X-RMQ-CSRF-Token": "not-the-token"},
        {"X-RMQ-CSRF-Token": ""},
        {"X-Requested-With": "XMLHttpRequest"},
    ],
)
async def test_a_post_without_the_token_stores_nothing(served: Any, headers: dict[str, str]) -> None:
    _, store, path, base = served
    msg_id = stored_id(path)
    before = orders_max(store)
    async with aiohttp.ClientSession(base_url=base) as session:
        async with session.post(f"/api/messages/{msg_id}/resend", json={}, headers=headers) as response:
            body = await response.json()
            assert (response.status, body["error"]) == (403, "csrf"), body
            assert "X-RMQ-CSRF-Token" in body["message"] and "/api/csrf-token" in body["message"]
        assert orders_max(store) == before
        token = await csrf_headers(session)
        assert list(token) == ["X-RMQ-CSRF-Token"] and len(token["X-RMQ-CSRF-Token"]) >= 40
        async with session.post(f"/api/messages/{msg_id}/resend", json={}, headers=token) as response:
            assert response.status == 201
        assert orders_max(store) == before + 1


async def test_the_token_is_not_cached_and_differs_per_server(served: Any, tmp_path: Path) -> None:
    _, _, _, base = served
    async with aiohttp.ClientSession(base_url=base) as session:
        async with session.get("/api/csrf-token") as response:
            assert response.headers["Cache-Control"] == "no-store"
            assert "Access-Control-Allow-Origin" not in response.headers
            first = (await response.json())["csrfToken"]
    other_store = WritableStore(StoreConfig.for_store(tmp_path / "other", broker_name="b2"))
    other = QueryServer(other_store.reader, ServerSettings(port=0, broker_name="b2", http_port=0))
    await other.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{other.http_port}") as session:
            assert (await csrf_headers(session))["X-RMQ-CSRF-Token"] != first
    finally:
        await other.stop()
        other_store.close()


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("Example.COM:8080", "example.com"),
        ("example.com.", "example.com"),
        ("[::1]:10913", "::1"),
        ("[fe80::1]", "fe80::1"),
        ("10.0.0.1", "10.0.0.1"),
        ("", None),
        ("example.com:http", None),
        ("[::1", None),
        ("[::1]x", None),
        ("a/b", None),
        ("user@example.com", None),
    ],
)
def test_host_name_of_a_header(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_allowed_hosts() -> None:
    allowed = AllowedHosts(["0.0.0.0", "broker-1.corp", "Console.Example."])
    for header in (None, "localhost", "x.localhost:1", "127.0.0.1:1", "[::1]", "192.168.3.4:80",
                   "broker-1.corp:10913", "console.example", "CONSOLE.example.:9"):  # fmt: skip
        assert allowed.allows(header), header
    for header in ("attacker.example", "attacker.example:10913", "localhost.attacker.example", "corp",
                   "broker-1.corp.attacker.example", "", "bad:port", "[::1"):  # fmt: skip
        assert not allowed.allows(header), header


def test_serve_takes_allowed_names_and_refuses_a_port_or_scheme(tmp_path: Path) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--store", str(tmp_path), "--http-allow-host", "console.example", "--http-allow-host", "[::1]"]
    )
    assert settings_from(args, config_from_args(args)).http_allowed_hosts == ("console.example", "::1")
    for bad in ("console.example:8080", "http://console.example", "*.example"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--http-allow-host", bad])
