"""Turn a failed Spark job into one line that says what went wrong (out of memory, a task error).

Spark surfaces a task's failure as a long Java or Python stack trace; an operator needs the cause.
This digs the innermost exception line out of that text and recognises memory exhaustion, so the
command can say "stage 'decode records' failed: out of memory ..." and that nothing was replaced.
"""

from __future__ import annotations

import re

_EXCEPTION_LINE = re.compile(r"^\s*(?:Caused by: )?([\w.$]+(?:Error|Exception)\b.*)$")
_MEMORY_HINT = (
    "out of memory: give the job more (--conf spark.driver.memory / spark.executor.memory), or smaller ranges"
)


def describe_failure(exc: BaseException) -> str:
    """A one-line cause for a Spark job failure."""
    text = str(exc)
    if isinstance(exc, MemoryError) or "OutOfMemoryError" in text or "MemoryError" in text:
        return _MEMORY_HINT
    causes = [m.group(1).strip() for line in text.splitlines() if (m := _EXCEPTION_LINE.match(line))]
    # Spark's wrappers come first and the task's own exception last: prefer a line from our code.
    for cause in reversed(causes):
        if cause.startswith(("store.", "protocol.")):
            return cause
    if causes:
        return causes[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
