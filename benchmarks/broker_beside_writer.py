"""The real 4.9.7 broker started on a store that ``serve --writable`` is writing: it must refuse.

Not a test (CI has no JVM, and a JVM start costs more than a suite should): a by-hand verification
of issue 18 item 1, recorded in RELIABILITY.md. Steps:

1. A copy of ``RMQ_ROCKETMQ_HOME`` (the real 4.9.7, default ``../shared/rocketmq-4.9.7-bin``) in a
   temporary directory (that folder is never written), a broker.conf with small files beside an empty store.
2. ``rmq-query serve --writable`` on the store (port 0); ``--messages`` SENDs from our producer.
3. The real broker (``start-broker.sh``) on the same store, on free ports, a name server address
   nobody listens on. It must exit on its own, non-zero, saying ``Lock failed,MQ already started``
   (``DefaultMessageStore.start``'s ``tryLock`` refused), within ``--timeout`` seconds; it is killed
   by its pid otherwise.
4. ``--messages`` more SENDs; every message of both rounds found by key through our server; every
   SEND_OK has its own CommitLog offset (no acknowledged record overwritten).
5. Our server stops (SIGTERM, exit 0). Reported, not required: ``fsck`` on the store and how many
   keys a reopen (``MessageStore``) finds. The broker *loads* the store before it locks it
   (``BrokerController.initialize`` -> ``DefaultMessageStore.load``, then ``start`` -> ``tryLock``),
   and with ``abort`` present that load deletes every IndexFile whose end is after the checkpoint's
   ``indexMsgTimestamp`` (``IndexService.load``), i.e. the newest one, which the writer is filling.
6. ``--control``: the same broker command on the store once ours has stopped must boot (the lock
   was what refused it), and is stopped by its pid.

    python -m benchmarks.broker_beside_writer --messages 50 --control

Prints one JSON summary; exit status 0 only when every check held.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The real RocketMQ 4.9.7 (``RMQ_ROCKETMQ_HOME``, as for the tests: ``tests/golden/README.md``).
ROCKETMQ_HOME = Path(os.environ.get("RMQ_ROCKETMQ_HOME", REPO.parent / "shared" / "rocketmq-4.9.7-bin"))
SERVING = re.compile(r"serving on 127\.0\.0\.1:(\d+)")


def _free_broker_port() -> int:
    """A port P with P - 2 (the broker's VIP channel) and P + 1 (HA) free too."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 1026 or port > 65533:
            continue
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise OSError("no free port triple")


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
    return proc.returncode


async def _send(addr: str, topic: str, prefix: str, count: int) -> list[dict[str, object]]:
    from clients.producer import Producer

    out = []
    async with Producer(addr) as producer:
        for i in range(count):
            sent = await producer.send(topic, f"{prefix} {i}".encode(), keys=f"{prefix}-{i}")
            out.append({"key": f"{prefix}-{i}", "offset_msg_id": sent.offset_msg_id})
    return out


async def _found(addr: str, topic: str, keys: list[str]) -> int:
    from clients.admin import QueryAdmin

    hits = 0
    async with QueryAdmin(addr) as admin:
        for key in keys:
            if (await admin.query_by_key(topic, key)).messages:
                hits += 1
    return hits


def _run_broker(rmq: Path, store: Path, port: int, namesrv_port: int, log: Path, timeout: float):
    """Start the broker on ``store``: (its exit status, or None if it booted or still runs at
    ``timeout``; seconds taken; the process)."""
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(rmq / "bin" / "start-broker.sh"), str(store), str(port), f"127.0.0.1:{namesrv_port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = started + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.returncode, time.monotonic() - started, proc
        if "boot success" in log.read_text(errors="replace"):
            return None, time.monotonic() - started, proc
        time.sleep(0.2)
    return None, time.monotonic() - started, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds the broker gets to exit")
    parser.add_argument("--control", action="store_true", help="then start the broker once ours stopped")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rmq-beside-"))
    rmq = work / "rmq"
    shutil.copytree(ROCKETMQ_HOME, rmq)
    store = work / "store"
    conf = work / "broker.conf"
    conf.write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerIP1=127.0.0.1\n"
        "storePathRootDir=store\nstorePathCommitLog=store/commitlog\n"
        "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
        "maxHashSlotNum=1000\nmaxIndexNum=4000\nmaxMessageSize=65536\nfileReservedTime=87600\n",
        encoding="utf-8",
    )
    summary: dict[str, object] = {"work": str(work)}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ours_log = work / "serve.log"
    ok = True
    with open(ours_log, "wb") as log:
        ours = subprocess.Popen(
            [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store),
             "--config", str(conf), "--port", "0"],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (match := SERVING.search(ours_log.read_text(errors="replace"))):
            if ours.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start; see {ours_log}")
            time.sleep(0.1)
        addr = f"127.0.0.1:{match.group(1)}"
        summary["ours"] = {"pid": ours.pid, "address": addr}
        sent = asyncio.run(_send(addr, "Beside", "before", args.messages))
        index_before = sorted(p.name for p in (store / "index").iterdir())
        broker_log = work / "broker.out"
        code, seconds, broker = _run_broker(rmq, store, _free_broker_port(), _free_broker_port(), broker_log,
                                            args.timeout)  # fmt: skip
        text = broker_log.read_text(errors="replace")
        if broker.poll() is None:
            broker.kill()
            broker.wait()
        summary["java_broker"] = {
            "exit": code,
            "seconds": round(seconds, 1),
            "lock_failed": "Lock failed,MQ already started" in text,
            "booted": "boot success" in text,
        }
        ok &= code is not None and code != 0 and "Lock failed,MQ already started" in text
        summary["index_files"] = {
            "before": index_before,
            "after_java_load": sorted(p.name for p in (store / "index").iterdir()),
        }
        sent += asyncio.run(_send(addr, "Beside", "after", args.messages))
        keys = [str(s["key"]) for s in sent]
        found = asyncio.run(_found(addr, "Beside", keys))
        ids = [s["offset_msg_id"] for s in sent]
        summary["sends"] = {
            "send_ok": len(sent),
            "distinct_offsets": len(set(ids)),
            "found_by_key_live": found,
        }
        ok &= found == len(sent) and len(set(ids)) == len(sent)
    finally:
        summary["ours_exit"] = _stop(ours)
    ok &= summary["ours_exit"] == 0
    fsck = subprocess.run(
        [sys.executable, "-m", "clients.cli", "fsck", "--store", str(store), "--config", str(conf)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    summary["fsck"] = {"exit": fsck.returncode, "last_line": (fsck.stdout.strip().splitlines() or [""])[-1]}
    # Not part of "ok": what the broker's load did before its tryLock failed (it deletes the newest
    # IndexFile when ``abort`` exists and the file ends after the checkpoint's indexMsgTimestamp).
    sys.path.insert(0, str(REPO))
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    with MessageStore.open(StoreConfig.load(conf)) as reopened:
        summary["found_by_key_reopened"] = sum(
            1 for k in keys if reopened.query_message("Beside", k, 32, 0, 2**63 - 1).buffers
        )
    if args.control:
        control_log = work / "broker-control.out"
        code, seconds, broker = _run_broker(rmq, store, _free_broker_port(), _free_broker_port(), control_log,
                                            args.timeout)  # fmt: skip
        booted = "boot success" in control_log.read_text(errors="replace")
        summary["control_broker"] = {"booted": booted, "seconds": round(seconds, 1), "exit": _stop(broker)}
        ok &= booted
    summary["ok"] = bool(ok)
    print(json.dumps(summary, indent=1))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
