"""The index audit after each put: the file being written at once, every file each
``FULL_AUDIT_EVERY`` (so a put costs the same whatever the number of index files).

The audit only warns (an index file deleted, replaced or zeroed under the builder: its keys are
lost for queries). A writable store's put audits the last index file every time and all of them
when the last full audit is ``FULL_AUDIT_EVERY`` old; a read-only refresh audits every file.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from server.broker.writable_store import WritableStore
from store.config.store_config import StoreConfig
from store.index import service
from store.write.writer import StoreRecord


def _put(store: WritableStore, i: int) -> None:
    store.put([StoreRecord("T", b"body-%d" % i, f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i:031d}\x02")])


def _replaced(caplog: pytest.LogCaptureFixture, path: Path) -> int:
    return sum(f"index file {path} was replaced by another file" in r.getMessage() for r in caplog.records)


def test_the_file_being_written_is_audited_at_once_the_others_every_full_audit_every(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = StoreConfig.for_store(tmp_path / "s", max_hash_slot_num=16, max_index_num=40)
    with WritableStore(config) as store:
        store.create_topic("T", 1)
        for i in range(60):  # two keys a record, 40 entries a file
            _put(store, i)
        files = sorted(config.index_dir.iterdir())
        assert len(files) >= 3
        monkeypatch.setattr(service, "FULL_AUDIT_EVERY", 1e9)
        old, last = files[0], files[-1]
        for victim, source in ((old, files[1]), (last, files[1])):
            spare = victim.with_name("spare")
            shutil.copyfile(source, spare)
            os.replace(spare, victim)
        with caplog.at_level(logging.WARNING):
            _put(store, 100)
            assert _replaced(caplog, last) == 1, "the file being written: at once"
            assert _replaced(caplog, old) == 0, "an older file: not before the next full audit"
            monkeypatch.setattr(service, "FULL_AUDIT_EVERY", 0.0)
            _put(store, 101)
            assert _replaced(caplog, old) == 1
            _put(store, 102)
        assert _replaced(caplog, old) == _replaced(caplog, last) == 1  # each said once
