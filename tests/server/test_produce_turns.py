"""A produce request for many partitions lets other connections have the event loop (#30).

A producer's first round over a wide topic sends requests for thousands of
partitions; handled in one go, such a request held the loop for 100 ms and more
on a disk broker of 10,000 partitions (``bench/loop_stalls.py``, phase ``first``).
"""

from __future__ import annotations

import anyio
import pytest

from kafkette.protocol.messages import ProduceRequest
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.server.handlers import produce as produce_handler
from tests.server.dataplane import FakeClock, batch, call, make_broker

PARTITIONS = 1_000

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@pytest.mark.anyio
async def test_a_request_for_many_partitions_yields_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(produce_handler, "STEP_BUDGET_S", 0.0)  # a turn at every check
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("wide", PARTITIONS)
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                "wide",
                [PartitionProduceData(i, batch([(b"k", b"v%d" % i)])) for i in range(PARTITIONS)],
            )
        ],
    )
    turns = 0
    done = False

    async def other_connection() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(other_connection)
        await anyio.sleep(0)
        before = turns
        response = await call(broker, request, 9)
        during = turns - before
        done = True

    answers = response.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in answers] == [
        (i, 0, 0) for i in range(PARTITIONS)
    ]
    assert during >= PARTITIONS // produce_handler._TURN_CHECK - 1  # 0 before
    for i in (0, 499, 999):
        assert broker.cluster.get_partition("wide", i).log.log_end_offset == 1
