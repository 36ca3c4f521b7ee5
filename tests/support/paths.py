"""Where things are, for every test: the repository root, its golden data, and the real RocketMQ 4.9.7.

The golden data written by the real Java RocketMQ 4.9.7 (stores, wire vectors) lives in the repository
under ``tests/golden`` (``tests/golden/README.md`` says how each file was produced), so a clone runs the
suite with nothing beside it. Tests read it in place and never write to it: a test that needs a writable
store copies it to a temporary directory first (``tests/support/store_copy.py``).

The tests that run the real 4.9.7 (its Java client, broker, name server or mqadmin) find it through ONE
variable, ``RMQ_ROCKETMQ_HOME``: a 4.9.7 build laid out as ``../shared/rocketmq-4.9.7-bin`` is
(``lib/rocketmq-all-4.9.7.jar``, ``lib/rmq-harness.jar``, ``bin/start-broker.sh``, ``bin/_env.sh``, ...).
``.ci/run`` points it there when that folder exists; without it those tests skip with
``ROCKETMQ_SKIP_REASON``, which says how to get one.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO_ROOT / "tests" / "golden"
VECTORS_DIR = GOLDEN_DIR / "vectors"
STORES_DIR = GOLDEN_DIR / "stores"

ROCKETMQ_HOME_VARIABLE = "RMQ_ROCKETMQ_HOME"
_home = os.environ.get(ROCKETMQ_HOME_VARIABLE, "").strip()
#: The real RocketMQ 4.9.7 (None when the variable is unset). Its scripts write beside themselves and CI
#: lays it read-only: tests copy it to a temporary directory before running anything in it.
ROCKETMQ_HOME: Path | None = Path(_home).resolve() if _home else None
#: Every RocketMQ module in one jar (the tests read constants out of its classes).
ROCKETMQ_JAR: Path | None = ROCKETMQ_HOME / "lib" / "rocketmq-all-4.9.7.jar" if ROCKETMQ_HOME else None
#: Whether the Java-interop tests can run (a JDK is checked by each test: some need only ``java``).
HAVE_ROCKETMQ = ROCKETMQ_JAR is not None and ROCKETMQ_JAR.is_file()

_HOW = (
    "a 4.9.7 build laid out as tests/golden/README.md says (section 'RocketMQ 4.9.7 for the Java tests'; "
    "CI uses ../shared/rocketmq-4.9.7-bin; the release itself: "
    "https://archive.apache.org/dist/rocketmq/4.9.7/rocketmq-all-4.9.7-bin-release.zip)"
)
if ROCKETMQ_HOME is None:
    ROCKETMQ_SKIP_REASON = f"needs a JDK and RocketMQ 4.9.7: set {ROCKETMQ_HOME_VARIABLE} to {_HOW}"
else:
    ROCKETMQ_SKIP_REASON = (
        f"needs a JDK and RocketMQ 4.9.7: {ROCKETMQ_HOME_VARIABLE}={ROCKETMQ_HOME} has no "
        f"lib/rocketmq-all-4.9.7.jar; point it at {_HOW}"
    )


def rocketmq_home() -> Path:
    """The RocketMQ 4.9.7 folder, for code reached only after a test checked ``HAVE_ROCKETMQ``."""
    if ROCKETMQ_HOME is None or not HAVE_ROCKETMQ:
        raise RuntimeError(ROCKETMQ_SKIP_REASON)
    return ROCKETMQ_HOME
