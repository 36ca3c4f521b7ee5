"""What starting ``serve --writable`` costs, empty and on a store handed over with state (issue 19).

Two stores are made once under ``--dir``: ``empty`` (nothing; the server creates it) and
``handover``: ``--topics`` topics of 8 queues with ``--messages`` records each, written by the
writer as a SEND writes them, ``--groups`` subscription groups in ``subscriptionGroup.json`` and an
offset for each group on each queue of one topic in ``consumerOffset.json`` (the files a real broker
or an earlier run leaves). Each round then runs, in fresh processes:

- ``cli``: ``python -m clients.cli serve --writable --store S --port 0`` from spawn to its
  ``NAMESRV_ADDR=`` line (interpreter, imports, open, listening), then SIGTERM;
- ``phases``: a child that does what ``serve`` does and times each step: the imports, the
  ``WritableStore`` open (lock, recovery, topic table), the ``QueryServer`` start with the write path
  (``BrokerController``: subscription groups and offsets loaded; the sockets bound).

    python -m benchmarks.serve_startup --dir /tmp/serve_startup --rounds 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.store_config import StoreConfig
from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable
from store.config.topics import TopicConfig

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import time
t0 = time.perf_counter()
import asyncio, json, sys
from pathlib import Path
from clients.cli import serve  # what the command imports
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
t1 = time.perf_counter()
store = WritableStore(StoreConfig.for_store(Path(sys.argv[1])))
t2 = time.perf_counter()
hook = write_path(store)
server = QueryServer(store.reader, ServerSettings(port=0), configure=hook)
async def main():
    await server.start()
    t3 = time.perf_counter()
    await server.stop()
    return t3
t3 = asyncio.run(main())
store.close()
print(json.dumps({"imports": t1 - t0, "open": t2 - t1, "start": t3 - t2,
                  "groups": len(hook.broker.groups.groups), "offset_keys": len(hook.broker.offsets.offsets),
                  "topics": len(store.topics.topics)}))
"""


def make_handover(root: Path, topics: int, messages: int, groups: int) -> None:
    from server.broker.writable_store import WritableStore
    from store.write.writer import StoreWriter

    config = StoreConfig.for_store(root)
    with WritableStore(config) as store:
        for t in range(topics):
            store.topics.put(TopicConfig(f"T{t}", 8, 8, 6), 0)
        store.topics.save()
    with StoreWriter(config) as writer:
        for t in range(topics):
            for n in range(messages):
                writer.append(f"T{t}", b"x" * 100, keys=f"k{n}")
    config_dir = root / "config"
    table = SubscriptionGroupTable.load(config_dir / "subscriptionGroup.json")
    for g in range(groups):
        table.groups[f"G{g}"] = SubscriptionGroupConfig(f"G{g}")
    table.save()
    offsets = ConsumerOffsetTable.load(config_dir / "consumerOffset.json")
    for g in range(groups):
        for q in range(8):
            offsets.commit(f"G{g}", f"T{g % topics}", q, messages)
    offsets.save()


def copy_store(source: Path, target: Path) -> None:
    """A copy that keeps the CommitLog's holes (a 1 GiB file holding 1 MiB stays 1 MiB on disk)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)


def cli_start(store: Path) -> float:
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    took = time.perf_counter() - began
    proc.terminate()
    proc.wait(30)
    assert line.startswith(b"NAMESRV_ADDR="), line
    return took


def phases(store: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store)], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    args = parser.parse_args()
    handover = args.dir / "handover"
    if not handover.exists():
        make_handover(handover, args.topics, args.messages, args.groups)
    for name in ("empty", "handover"):
        rows: dict[str, list[float]] = {"cli": [], "imports": [], "open": [], "start": []}
        for _ in range(args.rounds):
            store = args.dir / f"{name}-run"
            shutil.rmtree(store, ignore_errors=True)
            if name == "handover":
                copy_store(handover, store)
            rows["cli"].append(cli_start(store))
            shutil.rmtree(store, ignore_errors=True)
            if name == "handover":
                copy_store(handover, store)
            found = phases(store)
            for key in ("imports", "open", "start"):
                rows[key].append(found[key])
        sizes = {k: found[k] for k in ("topics", "groups", "offset_keys")}
        medians = ", ".join(f"{k} {statistics.median(v) * 1000:.1f} ms" for k, v in rows.items())
        print(f"{name} {sizes}: median of {args.rounds}: {medians}")
        print("   all (ms):", {k: [round(x * 1000, 1) for x in v] for k, v in rows.items()})


if __name__ == "__main__":
    main()
