"""The test kit's runtime: a writable server on its own thread, a writer and a blocking client for it.

``RmqServer`` runs ``serve --writable`` in-process: a ``WritableStore`` and a ``QueryServer`` on
127.0.0.1 port 0, with an event loop on a daemon thread, so sync tests, async tests (any loop) and
tests that start a JVM or Go client can all use it. Everything that touches the store runs on that
loop, so the writer and the client here never race the server. The pytest fixtures
(``clients.testkit.pytest_plugin``) are thin wrappers over these classes; they are usable without pytest.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from clients.admin import QueryAdmin
from clients.consumer import PullConsumer
from clients.producer import OutgoingMessage, Producer, SendResult
from clients.testkit.message_jsonl import MessageReader
from clients.topic_admin import TopicAdmin, TopicSpec
from protocol.message import MessageExt
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from store.write.writer import Appended

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The consumer group ``RmqClient.receive`` and ``RmqConsumer`` use when the test names none.
DEFAULT_CONSUMER_GROUP = "rmq_test_consumer"
#: How much longer than a receive's own timeout the test thread waits for the server's loop.
_LOOP_MARGIN = 15.0

#: A small geometry, so a fresh store costs a few sparse files: 4 MiB CommitLog files, IndexFiles of
#: 1000 slots x 4000 entries (84 KB). Queries answer the same as with the broker's defaults.
TEST_GEOMETRY: dict[str, int] = {
    "mapped_file_size_commit_log": 4 * 1024 * 1024,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
}


def kit_store_config(root: Path, **overrides: object) -> StoreConfig:
    """A ``StoreConfig`` for a test store at ``root``: the small geometry, loopback identity."""
    values: dict[str, object] = {
        **TEST_GEOMETRY,
        "broker_ip1": "127.0.0.1",
        "broker_name": "broker-a",
    }
    values.update(overrides)
    return StoreConfig.for_store(root, **values)


class RmqServer:
    """``serve --writable`` in this process, on a thread of its own; ``address`` is ``host:port``."""

    def __init__(self, config: StoreConfig, *, auto_create_topics: bool = True) -> None:
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rmq-test-server", daemon=True)
        self._thread.start()
        self.store: WritableStore | None = None
        self._server: QueryServer | None = None
        try:
            self.run(self._start(auto_create_topics))
        except BaseException:
            self.close()
            raise
        assert self._server is not None
        self.port = self._server.port
        self.address = f"127.0.0.1:{self.port}"
        self._producer: Producer | None = None
        self._admin: QueryAdmin | None = None
        #: Consumers still open, closed (offsets committed) before the server stops.
        self.consumers: set[PullConsumer] = set()

    async def _start(self, auto_create_topics: bool) -> None:
        self.store = WritableStore(self.config, auto_create_topics=auto_create_topics)
        server = QueryServer(
            self.store.reader,
            ServerSettings(
                port=0, cluster=self.config.broker_cluster_name, broker_name=self.config.broker_name
            ),
            configure=write_path(self.store),
        )
        await server.start()
        self._server = server

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the server's loop and wait for its result (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` on the server's loop (store access is single-threaded there)."""

        async def wrapped() -> Any:
            return fn(*args, **kwargs)

        return self.run(wrapped())

    # -- the client side -----------------------------------------------------------------------

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self.address)
        return self._producer

    @property
    def admin(self) -> QueryAdmin:
        if self._admin is None:
            self._admin = QueryAdmin(self.address)
        return self._admin

    def create_topic(
        self,
        name: str,
        queues: int = 8,
        *,
        read_queues: int | None = None,
        write_queues: int | None = None,
        perm: int = 6,
    ) -> None:
        """Create (or update) topic ``name`` through the admin request, as ``mqadmin updateTopic -b``
        does: UPDATE_AND_CREATE_TOPIC with ``queues`` read and write queues (8, mqadmin's default)
        unless ``read_queues``/``write_queues`` say otherwise, and ``perm`` (6 = read and write).
        Returns once the creation is durable (``config/topics.json`` with its journal; the file
        itself is rewritten within a second, ``store/config/journal.py``); a refused name raises
        the response code's error (e.g. ``MQSystemError`` for a system topic or a name the broker
        does not allow)."""
        spec = TopicSpec(
            name,
            queues if read_queues is None else read_queues,
            queues if write_queues is None else write_queues,
            perm,
        )

        async def create() -> None:
            await TopicAdmin(self.address, self.admin.client).create_topic(self.address, spec)

        self.run(create())

    def close(self) -> None:
        """Stop the server, close the store (index, checkpoint, topics.json written) and the thread."""
        if self._loop.is_closed():
            return

        async def stop() -> None:
            for consumer in list(self.consumers):
                try:
                    await consumer.close()
                except Exception:  # the server stops anyway; the test saw what it received
                    log.exception("closing consumer %s", consumer.group)
            self.consumers.clear()
            for closable in (self._producer, self._admin):
                if closable is not None:
                    await closable.close()
            if self._server is not None:
                await self._server.stop()
            if self.store is not None:
                self.store.close()

        try:
            if self._thread.is_alive():
                self.run(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()


class RmqWriter:
    """Adds messages to a running test server's store directly (no SEND): the JSONL message fields."""

    def __init__(self, server: RmqServer) -> None:
        self.server = server
        self._reader = MessageReader(
            cluster=server.config.broker_cluster_name, max_message_size=server.config.max_message_size
        )

    def add(self, topic: str, body: bytes | str = b"", **fields: Any) -> Appended:
        """Store one message, e.g. ``add("Orders", "o-1", keys="o-1", tags="new")``; queryable at once.

        ``fields`` are those of a ``make-store`` JSONL line (``keys``, ``tags``, ``properties``,
        ``queue_id``, ``unique_key``, ``born_host``, ``store_timestamp``, ...).
        """
        obj: dict[str, Any] = {"topic": topic, **fields}
        if isinstance(body, str):
            obj["body"] = body
        else:
            import base64

            obj["body_base64"] = base64.b64encode(body).decode("ascii")
        store = self.server.store
        assert store is not None

        def put() -> Appended:
            message = self._reader.message(obj, 1)
            (appended,) = store.put([message.record], store_timestamp=fields.get("store_timestamp"))
            return appended

        return self.server.call(put)

    def create_topic(self, topic: str, queue_nums: int = 4) -> None:
        """Create a topic with ``queue_nums`` read and write queues (``mqadmin updateTopic``)."""
        store = self.server.store
        assert store is not None
        self.server.call(store.create_topic, topic, queue_nums)


class RmqClient:
    """A blocking Python client for the test server: send, and query like mqadmin."""

    def __init__(self, server: RmqServer) -> None:
        self.server = server
        self.address = server.address

    def send(self, topic: str, body: bytes | str, **options: Any) -> SendResult | None:
        """``Producer.send`` (keys, tags, properties, queue_id, delay_level, oneway)."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        return self.server.run(self.server.producer.send(topic, data, **options))

    def send_batch(self, topic: str, bodies: Sequence[bytes | OutgoingMessage]) -> list[SendResult]:
        messages = [b if isinstance(b, OutgoingMessage) else OutgoingMessage(b) for b in bodies]
        return self.server.run(self.server.producer.send_batch(topic, messages))

    def query_by_key(self, topic: str, key: str, max_num: int = 64) -> list[MessageExt]:
        """``mqadmin queryMsgByKey``: the messages of ``topic`` with ``key`` among their KEYS ([] if none)."""
        from clients.response_errors import NoMessageError, TopicNotExistError

        try:
            return self.server.run(self.server.admin.query_by_key(topic, key, max_num)).messages
        except (NoMessageError, TopicNotExistError):  # nothing found, or no such topic yet
            return []

    def query_by_unique_key(self, topic: str, unique_key: str) -> list[MessageExt]:
        from clients.response_errors import NoMessageError, TopicNotExistError

        try:
            return self.server.run(self.server.admin.query_by_unique_key(topic, unique_key))
        except (NoMessageError, TopicNotExistError):
            return []

    def view(self, offset_msg_id: str) -> MessageExt:
        """``mqadmin queryMsgById``: the message an offset msg id points at."""
        return self.server.run(self.server.admin.view_message(offset_msg_id))

    def receive(
        self, topic: str, count: int, *, group: str | None = None, tags: str = "*", timeout: float = 10.0
    ) -> list[MessageExt]:
        """The next ``count`` messages of ``topic`` for ``group``, consumed (their offsets committed).

        A consumer joins the group, takes what the group has not consumed yet (from the first offset
        for a new group), and leaves once it has ``count`` messages, so calls with the same group
        continue where the last one stopped. Fewer than ``count`` within ``timeout`` seconds raise
        ``TimeoutError`` (``clients.consumer.ReceiveTimeoutError``) naming those that came, which
        stay unconsumed. ``tags``: ``*`` or ``TagA || TagB``.
        """
        consumer = RmqConsumer(self.server, topic, group=group, tags=tags)
        try:
            return consumer.receive(count, timeout=timeout)
        finally:
            consumer.close()


class RmqConsumer:
    """A blocking consumer of one topic for the test server (``clients.consumer.PullConsumer``).

    It goes through the server's consume side as an official client's consumer does (heartbeat,
    committed offsets, long-polling pulls) and pulls from the moment it is made, so messages sent
    after it started arrive as promptly as those sent before. ``receive`` takes them in queue order
    per queue; ``close`` (or the server's) commits what was taken.
    """

    def __init__(self, server: RmqServer, topic: str, *, group: str | None = None, tags: str = "*") -> None:
        self.server = server
        self.topic = topic
        self.group = group or DEFAULT_CONSUMER_GROUP

        async def start() -> PullConsumer:
            consumer = PullConsumer(server.address, self.group)
            consumer.subscribe(topic, tags)
            await consumer.start()
            return consumer

        self._consumer = server.run(start())
        server.consumers.add(self._consumer)

    def receive(self, count: int = 1, *, timeout: float = 10.0) -> list[MessageExt]:
        """The next ``count`` messages, waiting at most ``timeout`` seconds (``TimeoutError`` naming
        what came when fewer did; those stay for the next call)."""
        return self.server.run(self._consumer.receive(count, timeout), timeout + _LOOP_MARGIN)

    def close(self) -> None:
        """Commit what was taken and leave the group (done by the server's close otherwise)."""
        if self._consumer in self.server.consumers:
            self.server.consumers.discard(self._consumer)
            self.server.run(self._consumer.close())


__all__ = [
    "DEFAULT_CONSUMER_GROUP",
    "TEST_GEOMETRY",
    "RmqClient",
    "RmqConsumer",
    "RmqServer",
    "RmqWriter",
    "kit_store_config",
]
