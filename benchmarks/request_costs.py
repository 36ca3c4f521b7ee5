"""Where the microseconds of one QUERY_MESSAGE and one VIEW_MESSAGE_BY_ID go, stage by stage (and
the whole of GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, a PULL and a SEND).

    python -m benchmarks.request_costs [--store-conf tests/golden/stores/java-4.9.7-a.broker.conf]
    python -m benchmarks.request_costs --batch   # only the batch SEND rows (``batch_rows``)

In-process and single-threaded (no sockets): each stage of the request path is timed on its own over
the golden store, with the compiled accelerators and with the pure-Python references
(``RMQ_PURE_PYTHON=1``, run in a child process), best of 5 rounds of CPU time. VIEW is a random
record of the store; QUERY is a random (topic, key) from its KEYS and UNIQ_KEYs with mqadmin's
arguments (maxNum 64, whole time range), as ``rmqblast --kind key`` sends them. "through the
connection" feeds reads of 8 pipelined VIEW frames to ``server.remoting.connection.RemotingConnection`` over
a transport that only counts writes: decode, dispatch, encode and the connection's own bookkeeping
(with the compiled request path, ``server.remoting.request_path``, when it is built: one C call per
read); the same for QUERY.
What the table leaves out is the event loop and the sockets: compare "whole request" with
1 / (requests/s) of a 16 x 8 run (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONF = REPO / "tests" / "golden" / "stores" / "java-4.9.7-a.broker.conf"
MAX = 2**63 - 1


def per_call_us(fn: Callable[[int], object], n: int, rounds: int = 5) -> float:
    """Best CPU time per call over ``rounds`` rounds of ``n`` calls (``fn(i)`` for i in range(n))."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for i in range(n):
            fn(i)
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


#: Requests per read in the "through the connection" stage (rmqblast's depth).
PIPELINED = 8


class _CountingTransport:
    """Just enough of an ``asyncio.Transport`` for ``RemotingConnection``: counts writes."""

    def __init__(self) -> None:
        self.writes = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: object) -> None:
        self.writes += 1

    def writelines(self, parts: object) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def through_connection_us(dispatcher: object, chunks: list[bytes]) -> float:
    """CPU per request of ``data_received`` over reads of ``PIPELINED`` frames (answers written)."""
    return asyncio.run(through_connection_async_us(dispatcher, chunks))


