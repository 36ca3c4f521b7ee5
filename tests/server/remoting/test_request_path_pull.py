"""The compiled request path's PULL_MESSAGE answers exactly as the Python path (issue 22).

Two ``serve --writable`` servers over two stores fed the same records (same clock, same store
address), one with the compiled path and one without it (the reference, ``PullMessageProcessor``),
get the same reads on a ``RemotingConnection`` each: heartbeats, then pulls of every shape the C side
takes (tag filters by hash code, ``*``, the subscription a heartbeat declared, the commit-offset
flag, batch limits by count and bytes) and of shapes it must leave (no message, offset moved, an
unknown group, SQL92, a queue out of range, long polling). Compared: every byte and transport call,
the committed offsets, ``PullStats``, the ``/metrics`` counts and the store's served-bytes count.
Under ``RMQ_PURE_PYTHON=1`` the reference runs against itself (and the absolute checks still hold).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import RequestCode
from protocol.index_key import java_string_hash
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting import request_path
from server.remoting.write_path import NOTIFY_DELAY, WritePath
from server.request_stats import RequestStats
from store.config.store_config import StoreConfig
from store.write.writer import StoreRecord
from tests.support.pulls import heartbeat
from tests.support.request_path import NOT_UTF8, UTF8, frame
from tests.support.writable_sides import WritableSide, takes_code
from tests.support.writable_sides import same_both_ways as both_ways

PULL = int(RequestCode.PULL_MESSAGE)
TOPIC = "PullT"
GROUP = "G"
#: A topic of small records, where a batch ends at its message count before its bytes.
SMALL = "PullS"
#: PullSysFlag: commit offset, suspend, subscription, lite pull.
COMMIT, SUSPEND, SUBSCRIPTION, LITE = 1, 2, 4, 16


def pull(
    offset: int,
    *,
    queue_id: int = 0,
    opaque: int = 1,
    sys_flag: int = SUBSCRIPTION | SUSPEND,
    max_msg_nums: int = 32,
    subscription: str | None = "*",
    expression_type: str | None = "TAG",
    group: str = GROUP,
    topic: str = TOPIC,
    commit_offset: int = 0,
    bname: str | None = "b1",
    **extra: str,
) -> bytes:
    """A PULL as a 4.9.7 Java consumer writes it (its fields, as strings; ``bname`` is the broker name
    ``RpcRequestHeader`` adds, which both paths ignore)."""
    fields = {
        "commitOffset": str(commit_offset),
        "consumerGroup": group,
        "maxMsgNums": str(max_msg_nums),
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "subVersion": "1",
        "suspendTimeoutMillis": "20",
        "sysFlag": str(sys_flag),
        "topic": topic,
    }
    if subscription is not None:
        fields["subscription"] = subscription
    if expression_type is not None:
        fields["expressionType"] = expression_type
    if bname is not None:
        fields["bname"] = bname
    fields.update(extra)
    header = {"code": PULL, "extFields": fields, "flag": 0, "language": "JAVA", "opaque": opaque}
    header.update({"serializeTypeCurrentRPC": "JSON", "version": 407})
    return frame(json.dumps(header, separators=(",", ":")))


def beat(opaque: int, subscription: str) -> bytes:
    header = {"code": int(RequestCode.HEART_BEAT), "flag": 0, "language": "JAVA", "opaque": opaque}
    header["version"] = 407
    data = json.loads(heartbeat("client-1", GROUP, {TOPIC: subscription}))
    for sub in data["consumerDataSet"][0]["subscriptionDataSet"]:
        sub["codeSet"] = [java_string_hash(tag) for tag in sub["tagsSet"]]  # as a Java client sends it
    body = json.dumps(data).encode()
    return frame(json.dumps(header, separators=(",", ":")), body)


class Side(WritableSide):
    """A writable side and what it counts."""

    def counted(self) -> tuple[Any, ...]:
        stats = self.server.pull_stats
        requests = self.dispatcher.stats
        assert requests is not None
        return (
            dict(self.hook.broker.offsets.offsets),
            stats.messages_got,
            sum(stats._found.counts.values()),
            sum(stats._miss.counts.values()),
            sum(stats._transferred.counts.values()),
            dict(requests.requests),
            dict(requests.errors),
            self.store.reader._served_since_trim,
        )


def records(n: int) -> list[StoreRecord]:
    """``n`` records over queues 0 and 1, tags a, b, c in turn (none on every fifth), bodies of
    growing size (the byte limits are reached)."""
    out = []
    for i in range(n):
        tags = "" if i % 5 == 4 else f"TAGS\x01{'abc'[i % 3]}\x02"
        body = b"b" * (100 + (i * 997) % 20000)
        out.append(StoreRecord(topic=TOPIC, queue_id=i % 2, body=body, properties=tags))
    return out


async def open_side(root: Path, compiled_path: bool, memory_ratio: int = 40) -> Side:
    """A writable server over a fresh store holding ``records(400)`` and 100 small records in
    ``SMALL``; ``memory_ratio`` 0 makes every record "on disk" (the smaller transfer limits)."""
    config = StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=1 << 20,
        max_message_size=1 << 16,
        access_message_in_memory_max_ratio=memory_ratio,
    )
    store = WritableStore(config, clock=itertools.count(1_700_000_000_000, 3).__next__)
    hook = WritePath(store)
    server = QueryServer(store.reader, ServerSettings(port=0, broker_name="b1"), configure=hook)
    await server.start()
    store.set_store_address("127.0.0.1", 10911)  # the same STOREHOST in both stores' records
    store.create_topic(TOPIC, 2)
    for record in records(400):
        store.put([record])
    store.create_topic(SMALL, 1)
    store.put([StoreRecord(topic=SMALL, queue_id=0, body=b"s%d" % i) for i in range(100)])
    # The queues opened and the group's config created, as by a first pull (which the compiled path
    # leaves to the Python path: it opens and creates nothing).
    for topic, queue_id in ((TOPIC, 0), (TOPIC, 1), (SMALL, 0)):
        store.reader.min_offset(topic, queue_id)
    hook.broker.find_group(GROUP)
    side = Side(server, store, hook)
    side.dispatcher.stats = RequestStats()
    side.use_compiled_path(compiled_path)
    return side


@pytest.fixture(params=[40, 0], ids=["in-memory", "on-disk"])
async def sides(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Side, Side]]:
    fast = await open_side(tmp_path / "fast", True, request.param)
    reference = await open_side(tmp_path / "reference", False, request.param)
    try:
        yield fast, reference
    finally:
        for side in (fast, reference):
            await side.server.stop()
            side.store.close()


async def same_both_ways(sides: tuple[Side, Side], reads: list[bytes]) -> bytes:
    return await both_ways(*sides, reads, Side.counted)


def answered(side: Side) -> int:
    return side.answered


def test_pulls_are_among_the_codes_of_a_writable_server(tmp_path: Path) -> None:
    async def run() -> None:
        side = await open_side(tmp_path / "s", True)
        try:
            takes_code(side, PULL)
        finally:
            await side.server.stop()
            side.store.close()

    asyncio.run(run())


async def test_plain_pulls(sides: tuple[Side, Side]) -> None:
    """Pulls the compiled path answers: tag filters, ``*``, batch limits, commits."""
    shapes = [
        pull(0),
        pull(0, subscription="a"),
        pull(0, subscription="a || b"),
        pull(0, subscription=" b ||c|| "),
        pull(3, queue_id=1, subscription="c", max_msg_nums=5),
        pull(7, max_msg_nums=1),
        pull(0, max_msg_nums=0),
        pull(0, max_msg_nums=1000),
        pull(150, sys_flag=SUBSCRIPTION | SUSPEND | COMMIT, commit_offset=150),
        pull(160, queue_id=1, sys_flag=SUBSCRIPTION | COMMIT, commit_offset=12, subscription="a"),
        pull(1, expression_type=None),
        pull(1, expression_type=""),
        pull(1, subscription="*", expression_type=""),
        pull(2, subscription=None),
        pull(2, subscription=""),
        pull(2, bname=None),
        pull(2, bname="another-broker"),
        # a DefaultLitePullConsumer's: the lite flag, batches of 10, no commit, and StreamTypeRPCHook's
        # request type, which both paths ignore
        pull(4, sys_flag=SUBSCRIPTION | SUSPEND | LITE, max_msg_nums=10, ReqT="0"),
        pull(6, queue_id=1, ReqT="0", bname=None),
        pull(0, topic=SMALL, max_msg_nums=1000),
        pull(90, topic=SMALL, max_msg_nums=1000),
        pull(5, topic=SMALL, max_msg_nums=7),
    ]
    reads = [b"".join(shapes[i : i + 4]) for i in range(0, len(shapes), 4)]
    before = answered(sides[0])
    out = await same_both_ways(sides, reads)
    if request_path.COMPILED:
        assert answered(sides[0]) - before == len(shapes)
    assert out.count(b'"remark":"FOUND"') == len(shapes)
    committed = sides[0].hook.broker.offsets.offsets
    assert committed == {f"{TOPIC}@{GROUP}": {0: 150, 1: 12}}


async def test_the_declared_subscription(sides: tuple[Side, Side]) -> None:
    """Without the subscription flag the heartbeat's subscription filters (and it must exist)."""
    before = pull(0, sys_flag=COMMIT, commit_offset=3, subscription=None, expression_type=None)
    await same_both_ways(sides, [before])  # no heartbeat yet: SUBSCRIPTION_NOT_EXIST, the reference's
    shapes = [
        pull(0, sys_flag=COMMIT, commit_offset=3, subscription=None, expression_type=None),
        pull(5, queue_id=1, sys_flag=0, subscription=None, expression_type=None),
        # newer than the heartbeat's subVersion (1): SUBSCRIPTION_NOT_LATEST, left to the reference
        pull(5, queue_id=1, sys_flag=0, subscription=None, expression_type=None, subVersion="2"),
    ]
    before_count = answered(sides[0])
    # the heartbeat on the pulls' connection (its channel's consumers leave when it closes)
    await same_both_ways(sides, [beat(1, "a || c"), b"".join(shapes)])
    if request_path.COMPILED:
        assert answered(sides[0]) - before_count == 2


