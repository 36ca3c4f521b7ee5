"""Trim a ``cqgolden`` output (shared/java-harness) to the answers the tests pin, plus file mtimes.

Usage: python tests/store/consumequeue/data/trim_cq_golden.py CQ_EXPECTED_JSON STORE_DIR OUT_JSON_GZ

Kept as Java wrote them: geometry, per queue min/max/earliest, every offsetByTime answer, every
getMessage probe (statuses, offsets, sizes, raw-record hashes), the walk's per-pull figures and one
sha256 over the walk's raw-record hashes in order; the consume queue files' sha256 and their mtimes
(getOffsetInQueueByTime picks a file by mtime, so the test sets them back).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
from pathlib import Path


def main() -> None:
    src, store, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    d = json.loads(src.read_text("utf-8"))
    topics = []
    for t in d["topics"]:
        queues = []
        for q in t["queues"]:
            walk = [m[4] for step in q["walk"] for m in step["messages"]]
            queues.append(
                {k: q[k] for k in ("queueId", "minOffsetInQueue", "maxOffsetInQueue", "earliestMessageTime")}
                | {
                    "offsetByTime": q["offsetByTime"],
                    "getMessage": q["getMessage"],
                    "walk": [
                        [s["offset"], s["nextBeginOffset"], s["messageCount"], s["bufferTotalSize"]]
                        for s in q["walk"]
                    ],
                    "walkRawSha256s": hashlib.sha256("".join(walk).encode()).hexdigest(),
                }
            )
        topics.append({"topic": t["topic"], "queues": queues})
    files = [
        f | {"mtimeMs": os.stat(store / f["path"]).st_mtime_ns // 1_000_000} for f in d["consumequeueFiles"]
    ]
    trimmed = {
        "source": "cqgolden over a java-4.9.7-a copy whose consume queues the real 4.9.7 broker rebuilt",
        "messageStoreConfig": d["messageStoreConfig"],
        "store": d["store"],
        "consumequeueFiles": files,
        "topics": topics,
        "topicStats": d["topicStats"],
    }
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(trimmed, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
