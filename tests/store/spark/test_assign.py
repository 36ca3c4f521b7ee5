"""The roll-over arithmetic: pieces of every range reassemble into the broker's file contents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from store.spark.assign import file_count, per_file, prefix_starts, spans_by_file, split_blob
from store.spark.entries import ENTRY_SIZE, entry_at, pack_entries


def _entries(n: int) -> list[tuple[int, int, int]]:
    return [(i * 7 % 1000, 1000 + i * 100, 5_000 + i) for i in range(n)]


def test_per_file_leaves_entry_zero_unused() -> None:
    assert per_file(2048) == 2047
    assert per_file(20_000_000) == 19_999_999


def test_file_count_rounds_up() -> None:
    assert file_count(0, 3) == 0
    assert file_count(3, 3) == 1
    assert file_count(4, 3) == 2


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=8),
    keys_per_file=st.integers(min_value=1, max_value=7),
)
def test_pieces_rebuild_each_file_and_its_previous_entry(counts: list[int], keys_per_file: int) -> None:
    everything = _entries(sum(counts))
    starts = prefix_starts(counts)
    files: dict[int, list[tuple[int, bytes]]] = {}
    prevs: dict[int, bytes] = {}
    for start, count in zip(starts, counts, strict=True):
        blob = pack_entries(everything[start : start + count])
        for piece in split_blob(blob, start, keys_per_file):
            if piece.kind == "prev":
                assert piece.file_no not in prevs
                prevs[piece.file_no] = piece.blob
            else:
                files.setdefault(piece.file_no, []).append((piece.first, piece.blob))
    assert sorted(files) == list(range(file_count(len(everything), keys_per_file)))
    for file_no, pieces in files.items():
        joined = b"".join(blob for _, blob in sorted(pieces))
        expected = everything[file_no * keys_per_file : (file_no + 1) * keys_per_file]
        assert joined == pack_entries(expected)
        if file_no == 0:
            assert file_no not in prevs
        else:
            assert len(prevs[file_no]) == ENTRY_SIZE
            assert entry_at(prevs[file_no], 0) == everything[file_no * keys_per_file - 1]


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=8),
    keys_per_file=st.integers(min_value=1, max_value=7),
)
def test_spans_name_the_same_pieces_as_the_blobs_cut(counts: list[int], keys_per_file: int) -> None:
    """The write stage reads by span what the blob cut gives: same files, kinds, numbers, entries."""
    everything = _entries(sum(counts))
    blobs = [
        pack_entries(everything[start : start + count])
        for start, count in zip(prefix_starts(counts), counts, strict=True)
    ]
    from_blobs = sorted(
        (piece.file_no, piece.first, piece.kind, piece.blob)
        for start, blob in zip(prefix_starts(counts), blobs, strict=True)
        for piece in split_blob(blob, start, keys_per_file)
    )
    from_spans = sorted(
        (
            span.file_no,
            span.first,
            span.kind,
            blobs[span.range_index][span.lo * ENTRY_SIZE : span.hi * ENTRY_SIZE],
        )
        for spans in spans_by_file(counts, keys_per_file).values()
        for span in spans
    )
    assert from_spans == from_blobs
