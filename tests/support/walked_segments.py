"""Short walked segments for tests: the compiled walks record a segment every few entries of a chain.

The compiled key query caches the chain segments its long walks went through and passes over the ones
that cannot hold an answer or a stop for a later range (``store/index/_query_walk_core.h``, "Walked
segments"). By default it records only past the first 256 entries of a chain, 64 entries a segment:
the test stores' chains are shorter. ``short_segments`` makes both compiled modules that walk chains
(the store's ``query_files`` and the request path's query loop) record them from early on, so that
repeated queries over those stores go through the cache.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

MODULES = ("store.index._query_walk_fast", "server.remoting._request_path_fast")


def _compiled() -> list[ModuleType]:
    out = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "_set_segment_rules"):
            out.append(module)
    return out


@contextmanager
def short_segments(after: int = 8, length: int = 4) -> Iterator[Callable[[], int]]:
    """Segments of ``length`` entries recorded past a chain's first ``after``; yields a function
    giving the entries passed over by cached segments so far, in both modules."""
    modules = _compiled()
    old = [m._set_segment_rules(after, length) for m in modules]
    try:
        yield lambda: sum(m.segments_skipped() for m in modules)
    finally:
        for m, rules in zip(modules, old, strict=True):
            m._set_segment_rules(*rules)
