"""``Reput``: the one walk of the CommitLog that feeds the dispatchers (``ReputMessageService``).

A pass starts at the least of the dispatchers' resume points and goes on, in runs of whole records
(``Run``), until no whole record is left (or ``max_records`` were read):

- the fast path: in the CommitLog file holding the position, the records before the settled end
  (``CommitLog.settled_end``: none still arriving) and within the file's safe length are checked in
  one compiled call per run (``record.whole_run``, at most ``RUN_BYTES`` a run), and the run is
  handed to every dispatcher in order. Checked once, so each dispatcher trusts its runs: the
  consume queues' loop reads them by TOTALSIZE. When a dispatcher checks records in its own compiled
  loop anyway (a ``Scanner``: the index's ``index_range``), it is handed the stretch unchecked
  instead and the run it took goes to the others: the check stays fused with indexing, one pass;
- anything else (a blank end-of-file marker, a corrupt record, a missing or unreadable file, a record
  past the settled end) is left to the CommitLog's own walk (``CommitLog.iter_records``, which skips a
  blank to the next file and resyncs past corruption), which yields the next whole record; that
  record is dispatched as a run of one and the fast path resumes after it.

Where the walk stops follows the gap rules (``store.commitlog.gaps``). Following (no ``on_gap``:
``serve --build-index``, ``rebuild-index --follow``, the write path), it takes settled records only
and waits at a gap as the broker's reput does, said once (``report_stall``). A one-shot rebuild
passes ``on_gap`` (``refuse`` or ``index_around``): the walk checks that records follow each other
(``GapWalk``) and hands every gap to it; ``gaps`` lists those it went around.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from store.commitlog import record
from store.commitlog.gaps import Gap, GapWalk, index_around, refuse, report_stall
from store.commitlog.mapped_files import RELEASE_EVERY, CommitLog, MappedFile
from store.reput.dispatcher import Dispatcher, Run, Scanner

#: The bytes of one run the reput checks itself: the dispatchers read it right after, while it is
#: still in the CPU's cache.
RUN_BYTES = 1 << 20
#: The bytes a scanning dispatcher (``Scanner``) is handed at once.
SCAN_BYTES = 64 << 20
_NO_LIMIT = 1 << 62


class Reput:
    """Walks ``commitlog`` for ``dispatchers`` (in that order), from their least resume point."""

    def __init__(
        self,
        commitlog: CommitLog,
        dispatchers: Sequence[Dispatcher],
        *,
        on_gap: Callable[[Gap], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.commitlog = commitlog
        #: Told the CommitLog offset the walk reached after each run (``fsck`` and ``rebuild-index``
        #: show it: ``store.progress_line``); one call per run of records, not per record.
        self._progress = progress
        self.dispatchers = list(dispatchers)
        #: With ``on_gap`` (a one-shot rebuild) the walk checks that records follow each other and
        #: hands every gap to it (raise to refuse); without (following), it takes settled records only
        #: and waits at a gap.
        self._on_gap = on_gap
        #: The gaps a rebuild went around (``on_gap`` returned).
        self.gaps: list[Gap] = []
        #: Records handed to the dispatchers, over every pass.
        self.records_read = 0
        #: The dispatchers that are ``Scanner``s, found once: a runtime ``Protocol`` check costs
        #: ~12 µs a dispatcher, and a writable store runs a pass for every put.
        self._scanners = [d for d in self.dispatchers if isinstance(d, Scanner)]
        self._lock = threading.Lock()

    def resume_offset(self, dispatchers: Sequence[Dispatcher] | None = None) -> int:
        """Where the next pass starts: the least resume point of ``dispatchers`` (all by default)."""
        active = self.dispatchers if dispatchers is None else dispatchers
        start = self.commitlog.min_offset
        return min((max(d.resume_offset(), start) for d in active), default=start)

    def run_once(self, max_records: int | None = None) -> int:
        """Dispatch every whole record not yet dispatched (at most ``max_records``); returns records read."""
        with self._lock:
            active = [d for d in self.dispatchers if d.begin()]
            if not active:
                return 0
            return self._run(active, max_records if max_records is not None else _NO_LIMIT)

    def dispatch_written(self, first: int, end: int, records: int, written: bytes) -> int | None:
        """Hand the ``records`` whole records this process's writer just appended at ``[first, end)``
        (``written``: their bytes as it wrote them; ``CommitLog.refresh_written`` took them) to
        every dispatcher as one checked run over those bytes, without the walk: no resume point
        search, no ``whole_run``, no scan (the index reads them with ``checked``), and no page of
        the CommitLog's map touched. The same records in the same order as ``run_once`` would give
        them from the map, so the same bytes written. None, with nothing dispatched, when a
        dispatcher lacks anything before ``first`` or holds something after it (a failed dispatch
        to redo, a dispatcher that sat a pass out): ``run_once`` then walks from the least resume
        point as always."""
        with self._lock:
            active = [d for d in self.dispatchers if d.begin()]
            if not active:
                return 0
            for d in active:
                if d.resume_offset() != first:
                    return None
            if end - first != len(written):
                return None
            run = Run(memoryview(written), first, 0, end - first)
            for d in active:
                d.dispatch(run)
            self.records_read += records
            return records

    def run_forever(self, stop: threading.Event, interval: float = 0.5) -> None:
        """Follow a live CommitLog: refresh, dispatch what is new, sleep; until ``stop`` is set."""
        while not stop.is_set():
            self.commitlog.refresh()
            if self.run_once() == 0:
                for d in self.dispatchers:
                    d.flush()
                stop.wait(interval)

    def _run(self, active: list[Dispatcher], budget: int) -> int:
        commitlog = self.commitlog
        seen = 0
        pos = released = self.resume_offset(active)
        scanner = next((d for d in self._scanners if d in active), None)
        following = self._on_gap is None
        try:
            while seen < budget:
                if following and pos >= commitlog.settled_end:
                    # Caught up: nothing settled is left, and a follower's walk from here would find
                    # no record and no stall (``report_stall`` says nothing at or past the limit). A
                    # writable store runs a pass for every put: this spares it the empty look.
                    break
                span = self._span(pos)
                at_record = True  # whether a whole record may start at pos (the fast path's question)
                if span is not None:
                    f, end = span
                    start = pos - f.start
                    with f.view() as view:
                        stop, n, at_record = self._fast(active, scanner, view, f, start, end, budget - seen)
                    seen += n
                    pos = f.start + stop
                if (span is None or not at_record) and seen < budget:
                    nxt = next(iter(self._records(pos)), None)
                    if nxt is None:
                        if self._on_gap is None:
                            # Following: a walk that ends before the settled end waits at a gap.
                            report_stall(commitlog, pos, commitlog.settled_end)
                        break
                    offset, buf = nxt
                    run = Run(buf, offset, 0, len(buf))
                    for d in active:
                        d.dispatch(run)
                    seen += 1
                    pos = offset + len(buf)
                if pos - released >= RELEASE_EVERY:
                    commitlog.release(released, pos)
                    released = pos
                if self._progress is not None:
                    self._progress(pos)
        finally:
            self.records_read += seen
            commitlog.release(released, pos)
        return seen

    @staticmethod
    def _fast(
        active: list[Dispatcher],
        scanner: Scanner | None,
        view: memoryview,
        f: MappedFile,
        start: int,
        end: int,
        left: int,
    ) -> tuple[int, int, bool]:
        """The fast path over ``view[start:end]`` (file ``f``): one run found and dispatched.

        ``(stop, records, at_record)``: ``at_record`` is False when ``stop`` holds something other
        than a whole record the fast path can take (the CommitLog's own walk looks there)."""
        if scanner is not None:
            limit = min(end, start + SCAN_BYTES)
            found = scanner.scan(Run(view, f.start, start, limit, f.safe_length), left)
            if found is not None:
                stop, n = found
                if n:
                    run = Run(view, f.start, start, stop, f.safe_length)
                    for d in active:
                        if d is not scanner:
                            d.dispatch(run)
                return stop, n, stop >= limit
        soft_end = min(end, start + RUN_BYTES)
        stop, n = record.whole_run(view, start, end, f.start, soft_end, left)
        if n:
            run = Run(view, f.start, start, stop, f.safe_length)
            for d in active:
                d.dispatch(run)
        return stop, n, stop >= soft_end

    def _records(self, start: int) -> Iterator[tuple[int, memoryview]]:
        """The CommitLog's own walk from ``start``: settled records only when following; with the gap
        checks when rebuilding (its CommitLog is not being written)."""
        if self._on_gap is None:
            return self.commitlog.iter_records(start, self.commitlog.settled_end)
        walk = GapWalk(self.commitlog, self._on_gap)
        walk.gaps = self.gaps
        return walk.records(start)

    def _span(self, offset: int) -> tuple[MappedFile, int] | None:
        """The CommitLog file holding ``offset`` and where its settled records end (file-relative).

        Only ``[offset, end)`` is read: records before ``CommitLog.settled_end`` (whole, none still
        arriving) and within the file's safe length. None when ``offset`` is at or past that end:
        the CommitLog's own walk (``_records``) takes it from there.
        """
        limit = self.commitlog.settled_end
        f = self.commitlog.file_holding(offset)
        if f is None:
            return None
        end = min(f.end, limit, f.start + f.safe_length()) - f.start
        return (f, end) if offset - f.start < end and f.mm is not None else None


def run_to_end(commitlog: CommitLog, dispatcher: Dispatcher, *, around_gaps: bool) -> list[Gap]:
    """A one-shot rebuild's pass: ``dispatcher`` fed every whole record from its resume point to the
    CommitLog's end. A gap raises ``CommitLogGapError`` (``refuse``) unless ``around_gaps``: then the
    records on both sides are dispatched (``index_around``) and the gaps gone around are returned."""
    reput = Reput(commitlog, [dispatcher], on_gap=index_around if around_gaps else refuse)
    reput.run_once()
    return reput.gaps