async def test_pulls_left_to_the_python_path(sides: tuple[Side, Side]) -> None:
    """Every other outcome: answered by the reference, with everything after it in the read."""
    shapes = [
        pull(200),  # OFFSET_OVERFLOW_ONE, held (suspend flag) until its timeout
        pull(200, sys_flag=SUBSCRIPTION),  # OFFSET_OVERFLOW_ONE, not held
        pull(500, sys_flag=SUBSCRIPTION | COMMIT, commit_offset=9),  # OFFSET_OVERFLOW_BADLY, moved
        pull(0, sys_flag=SUBSCRIPTION, subscription="zzz"),  # NO_MATCHED_MESSAGE
        pull(0, group="unknown-group"),  # auto-created by the reference
        pull(0, queue_id=5),  # queue id out of range
        pull(0, topic="NoSuchTopic"),
        pull(0, subscription="a > 1", expression_type="SQL92"),
        pull(0, subscription="||"),  # does not parse
        pull(0, queueOffset="-1"),
        pull(0, maxMsgNums="-1"),
        pull(0, sysFlag="0x4"),
        pull(0, extra_field="x"),
        pull(0, reqt="0"),  # not the request type's key (ReqT): an unknown field
        pull(0, subscription="\u00e9t\u00e9"),
    ]
    for shape in shapes:
        before = answered(sides[0])
        await same_both_ways(sides, [beat(1, "*"), pull(3) + shape + pull(4)])
        if request_path.COMPILED:
            assert answered(sides[0]) - before == 1  # the first: the compiled path stops at the shape
        # (the unknown group exists from here on: the reference created it)
        await same_both_ways(sides, [beat(1, "*"), shape + pull(1) + pull(2, queue_id=1)])


