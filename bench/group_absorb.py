"""A consuming group absorbing one more member: classic eager, cooperative, KIP-848.

``bench/groups.py`` runs this (its default); the measuring is here. On one
``kafkette serve --memory`` child process, a topic (20 partitions by default)
receives records continuously from a producer in a child process
(confluent-kafka, ``--rate`` records/s, keyed so that every partition gets
some). For each variant a group of ``--members`` consumers (10) forms and
consumes; then, ``--rounds`` times: the group is left to settle and its
records/s measured for ``BASELINE_S``, one more member subscribes, and

- **absorb** is the time from that member's ``subscribe`` until every
  partition is owned by exactly one member and every member, the new one
  included, owns ``floor(P/n)`` or ``ceil(P/n)`` partitions, as the members'
  own ``assignment()`` report it (sampled every ``SAMPLE_S``);
- **others** are the records ``poll`` returned to the members already in the
  group during that window; **kept** compares their records/s in the window
  with their records/s before the join (100% = they never stopped);
- **pause** is the longest time one of those members went without records,
  from the join until its first records after the window.

The new member then closes (leaves) and the group settles again before the
next round. Each variant forms its group once and runs its rounds on it; the
members of one client run in one asyncio loop (kafkette's AsyncConsumer, or
confluent-kafka consumers polled with ``consume(timeout=0)``; librdkafka runs
the group protocol in its own threads). With ``--work-ms`` a member "processes"
each record for that long (an asyncio sleep after the poll, so one member's
work does not hold up the others), so that a member rejoins only after the
batch in hand, as an application's poll loop does. Heartbeat intervals are Kafka's
defaults unless ``--heartbeat-ms`` is given: 3 s for classic members
(``heartbeat.interval.ms``) and 5 s for the new protocol (the broker's
``group.consumer.heartbeat.interval.ms``); members learn of a rebalance at
their next heartbeat, which bounds absorb from below.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer

from kafkette import AsyncConsumer

TIMEOUT_S = 90.0
SAMPLE_S = 0.01
POLL_S = 0.05
SETTLE_S = 1.0
BASELINE_S = 2.0
VALUE = b"v" * 100


@dataclass(frozen=True)
class Variant:
    """One group protocol on one client, with the consumer settings it takes."""

    name: str
    client: str  # "kafkette" or "confluent"
    settings: dict[str, Any]

    @property
    def classic(self) -> bool:
        return str(self.settings.get("group.protocol", "classic")) == "classic"


VARIANTS = (
    Variant(
        "kafkette classic eager (range)", "kafkette", {"partition.assignment.strategy": "range"}
    ),
    Variant(
        "kafkette classic cooperative-sticky",
        "kafkette",
        {"partition.assignment.strategy": "cooperative-sticky"},
    ),
    Variant("kafkette group.protocol=consumer", "kafkette", {"group.protocol": "consumer"}),
    Variant(
        "librdkafka classic cooperative-sticky",
        "confluent",
        {"partition.assignment.strategy": "cooperative-sticky"},
    ),
    Variant("librdkafka group.protocol=consumer", "confluent", {"group.protocol": "consumer"}),
)


@dataclass(frozen=True)
class Round:
    """One join: seconds to absorb it, the others' records in it, their rate kept."""

    absorb_s: float
    others: int
    kept: float
    pause_s: float