def measure(conf: Path) -> dict[str, float]:
    from clients.samples import sample_store
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.custom_headers import QueryMessageRequestHeader, ViewMessageRequestHeader
    from protocol.frame import FrameDecoder, encode_frame, encode_frame_parts
    from server.app import ServerSettings, build_dispatcher
    from server.identity import BrokerIdentity
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    config = StoreConfig.load(conf)
    samples = sample_store(config.store_path_root_dir)
    rng = random.Random(1)
    n = 2000
    offsets = [rng.choice(samples.offsets) for _ in range(n)]
    keys = [rng.choice(samples.keys + samples.unique_keys) for _ in range(n)]

    def request(code: int, fields: dict[str, str], opaque: int) -> RemotingCommand:
        return RemotingCommand(
            code, LanguageCode.JAVA, 407, opaque, 0, None, fields, None, SerializeType.JSON
        )

    views = [request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(o)}, i) for i, o in enumerate(offsets)]
    queries = [
        request(
            RequestCode.QUERY_MESSAGE,
            {"topic": t, "key": k, "maxNum": "64", "beginTimestamp": "0", "endTimestamp": str(MAX)},
            i,
        )
        for i, (t, k) in enumerate(keys)
    ]
    view_frames = [encode_frame(r) for r in views]
    query_frames = [encode_frame(r) for r in queries]
    out: dict[str, float] = {}
    with MessageStore.open(config) as store:
        identity = BrokerIdentity(
            cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
        )
        dispatcher = build_dispatcher(store, identity, ServerSettings())
        records = [store.view_message(o) for o in offsets]
        view_answers = [dispatcher.dispatch(r) for r in views]
        query_answers = [dispatcher.dispatch(r) for r in queries]
        out["view: decode frame (FrameDecoder.feed, JSON header)"] = per_call_us(
            lambda i: FrameDecoder().feed(view_frames[i]), n
        )
        out["view: parse header fields"] = per_call_us(
            lambda i: ViewMessageRequestHeader.from_ext_fields(views[i].ext_fields), n
        )
        out["view: store.view_message (read the record)"] = per_call_us(
            lambda i: store.view_message(offsets[i]), n
        )
        out["view: copy the record (bytes)"] = per_call_us(lambda i: bytes(records[i]), n)  # type: ignore[arg-type]
        out["view: store.view_message_copy (read + check + copy: what the processor calls)"] = per_call_us(
            lambda i: store.view_message_copy(offsets[i], 1 << 24), n
        )
        out["view: processor (parse + read + copy + make_response)"] = per_call_us(
            lambda i: dispatcher.dispatch(views[i]), n
        )
        out["view: encode answer (encode_frame_parts)"] = per_call_us(
            lambda i: encode_frame_parts(view_answers[i]), n
        )  # type: ignore[arg-type]
        out["view: whole request in-process (decode + dispatch + encode)"] = per_call_us(
            lambda i: encode_frame_parts(dispatcher.dispatch(FrameDecoder().feed(view_frames[i])[0])),
            n,  # type: ignore[arg-type]
        )
        chunks = [b"".join(view_frames[i : i + PIPELINED]) for i in range(0, n, PIPELINED)]
        out[f"view: through the connection ({PIPELINED} pipelined per read, per request)"] = (
            through_connection_us(dispatcher, chunks)
        )
        headers = [QueryMessageRequestHeader.from_ext_fields(q.ext_fields) for q in queries]
        offs = [store.index.query_offsets(h.topic, h.key, 64, 0, MAX).phy_offsets for h in headers]
        for o in offs:
            o.sort()
        results = [store.query_message(h.topic, h.key, 64, 0, MAX) for h in headers]
        out["query: records per answer (mean)"] = sum(len(r.buffers) for r in results) / n
        out["query: decode frame (FrameDecoder.feed, JSON header)"] = per_call_us(
            lambda i: FrameDecoder().feed(query_frames[i]), n
        )
        out["query: parse header fields"] = per_call_us(
            lambda i: QueryMessageRequestHeader.from_ext_fields(queries[i].ext_fields), n
        )
        out["query: index lookup (query_offsets: hash, files, chain walks)"] = per_call_us(
            lambda i: store.index.query_offsets(headers[i].topic, headers[i].key, 64, 0, MAX), n
        )
        out["query: read and check the records (read_records)"] = per_call_us(
            lambda i: store.commitlog.read_records(offs[i]), n
        )
        out["query: store.query_message (all of the above but decode/parse)"] = per_call_us(
            lambda i: store.query_message(headers[i].topic, headers[i].key, 64, 0, MAX), n
        )
        out["query: join the records into the body"] = per_call_us(lambda i: b"".join(results[i].buffers), n)
        out["query: processor (parse + store + join + make_response)"] = per_call_us(
            lambda i: dispatcher.dispatch(queries[i]), n
        )
        out["query: encode answer (encode_frame_parts)"] = per_call_us(
            lambda i: encode_frame_parts(query_answers[i]), n
        )  # type: ignore[arg-type]
        out["query: whole request in-process (decode + dispatch + encode)"] = per_call_us(
            lambda i: encode_frame_parts(dispatcher.dispatch(FrameDecoder().feed(query_frames[i])[0])),
            n,  # type: ignore[arg-type]
        )
        query_chunks = [b"".join(query_frames[i : i + PIPELINED]) for i in range(0, n, PIPELINED)]
        out[f"query: through the connection ({PIPELINED} pipelined per read, per request)"] = (
            through_connection_us(dispatcher, query_chunks)
        )
        offset_rows(out, store, dispatcher, request, rng, n)
    return out


