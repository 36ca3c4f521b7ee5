"""Side by side with the real Java 4.9.7 broker: throughput, latency and isolation, as ratios.

    python -m benchmarks.vs_java [--rounds 3] [--seconds 3] [--ports 31300]

Both servers run on the same single core (``taskset -c 1``), the C load generator ``rmqblast``
(``../shared/tools/rmqblast.c``, built into a temporary directory) on the other (``taskset -c 0``),
and every measurement alternates Java and this server (A B A B, the order flipped every round). Rows:

* VIEW_MESSAGE_BY_ID and QUERY_MESSAGE (maxNum 64) at 16 connections x 8 in flight, requests/s, over
  a copy of ``../shared/stores/java-4.9.7-a``: random offsets of its 5000 records, random
  (topic, key) pairs from their KEYS and UNIQ_KEY (what ``rmq-query bench`` samples);
* the same at 1 connection x 1 in flight, p50 latency;
* isolation: a store where key ``hot`` is written ``--hot`` times (written once with the project's
  ``StoreWriter``, default 5M/20M index geometry) serves 16 x 8 VIEWs while 2 more connections send
  QUERY_MESSAGE for ``hot`` with a time range holding only its first write, so every such query walks
  the whole chain: VIEW p99 and VIEW/s, and the chain-walking queries' rate. Those queries are the
  walked-segment cache's case (every entry but the first is newer than the range), so the same rows
  are measured again with queries the cache cannot shorten: a key of the topic whose index hash
  falls in ``hot``'s slot (``colliding_key``) over a range holding every entry, which walks the
  whole chain and takes nothing, in both servers;
* narrow time ranges on a hot key (``narrow``): a store of ``--narrow-records`` messages (default
  2,000,000, default 5M/20M index geometry, 1 ms apart) where every ``--narrow-every``-th (200) also
  carries key ``hot``, so its chain holds 10,000 entries spread over the whole index file, and
  QUERY_MESSAGE for ``hot`` over 1-second ranges at 10, 30, 50, 70 and 90% of the store's span
  (maxNum 64; each answers 5 records after walking 9,000 .. 1,000 newer entries): p50 and p99 at
  1 x 1, requests/s at 16 x 8, and answers per server CPU-second. ``--ours-from DIR`` runs this
  server from another checkout (built there) for a before/after in the same harness;
* ``--workers 2`` on both cores against one worker on one core (this server only; the load generator
  then shares the cores with the servers, so the rows also give the generator's CPU and the answers
  per core left to the server: ``2 - generator`` cores for two workers, core 1 for one;
  ``--workers-depth`` sets their pipeline depth).

Java needs ``/tmp/rmqjava`` (``../shared/java-harness``); the JVM is warmed up with a few seconds of
each load before anything is measured. Per row: the median over rounds of each server's figure and
the median of the per-round ratios. The machine is shared with other work: expect noise, and read
the ratios rather than the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from clients.samples import sample_store
from protocol.index_key import build_index_key, index_key_hash, java_string_hash
from store.config.store_config import StoreConfig
from store.write.writer import StoreWriter

REPO = Path(__file__).resolve().parents[1]
#: ``rmqblast.c`` (the load tool) is in the shared folder beside the checkout; the golden store in the repo.
SHARED = Path(os.environ.get("RMQ_SHARED", REPO.parent / "shared")).resolve()
GOLDEN_STORES = REPO / "tests" / "golden" / "stores"
JAVA_BIN = Path("/tmp/rmqjava/bin")
GOLDEN = "java-4.9.7-a"
HOT_TOPIC = "HotTopic"
T0 = 1_700_000_000_000
SERVER_CORE = "1"
LOAD_CORE = "0"


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def build_rmqblast(workdir: Path) -> Path:
    out = workdir / "rmqblast"
    subprocess.run(
        ["gcc", "-O2", "-o", str(out), str(SHARED / "tools" / "rmqblast.c"), "-lm", "-lpthread"], check=True
    )
    return out


def wait_port(port: int, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def start_java(store: Path, port: int, log: Path) -> Server:
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                "taskset",
                "-c",
                SERVER_CORE,
                str(JAVA_BIN / "start-broker.sh"),
                str(store),
                str(port),
                "127.0.0.1:1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 120
    while b"boot success" not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Java broker did not start: see {log}")
        time.sleep(0.5)
    return Server("java", port, process)


def start_ours(
    store: Path,
    config: Path | None,
    port: int,
    log: Path,
    *,
    workers: int = 1,
    cores: str = SERVER_CORE,
    checkout: Path = REPO,
) -> Server:
    cmd = ["taskset", "-c", cores, sys.executable, "-m", "clients.cli", "serve", "--store", str(store)]
    if config is not None:
        cmd += ["--config", str(config)]
    cmd += ["--port", str(port), "--log-level", "WARNING", "--workers", str(workers)]
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=checkout)
    wait_port(port, 60, process)
    time.sleep(1.0 if workers == 1 else 4.0)  # workers bind after the first process
    return Server("ours", port, process)


def blast(
    rmqblast: Path,
    port: int,
    kind: str,
    files: dict[str, Path],
    conns: int,
    depth: int,
    seconds: float,
    cores: str = LOAD_CORE,
    warmup: float = 0.5,
) -> dict:
    cmd = [
        "taskset",
        "-c",
        cores,
        str(rmqblast),
        f"127.0.0.1:{port}",
        "--kind",
        kind,
        "--conns",
        str(conns),
        "--depth",
        str(depth),
        "--seconds",
        str(seconds),
        "--warmup",
        str(warmup),
        "--maxnum",
        "64",
    ]
    if "offsets" in files:
        cmd += ["--offsets", str(files["offsets"])]
    if "keys" in files:
        cmd += ["--keys", str(files["keys"])]
    out = subprocess.run(cmd, check=True, capture_output=True, timeout=seconds + warmup + 30).stdout
    return json.loads(out)


def blast_pair(
    rmqblast: Path, port: int, view_files: dict[str, Path], hot_files: dict[str, Path], seconds: float
) -> tuple[dict, dict]:
    """16 x 8 VIEWs and, at the same time, 2 x 1 chain-walking queries (two generator processes)."""
    common = ["--seconds", str(seconds), "--warmup", "0.5", "--maxnum", "64"]
    view = subprocess.Popen(
        [
            "taskset",
            "-c",
            LOAD_CORE,
            str(rmqblast),
            f"127.0.0.1:{port}",
            "--kind",
            "view",
            "--offsets",
            str(view_files["offsets"]),
            "--conns",
            "16",
            "--depth",
            "8",
            *common,
        ],
        stdout=subprocess.PIPE,
    )
    hot = subprocess.Popen(
        [
            "taskset",
            "-c",
            LOAD_CORE,
            str(rmqblast),
            f"127.0.0.1:{port}",
            "--kind",
            "key",
            "--keys",
            str(hot_files["keys"]),
            "--conns",
            "2",
            "--depth",
            "1",
            *common,
        ],
        stdout=subprocess.PIPE,
    )
    view_out, _ = view.communicate(timeout=seconds + 40)
    hot_out, _ = hot.communicate(timeout=seconds + 40)
    return json.loads(view_out), json.loads(hot_out)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` and its live descendants (the workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    total, wanted = 0.0, {pid}
    grew = True
    while grew:
        grew = False
        for child, (parent, _) in stats.items():
            if parent in wanted and child not in wanted:
                wanted.add(child)
                grew = True
    for p in wanted:
        total += stats.get(p, (0, 0.0))[1]
    return total


def golden_copy(dest: Path) -> tuple[Path, Path]:
    """A copy of the golden store with its broker.conf beside it (where the Java launcher reads it)."""
    store = dest / "store"
    shutil.copytree(GOLDEN_STORES / GOLDEN, store, symlinks=True)
    conf = (GOLDEN_STORES / f"{GOLDEN}.broker.conf").read_text(encoding="utf-8").splitlines()
    lines = [ln for ln in conf if not ln.startswith(("storePathRootDir", "storePathCommitLog"))]
    lines += [f"storePathRootDir={store}", f"storePathCommitLog={store / 'commitlog'}"]
    (dest / "broker.conf").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return store, dest / "broker.conf"


def write_hot_store(root: Path, hot: int) -> tuple[int, list[int]]:
    """Key ``hot`` written ``hot`` times (the first at T0, the rest from T0 + 5 s): returns T0 and offsets."""
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
    now = [T0]

    def clock() -> int:
        value = now[0]
        now[0] += 5_000 if value == T0 else 1
        return value

    offsets: list[int] = []
    with StoreWriter(config, clock=clock) as w:
        for n in range(hot):
            appended = w.append(HOT_TOPIC, b"hot message %d" % n, keys=f"hot k-{n}", queue_id=n % 4)
            if n % 50 == 0:
                offsets.append(appended.offset)
    return T0, offsets


def colliding_key(topic: str, key: str, slots: int) -> str:
    """A key of ``topic`` whose index hash differs from ``key``'s but falls in the same hash slot
    (``miss-<n>``, the first such ``n``): a query for it walks ``key``'s whole chain and takes none
    of it. Searched with the hash of the common prefix extended digit by digit (~5M tries at the
    default 5M slots, a few seconds)."""
    target_hash = index_key_hash(build_index_key(topic, key))
    target = target_hash % slots
    prefix = "miss-"
    base = java_string_hash(build_index_key(topic, prefix)) & 0xFFFFFFFF
    n = 0
    while True:
        h = base
        for digit in str(n).encode():
            h = (31 * h + digit) & 0xFFFFFFFF
        signed = h - (1 << 32) if h & 0x80000000 else h
        key_hash = 0 if signed == -(1 << 31) else abs(signed)
        if key_hash % slots == target and key_hash != target_hash:
            found = f"{prefix}{n}"
            assert index_key_hash(build_index_key(topic, found)) % slots == target
            return found
        n += 1


def write_narrow_store(root: Path, records: int, every: int) -> list[tuple[int, int]]:
    """``records`` messages 1 ms apart from T0, every ``every``-th also keyed ``hot``: returns the
    1-second ranges the narrow queries ask (at 10, 30, 50, 70 and 90% of the span)."""
    config = StoreConfig.for_store(root, broker_ip1="127.0.0.1")
    now = [T0]

    def clock() -> int:
        value = now[0]
        now[0] += 1
        return value

    with StoreWriter(config, clock=clock) as w:
        for n in range(records):
            keys = f"hot k-{n}" if n % every == 0 else f"k-{n}"
            w.append(HOT_TOPIC, b"narrow message %d" % n, keys=keys, queue_id=n % 4)
    return [(T0 + records * pct // 100, T0 + records * pct // 100 + 999) for pct in (10, 30, 50, 70, 90)]


def ratio_row(
    label: str, unit: str, java: list[float], ours: list[float], *, lower_is_better: bool = False
) -> str:
    ratios = [
        (j / o if lower_is_better else o / j) if (j and o) else 0.0 for j, o in zip(java, ours, strict=True)
    ]
    j, o, r = statistics.median(java), statistics.median(ours), statistics.median(ratios)
    rs = " ".join(f"{x:.2f}" for x in ratios)
    fmt = {"ms": ",.3f", "cores": ".2f"}.get(unit, ",.0f")
    return f"| {label} | {o:{fmt}} {unit} | {j:{fmt}} {unit} | {r:.2f}x ({rs}) |"


def narrow_rows(args: argparse.Namespace, rmqblast: Path, work: Path, p: int) -> list[str]:
    """The narrow time-range rows (see the module docstring): Java and this server alternating."""
    root = args.narrow_store or work / "narrow-src"
    marker = root / "bench.json"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.monotonic()
        ranges = write_narrow_store(root / "store", args.narrow_records, args.narrow_every)
        marker.write_text(
            json.dumps({"ranges": ranges, "records": args.narrow_records, "every": args.narrow_every})
        )
        print(
            f"narrow store: {args.narrow_records} messages in {time.monotonic() - started:.0f} s", flush=True
        )
    meta = json.loads(marker.read_text())
    files = {"keys": work / "narrow-keys"}
    files["keys"].write_text("".join(f"{HOT_TOPIC}\thot\t{b}\t{e}\n" for b, e in meta["ranges"]))
    for side in ("nj", "no"):
        shutil.rmtree(work / side, ignore_errors=True)
        (work / side).mkdir()
        subprocess.run(
            ["cp", "-a", "--sparse=always", str(root / "store"), str(work / side / "store")], check=True
        )
    servers: list[Server] = []
    try:
        java = start_java(work / "nj" / "store", p + 3, work / "java-narrow.log")
        servers.append(java)
        ours = start_ours(
            work / "no" / "store", None, p + 11, work / "ours-narrow.log", checkout=args.ours_from
        )
        servers.append(ours)
        for s in (java, ours):  # warm-up: the JIT, and both servers' page tables over the index
            blast(rmqblast, s.port, "key", files, 16, 8, 4)
            blast(rmqblast, s.port, "key", files, 1, 1, 2)
        results: dict[tuple[str, str], list[dict]] = {}
        for rnd in range(args.rounds):
            for c, d in ((1, 1), (16, 8)):
                order = (java, ours) if rnd % 2 == 0 else (ours, java)
                for s in order:
                    cpu0 = tree_cpu_seconds(s.process.pid)
                    r = blast(rmqblast, s.port, "key", files, c, d, args.seconds)
                    cpu = tree_cpu_seconds(s.process.pid) - cpu0
                    r["per_cpu"] = r["received"] / cpu if cpu > 0 else 0.0
                    results.setdefault((s.name, f"{c}x{d}"), []).append(r)
                    print(
                        f"round {rnd} {s.name:4} narrow {c}x{d}: {r['rps']:,.0f}/s p50 {r['p50_ms']} ms "
                        f"p99 {r['p99_ms']} ms codes {r.get('codes')} errors {r['errors']}; server CPU "
                        f"{cpu:.2f} s, {r['per_cpu']:,.0f} answers per CPU-second",
                        flush=True,
                    )
    finally:
        for s in servers:
            s.stop()

    def col(name: str, key: str, field: str) -> list[float]:
        return [float(r[field]) for r in results[(name, key)]]

    label = f"narrow range, hot key ({args.narrow_records // args.narrow_every:,}-entry chain)"
    return [
        ratio_row(f"{label} 1x1 p50", "ms", col("java", "1x1", "p50_ms"), col("ours", "1x1", "p50_ms"),
                  lower_is_better=True),
        ratio_row(f"{label} 1x1 p99", "ms", col("java", "1x1", "p99_ms"), col("ours", "1x1", "p99_ms"),
                  lower_is_better=True),
        ratio_row(f"{label} 16x8", "/s", col("java", "16x8", "rps"), col("ours", "16x8", "rps")),
        ratio_row(f"{label} 16x8, answers per server CPU-second", "/cpu-s", col("java", "16x8", "per_cpu"),
                  col("ours", "16x8", "per_cpu")),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--ports", type=int, default=31300, help="first of the ports used (needs +30)")
    parser.add_argument("--hot", type=int, default=200_000, help="writes of the hot key")
    parser.add_argument("--hot-store", type=Path, help="reuse (or create) the hot-key store here")
    parser.add_argument(
        "--skip", default="", help="comma-separated row groups to skip: golden,isolation,workers"
    )
    parser.add_argument(
        "--workers-depth",
        type=int,
        default=8,
        help="requests in flight per connection in the --workers rows (16 connections; default 8)",
    )
    parser.add_argument("--narrow-records", type=int, default=2_000_000, help="messages of the narrow store")
    parser.add_argument("--narrow-every", type=int, default=200, help="every N-th message is keyed hot")
    parser.add_argument("--narrow-store", type=Path, help="reuse (or create) the narrow-range store here")
    parser.add_argument("--ours-from", type=Path, default=REPO, help="the checkout this server runs from")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if not (JAVA_BIN / "start-broker.sh").exists():
        print(
            "the Java broker is not built in /tmp/rmqjava (see ../shared/java-harness/README.md)",
            file=sys.stderr,
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="vs-java-"))
    servers: list[Server] = []
    rows: list[str] = []
    try:
        rmqblast = build_rmqblast(work)
        p = args.ports
        if "golden" not in skip:
            (work / "gj").mkdir()
            (work / "go").mkdir()
            jstore, _ = golden_copy(work / "gj")
            ostore, oconf = golden_copy(work / "go")
            samples = sample_store(ostore)
            files = {"offsets": work / "offsets", "keys": work / "keys"}
            files["offsets"].write_text("\n".join(map(str, samples.offsets)) + "\n")
            files["keys"].write_text("".join(f"{t}\t{k}\n" for t, k in samples.keys + samples.unique_keys))
            java = start_java(jstore, p + 3, work / "java-golden.log")
            servers.append(java)
            ours = start_ours(ostore, oconf, p + 11, work / "ours-golden.log")
            servers.append(ours)
            for s in (java, ours):  # warm-up (the JIT above all)
                blast(rmqblast, s.port, "view", files, 16, 8, 4)
                blast(rmqblast, s.port, "key", files, 16, 8, 4)
            results: dict[tuple[str, str], list[dict]] = {}
            settings = [("view", 16, 8), ("key", 16, 8), ("view", 1, 1), ("key", 1, 1)]
            for rnd in range(args.rounds):
                for kind, c, d in settings:
                    order = (java, ours) if rnd % 2 == 0 else (ours, java)
                    for s in order:
                        cpu0 = tree_cpu_seconds(s.process.pid)
                        r = blast(rmqblast, s.port, kind, files, c, d, args.seconds)
                        cpu = tree_cpu_seconds(s.process.pid) - cpu0
                        # Answers per CPU-second the server used (warm-up and drain included): the
                        # fairer figure on a shared core, where a many-threaded JVM gets more turns.
                        r["per_cpu"] = r["received"] / cpu if cpu > 0 else 0.0
                        results.setdefault((s.name, f"{kind}{c}x{d}"), []).append(r)
                        print(
                            f"round {rnd} {s.name:4} {kind} {c}x{d}: {r['rps']:,.0f}/s p50 {r['p50_ms']} ms "
                            f"p99 {r['p99_ms']} ms errors {r['errors']}; server CPU {cpu:.2f} s, "
                            f"{r['per_cpu']:,.0f} answers per CPU-second",
                            flush=True,
                        )

            def col(name: str, key: str, field: str) -> list[float]:
                return [float(r[field]) for r in results[(name, key)]]

            rows.append(
                ratio_row(
                    "VIEW_MESSAGE_BY_ID 16x8",
                    "/s",
                    col("java", "view16x8", "rps"),
                    col("ours", "view16x8", "rps"),
                )
            )
            rows.append(
                ratio_row(
                    "QUERY_MESSAGE maxNum 64, 16x8",
                    "/s",
                    col("java", "key16x8", "rps"),
                    col("ours", "key16x8", "rps"),
                )
            )
            for key, label in (("view16x8", "VIEW_MESSAGE_BY_ID 16x8"), ("key16x8", "QUERY_MESSAGE 16x8")):
                rows.append(
                    ratio_row(
                        f"{label}, answers per server CPU-second",
                        "/cpu-s",
                        col("java", key, "per_cpu"),
                        col("ours", key, "per_cpu"),
                    )
                )
            rows.append(
                ratio_row(
                    "VIEW_MESSAGE_BY_ID 1x1 p50",
                    "ms",
                    col("java", "view1x1", "p50_ms"),
                    col("ours", "view1x1", "p50_ms"),
                    lower_is_better=True,
                )
            )
            rows.append(
                ratio_row(
                    "QUERY_MESSAGE 1x1 p50",
                    "ms",
                    col("java", "key1x1", "p50_ms"),
                    col("ours", "key1x1", "p50_ms"),
                    lower_is_better=True,
                )
            )
            for s in (java, ours):
                s.stop()
            servers.clear()
        if "narrow" not in skip:
            rows += narrow_rows(args, rmqblast, work, p)
        if "isolation" not in skip:
            hot_root = args.hot_store or work / "hot-src"
            marker = hot_root / "bench.json"
            if not marker.exists():
                shutil.rmtree(hot_root, ignore_errors=True)
                started = time.monotonic()
                t0, offsets = write_hot_store(hot_root / "store", args.hot)
                marker.write_text(json.dumps({"t0": t0, "offsets": offsets, "hot": args.hot}))
                print(
                    f"hot store: key 'hot' written {args.hot} times in {time.monotonic() - started:.0f} s",
                    flush=True,
                )
            meta = json.loads(marker.read_text())
            hot_files = {"offsets": work / "hot-offsets", "keys": work / "hot-keys"}
            hot_files["offsets"].write_text("\n".join(map(str, meta["offsets"])) + "\n")
            hot_files["keys"].write_text(f"{HOT_TOPIC}\thot\t{meta['t0']}\t{meta['t0'] + 999}\n")
            miss_marker = hot_root / "miss-key"
            if not miss_marker.exists():
                slots = StoreConfig.for_store(hot_root / "store").max_hash_slot_num
                miss_marker.write_text(colliding_key(HOT_TOPIC, "hot", slots))
            miss_files = {"offsets": hot_files["offsets"], "keys": work / "miss-keys"}
            miss_files["keys"].write_text(f"{HOT_TOPIC}\t{miss_marker.read_text()}\t{meta['t0']}\t{2**62}\n")
            for side in ("hj", "ho"):
                (work / side).mkdir()
                subprocess.run(
                    ["cp", "-a", "--sparse=always", str(hot_root / "store"), str(work / side / "store")],
                    check=True,
                )
            java = start_java(work / "hj" / "store", p + 3, work / "java-hot.log")
            servers.append(java)
            ours = start_ours(work / "ho" / "store", None, p + 11, work / "ours-hot.log")
            servers.append(ours)
            for s in (java, ours):
                blast_pair(rmqblast, s.port, hot_files, hot_files, 3)
            variants = (
                ("chain-walking", f"chain-walking queries ({args.hot:,}-entry chain)", hot_files),
                ("whole-chain (colliding key, no match)",
                 f"whole-chain queries, a colliding key ({args.hot:,}-entry chain)", miss_files),
            )  # fmt: skip
            for clients, queries, files in variants:
                iso: dict[str, list[tuple[dict, dict]]] = {"java": [], "ours": []}
                for rnd in range(args.rounds):
                    order = (java, ours) if rnd % 2 == 0 else (ours, java)
                    for s in order:
                        view, hot = blast_pair(rmqblast, s.port, hot_files, files, args.seconds)
                        iso[s.name].append((view, hot))
                        print(
                            f"round {rnd} {s.name:4} isolation, {clients}: VIEW {view['rps']:,.0f}/s "
                            f"p99 {view['p99_ms']} ms; queries {hot['rps']:,.1f}/s p50 {hot['p50_ms']} ms "
                            f"codes {hot['codes']} errors {view['errors'] + hot['errors']}",
                            flush=True,
                        )
                rows.append(
                    ratio_row(
                        f"VIEW p99 beside 2 {clients} clients",
                        "ms",
                        [v["p99_ms"] for v, _ in iso["java"]],
                        [v["p99_ms"] for v, _ in iso["ours"]],
                        lower_is_better=True,
                    )
                )
                rows.append(
                    ratio_row(
                        "VIEW/s beside them",
                        "/s",
                        [v["rps"] for v, _ in iso["java"]],
                        [v["rps"] for v, _ in iso["ours"]],
                    )
                )
                rows.append(
                    ratio_row(
                        queries,
                        "/s",
                        [h["rps"] for _, h in iso["java"]],
                        [h["rps"] for _, h in iso["ours"]],
                    )
                )
            for s in (java, ours):
                s.stop()
            servers.clear()
        if "workers" not in skip:
            if not (work / "go").exists():
                (work / "go").mkdir()
                golden_copy(work / "go")
            ostore, oconf = work / "go" / "store", work / "go" / "broker.conf"
            if not (work / "offsets").exists():
                samples = sample_store(ostore)
                (work / "offsets").write_text("\n".join(map(str, samples.offsets)) + "\n")
                (work / "keys").write_text(
                    "".join(f"{t}\t{k}\n" for t, k in samples.keys + samples.unique_keys)
                )
            files = {"offsets": work / "offsets", "keys": work / "keys"}
            one = start_ours(ostore, oconf, p + 21, work / "ours-w1.log")
            servers.append(one)
            two = start_ours(ostore, oconf, p + 31, work / "ours-w2.log", workers=2, cores="0,1")
            servers.append(two)
            wres: dict[tuple[int, str], list[float]] = {}
            shape = f"16x{args.workers_depth}"
            for rnd in range(args.rounds):
                for kind in ("view", "key"):
                    order = ((one, 1), (two, 2)) if rnd % 2 == 0 else ((two, 2), (one, 1))
                    for s, n in order:
                        cpu0 = tree_cpu_seconds(s.process.pid)
                        r = blast(
                            rmqblast,
                            s.port,
                            kind,
                            files,
                            16,
                            args.workers_depth,
                            args.seconds,
                            cores="0" if n == 1 else "0,1",
                        )
                        cpu = tree_cpu_seconds(s.process.pid) - cpu0
                        wres.setdefault((n, kind), []).append(r["rps"])
                        # The cores left to the server: one worker has core 1 to itself (the generator
                        # runs on core 0); two workers share both cores with the generator.
                        left = 1.0 if n == 1 else max(2.0 - r["cpu"], 0.01)
                        wres.setdefault((n, kind + "/core"), []).append(r["rps"] / left)
                        wres.setdefault((n, kind + "/gen"), []).append(r["cpu"])
                        # Answers per CPU-second the server processes used (warm-up and drain included).
                        per_cpu = r["received"] / cpu if cpu > 0 else 0.0
                        wres.setdefault((n, kind + "/cpu"), []).append(per_cpu)
                        print(
                            f"round {rnd} workers {n} {kind} {shape}: {r['rps']:,.0f}/s p50 {r['p50_ms']} ms "
                            f"p99 {r['p99_ms']} ms errors {r['errors']} timeouts {r['timeouts']}; server "
                            f"CPU {cpu:.2f} s, {per_cpu:,.0f} answers per CPU-second; generator "
                            f"{r['cpu']:.2f} of a core",
                            flush=True,
                        )
            # (key suffix, row label after the request name, unit): one ratio row each, per request.
            workers_rows = (
                ("", f"{shape}, --workers 2 (2 cores) vs 1 (1 core)", "/s"),
                ("/cpu", "answers per server CPU-second, --workers 2 vs 1", "/cpu-s"),
                ("/gen", f"{shape}: the load generator's CPU (cores), --workers 2 vs 1", "cores"),
                ("/core", f"{shape}: answers/s per core left to the server, --workers 2 vs 1", "/core-s"),
            )
            for kind, label in (("view", "VIEW_MESSAGE_BY_ID"), ("key", "QUERY_MESSAGE")):
                for suffix, what, unit in workers_rows:
                    rows.append(
                        ratio_row(f"{label} {what}", unit, wres[(1, kind + suffix)], wres[(2, kind + suffix)])
                    )
        print()
        print("| row | this server | Java 4.9.7 (workers: 1 worker) | ratio, median (per round) |")
        print("|---|---:|---:|---:|")
        for row in rows:
            print(row)
        return 0
    finally:
        for s in servers:
            s.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    sys.exit(main())
