"""Soak of ``rmq-query serve --writable``: producers, consumers, kill -9, a full disk, a hostile client.

The done condition of issue 18: run all of it together and lose no acknowledged message, leave a
store ``fsck`` passes and the real 4.9.7 broker opens with the same answers.

    python -m benchmarks.soak_writable --minutes 10 --store /tmp/soak   # prints a JSON report

What runs, for ``--minutes``, in one asyncio loop:

* the server: ``serve --writable`` as a child process on ``DIR/disk/store``, on a fixed free port so
  clients reconnect to the same address after a restart (``--grpc-port 0``); ``DIR/disk`` is a tmpfs of
  ``--disk-mib`` (``mount -t tmpfs``, as ``tests/store/write/test_disk_full.py`` does; unmounted at
  the end). Where mounting is refused the store stays on ``DIR`` and the disk-full cycles are
  skipped, which the report says (``disk.tmpfs: false``);
* ``--producers`` producers (``clients.producer.Producer``, one connection each, ``--in-flight``
  SENDs on it at a time, so one read may bring the server several) sending to two
  topics auto-created from TBW102, one message in ten as a batch of three; every SEND_OK goes to the
  journal (``DIR/journal.jsonl``: topic, key, unique id, offset id, queue, queue offset), every failure
  too, with its class or code (a timeout or a closed connection may or may not have stored it);
  every ``--new-topic-every`` seconds one SEND goes to a new topic, auto-created by that SEND (its
  ``topics.json`` write then meets the kills and the full disk too);
* ``--groups`` consumer groups, one ``clients.consumer.PullConsumer`` each over both topics, closed
  and started again every ``--consumer-restart`` seconds so the committed offsets are what a new
  member starts from; every message received is recorded by group and queue position;
* a hostile client, looping: garbage frames, a connection pipelining ``--hostile-pulls`` suspended
  PULLs, ``--slowloris`` connections trickling a frame a byte a second, oversized and non-UTF-8
  HEART_BEAT bodies (as ``tests/server/remoting/test_garbage_input.py``, ``test_slow_requests.py``,
  ``test_heavy_bodies.py`` and ``processors/test_held_pull_bounds.py`` send them);
* every ``--kill-every`` seconds (jittered) ``kill -9`` of the server, then a restart on the same
  store and port; a server that exits by itself is counted (``server.unexpected_exits``) and restarted;
* every ``--fill-every`` seconds a ballast file beside the store is written until ENOSPC, kept
  ``--full-seconds`` and until a SEND was refused for it (at most one start-up longer), then removed.
* with ``--attacks LIST`` (or ``all``), issue 31's attacks, each a task of its own repeating a
  bounded round every ``--attack-pause`` seconds (``benchmarks.soak_attacks``): planted groups,
  a heartbeat with thousands of groups, nested-JSON and lone-surrogate frames, idle connection
  holders at ``--max-connections`` (64 with them), an IndexFile and a consume queue file
  overwritten in place (then restored), DNS-rebinding and token-less HTTP requests, large gRPC
  SendMessage calls; what each was answered is in ``stats.attacks``, and a rebinding or CSRF
  request let through or an overwritten file still answering wrong is an ``attacks`` problem.

    python -m benchmarks.soak_writable --minutes 2 --seed 31 --attacks all   # with RMQ_ROCKETMQ_HOME set

Then the producers and the chaos stop, the consumers drain (until every group has every acknowledged
message or ``--drain-seconds``), close (their final commit is read back), and the server gets SIGTERM.
The checks, each a list of problems in the report (``ok`` is true only if all are empty):

* ``acked``: no two SEND_OKs name one queue position or one CommitLog offset; through ``serve
  --writable`` on the final store every acknowledged message is VIEW_MESSAGE_BY_ID by its offset id
  (topic, queue, queue offset and key as acknowledged) and found by QUERY_MESSAGE by key at that offset;
* ``consumed``: each group received every acknowledged message at least once, at the queue position
  its SEND_OK named and with its key (duplicates counted, not a problem: at-least-once across kill -9);
* ``committed``: each group's committed offset per queue never passes what it received (every
  position below it was delivered to the group); checked on the final offsets and on the offsets a
  restarted member starts from;
* ``fsck``: ``rmq-query fsck --deep`` exits 0;
* ``real_broker`` (skipped without ``java`` or ``RMQ_ROCKETMQ_HOME``): the broker started
  on a copy of the final store answers QUERY_MESSAGE by key (codes and the CommitLog offsets of the
  records, for ``--compare-keys`` acknowledged keys and a few never sent), GET_MIN/MAX_OFFSET of
  every queue and QUERY_CONSUMER_OFFSET of every group and queue exactly as ours does.

``tests/server/test_soak_writable.py`` runs a 25-second version and asserts the report.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.soak_attacks import ATTACKS, Attacks, parse_attacks
from clients.client import RemotingClient
from clients.consumer import PullConsumer, ReceiveTimeoutError
from clients.errors import ClientError, ResponseCodeError
from clients.producer import OutgoingMessage, Producer
from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.frame import FrameDecoder, encode_frame
from protocol.message import decode_message, decode_messages
from protocol.message_id import decode_offset_msg_id

REPO = Path(__file__).resolve().parents[1]
#: The real RocketMQ 4.9.7 (``RMQ_ROCKETMQ_HOME``, as for the tests: ``tests/golden/README.md``).
ROCKETMQ_HOME = Path(os.environ.get("RMQ_ROCKETMQ_HOME", REPO.parent / "shared" / "rocketmq-4.9.7-bin"))
TOPICS = ("SoakA", "SoakB")
#: Queues of a topic auto-created from TBW102 by our producer (``DEFAULT_TOPIC_QUEUE_NUMS``).
QUEUES = 4
HOSTILE_GROUP = "SoakHostile"
JAVA_LONG_MAX = str(2**63 - 1)
#: Small files so the soak rolls CommitLog files, consume queue files and IndexFiles many times, and
#: the same geometry for the real broker (``start-broker.sh`` reads ``broker.conf`` beside its store).
BROKER_CONF = (
    "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerIP1=127.0.0.1\n"
    "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
    "maxHashSlotNum=1000\nmaxIndexNum=4000\nmaxMessageSize=65536\nfileReservedTime=87600\n"
)
#: Seconds a server or the broker gets to start before the soak gives up on it.
START_TIMEOUT = 60.0
#: Heartbeat bodies the server must refuse cheaply (``tests/server/remoting/test_heavy_bodies.py``).
MANY_VALUES = b'{"consumerDataSet":[' + b"{}," * 110_000 + b"{}]}"
LONG_BODY = b'{"clientID":"' + b"c" * (2 * 1024 * 1024) + b'"}'
NOT_UTF8 = b'{"clientID":"c\xff","consumerDataSet":[{"groupName":"G\xff","subscriptionDataSet":[]}]}'


def free_port_pair() -> int:
    """A port P with P - 2 (our fast port, the broker's VIP channel) and P + 1 (the broker's HA) free."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if not 1026 < port < 65534:
            continue
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise OSError("no free port triple")


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