def offset_rows(
    out: dict[str, float],
    store: Any,
    dispatcher: Any,
    request: Callable[[int, dict[str, str], int], Any],
    rng: random.Random,
    n: int,
) -> None:
    """GET_MAX_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP over the store's queues (a random queue each;
    a search for a random store time between the queue's first and last), on the Python path and
    through the connection (the compiled request path when built)."""
    from protocol.codes import RequestCode
    from protocol.frame import FrameDecoder, encode_frame, encode_frame_parts

    queues = [(t, q) for t, nums in sorted(store.queue_nums().items()) for q in range(nums)]
    queues = [(t, q) for t, q in queues if store.max_offset(t, q) > 0]
    picked = [rng.choice(queues) for _ in range(n)]

    def span(t: str, q: int) -> tuple[int, int]:
        last = store.message_store_timestamp(t, q, store.max_offset(t, q) - 1)
        return store.earliest_message_time(t, q), last

    spans = {(t, q): span(t, q) for t, q in queues}
    for label, code, fields in (
        ("max offset", RequestCode.GET_MAX_OFFSET, lambda t, q: {"topic": t, "queueId": str(q)}),
        (
            "search offset by time",
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            lambda t, q: {"topic": t, "queueId": str(q), "timestamp": str(rng.randint(*spans[t, q]))},
        ),
    ):
        requests = [request(code, fields(t, q), i) for i, (t, q) in enumerate(picked)]
        frames = [encode_frame(r) for r in requests]
        out[f"{label}: whole request on the Python path (decode + dispatch + encode)"] = per_call_us(
            lambda i: encode_frame_parts(dispatcher.dispatch(FrameDecoder().feed(frames[i])[0])),  # noqa: B023
            n,
        )
        chunks = [b"".join(frames[i : i + PIPELINED]) for i in range(0, n, PIPELINED)]
        out[f"{label}: through the connection ({PIPELINED} pipelined per read, per request)"] = (
            through_connection_us(dispatcher, chunks)
        )


def pull_rows(conf: Path) -> dict[str, float]:
    """PULL_MESSAGE under ``serve --writable`` (the only server whose pulls the compiled path takes):
    a copy of the store opened writable, a pull of 32 records (``TopicA`` queue 1 from offset 0,
    ``TOOLS_CONSUMER``, tag ``*``, the commit-offset and subscription flags), per request through the
    connection with the server's dispatcher as it is and with its compiled path taken away."""
    import shutil
    import tempfile

    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from server.broker.writable_store import WritableStore
    from store.config.store_config import StoreConfig

    fields = {"consumerGroup": "TOOLS_CONSUMER", "topic": "TopicA", "queueId": "1", "queueOffset": "0",
              "maxMsgNums": "32", "sysFlag": "5", "commitOffset": "0", "suspendTimeoutMillis": "20000",
              "subscription": "*", "subVersion": "0", "expressionType": "TAG"}  # fmt: skip
    n = 800
    frames = [
        encode_frame(
            RemotingCommand(
                RequestCode.PULL_MESSAGE, LanguageCode.JAVA, 407, i, 0, None, fields, None, SerializeType.JSON
            )
        )
        for i in range(n)
    ]
    chunks = [b"".join(frames[i : i + PIPELINED]) for i in range(0, n, PIPELINED)]
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rmq-costs-") as tmp:
        source = StoreConfig.load(conf)
        shutil.copytree(source.store_path_root_dir, Path(tmp) / "store")
        root = Path(tmp) / "store"
        config = dataclasses.replace(
            source, store_path_root_dir=root, store_path_commit_log=root / "commitlog"
        )

        async def timed(dispatcher: Any) -> None:
            fast = dispatcher.fast_path
            for label, path in (("as served", fast), ("on the Python path", None)):
                dispatcher.fast_path = path
                out[
                    f"pull (32 records): through the connection, {label} ({PIPELINED} pipelined per read)"
                ] = await through_connection_async_us(dispatcher, chunks)
            dispatcher.fast_path = fast

        on_writable_server(WritableStore(config), timed)
    return out


