"""How long the sync pair's loop threads take to read what the kernel has received (#30).

``bench/latency.py``'s sync pair runs four Python threads on one interpreter lock (the thread
calling ``send``, the producer's and the consumer's loop threads, the thread calling
``poll``). A loop thread woken by a response or a fetch answer waits for the lock before it
can read it; that wait is what its tail latency is made of (docs/performance.md, "The sync
pair's tail"). Here the kernel stamps every segment the pair's client sockets receive
(Linux's ``SO_TIMESTAMPNS``, ``CLOCK_REALTIME``), and each read in a loop thread compares the
first segment's stamp with the clock when Python has the bytes: the delay from arrival to
read, scheduling and the lock's wait included. For each loop thread: the reads, the delay's
p50, p90, p99 and maximum, the share over 1 ms and the sum, per ``--rate`` and
``--switch-interval`` (CPython's default 5 ms, and others to compare: the bench sets the
interval only while its run lasts; kafkette never does).

The reads go through ``recvmsg_into`` instead of asyncio's ``recv_into`` (a patch of asyncio's
socket transport in this process only, while a run lasts); Linux only.

    .venv/bin/python bench/read_delay.py [--rate 50000] [--seconds 5] [--rounds 1]
        [--switch-interval 0.005 --switch-interval 0.0005]
"""

from __future__ import annotations

import argparse
import asyncio.selector_events
import contextlib
import socket
import struct
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import Plan, kafkette_sync
from kafkette import AdminClient, NewTopic
from tests.brokers import BrokerProcess

SO_TIMESTAMPNS = 35
"""Linux's socket option (and control message type) for nanosecond receive stamps."""
TIMESPEC = struct.Struct("@qq")
Transport = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]


class Delays:
    """Arrival-to-read delays (ns) per thread name, collected from the loop threads."""

    def __init__(self) -> None:
        self.by_thread: dict[str, list[int]] = defaultdict(list)

    def read_ready(self, transport: Any) -> None:
        """asyncio's ``_read_ready__get_buffer``, reading with ``recvmsg_into`` to get the
        kernel's stamp of the first segment read."""
        if transport._conn_lost:
            return
        sock = transport._sock
        if not getattr(transport, "_stamped", False):
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            transport._stamped = True
        buffer = transport._protocol.get_buffer(-1)
        try:
            nbytes, ancillary, _, _ = sock.recvmsg_into([buffer], socket.CMSG_SPACE(16))
        except (BlockingIOError, InterruptedError):
            return
        except Exception as exc:
            transport._fatal_error(exc, "Fatal read error on socket transport")
            return
        now = time.time_ns()
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = TIMESPEC.unpack_from(data)
                name = threading.current_thread().name
                self.by_thread[name].append(now - (seconds * 1_000_000_000 + nanoseconds))
        if not nbytes:
            transport._read_ready__on_eof()
            return
        transport._protocol.buffer_updated(nbytes)


@contextlib.contextmanager
def stamped_reads(delays: Delays) -> Iterator[None]:
    original = Transport._read_ready__get_buffer

    def read_ready(transport: Any) -> None:  # a function: bound to each transport
        delays.read_ready(transport)

    Transport._read_ready__get_buffer = read_ready
    try:
        yield
    finally:
        Transport._read_ready__get_buffer = original


@contextlib.contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def report(interval: float, delays: Delays, p99_ms: float) -> None:
    print(f"switch interval {interval * 1000:g} ms: end-to-end p99 {p99_ms:.2f} ms")
    for name, values in sorted(delays.by_thread.items()):
        values.sort()
        count = len(values)

        def at(fraction: float, ordered: list[int] = values, n: int = count) -> float:
            return ordered[min(n - 1, int(fraction * n))] / 1e3

        over = sum(v > 1_000_000 for v in values) / count
        print(
            f"  {name:<20} reads {count:>6,}  arrival to read, us: p50 {at(0.5):>6.0f}"
            f"  p90 {at(0.9):>6.0f}  p99 {at(0.99):>6.0f}  max {values[-1] / 1e3:>7.0f}"
            f"  over 1 ms {over:>5.1%}  sum {sum(values) / 1e6:>6.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=50_000, help="records/s")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=1, help="per switch interval, alternating")
    parser.add_argument(
        "--switch-interval", type=float, action="append", help="seconds (default: 0.005)"
    )
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        parser.error("Linux only (SO_TIMESTAMPNS)")
    intervals = args.switch_interval or [0.005]
    plan = Plan(args.rate, args.seconds, min(1.0, args.seconds / 5), 100, 5)
    print(f"kafkette-sync at {args.rate:,} records/s of 100 B for {args.seconds:g} s")
    with (
        BrokerProcess() as broker,
        AdminClient(bootstrap_servers=broker.bootstrap) as admin,
    ):
        for round_number in range(args.rounds):
            for interval in intervals:
                topic = f"bench-read-delay-{round_number}-{interval}"
                admin.create_topics([NewTopic(topic, 1)]).all()
                delays = Delays()
                try:
                    with switch_interval(interval), stamped_reads(delays):
                        run = kafkette_sync(broker.bootstrap, topic, plan)
                finally:
                    admin.delete_topics([topic]).all()
                report(interval, delays, run.percentile(0.99))


if __name__ == "__main__":
    main()
