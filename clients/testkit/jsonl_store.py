"""``make_store``: a new store directory from messages described as JSON lines.

Each message (``clients.testkit.message_jsonl``) is appended as the broker appends it, then the store
gets what
a broker leaves after a clean shutdown: IndexFiles, checkpoint, ``config/topics.json`` (the broker's
start-up topics plus every topic written) and a ``broker.conf`` beside the files with the geometry,
so ``serve``, the other commands and a Java broker open the store right.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clients.testkit.demo import write_broker_conf
from clients.testkit.message_jsonl import MessageReader
from store.config.store_config import StoreConfig
from store.config.topics import TopicTable, startup_topics
from store.consumequeue.consume_queue import delay_level_table
from store.write.writer import StoreWriter


@dataclass(slots=True)
class MadeStore:
    root: Path
    messages: int = 0
    topics: int = 0


def make_store(config: StoreConfig, messages: Path, *, index_now: int | None = None) -> MadeStore:
    """Write every message of the JSONL file ``messages`` into the new store ``config`` describes.

    Refuses a directory that already holds a CommitLog. ``index_now`` pins the IndexFiles' creation
    time (their names), for reproducible output.
    """
    root = config.store_path_root_dir
    if config.store_path_commit_log.exists() and any(config.store_path_commit_log.iterdir()):
        raise FileExistsError(f"{root} already holds a CommitLog")
    reader = MessageReader(
        cluster=config.broker_cluster_name,
        max_message_size=config.max_message_size,
        max_delay_level=delay_level_table(config.message_delay_level)[1],
    )
    made = MadeStore(root)
    root.mkdir(parents=True, exist_ok=True)
    table = TopicTable.load(root / "config" / "topics.json")
    if not table.topics:
        for topic in startup_topics(
            config.broker_cluster_name, config.broker_name, auto_create=config.auto_create_topic_enable
        ):
            table.put(topic, 0)
        table.save()
    with StoreWriter(config, index_now=(lambda: index_now) if index_now is not None else None) as writer:
        for message in reader.read_file(messages):
            writer.put(message.record, store_timestamp=message.store_timestamp)
            made.messages += 1
        made.topics = len(writer.topics)
    write_broker_conf(config)
    return made
