"""Record what the real 4.9.7 broker's SQL92 push consumers receive (issue 32).

Starts a copy of the 4.9.7 name server and broker (``broker.conf``: ``enablePropertyFilter=true``)
on a fresh store, runs ``tests/server/java/SqlFilter.java`` against them with the expressions of
``tests/support/sql_filter_java.py`` (the hand-worked ones and one that does not compile), and
writes the program's observations to ``tests/server/golden/sql_filter_java_4.9.7.json``, which
``tests/server/test_java_sql_filter.py`` compares with its hand-worked sets and with what
``serve --writable``'s consumers receive. About 40 s; both JVMs are stopped by their pids.

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_sql_filter.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.java_scenarios import RealBroker
from tests.support.real_broker import copy_rmq
from tests.support.sql_filter_java import (
    BAD,
    EXPECTED,
    JAVA_TIMEOUT,
    compile_program,
    java_command,
    results,
)

OUT = Path(__file__).parent / "sql_filter_java_4.9.7.json"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        class_path = compile_program(root / "program")
        broker = RealBroker(SimpleNamespace(rmq=copy_rmq(root)), root / "real", "enablePropertyFilter=true\n")  # type: ignore[arg-type]
        try:
            broker.start()
            expressions = [*EXPECTED, BAD]
            run = subprocess.run(
                java_command(class_path, broker.namesrv, root / "client-logs", *expressions),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=JAVA_TIMEOUT,
                check=False,
            )
        finally:
            broker.stop()
    recorded = {
        "broker": "apache rocketmq 4.9.7, broker.conf enablePropertyFilter=true",
        "program": "tests/server/java/SqlFilter.java",
        "expressions": expressions,
        "results": results(run.stdout),
    }
    OUT.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
