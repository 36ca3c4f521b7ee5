"""A QUERY under ``serve --writable`` while SENDs arrive costs the same whatever the topic count.

``benchmarks.query_writable_scale`` (50,000 topics against 200 in BENCHMARKS.md) in small: two
stores of the test kit's geometry, 20 and 400 topics with a keyed message each, served by ``serve
--writable``'s dispatcher; one connection alternates a SEND read and a QUERY read. Any per-batch
work in Python over the topics or their queues (a snapshot, a map or a descriptor list rebuilt per
batch) makes the Python steps per pair (``sys.settrace``'s calls, lines and returns) grow with the
count; they must not.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.query_writable_scale import build, measure
from clients.testkit.server import TEST_GEOMETRY

SMALL, LARGE = 20, 400
PAIRS = 40


def test_a_query_beside_sends_takes_no_more_steps_with_20x_the_topics(tmp_path: Path) -> None:
    steps = {}
    for topics in (SMALL, LARGE):
        root = tmp_path / f"topics-{topics}"
        build(root, topics, **TEST_GEOMETRY)
        steps[topics] = measure(root, PAIRS, timed_rounds=0, **TEST_GEOMETRY)["steps_per_pair"]
    # The same requests take the same steps (a few may differ: a queue opened, a refresh's turn).
    assert steps[SMALL] > 200  # the SEND and the QUERY were answered through the dispatcher
    assert steps[LARGE] <= steps[SMALL] * 1.05 + 10, steps
