"""``benchmarks.dispatch_cost`` times what it says it times: the written path's dispatch and its parts.

The tool's figures decide whether the settle's dispatch is worth compiling (BENCHMARKS.md, h34), so
its wiring is checked: every settle takes ``Reput.dispatch_written``; a part is counted only inside
it (a child never exceeds its parent); the test kit's small index files roll and the broker's
default ones do not; and the store's functions are unwrapped again afterwards.
"""

from __future__ import annotations

import pytest

import store.consumequeue.builder as cq_module
import store.index.builder as ix_module
from benchmarks import dispatch_cost
from store.commitlog import mapped_files
from store.index.index_file import IndexFile
from store.reput.walk import Reput


def test_a_batch_in_the_kit_geometry_rolls_and_every_part_is_inside_the_dispatch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A settle more than ``FULL_CHECK_EVERY`` (50 ms) after the last full check of the CommitLog
    # walks instead of taking what was written: on a loaded machine (CI's pure pass) 8 of 140 did.
    # The clock is not what this test is about: only the walks its own shapes cause are counted.
    monkeypatch.setattr(mapped_files, "FULL_CHECK_EVERY", 3600.0)
    before = (cq_module.extract_entries, cq_module._write_all, ix_module.index_range, IndexFile.reserve)
    # 140 batches of 32 keyed messages after one (the first settle of a new store walks): 9,024 keys,
    # two rolls past the kit's 4,000 a file (one is enough, should a roll's settle have walked).
    out = dispatch_cost.measure(140, group=32, kit_geometry=True, warm=32)
    # A settle the CommitLog cannot take as written (``refresh_written`` says no) walks instead.
    assert out["written_path_share"] >= 0.95
    assert out["ix_rolls_per_settle"] > 0
    for part in ("cq_extract_entries_c_us", "cq_pwrite_us", "ix_index_range_c_us"):
        assert out[part] > 0, part
    assert out["cq_extract_entries_c_us"] + out["cq_pwrite_us"] <= out["cq_us"]
    assert out["ix_index_range_c_us"] + out["ix_roll_us"] <= out["ix_us"]
    assert out["cq_us"] + out["ix_us"] <= out["dispatch_written_us"]
    after = (cq_module.extract_entries, cq_module._write_all, ix_module.index_range, IndexFile.reserve)
    assert after == before
    assert Reput.dispatch_written.__qualname__ == "Reput.dispatch_written"


def test_the_default_geometry_does_not_roll_and_a_walk_is_not_counted() -> None:
    # No warm-up: the first settle of the new store walks (``run_once``), and that walk makes the
    # first index file (a roll) and runs ``index_range``: neither may count as the written path's.
    out = dispatch_cost.measure(20, group=1, queues=2, warm=0)
    # The first settle walks; another may too (``refresh_written`` says no when the first index file's
    # making took longer than the CommitLog's ``FULL_CHECK_EVERY``).
    assert 0.8 <= out["written_path_share"] < 1.0
    assert out["ix_rolls_per_settle"] == 0
    assert out["ix_index_range_c_us"] <= out["ix_us"]


def test_the_command_line_refuses_a_zero_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        dispatch_cost.main(["--settles", "0"])
    assert exc.value.code == 2
    assert "--settles" in capsys.readouterr().err
