"""A consumer method that takes a list of partitions says so when given one partition or
something else (found as a new user: ``committed(tp)``, kafka-python's form, failed with
"'TopicPartition' object is not iterable" from deep inside)."""

from __future__ import annotations

import re

import pytest

from kafkette import AsyncConsumer, Consumer, TopicPartition
from kafkette.testing import MemoryCluster

TP = TopicPartition("orders", 0)
ONE = re.escape(f"expected a list of TopicPartition, got one TopicPartition: pass [{TP!r}]")


def test_sync_methods_taking_partitions_name_a_single_one() -> None:
    with (
        MemoryCluster() as cluster,
        Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g") as consumer,
    ):
        for call in (consumer.assign, consumer.committed, consumer.beginning_offsets):
            with pytest.raises(TypeError, match=ONE):
                call(TP)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected a list of TopicPartition, got 7"):
            consumer.committed(7)  # type: ignore[arg-type]
        assert consumer.assignment() == set()


@pytest.mark.anyio
async def test_async_methods_taking_partitions_name_a_single_one() -> None:
    with MemoryCluster() as cluster:
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers, group_id="g"
        ) as consumer:
            with pytest.raises(TypeError, match=ONE):
                consumer.assign(TP)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=ONE):
                await consumer.committed(TP)  # type: ignore[arg-type]
            assert await consumer.committed([TP]) == {TP: None}
