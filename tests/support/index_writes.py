"""Crash tests' view of the compiled range indexer's writes to an IndexFile.

``store/index/_index_range_fast.c`` writes the mapped file directly, so the tests that count or interrupt
``IndexFile.put_hash``'s writes cannot patch Python there. The C module calls a hook before each of
the same three writes of a put (entry, slot, header); ``hook_compiled_writes`` installs one for as
long as the monkeypatch lasts, on whichever ``index_range`` the builder uses.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from store.index import builder as index_builder
from store.index import index_range


def hook_compiled_writes(monkeypatch: pytest.MonkeyPatch, before_write: Callable[[], object]) -> bool:
    """Call ``before_write`` before every index write of the compiled indexer; False if it is not in use."""
    real = index_builder.index_range
    if real is index_range.index_range_reference:
        return False
    from store.index import _index_range_fast

    def hooked(*args: object) -> object:
        _index_range_fast._set_write_hook(before_write)
        try:
            return real(*args)
        finally:
            _index_range_fast._set_write_hook(None)

    monkeypatch.setattr(index_builder, "index_range", hooked)
    return True
