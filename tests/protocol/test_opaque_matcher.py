"""OpaqueMatcher: opaques handed out, answers paired in any order, unknown and duplicate refused or
ignored, expiry by deadline with a caller-given clock (no sockets, no event loop)."""

from __future__ import annotations

import pytest

from protocol.errors import DuplicateOpaqueError, UnknownOpaqueError
from protocol.opaque_matcher import OPAQUE_LIMIT, OpaqueMatcher


def test_opaques_count_up_from_one_like_the_client_always_sent_them() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    assert [matcher.next_opaque() for _ in range(4)] == [1, 2, 3, 4]


def test_opaques_wrap_to_zero_below_two_to_the_31_and_skip_those_still_waiting() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher(first=OPAQUE_LIMIT - 2)
    assert OPAQUE_LIMIT == 2**31  # a non-negative Java int
    first = matcher.next_opaque()
    matcher.expect(first, "old")  # still waiting when the counter comes round again
    assert first == 2**31 - 2
    assert [matcher.next_opaque() for _ in range(3)] == [2**31 - 1, 0, 1]

    small: OpaqueMatcher[str] = OpaqueMatcher(first=0, limit=4)
    small.expect(small.next_opaque(), "a")  # 0
    small.expect(small.next_opaque(), "b")  # 1
    assert [small.next_opaque() for _ in range(3)] == [2, 3, 2]  # 0 and 1 are taken


def test_answers_in_any_order_reach_their_own_waiter() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    for name in "abcde":
        matcher.expect(matcher.next_opaque(), name)
    assert len(matcher) == 5 and 3 in matcher
    assert [matcher.match(opaque) for opaque in (5, 2, 4, 1, 3)] == ["e", "b", "d", "a", "c"]
    assert len(matcher) == 0


def test_an_unknown_or_repeated_answer_is_ignored_by_match_and_refused_by_take() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    matcher.expect(7, "seven")
    assert matcher.match(8) is None
    with pytest.raises(UnknownOpaqueError, match="opaque 8"):
        matcher.take(8)
    assert matcher.take(7) == "seven"
    assert matcher.match(7) is None  # answered already: a duplicate answer
    with pytest.raises(UnknownOpaqueError, match="opaque 7"):
        matcher.take(7)


def test_a_second_request_under_an_opaque_still_waiting_is_refused() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    matcher.expect(3, "first", timeout=5.0, now=0.0)
    with pytest.raises(DuplicateOpaqueError, match="opaque 3"):
        matcher.expect(3, "second")
    assert matcher.match(3) == "first"
    matcher.expect(3, "again")  # free once answered
    assert matcher.match(3) == "again"


def test_requests_expire_at_their_deadline_earliest_first_across_timeouts() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    assert matcher.expect(1, "a", timeout=6.0, now=10.0) == 16.0
    assert matcher.expect(2, "b", timeout=0.5, now=10.2) == 10.7
    assert matcher.expect(3, "c", timeout=6.0, now=11.0) == 17.0
    assert matcher.expect(4, "d", timeout=0.5, now=11.1) == 11.6
    assert matcher.expect(5, "e") is None  # no timeout: waits until answered
    assert matcher.next_deadline() == 10.7
    assert matcher.expire(10.69) == []
    assert matcher.expire(10.7) == [(2, "b", 0.5)]  # at the deadline, not after it
    assert matcher.next_deadline() == 11.6
    assert matcher.match(4) == "d"  # answered in time: never expires
    assert matcher.next_deadline() == 16.0
    assert matcher.expire(100.0) == [(1, "a", 6.0), (3, "c", 6.0)]
    assert matcher.next_deadline() is None
    assert len(matcher) == 1 and matcher.match(5) == "e"
    assert matcher.match(2) is None  # a late answer to an expired request is nobody's


def test_an_expired_opaque_is_handed_out_again_only_after_the_counter_wraps() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher(first=0, limit=3)
    opaque = matcher.next_opaque()
    matcher.expect(opaque, "x", timeout=1.0, now=0.0)
    assert matcher.expire(1.0) == [(0, "x", 1.0)]
    assert [matcher.next_opaque() for _ in range(3)] == [1, 2, 0]


def test_cancelled_requests_are_forgotten_and_drain_returns_the_rest_in_order() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    for opaque, name in enumerate("abcd", start=1):
        matcher.expect(opaque, name, timeout=1.0, now=float(opaque))
    assert matcher.forget(2) == "b"
    assert matcher.forget(2) is None
    assert matcher.drain() == ["a", "c", "d"]
    assert len(matcher) == 0 and matcher.next_deadline() is None and matcher.expire(1e9) == []


def test_the_clock_may_not_go_back_and_the_first_opaque_must_fit() -> None:
    matcher: OpaqueMatcher[str] = OpaqueMatcher()
    matcher.expect(1, "a", timeout=1.0, now=5.0)
    with pytest.raises(ValueError, match="clock went back"):
        matcher.expect(2, "b", timeout=1.0, now=4.0)
    assert 2 not in matcher
    with pytest.raises(ValueError):
        OpaqueMatcher(first=OPAQUE_LIMIT)


def test_many_answered_requests_leave_only_the_waiting_ones_behind() -> None:
    """100k requests answered in turn while five stay waiting: only those five are left, and they
    expire in registration order (an answered request leaves no entry behind to expire later)."""
    matcher: OpaqueMatcher[int] = OpaqueMatcher()
    for i in range(5):
        matcher.expect(matcher.next_opaque(), -i, timeout=10.0, now=0.0)
    for i in range(100_000):
        opaque = matcher.next_opaque()
        matcher.expect(opaque, i, timeout=10.0, now=i * 1e-5)
        assert matcher.match(opaque) == i
    assert len(matcher) == 5
    assert [w for _, w, _ in matcher.expire(10.0)] == [0, -1, -2, -3, -4]