def send_frames(n: int) -> list[bytes]:
    """``n`` SEND_MESSAGE_V2 frames as the Java producer sends them (``benchmarks.send_load``'s
    requests): CostTopic's 4 queues in turn, a 256-byte body, KEYS, TAGS and a fresh UNIQ_KEY."""
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, client_properties

    ids = UniqueIdGenerator()
    frames = []
    for i in range(n):
        header = SendMessageRequestHeader(
            "load_group", "CostTopic", "TBW102", 4, i % 4, 0, 1700000000000 + i, 0,
            client_properties(f"cost-{i}", "TagL", None, ids.next_id()), 0, False, None, False, "broker-a",
        )  # fmt: skip
        command = RemotingCommand(
            RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 407, i, 0, None,
            header.to_ext_fields(v2=True), b"x" * 256, SerializeType.JSON,
        )  # fmt: skip
        frames.append(encode_frame(command))
    return frames


def send_rows(per_read: int = PIPELINED) -> dict[str, float]:
    """SEND_MESSAGE_V2 under ``serve --writable``, on a fresh store with the test kit's geometry: a
    256-byte body with KEYS, TAGS and a fresh UNIQ_KEY as the Java producer sends them
    (``benchmarks.send_load``'s requests), per request through the connection, ``per_read`` of them
    in each read (1: a lone SEND, which pays a whole settle). Every SEND is stored and indexed
    before it is answered, so this is ``put_cost``'s put plus the request's own path: decode, the
    checks, the record's properties, the answer."""
    import tempfile

    from clients.testkit.server import kit_store_config
    from server.broker.writable_store import WritableStore

    n = 800
    frames = send_frames(n)
    chunks = [b"".join(frames[i : i + per_read]) for i in range(0, n, per_read)]
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rmq-costs-") as tmp:
        store = WritableStore(kit_store_config(Path(tmp) / "store"))
        store.create_topic("CostTopic")  # a SEND that creates its topic waits for topics.json: not timed

        async def timed(dispatcher: Any) -> None:
            out[
                f"send (256 bytes): through the connection ({per_read} pipelined per read)"
            ] = await through_connection_async_us(dispatcher, chunks, per_read=per_read)

        on_writable_server(store, timed)
    return out


def batch_rows(batches: int = 120, size: int = 32, body: int = 1024) -> dict[str, float]:
    """SEND_BATCH_MESSAGE under ``serve --writable``, one batch per read: ``size`` messages of
    ``body`` bytes, each with KEYS, TAGS and its own UNIQ_KEY, the batch header's properties
    ``WAIT=true`` (as the Java 4.9.7 producer's ``send(Collection)`` sends them); per batch and per
    message through the connection. Every message is stored and indexed before the answer."""
    import tempfile

    from clients.testkit.server import kit_store_config
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import encode_frame
    from protocol.message_id import UniqueIdGenerator
    from protocol.send_message import SendMessageRequestHeader, encode_batch_body
    from server.broker.writable_store import WritableStore

    ids = UniqueIdGenerator()
    chunks = []
    for b in range(batches):
        messages = [
            (0, b"x" * body, {"KEYS": f"batch-{b}-{m}", "TAGS": "TagB", "UNIQ_KEY": ids.next_id()})
            for m in range(size)
        ]
        header = SendMessageRequestHeader(
            "load_group", "CostTopic", "TBW102", 4, b % 4, 0, 1700000000000 + b, 0,
            "WAIT\x01true\x02", 0, False, None, True, "broker-a",
        )  # fmt: skip
        command = RemotingCommand(
            RequestCode.SEND_BATCH_MESSAGE, LanguageCode.JAVA, 407, b, 0, None,
            header.to_ext_fields(v2=True), encode_batch_body(messages), SerializeType.JSON,
        )  # fmt: skip
        chunks.append(encode_frame(command))
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rmq-costs-") as tmp:
        store = WritableStore(kit_store_config(Path(tmp) / "store"))
        store.create_topic("CostTopic")

        async def timed(dispatcher: Any) -> None:
            per_batch = await through_connection_async_us(dispatcher, chunks, per_read=1)
            out[f"batch send ({size} x {body} bytes): through the connection, per batch"] = per_batch
            out[f"batch send ({size} x {body} bytes): per message"] = per_batch / size
            per_turn = await through_connection_turns_us(dispatcher, chunks)
            out[f"batch send ({size} x {body} bytes): a loop turn per read, per batch"] = per_turn

        on_writable_server(store, timed)
    return out


