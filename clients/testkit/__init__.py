"""The test kit: an in-process writable server, its pytest fixtures, the demo store and stores made
from JSON lines.

``from clients.testkit import RmqServer`` (and ``RmqWriter``, ``RmqClient``, ``kit_store_config``,
``TEST_GEOMETRY``) keeps working as before the kit became a package; ``RmqConsumer`` receives what a
test sent. The names are loaded on first use, so the pytest plugin (``clients.testkit.pytest_plugin``,
loaded by every pytest run where this package is installed) still imports nothing of the server until
a fixture is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_SERVER_NAMES = frozenset(
    {
        "DEFAULT_CONSUMER_GROUP",
        "TEST_GEOMETRY",
        "RmqClient",
        "RmqConsumer",
        "RmqServer",
        "RmqWriter",
        "kit_store_config",
    }
)


def __getattr__(name: str) -> Any:
    if name == "RmqCluster":
        return importlib.import_module("clients.testkit.cluster").RmqCluster
    if name in _SERVER_NAMES:
        return getattr(importlib.import_module("clients.testkit.server"), name)
    raise AttributeError(f"module 'clients.testkit' has no attribute {name!r}")


__all__ = sorted(_SERVER_NAMES | {"RmqCluster"})
