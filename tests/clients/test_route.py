"""Topic routes in both JSON forms a Java name server writes, and the broker the client picks."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.errors import RouteDecodeError
from clients.route import BrokerData, decode_route, quote_bare_keys


@pytest.mark.parametrize("form", ["legacy", "standard"])
def test_route_vectors(vectors_dir: Path, form: str) -> None:
    route = decode_route((vectors_dir / f"topic_route_{form}.json.bin").read_bytes())
    (broker,) = route.broker_datas
    assert (broker.broker_name, broker.cluster) == ("broker-a", "DefaultCluster")
    assert broker.broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route.broker_addrs() == ["127.0.0.1:10911"]
    assert route.broker_addrs("OtherCluster") == []
    assert route.queue_datas is not None and route.queue_datas[0].read_queue_nums == 4


#: The broker address the name server's routes named in each capture: the write-path captures
#: (``v4_send*``) dialled their recording proxy on 20911, every other capture 10911 (vectors/README.md).
def _captured_broker(scenario: str) -> str:
    return "127.0.0.1:20911" if scenario.startswith("v4_send") else "127.0.0.1:10911"


def test_routes_the_real_name_server_sent(vectors_dir: Path) -> None:
    seen = 0
    for frames in sorted((vectors_dir / "wire").glob("*/frames.json")):
        for frame in json.loads(frames.read_text(encoding="utf-8")):
            text = frame.get("bodyText") or ""
            if text.startswith('{"brokerDatas"'):
                expected = _captured_broker(frames.parent.name)
                assert decode_route(text.encode()).broker_addrs() == [expected]
                seen += 1
    assert seen >= 10


def test_replica_is_chosen_when_there_is_no_master() -> None:
    broker = BrokerData(broker_name="b", broker_addrs={1: "h:1", 2: "h:2"})
    assert broker.select_broker_addr(random.Random(0)) in {"h:1", "h:2"}
    assert BrokerData(broker_name="b").select_broker_addr() is None


@pytest.mark.parametrize("body", [b"", b"not json", b'{"brokerDatas": 5}', b"\xff\xfe"])
def test_bad_route_bodies(body: bytes) -> None:
    with pytest.raises(RouteDecodeError):
        decode_route(body)


_text = st.text(alphabet=st.sampled_from('ab{}:,"\\0123 -'), max_size=12)


@given(st.dictionaries(st.integers(-5, 10**12), _text, max_size=4), _text)
def test_bare_keys_are_quoted_and_strings_left_alone(addrs: dict[int, str], name: str) -> None:
    def body(key_text) -> str:
        pairs = ",".join(f"{key_text(k)}:{json.dumps(v)}" for k, v in addrs.items())
        return f'{{"brokerDatas":[{{"brokerAddrs":{{{pairs}}},"brokerName":{json.dumps(name)}}}]}}'

    legacy, standard = body(str), body(lambda k: f'"{k}"')
    assert quote_bare_keys(legacy) == standard
    assert quote_bare_keys(standard) == standard
    route = decode_route(legacy.encode())
    assert route.broker_datas[0].broker_addrs == addrs
    assert route.broker_datas[0].broker_name == name