async def test_a_loop_stall_on_one_side_only(sides: tuple[Side, Side]) -> None:
    """A loaded machine stalls the loop of one side past the notifier's delay while a pull is held
    (as the CPU hogs of a four-worker run did): the heartbeat's NOTIFY_CONSUMER_IDS_CHANGED came
    before that side's held answer and connection close, and not on the other side, so the feeds
    differed though both paths answered alike. Each feed has the NOTIFY once, after the answers."""
    reads = [beat(1, "*"), pull(3) + pull(200) + pull(4)]
    asyncio.get_running_loop().call_later(0.005, time.sleep, NOTIFY_DELAY + 0.03)
    got = await sides[0].feed(reads)
    expected = await sides[1].feed(reads)
    assert got == expected
    notify = b'{"code":40,"extFields":{"consumerGroup":"G"},"flag":2,'
    assert got[0].count(notify) == 1 and got[0].index(notify) > got[0].rindex(b'"flag":1,')


@pytest.mark.parametrize("value", NOT_UTF8 + UTF8)
async def test_a_broker_name_that_is_not_utf8(sides: tuple[Side, Side], value: bytes) -> None:
    """``bname`` is ignored, and a header that is not UTF-8 is read by the reference as the broker
    reads it (U+FFFD; issue 31 item 8): answered, and committed, exactly as the reference does."""
    odd = pull(5, sys_flag=SUBSCRIPTION | COMMIT, commit_offset=5, opaque=5, bname="@")
    odd = frame(odd[8:].replace(b'"@"', b'"' + value + b'"'))
    out = await same_both_ways(sides, [pull(3) + odd + pull(4)])
    assert b'"opaque":5' in out


