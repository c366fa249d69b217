"""The clients' metrics, read with the SDK's InMemoryMetricReader: exact counts per
partition for a known workload, the duration histograms' counts, the lag gauge."""

from __future__ import annotations

import anyio
import pytest

from kafkette import AsyncConsumer, Consumer, Producer, TopicPartition
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
SEND = {
    "messaging.system": "kafka",
    "messaging.destination.name": "orders",
    "messaging.operation.name": "send",
}
CONSUMER = {"messaging.system": "kafka", "messaging.consumer.group.name": "g"}


def test_a_known_workload_gives_exact_counts(telemetry: Telemetry) -> None:
    """5 records to partition 0 and 2 to partition 1 (one refused by the broker): the sent
    counter per partition and error; the consumer takes 3 of partition 0 and all of 1,
    processes 2 by iterating, commits: consumed per partition, one duration per operation,
    process durations, and the lag left per partition."""
    with MemoryCluster(num_partitions=2, message_max_bytes=1000) as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers, **telemetry.settings) as p:
            for i in range(5):
                p.send("orders", b"%d" % i, partition=0)
            p.send("orders", b"x", partition=1)
            refused = p.send("orders", b"x" * 3000, partition=1)
            p.flush(10)
            assert refused.exception(0) is not None
        with Consumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **telemetry.settings,
        ) as consumer:
            consumer.assign([P0])
            taken = 0
            while taken < 3:
                taken += sum(map(len, consumer.poll(timeout=5, max_records=3 - taken).values()))
            consumer.assign([P0, P1])
            consumer.seek(P0, 3)
            iterated = []
            for record in consumer:
                iterated.append((record.partition, record.offset))
                if len(iterated) == 3:
                    break
            consumer.commit({P0: 5, P1: 1})
            lag = telemetry.points("messaging.kafka.consumer.lag")
    assert sorted(iterated) == [(0, 3), (0, 4), (1, 0)]
    assert telemetry.points("messaging.client.sent.messages") == [
        (
            {
                **SEND,
                "messaging.destination.partition.id": "1",
                "error.type": "MESSAGE_TOO_LARGE",
            },
            1,
        ),
        ({**SEND, "messaging.destination.partition.id": "0"}, 5),
        ({**SEND, "messaging.destination.partition.id": "1"}, 1),
    ]
    assert telemetry.points("messaging.client.consumed.messages") == [
        (
            {
                **CONSUMER,
                "messaging.operation.name": "poll",
                "messaging.destination.name": "orders",
                "messaging.destination.partition.id": "0",
            },
            5,
        ),
        (
            {
                **CONSUMER,
                "messaging.operation.name": "poll",
                "messaging.destination.name": "orders",
                "messaging.destination.partition.id": "1",
            },
            1,
        ),
    ]
    durations = {
        (attrs["messaging.operation.name"], "error.type" in attrs): count
        for attrs, count in telemetry.points("messaging.client.operation.duration")
        if "messaging.destination.partition.id" not in attrs
        or attrs["messaging.operation.name"] != "send"
        or "error.type" in attrs
    }
    assert durations[("commit", False)] == 1
    assert durations[("send", True)] == 1  # the refused record, with its partition
    assert durations[("poll", False)] >= 2  # 3 records of partition 0 and the iteration's
    sends = [
        (attrs["messaging.destination.partition.id"], count)
        for attrs, count in telemetry.points("messaging.client.operation.duration")
        if attrs["messaging.operation.name"] == "send" and "error.type" not in attrs
    ]
    assert sends == [("0", 5), ("1", 1)]
    # two records were processed to the end; the third's processing ends with the consumer
    assert sum(count for _, count in telemetry.points("messaging.process.duration")) == 3
    assert lag == [
        (
            {
                **CONSUMER,
                "messaging.destination.name": "orders",
                "messaging.destination.partition.id": str(p),
            },
            0,
        )
        for p in (0, 1)
    ]


@pytest.mark.parametrize("api", ["sync", "asyncio", "trio"])
def test_the_lag_gauge_reads_each_live_consumer(api: str, telemetry: Telemetry) -> None:
    """Two consumers of one meter each report their partition's lag (records between the
    position and the high watermark of the last fetch); a closed one no longer does."""
    with MemoryCluster(num_partitions=2) as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for i in range(6):
                p.send("orders", b"%d" % i, partition=i % 2)
            p.send("orders", b"6", partition=0)
            p.flush(10)
        settings = {
            "bootstrap_servers": cluster.bootstrap_servers,
            "auto_offset_reset": "earliest",
            **telemetry.settings,
        }

        def expected(*lags: tuple[int, int]) -> list[tuple[dict[str, str], int]]:
            return [
                (
                    {
                        "messaging.system": "kafka",
                        "messaging.destination.name": "orders",
                        "messaging.destination.partition.id": str(partition),
                    },
                    value,
                )
                for partition, value in lags
            ]

        if api == "sync":
            with Consumer(**settings) as first, Consumer(**settings) as second:
                first.assign([P0])
                second.assign([P1])
                assert sum(map(len, first.poll(timeout=5, max_records=1).values())) == 1
                assert sum(map(len, second.poll(timeout=5, max_records=3).values())) == 3
                assert telemetry.points("messaging.kafka.consumer.lag") == expected((0, 3), (1, 0))
                second.close()
                assert telemetry.points("messaging.kafka.consumer.lag") == expected((0, 3))
            return

        async def main() -> None:
            async with AsyncConsumer(**settings) as first, AsyncConsumer(**settings) as second:
                first.assign([P0])
                second.assign([P1])
                assert sum(map(len, (await first.poll(timeout=5, max_records=1)).values())) == 1
                assert sum(map(len, (await second.poll(timeout=5, max_records=3)).values())) == 3
                assert telemetry.points("messaging.kafka.consumer.lag") == expected((0, 3), (1, 0))
                await second.close()
                assert telemetry.points("messaging.kafka.consumer.lag") == expected((0, 3))

        anyio.run(main, backend=api)
