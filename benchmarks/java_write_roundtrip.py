"""The write path against the real Java 4.9.7 tools: their producer writes, their admin client reads back.

Not a test (CI has no JVM): a by-hand verification, recorded in RELIABILITY.md. Steps:

1. ``rmq-query serve --writable`` on an empty store (``--port``, default 31711), geometry from a
   broker.conf beside the store.
2. The real ``DefaultMQProducer`` (``/tmp/rmqjava/bin/producer``) sends ``--messages`` messages to a
   new topic (auto-created through TBW102), and ``sendprobe`` runs the capture's scenarios (keys,
   tags, unicode properties, a new topic, a batch, oneway, too large, compressed, delayed).
3. The real admin client (``queryclient``: ``DefaultMQAdminExt``, as mqadmin) queries every message
   back by key, by unique key and by offset id, through our server as name server and broker.
4. Our server stops (SIGTERM: index flushed, checkpoint, topics.json, lock released); the real name
   server and broker start on the same store directory, on the same port (offset ids name it), and
   the same queries are asked of them. Both sets of answers must be identical.

    python -m benchmarks.java_write_roundtrip --messages 50

Prints one JSON summary; exit status 0 only when every query was answered and both sides agree.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited early; see {path}")
        time.sleep(0.2)
    raise TimeoutError(f"{text!r} not seen in {path}")


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
    return proc.returncode


def _json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def _digests(store: Path) -> dict[str, str]:
    """sha256 of every CommitLog, ConsumeQueue and IndexFile of ``store``."""
    import hashlib

    out = {}
    for sub in ("commitlog", "consumequeue", "index"):
        for path in sorted((store / sub).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(store))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _queries(bin_dir: Path, namesrv: str, queries: list[list[object]]) -> list[dict]:
    """Every query through one ``queryclient batch``: a list of answer lines per query."""
    done = subprocess.run(
        [str(bin_dir / "queryclient"), namesrv, "batch"],
        input="\n".join(json.dumps(q) for q in queries) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = _json_lines(done.stdout)
    answers: list[dict] = []
    current: list[dict] = []
    for line in lines:
        if "result" in line or "error" in line:
            answers.append({"messages": current, "end": line})
            current = []
        else:
            current.append(line)
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--java", type=Path, default=Path("/tmp/rmqjava/bin"))
    parser.add_argument("--port", type=int, default=31711, help="ours, then the Java broker's (+ -2, +1)")
    parser.add_argument("--namesrv-port", type=int, default=31790)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rmq-java-write-"))
    store = work / "store"
    conf = work / "broker.conf"
    conf.write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerIP1=127.0.0.1\n"
        f"listenPort={args.port}\nstorePathRootDir=store\nstorePathCommitLog=store/commitlog\n"
        "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
        "maxHashSlotNum=1000\nmaxIndexNum=4000\nmaxMessageSize=65536\nfileReservedTime=87600\n",
        encoding="utf-8",
    )
    namesrv_ours = f"127.0.0.1:{args.port}"
    summary: dict[str, object] = {"work": str(work)}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ours_log = work / "serve.log"
    with open(ours_log, "wb") as log:
        ours = subprocess.Popen(
            [sys.executable, "-m", "clients.cli", "serve", "--writable", "--store", str(store), "--config",
             str(conf), "--port", str(args.port)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        _wait_for(ours_log, "serving on", ours, 30)
        produced = subprocess.run(
            [str(args.java / "producer"), namesrv_ours, "JavaTopic", str(args.messages), "jk"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        sends = [x for x in _json_lines(produced.stdout) if "sendStatus" in x]
        probe = subprocess.run(
            [str(args.java / "sendprobe"), namesrv_ours, "JavaTopic", "ProbeTopicNew"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        probe_lines = _json_lines(probe.stdout)
        summary["sent"] = len(sends)
        summary["send_ok"] = sum(1 for s in sends if s.get("sendStatus") == "SEND_OK")
        summary["sendprobe"] = [
            {k: line.get(k) for k in ("step", "sendStatus", "responseCode", "queueOffset") if k in line}
            for line in probe_lines
            if "step" in line
        ]
        queries: list[list[object]] = []
        for i, s in enumerate(sends):
            queries.append(["queryMsgByKey", "JavaTopic", f"jk-{i}", 64, 0, 2**63 - 1])
            queries.append(["queryMsgByUniqKey", "JavaTopic", s["msgId"], 32, 0, 2**63 - 1])
            queries.append(["viewMessage", s["offsetMsgId"]])
        for line in probe_lines:
            if line.get("sendStatus") == "SEND_OK" and line.get("offsetMsgId"):
                for oid in str(line["offsetMsgId"]).split(","):
                    queries.append(["viewMessage", oid])
        time.sleep(1.5)  # the delayed probe message is delivered after its level's 5 s: wait below
        time.sleep(5)
        answers_ours = _queries(args.java, namesrv_ours, queries)
    finally:
        summary["ours_exit"] = _stop(ours)

    before = _digests(store)
    namesrv = f"127.0.0.1:{args.namesrv_port}"
    ns_log, br_log = work / "namesrv.out", work / "broker.out"
    with open(ns_log, "wb") as out:
        ns = subprocess.Popen(
            [str(args.java / "start-namesrv.sh"), str(args.namesrv_port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    broker = None
    try:
        _wait_for(ns_log, "boot success", ns, 60)
        with open(br_log, "wb") as out:
            broker = subprocess.Popen(
                [str(args.java / "start-broker.sh"), str(store), str(args.port), namesrv],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        _wait_for(br_log, "boot success", broker, 90)
        time.sleep(3)  # registration with the name server, and the reput's first passes
        answers_java = _queries(args.java, namesrv, queries)
    finally:
        if broker is not None:
            summary["broker_exit"] = _stop(broker)
        summary["namesrv_exit"] = _stop(ns)

    def found(answers: list[dict]) -> int:
        return sum(1 for a in answers if a["end"].get("result") == "ok" and a["messages"])

    after = _digests(store)
    # The broker found nothing to redo: our CommitLog, ConsumeQueues and IndexFiles are what it keeps.
    summary["files_unchanged_by_java_broker"] = before == after
    if before != after:
        summary["files_changed"] = sorted(
            k for k in before.keys() | after.keys() if before.get(k) != after.get(k)
        )
    summary["queries"] = len(queries)
    summary["answered_ours"] = found(answers_ours)
    summary["answered_java"] = found(answers_java)
    summary["identical"] = answers_ours == answers_java
    if answers_ours != answers_java:
        diffs = [
            {"query": q, "ours": a, "java": b}
            for q, a, b in zip(queries, answers_ours, answers_java, strict=False)
            if a != b
        ]
        summary["differences"] = diffs[:5]
        summary["difference_count"] = len(diffs)
    print(json.dumps(summary, indent=1, default=str))
    ok = (
        summary["identical"]
        and summary["files_unchanged_by_java_broker"]
        and summary["answered_ours"] == len(queries)
        and summary["send_ok"] == args.messages
    )
    if not args.keep and ok:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
