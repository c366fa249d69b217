"""What CPython's garbage collector costs a disk broker of many partitions, with and without
``kafkette serve``'s collector policy (:mod:`kafkette.server.collector`, #30).

Each round is a fresh process (``--child off|on``) running a ``Broker`` on a scratch data
directory in its own event loop, as ``kafkette serve`` does (its background tasks
running; ``on``: ``Broker.own_collector()``, as ``kafkette serve`` calls it): CreateTopics
of ``--partitions`` (10,000), then produce requests of 1,000 partitions each, one 200 B
record per partition (``first``: every partition's first write), then the same again
(``steady``). Meanwhile a task on the loop sleeps 10 ms at a time and records how late
each sleep ends (a stalled loop wakes it late), and a ``gc.callbacks`` hook records the
CPU time (``time.thread_time``: not inflated when a loaded machine preempts the process)
of every collection, by generation. Rounds alternate off/on; the table gives the median
and the best round.

    .venv/bin/python bench/collector.py [--partitions 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette.protocol.messages import CreateTopicsRequest, ProduceRequest
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.server import Broker, BrokerConfig, RequestContext

PHASES = ("create", "first", "steady")
PER_REQUEST = 1_000


def child(mode: str, partitions: int) -> dict[str, dict[str, float]]:
    """One round in this process: per phase, the loop's worst lateness (ms), the number
    of full collections and the CPU ms of the longest one."""
    phase = "start"
    started = 0.0
    full: dict[str, list[float]] = {}
    late: dict[str, list[float]] = {}

    def on_collection(stage: str, info: dict[str, int]) -> None:
        nonlocal started
        if stage == "start":
            started = time.thread_time()
        elif info["generation"] == 2:
            full.setdefault(phase, []).append(time.thread_time() - started)

    gc.callbacks.append(on_collection)
    data_dir = tempfile.mkdtemp(prefix="bench-collector-")
    broker = Broker(BrokerConfig(data_dir=data_dir))
    if mode == "on":
        broker.own_collector()
    builder = RecordBatchBuilder()
    builder.append(0, None, b"x" * 200)
    record = builder.build()

    def ctx(api_key: int, version: int) -> RequestContext:
        return RequestContext(RequestHeader(api_key, version, 1, "bench"))

    async def probe() -> None:
        while True:
            before = time.perf_counter()
            await anyio.sleep(0.01)
            late.setdefault(phase, []).append(time.perf_counter() - before - 0.01)

    async def main() -> None:
        nonlocal phase
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(broker.run_background)
            tasks.start_soon(probe)
            await anyio.sleep(0.2)
            phase = "create"
            topic = CreatableTopic(name="wide", num_partitions=partitions, replication_factor=1)
            created = await broker.handle(
                ctx(19, 5), CreateTopicsRequest(topics=[topic], timeout_ms=120_000)
            )
            assert created.topics[0].error_code == 0, created  # type: ignore[union-attr]
            for name in ("first", "steady"):
                phase = name
                for start in range(0, partitions, PER_REQUEST):
                    wanted = range(start, min(partitions, start + PER_REQUEST))
                    request = ProduceRequest(
                        acks=1,
                        timeout_ms=5000,
                        topic_data=[
                            TopicProduceData(
                                "wide", [PartitionProduceData(i, record) for i in wanted]
                            )
                        ],
                    )
                    answer = await broker.handle(ctx(0, 9), request)
                    assert answer is not None
                    codes = {p.error_code for p in answer.responses[0].partition_responses}  # type: ignore[attr-defined]
                    assert codes == {0}, codes
                    await anyio.sleep(0.005)
            phase = "end"
            tasks.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        name: {
            "late_ms": 1000 * max(late.get(name, [0.0])),
            "full": len(full.get(name, [])),
            "full_cpu_ms": 1000 * max(full.get(name, [0.0])),
        }
        for name in PHASES
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=("off", "on"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.partitions)))
        return
    rounds: dict[str, list[dict[str, dict[str, float]]]] = {"off": [], "on": []}
    for number in range(args.rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--partitions", str(args.partitions)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rounds[mode].append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"{args.partitions} partitions on disk, {args.rounds} alternating rounds; "
        "median (best) of each round's worst"
    )
    print(
        f"{'phase':<8}{'policy':<8}{'loop late ms':>20}{'full GCs':>10}{'longest GC, CPU ms':>24}"
    )
    for name in PHASES:
        for mode in ("off", "on"):
            cells = [r[name] for r in rounds[mode]]
            late = [c["late_ms"] for c in cells]
            cpu = [c["full_cpu_ms"] for c in cells]
            count = statistics.median(c["full"] for c in cells)
            print(
                f"{name:<8}{mode:<8}{statistics.median(late):>11.0f} ({min(late):>5.0f})"
                f"{count:>10g}{statistics.median(cpu):>15.0f} ({min(cpu):>5.0f})"
            )


if __name__ == "__main__":
    main()
