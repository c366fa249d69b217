"""Consumer groups: a member joining a consuming group, and group formation.

By default, the time for a consuming group to absorb one joining member and
the records the other members processed meanwhile, classic eager, classic
cooperative-sticky and group.protocol=consumer (KIP-848), kafkette and
librdkafka (bench/group_absorb.py, described below), about 2 minutes here:

    .venv/bin/python bench/groups.py [--members 10] [--partitions 20] [--rounds 2]
        [--rate 1000] [--heartbeat-ms MS] [--work-ms MS] [--only NAME]

With --formation, group formation, kafkette vs confluent-kafka and aiokafka:
on one ``kafkette serve --memory`` child process, a 200-partition topic:
20 consumers of one client subscribe at once to a fresh group (range
assignor); measured is the time until the group is stable (every partition
owned by exactly one member, 10 each). Then a 21st member subscribes; measured
is the time until the 21 members are stable again (9 or 10 each). Each client
runs its 20 members in one process: kafkette's and aiokafka's as tasks of one
asyncio loop (each member polling), confluent-kafka's as 20 consumers polled
in turn from one thread (librdkafka runs the group protocol in its own
threads). Members learn of a rebalance from their next heartbeat
(``heartbeat.interval.ms``, 3 s by default in every client), which bounds
the "+1 join" time from below. Best of ``--repeat`` rounds, each with a new group; the broker runs
with ``group.initial.rebalance.delay.ms=0``, the default of ``kafkette serve``.

    .venv/bin/python bench/groups.py --formation [--members 20] [--partitions 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer as ConfluentConsumer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.group_absorb import VARIANTS, bench_absorb
from bench.group_absorb import __doc__ as ABSORB_DOC
from kafkette import AdminClient, AsyncConsumer, NewTopic
from tests.brokers import BrokerProcess

TIMEOUT_S = 120.0
POLL_S = 0.05
TOPIC = "bench-groups"


def stable(assignments: Sequence[set[int]], partitions: int) -> bool:
    """Every partition owned once, shares differing by at most one."""
    sizes = [len(a) for a in assignments]
    owned = set().union(*assignments)
    return sum(sizes) == partitions and len(owned) == partitions and max(sizes) - min(sizes) <= 1


async def run_async_members(
    make: Callable[[], Any],
    start: Callable[[Any], Any],
    poll: Callable[[Any], Any],
    assignment: Callable[[Any], set[int]],
    stop: Callable[[Any], Any],
    members: int,
    partitions: int,
) -> tuple[float, float]:
    """Times to a stable group of ``members``, then of one more (asyncio clients)."""
    consumers: list[Any] = []
    done = asyncio.Event()

    async def member(consumer: Any) -> None:
        await start(consumer)
        while not done.is_set():
            await poll(consumer)

    async def until_stable(count: int) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not stable([assignment(c) for c in consumers[:count]], partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} members not stable in {TIMEOUT_S}s")
            await asyncio.sleep(0.01)

    tasks = []
    try:
        began = time.perf_counter()
        for _ in range(members):
            consumers.append(make())
            tasks.append(asyncio.create_task(member(consumers[-1])))
        await until_stable(members)
        formed = time.perf_counter() - began
        began = time.perf_counter()
        consumers.append(make())
        tasks.append(asyncio.create_task(member(consumers[-1])))
        await until_stable(members + 1)
        joined = time.perf_counter() - began
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(stop(c) for c in consumers), return_exceptions=True)
    return formed, joined


def kafkette_round(
    bootstrap: str, group: str, members: int, partitions: int
) -> tuple[float, float]:
    def make() -> AsyncConsumer:
        return AsyncConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy="range",
            enable_auto_commit=False,
        )

    async def start(consumer: AsyncConsumer) -> None:
        await consumer.__aenter__()
        consumer.subscribe([TOPIC])

    async def poll(consumer: AsyncConsumer) -> None:
        await consumer.poll(timeout_ms=POLL_S * 1000)

    def assignment(consumer: AsyncConsumer) -> set[int]:
        try:
            return {tp.partition for tp in consumer.assignment()}
        except Exception:  # not started yet
            return set()

    async def stop(consumer: AsyncConsumer) -> None:
        await consumer.close()

    return asyncio.run(run_async_members(make, start, poll, assignment, stop, members, partitions))


def aiokafka_round(
    bootstrap: str, group: str, members: int, partitions: int
) -> tuple[float, float]:
    async def main() -> tuple[float, float]:
        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group)

        async def start(consumer: AIOKafkaConsumer) -> None:
            await consumer.start()

        async def poll(consumer: AIOKafkaConsumer) -> None:
            await consumer.getmany(timeout_ms=int(POLL_S * 1000))

        def assignment(consumer: AIOKafkaConsumer) -> set[int]:
            return {tp.partition for tp in consumer.assignment()}

        async def stop(consumer: AIOKafkaConsumer) -> None:
            await consumer.stop()

        return await run_async_members(make, start, poll, assignment, stop, members, partitions)

    return asyncio.run(main())


def confluent_round(
    bootstrap: str, group: str, members: int, partitions: int
) -> tuple[float, float]:
    consumers: list[ConfluentConsumer] = []

    def add() -> None:
        consumer = ConfluentConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([TOPIC])
        consumers.append(consumer)

    def until_stable() -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for consumer in consumers:
                consumer.poll(0)
            owned = [{tp.partition for tp in c.assignment()} for c in consumers]
            if stable(owned, partitions):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(consumers)} members not stable in {TIMEOUT_S}s")
            time.sleep(0.01)

    try:
        began = time.perf_counter()
        for _ in range(members):
            add()
        until_stable()
        formed = time.perf_counter() - began
        began = time.perf_counter()
        add()
        until_stable()
        joined = time.perf_counter() - began
    finally:
        for consumer in consumers:
            consumer.close()
    return formed, joined


CLIENTS = {
    "kafkette (async)": kafkette_round,
    "confluent-kafka": confluent_round,
    "aiokafka": aiokafka_round,
}


def create_topic(bootstrap: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, partitions, 1)]).all()


def bench_formation(bootstrap: str, args: argparse.Namespace) -> None:
    """Form a group of ``args.members`` and join one more, each client, best of ``--repeat``."""
    best: dict[str, tuple[float, float]] = {}
    for round_no in range(args.repeat):
        for name, run in CLIENTS.items():
            group = f"bench-{name.split()[0]}-{round_no}"
            formed, joined = run(bootstrap, group, args.members, args.partitions)
            old = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(old[0], formed), min(old[1], joined))
    print(
        f"\n{args.members} members forming a group on {args.partitions} partitions, "
        f"then one more joining (best of {args.repeat}, seconds):"
    )
    print(f"  {'client':<18} {'form':>8} {'+1 join':>8}")
    for name, (formed, joined) in best.items():
        print(f"  {name:<18} {formed:>8.2f} {joined:>8.2f}")
    ours = best["kafkette (async)"]
    for name, (formed, joined) in best.items():
        if name != "kafkette (async)":
            print(
                f"  kafkette vs {name}: form {formed / ours[0]:.2f}x faster, "
                f"+1 join {joined / ours[1]:.2f}x faster"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, epilog=ABSORB_DOC, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--formation",
        action="store_true",
        help="instead of the absorb table: group formation, kafkette vs confluent-kafka/aiokafka",
    )
    parser.add_argument("--members", type=int, help="group size (absorb: 10, formation: 20)")
    parser.add_argument(
        "--partitions", type=int, help="topic partitions (absorb: 20, formation: 200)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="absorb: joins per variant (2)")
    parser.add_argument("--rate", type=int, default=1000, help="absorb: records/s produced (1000)")
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        help="absorb: heartbeat.interval.ms of classic members and the broker's "
        "group.consumer.heartbeat.interval.ms (default: Kafka's, 3000 and 5000)",
    )
    parser.add_argument(
        "--work-ms",
        type=float,
        default=0.0,
        help="absorb: time each record takes to process, between polls (0)",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="absorb: variants whose name contains this"
    )
    parser.add_argument("--repeat", type=int, default=3, help="formation: rounds, best kept (3)")
    args = parser.parse_args()
    if args.formation:
        args.members = 20 if args.members is None else args.members
        args.partitions = 200 if args.partitions is None else args.partitions
    else:
        args.members = 10 if args.members is None else args.members
        args.partitions = 20 if args.partitions is None else args.partitions
        names = [v.name for v in VARIANTS]
        for only in args.only:
            if not any(only in name for name in names):
                parser.error(f"--only {only!r} matches none of: {', '.join(names)}")
        if args.members < 1 or args.rounds < 1 or args.rate < 1:
            parser.error("--members, --rounds and --rate must be positive")
        if args.partitions <= args.members:
            parser.error("--partitions must exceed --members, so the new member has a share")
        if args.heartbeat_ms is not None and args.heartbeat_ms < 1:
            parser.error("--heartbeat-ms must be positive")
        if args.work_ms < 0:
            parser.error("--work-ms must not be negative")
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # its rebalance chatter
    broker_args: tuple[str, ...] = ()
    if args.heartbeat_ms is not None and not args.formation:
        broker_args = ("--set", f"group.consumer.heartbeat.interval.ms={args.heartbeat_ms}")
    with BrokerProcess(args=broker_args) as broker:
        create_topic(broker.bootstrap, args.partitions)
        if args.formation:
            bench_formation(broker.bootstrap, args)
        else:
            bench_absorb(broker.bootstrap, TOPIC, args, args.only)


if __name__ == "__main__":
    main()
