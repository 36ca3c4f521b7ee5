"""A store's ``config/topics.json`` written before ``serve --writable`` opens it.

5.x clients never create topics (the Proxy answers TOPIC_NOT_FOUND), and a FIFO, delayed or
transactional send needs its topic's ``message.type`` attribute, so the gRPC tests lay out their
topics first, as an operator would with ``mqadmin updateTopic``.
"""

from __future__ import annotations

import json
from pathlib import Path


def write_topics(root: Path, topics: dict[str, str | None]) -> None:
    """``topics.json`` under store ``root``: 4 queues per topic, ``message.type`` when one is given."""
    table = {}
    for name, kind in topics.items():
        entry: dict[str, object] = {
            "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
            "topicName": name, "topicSysFlag": 0, "writeQueueNums": 4,
        }  # fmt: skip
        if kind is not None:
            entry["attributes"] = {"message.type": kind}
        table[name] = entry
    (root / "config").mkdir(parents=True)
    body = {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table}
    (root / "config" / "topics.json").write_text(json.dumps(body))


def durable_topics(root: Path) -> dict[str, dict[str, object]]:
    """The topic entries a crash now would keep under store ``root``: ``topics.json`` with its
    journal replayed (a change is durable once journaled; the file is rewritten whole a moment
    later, ``store/config/journal.py``), each as the file writes it."""
    from store.config.topics import TopicTable

    table = TopicTable.load(root / "config" / "topics.json")
    return {name: config.to_json() for name, config in table.topics.items()}
