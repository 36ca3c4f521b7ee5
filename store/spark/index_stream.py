"""Write the index files on the driver while the decode job runs, each range as soon as it is decoded.

The write used to be a Spark job after the decode: one task per index file, so with one file (a
store under ~8 GiB of ~1 KiB records fills one) a serial ~0.2 s per GiB on one core after both cores
had finished decoding, plus a job to schedule. Here a thread of the driver takes the ranges' entry
files in CommitLog order as the decode tasks leave them (``decode.decode_range_to_file`` makes each
appear whole, by a rename) and puts them while later ranges still decode: the write overlaps the
decode and costs no Spark job.

What it writes is ``index_writer.write_index_file``'s, entry for entry: the broker's roll-over rule
on global entry numbers (``assign.cut``), a new file starting from the previous file's last entry,
and ``put_entries`` (compiled: the sequential builder's writer). The driver must reach the staging
directory, as it must to swap the output in. The write is speculative: the driver accepts it only
once the decode has proven the plan and the gap rule allows the index (``rebuild``); otherwise it
cancels the writer and the files are thrown away with the staging directory or written again.
"""

from __future__ import annotations

import threading
from pathlib import Path

from store.index.index_file import IndexFile
from store.index.index_range import put_entries
from store.spark.assign import cut
from store.spark.decode import entries_path
from store.spark.entries import ENTRY_SIZE, entry_at
from store.spark.errors import PipelineError
from store.spark.index_writer import WrittenFile, part_name

#: How often the writer looks for the next range's entry file while it is still being decoded.
POLL_SECONDS = 0.002


class IndexStreamWriter(threading.Thread):
    """Writes ``part_name(n)`` files into ``directory`` from ranges ``0 .. range_count - 1``'s entry
    files in ``entries_dir``, in that order, waiting for each to appear.

    After ``join``: ``written`` (in file order) when it got through every range, else ``error``
    (what stopped it) or ``cancelled``.
    """

    def __init__(
        self,
        directory: Path,
        entries_dir: Path,
        range_count: int,
        keys_per_file: int,
        hash_slot_num: int,
        index_num: int,
    ) -> None:
        super().__init__(name="index-stream-writer", daemon=True)
        self.directory = Path(directory)
        self.entries_dir = Path(entries_dir)
        self.range_count = range_count
        self.keys_per_file = keys_per_file
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.written: list[WrittenFile] = []
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        # The file being written: its number, IndexFile, keys put and first key's store time.
        self._file_no = -1
        self._file: IndexFile | None = None
        self._keys = 0
        self._first_ts = -1

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop waiting for entry files (the decode failed or its output is not to be used)."""
        self._cancel.set()

    def run(self) -> None:
        try:
            self._write_all()
        except BaseException as exc:  # reported to the driver's thread through ``error``
            self.error = exc
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _next_blob(self, index: int) -> bytes | None:
        """Range ``index``'s entries once its file is there; None when cancelled first."""
        path = entries_path(self.entries_dir, index)
        while not self._cancel.is_set():
            try:
                with open(path, "rb") as fh:
                    return fh.read()
            except FileNotFoundError:
                self._cancel.wait(POLL_SECONDS)
        return None

    def _write_all(self) -> None:
        first = 0  # global number of the next range's first entry
        last: tuple[int, int, int] = (0, 0, 0)  # the last entry put: a new file starts from it
        for index in range(self.range_count):
            blob = self._next_blob(index)
            if blob is None:
                return
            count = len(blob) // ENTRY_SIZE
            for file_no, kind, _, lo, hi in cut(count, first, self.keys_per_file):
                if kind != "entries":
                    continue  # a "prev" piece: the writer keeps the previous file's last entry itself
                if file_no != self._file_no:
                    self._finish()
                    self._open(file_no, last)
                piece = blob[lo * ENTRY_SIZE : hi * ENTRY_SIZE]
                if self._first_ts < 0:
                    self._first_ts = entry_at(piece, 0)[2]
                assert self._file is not None
                put = put_entries(self._file, piece)
                self._keys += put
                if put < hi - lo:
                    raise PipelineError(f"index file {file_no} overflowed after {self._keys} keys")
                last = entry_at(piece, hi - lo - 1)
            first += count
        self._finish()

    def _open(self, file_no: int, prev: tuple[int, int, int]) -> None:
        if file_no != len(self.written):
            raise PipelineError(f"index file {file_no} follows {len(self.written)} written files")
        _, prev_offset, prev_ts = prev
        path = self.directory / part_name(file_no)
        self._file = IndexFile.create(
            path, self.hash_slot_num, self.index_num, end_phy_offset=prev_offset, end_timestamp=prev_ts
        )
        self._file_no, self._keys, self._first_ts = file_no, 0, -1

    def _finish(self) -> None:
        index_file = self._file
        if index_file is None:
            return
        self._file = None
        try:
            index_file.flush()
            header = index_file.header
        finally:
            index_file.close()
        path = self.directory / part_name(self._file_no)
        self.written.append(
            WrittenFile(
                self._file_no,
                str(path),
                self._keys,
                self._first_ts,
                header.end_phy_offset,
                header.end_timestamp,
            )
        )
