"""Compiled accelerators: find the C module beside a pure-Python one, or say once why there is none.

Every hot function has two implementations with the same name: the readable reference in a
pure-Python module (``store/index/index_file.py``, say) and a compiled one in a C extension beside it
(``store/_index_file_fast.c``), built by ``setup.py`` when the machine has a C compiler. The
pure-Python module ends by asking ``load("store._index_file_fast")`` and, when it gets a module,
rebinds its names to the compiled ones. The compiled module is an optimisation, never a requirement:

- ``RMQ_PURE_PYTHON=1`` in the environment forces the references everywhere (the test suite runs
  once each way, so both stay correct);
- a machine without a compiler installs without the extension, and the first ``load`` logs one
  line saying the server runs on the slower pure-Python path.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger("protocol.accel")

#: Set to any value but "" or "0" to use the pure-Python reference implementations only.
PURE_PYTHON_ENV = "RMQ_PURE_PYTHON"

_said_missing = False


def pure_python() -> bool:
    """True when the environment asks for the pure-Python implementations."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it is not built or pure Python is asked for."""
    global _said_missing
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if not _said_missing:
            _said_missing = True
            log.warning(
                "compiled accelerators are not built (%s); running the pure-Python implementations, "
                "which are slower (reinstall with a C compiler: pip install -e .)",
                exc,
            )
        return None
