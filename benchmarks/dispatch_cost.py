"""Where the time of ``Reput.dispatch_written`` goes: the settle's consume-queue and index dispatch of
the writer's own appends, split into its compiled calls, its system calls and the Python around them.

    taskset -c 1 python -m benchmarks.dispatch_cost --settles 2000 [--group 32] [--queues 4]
        [--kit-geometry] [--warm 60000]

Why a tool of its own (``benchmarks.put_cost`` times the whole put): deciding whether the dispatch's
Python is worth compiling needs the Python alone, which is what is left of each layer once its
compiled calls (``extract_entries``, ``index_range``) and its ``pwrite`` are taken out, and needs the
broker's geometry. The test kit's index files hold 4,000 keys, so a batch of 32 keyed messages rolls
to a new index file every 62 batches and each roll (a file created, its slots reserved) costs ~0.7 ms:
in the kit's geometry (``--kit-geometry``) a third of a batch's "dispatch" is that roll, which a broker
with its default geometry (20 million keys a file) pays once a few hundred thousand batches. The
default run therefore uses the broker's default index geometry and first stores ``--warm`` messages
(their keys touch the slot table's pages, as a running broker's have), then times ``--settles``
settles of ``--group`` appends each (``append`` of the group at once, as a batch is appended),
``--queues`` queues in turn message by message (a settle of several queues writes
the build mark), one 1 KiB body with KEYS and a UNIQ_KEY a message.

Each part is timed by wrapping the store's own functions with ``perf_counter``; a wrapper's own cost
(measured here, printed as ``wrapper_us``) is subtracted once for each wrapped call inside a part, so
the Python shares are what remains of a part after its wrapped children and their wrappers. Figures
are µs per settle; the best (least) run of ``--rounds`` is printed, each part from that same run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The wrapped functions: (label, where it is found, attribute). Labels name the parts printed.
WRAPPED = (
    ("dispatch_written", "reput", "dispatch_written"),
    ("cq", "cq", "dispatch"),
    ("cq_extract_entries_c", "cq_module", "extract_entries"),
    ("cq_pwrite", "cq_module", "_write_all"),
    ("ix", "ix", "dispatch"),
    ("ix_index_range_c", "ix_module", "index_range"),
    ("ix_reserve", "index_file_class", "reserve"),
    ("ix_roll", "ix", "_roll"),
)


class _Timer:
    """Accumulated seconds and calls per label; only calls made inside the outermost label (``root``)
    count (a settle that walks with ``run_once`` instead reaches the same functions otherwise)."""

    def __init__(self, root: str = "") -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.root = root
        self.inside = not root

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.seconds[label] = 0.0
        self.calls[label] = 0
        seconds, calls, clock, is_root = self.seconds, self.calls, time.perf_counter, label == self.root

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if not (self.inside or is_root):
                return fn(*args, **kwargs)
            self.inside = True
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[label] += clock() - started
                calls[label] += 1
                if is_root:
                    self.inside = False

        return wrapped

    def reset(self) -> None:
        for label in self.seconds:
            self.seconds[label] = 0.0
            self.calls[label] = 0


def wrapper_cost(rounds: int = 20000) -> float:
    """Seconds one wrapper adds around a call (a wrapped no-op against the bare no-op)."""
    timer = _Timer()

    def noop() -> None:
        return None

    wrapped = timer.wrap("noop", noop)
    started = time.perf_counter()
    for _ in range(rounds):
        noop()
    bare = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(rounds):
        wrapped()
    return max(0.0, (time.perf_counter() - started - bare) / rounds)


def measure(settles: int, group: int = 1, queues: int = 1, kit_geometry: bool = False, warm: int = 0) -> dict:
    """One run: µs per settle of every part, and the Python left in each layer."""
    import store.config.store_config as store_config
    import store.consumequeue.builder as cq_module
    import store.index.builder as ix_module
    from clients.testkit.server import kit_store_config
    from server.broker.writable_store import WritableStore
    from store.index.index_file import IndexFile
    from store.write.writer import StoreRecord

    geometry = (
        {}
        if kit_geometry
        else {
            "max_index_num": store_config.DEFAULT_MAX_INDEX_NUM,
            "max_hash_slot_num": store_config.DEFAULT_MAX_HASH_SLOT_NUM,
        }
    )
    props = "KEYS\x01key-%d\x02TAGS\x01TagA\x02UNIQ_KEY\x01%032X\x02"
    body = b"x" * 1024
    timer = _Timer(root="dispatch_written")
    originals: list[tuple[Any, str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = WritableStore(kit_store_config(Path(tmp) / "store", **geometry))
        try:
            for first in range(0, warm, 32):
                store.append([StoreRecord("Warm", body, props % (i, i)) for i in range(first, first + 32)])
                store.settle()
            reput = store.reader._reput  # the benchmark looks inside on purpose
            assert reput is not None
            owners: dict[str, Any] = {
                "reput": reput,
                "cq_module": cq_module,
                "ix_module": ix_module,
                "index_file_class": IndexFile,
            }
            for d in reput.dispatchers:
                owners["cq" if isinstance(d, cq_module.ConsumeQueueBuilder) else "ix"] = d
            for label, owner, attr in WRAPPED:
                target = owners[owner]
                originals.append((target, attr, vars(target).get(attr)))
                setattr(target, attr, timer.wrap(label, getattr(target, attr)))
            batches = [
                [
                    StoreRecord("DispatchCost", body, props % (i, i), queue_id=i % queues)
                    for i in range(n * group, (n + 1) * group)
                ]
                for n in range(settles)
            ]
            started = time.perf_counter()
            for batch in batches:
                store.append(batch)
                store.settle()
            whole = time.perf_counter() - started
        finally:
            for target, attr, original in originals:
                if original is None:
                    delattr(target, attr)  # an instance's wrapper: its class's method again
                else:
                    setattr(target, attr, original)
            store.close()
    s, c = timer.seconds, timer.calls
    w = wrapper_cost()
    per = 1e6 / settles
    cq_children = ("cq_extract_entries_c", "cq_pwrite")
    ix_children = ("ix_index_range_c", "ix_reserve", "ix_roll")
    cq_python = s["cq"] - sum(s[k] + c[k] * w for k in cq_children)
    ix_python = s["ix"] - sum(s[k] + c[k] * w for k in ix_children)
    reput_python = s["dispatch_written"] - (s["cq"] + c["cq"] * w) - (s["ix"] + c["ix"] * w)
    out = {"settle_and_append_us": whole * per}
    out.update({f"{k}_us": v * per for k, v in s.items()})
    out.update(
        {
            "cq_python_us": cq_python * per,
            "ix_python_us": ix_python * per,
            "reput_python_us": reput_python * per,
            "ix_rolls_per_settle": c["ix_roll"] / settles,
            # Settles that took the written path (the rest walked with ``run_once``, not timed here).
            "written_path_share": c["dispatch_written"] / settles,
            "wrapper_us": w * 1e6,
        }
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settles", type=int, default=2000, help="settles timed (default 2000)")
    parser.add_argument("--group", type=int, default=1, help="messages appended a settle (default 1)")
    parser.add_argument("--queues", type=int, default=1, help="queues written in turn (default 1)")
    parser.add_argument("--warm", type=int, default=60000, help="messages stored before the timing")
    parser.add_argument("--rounds", type=int, default=3, help="runs; the least is printed (default 3)")
    parser.add_argument(
        "--kit-geometry", action="store_true", help="the test kit's small index files (they roll often)"
    )
    args = parser.parse_args(argv)
    if args.settles < 1 or args.group < 1 or args.queues < 1 or args.warm < 0 or args.rounds < 1:
        parser.error("--settles, --group, --queues and --rounds must be at least 1, --warm at least 0")
    runs = [
        measure(args.settles, args.group, args.queues, args.kit_geometry, args.warm)
        for _ in range(args.rounds)
    ]
    best = min(runs, key=lambda r: r["dispatch_written_us"])
    print(json.dumps({k: round(v, 2) for k, v in best.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
