"""Resource limits of a real ``rmq-query serve`` process, by scenario, for any checkout (issue 10).

Each scenario starts ``python -m clients.cli serve`` from ``--repo`` (default: this checkout; give an
older one, e.g. ``git archive 9a34635 | tar -x -C /tmp/old``, to compare) on 127.0.0.1 with port 0,
drives it with raw remoting frames and prints one JSON line of what happened:

* ``files``: serve with ``RLIMIT_NOFILE`` at ``--fd-limit`` (soft and hard) over a small store
  whose files roll often; open ``--connections`` idle connections, then ask VIEW_MESSAGE_BY_ID on
  each; append records (new CommitLog and index files) and time until a served connection finds
  the newest key; one fresh client; count error lines in the server's log.
* ``partial-frames``: ``--holders`` connections each send ``--mib`` MiB of a 16 MiB frame and stop;
  the server's RSS before and after, and how many it closed.
* ``big-numbers``: ``--requests`` pipelined QUERY_MESSAGE with a ``--digits``-digit maxNum; rate,
  log growth and the remark.
* ``held-pulls`` (issue 18, item 4): one connection pipelines ``--requests`` long-polling PULLs at
  the end of a queue; RSS, the server's CPU seconds, the answers it got within 5 s, and a second
  client's GET_MAX_OFFSET latency meanwhile.
* ``unread-answers`` (item 8): ``--holders`` connections each ask a ``--mib`` MB query answer and
  read nothing; RSS before and after, and how many the server cut off.
* ``slow-senders`` (item 7): ``--connections`` connections sending a byte a second against
  ``--max-connections`` = half of them; what 10 fresh clients get, and how many slow ones remain
  after ``--seconds``.
* ``idle-holders`` (issue 31, item 4): ``--connections`` connections against ``--max-connections``
  as many; ``--live`` of them send a consumer's HEART_BEAT, the others one GET_MAX_OFFSET, then all
  stay silent; after 2 s, what 10 fresh clients get (each keeps its connection), and how many of
  the silent and of the heart-beating connections are still open.

    python -m benchmarks.server_limits files --fd-limit 1024 --connections 1500
    python -m benchmarks.server_limits partial-frames --holders 40 --mib 15
    python -m benchmarks.server_limits big-numbers --requests 5000 --digits 5000
    python -m benchmarks.server_limits held-pulls --requests 50000
    python -m benchmarks.server_limits unread-answers --holders 100 --mib 12
    python -m benchmarks.server_limits slow-senders --connections 200 --seconds 40
    python -m benchmarks.server_limits idle-holders --connections 200 --live 20
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from protocol.codes import LanguageCode, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.frame import FrameDecoder, encode_frame
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

REPO = Path(__file__).resolve().parents[1]
JAVA_LONG_MAX = str((1 << 63) - 1)
SERVING = re.compile(r"serving on 127\.0\.0\.1:(\d+)")
ERROR_SIGNS = ("Too many open files", "out of system resource", "refreshing the store failed", "Traceback")
_opaques = itertools.count(1)


def _request(code: int, fields: dict[str, str]) -> RemotingCommand:
    return RemotingCommand(
        code=code, language=LanguageCode.JAVA, version=407, opaque=next(_opaques), flag=0, ext_fields=fields
    )


def _view() -> RemotingCommand:
    return _request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"})


def _query(topic: str, key: str, max_num: str = "64") -> RemotingCommand:
    fields = {
        "topic": topic,
        "key": key,
        "maxNum": max_num,
        "beginTimestamp": "0",
        "endTimestamp": JAVA_LONG_MAX,
    }
    return _request(RequestCode.QUERY_MESSAGE, fields)


class Peer:
    """One raw connection: send frames, read decoded answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._decoder = FrameDecoder()
        self._ready: list[RemotingCommand] = []

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> Peer:
        return cls(*await asyncio.open_connection(host, port))

    async def receive(self, timeout: float = 5.0) -> RemotingCommand | None:
        """The next answer, or None when the server closed the connection."""
        while not self._ready:
            data = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
            if not data:
                return None
            self._ready.extend(self._decoder.feed(data))
        return self._ready.pop(0)

    async def ask(self, command: RemotingCommand) -> str:
        """``served``/``busy``/``code N``, or ``closed``/``hung``/``reset`` without an answer."""
        try:
            self.writer.write(encode_frame(command))
            await self.writer.drain()
            answer = await self.receive()
        except TimeoutError:
            return "hung"
        except OSError:
            return "reset"
        if answer is None:
            return "closed"
        return {ResponseCode.SUCCESS: "served", ResponseCode.SYSTEM_BUSY: "busy"}.get(
            answer.code, f"code {answer.code}"
        )

    def close(self) -> None:
        self.writer.transport.abort()