async def test_a_failing_commit_is_answered_as_the_python_path_answers_it(
    sides: tuple[Side, Side], caplog: pytest.LogCaptureFixture
) -> None:
    """The commit raises (it never should): the Python path answers the processor's failure
    (SYSTEM_ERROR, logged), after its read was counted; so does the compiled path."""

    def broken(*args: object) -> None:
        raise RuntimeError("offset table unavailable")

    for side in sides:
        side.hook.broker.commit_offset = broken  # type: ignore[method-assign]
    before = answered(sides[0])
    shapes = pull(0) + pull(4, sys_flag=SUBSCRIPTION | COMMIT, commit_offset=4) + pull(8)
    out = await same_both_ways(sides, [shapes])
    if request_path.COMPILED:
        assert answered(sides[0]) - before == 3
    assert out.count(b'"remark":"FOUND"') == 2 and out.count(b'"code":1,') == 1
    assert "failed" in caplog.text


async def test_random_pulls(sides: tuple[Side, Side]) -> None:
    """Random offsets (past the end too), batch sizes, filters and flags, pipelined 6 per read."""
    rng = random.Random(22)
    subscriptions = ["*", "a", "b", "c", "a || c", "b||a", "zzz", "", None]
    frames = []
    for i in range(300):
        topic, queue_id = rng.choice([(TOPIC, 0), (TOPIC, 1), (SMALL, 0)])
        frames.append(
            pull(
                rng.randrange(0, 230),
                topic=topic,
                queue_id=queue_id,
                opaque=i,
                max_msg_nums=rng.choice([0, 1, 2, 7, 32, 33, 1000]),
                sys_flag=SUBSCRIPTION | rng.choice([0, COMMIT, SUSPEND, COMMIT | SUSPEND]),
                subscription=rng.choice(subscriptions),
                commit_offset=rng.randrange(0, 200),
            )
        )
    reads = [b"".join(frames[i : i + 6]) for i in range(0, len(frames), 6)]
    await same_both_ways(sides, reads)
    if request_path.COMPILED:
        assert answered(sides[0]) > 50  # the reads up to their first pull that is not plain
