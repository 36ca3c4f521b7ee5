"""Two saves of one config file at once leave one of them whole, and the later snapshot wins.

At a server's stop the periodic offset flush (on an executor thread) and the stop's own save wrote
``consumerOffset.json`` at the same time through one ``.tmp``: one logged ``cannot write ...
consumerOffset.json.tmp: No such file or directory``, and the rename could put a half-written file
in place. ``store.whole_file`` makes each replacement of a path exclusive; the tables' ``save``
holds its own lock from snapshot to rename, as the broker's ``synchronized persist``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import store.config.consumer_offsets as consumer_offsets_module
import store.config.subscription_groups as subscription_groups_module
from store.config.config_file import write_config_text
from store.config.consumer_offsets import ConsumerOffsetTable
from store.config.delay_offsets import read_delay_offsets, write_delay_offsets
from store.config.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupTable

ROUNDS = 300


def _race(writers: list[Callable[[], None]], rounds: int = ROUNDS) -> list[BaseException]:
    """Run each writer ``rounds`` times on a thread of its own, all started together; the errors."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(writers))

    def run(write: Callable[[], None]) -> None:
        start.wait()
        for _ in range(rounds):
            try:
                write()
            except BaseException as exc:  # every failure is the test's finding
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_two_threads_writing_one_config_file_always_leave_one_content_whole(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    # different lengths: two writes interleaved in one temporary file show as neither
    short = '{\n\t"offsetTable":{"a@G":{0:1}}\n}'
    long = '{\n\t"offsetTable":{' + ",".join(f'"t{i}@G":{{0:{i}}}' for i in range(300)) + "}\n}"
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        # what a kill -9 at any moment would leave: the file, whole, at every look
        while not stop.is_set():
            try:
                seen.add(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        errors = _race([lambda: write_config_text(path, short), lambda: write_config_text(path, long)])
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert errors == []
    assert path.read_text(encoding="utf-8") in (short, long)
    assert seen <= {short, long}
    assert path.with_name(path.name + ".bak").read_text(encoding="utf-8") in (short, long)
    assert sorted(p.name for p in path.parent.iterdir()) == ["consumerOffset.json", "consumerOffset.json.bak"]


def test_two_threads_writing_the_delay_offsets_leave_one_table_whole(tmp_path: Path) -> None:
    path = tmp_path / "config" / "delayOffset.json"
    one = {2: 1}
    other = {level: level * 1000 for level in range(1, 19)}
    errors = _race([lambda: write_delay_offsets(path, one), lambda: write_delay_offsets(path, other)])
    assert errors == []
    assert read_delay_offsets(path) in (one, other)


def _slow_first_write(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> threading.Event:
    """``module``'s first ``write_config_text`` sets the event returned, then waits 0.3 s before it
    writes (a later save arrives meanwhile); the others write at once."""
    real_write = module.write_config_text
    first_writing = threading.Event()
    calls = 0

    def slow_first_write(path: Path, text: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            first_writing.set()
            time.sleep(0.3)
        real_write(path, text)

    monkeypatch.setattr(module, "write_config_text", slow_first_write)
    return first_writing


def test_of_two_offset_saves_at_once_the_later_snapshot_stays_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic flush has taken its snapshot and is slow to write it when the stop's save
    comes with a newer offset: the file must end with the newer one (else a restart redelivers)."""
    table = ConsumerOffsetTable(tmp_path / "consumerOffset.json")
    table.commit("G", "T", 0, 5)
    first_writing = _slow_first_write(monkeypatch, consumer_offsets_module)
    periodic = threading.Thread(target=table.save)
    periodic.start()
    assert first_writing.wait(timeout=10)
    table.commit("G", "T", 0, 9)
    table.save()
    periodic.join(timeout=10)
    assert not periodic.is_alive()
    assert ConsumerOffsetTable.load(table.path).query("G", "T", 0) == 9
    assert not table.dirty


def test_of_two_group_saves_at_once_the_later_text_stays_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for the offsets: a save slow to write its text must not put it back over a later one."""
    table = SubscriptionGroupTable.load(tmp_path / "subscriptionGroup.json")
    first_writing = _slow_first_write(monkeypatch, subscription_groups_module)
    first = threading.Thread(target=table.put, args=(SubscriptionGroupConfig("G1"),))
    first.start()
    assert first_writing.wait(timeout=10)
    table.put(SubscriptionGroupConfig("G2"))
    first.join(timeout=10)
    assert not first.is_alive()
    again = SubscriptionGroupTable.load(table.path)
    assert again.get("G1") is not None and again.get("G2") is not None
