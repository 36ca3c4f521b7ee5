"""What the store commands cost as the store grows: each figure at two sizes, with the growth ratio.

Issue 22 asks for costs flat in store size where they should be (``serve``'s start-up, its resident
memory while serving, one lookup, the memory of ``fsck`` and ``export-keys``) and linear where a
command must walk the store (``rebuild-index``, ``fsck``, ``export-keys``). This generates one store
of the largest ``--sizes`` (GiB of CommitLog, 1 GiB files, ``--body``-byte bodies, three index keys a
message: UNIQ_KEY, ``order-N``, ``user-N%1000``; 8 queues; the broker's default index geometry) with
``StoreWriter``, and makes each smaller size a store of hard links to its first CommitLog files (no
second copy on disk). Then, for each size, in fresh processes (``python -m clients.cli ...``):

- ``rebuild-index``: the index and the consume queues from the CommitLog (wall, CPU, peak RSS);
- ``serve``: spawn to its ``NAMESRV_ADDR=`` line; ``--lookups`` key queries (``order-N``, random N)
  and as many VIEW_MESSAGE_BY_ID (of the offsets the queries returned), one at a time: p50 and p99
  latency; then the server's VmRSS / RssAnon / RssFile from ``/proc``;
- ``fsck`` and ``fsck --deep`` (``--skip`` leaves either out): wall, CPU, peak RSS (``wait4``'s
  ``ru_maxrss``: the highest resident set, mapped file pages included);
- ``export-keys`` (local engine, pyarrow): wall, CPU, peak RSS.

    python -m benchmarks.store_scale --dir /work/bigstore --sizes 4 16 --generate-only
    flock /work/bench.lock python -m benchmarks.store_scale --dir /work/bigstore --sizes 4 16

The store is kept between runs (``--generate-only``, then a measuring run) and deleted with
``--clean``. Run the measuring part under the benchmark lock: its figures are times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

REPO = Path(__file__).resolve().parents[1]
TOPIC = "BenchTopic"
GIB = 1 << 30


def generate(root: Path, size_gib: int, body_size: int) -> int:
    """Write ``size_gib`` full 1 GiB CommitLog files (no index, no queues: ``rebuild-index`` makes them)."""
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    n = 0
    limit = size_gib * config.mapped_file_size_commit_log
    with StoreWriter(config, index=False) as writer:
        # Stop at the first record of the file after the last one wanted: every wanted file is full.
        while writer.position < limit:
            writer.append(TOPIC, body, keys=f"order-{n} user-{n % 1000}", queue_id=n % 8)
            n += 1
    files = sorted((root / "commitlog").iterdir())
    for extra in files[size_gib:]:
        extra.unlink()  # the one record past the limit: a fresh file holding it
    (root / "scale.json").write_text(json.dumps({"size_gib": size_gib, "body": body_size}))
    return n


def link_store(big: Path, root: Path, size_gib: int) -> None:
    """A store of the first ``size_gib`` CommitLog files of ``big``, as hard links."""
    if root.exists():
        shutil.rmtree(root)
    (root / "commitlog").mkdir(parents=True)
    for f in sorted((big / "commitlog").iterdir())[:size_gib]:
        os.link(f, root / "commitlog" / f.name)
    if (big / "config").is_dir():
        shutil.copytree(big / "config", root / "config")
    shutil.copy(big / "checkpoint", root / "checkpoint")


def run_timed(args: list[str]) -> dict[str, float]:
    """Run ``python -m clients.cli ARGS`` to its end: wall s, CPU s and peak RSS MiB of that process.

    The peak comes from ``/usr/bin/time``, which forks the command itself: a process forked from
    this driver would report this driver's peak if it were higher (Linux carries ``ru_maxrss``
    across ``fork`` and ``exec``; the driver maps a CommitLog file to count records).
    """
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        started = time.perf_counter()
        proc = subprocess.run(
            [
                "/usr/bin/time",
                "-o",
                timing.name,
                "-f",
                "%e %U %S %M",
                sys.executable,
                "-m",
                "clients.cli",
                *args,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        wall = time.perf_counter() - started
        fields = timing.read().split()[-4:]
    _elapsed, user, system, max_kib = fields
    tail = proc.stdout.decode(errors="replace").strip().splitlines()[-3:]
    return {
        "wall_s": wall,
        "cpu_s": float(user) + float(system),
        "peak_rss_mib": int(max_kib) / 1024,
        "exit": proc.returncode,
        "tail": " | ".join(tail),  # type: ignore[dict-item]
    }


def proc_memory(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[name] = int(value.split()[0]) / 1024
    return out


async def lookups(addr: str, records: int, count: int) -> dict[str, float]:
    from clients.admin import QueryAdmin

    rng = random.Random(22)
    key_ms: list[float] = []
    view_ms: list[float] = []
    offsets: list[int] = []
    async with QueryAdmin(addr) as admin:
        await admin.query_by_key(TOPIC, "order-0")  # the route, the connection
        for _ in range(count):
            n = rng.randrange(records)
            t0 = time.perf_counter()
            result = await admin.query_by_key(TOPIC, f"order-{n}")
            key_ms.append((time.perf_counter() - t0) * 1000)
            offsets.append(result.messages[0].commit_log_offset)
        for offset in offsets:
            t0 = time.perf_counter()
            await admin.view_at(addr, offset, TOPIC)
            view_ms.append((time.perf_counter() - t0) * 1000)
    key_ms.sort()
    view_ms.sort()
    return {
        "key_p50_ms": statistics.median(key_ms),
        "key_p99_ms": key_ms[int(len(key_ms) * 0.99)],
        "view_p50_ms": statistics.median(view_ms),
        "view_p99_ms": view_ms[int(len(view_ms) * 0.99)],
    }


def serve_figures(root: Path, records: int, count: int) -> dict[str, float]:
    """``serve`` (read-only) from spawn to its start-up line (``serving on ... advertised as ADDR``
    on stderr), then the lookups, then its memory."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--store", str(root), "--port", "0", "--http", "off"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        addr = None
        for line in proc.stderr:
            found = re.search(r"serving on .* advertised as (\S+) ", line)
            if found is not None:
                addr = found.group(1)
                break
        if addr is None:
            raise RuntimeError("serve ended before its start-up line")
        # Keep reading its log, so a full pipe never stalls it.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        startup = time.perf_counter() - started
        opened = proc_memory(proc.pid)
        figures = {"startup_s": startup, "rss_after_open_mib": opened["VmRSS"]}
        figures.update(asyncio.run(lookups(addr, records, count)))
        served = proc_memory(proc.pid)
        figures.update(
            {
                "rss_served_mib": served["VmRSS"],
                "rss_anon_mib": served["RssAnon"],
                "rss_file_mib": served["RssFile"],
                "hwm_mib": served["VmHWM"],
            }
        )
        return figures
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def measure(root: Path, records: int, args: argparse.Namespace, out_dir: Path) -> dict[str, dict[str, float]]:
    store = ["--store", str(root)]
    figures: dict[str, dict[str, float]] = {}
    if "rebuild" in args.skip:
        records = int(records * 0.99)  # the estimate is a little high: every key asked exists
    else:
        for sub in ("index", "consumequeue"):
            shutil.rmtree(root / sub, ignore_errors=True)
        subprocess.run(["sync"], check=False)
        figures["rebuild-index"] = run_timed(["rebuild-index", *store])
        print(f"  rebuild-index: {figures['rebuild-index']}", flush=True)
        # The generator's keys are order-0 .. order-(N-1) in CommitLog order: N is what was indexed.
        indexed = re.search(r"keys of (\d+) records", str(figures["rebuild-index"]["tail"]))
        if indexed is not None:
            records = int(indexed.group(1))
    if "serve" not in args.skip:
        figures["serve"] = serve_figures(root, records, args.lookups)
        print(f"  serve: {figures['serve']}", flush=True)
    if "fsck" not in args.skip:
        figures["fsck"] = run_timed(["fsck", *store])
        print(f"  fsck: {figures['fsck']}", flush=True)
    if "deep" not in args.skip:
        figures["fsck --deep"] = run_timed(["fsck", "--deep", *store])
        print(f"  fsck --deep: {figures['fsck --deep']}", flush=True)
    if "export" not in args.skip:
        out = out_dir / f"keys-{root.name}.parquet"
        figures["export-keys"] = run_timed(["export-keys", *store, "--out", str(out)])
        shutil.rmtree(out, ignore_errors=True)
        print(f"  export-keys: {figures['export-keys']}", flush=True)
    return figures


