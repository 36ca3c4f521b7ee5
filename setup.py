"""Build the optional C accelerators; everything else is declared in pyproject.toml.

Each extension sits beside the pure-Python module it accelerates (see ``protocol/accel.py``).
``optional=True``: without a C compiler the build skips them and the package still installs and
works, on the pure-Python implementations.
"""

from pathlib import Path

from setuptools import Extension, setup

#: (module name, C source). Add an accelerator here; its Python twin loads it via protocol.accel.
ACCELERATORS: list[tuple[str, str]] = [
    ("store.index._index_range_fast", "store/index/_index_range_fast.c"),
    ("store.commitlog._record_fast", "store/commitlog/_record_fast.c"),
    ("store.write._batch_encode_fast", "store/write/_batch_encode_fast.c"),
    # Not an accelerator but the same optional build: turns SIGBUS from a file cut under a map into
    # zero pages (store/platform/sigbus.py says why and what runs without it).
    ("store.platform._sigbus_guard", "store/platform/_sigbus_guard.c"),
    # Before _frame_fast, whose frame decoder calls its JSON header decoder through a capsule.
    ("protocol._header_json_fast", "protocol/_header_json_fast.c"),
    ("protocol._frame_fast", "protocol/_frame_fast.c"),
    ("store.index._query_walk_fast", "store/index/_query_walk_fast.c"),
    ("protocol._index_key_fast", "protocol/_index_key_fast.c"),
    ("protocol._batch_decode_fast", "protocol/_batch_decode_fast.c"),
    ("store.commitlog._view_read_fast", "store/commitlog/_view_read_fast.c"),
    ("store.consumequeue._consume_queue_fast", "store/consumequeue/_consume_queue_fast.c"),
    ("store.consumequeue._consume_queue_build_fast", "store/consumequeue/_consume_queue_build_fast.c"),
    ("server.remoting._request_path_fast", "server/remoting/_request_path_fast.c"),
    ("store.platform._file_facts_fast", "store/platform/_file_facts_fast.c"),
    ("store.check._index_scan_fast", "store/check/_index_scan_fast.c"),
    ("store.spark._key_columns_fast", "store/spark/_key_columns_fast.c"),
    ("server.grpc._message_bytes_fast", "server/grpc/_message_bytes_fast.c"),
]

#: The shared C headers (the CRC-32, the CommitLog record layout, the key hash in ``protocol/``; the
#: VIEW read in ``store/commitlog/``; the key query's walks in ``store/index/``) live beside the Python
#: modules that state the same rules; every accelerator may include them by name.
INCLUDE_DIRS = ["protocol", "store/commitlog", "store/index"]

#: Every C header of the package: an extension is rebuilt when any of them changes (setuptools
#: compares only the sources' times otherwise, and a header edit left the old build running).
HEADERS = sorted(str(p) for top in ("protocol", "store", "server") for p in Path(top).rglob("*.h"))

setup(
    ext_modules=[
        Extension(
            name,
            [source],
            include_dirs=INCLUDE_DIRS,
            depends=HEADERS,
            optional=True,
            extra_compile_args=["-O2"],
        )
        for name, source in ACCELERATORS
    ]
)
