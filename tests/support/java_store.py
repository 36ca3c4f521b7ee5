"""The Java-written golden store the server and client tests serve: its name, how to open a copy of
it, and the server settings that match its broker.conf (loopback, port 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.app import ServerSettings
from store.config.store_config import StoreConfig
from store.message_store import MessageStore

#: ``tests/golden/stores/java-4.9.7-a`` (written by the real 4.9.7 broker) and its ``.broker.conf`` beside it.
JAVA_STORE = "java-4.9.7-a"


def open_java_store(store_dir: Path) -> MessageStore:
    """Open a copy of the Java store (``store_dir``), with the broker.conf copied beside it."""
    return MessageStore.open(StoreConfig.load(store_dir.parent / f"{JAVA_STORE}.broker.conf"))


def settings_for(config: StoreConfig, **overrides: Any) -> ServerSettings:
    """Loopback, port 0, identity from the store's broker.conf."""
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "cluster": config.broker_cluster_name,
        "broker_name": config.broker_name,
        "default_query_max_num": config.default_query_max_num,
    }
    values.update(overrides)
    return ServerSettings(**values)


def server_settings(store: MessageStore) -> ServerSettings:
    """``settings_for`` the store's own config."""
    return settings_for(store.config)
