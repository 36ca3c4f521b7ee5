"""Where things are, for every test: the repository root and the golden data beside it.

The golden data produced by the real Java RocketMQ is read in place from ``../shared`` (beside the
repository), never copied into the repository; ``RMQ_SHARED`` overrides the location. Beside the
golden data, ``rocketmq-4.9.7-bin`` holds the real 4.9.7 prebuilt (its README says how it was built).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("RMQ_SHARED", REPO_ROOT.parent / "shared")).resolve()
VECTORS_DIR = SHARED_DIR / "vectors"
STORES_DIR = SHARED_DIR / "stores"
ROCKETMQ_JAR = SHARED_DIR / "rocketmq-4.9.7-bin" / "lib" / "rocketmq-all-4.9.7.jar"