@dataclass
class Member:
    """One consumer of the group and what its polls returned, with their times."""

    poll: Callable[[], Any]  # awaitable: the number of records returned
    owned: Callable[[], set[int]]
    polls: list[tuple[float, int]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def records_between(self, start: float, end: float) -> int:
        return sum(n for t, n in self.polls if start <= t <= end)

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time without records from ``start`` to the first records after ``end``."""
        longest = 0.0
        previous = start
        for t, n in self.polls:
            if n and t > start:
                longest = max(longest, t - previous)
                previous = t
                if t >= end:
                    break
        return longest


def balanced(owned: Sequence[set[int]], partitions: int) -> bool:
    """Every partition owned once and every share ``floor(P/n)`` or ``ceil(P/n)``."""
    low = partitions // len(owned)
    high = -(-partitions // len(owned))
    every = set().union(*owned)
    return (
        sum(len(o) for o in owned) == partitions
        and len(every) == partitions
        and all(low <= len(o) <= high for o in owned)
    )


def produce_continuously(bootstrap: str, topic: str, rate: int, stop: Any) -> None:
    """Child process: ``rate`` keyed records/s until ``stop`` is set."""
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    began = time.monotonic()
    sent = 0
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while sent < due:
            try:
                producer.produce(topic, value=VALUE, key=b"%d" % sent)
            except BufferError:
                break
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(10)


class Producing:
    """The producer child process, started and always stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._process = context.Process(
            target=produce_continuously, args=(bootstrap, topic, rate, self._stop), daemon=True
        )

    def __enter__(self) -> Producing:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._process.join(15)
        if self._process.is_alive():
            self._process.kill()


def kafkette_member(
    bootstrap: str, topic: str, group: str, settings: dict[str, Any], work_ms: float
) -> Member:
    consumer = AsyncConsumer({"bootstrap.servers": bootstrap, "group.id": group, **settings})

    async def poll() -> int:
        records = await consumer.poll(timeout_ms=POLL_S * 1000)
        return sum(len(batch) for batch in records.values())

    def owned() -> set[int]:
        try:
            return {tp.partition for tp in consumer.assignment()}
        except Exception:  # not started yet
            return set()

    member = Member(poll, owned)

    async def run() -> None:
        async with consumer:
            consumer.subscribe([topic])
            while not member.stop.is_set():
                n = await poll()
                member.polls.append((time.perf_counter(), n))
                if n and work_ms:
                    await asyncio.sleep(n * work_ms / 1000)

    member.task = asyncio.create_task(run())
    return member


def confluent_member(
    bootstrap: str, topic: str, group: str, settings: dict[str, Any], work_ms: float
) -> Member:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group, **settings})

    async def poll() -> int:
        messages = consumer.consume(num_messages=500, timeout=0)
        if not messages:
            await asyncio.sleep(0.005)
        return sum(1 for m in messages if m.error() is None)

    def owned() -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    member = Member(poll, owned)

    async def run() -> None:
        consumer.subscribe([topic])
        try:
            while not member.stop.is_set():
                n = await poll()
                member.polls.append((time.perf_counter(), n))
                if n and work_ms:
                    await asyncio.sleep(n * work_ms / 1000)
        finally:
            consumer.close()

    member.task = asyncio.create_task(run())
    return member


