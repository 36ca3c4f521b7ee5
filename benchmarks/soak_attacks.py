"""Issue 31's attacks, for ``benchmarks.soak_writable --attacks``: each a small task of its own that
repeats one bounded round against the soak's ``serve --writable`` while producers, consumers and
kill -9 go on, and counts what it was answered.

The rounds (each on 127.0.0.1, each bounded by ``ROUND_TIMEOUT``):

* ``planted-groups``: UPDATE_CONSUMER_OFFSET of ``--planted-groups`` new groups, pipelined on one
  connection (item 3: the per-connection and broker-wide creation limits answer the rest);
* ``heartbeat-groups``: one HEART_BEAT naming ``--heartbeat-groups`` new consumer groups (item 3);
* ``nested-json``: bodies nested 5,000 levels on codes 41, 42, 46 and 200, and JSON headers holding a
  lone surrogate escape (``\\ud800``) on codes 310, 17 and 215, each on a connection of its own, as
  ``tests/server/remoting/test_fuzzed_frames_answered.py`` sends them (item 8): answered or not;
* ``idle-holders``: ``--idle-holders`` connections that each make one request and go silent (the
  server's ``--max-connections``), then fresh clients: served or SYSTEM_BUSY, and how many holders
  the server closed (item 4);
* ``overwrite-files``: a full IndexFile and a full consume queue file overwritten in place with
  another file's bytes (``cp``: same inode, as ``benchmarks/file_fallback.py``), acknowledged keys in
  the IndexFile's range queried and the consume queue file's positions pulled until the answers are
  right again (item 7), then the file's own bytes written back, as an operator restoring it would
  (the rebuilt copy lives in the server's memory only: without the restore the store on disk stays
  damaged, and fsck and the real broker would see it). The soak's kill -9 waits while a file is
  overwritten;
* ``http-rebind``: GET /api/topics and the resend POST with ``Host: attacker.example``, the POST
  with no CSRF token and with a foreign ``Origin`` (item 2); a read with the right Host as control;
* ``grpc-large``: ``--grpc-calls`` concurrent SendMessage calls of ``--grpc-mib`` MiB each on the
  gRPC port (item 1), and the server's peak resident memory (``VmHWM``) seen.

Rebinding or CSRF requests answered 2xx and consume queue / index answers still wrong when the
round gives up are the soak's ``attacks`` problems; the rest are counts for the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from benchmarks.file_fallback import _overwrite
from benchmarks.grpc_memory import CHANNEL_OPTIONS, META, big_request, memory_mib
from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from protocol.message import decode_messages

ATTACKS = (
    "planted-groups",
    "heartbeat-groups",
    "nested-json",
    "idle-holders",
    "overwrite-files",
    "http-rebind",
    "grpc-large",
)
#: Seconds one round may take before it is counted as ``timeout``.
ROUND_TIMEOUT = 40.0
#: Seconds a connection waits for an answer.
ANSWER_TIMEOUT = 5.0
DEEP_ARRAY = b"[" * 5000 + b"]" * 5000
DEEP_OBJECT = b'{"a":' * 5000 + b"1" + b"}" * 5000
#: Bytes of a consume queue entry, and of an IndexFile's header's fields we read.
CQ_ENTRY = 20
INDEX_HEADER = struct.Struct(">qqqqii")
REBIND_HOST = "attacker.example"


class Acknowledged(Protocol):
    """What the soak journals of a SEND_OK (``soak_writable.Acked``)."""

    topic: str
    key: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int

    @property
    def phys(self) -> int: ...


class Target(Protocol):
    """The server under attack (``soak_writable.Server``)."""

    port: int
    lock: asyncio.Lock
    up: asyncio.Event

    def endpoint(self, name: str) -> str | None: ...
    def pid(self) -> int | None: ...


def json_frame(code: int, fields: dict[str, str] | None, body: bytes = b"", opaque: int = 7) -> bytes:
    """A JSON-serialized request frame; ``json.dumps`` writes a lone surrogate as its escape."""
    header: dict[str, Any] = {"code": code, "flag": 0, "language": "JAVA", "opaque": opaque, "version": 399}
    if fields is not None:
        header["extFields"] = fields
    head = json.dumps(header).encode("ascii")
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def _v2(**over: str) -> dict[str, str]:
    fields = {"a": "pg", "b": "FuzzTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    fields.update({"h": "0", "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"})
    fields.update(over)
    return fields


#: (name, frame): the fuzzed frames of issue 31 item 8.
FUZZED = [
    ("310 surrogate topic", json_frame(310, _v2(b="Fuzz\ud800"))),
    ("310 surrogate group", json_frame(310, _v2(a="\udc00pg"))),
    ("17 surrogate topic", json_frame(17, {"topic": "T\ud800", "readQueueNums": "1", "writeQueueNums": "1",
                                           "perm": "6", "topicFilterType": "SINGLE_TAG"})),
    ("215 surrogate topic", json_frame(215, {"topic": "\ud800"})),
    ("41 nested array", json_frame(41, None, DEEP_ARRAY)),
    ("42 nested object", json_frame(42, None, DEEP_OBJECT)),
    ("46 nested array", json_frame(46, None, DEEP_ARRAY)),
    ("200 nested object", json_frame(200, None, DEEP_OBJECT)),
    ("200 nested array", json_frame(200, None, DEEP_ARRAY)),
]  # fmt: skip


def request(code: int, fields: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand(
        code=code,
        language=LanguageCode.JAVA,
        version=407,
        opaque=random.randrange(1, 2**31),
        flag=0,
        ext_fields=fields,
        body=body,
        serialize_type=SerializeType.JSON,
    )


async def exchange(port: int, frames: Sequence[bytes], timeout: float = ANSWER_TIMEOUT) -> list[Any]:
    """Send ``frames`` pipelined on one connection; the answers, then ``"closed"`` or ``"silent"`` for
    each frame left unanswered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers: list[Any] = []
    try:
        writer.write(b"".join(frames))
        await writer.drain()
        decoder = FrameDecoder()
        while len(answers) < len(frames):
            data = await asyncio.wait_for(reader.read(1 << 16), timeout)
            if not data:
                return answers + ["closed"] * (len(frames) - len(answers))
            # Only answers: the server's own requests (NOTIFY_CONSUMER_IDS_CHANGED) are not counted.
            answers += [c for c in decoder.feed(data) if c.is_response]
    except TimeoutError:
        return answers + ["silent"] * (len(frames) - len(answers))
    except OSError:
        return answers + ["closed"] * (len(frames) - len(answers))
    finally:
        writer.close()
    return answers


