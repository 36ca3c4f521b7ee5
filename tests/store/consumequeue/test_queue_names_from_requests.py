"""Topic names come from requests: any string must read as an empty queue, never as an error."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.message_store import MessageStore


@pytest.fixture(scope="module")
def store(stores_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    root = tmp_path_factory.mktemp("queue-names")
    shutil.copytree(stores_dir / "java-4.9.7-a", root / "java-4.9.7-a")
    shutil.copy(stores_dir / "java-4.9.7-a.broker.conf", root / "java-4.9.7-a.broker.conf")
    opened = MessageStore.open(StoreConfig.load(root / "java-4.9.7-a.broker.conf"))
    yield opened
    opened.close()


@pytest.mark.parametrize("topic", ["x" * 300, "é" * 200, "..", "../commitlog", "a/b", "", "\x00"])
def test_any_topic_name_is_an_empty_queue(topic: str, store: MessageStore) -> None:
    assert store.min_offset(topic, 0) == 0
    assert store.max_offset(topic, 0) == 0
    assert store.earliest_message_time(topic, 0) == -1
    assert store.offset_by_time(topic, 0, 0) == 0
    assert store.get_message(topic, 0, 0, 32).status.name == "NO_MESSAGE_IN_QUEUE"