async def until_balanced(members: Sequence[Member], partitions: int, what: str) -> float:
    """The time at which the members are first seen balanced."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        if balanced([m.owned() for m in members], partitions):
            return time.perf_counter()
        for m in members:
            if m.task is not None and m.task.done():
                m.task.result()  # a member that crashed: its error, not a timeout
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not balanced within {TIMEOUT_S:.0f} s")
        await asyncio.sleep(SAMPLE_S)


async def leave(member: Member) -> None:
    member.stop.set()
    if member.task is not None:
        await member.task


async def run_variant(
    variant: Variant, bootstrap: str, topic: str, group: str, args: Any
) -> list[Round]:
    """Form the group, then ``args.rounds`` joins of one member, each undone after."""
    settings = dict(variant.settings)
    if args.heartbeat_ms is not None and variant.classic:
        settings["heartbeat.interval.ms"] = args.heartbeat_ms
    make = kafkette_member if variant.client == "kafkette" else confluent_member
    members: list[Member] = []
    rounds: list[Round] = []
    try:
        members += [
            make(bootstrap, topic, group, settings, args.work_ms) for _ in range(args.members)
        ]
        await until_balanced(members, args.partitions, f"{variant.name}: forming")
        for _ in range(args.rounds):
            await asyncio.sleep(SETTLE_S + BASELINE_S)
            now = time.perf_counter()
            before = sum(m.records_between(now - BASELINE_S, now) for m in members) / BASELINE_S
            joined = time.perf_counter()
            joiner = make(bootstrap, topic, group, settings, args.work_ms)
            try:
                absorbed = await until_balanced(
                    [*members, joiner], args.partitions, f"{variant.name}: absorbing"
                )
            finally:
                await leave(joiner)
            window = absorbed - joined
            others = sum(m.records_between(joined, absorbed) for m in members)
            kept = (others / window) / before if before and window else float("nan")
            await until_balanced(members, args.partitions, f"{variant.name}: after the leave")
            pause = max(m.longest_pause(joined, absorbed) for m in members)
            rounds.append(Round(window, others, kept, pause))
    finally:
        await asyncio.gather(*(leave(m) for m in members), return_exceptions=True)
    return rounds


def spread(values: Sequence[float], fmt: str) -> str:
    """Median and the [min-max] range."""
    return (
        f"{format(statistics.median(values), fmt)} "
        f"[{format(min(values), fmt)}-{format(max(values), fmt)}]"
    )


def print_table(results: dict[str, list[Round]], args: Any, rate: int) -> None:
    hb_classic = args.heartbeat_ms or 3000
    hb_consumer = args.heartbeat_ms or 5000
    print(
        f"\n{args.members} members consuming {args.partitions} partitions "
        f"({rate} records/s produced), one more joins; median [min-max] "
        f"of {args.rounds} rounds:"
    )
    print(
        "  absorb = from the new member's subscribe() until every partition is owned by\n"
        "           exactly one member and every member, the new one included, owns\n"
        "           floor(P/n) or ceil(P/n), as the members' assignment() report it;\n"
        f"  others = records poll() returned to the {args.members} earlier members in that\n"
        "           window;\n"
        "  kept   = their records/s in the window / their records/s in the "
        f"{BASELINE_S:.0f} s before;\n"
        "  pause  = the longest time one of them went without records, from the join\n"
        "           to its first records after the window.\n"
        f"  work: {args.work_ms:g} ms per record (--work-ms), between polls\n"
        f"  heartbeat: classic {hb_classic} ms (heartbeat.interval.ms),\n"
        f"             consumer protocol {hb_consumer} ms (group.consumer.heartbeat.interval.ms)"
    )
    width = max(len(name) for name in results)
    print(
        f"  {'variant':<{width}}  {'absorb s':>17}  {'others (records)':>21}  {'kept':>15}"
        f"  {'pause s':>17}"
    )
    for name, rounds in results.items():
        absorb = spread([r.absorb_s for r in rounds], ".2f")
        others = spread([r.others for r in rounds], ".0f")
        kept = spread([100 * r.kept for r in rounds], ".0f")
        pause = spread([r.pause_s for r in rounds], ".2f")
        print(f"  {name:<{width}}  {absorb:>17}  {others:>21}  {kept + ' %':>15}  {pause:>17}")


def bench_absorb(bootstrap: str, topic: str, args: Any, only: Sequence[str] = ()) -> None:
    """Run every variant (or those whose name contains one of ``only``) and print."""
    variants = [v for v in VARIANTS if not only or any(o in v.name for o in only)]
    results: dict[str, list[Round]] = {}
    with Producing(bootstrap, topic, args.rate):
        for number, variant in enumerate(variants):
            group = f"bench-absorb-{number}-{time.time_ns()}"
            started = time.perf_counter()
            results[variant.name] = asyncio.run(run_variant(variant, bootstrap, topic, group, args))
            print(f"  ({variant.name}: {time.perf_counter() - started:.0f} s)", flush=True)
    print_table(results, args, args.rate)