def outcome(answer: Any) -> str:
    return answer if isinstance(answer, str) else f"code {answer.code}"


def heartbeat_body(client_id: str, groups: Sequence[str], topic: str) -> bytes:
    sub = {"topic": topic, "subString": "*", "tagsSet": [], "subVersion": 1, "expressionType": "TAG"}
    consumers = [
        {"groupName": g, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [sub], "unitMode": False}
        for g in groups
    ]  # fmt: skip
    return json.dumps({"clientID": client_id, "consumerDataSet": consumers, "producerDataSet": []}).encode()


class Attacks:
    """The attack tasks of one soak and what each was answered (``counts[attack][outcome]``)."""

    def __init__(
        self,
        names: Sequence[str],
        target: Target,
        store: Path,
        acked: list[Any],
        topics: Sequence[str],
        options: Any,
    ) -> None:
        self.names = list(names)
        self.target = target
        self.store = store
        self.acked = acked
        self.topics = list(topics)
        self.options = options
        self.counts: dict[str, Counter[str]] = {name: Counter() for name in self.names}
        #: What must never happen, whatever the kills: a rebinding or CSRF request let through, an
        #: overwritten file's answers still wrong when the round gives up.
        self.problems: list[str] = []
        self.rng = random.Random(options.seed + 31)
        self.rounds = 0
        self.rss_peak_mib = 0.0

    def round_of(self, name: str) -> Callable[[], Awaitable[None]]:
        return getattr(self, "_" + name.replace("-", "_"))

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._loop(name, stop) for name in self.names))

    async def _loop(self, name: str, stop: asyncio.Event) -> None:
        round_ = self.round_of(name)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.target.up.wait(), 5)
            if not self.target.up.is_set():
                continue
            self.rounds += 1
            self.counts[name]["rounds"] += 1
            pid = self.target.pid()
            try:
                await asyncio.wait_for(round_(), ROUND_TIMEOUT)
            except TimeoutError:
                self.counts[name]["round timeout"] += 1
            except (OSError, asyncio.IncompleteReadError, aiohttp.ClientError) as exc:
                self.counts[name][f"round {type(exc).__name__}"] += 1
            if not self._still(pid):
                self.counts[name]["rounds across a kill -9"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.options.attack_pause)

    def _still(self, pid: int | None) -> bool:
        """Is the server process ``pid`` still the one serving? (A kill -9 clears ``up`` before the
        signal, and the killed process may still look alive until the soak reaps it.)"""
        return pid is not None and self.target.up.is_set() and self.target.pid() == pid

    # -- item 3 -------------------------------------------------------------------------------------

    async def _planted_groups(self) -> None:
        n = self.rounds
        frames = [
            encode_frame(
                request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": f"Planted{n}x{i}",
                        "topic": self.topics[0],
                        "queueId": "0",
                        "commitOffset": "1",
                    },
                )
            )
            for i in range(self.options.planted_groups)
        ]
        for answer in await exchange(self.target.port, frames, timeout=10):
            self.counts["planted-groups"][outcome(answer)] += 1

    async def _heartbeat_groups(self) -> None:
        n = self.rounds
        groups = [f"HbFlood{n}x{i}" for i in range(self.options.heartbeat_groups)]
        body = heartbeat_body(f"flood-{n}", groups, self.topics[0])
        frame = encode_frame(request(RequestCode.HEART_BEAT, {}, body))
        for answer in await exchange(self.target.port, [frame], timeout=10):
            self.counts["heartbeat-groups"][outcome(answer)] += 1

    # -- item 8 -------------------------------------------------------------------------------------

    async def _nested_json(self) -> None:
        pid = self.target.pid()
        answers = await asyncio.gather(*(exchange(self.target.port, [frame]) for _, frame in FUZZED))
        same = self._still(pid)
        for (name, _), got in zip(FUZZED, answers, strict=True):
            self.counts["nested-json"][outcome(got[0])] += 1
            if isinstance(got[0], str):
                # Unanswered with no kill -9 in between: the server's fault, not the chaos's.
                self.counts["nested-json"][f"{name}: {got[0]}{'' if same else ' (a kill -9)'}"] += 1

    # -- item 4 -------------------------------------------------------------------------------------

    async def _idle_holders(self) -> None:
        counts = self.counts["idle-holders"]
        ask = encode_frame(request(RequestCode.GET_MAX_OFFSET, {"topic": self.topics[0], "queueId": "0"}))
        holders: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        try:
            for _ in range(self.options.idle_holders):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.target.port)
                holders.append((reader, writer))
                writer.write(ask)
                await writer.drain()
                decoder = FrameDecoder()
                got: list[Any] = []
                with contextlib.suppress(TimeoutError):
                    while not got:
                        data = await asyncio.wait_for(reader.read(4096), ANSWER_TIMEOUT)
                        if not data:
                            got = ["closed"]
                            break
                        got = decoder.feed(data)
                counts[f"holder {outcome(got[0]) if got else 'silent'}"] += 1
            await asyncio.sleep(1.5)  # every holder idle past the server's EVICTABLE_AFTER
            fresh = await asyncio.gather(*(exchange(self.target.port, [ask]) for _ in range(5)))
            for got in fresh:
                counts[f"fresh {outcome(got[0])}"] += 1
            await asyncio.sleep(0.5)
            counts["holders closed by the server"] += sum(reader.at_eof() for reader, _ in holders)
        finally:
            for _, writer in holders:
                writer.close()

    # -- item 7 -------------------------------------------------------------------------------------

    async def _overwrite_files(self) -> None:
        counts = self.counts["overwrite-files"]
        async with self.target.lock:  # no kill -9 while a file is overwritten
            if not self.target.up.is_set():
                return
            index = sorted(p for p in (self.store / "index").glob("*") if p.name.isdigit())
            if len(index) >= 2:
                victim = index[self.rng.randrange(len(index) - 1)]  # a full one: never the newest
                source = next(p for p in index if p != victim)
                await self._overwritten(victim, source, self._index_probe(victim.read_bytes()), "index")
            else:
                counts["index: no full file yet"] += 1
            queue = self._full_queue_file()
            if queue is None:
                counts["consume queue: no full file yet"] += 1
                return
            victim, source, topic, queue_id = queue
            await self._overwritten(
                victim, source, self._queue_probe(victim, topic, queue_id), "consume queue"
            )

    def _full_queue_file(self) -> tuple[Path, Path, str, int] | None:
        """A consume queue file that is not its queue's last (full), and another queue's file."""
        files = {
            (t, q): sorted((self.store / "consumequeue" / t / str(q)).glob("*"))
            for t in self.topics
            for q in range(4)
        }
        full = [(t, q, f) for (t, q), fs in files.items() for f in fs[:-1]]
        if not full:
            return None
        topic, queue_id, victim = full[self.rng.randrange(len(full))]
        others = [f for (t, q), fs in files.items() if (t, q) != (topic, queue_id) for f in fs[:-1]]
        if not others:
            return None
        return victim, others[self.rng.randrange(len(others))], topic, queue_id

    async def _overwritten(
        self, victim: Path, source: Path, probe: Callable[[], Awaitable[tuple[int, int]]], kind: str
    ) -> None:
        counts = self.counts["overwrite-files"]
        own = victim.read_bytes()
        _overwrite(victim, source)
        counts[f"{kind} overwritten"] += 1
        started = time.monotonic()
        try:
            while True:
                await asyncio.sleep(1.0)
                right, wrong = await probe()
                if not wrong or time.monotonic() - started > self.options.overwrite_seconds:
                    break
            counts[f"{kind} probes right"] += right
            counts[f"{kind} probes wrong"] += wrong
            if wrong:
                self.problems.append(
                    f"{kind} file {victim.name} overwritten: {wrong} of {right + wrong} answers still wrong "
                    f"after {self.options.overwrite_seconds:g} s"
                )
            else:
                counts[f"{kind} right again within {round(time.monotonic() - started)} s"] += 1
        finally:
            with open(victim, "r+b") as f:  # the operator restores the file (same inode)
                f.write(own)
            counts[f"{kind} restored"] += 1

    def _index_probe(self, own: bytes) -> Callable[[], Awaitable[tuple[int, int]]]:
        """Acknowledged keys whose record the overwritten IndexFile held: QUERY_MESSAGE finds each."""
        _, _, begin, end, _, _ = INDEX_HEADER.unpack_from(own)
        inside = [a for a in self.acked if begin <= a.phys <= end]
        sample = self.rng.sample(inside, min(20, len(inside)))

        async def probe() -> tuple[int, int]:
            frames = [
                encode_frame(
                    request(
                        RequestCode.QUERY_MESSAGE,
                        {
                            "topic": a.topic,
                            "key": a.key,
                            "maxNum": "64",
                            "beginTimestamp": "0",
                            "endTimestamp": str(2**63 - 1),
                        },
                    )
                )
                for a in sample
            ]
            answers = await exchange(self.target.port, frames, timeout=10)
            right = 0
            for a, answer in zip(sample, answers, strict=False):
                if isinstance(answer, str) or answer.code != ResponseCode.SUCCESS:
                    continue
                offsets = [
                    m.commit_log_offset for m in decode_messages(bytes(answer.body or b""), read_body=False)
                ]
                right += a.phys in offsets
            return right, len(sample) - right

        return probe

    def _queue_probe(
        self, victim: Path, topic: str, queue_id: int
    ) -> Callable[[], Awaitable[tuple[int, int]]]:
        """Acknowledged messages at the overwritten file's queue positions: a PULL there gets each."""
        first = int(victim.name) // CQ_ENTRY
        entries = victim.stat().st_size // CQ_ENTRY
        keys = {
            a.queue_offset: a.key
            for a in self.acked
            if a.topic == topic and a.queue_id == queue_id and first <= a.queue_offset < first + entries
        }
        starts = sorted(self.rng.sample(sorted(keys), min(5, len(keys))))

        async def probe() -> tuple[int, int]:
            frames = [
                encode_frame(
                    request(
                        RequestCode.PULL_MESSAGE,
                        {
                            "consumerGroup": "SoakAttackProbe",
                            "topic": topic,
                            "queueId": str(queue_id),
                            "queueOffset": str(start),
                            "maxMsgNums": "8",
                            "sysFlag": "4",
                            "commitOffset": "0",
                            "suspendTimeoutMillis": "0",
                            "subscription": "*",
                            "subVersion": "0",
                            "expressionType": "TAG",
                        },
                    )
                )
                for start in starts
            ]
            answers = await exchange(self.target.port, frames, timeout=10)
            right = wrong = 0
            for start, answer in zip(starts, answers, strict=False):
                got = {}
                if not isinstance(answer, str) and answer.code == ResponseCode.SUCCESS:
                    got = {
                        m.queue_offset: m.properties.get("KEYS")
                        for m in decode_messages(bytes(answer.body or b""))
                    }
                if got.get(start) == keys[start]:
                    right += 1
                else:
                    wrong += 1
            return right, wrong + len(starts) - len(answers)

        return probe

    # -- item 2 -------------------------------------------------------------------------------------

    async def _http_rebind(self) -> None:
        counts = self.counts["http-rebind"]
        url = self.target.endpoint("HTTP_URL")
        if url is None:
            counts["no HTTP port"] += 1
            return
        url = url.rstrip("/")
        netloc = url.split("://", 1)[1]
        msg_id = self.acked[-1].offset_msg_id if self.acked else "7F00000100002A9F0000000000000000"
        resend = f"{url}/api/messages/{msg_id}/resend"
        rebound = {"Host": f"{REBIND_HOST}:{netloc.rsplit(':', 1)[1]}"}
        cases: list[tuple[str, str, str, dict[str, str], bool]] = [
            ("read", "GET", f"{url}/api/topics", {}, True),
            ("rebound read", "GET", f"{url}/api/topics", rebound, False),
            ("rebound resend", "POST", resend, rebound, False),
            ("resend without token", "POST", resend, {}, False),
            ("resend from another origin", "POST", resend, {"Origin": f"http://{REBIND_HOST}"}, False),
        ]
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for what, method, where, headers, allowed in cases:
                async with session.request(method, where, headers=headers, json={}) as answer:
                    await answer.read()
                    counts[f"{what} {answer.status}"] += 1
                    if not allowed and answer.status < 300:
                        self.problems.append(f"http {what} answered {answer.status}: the attack got through")

    # -- item 1 -------------------------------------------------------------------------------------

    async def _grpc_large(self) -> None:
        import grpc  # only this attack needs it

        from server.grpc.v2 import Code, service_grpc

        counts = self.counts["grpc-large"]
        endpoint = self.target.endpoint("GRPC_ENDPOINTS")
        if endpoint is None:
            counts["no gRPC port"] += 1
            return
        channels = [grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) for _ in range(2)]
        sampler = asyncio.ensure_future(self._sample_rss())
        try:
            stubs = [service_grpc.MessagingServiceStub(ch) for ch in channels]
            message = big_request(self.options.grpc_mib)

            async def one(i: int) -> str:
                try:
                    answer = await stubs[i % 2].SendMessage(message, metadata=META, timeout=20)
                except grpc.aio.AioRpcError as failed:
                    return failed.code().name
                return Code.Name(answer.status.code)

            for name in await asyncio.gather(*(one(i) for i in range(self.options.grpc_calls))):
                counts[name] += 1
        finally:
            sampler.cancel()
            for channel in channels:
                await channel.close()

    async def _sample_rss(self) -> None:
        while True:
            pid = self.target.pid()
            if pid is not None:
                with contextlib.suppress(OSError, KeyError):
                    self.rss_peak_mib = max(self.rss_peak_mib, memory_mib(pid)["VmHWM"])
            await asyncio.sleep(0.2)

    # -- after the soak -----------------------------------------------------------------------------

    def kept(self, config: Path) -> dict[str, int]:
        """What the planted names left in the store's config files at the end (names, not mentions)."""

        def text(name: str) -> str:
            path = config / name
            return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

        # consumerOffset.json is fastjson's (queue ids as bare numbers): its "topic@group" keys.
        planted = set(re.findall(r'"[^"@]*@(Planted[^"]*)"', text("consumerOffset.json")))
        groups = _table(text("subscriptionGroup.json"), "subscriptionGroupTable")
        topics = _table(text("topics.json"), "topicConfigTable")
        return {
            "planted groups in consumerOffset.json": len(planted),
            "heartbeat groups in subscriptionGroup.json": sum(g.startswith("HbFlood") for g in groups),
            "heartbeat retry topics in topics.json": sum(t.startswith("%RETRY%HbFlood") for t in topics),
        }

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: dict(sorted(self.counts[name].items())) for name in self.names}
        if "grpc-large" in self.names:
            out["server_rss_peak_mib"] = self.rss_peak_mib
        return out


def _table(text: str, name: str) -> list[str]:
    """The names in a config file's table (subscriptionGroup.json, topics.json)."""
    try:
        return list(json.loads(text).get(name, {})) if text else []
    except ValueError:
        return []


def parse_attacks(value: str) -> list[str]:
    """``--attacks``: a comma-separated list of ``ATTACKS``, or ``all``."""
    names = list(ATTACKS) if value.strip() == "all" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {', '.join(unknown)}; choose from {', '.join(ATTACKS)} or all")
    return names