@dataclass(slots=True)
class Acked:
    """One SEND_OK: what the producer was told."""

    topic: str
    key: str
    uniq: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int

    @property
    def phys(self) -> int:
        return decode_offset_msg_id(self.offset_msg_id).offset


@dataclass
class Stats:
    """What happened during the soak, for the report."""

    sends_ok: int = 0
    send_failures: Counter[str] = field(default_factory=Counter)
    refused_disk_full: int = 0
    kills: int = 0
    restarts: int = 0
    start_failures: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    disk_full_cycles: int = 0
    ballast_bytes: list[int] = field(default_factory=list)
    hostile: Counter[str] = field(default_factory=Counter)
    consumer_restarts: int = 0
    consumer_errors: Counter[str] = field(default_factory=Counter)
    committed_ahead: list[str] = field(default_factory=list)
    #: Issue 31's attacks (``--attacks``): per attack, what its rounds were answered.
    attacks: dict[str, Any] = field(default_factory=dict)


class Server:
    """``serve --writable`` as a child process on a fixed port; killed, restarted, watched."""

    def __init__(
        self, work: Path, store: Path, conf: Path, port: int, stats: Stats, extra: Sequence[str] = ()
    ) -> None:
        self.work, self.store, self.conf, self.port, self.stats = work, store, conf, port, stats
        #: More ``serve`` flags (``--max-connections N``).
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.up = asyncio.Event()
        self.expected_exit = False
        #: Held by whoever kills or restarts, so two restarts never race for the store.
        self.lock = asyncio.Lock()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start it and wait for its NAMESRV_ADDR line; a failed start (e.g. on the full disk) is
        recorded and tried again every half second, up to ``START_TIMEOUT``."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            self.starts += 1
            out = self.work / f"serve-{self.starts}.out"
            with open(self.work / "serve.log", "ab") as log, open(out, "wb") as stdout:
                log.write(f"---- start {self.starts} at {time.time():.3f}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(self.store),
                     "--config", str(self.conf), "--port", str(self.port), "--grpc-port", "0",
                     "--http", "0", "--refresh-interval", "0.5", *self.extra],
                    cwd=REPO, stdout=stdout, stderr=log,
                )  # fmt: skip
            while self.proc.poll() is None and time.monotonic() < deadline:
                if "NAMESRV_ADDR=" in out.read_text(errors="replace"):
                    self.expected_exit = False
                    self.up.set()
                    return
                await asyncio.sleep(0.05)
            code = self.proc.poll()
            if code is None:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"serve --writable did not start in {START_TIMEOUT:g} s; see {self.work}")
            self.stats.start_failures.append(f"start {self.starts}: exit {code}: {self._log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve --writable never started; see {self.work / 'serve.log'}")
            await asyncio.sleep(0.5)

    def endpoint(self, name: str) -> str | None:
        """What the running server printed after ``NAME=`` (``GRPC_ENDPOINTS``, ``HTTP_URL``), if it did."""
        out = self.work / f"serve-{self.starts}.out"
        for line in out.read_text(errors="replace").splitlines() if out.exists() else []:
            if line.startswith(name + "="):
                return line.split("=", 1)[1].strip()
        return None

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def _log_tail(self, lines: int = 3) -> str:
        text = (self.work / "serve.log").read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    async def kill9(self) -> None:
        assert self.proc is not None
        self.up.clear()
        self.expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.proc.wait)
        self.stats.kills += 1

    async def watch(self, stop: asyncio.Event) -> None:
        """Restart a server that exited by itself (recorded as a failure: nothing but us kills it)."""
        while not stop.is_set():
            await asyncio.sleep(0.2)
            async with self.lock:
                proc = self.proc
                if proc is None or not self.up.is_set() or proc.poll() is None or self.expected_exit:
                    continue
                self.up.clear()
                self.stats.unexpected_exits.append(f"exit {proc.returncode}: {self._log_tail(20)}")
                await self.start()
                self.stats.restarts += 1

    async def terminate(self) -> int:
        """SIGTERM and the exit status (killed after 30 s)."""
        assert self.proc is not None
        self.up.clear()
        self.expected_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.proc.wait, 30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        return self.proc.returncode


