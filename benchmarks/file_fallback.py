"""Files overwritten under the store, by hand: how many known answers are wrong, and the rebuild's cost.

Issue 31, item 7. On a copy of ``tests/golden/stores/java-4.9.7-a`` (the real 4.9.7 broker's store), each
IndexFile in turn, then each consume queue file, is overwritten in place with another file's bytes
(``cp``: the same inode) while a ``MessageStore`` has it open; the store is refreshed in slices of
``--slice`` records, as ``serve``'s refresh loop does, until no rebuild is left. It reports, per
victim, the broker's recorded answers that differ (the 475 key queries of ``.expected.json`` by the
records' sha256 and the index watermark; the consume queue's getMessage probes and walks, offsets
by time and store times of ``.cq-expected.json``), whether the rebuilt file holds the broker's
bytes, the slices it took and the longest one (the longest the event loop would wait for it).

    python -m benchmarks.file_fallback
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from store.config.store_config import StoreConfig
from store.message_store import MessageStore

REPO = Path(__file__).resolve().parents[1]
JAVA = "java-4.9.7-a"


def _copy(shared: Path, into: Path) -> StoreConfig:
    root = into / JAVA
    shutil.copytree(shared / "stores" / JAVA, root)
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conf = into / f"{JAVA}.broker.conf"
    shutil.copy(shared / "stores" / f"{JAVA}.broker.conf", conf)
    os.chmod(conf, 0o644)
    return StoreConfig.load(conf)


def _sha(buffers: list[Any]) -> list[str]:
    return [hashlib.sha256(b).hexdigest() for b in buffers]


def wrong_keys(store: MessageStore, expected: dict[str, Any]) -> int:
    wrong = 0
    for q in expected["queries"]:
        if "exception" in q:
            continue
        r = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        got = (_sha(r.buffers), r.index_last_update_phyoffset)
        wrong += got != ([x["rawSha256"] for x in q["results"]], q["indexLastUpdatePhyoffset"])
    return wrong


def wrong_queue_answers(store: MessageStore, cq: dict[str, Any]) -> tuple[int, int]:
    wrong = total = 0
    for t in cq["topics"]:
        for q in t["queues"]:
            topic, qid = t["topic"], q["queueId"]
            for timestamp, want in q["offsetByTime"]:
                total += 1
                wrong += store.offset_by_time(topic, qid, timestamp) != want
            lo, hi = q["minOffsetInQueue"], q["maxOffsetInQueue"]
            total += 1
            wrong += [store.message_store_timestamp(topic, qid, n) for n in range(lo, hi)] != q[
                "storeTimestamps"
            ]
            for probe in [*q["getMessage"], *q["walk"]]:
                total += 1
                r = store.get_message(topic, qid, probe["offset"], probe["maxMsgNums"])
                want = [m["rawSha256"] if isinstance(m, dict) else m[4] for m in probe["messages"]]
                got = (r.status.name, r.next_begin_offset, r.max_offset, _sha(r.buffers))
                wrong += got != (probe["status"], probe["nextBeginOffset"], probe["maxOffset"], want)
    return wrong, total


def _overwrite(victim: Path, source: Path) -> None:
    before = victim.stat().st_mtime_ns
    shutil.copyfile(source, victim)
    after = victim.stat()
    if after.st_mtime_ns // 1_000_000 == before // 1_000_000:
        os.utime(victim, ns=(after.st_atime_ns, before + 1_000_000_000))


def _refresh(store: MessageStore, slice_records: int) -> tuple[int, float]:
    """Refresh in slices until no rebuild is left: (slices, the longest one in ms)."""
    slices, longest = 0, 0.0
    while True:
        t = time.perf_counter()
        more = store.refresh(max_records=slice_records)
        longest = max(longest, (time.perf_counter() - t) * 1000)
        slices += 1
        if not more:
            return slices, longest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--golden", type=Path, default=REPO / "tests" / "golden", help="holds stores/")
    parser.add_argument("--slice", type=int, default=2000, help="records per refresh (serve's is 2000)")
    args = parser.parse_args(argv)
    stores = args.golden / "stores"
    expected = json.loads((stores / f"{JAVA}.expected.json").read_text(encoding="utf-8"))
    cq = json.loads((stores / f"{JAVA}.cq-expected.json").read_text(encoding="utf-8"))
    rows = []
    names = sorted(p.name for p in (stores / JAVA / "index").iterdir() if p.name.isdigit())
    for i, name in enumerate(names):
        with tempfile.TemporaryDirectory() as tmp:
            config = _copy(args.golden, Path(tmp))
            with MessageStore.open(config) as store:
                path = config.index_dir / name
                _overwrite(path, config.index_dir / names[i - 1 if i else 1])
                slices, longest = _refresh(store, args.slice)
                rebuilt = next((f for f in store.index.files if f.name == name), None)
                same = (
                    rebuilt is not None
                    and bytes(rebuilt.buffer) == (stores / JAVA / "index" / name).read_bytes()
                )
                rows.append(("index", name, wrong_keys(store, expected), 475, same, slices, longest))
    queues = sorted(
        p.relative_to(stores / JAVA / "consumequeue")
        for p in (stores / JAVA / "consumequeue").rglob("0" * 20)
    )
    for i, rel in enumerate(queues):
        with tempfile.TemporaryDirectory() as tmp:
            config = _copy(args.golden, Path(tmp))
            with MessageStore.open(config) as store:
                for t in cq["topics"]:
                    for q in t["queues"]:
                        store.max_offset(t["topic"], q["queueId"])
                _overwrite(
                    config.consume_queue_dir / rel, config.consume_queue_dir / queues[(i + 1) % len(queues)]
                )
                slices, longest = _refresh(store, args.slice)
                topic, qid = rel.parts[0], int(rel.parts[1])
                f = store.queues.get(topic, qid)._files[0]
                same = bytes(f.view) == (stores / JAVA / "consumequeue" / rel).read_bytes()
                wrong, total = wrong_queue_answers(store, cq)
                rows.append(("consume queue", str(rel.parent), wrong, total, same, slices, longest))
    print(
        f"{'kind':14} {'file':22} {'wrong':>6} {'of':>6} {'broker bytes':>12} {'slices':>6} {'longest':>10}"
    )
    for kind, name, wrong, total, same, slices, longest in rows:
        print(f"{kind:14} {name:22} {wrong:6d} {total:6d} {same!s:>12} {slices:6d} {longest:8.1f} ms")
    return 0 if all(r[2] == 0 and r[4] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