def _start(
    repo: Path, log_path: Path, args: list[str], preexec: Callable[[], None] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--port", "0", *args],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=preexec,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = SERVING.search(log_path.read_text(errors="replace"))
        if match:
            return proc, int(match.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"serve did not start:\n{log_path.read_text(errors='replace')[-2000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    return -1


async def files(args: argparse.Namespace, work: Path) -> dict[str, object]:
    config = StoreConfig.for_store(
        work / "store", mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=64, max_index_num=128
    )
    writer = StoreWriter(config)
    for i in range(20):
        writer.append("Fd", b"early", keys=f"early-{i}")
    writer.index()

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.fd_limit, args.fd_limit))

    geometry = ["--mapped-file-size", str(64 * 1024), "--max-hash-slot-num", "64", "--max-index-num", "128"]
    log_path = work / "serve.log"
    proc, port = _start(args.repo, log_path, ["--store", str(work / "store"), *geometry], low_limit)
    peers: list[Peer] = []
    connect_failures = 0
    for _ in range(args.connections):
        try:
            peers.append(await asyncio.wait_for(Peer.open(port), 2))
        except (OSError, TimeoutError):
            connect_failures += 1
    await asyncio.sleep(2)
    answers = await asyncio.gather(*(peer.ask(_view()) for peer in peers))
    for i in range(400):
        writer.append("Fd", b"late" * 64, keys=f"late-{i}")
    writer.index()
    found_after = None
    served = [peer for peer, answer in zip(peers, answers, strict=True) if answer == "served"]
    if served:
        start = time.monotonic()
        while time.monotonic() - start < 10:
            if await served[0].ask(_query("Fd", "late-399")) == "served":
                found_after = round(time.monotonic() - start, 1)
                break
            await asyncio.sleep(0.2)
    try:
        fresh_peer = await asyncio.wait_for(Peer.open(port), 2)
        fresh = await fresh_peer.ask(_view())
        fresh_peer.close()
    except (OSError, TimeoutError) as exc:
        fresh = f"connect failed: {type(exc).__name__}"
    for peer in peers:
        peer.close()
    exit_code = _stop(proc)
    writer.close()
    text = log_path.read_text(errors="replace")
    limit_lines = [
        line.split(": ", 1)[-1]
        for line in text.splitlines()
        if "serving at most" in line or "lowered" in line
    ]
    return {
        "connect_failures": connect_failures,
        "answers": dict(Counter(answers)),
        "new_key_found_after_s": found_after,
        "fresh_client": fresh,
        "exit": exit_code,
        "log_bytes": len(text.encode()),
        "log_error_signs": {sign: text.count(sign) for sign in ERROR_SIGNS},
        "limit_line": limit_lines[:1],
    }


async def partial_frames(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=1 << 20)) as writer:
        writer.append("T", b"x", keys="k")
        writer.index()
    log_path = work / "serve.log"
    proc, port = _start(args.repo, log_path, ["--store", str(store), "--mapped-file-size", str(1 << 20)])
    await asyncio.sleep(1)
    before = _rss_mib(proc.pid)
    peers = []
    chunk = b"x" * (1 << 20)
    for _ in range(args.holders):
        peer = await Peer.open(port)
        peers.append(peer)
        peer.writer.write(struct.pack(">ii", 16 * 1024 * 1024 - 100, 100))
        try:
            for _ in range(args.mib):
                peer.writer.write(chunk)
                await peer.writer.drain()
        except OSError:
            pass
    await asyncio.sleep(2)
    after = _rss_mib(proc.pid)
    closed = 0
    for peer in peers:
        try:
            closed += await asyncio.wait_for(peer.reader.read(1), 0.2) == b""
        except (TimeoutError, OSError):
            pass
        peer.close()
    exit_code = _stop(proc)
    text = log_path.read_text(errors="replace")
    return {
        "rss_before_mib": before,
        "rss_after_mib": after,
        "closed_by_server": closed,
        "exit": exit_code,
        "budget_lines": sum("budget" in line for line in text.splitlines()),
    }


