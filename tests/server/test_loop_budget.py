"""``LoopBudget``: a burst of one kind of work takes turns with the rest of the event loop.

Counted, not timed: what matters is how many items of the burst run before a request that arrived
with them (all of them before it without the budget: the connect burst of issue 30).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from server.loop_budget import LoopBudget

pytestmark = pytest.mark.asyncio

ITEM_S = 0.0005
BURST = 200


def _work() -> None:
    end = time.perf_counter() + ITEM_S
    while time.perf_counter() < end:
        pass


async def _burst(budget: LoopBudget | None) -> tuple[int, int]:
    """BURST items and one probe, all ready in the same iteration; (items run before the probe,
    items run in all)."""
    loop = asyncio.get_running_loop()
    ran = 0
    seen_by_probe: list[int] = []
    tasks: list[asyncio.Future[None]] = []

    def item() -> None:
        nonlocal ran
        if budget is None or budget.free():
            started = time.perf_counter()
            _work()
            ran += 1
            if budget is not None:
                budget.charge(time.perf_counter() - started)
            return
        tasks.append(asyncio.ensure_future(later()))

    async def later() -> None:
        nonlocal ran
        assert budget is not None
        await budget.turn()
        started = time.perf_counter()
        _work()
        ran += 1
        budget.charge(time.perf_counter() - started)

    for i in range(BURST):
        loop.call_soon(item)
        if i == 0:
            loop.call_soon(lambda: loop.call_soon(lambda: seen_by_probe.append(ran)))
    while len(tasks) + ran < BURST or not seen_by_probe:
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return seen_by_probe[0], ran


async def test_without_a_budget_the_whole_burst_runs_first() -> None:
    before, total = await _burst(None)
    assert (before, total) == (BURST, BURST)


async def test_with_a_budget_a_request_waits_for_about_one_budget() -> None:
    budget = LoopBudget(0.004)
    before, total = await _burst(budget)
    assert total == BURST
    # one budget holds 8 items; a busy machine makes items look longer (fewer fit), never more
    assert before <= 2 * 8 + 1, before
    assert budget.deferred >= BURST - 2 * 8 - 1


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    budget = LoopBudget(0.001)
    budget.charge(0.002)  # spent: the next ones wait
    first = asyncio.ensure_future(budget.turn())
    second = asyncio.ensure_future(budget.turn())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.wait_for(second, 5)
    assert first.cancelled()


async def test_the_budget_is_renewed_every_iteration() -> None:
    """Items spread over iterations never wait: only what one iteration spends counts."""
    budget = LoopBudget(0.004)
    for _ in range(50):
        assert budget.free()
        budget.charge(0.001)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert budget.deferred == 0
