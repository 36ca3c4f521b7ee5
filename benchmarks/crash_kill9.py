"""Crash stress for the index builder: many ``kill -9`` of ``rebuild-index --follow`` or ``serve``.

The test suite kills a few times (``tests/store/write/test_crash_safety.py``) and sweeps every write
point in-process; this script runs the real thing many more times, bounded by ``--kills``: a writer
thread keeps appending records (2-4 keys each) to a CommitLog with a small index geometry (files
roll often), a follower process is started and SIGKILLed at a seeded random moment, again and
again. It tallies what each kill left behind (a torn put, a record half indexed, a file being
created...), then restarts once more, catches up, and compares the index files byte for byte with
a clean build of the same CommitLog, and checks every key is found exactly once.

``--target serve`` kills ``rmq-query serve --build-index`` instead (on 127.0.0.1, ``--port``), whose
builder indexes in slices between requests on the event loop.

    python -m benchmarks.crash_kill9 --kills 100 --seed 1
    python -m benchmarks.crash_kill9 --target serve --kills 20 --min-delay 0.8 --max-delay 1.5
"""

from __future__ import annotations

import argparse
import collections
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from protocol.message import read_index_fields
from protocol.record_layout import PHYSICAL_OFFSET_AT, PHYSICAL_OFFSET_WIDTH
from store.commitlog.mapped_files import CommitLog
from store.config.store_config import StoreConfig
from store.index.builder import IndexBuilder, index_keys, rebuild_index
from store.index.index_file import IndexFile
from store.message_store import MessageStore
from store.write.writer import StoreWriter

REPO = Path(__file__).resolve().parents[1]
GEOMETRY = {"mapped_file_size_commit_log": 1 << 20, "max_hash_slot_num": 32, "max_index_num": 100}


def _state(config: StoreConfig, commitlog: CommitLog) -> str:
    """What a kill left in the newest index file."""
    paths = sorted(config.index_dir.iterdir()) if config.index_dir.exists() else []
    if not paths:
        return "no index file yet"
    if paths[-1].stat().st_size == 0:
        return "0-byte file (creation interrupted)"
    files = [IndexFile.open(p, config.max_hash_slot_num, config.max_index_num) for p in paths]
    try:
        last = files[-1]
        count = max(last.header.index_count, 1)
        if count < last.index_num and any(last.entry(count)):
            return "torn put past indexCount"
        nonempty = [f for f in files if f.header.index_count > 1]
        if not nonempty:
            return "empty file"
        phy = nonempty[-1].entry(nonempty[-1].header.index_count - 1)[1]
        done = sum(1 for f in nonempty for n in range(1, f.header.index_count) if f.entry(n)[1] == phy)
        commitlog.refresh()
        buf = commitlog.read_record(phy)
        keys = len(index_keys(read_index_fields(buf, 0))) if buf is not None else 0
        if done < keys:
            return "record half indexed"
        if count <= 1:
            return "fresh file after a roll"
        return "whole records"
    finally:
        for f in files:
            f.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=60, help="SIGKILLs to deliver (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--records", type=int, default=30000, help="the writer stops after this many")
    parser.add_argument("--min-delay", type=float, default=0.25, help="earliest kill after start, s")
    parser.add_argument("--max-delay", type=float, default=0.6, help="latest kill after start, s")
    parser.add_argument(
        "--target", choices=["follow", "serve"], default="follow", help="process to kill (default follow)"
    )
    parser.add_argument("--port", type=int, default=24911, help="serve's port on 127.0.0.1 (--target serve)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="crash-kill9-"))
    try:
        root = tmp / "live"
        config = StoreConfig.for_store(root, **GEOMETRY)
        root.mkdir()
        (root / "broker.conf").write_text(
            "mappedFileSizeCommitLog={mapped_file_size_commit_log}\nmaxHashSlotNum={max_hash_slot_num}\n"
            "maxIndexNum={max_index_num}\n".format(**GEOMETRY),
            encoding="utf-8",
        )
        writer = StoreWriter(
            StoreConfig.for_store(root, mapped_file_size_commit_log=1 << 20, message_index_enable=False)
        )
        stop = threading.Event()
        written: list[tuple[str, int]] = []

        def write() -> None:
            i = 0
            while not stop.is_set() and i < args.records:
                keys = " ".join(f"k{i}-{j}" for j in range(1 + i % 3))
                written.append((f"k{i}-0", writer.append("S", b"z" * (i % 300), keys=keys).offset))
                i += 1
                if i % 50 == 0:
                    time.sleep(0)  # a backlog builds up, so the follower is busy when killed

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        states: collections.Counter[str] = collections.Counter()
        probe = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
        started = time.monotonic()
        if args.target == "serve":
            command = [sys.executable, "-m", "clients.cli", "serve", "--build-index", "--refresh-interval"]
            command += ["0.002", "--port", str(args.port), "--config", str(root / "broker.conf")]
        else:
            command = [sys.executable, "-m", "clients.cli", "rebuild-index", "--follow", "--interval"]
            command += ["0.002"]
        for _ in range(args.kills):
            proc = subprocess.Popen(
                [*command, "--store", str(root)],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(args.min_delay, args.max_delay))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            states[_state(config, probe)] += 1
        stop.set()
        thread.join(10)
        writer.close()
        probe.close()
        elapsed = time.monotonic() - started
        print(f"{args.kills} kills in {elapsed:.1f} s while {len(written)} records were written", flush=True)
        builder = IndexBuilder(config)
        builder.run_once()
        builder.close()
        clean_root = tmp / "clean"
        clean_root.mkdir()
        shutil.copytree(config.store_path_commit_log, clean_root / "commitlog")
        clean = StoreConfig.for_store(clean_root, **GEOMETRY)
        rebuild_index(clean)
        ours = [p.read_bytes() for p in sorted(config.index_dir.iterdir())]
        theirs = [p.read_bytes() for p in sorted(clean.index_dir.iterdir())]
        missing = 0
        with MessageStore.open(config) as store:
            sample = written[:: max(1, len(written) // 2000)]  # each query walks every index file
            for key, offset in sample:
                hits = store.query_message("S", key, 64, 0, 2**63 - 1, exact_key=True).buffers
                at, width = PHYSICAL_OFFSET_AT, PHYSICAL_OFFSET_WIDTH
                missing += [int.from_bytes(b[at : at + width], "big") for b in hits] != [offset]
        for state, n in states.most_common():
            print(f"  {n:4d}  {state}")
        same = ours == theirs
        print(f"index files: {len(ours)}; byte-identical to a clean build: {same}")
        print(f"keys not found exactly once: {missing} of {len(sample)} sampled")
        return 0 if same and not missing else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
