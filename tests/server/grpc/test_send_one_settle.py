"""A SendMessage of N messages is one append and one settle, as a remoting batch is (issue 33).

``GrpcWriter.send`` turns the request's messages into records and stores them with one
``WritableStore.put``: one ``StoreWriter.put_batch`` and one settle (the reput's dispatch, the
CommitLog refresh, the index audit) for all of them, every one in its consume queue when it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.broker.writable_store import WritableStore
from server.grpc.conversion import to_broker_message
from server.grpc.sending import GrpcWriter
from store.config.store_config import StoreConfig
from tests.support.grpc_calls import send_request

TOPIC = "Plain"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WritableStore]:
    config = StoreConfig.for_store(tmp_path / "store", max_message_size=4096, broker_name="b1")
    store = WritableStore(config)
    store.create_topic(TOPIC, 4)
    try:
        yield store
    finally:
        store.close()


def counting(obj: Any, name: str) -> list[int]:
    """Count the calls of ``obj.name`` (an instance attribute shadowing the method)."""
    calls: list[int] = []
    method = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return method(*args, **kwargs)

    setattr(obj, name, counted)
    return calls


def test_a_send_message_of_ten_messages_is_one_append_and_one_settle(store: WritableStore) -> None:
    request = send_request(TOPIC)
    template = request.messages[0]
    del request.messages[:]
    for i in range(10):
        message = request.messages.add()
        message.CopyFrom(template)
        message.body = b"m%d" % i
        message.system_properties.message_id = f"01ONESETTLE{i:017d}"
    messages = [
        to_broker_message(m, peer_host="127.0.0.1:50000", now_ms=0, delays={1: 1000})
        for m in request.messages
    ]
    writer = GrpcWriter(store, cluster="DefaultCluster")
    batches = counting(store.writer, "put_batch")
    settles = counting(store, "settle")
    stored = writer.send(messages, 2, ("127.0.0.1", 50000))
    assert (len(batches), len(settles)) == (1, 1)
    assert [s.queue_offset for s in stored] == list(range(10))
    assert store.reader.max_offset(TOPIC, 2) == 10  # every one readable when the call returns
