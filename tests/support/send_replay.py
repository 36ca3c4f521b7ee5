"""Replaying the 4.9.7 producer's captured SENDs through the send processor, and the check that the
result is the Java broker's store and answers, byte for byte.

The frames of ``vectors/wire/v4_send`` and ``v4_send_v1header`` (captured between the 4.9.7
producer and a 4.9.7 broker that started from an empty store) are fed to the send processor over an
empty store with the broker's settings (``java-4.9.7-send.broker.conf``), the store clock pinned to
the store timestamps the broker recorded and each request's born host set to the socket the broker
saw. Used by ``tests/server/test_send_replay.py`` (the frames as captured) and
``tests/server/test_send_v5_client.py`` (the same SENDs in the 5.3.3 client's form).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from protocol.codes import RequestCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from protocol.java_hashmap import as_java_hashmap
from server.broker.writable_store import WritableStore
from server.remoting.processors.send_message import SendMessageProcessor
from store.config.store_config import StoreConfig

#: The captured scenarios the replay feeds, in the order the broker received them.
SEND_SCENARIOS = ("v4_send", "v4_send_v1header")

SEND_CODES = {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}


def _frame(path: Path):
    (command,) = FrameDecoder().feed(path.read_bytes())
    return command


def _host(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def send_expected(stores_dir: Path) -> dict:
    """``java-4.9.7-send.expected.json``: every SEND's records and every record's raw sha256."""
    return json.loads((stores_dir / "java-4.9.7-send.expected.json").read_text(encoding="utf-8"))


def _config(root: Path, stores_dir: Path) -> StoreConfig:
    java = StoreConfig.load(stores_dir / "java-4.9.7-send.broker.conf")
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=java.mapped_file_size_commit_log,
        max_hash_slot_num=java.max_hash_slot_num,
        max_index_num=java.max_index_num,
        max_message_size=java.max_message_size,
        mapped_file_size_consume_queue=java.mapped_file_size_consume_queue,
        broker_ip1="127.0.0.1",
        listen_port=10911,
        broker_name="broker-a",
    )


def replay(
    tmp_path: Path,
    stores_dir: Path,
    vectors_dir: Path,
    expected: dict,
    transform: Callable[[RemotingCommand], RemotingCommand] | None = None,
) -> tuple[StoreConfig, list]:
    """Run every captured SEND through the processor; returns the config and (request, response, answer).

    ``transform`` rewrites each captured SEND first (another client's form of the same request).
    """
    by_file = {}
    for send in expected["sends"]:
        for req in send["requests"]:
            by_file[(req["scenario"], req["file"])] = send
    records = {r["commitLogOffset"]: r for r in expected["records"]}
    now = [0]
    config = _config(tmp_path / "store", stores_dir)
    exchanges = []
    with WritableStore(config, clock=lambda: now[0]) as store:
        store.create_topic("SendTopic", 4)  # mqadmin updateTopic before the recording
        processor = SendMessageProcessor(
            store, cluster="DefaultCluster", max_message_size=config.max_message_size
        )
        for scenario in SEND_SCENARIOS:
            if scenario == "v4_send_v1header":
                delivery = next(
                    r for r in expected["records"] if r["origin"].endswith("(scheduled delivery)")
                )
                now[0] = delivery["storeTimestamp"]
                assert [a.offset for a in store.deliver_due()] == [delivery["commitLogOffset"]]
            wire = vectors_dir / "wire" / scenario
            frames = sorted(wire.glob("*.bin"))
            for i, path in enumerate(frames):
                request = _frame(path)
                if request.is_response or request.code not in SEND_CODES:
                    continue
                send = by_file[(scenario, path.name)]
                stored = [records[r["commitLogOffset"]] for r in send["records"]]
                born = _host(stored[0]["bornHost"]) if stored else ("127.0.0.1", 1)
                if stored:
                    now[0] = stored[0]["storeTimestamp"]
                if transform is not None:
                    request = transform(request)
                answer = processor.handle(request, born)
                response = None
                if not request.is_oneway:
                    response = frames[i + 1]
                    assert "_resp_" in response.name
                exchanges.append((path, response, answer))
    return config, exchanges


def check_against_java(config: StoreConfig, exchanges: list, stores_dir: Path, expected: dict) -> None:
    """The answers are the recorded response frames and the store is the Java broker's, byte for byte."""
    assert len(exchanges) == 12
    for request_path, response_path, answer in exchanges:
        if response_path is None:
            continue  # oneway: the connection never sends an answer (tests/server/test_send_server.py)
        # The broker answers in the request's serialization; the recorded answers are JSON, whose
        # header is one HashMap (over ROCKETMQ the FastCodesHeader's fields come first).
        fields = None if answer.ext_fields is None else as_java_hashmap(answer.ext_fields)
        as_json = dataclasses.replace(answer, serialize_type=SerializeType.JSON, ext_fields=fields)
        assert encode_frame(as_json) == response_path.read_bytes(), request_path.name
    data = (config.store_path_commit_log / "00000000000000000000").read_bytes()
    for rec in expected["records"]:
        raw = data[rec["commitLogOffset"] : rec["commitLogOffset"] + rec["size"]]
        assert hashlib.sha256(raw).hexdigest() == rec["rawSha256"], rec["origin"]
    java = (stores_dir / "java-4.9.7-send" / "commitlog" / "00000000000000000000").read_bytes()
    assert data == java
    # Dispatched as the reput does: the same consume queues (the scheduled record's tagsCode is its
    # delivery time) and the same index entries.
    java_root = stores_dir / "java-4.9.7-send"
    java_cq = sorted(p.relative_to(java_root) for p in (java_root / "consumequeue").rglob("*") if p.is_file())
    root = config.store_path_root_dir
    ours_cq = sorted(p.relative_to(root) for p in (root / "consumequeue").rglob("*") if p.is_file())
    assert ours_cq == java_cq
    for rel in java_cq:
        assert (root / rel).read_bytes() == (java_root / rel).read_bytes(), rel
    (java_index,) = (java_root / "index").iterdir()
    (our_index,) = (root / "index").iterdir()
    assert our_index.read_bytes() == java_index.read_bytes()
