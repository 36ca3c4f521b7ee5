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

Packages imported from a zip (a Spark cluster's executors get ``protocol`` and ``store`` as one
archive: ``store.spark.session.ship_packages``) cannot import an extension module from it: Python
loads those from files only. ``load`` then copies the module out of the archive, once per archive,
into a directory of its own and loads it from there, so the executors run the compiled code too.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import stat
import sys
import tempfile
import zipfile
import zipimport
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
        try:
            zipped = _from_zip(name)
        except (ImportError, OSError, zipfile.BadZipFile):
            zipped = None
        if zipped is not None:
            return zipped
        if not _said_missing:
            _said_missing = True
            log.warning(
                "compiled accelerators are not built (%s); running the pure-Python implementations, "
                "which are slower (reinstall with a C compiler: pip install -e .)",
                exc,
            )
        return None


def _from_zip(name: str) -> ModuleType | None:
    """The compiled module ``name`` from the zip its package was imported from, or None."""
    package, _, leaf = name.rpartition(".")
    parent = importlib.import_module(package)
    loader = getattr(parent, "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter) or not getattr(parent, "__path__", None):
        return None
    archive = loader.archive
    inside = parent.__path__[0][len(archive) + 1 :].replace(os.sep, "/")
    info = os.stat(archive)
    tag = hashlib.sha1(f"{archive}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:16]
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            member = f"{inside}/{leaf}{suffix}"
            if member not in names:
                continue
            target = os.path.join(_private_dir(tag), member)
            if not os.path.exists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                partial = f"{target}.{os.getpid()}.tmp"
                with open(partial, "wb") as fh:
                    fh.write(zf.read(member))
                os.replace(partial, target)  # atomic: concurrent workers never load half a file
            spec = importlib.util.spec_from_file_location(name, target)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
    return None


def _private_dir(tag: str) -> str:
    """The directory the compiled modules of archive ``tag`` are copied to: this user's alone.

    Code is loaded from it, so a name in the shared temporary directory that another user could
    create first (a planted module, or a symlink) must never be used: the directory is made with
    mode 0700 and used only when it is a real directory, owned by this user, that nobody else may
    write; otherwise a fresh one of this process's own is made.
    """
    uid = os.getuid()
    path = os.path.join(tempfile.gettempdir(), f"rmq-accel-{uid}-{tag}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o077:
        return path
    return tempfile.mkdtemp(prefix=f"rmq-accel-{tag}-")
