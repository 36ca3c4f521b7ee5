"""A store whose key ``hot`` was written ``HOT`` times into one index file: the chain of one slot
holds exactly those entries (no unique keys), the first write ``T0`` 5 s before the others, 10 ms
apart. A query whose time range holds only the first write visits the whole chain (the broker's
walk only stops at an older entry), so work counts follow from how the store was written.

Used by the store's budget tests (tests/store/index/test_query_budget.py) and the server's query pool
tests (tests/server/test_query_pool.py).
"""

from __future__ import annotations

from pathlib import Path

from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

HOT = 300
T0 = 1_700_000_000_000


def write_hot_key_store(root: Path) -> StoreConfig:
    """Write the store at ``root`` and return its configuration."""
    config = StoreConfig.for_store(
        root,
        broker_ip1="127.0.0.1",
        max_hash_slot_num=64,
        max_index_num=1000,
        mapped_file_size_commit_log=1 << 20,
    )
    now = [T0]

    def clock() -> int:
        value = now[0]
        now[0] += 10 if value != T0 else 5_000
        return value

    with StoreWriter(config, clock=clock) as w:
        for n in range(HOT):
            w.append("TopicH", f"body-{n}".encode(), keys="hot", unique_key=False)
    return config
