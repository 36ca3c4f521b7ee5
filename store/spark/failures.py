"""Turn a failed Spark job into one line that says what went wrong (out of memory, a task error).

Spark surfaces a task's failure as a long Java or Python stack trace; an operator needs the cause.
This digs the innermost exception line out of that text and recognises memory exhaustion, so the
command can say "stage 'decode records' failed: out of memory ..." and that nothing was replaced.
"""

from __future__ import annotations

import re

_EXCEPTION_LINE = re.compile(r"^\s*(?:Caused by: |: )?([\w.$]+(?:Error|Exception)\b.*)$")
_MEMORY_HINT = (
    "give the job more (--spark-conf spark.driver.memory=4g, --spark-conf spark.executor.memory=4g)"
    " or use smaller ranges (--range-mib)"
)
# A JVM heap, a Python worker's MemoryError, or an allocation the kernel refused (ENOMEM: a mapping
# or buffer past the worker's memory limit, e.g. spark.executor.pyspark.memory).
_MEMORY_SIGNS = ("OutOfMemoryError", "MemoryError", "Cannot allocate memory", "[Errno 12]")


def describe_failure(exc: BaseException) -> str:
    """A one-line cause for a Spark job failure."""
    text = str(exc)
    cause = _cause(exc, text)
    if isinstance(exc, MemoryError) or any(sign in text for sign in _MEMORY_SIGNS):
        # Say which allocation failed (a file, a task) as well as what to do about it.
        return f"out of memory ({cause}): {_MEMORY_HINT}"
    return cause


def _cause(exc: BaseException, text: str) -> str:
    """The innermost exception line of a (Java or Python) stack trace, or the first line of text."""
    causes = [m.group(1).strip() for line in text.splitlines() if (m := _EXCEPTION_LINE.match(line))]
    # Spark's wrappers come first and the task's own exception last: prefer a line from our code.
    for cause in reversed(causes):
        if cause.startswith(("store.", "protocol.")):
            return cause
    if causes:
        return causes[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
