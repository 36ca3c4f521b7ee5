"""How many connections fit under the open-file limit, with room kept for the store and refusals.

Every connection costs a file descriptor, and so does every store file (a memory map keeps a
duplicate of its file's descriptor), every file a refresh opens, and each connection accepted only
to be refused. When ``RLIMIT_NOFILE`` runs out, ``accept()`` fails (the event loop logs it and
stops accepting for a while, clients get resets or time out) and so does opening the store's next
CommitLog or index file: the server stops following the store. So ``--max-connections`` must leave
the descriptors those need, and the SYSTEM_BUSY refusal (``server.remoting.refusal``) must start before the
limit does.

The budget, per process (each ``--workers`` process has its own limit):

* ``in_use``: descriptors open when serving starts (interpreter, logs, the store's mapped files);
* ``store_growth``: as many again as the store holds now (at least ``MIN_STORE_GROWTH``), for the
  CommitLog and index files a live broker adds while this process follows it;
* ``REFRESH_RESERVE`` for the files and directories a refresh opens for a moment;
* ``ACCEPT_BURST`` for connections accepted in one go before the refused ones are closed (the kernel
  queues at most ``LISTEN_BACKLOG`` + 1 per listening port, and both ports are listened on);
* the refused connections waiting for their SYSTEM_BUSY answer: ``max_waiting`` of them.

What is left is the connection limit. It is computed at start and then kept up to date while
serving (``FileWatch``, checked every few seconds by ``serve``): a store that gains files (a live
broker rolling CommitLog and index files) uses descriptors of its own, so once it has used half the
room kept for growth (and any descriptors nobody was promised), the limit drops by one for each
further file, and rises back, never above the start value, when the broker's retention deletes them.
Connections already open over a lowered limit are not closed; new ones are refused until they fit.

Before computing it, the soft limit is raised toward what the requested (or default) number of
connections needs, up to the hard limit, as the JVM does for the broker at start
(``-XX:+MaxFDLimit``). An explicit ``--max-connections`` above what the limit allows is lowered to
it, with one warning saying by how much and how to raise the limit: refusing to start would turn a
tuning mistake into an outage, while serving fewer connections with a clear SYSTEM_BUSY for the rest
is what the operator asked for in spirit.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: The listen backlog both ports are bound with (``create_server``'s default, made explicit).
LISTEN_BACKLOG = 100

#: Connections one readiness event can accept before any refused one is closed: the kernel's accept
#: queue (backlog + 1) on each of the two ports.
ACCEPT_BURST = 2 * (LISTEN_BACKLOG + 1)

#: Descriptors a refresh may hold for a moment (directory scans, a new file being mapped, checkpoint).
REFRESH_RESERVE = 32

#: The least room kept for store files added while following a live store.
MIN_STORE_GROWTH = 64

#: Fewer connections than this after the reserve are logged as a warning, not as information.
MIN_USEFUL_CONNECTIONS = 64

#: The fewest refused connections that may wait for their SYSTEM_BUSY answer at once.
MIN_WAITING = 16


def max_waiting_for(max_connections: int) -> int:
    """Refused connections allowed to wait for their answer: a tenth of the limit, at least 16."""
    return max(MIN_WAITING, max_connections // 10)


@dataclass(frozen=True, slots=True)
class FileBudget:
    """The connection limit the open-file limit allows, and what was kept aside for other uses."""

    max_connections: int
    max_waiting: int
    #: The soft open-file limit served under; None when there is none.
    soft_limit: int | None
    reserve: int
    #: Store files when the budget was made (the room kept for growth is sized from it).
    store_files: int = 0


class FileWatch:
    """The connection limit as the store's file count changes: ``limit(files_now)``.

    The budget kept ``max(MIN_STORE_GROWTH, store_files)`` descriptors for files the store gains;
    files beyond that come out of the connections (and go back to them when deleted), so that the
    store can always open its next file. Only the store's growth is tracked, not connections'.
    """

    __slots__ = ("_budget", "_count_files", "_growth_room")

    def __init__(self, budget: FileBudget, count_files: Callable[[], int]) -> None:
        self._budget = budget
        self._count_files = count_files
        self._growth_room = max(MIN_STORE_GROWTH, budget.store_files)

    def limit(self, files_now: int | None = None) -> int:
        """The connection limit for ``files_now`` store files (None: count them now)."""
        budget = self._budget
        if budget.soft_limit is None:
            return budget.max_connections
        files = self._count_files() if files_now is None else files_now
        # Descriptors nobody was promised (a limit far above what was wanted) absorb growth first;
        # past them, half the growth room is kept free at all times, so the store can open more.
        slack = budget.soft_limit - (budget.max_connections + budget.max_waiting + budget.reserve)
        over = files - budget.store_files - self._growth_room // 2 - max(0, slack)
        return max(1, budget.max_connections - max(0, over))


def open_descriptors() -> int | None:
    """Descriptors this process has open now (Linux ``/proc``, macOS ``/dev/fd``), or None."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            # listdir itself holds one descriptor open while it runs.
            return len(os.listdir(directory)) - 1
        except OSError:
            continue
    return None


