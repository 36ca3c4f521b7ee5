"""``ConcurrentMapOrder`` against what JDK 17's ``ConcurrentHashMap`` printed for the same history.

The expected orders were printed by the real JDK (``new ConcurrentHashMap<>(2)``, a table of 4
buckets, its ``keySet()`` after each history below), not computed here. ``"a"``, ``"q"``, ``"e"``,
``"i"``, ``"y"`` all hash to bucket 1 of 4; at the third key the map doubles and ``transfer`` splits
the bucket by hash bit 4 (``a``, ``q``, ``i``, ``y``: 0; ``e``: 1).
"""

from __future__ import annotations

from store.config.concurrent_map import ConcurrentMapOrder
from store.config.config_file import concurrent_map_order


def test_a_resize_puts_the_nodes_before_the_last_run_in_reverse() -> None:
    order = ConcurrentMapOrder(4, ["a", "q", "e"])
    assert order.names() == ["q", "a", "e"]  # JDK: [q, a, e]
    assert order.buckets == 8
    # the order as if the keys had been put into 8 buckets from the start is not the map's
    assert concurrent_map_order(["a", "q", "e"], 4) == ["a", "q", "e"]


def test_the_last_run_moves_as_it_is() -> None:
    assert ConcurrentMapOrder(4, ["a", "e", "i"]).names() == ["a", "i", "e"]  # JDK: [a, i, e]


def test_puts_and_removals_after_the_resize() -> None:
    order = ConcurrentMapOrder(4, ["a", "q", "e"])
    order.put("y")
    order.remove("q")
    order.put("q")  # back at the end of its bucket
    order.put("a")  # present: keeps its place
    assert order.names() == ["a", "y", "q", "e"]  # JDK: [a, y, q, e]
    assert len(order) == 4 and "q" in order and "z" not in order
    order.remove("z")  # absent: nothing changes
    assert order.names() == ["a", "y", "q", "e"]


def test_the_table_never_shrinks() -> None:
    order = ConcurrentMapOrder(4, ["a", "q", "e"])
    for name in ("a", "q", "e"):
        order.remove(name)
    assert order.buckets == 8 and order.names() == []


def test_a_loaded_table_is_a_put_all_of_a_default_map_of_the_file() -> None:
    """JDK 17: ``src = new ConcurrentHashMap<>()`` with ``KEYS`` put in order, then ``dst = new
    ConcurrentHashMap<>(2)`` with ``i`` and ``zz`` put, then ``dst.putAll(src)`` (``Aa``, ``BB``,
    ``C#`` share one hash, as do ``AaAa``, ``BBBB``, ``AaBB``)."""
    keys = ["q", "a", "Aa", "BB", "e", "y", "i", "C#", "m", "u", "AaAa", "BBBB", "AaBB"]
    read = ConcurrentMapOrder(16, keys)  # JDK src.keySet():
    assert read.names() == ["Aa", "BB", "C#", "a", "e", "i", "m", "q", "u", "y", "AaAa", "BBBB", "AaBB"]
    table = ConcurrentMapOrder.loaded(4, ["i", "zz"], keys)  # JDK dst.keySet():
    assert table.names() == [
        "zz",
        "Aa",
        "BB",
        "C#",
        "AaAa",
        "BBBB",
        "AaBB",
        "a",
        "e",
        "i",
        "m",
        "q",
        "u",
        "y",
    ]
    assert table.buckets == 64  # putAll sized 4 buckets for 13 more at once: tableSizeFor(20) = 32 < 48
