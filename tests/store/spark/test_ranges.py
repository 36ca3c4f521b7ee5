"""Range planning: cuts fall on record boundaries, and a damaged or gapped CommitLog is refused."""

from __future__ import annotations

import random
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from store.commitlog import record
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.spark import ranges
from store.spark.errors import CorruptRecordError, PipelineError
from store.spark.failures import describe_failure
from store.spark.ranges import (
    STOP_BLANK,
    STOP_INVALID,
    STOP_UNWRITTEN,
    list_files,
    plan_file,
    ranges_from_plans,
)
from store.spark.rebuild import check_plans, final_names
from store.spark.synthetic import write_commitlog
from store.write.writer import StoreRecord, StoreWriter
from tests.support.peak_rss import reset_peak, status_bytes

FILE_SIZE = 64 * 1024


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    write_commitlog(tmp_path / "commitlog", file_size=FILE_SIZE, messages=600)
    return tmp_path / "commitlog"


def test_ranges_cover_every_record_exactly_once(log_dir: Path) -> None:
    plans = [plan_file(f, 10_000) for f in list_files(log_dir)]
    assert all(p.stop == STOP_BLANK for p in plans[:-1])
    assert plans[-1].stop == STOP_UNWRITTEN
    assert check_plans(plans) == []
    ranges = ranges_from_plans(plans)
    log = CommitLog(log_dir, FILE_SIZE)
    offsets = [offset for offset, _ in log.iter_records()]
    assert ranges[0].start == offsets[0] and ranges[-1].end == log.max_offset
    starts = {r.start for r in ranges}
    assert starts <= set(offsets)  # every cut is a record boundary
    assert len(ranges) > len(plans)  # files were cut inside too
    covered = [o for o in offsets if any(r.start <= o < r.end for r in ranges)]
    assert covered == offsets
    assert [r.index for r in ranges] == list(range(len(ranges)))
    log.close()


def test_a_damaged_middle_file_is_refused_with_its_offset(log_dir: Path) -> None:
    second = list_files(log_dir)[1]
    with open(second.path, "r+b") as fh:
        fh.seek(4)
        fh.write(b"\x12\x34\x56\x78")
    plans = [plan_file(f) for f in list_files(log_dir)]
    assert plans[1].stop == STOP_INVALID
    with pytest.raises(CorruptRecordError) as info:
        check_plans(plans)
    assert info.value.offset == second.start
    assert "MAGICCODE 0x12345678" in str(info.value)


def test_a_torn_last_record_ends_the_log_with_a_warning(log_dir: Path) -> None:
    last = list_files(log_dir)[-1]
    log = CommitLog(log_dir, FILE_SIZE)
    end = log.max_offset
    log.close()
    with open(last.path, "r+b") as fh:  # a record header claiming more bytes than the file holds
        fh.seek(end - last.start)
        fh.write((FILE_SIZE * 2).to_bytes(4, "big") + (-626843481).to_bytes(4, "big", signed=True))
    plans = [plan_file(f) for f in list_files(log_dir)]
    warnings = check_plans(plans)
    assert plans[-1].end == end
    assert len(warnings) == 1 and str(end) in warnings[0]


def test_a_gap_between_files_is_refused(log_dir: Path) -> None:
    files = list_files(log_dir)
    Path(files[1].path).unlink()
    with pytest.raises(PipelineError, match="not contiguous"):
        check_plans([plan_file(f) for f in list_files(log_dir)])


def test_final_names_ascend_even_within_one_millisecond() -> None:
    from store.spark.index_writer import WrittenFile

    written = [WrittenFile(i, f"p{i}", 1, 1_795_216_834_250, 0, 0) for i in range(3)]
    names = final_names(written)
    assert names == sorted(set(names)) and len(names) == 3
    assert names[0].endswith("250") and names[1].endswith("251")


def test_failures_are_summarised_in_one_line() -> None:
    java = "py4j.protocol.Py4JJavaError: error\n: java.lang.OutOfMemoryError: Java heap space\n\tat x"
    assert describe_failure(RuntimeError(java)) == (
        "out of memory (java.lang.OutOfMemoryError: Java heap space): give the job more"
        " (--spark-conf spark.driver.memory=4g, --spark-conf spark.executor.memory=4g)"
        " or use smaller ranges (--range-mib)"
    )
    # A write task past spark.executor.pyspark.memory: the mapping is refused (ENOMEM), not a MemoryError.
    enomem = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling collect.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed\n"
        "Traceback (most recent call last):\n  File x\n"
        "store.errors.IndexFileError: cannot map index file /s/.out.tmp-1/part-0000000000:"
        " [Errno 12] Cannot allocate memory\n"
        "\tat org.apache.spark.api.python.BasePythonRunner"
    )
    described = describe_failure(RuntimeError(enomem))
    assert described.startswith(
        "out of memory (store.errors.IndexFileError: cannot map index file /s/.out.tmp-1/part-0000000000:"
    )
    assert "--spark-conf spark.executor.memory=4g" in described
    python = (
        "Traceback (most recent call last):\n  File x\n"
        "store.spark.errors.PipelineError: index file 3 overflowed after 10 keys\n"
        "\tat org.apache.spark.api.python.BasePythonRunner"
    )
    assert describe_failure(RuntimeError(python)) == (
        "store.spark.errors.PipelineError: index file 3 overflowed after 10 keys"
    )


