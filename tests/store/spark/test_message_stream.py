"""``spark.readStream.format("rocketmq")``: a store a writer appends to, streamed in micro-batches, the
query stopped and restarted from its checkpoint between appends, each cut landing mid-record.

The writer is simulated: the generated CommitLog (``store.spark.synthetic``) of 900 messages is
copied into the streamed store a prefix at a time (the generator is deterministic, so the prefix is
exactly what a writer would have appended by then), zeros after it as in the broker's preallocated
files. Every record must come out once: the rows equal the sequential walk of the whole log.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from store.config.store_config import StoreConfig
from store.spark.message_rows import COLUMN_NAMES
from store.spark.message_stream import ranges_between, whole_records_end
from store.spark.synthetic import write_commitlog
from tests.support.golden_tables import sequential_rows

FILE_SIZE = 64 * 1024


def _full_log(tmp_path: Path) -> tuple[Path, Path]:
    """The whole log (what the writer will have written) and the streamed store's root."""
    full = tmp_path / "full"
    write_commitlog(full / "commitlog", file_size=FILE_SIZE, messages=900)
    (full / "broker.conf").write_text(
        f"brokerName=broker-s\nstorePathRootDir=.\nmappedFileSizeCommitLog={FILE_SIZE}\n", encoding="utf-8"
    )
    live = tmp_path / "live"
    (live / "commitlog").mkdir(parents=True)
    (live / "broker.conf").write_text((full / "broker.conf").read_text(), encoding="utf-8")
    return full, live


def _append_up_to(full: Path, live: Path, upto: int) -> None:
    """Make ``live`` hold the first ``upto`` bytes of ``full``'s CommitLog, zeros after."""
    for src in sorted((full / "commitlog").iterdir()):
        start = int(src.name)
        if start > upto:
            break
        data = src.read_bytes()[: max(0, upto - start)]
        (live / "commitlog" / src.name).write_bytes(data + bytes(FILE_SIZE - len(data)))


def _cuts(full: Path) -> list[int]:
    """Three cut points inside records (not on a boundary): mid-file, and in a later file."""
    rows = sequential_rows(full / "broker.conf", "broker-s")
    at, size = COLUMN_NAMES.index("commitLogOffset"), COLUMN_NAMES.index("storeSize")
    picks = [rows[150], rows[420], rows[777]]
    return [r[at] + r[size] // 2 for r in picks]


def test_whole_records_end_stops_before_a_torn_record(tmp_path: Path) -> None:
    full, live = _full_log(tmp_path)
    rows = sequential_rows(full / "broker.conf", "broker-s")
    at = COLUMN_NAMES.index("commitLogOffset")
    cut = _cuts(full)[0]
    _append_up_to(full, live, cut)
    config = StoreConfig.load(live / "broker.conf")
    end = whole_records_end(config, 0)
    assert end == rows[150][at]  # the record cut in half is not there yet
    ranges = ranges_between(config, 0, end, 16 * 1024)
    assert ranges[0].start == 0 and ranges[-1].end == end
    assert all(a.end <= b.start for a, b in itertools.pairwise(ranges))
    _append_up_to(full, live, 10**9)
    assert whole_records_end(config, end) > end


def test_stream_restarts_from_its_checkpoint_without_loss_or_duplicates(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from store.spark.message_source import register

    register(spark)
    full, live = _full_log(tmp_path)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    for cut in [*_cuts(full), 10**9]:
        _append_up_to(full, live, cut)
        query = (
            spark.readStream.format("rocketmq")
            .option("rangeMiB", "1")
            .load(str(live))
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
    got = spark.read.parquet(str(out)).collect()
    at = COLUMN_NAMES.index("commitLogOffset")
    want = sequential_rows(full / "broker.conf", "broker-s")
    assert len(got) == len(want) == 900
    rows = sorted(
        (tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in got), key=lambda r: r[at]
    )
    assert rows == want


@pytest.mark.parametrize("bad", ["sometimes"])
def test_starting_offsets_option_is_checked(bad: str) -> None:
    from store.spark.message_source import RocketMQStreamReader

    with pytest.raises(ValueError, match="startingOffsets"):
        RocketMQStreamReader({"path": "/nowhere", "startingoffsets": bad}, None)  # type: ignore[arg-type]
