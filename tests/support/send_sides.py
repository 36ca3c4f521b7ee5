"""SEND frames as the official clients write them, and a writable server side to feed them: shared by
the compiled request path's SEND tests (``tests/server/remoting/test_request_path_send.py``, the
plain SENDs' ``test_request_path_plain.py``)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from protocol.codes import RequestCode
from protocol.send_message import SendMessageRequestHeader, client_properties, encode_batch_body
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import WritePath
from server.request_stats import RequestStats
from store.config.store_config import StoreConfig
from tests.support.request_path import frame
from tests.support.writable_sides import WritableSide, same_both_ways

SEND = int(RequestCode.SEND_MESSAGE_V2)
SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
TOPIC = "SendT"


def send(
    opaque: int = 1,
    *,
    topic: str = TOPIC,
    queue_id: Any = 0,
    properties: str | None = "default",
    body: bytes = b"hello",
    flag: int = 0,
    ensure_ascii: bool = False,
    code: int = SEND,
    rpc_flag: int = 0,
    drop: tuple[str, ...] = (),
    **fields: Any,
) -> bytes:
    """A SEND_MESSAGE_V2 as a 4.9.7 Java producer writes it (fastjson writes the properties'
    separators 1 and 2 as ``\\u0001`` and ``\\u0002``); ``fields`` set or add one-letter fields
    as they are, ``drop`` removes some."""
    if properties == "default":
        properties = client_properties(f"key-{opaque}", "TagA", None, f"UNIQ{opaque:028d}")
    born = 1_700_000_000_000 + opaque
    header = SendMessageRequestHeader(
        "pg", topic, "TBW102", 4, 0, 0, born, flag, properties, 0, False, None, False, "b1"
    )  # fmt: skip
    ext = header.to_ext_fields(v2=True)
    ext["e"] = str(queue_id)
    for name in drop:
        ext.pop(name, None)
    ext.update({k: str(v) for k, v in fields.items()})
    head = {"code": code, "extFields": ext, "flag": rpc_flag, "language": "JAVA", "opaque": opaque}
    head.update({"serializeTypeCurrentRPC": "JSON", "version": 407})
    return frame(json.dumps(head, separators=(",", ":"), ensure_ascii=ensure_ascii), body)


def send_v1(opaque: int, *, topic: str = TOPIC, queue_id: int = 0, body: bytes = b"go") -> bytes:
    """A SEND_MESSAGE (10) as the Go client (rocketmq-client-go v2) writes a single message: the
    long field names, its own top-level fields (language GO, an empty remark)."""
    properties = client_properties(f"go-{opaque}", "TagG", None, f"UNIQ{opaque:028d}")
    born = 1_700_000_000_000 + opaque
    header = SendMessageRequestHeader(
        "go_pg", topic, "TBW102", 4, queue_id, 0, born, 0, properties, 0, False, 16, False, "b1"
    )  # fmt: skip
    head = {"code": int(RequestCode.SEND_MESSAGE), "language": "GO", "version": 317, "opaque": opaque}
    head.update({"flag": 0, "remark": "", "extFields": header.to_ext_fields(v2=False)})
    return frame(json.dumps(head, separators=(",", ":")), body)


def batch(opaque: int, n: int, *, code: int = SEND_BATCH, queue_id: int = 0, **fields: Any) -> bytes:
    """A batch of ``n`` messages as the Java producer sends ``send(Collection)``: the V2 header with
    ``m`` true (and the batch's own properties) and ``MessageDecoder.encodeMessages``' body."""
    messages = [
        (i, b"m%d" % i, {"KEYS": f"b{opaque}-{i}", "UNIQ_KEY": f"UNIQ{opaque:024d}{i:04d}", "WAIT": "true"})
        for i in range(n)
    ]
    return send(opaque, code=code, queue_id=queue_id, body=encode_batch_body(messages), m="true", **fields)


def get_max_offset(topic: str, queue_id: int, opaque: int) -> bytes:
    fields = {"queueId": str(queue_id), "topic": topic}
    head = {"code": int(RequestCode.GET_MAX_OFFSET), "extFields": fields, "flag": 0, "language": "JAVA"}
    head.update({"opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 407})
    return frame(json.dumps(head, separators=(",", ":")))


def view(offset: int, opaque: int) -> bytes:
    head = {"code": int(RequestCode.VIEW_MESSAGE_BY_ID), "extFields": {"offset": str(offset)}, "flag": 0}
    head.update({"language": "JAVA", "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 407})
    return frame(json.dumps(head, separators=(",", ":")))


class Side(WritableSide):
    """A writable side over the store at ``root``."""

    def __init__(self, server: QueryServer, store: WritableStore, hook: WritePath, root: Path) -> None:
        super().__init__(server, store, hook)
        self.root = root

    async def feed(self, reads: list[bytes], settle_s: float = 2.0) -> tuple[bytes, list[str]]:
        # a SEND that created its topic is answered once the table is saved, on its own thread
        return await super().feed(reads, settle_s)

    def stored(self) -> tuple[Any, ...]:
        """The CommitLog's bytes, the queues' ends, the topics and the ``/metrics`` counts."""
        commitlog = b"".join(p.read_bytes() for p in sorted((self.root / "commitlog").iterdir()))
        reader = self.store.reader
        topics = sorted(self.store.reader.topics())
        ends = {(t, q): reader.max_offset(t, q) for t in topics for q in range(8)}
        requests = self.dispatcher.stats
        assert requests is not None
        return commitlog.rstrip(b"\0"), ends, dict(requests.requests), dict(requests.errors)


async def open_side(root: Path, compiled_path: bool, *, auto_create: bool = True) -> Side:
    config = StoreConfig.for_store(root, mapped_file_size_commit_log=1 << 20, max_message_size=1 << 12)
    # The clock stands still: the compiled path stamps a call's plain SENDs with one store timestamp
    # (one write), the Python path asks the clock for each SEND (and for its timer's now).
    clock = itertools.repeat(1_700_000_000_000).__next__
    store = WritableStore(config, clock=clock, auto_create_topics=auto_create)
    hook = WritePath(store)
    server = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=hook)
    await server.start()
    store.set_store_address("127.0.0.1", 10911)  # the same STOREHOST in both stores' records
    store.create_topic(TOPIC, 4)
    side = Side(server, store, hook, root)
    side.dispatcher.stats = RequestStats()
    side.use_compiled_path(compiled_path)
    return side


@contextlib.asynccontextmanager
async def open_sides(
    root: Path, *, auto_create: bool = True, multi_tag: str | None = None
) -> AsyncIterator[tuple[Side, Side]]:
    """(the compiled side, the reference side) over ``root/fast`` and ``root/reference``, both stopped
    at the end; with ``multi_tag``, a topic of that name with 8 queues and ``topicFilterType``
    MULTI_TAG on both."""
    fast = await open_side(root / "fast", True, auto_create=auto_create)
    reference = await open_side(root / "reference", False, auto_create=auto_create)
    try:
        if multi_tag is not None:
            for side in (fast, reference):
                side.store.create_topic(multi_tag, 8)
                config = side.store.topics.get(multi_tag)
                assert config is not None
                side.store.topics.put(dataclasses.replace(config, topic_filter_type="MULTI_TAG"), 0)
        yield fast, reference
    finally:
        for side in (fast, reference):
            await side.stop()


async def both(sides: tuple[Side, Side], reads: list[bytes]) -> bytes:
    """``reads`` fed to both sides: the answers, the same on both, and the same ``Side.stored``."""
    return await same_both_ways(sides[0], sides[1], reads, Side.stored)