async def big_numbers(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=1 << 20)) as writer:
        writer.append("T", b"x", keys="k")
        writer.index()
    log_path = work / "serve.log"
    proc, port = _start(args.repo, log_path, ["--store", str(store), "--mapped-file-size", str(1 << 20)])
    start_size = log_path.stat().st_size
    peer = await Peer.open(port)
    requests = [_query("T", "k", "9" * args.digits) for _ in range(args.requests)]
    start = time.monotonic()
    peer.writer.write(b"".join(encode_frame(r) for r in requests))
    codes: Counter[int] = Counter()
    remark = None
    for _ in requests:
        answer = await peer.receive(30)
        if answer is None:
            break
        codes[answer.code] += 1
        remark = answer.remark
    elapsed = time.monotonic() - start
    peer.close()
    exit_code = _stop(proc)
    return {
        "requests": args.requests,
        "per_second": round(args.requests / elapsed),
        "codes": dict(codes),
        "log_growth_bytes": log_path.stat().st_size - start_size,
        "remark": (remark or "")[:160],
        "exit": exit_code,
    }


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


async def held_pulls(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=1 << 20)) as writer:
        writer.append("T", b"x", keys="k")
        writer.index()
    log_path = work / "serve.log"
    proc, port = _start(args.repo, log_path, ["--store", str(store), "--mapped-file-size", str(1 << 20)])
    await asyncio.sleep(1)
    before, cpu_before = _rss_mib(proc.pid), _cpu_seconds(proc.pid)
    fields = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "0",
        "queueOffset": "1",  # the end of the queue: held
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "0",
        "suspendTimeoutMillis": "600000",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    hog = await Peer.open(port)
    frame = encode_frame(_request(RequestCode.PULL_MESSAGE, fields))
    for start in range(0, args.requests, 1000):
        hog.writer.write(frame * min(1000, args.requests - start))
        await hog.writer.drain()
    codes: Counter[int] = Counter()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            answer = await hog.receive(max(0.01, deadline - time.monotonic()))
        except TimeoutError:
            break
        if answer is None:
            break
        codes[answer.code] += 1
    witness = await Peer.open(port)
    latencies = []
    for _ in range(20):
        started = time.monotonic()
        await witness.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))
        latencies.append((time.monotonic() - started) * 1000)
    after, cpu_after = _rss_mib(proc.pid), _cpu_seconds(proc.pid)
    hog.close()
    witness.close()
    exit_code = _stop(proc)
    return {
        "pulls": args.requests,
        "rss_before_mib": before,
        "rss_after_mib": after,
        "server_cpu_s": round(cpu_after - cpu_before, 2),
        "answers_within_5s": dict(codes),
        "witness_ms_max": round(max(latencies), 2),
        "witness_ms_median": round(sorted(latencies)[len(latencies) // 2], 2),
        "exit": exit_code,
    }


async def unread_answers(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    body = b"x" * (1 << 20)
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=64 << 20)) as writer:
        for _ in range(args.mib):
            writer.append("T", body, keys="big")
        writer.index()
    log_path = work / "serve.log"
    proc, port = _start(
        args.repo, log_path, ["--store", str(store), "--mapped-file-size", str(64 << 20), *args.serve_arg]
    )
    await asyncio.sleep(1)
    before = _rss_mib(proc.pid)
    peers = []
    for _ in range(args.holders):
        peer = await Peer.open(port)
        peers.append(peer)
        peer.writer.write(encode_frame(_query("T", "big")))
    await asyncio.sleep(5)
    after = _rss_mib(proc.pid)
    witness = await Peer.open(port)
    witness_answer = await witness.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))
    for peer in peers:
        peer.close()
    witness.close()
    exit_code = _stop(proc)
    text = log_path.read_text(errors="replace")
    return {
        "holders": args.holders,
        "answer_mib": args.mib,
        "rss_before_mib": before,
        "rss_after_mib": after,
        "cut_off_lines": sum("cutting off" in line for line in text.splitlines()),
        "witness": witness_answer,
        "exit": exit_code,
    }


