"""Which tests share an xdist worker, when the suite runs in parallel (``-n 2 --dist loadgroup``).

Each test module is one group by default, so a module's fixtures (a server, a real broker, a compiled
Java program, a store copy) are set up once, in one worker, as in a serial run; whole modules are
what the workers balance. A few groups are wider, because their session fixtures are expensive and a
second copy would only compete for the same two cores:

- ``spark``: ``tests/store/spark`` shares one local SparkSession (a JVM of its own);
- ``java-kit``: the tests that compile ``Scenarios.java`` against the real 4.9.7 (the ``kit``
  fixture) and start many JVMs at once.

A test module that cannot share the machine with any other test at all would need its own
``serial`` handling; none does (tests start servers on port 0 and keep their files in ``tmp_path``).
"""

from __future__ import annotations

from pathlib import PurePosixPath

SPARK_DIR = PurePosixPath("tests/store/spark")


def group_of(nodeid: str, fixturenames: list[str] | tuple[str, ...]) -> str:
    """The xdist group of the test with this node id (``path::name``) and these fixtures."""
    module = PurePosixPath(nodeid.split("::", 1)[0])
    if SPARK_DIR in module.parents:
        return "spark"
    if "kit" in fixturenames:
        return "java-kit"
    return module.as_posix()