def on_writable_server(store: Any, timed: Callable[[Any], Awaitable[None]]) -> None:
    """``timed(dispatcher)`` against ``serve --writable``'s dispatcher over ``store`` (a
    ``WritableStore``, closed after), the server started and stopped around it in its own loop."""
    from server.app import QueryServer, ServerSettings
    from server.remoting.write_path import write_path

    async def run() -> None:
        server = QueryServer(store.reader, ServerSettings(port=0), configure=write_path(store))
        await server.start()
        try:
            await timed(server.dispatcher)
        finally:
            await server.stop()

    try:
        asyncio.run(run())
    finally:
        store.close()


def _counted_connection(dispatcher: object) -> tuple[Any, _CountingTransport]:
    """A ``RemotingConnection`` of ``dispatcher`` made on a counting transport, as a server makes
    one (no idle timeout), and that transport."""
    from server.remoting.buffer_budget import BufferBudget
    from server.remoting.connection import RemotingConnection
    from server.remoting.refusal import IncompleteRequests
    from server.remoting.write_budget import WriteBudget

    transport = _CountingTransport()
    connection = RemotingConnection(
        dispatcher,  # type: ignore[arg-type]
        idle_timeout=0,
        budget=BufferBudget(),
        write_budget=WriteBudget(),
        incomplete=IncompleteRequests(),
    )
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


async def through_connection_async_us(
    dispatcher: object, chunks: list[bytes], per_read: int = PIPELINED
) -> float:
    """``through_connection_us`` inside a running loop (the writable server's, or its own); ``per_read``
    requests in each chunk."""
    connection, transport = _counted_connection(dispatcher)
    each_read = per_call_us(lambda i: connection.data_received(chunks[i]), len(chunks))
    assert transport.writes >= 5 * len(chunks)  # every read was answered
    connection.connection_lost(None)
    return each_read / per_read


async def through_connection_turns_us(dispatcher: object, chunks: list[bytes], rounds: int = 5) -> float:
    """CPU per read of ``chunks`` (one request each) through a connection, the loop turning once
    after each read (``asyncio.sleep(0)``), best of ``rounds``: what a synchronous client's
    requests cost a server, whose every read is a turn of its own. The once-a-turn work of a
    writable store's settle (``MessageStore.once_per_turn``: the index audit, the look at resident
    memory) and the loop's callbacks are in it; ``through_connection_async_us``'s reads all fall in
    one turn, so its settles skip that work after the first."""
    connection, transport = _counted_connection(dispatcher)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for chunk in chunks:
            connection.data_received(chunk)
            await asyncio.sleep(0)
        best = min(best, time.process_time() - t0)
    assert transport.writes >= rounds * len(chunks)  # every read was answered
    connection.connection_lost(None)
    return best / len(chunks) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store-conf", type=Path, default=DEFAULT_CONF)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", action="store_true", help="only the batch SEND rows (batch_rows)")
    args = parser.parse_args()
    if args.child:
        if args.batch:
            print(json.dumps(batch_rows()))
            return 0
        print(
            json.dumps(
                {**measure(args.store_conf), **pull_rows(args.store_conf), **send_rows(), **send_rows(1)}
            )
        )
        return 0
    runs = {}
    for label, env in (("compiled", {"RMQ_PURE_PYTHON": ""}), ("pure Python", {"RMQ_PURE_PYTHON": "1"})):
        cmd = [sys.executable, "-m", "benchmarks.request_costs", "--child"]
        cmd += ["--store-conf", str(args.store_conf)] + (["--batch"] if args.batch else [])
        out = subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env={**os.environ, **env}).stdout
        runs[label] = json.loads(out)
    print("| stage | compiled µs | pure Python µs |")
    print("|---|---:|---:|")
    for stage in runs["compiled"]:
        c, p = runs["compiled"][stage], runs["pure Python"][stage]
        print(f"| {stage} | {c:.2f} | {p:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
