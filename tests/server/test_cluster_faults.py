"""Faults on demand, per broker: busy, delayMs and drop as a client sees them, and the HTTP API."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.errors import TransportError
from clients.producer import Producer, SendResult
from clients.response_errors import SystemBusyError
from clients.testkit.cluster import RmqCluster
from server.faults import Faults, FaultSpecError
from server.namesrv.route_watch import MAX_WAIT_SECONDS
from tests.support.route_poller import RoutePoller


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RmqCluster]:
    with RmqCluster(tmp_path / "stores", brokers=2, http=True) as made:
        made.create_topic("F", queues=2)
        yield made


def send(cluster: RmqCluster, body: bytes = b"x", timeout: float = 3.0) -> SendResult:
    async def go() -> SendResult:
        producer = Producer(cluster.namesrv_address, timeout=timeout)
        try:
            result = await producer.send("F", body)
            assert result is not None
            return result
        finally:
            await producer.close()

    return cluster.run(go())


def on_every_broker(cluster: RmqCluster, **faults: object) -> None:
    for name in cluster.broker_addresses:
        cluster.set_faults(name, **faults)  # type: ignore[arg-type]


def test_busy_answers_sends_system_busy_and_clearing_serves_again(cluster: RmqCluster) -> None:
    on_every_broker(cluster, busy=1.0)
    with pytest.raises(SystemBusyError) as caught:
        send(cluster)
    assert caught.value.code == 2
    for name in cluster.broker_addresses:
        cluster.clear_faults(name)
    assert send(cluster).queue_offset >= 0


def test_delay_holds_each_answer(cluster: RmqCluster) -> None:
    on_every_broker(cluster, delay_ms=400)
    started = time.monotonic()
    send(cluster)
    assert time.monotonic() - started >= 0.4
    for name in cluster.broker_addresses:
        cluster.clear_faults(name)
    started = time.monotonic()
    send(cluster)
    assert time.monotonic() - started < 0.4


def test_drop_resets_the_connection_instead_of_answering(cluster: RmqCluster) -> None:
    on_every_broker(cluster, drop=1.0)
    with pytest.raises(TransportError):
        send(cluster, timeout=2.0)
    for name in cluster.broker_addresses:
        cluster.clear_faults(name)
    send(cluster)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({"busy": 1.5}, "busy"),
        ({"busy": True}, "busy"),
        ({"drop": -0.1}, "drop"),
        ({"delayMs": 60_001}, "delayMs"),
        ({"delayMs": 1.5}, "delayMs"),
        ({"down": "yes"}, "down"),
        ({"slow": 1}, "slow"),
    ],
)
def test_a_bad_fault_names_its_field(body: object, field: str) -> None:
    with pytest.raises(FaultSpecError) as caught:
        Faults.from_json(body)
    assert caught.value.field == field


def _http(
    cluster: RmqCluster,
    method: str,
    path: str,
    body: object = None,
    *,
    token: bool = True,
    content_type: str = "application/json",
) -> tuple[int, dict]:
    headers = {"Content-Type": content_type}
    if token:
        with urllib.request.urlopen(cluster.http_url + "api/csrf-token", timeout=5) as answer:
            headers["X-RMQ-CSRF-Token"] = json.load(answer)["csrfToken"]
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(
        cluster.http_url + path.lstrip("/"), data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_faults_over_http(cluster: RmqCluster) -> None:
    assert _http(cluster, "GET", "/api/brokers/broker-b/faults") == (
        200,
        {"brokerName": "broker-b", "faults": {"down": False, "busy": 0.0, "delayMs": 0, "drop": 0.0}},
    )
    status, answer = _http(cluster, "POST", "/api/brokers/broker-b/faults", {"busy": 1, "delayMs": 10})
    assert status == 200
    assert answer["faults"] == {"down": False, "busy": 1.0, "delayMs": 10, "drop": 0.0}
    assert cluster.faults("broker-b") == Faults(busy=1.0, delay_ms=10)
    status, answer = _http(cluster, "POST", "/api/brokers/broker-a/faults", {"down": True})
    assert (status, answer["faults"]["down"]) == (200, True)
    # broker-a's own remoting port is closed, its HTTP port (the cluster's) still answers
    assert _http(cluster, "GET", "/api/brokers/broker-a/faults")[1]["faults"]["down"] is True
    status, answer = _http(cluster, "DELETE", "/api/brokers/broker-a/faults")
    assert (status, answer["faults"]["down"]) == (200, False)
    assert cluster.faults("broker-a") == Faults()


def test_down_over_http_says_how_long_a_clear_would_wait_and_the_clear_how_long_it_did(
    cluster: RmqCluster,
) -> None:
    """A clear of ``down`` waits for the clients told the broker's routes to see it gone (at most
    ``MAX_WAIT_SECONDS`` after the down): the down's answer and a GET say how long at most and for
    whom, the DELETE how long it waited. A client whose connection closed holds nothing."""
    poller = RoutePoller(cluster.namesrv_address)
    try:
        assert poller.poll("F") == ["broker-a", "broker-b"]
        host, port = poller.sock.getsockname()[:2]
        peer = f"{host}:{port}"
        status, answer = _http(cluster, "POST", "/api/brokers/broker-a/faults", {"down": True})
        assert status == 200
        comeback = answer["comeback"]
        assert (comeback["clientsToSeeItGone"], comeback["waitingFor"]) == (1, [f"{peer} F"])
        assert 0 < comeback["withinMs"] <= MAX_WAIT_SECONDS * 1000
        status, answer = _http(cluster, "GET", "/api/brokers/broker-a/faults")
        assert answer["comeback"]["clientsToSeeItGone"] == 1
        assert answer["comeback"]["withinMs"] <= comeback["withinMs"]
    finally:
        poller.close()
    for _ in range(100):  # the name server sees the close on its loop
        answer = _http(cluster, "GET", "/api/brokers/broker-a/faults")[1]
        if answer["comeback"]["clientsToSeeItGone"] == 0:
            break
        time.sleep(0.02)
    assert answer["comeback"] == {"withinMs": 0, "clientsToSeeItGone": 0, "waitingFor": []}
    status, answer = _http(cluster, "DELETE", "/api/brokers/broker-a/faults")
    assert (status, answer["faults"]["down"]) == (200, False)
    assert "comeback" not in answer
    assert 0 <= answer["waitedMs"] < 2000
    # not down: no comeback, and a clear of no ``down`` waited for nothing to report
    assert "comeback" not in _http(cluster, "GET", "/api/brokers/broker-b/faults")[1]
    assert "waitedMs" not in _http(cluster, "DELETE", "/api/brokers/broker-b/faults")[1]


def test_bad_fault_requests_over_http_are_4xx_with_a_message(cluster: RmqCluster) -> None:
    status, answer = _http(cluster, "GET", "/api/brokers/broker-z/faults")
    assert status == 404 and "broker-z" in answer["message"] and "broker-a" in answer["message"]
    status, answer = _http(cluster, "POST", "/api/brokers/broker-a/faults", {"busy": 2})
    assert (status, answer["parameter"]) == (400, "busy")
    assert "fraction" in answer["message"]
    status, answer = _http(cluster, "POST", "/api/brokers/broker-a/faults", b"{not json")
    assert (status, answer["parameter"]) == (400, "body")
    status, _ = _http(
        cluster, "POST", "/api/brokers/broker-a/faults", {"down": True}, content_type="text/plain"
    )
    assert status == 415
    status, _ = _http(cluster, "POST", "/api/brokers/broker-a/faults", {"down": True}, token=False)
    assert status == 403
    assert cluster.faults("broker-a") == Faults()  # nothing refused was put in force


def test_busy_answers_pulls_system_busy(cluster: RmqCluster) -> None:
    from clients.client import RemotingClient
    from protocol.codes import RequestCode

    cluster.set_faults("broker-a", busy=1.0)

    async def pull() -> int:
        client = RemotingClient()
        try:
            fields = {
                "consumerGroup": "g",
                "topic": "F",
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "1",
                "sysFlag": "0",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subVersion": "0",
            }
            response = await client.invoke(
                cluster.broker_addresses["broker-a"], RequestCode.PULL_MESSAGE, fields
            )
            return response.code
        finally:
            await client.close()

    assert cluster.run(pull()) == 2
    cluster.clear_faults("broker-a")
    assert cluster.run(pull()) != 2


def test_the_kit_fixture_names_the_cluster(rmq_cluster: RmqCluster) -> None:
    import os

    assert os.environ["NAMESRV_ADDR"] == rmq_cluster.namesrv_address
    assert sorted(rmq_cluster.broker_addresses) == ["broker-a", "broker-b"]
    assert rmq_cluster.faults("broker-b") == Faults()


def test_a_connection_accepted_as_the_broker_goes_down_is_reset(cluster: RmqCluster) -> None:
    """asyncio makes a protocol a loop turn after the accept: one accepted just before ``suspend``
    closed the ports must not be served by the broker that is down."""
    server = cluster.cluster.broker("broker-a").server
    cluster.set_faults("broker-a", down=True)
    protocol = cluster.run(_make_protocol(server))
    aborted: list[bool] = []

    class Transport:
        def get_extra_info(self, name: str) -> None:
            return None

        def abort(self) -> None:
            aborted.append(True)

    protocol.connection_made(Transport())  # type: ignore[arg-type]
    assert aborted == [True]
    cluster.clear_faults("broker-a")
    assert not server.suspended


async def _make_protocol(server: object) -> object:
    return server._protocol()  # type: ignore[attr-defined]
