"""Record what the official 4.9.7 client's viewMessage answers for every message of the golden stores
(issue 36: the message table, row for row, against the Java client).

For each golden store (``tests/golden/stores/java-4.9.7-a``: zlib-compressed and plain bodies,
IPv6 store hosts, prepared and rolled-back transactions, 5000 messages; ``java-4.9.7-send``: the
real broker's sends, batches included), a copy is served by the real 4.9.7 broker
(``tests/support/real_broker.py``, its ``broker.conf`` geometry beside the copy), and
``tests/server/java/ViewMessages.java`` asks it VIEW_MESSAGE_BY_ID for every record's CommitLog
offset through the official client (``MQClientAPIImpl.viewMessage``, the call
``DefaultMQAdminExt.viewMessage(offsetMsgId)`` makes once it has decoded the id). The answers go to
``tests/server/golden/view_message_4.9.7.json.gz`` (gzip, ``mtime`` 0), which
``tests/store/spark/test_table_view_message.py`` compares with the DataFrame's rows. About a minute;
each broker is stopped by SIGTERM.

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_view_message.py
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from store.config.store_config import parse_properties
from tests.support.golden_tables import STORES, copy_golden, sequential_rows
from tests.support.paths import REPO_ROOT, ROCKETMQ_HOME
from tests.support.real_broker import copy_rmq, real_broker
from tests.support.sql_filter_java import JDK_OPTS

OUT = Path(__file__).parent / "view_message_4.9.7.json.gz"
SOURCE = REPO_ROOT / "tests" / "server" / "java" / "ViewMessages.java"
GOLDEN = REPO_ROOT / "tests" / "golden" / "stores"
#: broker.conf lines the start script sets itself (paths, port, address).
_OWN = ("storePathRootDir", "storePathCommitLog", "listenPort", "brokerIP1")


def _compile(root: Path) -> str:
    """The program compiled; its class path. The 4.9.7 distribution's ``zstd-jni.jar`` here holds no
    native library, so the client could not inflate a ZSTD body: PySpark's ``zstd-jni`` jar (the same
    classes, with the linux/amd64 library) goes first on the class path."""
    classes = root / "classes"
    lib = ROCKETMQ_HOME / "lib"
    subprocess.run(["javac", "-d", str(classes), "-cp", f"{lib}/*", str(SOURCE)], check=True, timeout=120)
    import pyspark

    zstd = sorted((Path(pyspark.__file__).parent / "jars").glob("zstd-jni-*.jar"))
    return ":".join([*(str(z) for z in zstd[-1:]), f"{lib}/*", str(classes)])


def record_store(root: Path, rmq: Path, class_path: str, name: str, conf: Path) -> dict[str, dict]:
    offsets = [row[4] for row in sequential_rows(conf, "x")]  # commitLogOffset
    served = root / f"serve-{name}"
    served.mkdir()
    shutil.copytree(conf.parent / name, served / "store")
    settings = parse_properties(conf.read_text(encoding="utf-8"))
    (served / "broker.conf").write_text(
        "".join(f"{k}={v}\n" for k, v in settings.items() if k not in _OWN), encoding="utf-8"
    )
    (served / "offsets.txt").write_text("".join(f"{o}\n" for o in offsets))
    with real_broker(rmq, served / "store") as broker:
        run = subprocess.run(
            [
                "java",
                *JDK_OPTS,
                f"-Drocketmq.client.logRoot={served / 'client-logs'}",
                "-cp",
                class_path,
                "ViewMessages",
                f"127.0.0.1:{broker.port}",
                str(served / "offsets.txt"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
    lines = run.stdout.decode(errors="replace").splitlines()
    if "DONE" not in lines:
        raise SystemExit(f"ViewMessages did not finish for {name}:\n" + "\n".join(lines[-40:]))
    answers = [json.loads(line) for line in lines if line.startswith("{")]
    if len(answers) != len(offsets):
        raise SystemExit(f"{name}: {len(answers)} answers for {len(offsets)} offsets")
    return {str(a.pop("offset")): a for a in answers}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rmq-view-") as tmp:
        root = Path(tmp)
        rmq = copy_rmq(root)
        class_path = _compile(root)
        confs = copy_golden(GOLDEN, root / "golden")
        recorded = {
            "broker": "apache rocketmq 4.9.7 on a copy of each golden store",
            "client": "tests/server/java/ViewMessages.java: MQClientAPIImpl.viewMessage(addr, offset)",
            "stores": {name: record_store(root, rmq, class_path, name, confs[name]) for name in STORES},
        }
    data = json.dumps(recorded, indent=0, ensure_ascii=False, sort_keys=True).encode()
    OUT.write_bytes(gzip.compress(data, mtime=0))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