def test_a_preallocated_empty_file_after_the_last_one_is_ignored(log_dir: Path) -> None:
    last = list_files(log_dir)[-1]
    # The broker allocates the next file before the current one is full.
    (log_dir / f"{last.start + FILE_SIZE:020d}").write_bytes(bytes(FILE_SIZE))
    plans = [plan_file(f, 10_000) for f in list_files(log_dir)]
    assert check_plans(plans) == []
    ranges = ranges_from_plans(plans)
    assert ranges[-1].path == last.path


def test_planning_a_file_keeps_about_one_range_resident(tmp_path: Path) -> None:
    """The hop over a file's records touches every page; issue 22 found ``export-keys`` holding a
    whole 1 GiB file's pages while it planned. Planning hands them back at every cut."""
    write_commitlog(tmp_path / "commitlog", file_size=48 << 20, total_bytes=47 << 20, body_size=(64, 256))
    (f,) = list_files(tmp_path / "commitlog")
    if not reset_peak():
        pytest.skip("no /proc/self/clear_refs to reset the peak resident set")
    before = status_bytes("VmRSS")
    plan = plan_file(f, 1 << 20)
    grown = status_bytes("VmHWM") - before
    assert len(plan.cuts) > 40
    assert grown < 16 << 20, grown  # 1 MiB ranges (and the kernel's read-around), not 47 MiB


def test_the_compiled_hop_plans_what_the_reference_plans(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``record.hop`` (the planner's step between cuts), compiled and reference, on damaged files: the
    same stop everywhere, so the same plans (cuts, end, reason) at every range size."""
    compiled = pytest.importorskip("store.commitlog._record_fast", reason="compiled accelerator not built")
    data = (log_dir / f"{0:020d}").read_bytes()
    rnd = random.Random(21)
    for trial in range(300):
        damaged = bytearray(data[: rnd.randrange(len(data) // 2, len(data) + 1)])
        for _ in range(rnd.randrange(0, 3)):
            at = rnd.randrange(len(damaged) - 4)
            lie = rnd.choice([0, 1, 90, 91, 0x7FFFFFFF, -1, rnd.randrange(2**31)])
            struct.pack_into(">i", damaged, at, lie)
        pos, soft_end = rnd.randrange(0, 400), rnd.choice([10**9, rnd.randrange(len(damaged) + 100)])
        assert compiled.hop(damaged, pos, soft_end) == record.hop_reference(damaged, pos, soft_end), trial
        spanned = compiled.hop_span(damaged, pos, soft_end)
        assert spanned == record.hop_span_reference(damaged, pos, soft_end), trial
        assert spanned[0] == compiled.hop(damaged, pos, soft_end), trial
    damaged_file = log_dir / f"{FILE_SIZE:020d}"
    raw = bytearray(damaged_file.read_bytes())
    struct.pack_into(">i", raw, 5000, 0x7FFF)  # a TOTALSIZE that lies, inside the file
    damaged_file.write_bytes(raw)
    for target in (1, 3000, 10_000, 1 << 30):
        plans = {}
        for name, impl, spanned in (
            ("compiled", compiled.hop, compiled.hop_span),
            ("reference", record.hop_reference, record.hop_span_reference),
        ):
            monkeypatch.setattr(ranges, "hop", impl)
            monkeypatch.setattr(ranges, "hop_span", spanned)
            plans[name] = [plan_file(f, target) for f in list_files(log_dir)]
            plans[name + " spans"] = [plan_file(f, target, spans=True) for f in list_files(log_dir)]
        assert plans["compiled"] == plans["reference"], target
        assert plans["compiled spans"] == plans["reference spans"], target
        # the spans change nothing else of a plan
        assert [replace(p, spans=()) for p in plans["compiled spans"]] == plans["compiled"], target


def test_plan_spans_are_each_ranges_smallest_and_largest_store_time(tmp_path: Path) -> None:
    """``plan_file(spans=True)``: per range, the smallest and largest STORETIMESTAMP of its records,
    compared with each record's own time read by a full walk (times going down as well as up)."""
    config = StoreConfig.for_store(tmp_path, mapped_file_size_commit_log=FILE_SIZE)
    rnd = random.Random(5)
    with StoreWriter(config) as writer:
        for _ in range(500):
            writer.put(StoreRecord("T", b"b" * rnd.randrange(10, 300)), store_timestamp=rnd.randrange(10**12))
    log = CommitLog(tmp_path / "commitlog", FILE_SIZE)
    times = {offset: record.store_timestamp(buf, 0) for offset, buf in log.iter_records()}
    log.close()
    for target in (1, 2000, 1 << 30):
        plans = [plan_file(f, target, spans=True) for f in list_files(tmp_path / "commitlog")]
        seen = 0
        for plan in plans:
            assert len(plan.spans) == len(plan.cuts)
            for start, end, span in zip(plan.cuts, [*plan.cuts[1:], plan.end], plan.spans, strict=True):
                inside = [ts for offset, ts in times.items() if start <= offset < end]
                seen += len(inside)
                assert span == ((min(inside), max(inside)) if inside else record.NO_SPAN), (target, start)
        assert seen == len(times)


def test_default_ranges_are_a_few_per_core_within_bounds() -> None:
    mib = 1 << 20
    assert ranges.range_bytes_for(1024 * mib, 2) == 256 * mib  # 2 per core: 4 ranges of 1 GiB
    assert ranges.range_bytes_for(1024 * mib, 8) == 64 * mib
    assert ranges.range_bytes_for(8192 * mib, 2) == 256 * mib  # no larger than 256 MiB
    assert ranges.range_bytes_for(10 * mib, 2) == 16 * mib  # no smaller than 16 MiB
    assert ranges.range_bytes_for(0, 0) == 16 * mib
