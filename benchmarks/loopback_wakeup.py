"""The round trip of a bare loopback ping-pong between two pinned processes: the floor under a
sync SEND's latency, and how much of it is the wake-up of an idle vCPU (issue 33, item 3).

    python -m benchmarks.loopback_wakeup [--round-trips 20000] [--gap-us 0] [--server-core 1]

A forked child on ``--server-core`` echoes one byte over TCP (``TCP_NODELAY``, blocking sockets);
the parent on ``--client-core`` sends it and waits for the echo ``--round-trips`` times, sleeping
``--gap-us`` between round trips (a sync client has its own work between sends, and its peer goes
idle meanwhile). Prints one JSON line: p50, p90, p99 and max in µs. Run it with and without
something keeping the cores awake (BENCHMARKS.md says how it was done); nothing here spins.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time


def _echo(listener: socket.socket, core: int) -> None:
    os.sched_setaffinity(0, {core})
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(64):
        conn.sendall(data)


def measure(round_trips: int, gap_us: float, server_core: int, client_core: int) -> dict[str, float]:
    """Round-trip percentiles (µs) of ``round_trips`` one-byte exchanges, ``gap_us`` apart."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    address = listener.getsockname()
    pid = os.fork()
    if pid == 0:
        try:
            _echo(listener, server_core)
        finally:
            os._exit(0)
    listener.close()
    took: list[int] = []
    try:
        os.sched_setaffinity(0, {client_core})
        with socket.create_connection(address, timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            gap = gap_us / 1e6
            clock = time.perf_counter_ns
            for _ in range(round_trips):
                if gap:
                    time.sleep(gap)
                started = clock()
                sock.sendall(b"x")
                if not sock.recv(64):
                    raise ConnectionError("the echo process closed the connection")
                took.append(clock() - started)
    finally:
        # The echo child ends when the connection closes; one that never got it is ended here.
        if not took:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    took.sort()
    n = len(took)
    return {
        "round_trips": n,
        "gap_us": gap_us,
        "p50_us": round(took[n // 2] / 1000, 1),
        "p90_us": round(took[int(n * 0.9)] / 1000, 1),
        "p99_us": round(took[int(n * 0.99)] / 1000, 1),
        "max_us": round(took[-1] / 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=20000)
    parser.add_argument("--gap-us", type=float, default=0.0, help="sleep between round trips (µs)")
    parser.add_argument("--server-core", type=int, default=1)
    parser.add_argument("--client-core", type=int, default=0)
    args = parser.parse_args(argv)
    if args.round_trips < 1 or args.gap_us < 0 or args.round_trips > 10_000_000:
        parser.error("--round-trips must be 1..10,000,000 and --gap-us at least 0")
    cores = os.sched_getaffinity(0)
    if args.server_core not in cores or args.client_core not in cores:
        parser.error(f"--server-core and --client-core must be among this process's cores {sorted(cores)}")
    print(json.dumps(measure(args.round_trips, args.gap_us, args.server_core, args.client_core)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