def count_records(root: Path) -> int:
    """About the records in the store (its first file's, times the files): printed before the
    rebuild, whose count the lookups use."""
    config = StoreConfig.for_store(root)
    from store.commitlog.mapped_files import CommitLog

    commitlog = CommitLog(config.store_path_commit_log, config.mapped_file_size_commit_log)
    try:
        n = 0
        offset = commitlog.min_offset
        size = config.mapped_file_size_commit_log
        # Every record of this generator has the same size: count one file's, times the files.
        for _offset, _buf in commitlog.iter_records(offset, offset + size):
            n += 1
        return n * len(commitlog.files)
    finally:
        commitlog.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/work/bigstore"))
    parser.add_argument("--sizes", type=int, nargs=2, default=[4, 16], metavar="GIB")
    parser.add_argument("--body", type=int, default=600, help="body bytes (600: ~770-byte records)")
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["rebuild", "serve", "fsck", "deep", "export"],
        help="figures to leave out",
    )
    parser.add_argument(
        "--only",
        type=int,
        metavar="GIB",
        help="measure this one of --sizes (the other's figures are read "
        "from --dir/store_scale.json, where each run merges its own)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--generate-only", action="store_true")
    mode.add_argument("--clean", action="store_true", help="delete the stores under --dir")
    args = parser.parse_args()
    small, big = sorted(args.sizes)
    big_root = args.dir / f"store-{big}g"
    if args.clean:
        for sub in args.dir.glob("store-*g"):
            shutil.rmtree(sub)
        return
    meta = big_root / "scale.json"
    if not meta.exists() or json.loads(meta.read_text())["size_gib"] != big:
        shutil.rmtree(big_root, ignore_errors=True)
        t0 = time.perf_counter()
        n = generate(big_root, big, args.body)
        print(f"generated {n} records, {big} GiB in {time.perf_counter() - t0:.0f} s", flush=True)
    small_root = args.dir / f"store-{small}g"
    if not (small_root / "commitlog").is_dir() or len(list((small_root / "commitlog").iterdir())) != small:
        link_store(big_root, small_root, small)
    if args.generate_only:
        return
    print(
        f"python {sys.version.split()[0]}, pure={os.environ.get('RMQ_PURE_PYTHON', '0')}, "
        f"load average {os.getloadavg()[0]:.2f} at the start",
        flush=True,
    )
    saved = args.dir / "store_scale.json"
    results = {int(k): v for k, v in json.loads(saved.read_text()).items()} if saved.exists() else {}
    for size, root in ((small, small_root), (big, big_root)):
        if args.only is not None and size != args.only:
            continue
        records = count_records(root)
        print(f"{size} GiB: {records} records", flush=True)
        results.setdefault(size, {}).update(measure(root, records, args, args.dir))
        saved.write_text(json.dumps(results, indent=1))
    if small not in results or big not in results:
        return
    print(f"\n| figure | {small} GiB | {big} GiB | growth ({big / small:.0f}x the data) |")
    print("|---|---:|---:|---:|")
    for command, figs in results[small].items():
        for name, value in figs.items():
            if not isinstance(value, float | int) or name == "exit" or command not in results[big]:
                continue
            other = results[big][command][name]
            ratio = other / value if value else float("nan")
            print(f"| {command} {name} | {value:,.2f} | {other:,.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
