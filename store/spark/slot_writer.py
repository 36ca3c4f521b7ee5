"""Write the index files with several tasks at once, each owning a range of hash slots.

Every entry's place is fixed before any is written: entries are numbered globally in CommitLog
order and file ``k`` holds entries ``[k * per_file, (k + 1) * per_file)`` (``assign``), and an
entry's ``prevIndex`` only links it to the previous entry of its own slot. So ``P`` writers that
own disjoint ranges of slots (``slot_ranges``) write disjoint bytes of the same files, the slot
cells of their slots and the entry cells of their keys, and need no merge:

1. the driver creates every file (``create_files``): full size, its begin/end header values those
   of the previous file's last entry (``IndexFile.create``, as the broker creates a successor),
   the blocks of the slots and of its entries reserved;
2. ``P`` tasks (``write_slot_range``) each stream every range's entry file in order and give each
   file's entries to ``index_range.put_entries`` with their slot range: the broker's ``putKey``
   for the keys they own, and for every other key only the header state advances (so the time
   differences, which depend on the file's begin timestamp, come out as the single writer's);
   each returns its header state per file;
3. the driver writes each header (``finish_files``): every task's state is the single writer's
   but for ``hashSlotCount``, which counts its own slots, so the header's is their sum.

No rule of ``putKey`` is written here: ``put_entries`` / ``IndexFile.put_hash`` (and its compiled
twin) are the only writers.

Where: the tasks write through shared maps of the files in the staging directory, so they must run
on the host that holds it (``local[N]``, or a standalone cluster's executors on that host: the
page cache is shared, and the driver's flush writes it out). On a filesystem shared between hosts
(NFS and the like) two hosts' writes to one page would overwrite each other's bytes, so a task on
another kernel than the driver's (``kernel_id``: the boot id, which containers of one host share
with it, as they share its page cache) writes nothing and says so, and the driver writes its slot
range itself (``write_slot_range`` again, on the driver's host).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path

from store.index.index_file import IndexFile
from store.index.index_range import put_entries
from store.spark.assign import cut, file_count, prefix_starts
from store.spark.decode import entries_path
from store.spark.entries import ENTRY_SIZE, entry_at
from store.spark.errors import PipelineError
from store.spark.index_writer import WrittenFile, part_name

#: A file's header state as ``IndexFile.writer_state`` gives it.
State = tuple[int, int, int, int, int, int]


def kernel_id() -> str:
    """The running kernel's boot id: processes that share it share the page cache."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        import socket

        return socket.gethostname()


