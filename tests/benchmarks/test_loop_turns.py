"""``benchmarks.loop_turns`` reads what it says it reads: the request codes of a read, the server's
events over a message's flight, and ``perf trace``'s slow calls by thread and file.

The tool decides what the end-to-end row's tail is blamed on (BENCHMARKS.md, h36), so its parsing
and its attribution are checked on inputs whose answer is known.
"""

from __future__ import annotations

import pytest

from benchmarks import loop_turns
from protocol.codes import RequestCode, SerializeType
from protocol.command import RemotingCommand
from protocol.frame import encode_frame


def test_the_codes_of_every_whole_frame_in_a_read_both_serializations() -> None:
    send = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, serialize_type=SerializeType.ROCKETMQ)
    pull = RemotingCommand(code=RequestCode.PULL_MESSAGE, serialize_type=SerializeType.JSON)
    heartbeat = RemotingCommand(code=RequestCode.HEART_BEAT, serialize_type=SerializeType.JSON)
    read = encode_frame(send) + encode_frame(pull) + encode_frame(heartbeat)
    assert loop_turns.request_codes(read) == [310, 11, 34]
    assert loop_turns.request_codes(read[:9]) == []  # not even a whole prefix


def test_a_slow_message_is_blamed_on_what_overlapped_its_flight(capsys: pytest.CaptureFixture[str]) -> None:
    ms = 1_000_000
    # 100 messages 5 ms apart, 0.5 ms each, but the 10th (4 ms) and the 50th (3 ms)
    messages = [(i * 5 * ms, 500) for i in range(100)]
    messages[10] = (10 * 5 * ms, 4000)
    messages[50] = (50 * 5 * ms, 3000)
    probe = {
        "counts": {"turns": 0, "callbacks": 0},
        # a collection inside the 10th message's flight, none in the 50th's
        "gc": [(10 * 5 * ms + ms, 2 * ms, 0, 5), (80 * 5 * ms + 4 * ms, ms // 10, 0, 1)],
        "jobs": [],
        "turns": [],
        "late": [],
        "reads": [],
        "notify": [],
        "woken": [],
    }
    loop_turns.summarize(probe, messages, {}, slowest=0.02)
    out = capsys.readouterr().out
    assert "100 messages over 0.5 s" in out
    assert "gc generation 0: 2 collections, 2.10 ms in all, max 2.00 ms, over 0.5 ms: 1" in out
    slowest = out.split("the slowest 2 messages")[1].splitlines()
    assert slowest[1].startswith("    4.00 ms") and "gc 1 (2.00 ms)" in slowest[1]
    assert slowest[2].startswith("    3.00 ms") and slowest[2].endswith("-")
    assert "gc 1, jobs 0, turns 0, late 0, none 1" in out


def test_slow_calls_are_grouped_by_thread_call_and_file(capsys: pytest.CaptureFixture[str]) -> None:
    trace = "\n".join(
        [
            "  1.000 ( 2.500 ms): python/100 pwrite64(fd: 7, buf: 0x1, count: 20, pos: 40) = 20",
            "  2.000 ( 1.500 ms): python/100 pwrite64(fd: 7, buf: 0x1, count: 20, pos: 60) = 20",
            "  3.000 ( 9.000 ms): python/100 epoll_wait(epfd: 3, events: 0x1, maxevents: 1024) = 1",
            "  4.000 (12.000 ms): python/101 fsync(fd: 9) = 0",
        ]
    )
    files = {"7": "consumequeue/T/0/00000000000000000000", "9": "/elsewhere/file"}
    loop_turns.print_slow_calls(trace, files, loop_tid=100)
    out = capsys.readouterr().out
    assert "loop pwrite64 consumequeue: 2, max 2.50, total 4.00" in out
    assert "thread 101 fsync /elsewhere/file: 1, max 12.00, total 12.00" in out
    assert "epoll" not in out  # an idle loop's wait is not a slow call
