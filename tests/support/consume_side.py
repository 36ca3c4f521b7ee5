"""The consume-side script of issue #19, its wire helpers and its normalisation, shared by the recorder
(``tests/server/golden/record_consume_side.py``, against the real 4.9.7 broker) and the replay test
(``tests/server/test_consume_side_golden.py``, against ``serve --writable``).

Both sides must play the very same requests and normalise the answers the very same way, or a
difference in the comparison could come from the script rather than from the server; so there is
one copy, here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from typing import Any

from protocol.codes import RequestCode as R
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from protocol.message import decode_messages
from tests.support.harness import RawClient

BORN = 1700000000000
#: Times we send ourselves (born time, subVersions): kept as they are by the normaliser.
OUR_TIMES = {BORN, 1700000000001, 1800000000000}
NORMALISED = (
    "Values that vary per run are replaced: '<broker>' = 127.0.0.1:<broker port>; '<client>' = a "
    "127.0.0.1:<ephemeral port> of one of our connections; offset message ids (store host + port + "
    "commit log offset) keep their offset part, the host/port prefix becomes '<storehost>'; "
    "'<timestamp>' = any millisecond time the broker took (an integer > 1e12 other than the "
    "times we send: 1700000000000, 1700000000001, 1800000000000), in JSON bodies, ext fields and "
    "fastjson text; consumeTps -> '<tps>'; "
    "born/store ports of decoded messages -> '<port>'; elements of Java sets (connectionSet, "
    "consumerIdList, groupList, lockOKMQSet, mqSet, subscriptionDataSet) are sorted, and so are the "
    "requests the broker sent to one connection during one step. Ext fields keep "
    "the order they had on the wire. A body is {'json': ...} when it parses as JSON, {'fastjson': "
    "text} (normalised) when it is fastjson output that is not strict JSON (unquoted integer or "
    "object map keys), {'messages': [...]} when it is stored message records (decoded), else "
    "{'sha256', 'length'}."
)
#: The UNKNOW half message's born time, this long after the delay-level-3 send-back: the script's
#: nine 0.3 s steps between the two, the gap the recording had at full speed. Its check-back comes
#: ``transactionTimeOut`` (6 s) after its born time, and must come before the retry the send-back
#: scheduled 10 s after it (the broker's CommitLog: the check's copy at 3143, the retry at 3894).
#: Taking the born time from the clock at the send made a slow run's copy land after the retry.
UNKNOW_HALF_BORN_AFTER_SEND_BACK_MS = 2700
SET_KEYS = {"connectionSet", "consumerIdList", "groupList", "lockOKMQSet", "mqSet", "subscriptionDataSet"}


# --------------------------------------------------------------------------------------------- wire


class Conn:
    """One client connection: our requests paired by opaque, the broker's requests kept in order.

    The broker's CONSUME_MESSAGE_DIRECTLY and GET_CONSUMER_RUNNING_INFO are answered at once with a
    fixed answer, as a real consumer would answer, so the broker's relay completes; a pushed reply
    (PUSH_REPLY_MESSAGE_TO_CLIENT) is answered ``push_answer`` (code, remark), as the Java client's
    ``receiveReplyMessage`` does, or not at all when it is None.
    """

    def __init__(self, name: str, client: RawClient) -> None:
        self.name = name
        self.client = client
        self.pushed: list[RemotingCommand] = []
        #: CHECK_TRANSACTION_STATE requests, kept apart: how many come before we answer is timing.
        self.checks: list[RemotingCommand] = []
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._task = asyncio.ensure_future(self._read())
        self.local = f"127.0.0.1:{client.writer.get_extra_info('sockname')[1]}"
        self.push_answer: tuple[int, str | None] | None = (0, None)

    @classmethod
    async def open(cls, name: str, port: int) -> Conn:
        return cls(name, await RawClient.connect("127.0.0.1", port))

    async def _read(self) -> None:
        decoder = FrameDecoder()
        while True:
            data = await self.client.reader.read(65536)
            if not data:
                return
            for cmd in decoder.feed(data):
                if cmd.is_response:
                    future = self._waiting.pop(cmd.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(cmd)
                    continue
                (self.checks if cmd.code == R.CHECK_TRANSACTION_STATE else self.pushed).append(cmd)
                if cmd.code == R.PUSH_REPLY_MESSAGE_TO_CLIENT and self.push_answer is not None:
                    code, remark = self.push_answer
                    reply = RemotingCommand(
                        code=code, flag=1, opaque=cmd.opaque, version=407, remark=remark,
                        serialize_type=cmd.serialize_type,
                    )  # fmt: skip
                    self.client.writer.write(encode_frame(reply))
                if cmd.code in (R.CONSUME_MESSAGE_DIRECTLY, R.GET_CONSUMER_RUNNING_INFO):
                    body = b'{"consumeResult":"CR_SUCCESS","autoCommit":true,"spentTimeMills":1}'
                    if cmd.code == R.GET_CONSUMER_RUNNING_INFO:
                        body = b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}'
                    answer = RemotingCommand(
                        code=0,
                        flag=1,
                        opaque=cmd.opaque,
                        version=407,
                        body=body,
                        serialize_type=cmd.serialize_type,
                    )
                    self.client.writer.write(encode_frame(answer))

    async def call(self, request: RemotingCommand, timeout: float = 15.0) -> RemotingCommand | None:
        """The answer, or None when the broker sent none within ``timeout`` seconds."""
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[request.opaque] = future
        self.client.writer.write(encode_frame(request))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._waiting.pop(request.opaque, None)
            return None

    def take_pushed(self) -> list[RemotingCommand]:
        out, self.pushed = self.pushed, []
        return out

    async def close(self) -> None:
        self._task.cancel()
        await self.client.close()


# ------------------------------------------------------------------------------------- normalising


class Normaliser:
    def __init__(self, broker_port: int) -> None:
        self.broker = f"127.0.0.1:{broker_port}"
        self.storehost = f"7F000001{broker_port:08X}"

    def text(self, s: str) -> str:
        s = s.replace(self.broker, "<broker>")
        s = re.sub(r"127\.0\.0\.1:\d+", "<client>", s)
        s = re.sub(r"(?<![0-9A-Fa-f])" + self.storehost, "<storehost>", s)
        s = re.sub(
            r"(?<![0-9])(1[6-9]\d{11})(?![0-9])",
            lambda m: m[1] if int(m[1]) in OUR_TIMES else "<timestamp>",
            s,
        )
        return s

    def value(self, v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {self.text(str(k)): self.value(x, str(k)) for k, x in v.items()}
        if isinstance(v, list):
            items = [self.value(x) for x in v]
            if key in SET_KEYS:
                items.sort(key=lambda x: json.dumps(x, sort_keys=True))
            return items
        if key == "consumeTps":
            return "<tps>"
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v > 10**12 and v not in OUR_TIMES:
            return "<timestamp>"
        if isinstance(v, str):
            return self.text(v)
        return v

    def body(self, data: bytes | None, binary_messages: bool = False) -> Any:
        if data is None:
            return None
        data = bytes(data)
        if binary_messages:
            return {"messages": [self.message(m) for m in decode_messages(data)], "length": len(data)}
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}
        try:
            return {"json": self.value(json.loads(text))}
        except ValueError:
            if text[:1] in "{[":
                return {"fastjson": self.text(text)}
            return {"text": self.text(text)}

    def message(self, m: Any) -> dict[str, Any]:
        return self.value(
            {
                "topic": m.topic,
                "queueId": m.queue_id,
                "queueOffset": m.queue_offset,
                "commitLogOffset": m.commit_log_offset,
                "storeSize": m.store_size,
                "sysFlag": m.sys_flag,
                "flag": m.flag,
                "bornTimestamp": m.born_timestamp,
                "bornHost": m.born_host,
                "bornPort": "<port>",
                "storeTimestamp": m.store_timestamp,
                "storeHost": m.store_host,
                "storePort": "<port>",
                "reconsumeTimes": m.reconsume_times,
                "preparedTransactionOffset": m.prepared_transaction_offset,
                "body": m.body.decode("utf-8", "replace"),
                "properties": m.properties,
                "offsetMsgId": m.offset_msg_id,
            }
        )

    def command(self, cmd: RemotingCommand, binary_messages: bool = False) -> dict[str, Any]:
        return {
            "code": cmd.code,
            "serializeType": SerializeType(cmd.serialize_type).name,
            "flag": cmd.flag,
            "remark": None if cmd.remark is None else self.text(cmd.remark),
            "extFields": self.value(dict(cmd.ext_fields or {})),
            "body": self.body(cmd.body, binary_messages),
        }


# ---------------------------------------------------------------------------------------- bodies


def props(**values: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items())


def heartbeat(client_id: str, consumers: list[dict] = (), producers: list[str] = ()) -> bytes:  # type: ignore[assignment]
    return json.dumps(
        {
            "clientID": client_id,
            "producerDataSet": [{"groupName": g} for g in producers],
            "consumerDataSet": list(consumers),
        }
    ).encode()


def consumer(group: str, subs: dict[str, str], *, type_: str, model: str, where: str) -> dict:
    def sub(topic: str, expr: str) -> dict:
        tags = [t.strip() for t in expr.split("||") if t.strip()] if expr != "*" else []
        return {
            "classFilterMode": False,
            "codeSet": sorted(_java_hash(t) for t in tags),
            "expressionType": "TAG",
            "subString": expr,
            "subVersion": 1700000000001,
            "tagsSet": tags,
            "topic": topic,
        }

    return {
        "groupName": group,
        "consumeType": type_,
        "messageModel": model,
        "consumeFromWhere": where,
        "subscriptionDataSet": [sub(t, e) for t, e in subs.items()],
        "unitMode": False,
    }


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def mq(topic: str, queue: int) -> dict:
    return {"topic": topic, "brokerName": "broker-a", "queueId": queue}


# ---------------------------------------------------------------------------------------- script


class Recorder:
    """Plays the script against the broker on ``port`` in serialization ``ser``; ``run`` gives the steps."""

    def __init__(self, port: int, ser: SerializeType) -> None:
        self.port = port
        self.ser = ser
        self.n = Normaliser(port)
        self.steps: list[dict[str, Any]] = []
        s = "json" if ser == SerializeType.JSON else "rmq"
        self.s = s
        self.topic = f"CsTopic_{s}"
        self.group = f"CsGroup_{s}"
        self.bgroup = f"CsBroadcast_{s}"
        self.pgroup = f"CsProducer_{s}"
        self.conns: dict[str, Conn] = {}
        self.uniq = 0
        #: When the delay-level-3 send-back was sent (ms): the UNKNOW half message's born time is
        #: taken from it (``UNKNOW_HALF_BORN_AFTER_SEND_BACK_MS``), not from the script's speed.
        self.sent_back_ms = 0

    async def conn(self, name: str) -> Conn:
        if name not in self.conns:
            self.conns[name] = await Conn.open(name, self.port)
        return self.conns[name]

    async def ask(
        self,
        step: str,
        code: int,
        fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        via: str = "admin",
        wait_pushed: float = 0.3,
        messages: bool = False,
        timeout: float = 15.0,
    ) -> RemotingCommand | None:
        conn = await self.conn(via)
        request = RawClient.request(
            code, dict(fields) if fields is not None else None, body, serialize_type=self.ser
        )
        answer = await conn.call(request, timeout)
        if wait_pushed:
            await asyncio.sleep(wait_pushed)
        entry: dict[str, Any] = {
            "step": step,
            "connection": via,
            "request": {
                "code": code,
                "name": R(code).name if code in R._value2member_map_ else None,
                "extFields": self.n.value(fields) if fields is not None else None,
                "body": self.n.body(body),
            },
            "answer": None if answer is None else self.n.command(answer, messages and answer.code == 0),
        }
        if answer is None:
            entry["noAnswerWithinSeconds"] = timeout
        pushed = self.collect_pushed()
        if pushed:
            entry["brokerRequests"] = pushed
        self.steps.append(entry)
        return answer

    def collect_pushed(self) -> dict[str, list]:
        out = {}
        for name in sorted(self.conns):
            got = self.conns[name].take_pushed()
            if got:
                recorded = [
                    self.n.command(c, c.code in (R.CHECK_TRANSACTION_STATE, R.CONSUME_MESSAGE_DIRECTLY))
                    for c in got
                ]
                # one step can make the broker send several requests to a connection (one
                # NOTIFY_CONSUMER_IDS_CHANGED per group of a heartbeat, in Java HashSet order)
                out[name] = sorted(recorded, key=lambda c: json.dumps(c, sort_keys=True))
        return out

    def send_fields(
        self,
        topic: str,
        queue: int,
        tags: str,
        *,
        group: str = "",
        sys_flag: int = 0,
        extra: dict | None = None,
        born: int = BORN,
    ) -> tuple[dict, str]:
        self.uniq += 1
        uniq = f"C0FFEE{0 if self.ser == SerializeType.JSON else 1:02X}{self.uniq:024X}"
        p = {"TAGS": tags, "UNIQ_KEY": uniq, "WAIT": "true", **(extra or {})}
        fields = {
            "producerGroup": group or self.pgroup,
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": str(queue),
            "sysFlag": str(sys_flag),
            "bornTimestamp": str(born),
            "flag": "0",
            "properties": props(**p),
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": "false",
        }
        return fields, uniq

    async def run(self) -> list[dict[str, Any]]:
        T, G, BG, P = self.topic, self.group, self.bgroup, self.pgroup
        cid_a, cid_b, cid_p = f"cid-A-{self.s}", f"cid-B-{self.s}", f"cid-P-{self.s}"
        retry = f"%RETRY%{G}"
        create = {
            "topic": T,
            "defaultTopic": "TBW102",
            "readQueueNums": "4",
            "writeQueueNums": "4",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        # topics
        await self.ask("create topic", R.UPDATE_AND_CREATE_TOPIC, create)
        await self.ask(
            "create topic to delete later",
            R.UPDATE_AND_CREATE_TOPIC,
            {**create, "topic": f"CsDoomed_{self.s}"},
        )
        await self.ask(
            "create topic: only the topic field", R.UPDATE_AND_CREATE_TOPIC, {"topic": f"CsHalf_{self.s}"}
        )
        await self.ask(
            "create topic: illegal name", R.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "bad topic!"}
        )
        await self.ask(
            "create topic: system topic",
            R.UPDATE_AND_CREATE_TOPIC,
            {**create, "topic": "RMQ_SYS_TRANS_HALF_TOPIC"},
        )
        await self.ask("create topic: no fields", R.UPDATE_AND_CREATE_TOPIC, None)

        # registry before any heartbeat
        await self.ask("consumer list before heartbeat", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": G})
        await self.ask("consumer list: no consumerGroup", R.GET_CONSUMER_LIST_BY_GROUP, {})
        await self.ask(
            "consumer connections before heartbeat", R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": G}
        )
        await self.ask(
            "pull without subscription flag before heartbeat",
            R.PULL_MESSAGE,
            self.pull(G, T, 0, 0, sys_flag=0),
            via="A",
        )

        # heartbeats
        sub_a = consumer(
            G,
            {T: "TagA || TagB", retry: "*"},
            type_="CONSUME_PASSIVELY",
            model="CLUSTERING",
            where="CONSUME_FROM_FIRST_OFFSET",
        )
        await self.ask(
            "heartbeat: consumer A (push, clustering)",
            R.HEART_BEAT,
            None,
            heartbeat(cid_a, [sub_a]),
            via="A",
            wait_pushed=1.0,
        )
        await self.ask(
            "heartbeat: producer P", R.HEART_BEAT, None, heartbeat(cid_p, [], [P]), via="P", wait_pushed=0.5
        )
        await self.ask("consumer list after heartbeat", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": G})
        await self.ask(
            "heartbeat: consumer A again (no change)",
            R.HEART_BEAT,
            None,
            heartbeat(cid_a, [sub_a]),
            via="A",
            wait_pushed=1.0,
        )
        sub_b = consumer(
            G,
            {T: "TagA || TagB", retry: "*"},
            type_="CONSUME_PASSIVELY",
            model="CLUSTERING",
            where="CONSUME_FROM_FIRST_OFFSET",
        )
        sub_bb = consumer(
            BG, {T: "*"}, type_="CONSUME_ACTIVELY", model="BROADCASTING", where="CONSUME_FROM_LAST_OFFSET"
        )
        await self.ask(
            "heartbeat: consumer B joins G, and broadcast group (pull)",
            R.HEART_BEAT,
            None,
            heartbeat(cid_b, [sub_b, sub_bb]),
            via="B",
            wait_pushed=1.5,
        )
        await self.ask("consumer list with two members", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": G})
        await self.ask("heartbeat: no body", R.HEART_BEAT, None, None, via="X")
        await self.ask("heartbeat: not JSON", R.HEART_BEAT, None, b"{not json", via="X")
        await self.ask("heartbeat: {}", R.HEART_BEAT, None, b"{}", via="X")

        # client config check
        tag_sub = consumer(
            G, {T: "TagA"}, type_="CONSUME_PASSIVELY", model="CLUSTERING", where="CONSUME_FROM_FIRST_OFFSET"
        )["subscriptionDataSet"][0]
        sql_sub = {**tag_sub, "expressionType": "SQL92", "subString": "a > 1"}
        await self.ask(
            "check client config: TAG",
            R.CHECK_CLIENT_CONFIG,
            None,
            json.dumps({"clientId": cid_a, "group": G, "subscriptionData": tag_sub}).encode(),
        )
        await self.ask(
            "check client config: SQL92 (property filter off)",
            R.CHECK_CLIENT_CONFIG,
            None,
            json.dumps({"clientId": cid_a, "group": G, "subscriptionData": sql_sub}).encode(),
        )
        await self.ask(
            "check client config: no subscription",
            R.CHECK_CLIENT_CONFIG,
            None,
            json.dumps({"clientId": cid_a, "group": G}).encode(),
        )
        await self.ask("check client config: no body", R.CHECK_CLIENT_CONFIG, None, None)

        # messages
        msg_ids = []
        for i, tag in enumerate(("TagA", "TagC", "TagB")):
            fields, _ = self.send_fields(T, 0, tag)
            answer = await self.ask(
                f"send message {i} ({tag}) to queue 0", R.SEND_MESSAGE, fields, f"body-{i}".encode(), via="P"
            )
            msg_ids.append((answer.ext_fields or {})["msgId"] if answer else "")
        offsets = [int(m[-16:], 16) for m in msg_ids]

        # offsets
        await self.ask(
            "query offset: none stored, queue has messages",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0"},
            via="A",
        )
        await self.ask(
            "query offset: none stored, empty queue",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "1"},
            via="A",
        )
        await self.ask(
            "query offset: unknown topic",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": "NoSuchTopic", "queueId": "0"},
            via="A",
        )
        await self.ask(
            "query offset: no queueId", R.QUERY_CONSUMER_OFFSET, {"consumerGroup": G, "topic": T}, via="A"
        )
        await self.ask(
            "update offset q0=1",
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0", "commitOffset": "1"},
            via="A",
        )
        await self.ask(
            "update offset: unknown topic and group",
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "NoSuchGroup", "topic": "NoSuchTopic", "queueId": "3", "commitOffset": "7"},
            via="A",
        )
        await self.ask(
            "update offset: no commitOffset",
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0"},
            via="A",
        )
        await self.ask(
            "query offset after update",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0"},
            via="A",
        )

        # pulls
        await self.ask(
            "pull: commit flag + subscription flag, commitOffset=2",
            R.PULL_MESSAGE,
            self.pull(G, T, 0, 0, sys_flag=1 | 4, commit=2, sub="*"),
            via="A",
            messages=True,
        )
        await self.ask(
            "query offset after pull commit",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0"},
            via="A",
        )
        await self.ask(
            "pull: no subscription flag, registered group (heartbeat TagA||TagB)",
            R.PULL_MESSAGE,
            self.pull(G, T, 0, 0, sys_flag=0),
            via="A",
            messages=True,
        )
        await self.ask(
            "pull: no subscription flag, commit flag, commitOffset=3",
            R.PULL_MESSAGE,
            self.pull(G, T, 0, 1, sys_flag=1, commit=3),
            via="A",
            messages=True,
        )
        await self.ask(
            "query offset after second pull commit",
            R.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": "0"},
            via="A",
        )
        await self.ask(
            "pull: no subscription flag, topic not subscribed",
            R.PULL_MESSAGE,
            self.pull(G, f"CsDoomed_{self.s}", 0, 0, sys_flag=0),
            via="A",
        )
        await self.ask(
            "pull: no subscription flag, newer subVersion than heartbeat",
            R.PULL_MESSAGE,
            {**self.pull(G, T, 0, 0, sys_flag=0), "subVersion": "1800000000000"},
            via="A",
        )
        await self.ask(
            "pull: retry topic via heartbeat subscription",
            R.PULL_MESSAGE,
            self.pull(G, retry, 0, 0, sys_flag=0),
            via="A",
        )
        await self.ask(
            "pull: broadcast group, no subscription flag",
            R.PULL_MESSAGE,
            self.pull(BG, T, 0, 0, sys_flag=0),
            via="B",
            messages=True,
        )
        await self.ask(
            "pull: unknown topic",
            R.PULL_MESSAGE,
            self.pull(G, "NoSuchTopic", 0, 0, sys_flag=4, sub="*"),
            via="A",
        )
        await self.ask(
            "pull: queueId out of range", R.PULL_MESSAGE, self.pull(G, T, 9, 0, sys_flag=4, sub="*"), via="A"
        )
        await self.ask(
            "pull: empty queue offset 0, suspend flag, 500 ms",
            R.PULL_MESSAGE,
            {**self.pull(G, T, 1, 0, sys_flag=2 | 4, sub="*"), "suspendTimeoutMillis": "500"},
            via="A",
            timeout=20,
        )
        await self.ask(
            "pull: offset beyond max", R.PULL_MESSAGE, self.pull(G, T, 0, 50, sys_flag=4, sub="*"), via="A"
        )
        await self.ask(
            "pull: missing queueOffset",
            R.PULL_MESSAGE,
            {k: v for k, v in self.pull(G, T, 0, 0, sys_flag=4, sub="*").items() if k != "queueOffset"},
            via="A",
        )

        # send back
        back = {
            "group": G,
            "delayLevel": "0",
            "originMsgId": msg_ids[0],
            "originTopic": T,
            "unitMode": "false",
            "maxReconsumeTimes": "16",
        }
        self.sent_back_ms = int(time.time() * 1000)
        await self.ask(
            "send back: normal (delay 3 + reconsumeTimes)",
            R.CONSUMER_SEND_MSG_BACK,
            {**back, "offset": str(offsets[0])},
            via="A",
        )
        await self.ask(
            "send back: delayLevel -1 -> DLQ",
            R.CONSUMER_SEND_MSG_BACK,
            {**back, "offset": str(offsets[1]), "delayLevel": "-1", "originMsgId": msg_ids[1]},
            via="A",
        )
        await self.ask(
            "send back: beyond maxReconsumeTimes (0) -> DLQ",
            R.CONSUMER_SEND_MSG_BACK,
            {**back, "offset": str(offsets[2]), "maxReconsumeTimes": "0", "originMsgId": msg_ids[2]},
            via="A",
        )
        await self.ask(
            "send back: unknown offset", R.CONSUMER_SEND_MSG_BACK, {**back, "offset": "999999999"}, via="A"
        )
        await self.ask("send back: no offset field", R.CONSUMER_SEND_MSG_BACK, back, via="A")
        await self.ask(
            "pull the DLQ",
            R.PULL_MESSAGE,
            self.pull(G, f"%DLQ%{G}", 0, 0, sys_flag=4, sub="*"),
            via="A",
            messages=True,
        )
        await self.ask(
            "pull the delayed retry from SCHEDULE_TOPIC_XXXX queue 2 (level 3)",
            R.PULL_MESSAGE,
            self.pull(G, "SCHEDULE_TOPIC_XXXX", 2, 0, sys_flag=4, sub="*"),
            via="A",
            messages=True,
        )

        await self.run_transactions()

        # locks
        def lock(cid: str, qs: list[int]) -> bytes:
            mqs = [mq(T, q) for q in qs]
            return json.dumps(
                {"consumerGroup": G, "clientId": cid, "onlyThisBroker": False, "mqSet": mqs}
            ).encode()

        await self.ask("lock: A takes q0,q1", R.LOCK_BATCH_MQ, None, lock(cid_a, [0, 1]), via="A")
        await self.ask(
            "lock: B asks q1,q2 (q1 held by A)", R.LOCK_BATCH_MQ, None, lock(cid_b, [1, 2]), via="B"
        )
        await self.ask("lock: A again q0,q1 (renew)", R.LOCK_BATCH_MQ, None, lock(cid_a, [0, 1]), via="A")
        await self.ask("unlock: B unlocks q1 (held by A)", R.UNLOCK_BATCH_MQ, None, lock(cid_b, [1]), via="B")
        await self.ask("unlock: A unlocks q1", R.UNLOCK_BATCH_MQ, None, lock(cid_a, [1]), via="A")
        await self.ask("lock: B takes q1", R.LOCK_BATCH_MQ, None, lock(cid_b, [1]), via="B")
        await self.ask("lock: not JSON", R.LOCK_BATCH_MQ, None, b"{nope", via="B")
        await self.ask("unlock: no body", R.UNLOCK_BATCH_MQ, None, None, via="B")

        # admin
        await self.ask("all topic config", R.GET_ALL_TOPIC_CONFIG, None)
        group_cfg = {
            "groupName": f"CsAdminGroup_{self.s}",
            "consumeEnable": True,
            "consumeFromMinEnable": False,
            "consumeBroadcastEnable": False,
            "retryQueueNums": 2,
            "retryMaxTimes": 3,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": False,
        }
        await self.ask(
            "create subscription group",
            R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            None,
            json.dumps(group_cfg).encode(),
        )
        await self.ask(
            "create subscription group: only groupName",
            R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            None,
            json.dumps({"groupName": f"CsMinimal_{self.s}"}).encode(),
        )
        await self.ask(
            "create subscription group: not JSON", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b"{nope"
        )
        await self.ask(
            "create subscription group: no body", R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, None
        )
        await self.ask("all subscription groups", R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None)
        await self.ask(
            "delete subscription group",
            R.DELETE_SUBSCRIPTIONGROUP,
            {"groupName": f"CsMinimal_{self.s}", "removeOffset": "false"},
        )
        await self.ask(
            "delete subscription group: unknown",
            R.DELETE_SUBSCRIPTIONGROUP,
            {"groupName": "NoSuchGroup", "removeOffset": "true"},
        )
        await self.ask("delete subscription group: no groupName", R.DELETE_SUBSCRIPTIONGROUP, {})
        await self.ask("consumer connections", R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": G})
        await self.ask(
            "consumer connections: broadcast group", R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": BG}
        )
        await self.ask("producer connections", R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": P})
        await self.ask(
            "producer connections: unknown group",
            R.GET_PRODUCER_CONNECTION_LIST,
            {"producerGroup": "NoSuchGroup"},
        )
        await self.ask("consume stats: group + topic", R.GET_CONSUME_STATS, {"consumerGroup": G, "topic": T})
        await self.ask("consume stats: group only", R.GET_CONSUME_STATS, {"consumerGroup": G})
        await self.ask("consume stats: unknown group", R.GET_CONSUME_STATS, {"consumerGroup": "NoSuchGroup"})
        await self.ask("topic consumed by who", R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": T})
        await self.ask(
            "topic consumed by who: unknown topic", R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "NoSuchTopic"}
        )
        for q in (1, 2, 3):
            await self.ask(
                f"update offset q{q}=0 (reset needs an offset on every queue)",
                R.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": G, "topic": T, "queueId": str(q), "commitOffset": "0"},
                via="A",
            )
        await self.ask(
            "reset offset: timestamp 0, forced",
            R.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": T, "group": G, "timestamp": "0", "isForce": "true"},
            wait_pushed=1.5,
        )
        await self.ask(
            "reset offset: timestamp -1 (max), not forced",
            R.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": T, "group": G, "timestamp": "-1", "isForce": "false"},
            wait_pushed=1.5,
        )
        await self.ask(
            "reset offset: unknown topic",
            R.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": "NoSuchTopic", "group": G, "timestamp": "0", "isForce": "true"},
        )
        await self.ask(
            "reset offset: group without offsets",
            R.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": T, "group": BG, "timestamp": "0", "isForce": "true"},
        )
        await self.ask(
            "consume message directly, relayed to A",
            R.CONSUME_MESSAGE_DIRECTLY,
            {"consumerGroup": G, "clientId": cid_a, "msgId": msg_ids[0], "brokerName": "broker-a"},
        )
        await self.ask(
            "consume message directly: client not online",
            R.CONSUME_MESSAGE_DIRECTLY,
            {"consumerGroup": G, "clientId": "nobody", "msgId": msg_ids[0], "brokerName": "broker-a"},
        )
        await self.ask(
            "consumer running info, relayed to B",
            R.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": G, "clientId": cid_b, "jstackEnable": "false"},
        )
        await self.ask(
            "consumer running info: client not online",
            R.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": G, "clientId": "nobody", "jstackEnable": "false"},
        )

        # unregister, delete
        await self.ask(
            "unregister B from G",
            R.UNREGISTER_CLIENT,
            {"clientID": cid_b, "consumerGroup": G},
            via="B",
            wait_pushed=1.5,
        )
        await self.ask("consumer list after unregister", R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": G})
        await self.ask("unregister: no clientID", R.UNREGISTER_CLIENT, {"consumerGroup": G}, via="B")
        await self.ask("delete topic", R.DELETE_TOPIC_IN_BROKER, {"topic": f"CsDoomed_{self.s}"})
        await self.ask("delete topic: unknown", R.DELETE_TOPIC_IN_BROKER, {"topic": "NoSuchTopic"})
        await self.ask(
            "delete topic: system topic", R.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"}
        )
        await self.ask("delete topic: no topic", R.DELETE_TOPIC_IN_BROKER, {})
        # a consumer's connection closing: the other member is told
        await self.conns["B"].close()
        await asyncio.sleep(1.5)
        self.steps.append(
            {
                "step": "connection B closed (B had left G; still in the broadcast group)",
                "brokerRequests": self.collect_pushed(),
            }
        )
        await self.ask(
            "consumer connections: broadcast group after B closed",
            R.GET_CONSUMER_CONNECTION_LIST,
            {"consumerGroup": BG},
        )
        for name, c in self.conns.items():
            if name != "B":
                await c.close()
        return self.steps

    async def run_transactions(self) -> None:
        """Half messages to queue 2, END_TRANSACTION in every form, the broker's check-back."""
        T, G, P = self.topic, self.group, self.pgroup
        halves = []
        for what in ("commit", "rollback", "unknown"):
            born = int(time.time() * 1000)
            if what == "unknown":  # never in the future: the broker would check it at once
                born = min(born, self.sent_back_ms + UNKNOW_HALF_BORN_AFTER_SEND_BACK_MS)
            fields, uniq = self.send_fields(
                T, 2, f"Tx{what}", sys_flag=4, extra={"TRAN_MSG": "true", "PGROUP": P}, born=born
            )
            answer = await self.ask(
                f"send half message ({what})", R.SEND_MESSAGE, fields, f"half-{what}".encode(), via="P"
            )
            ext = (answer.ext_fields or {}) if answer else {}
            halves.append(
                (
                    ext.get("queueOffset", "0"),
                    int(ext.get("msgId", "0" * 32)[-16:], 16),
                    uniq,
                    ext.get("msgId", ""),
                )
            )

        def end(i: int, kind: str, **over: str) -> dict[str, str]:
            q, off, uniq, mid = halves[i]
            f = {
                "producerGroup": P,
                "tranStateTableOffset": q,
                "commitLogOffset": str(off),
                "commitOrRollback": kind,
                "fromTransactionCheck": "false",
                "msgId": mid,
                "transactionId": uniq,
            }
            f.update(over)
            return f

        await self.ask(
            "end transaction: wrong producer group",
            R.END_TRANSACTION,
            end(0, "8", producerGroup="OtherGroup"),
            via="P",
        )
        await self.ask(
            "end transaction: wrong tranStateTableOffset",
            R.END_TRANSACTION,
            end(0, "8", tranStateTableOffset="77"),
            via="P",
        )
        await self.ask("end transaction: commit", R.END_TRANSACTION, end(0, "8"), via="P")
        await self.ask("end transaction: rollback", R.END_TRANSACTION, end(1, "12"), via="P")
        await self.ask(
            "end transaction: unknown commit log offset",
            R.END_TRANSACTION,
            end(1, "8", commitLogOffset="999999999"),
            via="P",
        )
        await self.ask(
            "end transaction: type 0 (UNKNOW) gets no answer",
            R.END_TRANSACTION,
            end(2, "0"),
            via="P",
            timeout=2,
        )
        await self.ask(
            "end transaction: type 99 is refused", R.END_TRANSACTION, end(2, "99"), via="P", timeout=2
        )
        await self.ask(
            "end transaction: no commitOrRollback",
            R.END_TRANSACTION,
            {k: v for k, v in end(2, "8").items() if k != "commitOrRollback"},
            via="P",
        )
        await self.ask(
            "pull the committed message (queue 2)",
            R.PULL_MESSAGE,
            self.pull(G, T, 2, 0, sys_flag=4, sub="*"),
            via="A",
            messages=True,
        )
        check = await self.wait_check("P", 30.0)
        if check is not None:
            f = check.ext_fields or {}
            await self.ask(
                "end transaction: commit from the check-back",
                R.END_TRANSACTION,
                {
                    "producerGroup": P,
                    "tranStateTableOffset": f.get("tranStateTableOffset", ""),
                    "commitLogOffset": f.get("commitLogOffset", ""),
                    "commitOrRollback": "8",
                    "fromTransactionCheck": "true",
                    "msgId": f.get("msgId", ""),
                    "transactionId": f.get("transactionId", ""),
                },
                via="P",
            )

    async def wait_check(self, via: str, timeout: float) -> RemotingCommand | None:
        """The first CHECK_TRANSACTION_STATE the broker sends to ``via`` (recorded as a step)."""
        conn = self.conns[via]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in conn.checks[:1]:
                if c.code == R.CHECK_TRANSACTION_STATE:
                    self.steps.append(
                        {
                            "step": "broker check-back for the UNKNOW half message",
                            "connection": via,
                            "brokerRequests": {via: [self.n.command(c, True)]},
                        }
                    )
                    return c
            await asyncio.sleep(0.2)
        self.steps.append(
            {
                "step": "broker check-back for the UNKNOW half message",
                "connection": via,
                "brokerRequests": None,
                "missingAfterSeconds": timeout,
            }
        )
        return None

    def pull(
        self,
        group: str,
        topic: str,
        queue: int,
        offset: int,
        *,
        sys_flag: int,
        commit: int = 0,
        sub: str | None = None,
    ) -> dict[str, str]:
        fields = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit),
            "suspendTimeoutMillis": "0",
            "subVersion": "0",
            "expressionType": "TAG",
        }
        if sub is not None:
            fields["subscription"] = sub
        return fields