def slot_ranges(hash_slot_num: int, parts: int) -> list[tuple[int, int]]:
    """``[p * S / P, (p + 1) * S / P)`` for ``p < P``: contiguous, disjoint, covering every slot
    (fewer parts than asked when there are fewer slots)."""
    parts = max(1, min(parts, hash_slot_num))
    return [(p * hash_slot_num // parts, (p + 1) * hash_slot_num // parts) for p in range(parts)]


def _entry(entries_dir: str | os.PathLike[str], counts: Sequence[int], number: int) -> tuple[int, int, int]:
    """Entry ``number`` (global) from its range's entry file."""
    for index, (first, count) in enumerate(zip(prefix_starts(list(counts)), counts, strict=True)):
        if first <= number < first + count:
            with open(entries_path(entries_dir, index), "rb") as fh:
                raw = os.pread(fh.fileno(), ENTRY_SIZE, (number - first) * ENTRY_SIZE)
            if len(raw) != ENTRY_SIZE:
                raise PipelineError(f"the entries of range {index} are cut short")
            return entry_at(raw, 0)
    raise PipelineError(f"entry {number} is not in any range")


def create_files(
    directory: Path,
    entries_dir: str | os.PathLike[str],
    counts: Sequence[int],
    keys_per_file: int,
    hash_slot_num: int,
    index_num: int,
) -> int:
    """Create ``part_name(k)`` for every file the ``counts`` entries fill; returns how many."""
    total = sum(counts)
    n_files = file_count(total, keys_per_file)
    for file_no in range(n_files):
        prev_offset = prev_ts = 0
        if file_no:
            _, prev_offset, prev_ts = _entry(entries_dir, counts, file_no * keys_per_file - 1)
        index_file = IndexFile.create(
            Path(directory) / part_name(file_no),
            hash_slot_num,
            index_num,
            end_phy_offset=prev_offset,
            end_timestamp=prev_ts,
        )
        try:
            index_file.write_header()
            keys = min(keys_per_file, total - file_no * keys_per_file)
            index_file.reserve(keys)  # before the tasks write: a refusal is an error, not SIGBUS
        finally:
            index_file.close()
    return n_files


def write_slot_range(
    directory: str,
    entries_dir: str,
    counts: Sequence[int],
    keys_per_file: int,
    hash_slot_num: int,
    index_num: int,
    slot_lo: int,
    slot_hi: int,
    kernel: str | None = None,
) -> list[State] | None:
    """A write task: put every entry whose slot is in ``[slot_lo, slot_hi)`` into the files
    ``create_files`` made; returns each file's header state after its last entry.

    With ``kernel`` (the driver's ``kernel_id``) and another kernel here: None, nothing written.
    """
    if kernel is not None and kernel != kernel_id():
        return None
    states: list[State] = []
    current: IndexFile | None = None
    current_no = -1
    try:
        for index, (first, count) in enumerate(zip(prefix_starts(list(counts)), counts, strict=True)):
            if not count:
                continue
            with open(entries_path(entries_dir, index), "rb") as fh:
                if os.fstat(fh.fileno()).st_size != count * ENTRY_SIZE:
                    raise PipelineError(f"the entries of range {index} are not {count} entries")
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as blob:
                    view = memoryview(blob)
                    try:
                        for file_no, kind, _, lo, hi in cut(count, first, keys_per_file):
                            if kind != "entries":
                                continue
                            if file_no != current_no:
                                if current is not None:
                                    states.append(current.writer_state())
                                    current.close(flush=False)
                                    current = None
                                if file_no != len(states):
                                    raise PipelineError(f"index file {file_no} follows {len(states)}")
                                current = IndexFile.open(
                                    Path(directory) / part_name(file_no),
                                    hash_slot_num,
                                    index_num,
                                    writable=True,
                                )
                                current_no = file_no
                            piece = view[lo * ENTRY_SIZE : hi * ENTRY_SIZE]
                            put = put_entries(current, piece, slot_lo, slot_hi)
                            piece.release()
                            if put < hi - lo:
                                raise PipelineError(f"index file {file_no} overflowed")
                    finally:
                        view.release()
        if current is not None:
            states.append(current.writer_state())
    finally:
        if current is not None:
            current.close(flush=False)  # the driver flushes each file once (``finish_files``)
    return states


def finish_files(
    directory: Path,
    entries_dir: str | os.PathLike[str],
    counts: Sequence[int],
    keys_per_file: int,
    hash_slot_num: int,
    index_num: int,
    states: Sequence[Sequence[State]],
) -> list[WrittenFile]:
    """Write each file's header from the tasks' ``states`` (one list per task), flush the files,
    and say what was written, as the single writer would."""
    n_files = file_count(sum(counts), keys_per_file)
    written: list[WrittenFile] = []
    for file_no in range(n_files):
        per_task = [task[file_no] for task in states if len(task) > file_no]
        if len(per_task) != len(states) or any(
            s[:4] + s[5:] != per_task[0][:4] + per_task[0][5:] for s in per_task
        ):
            raise PipelineError(f"the write tasks disagree on index file {file_no}'s header")
        begin_ts, end_ts, begin_phy, end_phy, _, index_count = per_task[0]
        slot_count = sum(s[4] for s in per_task)
        path = Path(directory) / part_name(file_no)
        index_file = IndexFile.open(path, hash_slot_num, index_num, writable=True)
        try:
            index_file.set_writer_state(begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count)
            index_file.write_header()
            index_file.flush()
        finally:
            index_file.close()
        _, _, first_ts = _entry(entries_dir, counts, file_no * keys_per_file)
        written.append(WrittenFile(file_no, str(path), index_count - 1, first_ts, end_phy, end_ts))
    return written