async def slow_senders(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=1 << 20)) as writer:
        writer.append("T", b"x", keys="k")
        writer.index()
    log_path = work / "serve.log"
    limit = max(1, args.connections // 2)
    proc, port = _start(
        args.repo,
        log_path,
        ["--store", str(store), "--mapped-file-size", str(1 << 20), "--max-connections", str(limit)],
    )
    frame = encode_frame(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))
    slow = [await Peer.open(port) for _ in range(args.connections)]

    async def trickle(peer: Peer) -> None:
        try:
            for byte in frame:
                peer.writer.write(bytes([byte]))
                await peer.writer.drain()
                await asyncio.sleep(1)
        except OSError:
            pass

    trickles = [asyncio.ensure_future(trickle(peer)) for peer in slow]
    await asyncio.sleep(3)
    early: Counter[str] = Counter()
    for _ in range(10):
        fresh = await Peer.open(port)
        early[await fresh.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))] += 1
        fresh.close()
    await asyncio.sleep(max(0, args.seconds - 3))

    async def still_open(peer: Peer) -> bool:
        try:
            return await asyncio.wait_for(peer.reader.read(1 << 16), 0.5) != b""
        except TimeoutError:
            return True
        except OSError:
            return False

    open_slow = sum(await asyncio.gather(*(still_open(peer) for peer in slow)))
    late: Counter[str] = Counter()
    for _ in range(10):
        fresh = await Peer.open(port)
        late[await fresh.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))] += 1
        fresh.close()
    for task in trickles:
        task.cancel()
    for peer in slow:
        peer.close()
    exit_code = _stop(proc)
    return {
        "slow": args.connections,
        "max_connections": limit,
        "fresh_after_3s": dict(early),
        f"fresh_after_{args.seconds}s": dict(late),
        f"slow_still_sending_after_{args.seconds}s": open_slow,
        "exit": exit_code,
    }


async def _still_open(peer: Peer) -> bool:
    try:
        return await asyncio.wait_for(peer.reader.read(1 << 16), 0.5) != b""
    except TimeoutError:
        return True
    except OSError:
        return False


def _heartbeat(client_id: str) -> RemotingCommand:
    body = {
        "clientID": client_id,
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": "G",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [{"topic": "T", "subString": "*", "tagsSet": [], "subVersion": 1}],
                "unitMode": False,
            }
        ],
    }
    command = _request(RequestCode.HEART_BEAT, {})
    command.body = json.dumps(body).encode()
    return command


async def idle_holders(args: argparse.Namespace, work: Path) -> dict[str, object]:
    store = work / "store"
    with StoreWriter(StoreConfig.for_store(store, mapped_file_size_commit_log=1 << 20)) as writer:
        writer.append("T", b"x", keys="k")
        writer.index()
    log_path = work / "serve.log"
    proc, port = _start(
        args.repo,
        log_path,
        [
            "--store",
            str(store),
            "--mapped-file-size",
            str(1 << 20),
            "--max-connections",
            str(args.connections),
        ],
    )
    peers = [await Peer.open(port) for _ in range(args.connections)]
    live, silent = peers[: args.live], peers[args.live :]
    first: Counter[str] = Counter()
    for i, peer in enumerate(live):
        first[await peer.ask(_heartbeat(f"live-{i}"))] += 1
    for peer in silent:
        first[await peer.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))] += 1
    await asyncio.sleep(2)
    fresh_answers: Counter[str] = Counter()
    fresh: list[Peer] = []
    for _ in range(10):
        peer = await Peer.open(port)
        fresh.append(peer)
        fresh_answers[
            await peer.ask(_request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}))
        ] += 1
    silent_open = sum(await asyncio.gather(*(_still_open(peer) for peer in silent)))
    live_open = sum(await asyncio.gather(*(_still_open(peer) for peer in live)))
    for peer in (*peers, *fresh):
        peer.close()
    exit_code = _stop(proc)
    log_text = log_path.read_text(errors="replace")
    return {
        "max_connections": args.connections,
        "live": args.live,
        "first_requests": dict(first),
        "fresh_clients": dict(fresh_answers),
        "silent_still_open": f"{silent_open}/{len(silent)}",
        "live_still_open": f"{live_open}/{len(live)}",
        "eviction_log_lines": log_text.count("to make room"),
        "exit": exit_code,
    }


SCENARIOS = {
    "files": files,
    "partial-frames": partial_frames,
    "big-numbers": big_numbers,
    "held-pulls": held_pulls,
    "unread-answers": unread_answers,
    "slow-senders": slow_senders,
    "idle-holders": idle_holders,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="checkout whose serve is run (default: this one)"
    )
    parser.add_argument("--fd-limit", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=1500)
    parser.add_argument("--holders", type=int, default=40)
    parser.add_argument("--mib", type=int, default=15)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--digits", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--live", type=int, default=0, help="idle-holders: connections that heart-beat")
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="an extra flag for serve (unread-answers; repeatable)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="server-limits-") as tmp:
        result = asyncio.run(SCENARIOS[args.scenario](args, Path(tmp)))
    print(json.dumps({"scenario": args.scenario, "repo": str(args.repo), **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
