"""A few-second run of the metadata-scale benchmark (``benchmarks.metadata_scale``, issue 30).

The long runs are in BENCHMARKS.md; this tiny one keeps the script working against the server's
public surfaces: the store it builds reads back through the project's own tables with the counts
asked for, ``serve --writable`` starts on it, every figure gets an answer (none times out, none is
refused), the probe and the heart-beating clients are served, and the report carries them all.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks import scale_clients
from benchmarks.metadata_scale import FIGURES, parse_args, probe_stats, run_benchmark
from benchmarks.scale_store import build_store, message_topic_indexes
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, encode_frame
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.subscription_groups import SubscriptionGroupTable
from store.config.topics import TopicTable


def test_the_store_holds_what_was_asked(tmp_path: Path) -> None:
    scale = build_store(tmp_path / "s", 30, 12, message_topics=5, messages_per_topic=3)
    config = tmp_path / "s" / "config"
    topics = TopicTable.load(config / "topics.json").topics
    mine = {name: t for name, t in topics.items() if name.startswith("scale-topic-")}
    assert len(mine) == 30
    assert {(t.read_queue_nums, t.write_queue_nums) for t in mine.values()} == {(4, 4)}
    assert "TBW102" in topics  # the broker's start-up topics, so a SEND can create topics
    groups = SubscriptionGroupTable.load(config / "subscriptionGroup.json").groups
    assert sum(1 for g in groups if g.startswith("scale-group-")) == 12
    offsets = ConsumerOffsetTable.load(config / "consumerOffset.json").offsets
    assert len(offsets) == 12
    assert offsets["scale-topic-000000@scale-group-000000"] == {0: 1, 1: 1, 2: 1, 3: 1}
    assert offsets["scale-topic-000001@scale-group-000001"] == {0: 0, 1: 0, 2: 0, 3: 0}
    assert scale.message_topics == tuple(f"scale-topic-{i:06d}" for i in (0, 6, 12, 18, 24))
    for topic in scale.message_topics:
        queues = tmp_path / "s" / "consumequeue" / topic
        assert sorted(p.name for p in queues.iterdir()) == ["0", "1", "2"]  # 3 messages, one a queue


def test_message_topics_are_spread() -> None:
    assert message_topic_indexes(10, 3) == [0, 3, 6]
    assert message_topic_indexes(2, 5) == [0, 1]
    assert message_topic_indexes(5, 0) == []


def test_probe_stats_of_a_window() -> None:
    samples = [[1.0, 0.002, True], [1.5, 0.010, True], [2.0, 0.300, False], [9.0, 5.0, True]]
    assert probe_stats(samples, 1.0, 2.0, 30) == {"count": 3, "p99_ms": 300.0, "max_ms": 300.0, "failed": 1}
    assert probe_stats(samples, 3.0, 4.0, 30) == {"count": 0, "p99_ms": None, "max_ms": None, "failed": 0}


async def test_a_tiny_run_measures_every_figure(tmp_path: Path) -> None:
    sizes = ["--topics", "50", "--groups", "20", "--clients", "20"]
    pace = ["--repeat", "1", "--idle", "0.3", "--settle", "0.05", "--timeout", "20", "--no-memory"]
    args = parse_args([*sizes, *pace, "--keep", str(tmp_path / "run")])
    report = await run_benchmark(args)
    figures = {f["name"]: f for f in report["figures"]}  # type: ignore[attr-defined]
    assert list(figures) == list(FIGURES)
    for name, figure in figures.items():
        assert not figure["timed_out"] and not figure["failed"], (name, figure)
        assert len(figure["ms"]) == 1 and figure["ms"][0] > 0, (name, figure)
    # the page holds the 50 topics, the broker's start-up topics and those the run created
    assert int(figures["api_topics"]["detail"].split(", ")[1].split()[0]) > 50
    assert figures["api_groups"]["detail"].endswith(" groups")
    assert int(figures["metrics"]["detail"].split(", ")[1].split()[0]) > 50
    assert "new groups" in figures["heartbeat_1mb"]["detail"]
    assert report["restarts"] == 0
    assert report["rss_after_start_mib"] > 10  # type: ignore[operator]
    probe = report["probe_idle"]
    assert probe["count"] > 10 and probe["failed"] == 0, probe  # type: ignore[index]
    [beats] = report["heartbeats"]  # type: ignore[misc]
    assert beats["not_connected"] == 0 and beats["sent"] >= 20, beats
    # every beat sent is answered, those in flight at the stop included (they are waited for)
    assert beats["answered"] == beats["sent"] and beats["unanswered_at_stop"] == 0, beats


async def test_heartbeats_in_flight_at_the_stop_are_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer that answers each HEART_BEAT 0.4 s late, a beat every 0.1 s: the stop comes while one is
    in flight on every connection, and each is still counted answered (none cancelled, none lost)."""
    delay = 0.4
    heart_beats = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal heart_beats
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for request in decoder.feed(data):
                    assert request.code == RequestCode.HEART_BEAT
                    heart_beats += 1
                    await asyncio.sleep(delay)
                    writer.write(encode_frame(request.make_response(ResponseCode.SUCCESS)))
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stopped_with: list[int] = []

    async def stop_soon() -> None:  # instead of the driver's line on stdin
        await asyncio.sleep(delay * 1.5)  # the second beats are then in flight
        stopped_with.append(heart_beats)

    monkeypatch.setattr(scale_clients, "_wait_stdin", stop_soon)
    argv = ["heartbeats", "--addr", f"127.0.0.1:{port}", "--clients", "2", "--topics", "2"]
    args = scale_clients.parse_args([*argv, "--interval", "0.1", "--timeout", "5"])
    try:
        report = await asyncio.wait_for(scale_clients.heartbeats(args), 10)
    finally:
        server.close()
        await server.wait_closed()
    assert stopped_with[0] > 2  # the server had a beat past the first ones when the stop came
    assert report["sent"] == heart_beats == stopped_with[0], (report, heart_beats)
    assert report["answered"] == report["sent"], report
    assert report["failed"] == report["timeouts"] == report["unanswered_at_stop"] == 0, report
