"""Which tests share an xdist worker, when the suite runs in parallel (``-n 4 --dist loadgroup``).

Each test module is one group by default, so a module's fixtures (a server, a real broker, a compiled
Java program, a store copy) are set up once, in one worker, as in a serial run; whole modules are
what the workers balance. A few groups are wider, because their session fixtures are expensive and a
second copy would only compete for the same two cores:

- ``spark``: ``tests/store/spark`` shares one local SparkSession (a JVM of its own);
- ``java-kit``: the tests that compile ``Scenarios.java`` against the real 4.9.7 (the ``kit``
  fixture) and start many JVMs at once.

A test module that cannot share the machine with any other test at all would need its own
``serial`` handling; none does (tests start servers on port 0 and keep their files in ``tmp_path``).

The order the workers get the groups in decides how long the run takes: a worker runs a group to its
end, so a long group handed out last keeps one worker busy after the others are done. xdist's own
order (most tests first) put the consume-side replay, one 94 s test, near the end. The groups in
``LONG_FIRST`` (measured the longest, in one worker's seconds) are handed out first, longest first;
the rest follow with the most tests first, as xdist would order them (``schedule_key``).
"""

from __future__ import annotations

from pathlib import PurePosixPath

SPARK_DIR = PurePosixPath("tests/store/spark")

#: The longest groups, longest first: seconds of one worker, summed over the group's tests, in the
#: compiled pass under ``-n 4 --dist loadgroup`` with ``RMQ_ROCKETMQ_HOME`` set on the shared 2-core
#: machine (load 6-14; BENCHMARKS.md "The suite's time"): spark 140, the browser 107, group admin
#: against mqadmin 100, the consume-side replay 94 (one test), many topics 77, java-kit 70, mqadmin
#: writable 66, the soak 50, the 5.x simple consumer 48; the next took 34. A group not collected (a
#: path given on the command line) is skipped.
LONG_FIRST: tuple[str, ...] = (
    "spark",
    "tests/server/http/test_browser.py",
    "tests/clients/cli/test_group_admin_vs_mqadmin.py",
    "tests/server/test_consume_side_golden.py",
    "tests/server/test_many_topics_golden.py",
    "java-kit",
    "tests/server/test_mqadmin_writable.py",
    "tests/server/test_soak_writable.py",
    "tests/server/grpc/test_official_simple_consumer.py",
)


def group_of(nodeid: str, fixturenames: list[str] | tuple[str, ...]) -> str:
    """The xdist group of the test with this node id (``path::name``) and these fixtures."""
    module = PurePosixPath(nodeid.split("::", 1)[0])
    if SPARK_DIR in module.parents:
        return "spark"
    if "kit" in fixturenames:
        return "java-kit"
    return module.as_posix()


def schedule_key(group: str, tests_in_group: int) -> tuple[int, int]:
    """Where a group goes in the workers' queue (sort ascending): a ``LONG_FIRST`` group at its place
    there, every other group after them, the most tests first."""
    if group in LONG_FIRST:
        return (LONG_FIRST.index(group), 0)
    return (len(LONG_FIRST), -tests_in_group)