def reserve_for(in_use: int, store_files: int) -> int:
    """Descriptors kept from connections: what is open now, store growth, refresh and accept bursts."""
    return in_use + max(MIN_STORE_GROWTH, store_files) + REFRESH_RESERVE + ACCEPT_BURST


def connections_allowed(soft_limit: int, reserve: int) -> tuple[int, int]:
    """(max_connections, max_waiting) with ``max_connections + max_waiting + reserve <= soft_limit``."""
    room = soft_limit - reserve
    connections = max(1, room * 10 // 11)
    while connections > 1 and connections + max_waiting_for(connections) > room:
        connections -= 1
    return connections, max_waiting_for(connections)


def plan_connections(requested: int | None, default: int, store_files: int) -> FileBudget:
    """The connection limit to serve with: ``requested`` (None = ``default``), lowered to what the
    open-file limit allows after raising its soft value as far as the hard one permits.

    ``store_files``: files the opened store holds (CommitLog and index files); they are already
    counted among the open descriptors, this sizes the room kept for more of them.
    """
    wanted_connections = requested if requested is not None else default
    try:
        import resource
    except ImportError:  # not POSIX: no limit to respect
        return FileBudget(wanted_connections, max_waiting_for(wanted_connections), None, 0, store_files)
    in_use = open_descriptors()
    if in_use is None:
        in_use = store_files + 32  # interpreter, logs, sockets: a generous guess
    reserve = reserve_for(in_use, store_files)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted_connections + max_waiting_for(wanted_connections) + reserve
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError) as exc:
                log.debug("cannot raise the open-file limit to %d: %s", target, exc)
    if soft == resource.RLIM_INFINITY:
        return FileBudget(wanted_connections, max_waiting_for(wanted_connections), None, reserve, store_files)
    if soft >= needed:
        return FileBudget(wanted_connections, max_waiting_for(wanted_connections), soft, reserve, store_files)
    connections, waiting = connections_allowed(soft, reserve)
    connections = min(connections, wanted_connections)
    if requested is not None:
        log.warning(
            "--max-connections %d lowered to %d: the open-file limit is %d (hard %s) and %d descriptors "
            "are kept for the store's files, refreshing, accepting and %d refused connections awaiting "
            "SYSTEM_BUSY; raise `ulimit -n` to serve more",
            requested,
            connections,
            soft,
            "unlimited" if hard == resource.RLIM_INFINITY else hard,
            reserve,
            waiting,
        )
    else:
        # Too few to be of use is worth a warning: some other process setting may be wrong.
        log.log(
            logging.WARNING if connections < MIN_USEFUL_CONNECTIONS else logging.INFO,
            "serving at most %d connections at once (open-file limit %d, %d descriptors kept for the "
            "store, refreshing and refusals); raise `ulimit -n` or pass --max-connections to change it",
            connections,
            soft,
            reserve + waiting,
        )
    return FileBudget(connections, waiting, soft, reserve, store_files)
