"""One log line per problem, not one per query: a damaged file is reported when first met.

A query server answers thousands of queries a second; a corrupt index chain or a truncated
CommitLog file met by each of them must not flood the log, yet must not go unmentioned either. Each
file object (and the store) keeps the problems it already reported, so a reopened store (after a
repair, say) reports again, but a running one reports each problem once.
"""

from __future__ import annotations

import logging
import threading


class WarnOnce:
    """Logs ``message`` at WARNING the first time ``key`` is seen by this object."""

    __slots__ = ("_lock", "_logger", "_seen")

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, key: str, message: str) -> bool:
        """Log ``message`` unless ``key`` was reported before; True when it was logged now."""
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        self._logger.warning("%s", message)
        return True

    def mark(self, key: str) -> None:
        """Count ``key`` as reported (a line that said it already was logged elsewhere)."""
        with self._lock:
            self._seen.add(key)

    def forget(self, prefix: str) -> None:
        """Report the problems whose key starts with ``prefix`` again when next met (it was repaired:
        the same damage later is a new event)."""
        with self._lock:
            self._seen = {k for k in self._seen if not k.startswith(prefix)}

    def seen(self, key: str) -> bool:
        return key in self._seen
