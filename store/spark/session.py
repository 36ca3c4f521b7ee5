"""Build the SparkSession every pipeline job runs in: embedded ``local[*]`` unless a master is given.

One place decides the settings that matter for a job that reads files by path and ships small
binary blobs between stages: the UI stays off (nothing listens on a port), logging is quiet so the
command's own progress lines stay readable, and shuffles use few partitions because the pipeline
controls its own partitioning (one task per CommitLog range, one per index file).
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "rmq-query"


# Log4j 2 settings for the driver JVM: errors only, on stderr, so progress lines stay readable.
_QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j2_file() -> Path:
    """Write the quiet Log4j 2 configuration once per process and return its path."""
    path = Path(tempfile.gettempdir()) / f"rmq-query-log4j2-{os.getpid()}.properties"
    if not path.exists():
        path.write_text(_QUIET_LOG4J2, encoding="ascii")
    return path


#: The JVMs compile with C1 only. A pipeline's JVM schedules tasks and moves a few bytes per task
#: (the work is in the Python workers), and for jobs this short C2's compiling never pays back: it
#: was most of the ~70 ms a do-nothing PySpark task cost here (``benchmarks/spark_task_costs.py``).
JVM_JIT_OPTION = "-XX:TieredStopAtLevel=1"


# The directory holding the ``protocol`` and ``store`` packages, which every task imports.
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED_PACKAGES = ("protocol", "store")


def _export_project_path() -> None:
    """Let local Python workers import this project even when it is run from a checkout."""
    root = str(PROJECT_ROOT)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *parts])


def package_archive(directory: Path) -> Path:
    """Zip the ``protocol`` and ``store`` packages into ``directory``; executors import from it.

    The compiled twins go in too: ``protocol.accel.load`` copies them out of the archive (Python
    cannot load an extension module from a zip), so executors walk ranges as the driver would.
    Executors must run the driver's Python version on the same platform for them to load; where
    they do not, ``load`` finds none and the references run."""
    archive = Path(directory) / "rmq_query_packages.zip"
    suffixes = (".py", *importlib.machinery.EXTENSION_SUFFIXES)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in SHIPPED_PACKAGES:
            for path in sorted((PROJECT_ROOT / package).rglob("*")):
                if path.is_file() and path.name.endswith(suffixes) and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(PROJECT_ROOT).as_posix())
    return archive


def ship_packages(session: SparkSession) -> Path:
    """Send ``protocol`` and ``store`` to every executor (for a master that is not local)."""
    archive = package_archive(Path(tempfile.mkdtemp(prefix="rmq-query-pyfiles-")))
    session.sparkContext.addPyFile(str(archive))
    return archive


_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


def task_slots(sc: SparkContext) -> int:
    """How many tasks run at once: ``N`` of ``local[N]`` (the machine's CPUs for ``local[*]``);
    on a cluster the executors' registered cores, else ``spark.cores.max``, else Spark's default
    parallelism (which ``build_session`` pins to its shuffle partitions)."""
    match = _LOCAL_MASTER.fullmatch(sc.master.strip())
    if match:
        slots = match.group(1)
        if slots is None:
            return 1
        return (os.cpu_count() or 1) if slots == "*" else max(1, int(slots))
    try:
        cores = int(sc._jsc.sc().schedulerBackend().totalCoreCount().get())
    except Exception:  # another scheduler backend, or py4j cannot reach the field
        cores = 0
    if cores <= 0:
        cores = int(sc.getConf().get("spark.cores.max", "0") or 0)
    return cores if cores > 0 else max(1, sc.defaultParallelism)


class SparkUnavailableError(RuntimeError):
    """PySpark (or the Java runtime it needs) is not installed: install the ``spark`` extra."""


def build_session(
    master: str | None = None,
    *,
    app_name: str = APP_NAME,
    shuffle_partitions: int = 8,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or reuse) a SparkSession on ``master`` (``local[*]`` when None) with quiet logging.

    ``conf`` (e.g. ``spark.driver.memory``, ``spark.executor.memory``) is applied last, so it wins.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailableError(
            "the spark engine needs PySpark: pip install 'rmq-query[spark]' (and a Java 17 runtime)"
        ) from exc
    # Executors must run the same interpreter as the driver: the pipeline ships Python closures.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = (master or DEFAULT_MASTER).startswith("local")
    _export_project_path()
    if local:
        # An embedded job has no cluster to talk to: keep every socket it opens on loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jvm_options = f"-Dlog4j.configurationFile=file:{_quiet_log4j2_file()} {JVM_JIT_OPTION}"
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.python.worker.reuse", "true")
        # The JVM and its Python workers talk over a Unix socket, not loopback TCP (Spark >= 4.1;
        # ignored before): ~25 ms less per task here (BENCHMARKS.md, issue 22).
        .config("spark.python.unix.domain.socket.enabled", "true")
        # Parquet timestamps as plain UTC milliseconds (not legacy INT96), like the local engine writes.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", jvm_options)
        .config("spark.executor.extraJavaOptions", jvm_options)
    )
    if local:
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # no Java runtime, a bad master URL, a port that cannot be bound
        raise SparkUnavailableError(f"cannot start Spark on {master or DEFAULT_MASTER}: {exc}") from exc
    session.sparkContext.setLogLevel("ERROR")
    if not local:
        # Executors on other machines have only what we send them: ship the pipeline's code.
        ship_packages(session)
    return session


def open_session(
    master: str | None = None, conf: Mapping[str, str] | None = None
) -> tuple[SparkSession, bool]:
    """The active SparkSession if there is one (a caller's, a test's), else a new one.

    Returns ``(session, owned)``: a job stops the session afterwards only if it started it.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailableError(
            "the spark engine needs PySpark: pip install 'rmq-query[spark]' (and a Java 17 runtime)"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    return build_session(master, conf=conf), True
