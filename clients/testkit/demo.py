"""A varied sample store for the demo and for trying clients against: ``rmq-query demo-store``.

It is written by ``StoreWriter`` with a small geometry (so it is quick to make yet rolls several
CommitLog and IndexFiles) and holds what queries meet in real life: several topics, multi-key
messages, unicode and emoji keys, keys whose Java hashes are equal (``Aa``/``BB``) or share a slot,
messages without keys or without a unique key, compressed bodies, a rolled-back transaction (stored,
never indexed), and store times spread over a few seconds. A ``broker.conf`` beside the files gives
the geometry, so anything that opens the store reads it right.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol.index_key import build_index_key, index_key_hash
from protocol.message_id import UniqueIdGenerator
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

DEMO_MAPPED_FILE_SIZE = 256 * 1024
DEMO_HASH_SLOTS = 512
DEMO_INDEX_NUM = 2048
DEMO_TOPICS = ("DemoOrders", "DemoUsers", "demo_events-1")
#: Pairs with equal ``String.hashCode``: the index cannot tell them apart, clients filter.
COLLIDING_KEYS = ("Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa")
UNICODE_KEYS = ("ключ", "键", "clé", "🔑key", "𝄞music")
ROLLBACK = 0xC
ZLIB_COMPRESSED = 0x1 | (3 << 8)


@dataclass(slots=True)
class DemoSummary:
    root: Path
    messages: int = 0
    topics: set[str] = field(default_factory=set)
    sample_keys: dict[str, list[str]] = field(default_factory=dict)
    sample_unique_keys: list[tuple[str, str]] = field(default_factory=list)
    sample_offset_ids: list[str] = field(default_factory=list)


def keys_sharing_a_slot(topic: str, hash_slot_num: int, count: int = 6) -> list[str]:
    """``slot-N`` keys whose index keys land in one slot with different hashes (a long chain)."""
    target = index_key_hash(build_index_key(topic, "slot-0")) % hash_slot_num
    found: list[str] = []
    n = 0
    while len(found) < count:
        key = f"slot-{n}"
        if index_key_hash(build_index_key(topic, key)) % hash_slot_num == target:
            found.append(key)
        n += 1
    return found


def demo_config(root: Path, *, broker_ip: str = "127.0.0.1", port: int = 10911) -> StoreConfig:
    return StoreConfig.for_store(
        root,
        mapped_file_size_commit_log=DEMO_MAPPED_FILE_SIZE,
        max_hash_slot_num=DEMO_HASH_SLOTS,
        max_index_num=DEMO_INDEX_NUM,
        broker_ip1=broker_ip,
        listen_port=port,
        broker_name="demo-broker",
    )


def write_broker_conf(config: StoreConfig) -> Path:
    """A broker.conf describing the store (paths relative to it), for ``--conf`` and ``serve``."""
    path = config.store_path_root_dir / "broker.conf"
    path.write_text(
        "# Written by rmq-query demo-store: the geometry this store was written with.\n"
        f"brokerClusterName={config.broker_cluster_name}\n"
        f"brokerName={config.broker_name}\n"
        f"brokerIP1={config.broker_ip1}\n"
        f"listenPort={config.listen_port}\n"
        "storePathRootDir=.\n"
        "storePathCommitLog=./commitlog\n"
        f"mappedFileSizeCommitLog={config.mapped_file_size_commit_log}\n"
        f"maxHashSlotNum={config.max_hash_slot_num}\n"
        f"maxIndexNum={config.max_index_num}\n"
        "messageIndexEnable=true\n",
        encoding="utf-8",
    )
    return path


def make_demo_store(
    root: Path, messages: int = 2000, *, seed: int = 7, config: StoreConfig | None = None
) -> DemoSummary:
    """Write ``messages`` varied messages into a new store at ``root`` (which must not hold one)."""
    root = Path(root)
    if (root / "commitlog").exists():
        raise FileExistsError(f"{root} already holds a CommitLog")
    config = config or demo_config(root)
    rng = random.Random(seed)
    # Store times end about now (the dashboard's by-key search ends at "now").
    start = int(time.time() * 1000) - messages * 300 - 60_000
    now = [start]

    def clock() -> int:
        now[0] += 5
        return now[0]

    unique_ids = UniqueIdGenerator("10.9.8.7", pid=4242, class_loader_hash=0x1234ABCD, clock=clock)
    slot_sharers = {t: keys_sharing_a_slot(t, config.max_hash_slot_num) for t in DEMO_TOPICS}
    summary = DemoSummary(root)
    with StoreWriter(config, clock=clock, unique_ids=unique_ids) as writer:
        for i in range(messages):
            topic = DEMO_TOPICS[i % len(DEMO_TOPICS)]
            keys: list[str] = [f"order-{i}", f"user-{i % 37}"]
            if i % 5 == 0:
                keys.append("common")
            if i % 11 == 0:
                keys.append(f"{UNICODE_KEYS[i % len(UNICODE_KEYS)]}-{i % 3}")
            if i % 13 == 0:
                keys.append(COLLIDING_KEYS[(i // 39) % len(COLLIDING_KEYS)])
            if i % 17 == 0:
                sharing = slot_sharers[topic]
                keys.append(sharing[(i // 51) % len(sharing)])
            key_text: str | None = " ".join(keys)
            if i % 23 == 0:
                key_text = None  # no keys at all: findable only by its unique key
            sys_flag = 0
            if i % 29 == 0:
                sys_flag = ZLIB_COMPRESSED
            if i % 97 == 0:
                sys_flag = ROLLBACK
            body_len = rng.choice((16, 64, 200, 700, 1500, 4000))
            body = (f"demo message {i} ".encode() * (body_len // 14 + 1))[:body_len]
            appended = writer.append(
                topic,
                body,
                keys=key_text,
                tags=f"tag{i % 4}",
                unique_key=i % 19 != 0,
                queue_id=i % 4,
                sys_flag=sys_flag,
                born_host=f"10.1.{i % 4}.9",
                born_port=50000 + i % 10,
            )
            if i % 400 == 0 and i:
                writer.index()
            if i % 7 == 3:
                now[0] += rng.randrange(200, 2000)  # store times jump, so time ranges have something to cut
            summary.messages += 1
            summary.topics.add(topic)
            if key_text and i % 97 != 0 and len(summary.sample_keys.setdefault(topic, [])) < 5:
                summary.sample_keys[topic].append(keys[0])
            if appended.unique_key and sys_flag != ROLLBACK and len(summary.sample_unique_keys) < 5:
                summary.sample_unique_keys.append((topic, appended.unique_key))
            if len(summary.sample_offset_ids) < 5:
                summary.sample_offset_ids.append(appended.offset_msg_id)
    write_broker_conf(config)
    return summary
