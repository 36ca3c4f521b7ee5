"""Instructions per VIEW_MESSAGE_BY_ID in-process, counted by valgrind: a figure noise cannot move.

    python -m benchmarks.view_instructions [--calls 20000] [--checkout DIR ...]

On a machine shared with other work, timings of a few microseconds move by 10-30% between runs;
instruction counts do not. For each checkout (this one by default; ``--checkout`` adds others, e.g.
``main`` unpacked with its accelerators built) a child process opens ``tests/golden/stores/java-4.9.7-a``,
answers 2000 VIEWs to warm up, then ``--calls`` more at one stage, under ``valgrind --tool=callgrind``;
the same child with 0 calls is subtracted, and the difference divided by the calls. Stages:
``dispatch`` (``Dispatcher.dispatch`` of a decoded request: the processor, the read, the answer) and
``whole`` (frame decode + dispatch + encode). What it cannot see: the cost of a system call inside the
kernel (the read's ``fstat``, ~0.3 us here) and cache misses; pair it with a timing.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("dispatch", "whole")


def child(stage: str, calls: int) -> None:
    """Answer ``calls`` VIEWs at ``stage`` (run under valgrind by ``main``, in the checkout measured:
    its code is imported, whichever checkout this script comes from)."""
    sys.path.insert(0, os.getcwd())
    from clients.samples import sample_store
    from protocol.codes import LanguageCode, RequestCode, SerializeType
    from protocol.command import RemotingCommand
    from protocol.frame import FrameDecoder, encode_frame, encode_frame_parts
    from server.app import ServerSettings, build_dispatcher
    from server.identity import BrokerIdentity
    from store.config.store_config import StoreConfig
    from store.message_store import MessageStore

    config = StoreConfig.load(REPO / "tests" / "golden" / "stores" / "java-4.9.7-a.broker.conf")
    samples = sample_store(config.store_path_root_dir)
    rng = random.Random(1)
    offsets = [rng.choice(samples.offsets) for _ in range(2000)]
    views = [
        RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, LanguageCode.JAVA, 407, i, 0, None,
                        {"offset": str(o)}, None, SerializeType.JSON)
        for i, o in enumerate(offsets)
    ]  # fmt: skip
    frames = [encode_frame(v) for v in views]
    identity = BrokerIdentity(
        cluster="DefaultCluster", broker_name="broker-a", address="127.0.0.1:1", queue_nums=4
    )
    with MessageStore.open(config) as store:
        dispatcher = build_dispatcher(store, identity, ServerSettings())
        for view in views:
            dispatcher.dispatch(view)
        n = len(views)
        if stage == "dispatch":
            for i in range(calls):
                dispatcher.dispatch(views[i % n])
        else:
            for i in range(calls):
                encode_frame_parts(dispatcher.dispatch(FrameDecoder().feed(frames[i % n])[0]))  # type: ignore[arg-type]


def instructions(checkout: Path, stage: str, calls: int) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--child", stage, str(calls)]  # fmt: skip
    out = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, check=True).stderr
    match = re.search(r"Collected : (\d+)", out)
    if match is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{out[-2000:]}")
    return int(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    print("| checkout | stage | instructions per VIEW |")
    print("|---|---|---:|")
    for checkout in [REPO, *args.checkout]:
        for stage in STAGES:
            per_call = (
                instructions(checkout, stage, args.calls) - instructions(checkout, stage, 0)
            ) // args.calls
            print(f"| {checkout} | {stage} | {per_call:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
