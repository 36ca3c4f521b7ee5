"""A key query's work is bounded: at most ``budget`` index entries visited, counted.

The store (tests/support/hot_key.py): key ``hot`` written ``HOT`` times into one index file (no unique
keys, so its slot's chain holds exactly those entries), the first write 5 s before the others. A
query whose time range holds only the first write visits the whole chain (the broker's walk only
stops at an older entry), so the counts below follow from how the store was written, not from the
code under test.
"""

from __future__ import annotations

import pytest

from store.config.store_config import StoreConfig
from store.message_store import MessageStore
from tests.support.hot_key import HOT, T0, write_hot_key_store

MAX = 2**63 - 1


@pytest.fixture(scope="module")
def hot_store(tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    return write_hot_key_store(tmp_path_factory.mktemp("hot") / "store")


def test_a_walk_over_the_whole_chain_visits_every_entry_once(hot_store: StoreConfig) -> None:
    with MessageStore.open(hot_store) as store:
        result = store.query_message("TopicH", "hot", 64, T0, T0 + 999)
        assert (result.visited, result.budget_exhausted, len(result.buffers)) == (HOT, False, 1)
        assert bytes(result.buffers[0]).find(b"body-0") > 0
        latest = store.query_message("TopicH", "hot", 64, 0, MAX)
        assert (latest.visited, len(latest.buffers)) == (64, 64), "mqadmin's query stops at maxNum"


@pytest.mark.parametrize("budget", [1, 100, HOT - 1])
def test_the_budget_bounds_the_entries_visited(hot_store: StoreConfig, budget: int) -> None:
    with MessageStore.open(hot_store) as store:
        result = store.query_message("TopicH", "hot", 64, T0, T0 + 999, budget=budget)
        assert (result.visited, result.budget_exhausted, result.buffers) == (budget, True, [])


def test_a_walk_cut_short_answers_what_it_found(hot_store: StoreConfig) -> None:
    with MessageStore.open(hot_store) as store:
        result = store.query_message("TopicH", "hot", 64, 0, MAX, budget=10)
        assert (result.visited, result.budget_exhausted, len(result.buffers)) == (10, True, 10)
        newest = [bytes(b) for b in store.query_message("TopicH", "hot", 10, 0, MAX).buffers]
        assert [bytes(b) for b in result.buffers] == newest
        exact = store.query_message("TopicH", "hot", 64, T0, T0 + 999, budget=HOT)
        assert (exact.visited, exact.budget_exhausted, len(exact.buffers)) == (HOT, False, 1)


def test_the_last_update_values_follow_the_broker(hot_store: StoreConfig) -> None:
    with MessageStore.open(hot_store) as store:
        full = store.query_message("TopicH", "hot", 64, T0, T0 + 999)
        cut = store.query_message("TopicH", "hot", 64, T0, T0 + 999, budget=5)
        # No offsets found: like the broker's queryMessage, a round without offsets sets neither.
        assert (cut.index_last_update_timestamp, cut.index_last_update_phyoffset) == (0, 0)
        # Found: the newest index file's end values (the last write's time).
        assert full.index_last_update_timestamp == T0 + 5_000 + 10 * (HOT - 2)


def test_a_deadline_stops_the_walk_and_the_rest_continues_it(hot_store: StoreConfig) -> None:
    """A deadline already past stops the walk at its first look at the clock, after 256 entries,
    as a spent budget does; continued from there (``resume``), the answer is the whole walk's."""
    with MessageStore.open(hot_store) as store:
        whole = store.query_message("TopicH", "hot", 64, T0, T0 + 999)
        part = store.query_message("TopicH", "hot", 64, T0, T0 + 999, deadline=1)
        assert (part.visited, part.budget_exhausted, part.buffers) == (256, True, [])
        assert part.resume is not None
        rest = store.query_message("TopicH", "hot", 64, T0, T0 + 999, resume=part.resume)
        assert (rest.visited, rest.budget_exhausted) == (HOT, False)
        assert [bytes(b) for b in rest.buffers] == [bytes(b) for b in whole.buffers]
