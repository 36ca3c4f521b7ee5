"""What the reput hands a dispatcher, and what a dispatcher answers.

A dispatcher is fed runs of whole records (``Run``): every record in ``view[pos:end]`` was checked
by the reput (lengths, PHYSICALOFFSET, BODYCRC: ``store.commitlog.record.whole_run``), so a
dispatcher walks a run by TOTALSIZE alone, or hands it whole to a compiled loop (the index's
``index_range``). Runs never span CommitLog files and arrive in CommitLog order.

A dispatcher whose own compiled loop checks records as it reads them may also be a ``Scanner``: the
first one in the list is handed each stretch unchecked and says how far whole records go; the run it
found goes to the others. One check per record either way, and the index keeps its one fused pass.

One resume point: before each pass the reput asks every dispatcher where it may lack records
(``resume_offset``) and walks from the least; a dispatcher that already holds the start of a run
skips it itself (``skip_to``), as the broker's dispatchers de-duplicate a re-dispatched record.
Each dispatcher verifies and repairs its own files when it is opened, never the reput.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

_I32 = struct.Struct(">i")


class Run(NamedTuple):
    """Whole, checked records of one CommitLog file: ``view[pos:end]``, ``base`` the offset of
    ``view[0]`` (a file's first offset, or the record's own offset for a one-record view)."""

    view: memoryview
    base: int
    pos: int
    end: int
    #: The file's current safe length (``MappedFile.safe_length``), for a dispatcher that reads the
    #: run in a loop of its own and re-checks it; None for a view that is not a whole file's map.
    safe_length: Callable[[], int] | None = None


class Dispatcher(Protocol):
    """One consumer of the reput's records, in the order the reput was given them."""

    def begin(self) -> bool:
        """A pass is about to start: False sits it out (its files cannot take records now)."""
        ...

    def resume_offset(self) -> int:
        """The first CommitLog offset whose record this dispatcher may lack."""
        ...

    def dispatch(self, run: Run) -> None:
        """Take the records of ``run`` (those it already holds are skipped, ``skip_to``)."""
        ...

    def flush(self) -> None:
        """Make what it wrote durable: the reput caught up with the CommitLog (``run_forever``)."""
        ...


@runtime_checkable
class Scanner(Dispatcher, Protocol):
    """A dispatcher whose own loop checks every record as it takes it (the index's compiled
    ``index_range``): the reput lets it find a run instead of checking the run first."""

    def scan(self, run: Run, max_records: int) -> tuple[int, int] | None:
        """Take the records of ``run`` (NOT checked: ``run.end`` only bounds it), each checked as
        ``record.whole_run`` checks it, up to ``max_records``: ``(stop, records)`` with ``stop``
        where whole records stop (it may stop earlier, at a record it cannot take: the reput then
        walks that one itself). None: not for this run (the reput checks it and calls ``dispatch``)."""
        ...


def record_size(view: memoryview, pos: int) -> int:
    """TOTALSIZE of the (checked) record at ``pos``."""
    return _I32.unpack_from(view, pos)[0]


def skip_to(run: Run, offset: int) -> int:
    """Where in ``run.view`` the first record at or after CommitLog ``offset`` starts (``run.end``
    when the run holds none): a dispatcher's start in a run that begins before its resume point.

    Walks the run by TOTALSIZE, so a resume point inside a record moves on to the next one."""
    view, base, pos, end = run.view, run.base, run.pos, run.end
    target = offset - base
    if target >= end:
        return end
    unpack = _I32.unpack_from
    while pos < target:
        pos += unpack(view, pos)[0]
    return pos
