"""A kind of work that takes turns with the rest of the event loop (issue 30's connect burst).

A request handled synchronously holds the loop for its cost, and requests that arrive together run
in the same loop iteration: when 1,000 clients connect at once, their 1,000 heartbeats (each
registering a client, its groups and subscriptions) ran back to back, 120-220 ms, and a client
whose request arrived meanwhile waited for all of them. ``LoopBudget`` lets at most ``budget``
seconds of one kind of work run per iteration: past it, the next requests of that kind wait for a
turn in a later iteration (first come, first served), so whatever else is ready runs in between and
waits at most about one budget, while the burst is still worked off at full speed.
"""

from __future__ import annotations

import asyncio
from collections import deque

#: Seconds of the work per loop iteration.
DEFAULT_BUDGET = 0.004


class LoopBudget:
    """``free()`` says whether the work may run now; if not, ``await turn()`` first. Either way the
    caller reports what it spent with ``charge``."""

    def __init__(self, budget: float = DEFAULT_BUDGET) -> None:
        self.budget = budget
        #: Seconds charged since the budget was last renewed.
        self._spent = 0.0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._renewal_scheduled = False
        #: The work's mean cost per item (to know how many waiters one budget holds).
        self._unit = budget / 8
        #: Items that had to wait for a turn (for tests and ``/metrics``-style counters).
        self.deferred = 0

    def free(self) -> bool:
        """Nobody is waiting and this iteration's budget is not spent: run now."""
        return not self._waiters and self._spent < self.budget

    def charge(self, seconds: float) -> None:
        """``seconds`` of the work were spent (now or by a turn's holder)."""
        self._spent += seconds
        self._unit = 0.9 * self._unit + 0.1 * seconds
        self._schedule_renewal()  # what this iteration spent is forgotten at the next one

    async def turn(self) -> None:
        """Wait until a later iteration hands this caller a turn."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.deferred += 1
        self._schedule_renewal()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._hand_turns(1)  # the turn it was given goes to the next one
            raise

    def _schedule_renewal(self) -> None:
        if not self._renewal_scheduled:
            self._renewal_scheduled = True
            asyncio.get_running_loop().call_soon(self._renew)

    def _renew(self) -> None:
        """A new iteration: the budget renewed, and as many waiters as it holds are handed their
        turn (they run in the next iteration, after whatever else is ready by then)."""
        self._renewal_scheduled = False
        self._spent = 0.0
        if self._waiters:
            self._hand_turns(max(1, int(self.budget / max(self._unit, 1e-6))))
            # what the handed turns will spend is charged as they run; the rest wait for more
            self._spent = self.budget
            self._schedule_renewal()

    def _hand_turns(self, count: int) -> None:
        waiters = self._waiters
        while count and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1
