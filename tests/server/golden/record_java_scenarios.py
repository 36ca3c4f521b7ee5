"""Record what the issue 19 consumer scenarios observe against the real 4.9.7 broker (run by hand).

    python tests/server/golden/record_java_scenarios.py

Starts the real name server and broker (``start-namesrv.sh``, ``start-broker.sh`` of a temporary
copy of ``../shared/rocketmq-4.9.7-bin``) on an empty store with the broker's defaults except
``transactionCheckInterval=3000`` (the check-back of row 7 in seconds, not a minute), runs every row
of ``tests/support/java/Scenarios.java`` against them (concurrently, each under its own names), checks
each observation with ``scenario_checks`` (the real broker must pass what ours is held to), stops both
JVMs by pid and writes ``java_scenarios_4.9.7.json`` beside this script. ``test_java_consumers.py``
holds ``serve --writable`` to the same observations.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from tests.support.java_scenarios import ROWS, JavaKit, RealBroker, run_row
from tests.support.scenario_checks import check

OUT = Path(__file__).with_name("java_scenarios_4.9.7.json")
BROKER_CONF = "transactionCheckInterval=3000\n"
#: Rows run at once (each is a JVM or two; more only slows the others down on two cores).
CONCURRENT = 6


def record() -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="java-scenarios-") as tmp:
        kit = JavaKit(Path(tmp))
        broker = RealBroker(kit, Path(tmp) / "real", BROKER_CONF).start()
        try:
            with ThreadPoolExecutor(CONCURRENT) as pool:
                futures = {
                    row: pool.submit(
                        run_row, kit, broker.namesrv, broker.broker, row, f"g{uuid.uuid4().hex[:8]}"
                    )
                    for row in ROWS
                }
                observed = {row: future.result() for row, future in futures.items()}
        finally:
            broker.stop()
    for row, obs in observed.items():
        try:
            check(row, obs, obs)
        except AssertionError:
            print(f"{row}: {json.dumps(obs)}", file=sys.stderr)
            raise
    return observed


if __name__ == "__main__":
    observed = record()
    lines = [f"  {json.dumps(row)}: {json.dumps(obs, sort_keys=True)}" for row, obs in observed.items()]
    OUT.write_text(
        '{"recordedFrom": "Apache RocketMQ 4.9.7 name server and broker (JDK 17), empty store, '
        'transactionCheckInterval=3000",\n "scenarios": {\n' + ",\n".join(lines) + "\n }}\n"
    )
    print(f"wrote {OUT}")