class Soak:
    """The run: clients, chaos, then the checks."""

    def __init__(self, args: argparse.Namespace, work: Path, disk: Path, tmpfs: bool) -> None:
        self.args = args
        self.work = work
        self.disk = disk
        self.tmpfs = tmpfs
        self.store = disk / "store"
        self.conf = work / "broker.conf"
        self.conf.write_text(BROKER_CONF, encoding="utf-8")
        self.stats = Stats()
        self.rng = random.Random(args.seed)
        connections = getattr(args, "max_connections", None)  # a Namespace made by a test may lack it
        extra = [] if connections is None else ["--max-connections", str(connections)]
        self.server = Server(work, self.store, self.conf, free_port_pair(), self.stats, extra)
        self.acked: list[Acked] = []
        self.attacks = Attacks(
            getattr(args, "attacks", []), self.server, self.store, self.acked, TOPICS, args
        )
        #: Topics auto-created during the soak (not consumed; checked in the store and by the broker).
        self.new_topics: list[str] = []
        self.journal = open(work / "journal.jsonl", "w", encoding="utf-8")
        #: group -> (topic, queue, queue offset) -> [keys received there, one per delivery]
        self.received: dict[str, dict[tuple[str, int, int], list[str]]] = {
            g: defaultdict(list) for g in self.groups
        }
        self.stop_chaos = asyncio.Event()
        self.stop_producers = asyncio.Event()
        self.stop_consumers = asyncio.Event()
        self.disk_full = False
        #: (member, queue) whose start offset was checked.
        self._checked: set[tuple[int, Any]] = set()

    @property
    def groups(self) -> list[str]:
        return [f"SoakGroup{i}" for i in range(self.args.groups)]

    def _journal(self, entry: dict[str, Any]) -> None:
        self.journal.write(json.dumps(entry) + "\n")

    # -- producers ----------------------------------------------------------------------------------

    async def produce(self, n: int) -> None:
        """Producer ``n``: one connection with ``--in-flight`` SENDs on it at a time (its lanes), so
        that the server gets several SENDs in one read, as from a Java producer's threads."""
        async with Producer(self.server.addr, group=f"SoakProducer{n}", timeout=3.0) as producer:
            await asyncio.gather(*(self._lane(producer, n, lane) for lane in range(self.args.in_flight)))

    async def _lane(self, producer: Producer, n: int, lane: int) -> None:
        """One lane of producer ``n``: a SEND at a time, ``--rate`` shared by the producer's lanes."""
        rng = random.Random(self.args.seed * 1000 + n + 1_000_000 * lane)
        interval = self.args.in_flight / self.args.rate if self.args.rate > 0 else 0.0
        name = f"p{n}" if lane == 0 else f"p{n}.{lane}"
        sent = 0
        next_new_topic = time.monotonic() + self.args.new_topic_every
        while not self.stop_producers.is_set():
            topic = TOPICS[rng.randrange(len(TOPICS))]
            if n == lane == 0 and self.args.new_topic_every > 0 and time.monotonic() >= next_new_topic:
                # A SEND that auto-creates a topic (its topics.json write, on a full disk too).
                next_new_topic = time.monotonic() + self.args.new_topic_every
                topic = f"SoakNew{len(self.new_topics)}"
                self.new_topics.append(topic)
            batch = rng.random() < 0.1
            keys = [f"{name}-{sent + i}" for i in range(3 if batch else 1)]
            sent += len(keys)
            bodies = [(k + " ").encode() + rng.randbytes(rng.randrange(50, 600)).hex().encode() for k in keys]
            try:
                if batch:
                    messages = [
                        OutgoingMessage(b, keys=k, tags="TagB") for k, b in zip(keys, bodies, strict=True)
                    ]
                    results = await producer.send_batch(topic, messages)
                else:
                    one = await producer.send(topic, bodies[0], keys=keys[0], tags="TagA")
                    assert one is not None
                    results = [one]
            except ResponseCodeError as exc:
                code = int(getattr(exc, "code", -1))
                self.stats.send_failures[f"code {code}"] += len(keys)
                self.stats.refused_disk_full += len(keys) * (code == ResponseCode.SERVICE_NOT_AVAILABLE)
                for k in keys:
                    self._journal({"topic": topic, "key": k, "failed": f"code {code}"})
                await asyncio.sleep(0.05)
                continue
            except (ClientError, ProtocolError, OSError) as exc:
                self.stats.send_failures[type(exc).__name__] += len(keys)
                for k in keys:
                    self._journal({"topic": topic, "key": k, "failed": type(exc).__name__})
                await asyncio.sleep(0.1)
                continue
            for k, r in zip(keys, results, strict=True):
                acked = Acked(topic, k, r.msg_id, r.offset_msg_id, r.queue_id, r.queue_offset)
                self.acked.append(acked)
                self._journal(asdict(acked))
            self.stats.sends_ok += len(keys)
            if interval:
                await asyncio.sleep(rng.uniform(0, 2 * interval))

    # -- consumers ----------------------------------------------------------------------------------

    async def consume(self, group: str) -> None:
        """One member at a time; a new one every ``--consumer-restart`` s starts from the committed
        offsets, which are checked against what the group received."""
        received = self.received[group]
        while not self.stop_consumers.is_set():
            consumer = PullConsumer(
                self.server.addr,
                group,
                subscriptions={t: "*" for t in TOPICS},
                suspend_millis=3000,
                timeout=3.0,
            )
            try:
                await consumer.start()
            except (ClientError, ProtocolError, OSError) as exc:
                self.stats.consumer_errors[f"start: {type(exc).__name__}"] += 1
                await asyncio.sleep(0.3)
                continue
            self.stats.consumer_restarts += 1
            until = time.monotonic() + self.args.consumer_restart * self.rng.uniform(0.5, 1.5)
            try:
                while not self.stop_consumers.is_set() and time.monotonic() < until:
                    try:
                        messages = await consumer.receive(max(1, consumer.ready), timeout=0.3)
                    except ReceiveTimeoutError:
                        continue
                    for m in messages:
                        keys = m.properties.get("KEYS", "")
                        received[(m.topic, m.queue_id, m.queue_offset)].append(keys)
                    await self._check_start_offsets(consumer, group)
            except (ClientError, ProtocolError) as exc:
                self.stats.consumer_errors[f"receive: {type(exc).__name__}"] += 1
            finally:
                try:
                    await consumer.close()
                except (ClientError, ProtocolError, OSError) as exc:
                    # The server was killed under the final commit: the next member starts from the
                    # offsets the server kept (older), so it receives some again; never fewer.
                    self.stats.consumer_errors[f"close: {type(exc).__name__}"] += 1

    async def _check_start_offsets(self, consumer: PullConsumer, group: str) -> None:
        """The offset each queue of a new member starts from (the server's committed offset, or one
        this member committed since) must not pass what the group received: every position below it
        was delivered. Checked once per queue and member."""
        received = self.received[group]
        for mq, queue in list(consumer._queues.items()):
            mark = (id(consumer), mq)
            if mark in self._checked or queue.next_pull is None:
                continue
            self._checked.add(mark)
            missing = [o for o in range(queue.committed) if (mq.topic, mq.queue_id, o) not in received]
            if missing:
                self.stats.committed_ahead.append(
                    f"{group} {mq.topic}/{mq.queue_id}: a member started at {queue.committed}; "
                    f"the group never received {missing[:5]}"
                )

    def _acked_positions(self) -> set[tuple[str, int, int]]:
        return {(a.topic, a.queue_id, a.queue_offset) for a in self.acked}

    # -- chaos --------------------------------------------------------------------------------------

    async def killer(self) -> None:
        kill_rng = random.Random(self.args.seed + 1)  # its own: the schedule does not depend on timing
        while not self.stop_chaos.is_set():
            delay = self.args.kill_every * kill_rng.uniform(0.7, 1.3)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_chaos.wait(), delay)
            if self.stop_chaos.is_set():
                return
            async with self.server.lock:
                await self.server.kill9()
                await asyncio.sleep(kill_rng.uniform(0.0, 0.5))
                await self.server.start()
                self.stats.restarts += 1

    async def _until_min_kills(self) -> None:
        """Keep the chaos going past ``--minutes`` until ``--min-kills`` kill -9s happened: a loaded
        machine restarts the server slower, and a short run would otherwise kill it fewer times than
        it set out to. Bounded: each missing kill may take one kill interval and one start."""
        missing = self.args.min_kills - self.stats.kills
        if missing <= 0 or self.args.kill_every <= 0:
            return
        deadline = time.monotonic() + missing * (self.args.kill_every * 1.3 + START_TIMEOUT)
        while self.stats.kills < self.args.min_kills and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def filler(self) -> None:
        """Fill the disk with a ballast file until ENOSPC, keep it full, then free it."""
        if not self.tmpfs:
            return
        ballast = self.disk / "ballast"
        fill_rng = random.Random(self.args.seed + 2)
        while not self.stop_chaos.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.stop_chaos.wait(), self.args.fill_every * fill_rng.uniform(0.8, 1.2)
                )
            if self.stop_chaos.is_set():
                return
            refused = self.stats.refused_disk_full
            written = await asyncio.to_thread(_fill, ballast)
            self.disk_full = True
            self.stats.disk_full_cycles += 1
            self.stats.ballast_bytes.append(written)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_chaos.wait(), self.args.full_seconds)
            await self._until_refused(refused)
            ballast.unlink(missing_ok=True)
            self.disk_full = False

    async def _until_refused(self, refused: int) -> None:
        """Keep the disk full past ``--full-seconds`` until a SEND was refused for it: on a loaded
        machine the window can fall while the server restarts after a kill -9, and a cycle nobody
        sent into checks nothing. Bounded by one start-up."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.stats.refused_disk_full == refused and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def hostile(self) -> None:
        """Each kind of hostile peer in turn, forever; outcomes are counted, never trusted."""
        kinds = [self._garbage, self._held_pulls, self._slowloris, self._heavy_heartbeats]
        i = 0
        while not self.stop_chaos.is_set():
            kind = kinds[i % len(kinds)]
            i += 1
            try:
                await asyncio.wait_for(kind(), 15)
                self.stats.hostile[kind.__name__.strip("_")] += 1
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                self.stats.hostile[f"{kind.__name__.strip('_')}: {type(exc).__name__}"] += 1
            await asyncio.sleep(0.2)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.server.port)

    async def _garbage(self) -> None:
        """Bad frames must close the connection (as test_garbage_input.py's)."""
        for data in (
            (-5).to_bytes(4, "big", signed=True) + b"junk",
            (2**24 + 100).to_bytes(4, "big") + b"\x00" * 16,
            b"\x00\x00\x00\x10\x09\x00\x00\x08" + os.urandom(12),
            b'\x00\x00\x00\x20\x00\x00\x00\x18{"code":[[[[[[[[' + b"[" * 11,
            os.urandom(64),
        ):
            reader, writer = await self._open()
            writer.write(data)
            with contextlib.suppress(OSError):
                await writer.drain()
                await asyncio.wait_for(reader.read(), 5)
            writer.close()

    async def _held_pulls(self) -> None:
        """Suspended pulls pipelined on one connection, at the end of a queue (held until a SEND)."""
        reader, writer = await self._open()
        try:
            ask = request(RequestCode.GET_MAX_OFFSET, {"topic": TOPICS[0], "queueId": "0"})
            writer.write(encode_frame(ask))
            await writer.drain()
            decoder = FrameDecoder()
            answers: list[RemotingCommand] = []
            while not answers:
                data = await asyncio.wait_for(reader.read(4096), 5)
                if not data:
                    raise ConnectionResetError("closed before answering GET_MAX_OFFSET")
                answers = decoder.feed(data)
            end = (answers[0].ext_fields or {}).get("offset", "0")
            fields = {
                "consumerGroup": HOSTILE_GROUP, "topic": TOPICS[0], "queueId": "0", "queueOffset": end,
                "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "600000",
                "subscription": "*", "subVersion": "0", "expressionType": "TAG",
            }  # fmt: skip
            writer.write(
                b"".join(
                    encode_frame(request(RequestCode.PULL_MESSAGE, fields))
                    for _ in range(self.args.hostile_pulls)
                )
            )
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reader.read(1 << 20), 2)
        finally:
            writer.close()

    async def _slowloris(self) -> None:
        """Connections sending a heartbeat frame one byte a second (cut at the request deadline)."""
        frame = encode_frame(request(RequestCode.HEART_BEAT, {}, b'{"clientID":"slow"}'))
        writers = []
        try:
            for _ in range(self.args.slowloris):
                writers.append((await self._open())[1])
            for i in range(min(len(frame) - 1, 8)):
                for w in writers:
                    w.write(frame[i : i + 1])
                await asyncio.sleep(1.0)
        finally:
            for w in writers:
                w.close()

    async def _heavy_heartbeats(self) -> None:
        """Oversized and non-UTF-8 heartbeat bodies: answered with an error, never a crash."""
        reader, writer = await self._open()
        try:
            for body in (MANY_VALUES, LONG_BODY, NOT_UTF8):
                writer.write(encode_frame(request(RequestCode.HEART_BEAT, {}, body)))
                await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reader.read(1 << 16), 3)
        finally:
            writer.close()

    # -- the run ------------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        started = time.monotonic()
        await self.server.start()
        watcher = asyncio.ensure_future(self.server.watch(self.stop_consumers))
        producers = [asyncio.ensure_future(self.produce(n)) for n in range(self.args.producers)]
        consumers = [asyncio.ensure_future(self.consume(g)) for g in self.groups]
        chaos = [asyncio.ensure_future(c()) for c in (self.killer, self.filler, self.hostile)]
        chaos.append(asyncio.ensure_future(self.attacks.run(self.stop_chaos)))
        await asyncio.sleep(self.args.minutes * 60)
        await self._until_min_kills()
        self.stop_chaos.set()
        await asyncio.gather(*chaos)
        (self.disk / "ballast").unlink(missing_ok=True)
        self.stop_producers.set()
        await asyncio.gather(*producers)
        soak_seconds = time.monotonic() - started
        await self.server.up.wait()
        drained = await self._drain()
        self.stop_consumers.set()
        await asyncio.gather(*consumers)
        await watcher
        self.journal.close()
        exit_code = await self.server.terminate()
        if self.attacks.names:
            self.stats.attacks = self.attacks.report()
            self.stats.attacks.update(self.attacks.kept(self.store / "config"))
            log = (self.work / "serve.log").read_text(errors="replace")
            self.stats.attacks["tracebacks_in_serve_log"] = log.count("Traceback")
        report: dict[str, Any] = {
            "seconds": round(soak_seconds, 1),
            "drain_seconds": drained,
            "disk": {"tmpfs": self.tmpfs, "mib": self.args.disk_mib if self.tmpfs else None},
            "stats": _plain(vars(self.stats)),
            "final_sigterm_exit": exit_code,
        }
        report["checks"] = await self.check(exit_code)
        report["ok"] = all(not problems for problems in report["checks"]["problems"].values())
        return report

    async def _drain(self) -> float | None:
        """Seconds until every group has every acknowledged message; None if it never did."""
        started = time.monotonic()
        wanted = {p for p in self._acked_positions() if p[0] in TOPICS}
        while time.monotonic() - started < self.args.drain_seconds:
            if all(wanted <= got.keys() for got in self.received.values()):
                return round(time.monotonic() - started, 1)
            await asyncio.sleep(0.5)
        return None

    # -- checks -------------------------------------------------------------------------------------

    async def check(self, exit_code: int) -> dict[str, Any]:
        problems: dict[str, list[str]] = {}
        if exit_code != 0:
            problems["final_sigterm"] = [f"serve --writable exited {exit_code} on SIGTERM"]
        problems["server_exits"] = list(self.stats.unexpected_exits)
        problems["attacks"] = list(self.attacks.problems)
        problems["acked_unique"] = self._check_unique()
        problems["consumed"], duplicates = self._check_consumed()
        # fsck first, on the store exactly as SIGTERM left it.
        fsck = subprocess.run(
            [sys.executable, "-m", "clients.cli", "fsck", "--deep", "--store", str(self.store),
             "--config", str(self.conf)],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        problems["fsck"] = [] if fsck.returncode == 0 else [f"exit {fsck.returncode}: {fsck.stdout[-2000:]}"]
        java_store = self.work / "java" / "store"
        shutil.copytree(self.store, java_store)
        (self.work / "java" / "broker.conf").write_text(BROKER_CONF, encoding="utf-8")
        # Ours on the final store, on a new port (the checks' answers).
        ours = Server(self.work, self.store, self.conf, free_port_pair(), Stats())
        await ours.start()
        try:
            problems["acked_in_store"] = await self._check_acked(ours.addr)
            ours_answers = await self._answers(ours.addr)
        finally:
            ours_exit = await ours.terminate()
        problems["committed"] = list(self.stats.committed_ahead) + self._check_committed(
            ours_answers["committed"]
        )
        result: dict[str, Any] = {
            "acked": len(self.acked),
            "duplicates_received": duplicates,
            "fsck_last_line": (fsck.stdout.strip().splitlines() or [""])[-1],
            "verify_server_exit": ours_exit,
        }
        result["real_broker"], problems["real_broker"] = await self._compare_with_broker(
            java_store, ours_answers
        )
        result["problems"] = {
            k: v[:50] + ([f"... {len(v) - 50} more"] if len(v) > 50 else []) for k, v in problems.items()
        }
        result["problem_counts"] = {k: len(v) for k, v in problems.items()}
        return result

    def _check_unique(self) -> list[str]:
        out = []
        for what, key in (
            ("queue position", lambda a: (a.topic, a.queue_id, a.queue_offset)),
            ("CommitLog offset", lambda a: a.phys),
        ):
            seen: dict[Any, str] = {}
            for a in self.acked:
                k = key(a)
                if k in seen:
                    out.append(f"{a.key} and {seen[k]} were both acknowledged at {what} {k}")
                seen[k] = a.key
        return out

    def _check_consumed(self) -> tuple[list[str], dict[str, int]]:
        out: list[str] = []
        duplicates: dict[str, int] = {}
        for group, got in self.received.items():
            duplicates[group] = sum(len(keys) - 1 for keys in got.values())
            for a in self.acked:
                if a.topic not in TOPICS:
                    continue  # a topic created during the soak: no member subscribes to it
                keys = got.get((a.topic, a.queue_id, a.queue_offset))
                if not keys:
                    out.append(f"{group} never received {a.key} ({a.topic}/{a.queue_id}@{a.queue_offset})")
                elif any(k != a.key for k in keys):
                    out.append(
                        f"{group} received {sorted(set(keys))} at {a.topic}/{a.queue_id}@{a.queue_offset},"
                        f" acknowledged for {a.key}"
                    )
        return out, duplicates

    def _check_committed(self, committed: dict[str, list[Any]]) -> list[str]:
        out = []
        for group in self.groups:
            got = self.received[group]
            for (topic, queue_id), (code, offset) in zip(_queues(TOPICS), committed[group], strict=True):
                if code != ResponseCode.SUCCESS:
                    continue
                missing = [o for o in range(int(offset)) if (topic, queue_id, o) not in got]
                if missing:
                    out.append(
                        f"{group} {topic}/{queue_id}: committed {offset}, never received {missing[:5]}"
                    )
        return out

    async def _check_acked(self, addr: str) -> list[str]:
        """Every SEND_OK: viewed by its offset id and found by its key, as acknowledged."""
        out: list[str] = []
        async with RemotingClient(timeout=30) as client:
            for start in range(0, len(self.acked), 200):
                part = self.acked[start : start + 200]
                views = await asyncio.gather(
                    *(
                        client.invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(a.phys)})
                        for a in part
                    )
                )
                queries = await asyncio.gather(
                    *(client.invoke(addr, RequestCode.QUERY_MESSAGE, _query(a.topic, a.key)) for a in part)
                )
                for a, view, query in zip(part, views, queries, strict=True):
                    if view.code != ResponseCode.SUCCESS:
                        out.append(f"{a.key}: VIEW {a.offset_msg_id} answered {view.code} {view.remark}")
                    else:
                        m = decode_message(bytes(view.body or b""))
                        got = (m.topic, m.queue_id, m.queue_offset, m.properties.get("KEYS"))
                        if got != (a.topic, a.queue_id, a.queue_offset, a.key):
                            out.append(f"{a.key}: VIEW {a.offset_msg_id} holds {got}")
                    offsets = [
                        m.commit_log_offset
                        for m in decode_messages(bytes(query.body or b""), read_body=False)
                    ]
                    if query.code != ResponseCode.SUCCESS or a.phys not in offsets:
                        out.append(
                            f"{a.key}: QUERY by key answered {query.code}, offsets {offsets}, not {a.phys}"
                        )
        return out

    def _compare_keys(self) -> list[tuple[str, str]]:
        rng = random.Random(self.args.seed)
        keys = [(a.topic, a.key) for a in self.acked]
        if len(keys) > self.args.compare_keys:
            keys = rng.sample(keys, self.args.compare_keys)
        return [*keys, (TOPICS[0], "never-sent-1"), (TOPICS[1], "never-sent-2"), ("NoSuchTopic", "p0-0")]

    async def _answers(self, addr: str) -> dict[str, Any]:
        """What a server answers: key queries (code, CommitLog offsets), min/max offsets, committed."""
        answers: dict[str, Any] = {"queries": [], "min": [], "max": [], "committed": {}}
        async with RemotingClient(timeout=30) as client:
            keys = self._compare_keys()
            for start in range(0, len(keys), 100):
                got = await asyncio.gather(
                    *(
                        client.invoke(addr, RequestCode.QUERY_MESSAGE, _query(t, k))
                        for t, k in keys[start : start + 100]
                    )
                )
                for (t, k), a in zip(keys[start : start + 100], got, strict=True):
                    offsets = sorted(
                        m.commit_log_offset for m in decode_messages(bytes(a.body or b""), read_body=False)
                    )
                    answers["queries"].append([t, k, a.code, offsets])
            for topic, queue_id in _queues([*TOPICS, *self.new_topics]):
                fields = {"topic": topic, "queueId": str(queue_id)}
                for name, code in (("min", RequestCode.GET_MIN_OFFSET), ("max", RequestCode.GET_MAX_OFFSET)):
                    a = await client.invoke(addr, code, fields)
                    answers[name].append([topic, queue_id, a.code, (a.ext_fields or {}).get("offset")])
            for group in self.groups:
                rows = []
                for topic, queue_id in _queues(TOPICS):
                    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
                    a = await client.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
                    rows.append([a.code, (a.ext_fields or {}).get("offset")])
                answers["committed"][group] = rows
        return answers

    async def _compare_with_broker(
        self, store: Path, ours: dict[str, Any]
    ) -> tuple[dict[str, Any], list[str]]:
        if shutil.which("java") is None or not ROCKETMQ_HOME.is_dir() or self.args.no_java:
            return {"skipped": "no java, no RMQ_ROCKETMQ_HOME (the real 4.9.7), or --no-java"}, []
        rmq = self.work / "rmq"
        shutil.copytree(ROCKETMQ_HOME, rmq)
        port = free_port_pair()
        log = self.work / "java" / "broker.out"
        env = {**os.environ, "RMQ_REGISTER_STORE_TOPICS": "0"}
        started = time.monotonic()
        namesrv = f"127.0.0.1:{free_port_pair()}"  # nobody listens there: the broker only logs it
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(rmq / "bin" / "start-broker.sh"), str(store), str(port), namesrv],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        try:
            while "boot success" not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() - started > START_TIMEOUT:
                    return {"booted": False}, [
                        f"the broker did not boot: {log.read_text(errors='replace')[-2000:]}"
                    ]
                await asyncio.sleep(0.2)
            boot = round(time.monotonic() - started, 1)
            theirs = await self._answers(f"127.0.0.1:{port}")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(proc.wait, 60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        out = []
        for name in ("min", "max"):
            for a, b in zip(ours[name], theirs[name], strict=True):
                if a != b:
                    out.append(f"{name} offset: ours {a}, broker {b}")
        for group in self.groups:
            for (topic, queue_id), a, b in zip(
                _queues(TOPICS), ours["committed"][group], theirs["committed"][group], strict=True
            ):
                if a != b:
                    out.append(f"committed {group} {topic}/{queue_id}: ours {a}, broker {b}")
        for a, b in zip(ours["queries"], theirs["queries"], strict=True):
            if a != b:
                out.append(f"query {a[0]} {a[1]}: ours {a[2:]}, broker {b[2:]}")
        summary = {
            "booted_in_s": boot,
            "keys_compared": len(ours["queries"]),
            "queues_compared": len(ours["max"]),
            "committed_compared": sum(len(v) for v in ours["committed"].values()),
            "max_offsets": {f"{t}/{q}": o for t, q, _, o in ours["max"] if t in TOPICS},
            "new_topics": len(self.new_topics),
        }
        return summary, out


def _queues(topics: Sequence[str]) -> list[tuple[str, int]]:
    return [(t, q) for t in topics for q in range(QUEUES)]


def _query(topic: str, key: str) -> dict[str, str]:
    return {"topic": topic, "key": key, "maxNum": "64", "beginTimestamp": "0", "endTimestamp": JAVA_LONG_MAX}


def _fill(path: Path) -> int:
    """Write ``path`` until the disk refuses (ENOSPC); the bytes written."""
    written = 0
    chunk = 1 << 20
    with open(path, "wb", buffering=0) as f:
        while chunk >= 4096:
            try:
                written += f.write(bytes(chunk))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    return written


def _plain(value: Any) -> Any:
    """JSON-ready (``dataclasses.asdict`` would rebuild a Counter from its items, counting pairs)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _mount_tmpfs(where: Path, mib: int) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)], capture_output=True, timeout=30
    )
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the chaos runs")
    parser.add_argument("--store", type=Path, help="working directory (default: a new temporary one)")
    parser.add_argument("--disk-mib", type=int, default=128, help="size of the tmpfs holding the store")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=40.0, help="sends a second per producer (0: no pause)")
    parser.add_argument(
        "--in-flight", type=int, default=1, help="SENDs each producer has in flight on its connection"
    )
    parser.add_argument("--groups", type=int, default=2, help="consumer groups, one member each")
    parser.add_argument("--consumer-restart", type=float, default=20.0, help="seconds a member lives")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between kill -9s")
    parser.add_argument(
        "--min-kills", type=int, default=0, help="run past --minutes until this many kill -9s happened"
    )
    parser.add_argument("--fill-every", type=float, default=45.0, help="seconds between disk-full cycles")
    parser.add_argument("--full-seconds", type=float, default=5.0, help="how long the disk stays full")
    parser.add_argument(
        "--new-topic-every", type=float, default=10.0, help="seconds between SENDs creating a topic (0: none)"
    )
    parser.add_argument("--hostile-pulls", type=int, default=1200, help="suspended pulls pipelined at once")
    parser.add_argument("--slowloris", type=int, default=20, help="connections trickling a byte a second")
    parser.add_argument("--drain-seconds", type=float, default=60.0)
    parser.add_argument("--compare-keys", type=int, default=5000, help="keys asked of both servers")
    parser.add_argument("--no-java", action="store_true", help="skip the real broker")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the working directory even if all held")
    parser.add_argument(
        "--attacks",
        type=parse_attacks,
        default=[],
        metavar="LIST",
        help=f"issue 31's attacks alongside (comma-separated, or all): {', '.join(ATTACKS)}",
    )
    parser.add_argument("--attack-pause", type=float, default=3.0, help="seconds between an attack's rounds")
    parser.add_argument(
        "--planted-groups", type=int, default=2000, help="offset updates of new groups a round"
    )
    parser.add_argument("--heartbeat-groups", type=int, default=3000, help="groups in one flooding heartbeat")
    parser.add_argument(
        "--max-connections", type=int, help="serve's --max-connections (64 with the idle-holders attack)"
    )
    parser.add_argument(
        "--idle-holders", type=int, help="silent connections a round (default: --max-connections)"
    )
    parser.add_argument(
        "--overwrite-seconds", type=float, default=10.0, help="how long an overwritten file may answer wrong"
    )
    parser.add_argument(
        "--grpc-calls", type=int, default=6, help="concurrent large SendMessage calls a round"
    )
    parser.add_argument("--grpc-mib", type=float, default=8.0, help="MiB of each large SendMessage")
    args = parser.parse_args(argv)
    if "idle-holders" in args.attacks and args.max_connections is None:
        args.max_connections = 64
    if args.idle_holders is None:
        args.idle_holders = args.max_connections or 0
    if args.in_flight < 1:
        parser.error("--in-flight must be at least 1")
    work = args.store if args.store is not None else Path(tempfile.mkdtemp(prefix="soak-writable-"))
    work.mkdir(parents=True, exist_ok=True)
    disk = work / "disk"
    tmpfs = _mount_tmpfs(disk, args.disk_mib)
    report: dict[str, Any] = {"work": str(work)}
    try:
        report.update(asyncio.run(Soak(args, work, disk, tmpfs).run()))
    finally:
        if tmpfs:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)
    print(json.dumps(_plain(report), indent=1, default=str))
    if report.get("ok") and not args.keep and args.store is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
