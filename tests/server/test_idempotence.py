"""Idempotent producers, in process: producer ids, duplicates, sequence and epoch errors."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.messages import InitProducerIdRequest
from kafkette.server import Broker
from kafkette.server.producer_ids import BLOCK_SIZE
from tests.server.dataplane import (
    FakeClock,
    batch,
    call,
    fetch_request,
    make_broker,
    produce,
    records_of,
)

pytestmark = pytest.mark.anyio


def pbatch(pid: int, epoch: int, seq: int, count: int = 1) -> bytes:
    return batch(
        [(b"k%d" % i, b"v%d" % (seq + i)) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


async def init_pid(broker: Broker) -> tuple[int, int]:
    response = await call(broker, InitProducerIdRequest(transactional_id=None), 4)
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


async def test_init_producer_id_hands_out_new_ids_at_epoch_zero() -> None:
    broker = make_broker(FakeClock())
    first, second = await init_pid(broker), await init_pid(broker)
    assert first == (0, 0) and second == (1, 0)


async def test_transactional_ids_and_plain_ids_share_one_sequence() -> None:
    """The transaction coordinator takes its producer ids from the same allocator."""
    broker = make_broker(FakeClock())
    plain = await init_pid(broker)
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    response = await call(broker, request, 4)
    again = await init_pid(broker)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 1, 0)
    assert (plain[0], again[0]) == (0, 2)


async def test_producer_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    broker = make_broker(FakeClock(), data_dir)
    ids = [(await init_pid(broker))[0] for _ in range(3)]
    broker.close()  # a crash would leave the same file: the block is reserved before use
    again = make_broker(FakeClock(), data_dir)
    later = [(await init_pid(again))[0] for _ in range(2)]
    again.close()
    assert ids == [0, 1, 2]
    assert later == [BLOCK_SIZE, BLOCK_SIZE + 1]


async def test_ids_start_past_those_in_the_logs_when_the_file_is_lost(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = make_broker(FakeClock(), str(data_dir))
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, pbatch(5000, 0, 0))).error_code == 0
    broker.close()
    (data_dir / "kafkette-producer-ids").unlink(missing_ok=True)
    again = make_broker(FakeClock(), str(data_dir))
    assert (await init_pid(again))[0] == 5001
    again.close()


async def test_duplicate_batch_gets_its_original_offsets_and_is_not_appended() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    log = broker.cluster.get_partition("t", 0).log
    offsets = [
        (await produce(broker, "t", 0, pbatch(7, 0, seq * 3, 3))).base_offset for seq in range(5)
    ]
    assert offsets == [0, 3, 6, 9, 12]
    for seq, expected in ((0, 0), (6, 6), (12, 12)):
        retry = await produce(broker, "t", 0, pbatch(7, 0, seq, 3))
        assert (retry.error_code, retry.base_offset) == (0, expected)
    assert log.log_end_offset == 15
    nxt = await produce(broker, "t", 0, pbatch(7, 0, 15, 1))
    assert (nxt.error_code, nxt.base_offset) == (0, 15)


async def test_duplicate_older_than_the_five_batch_window_is_out_of_order() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    for seq in range(6):
        assert (await produce(broker, "t", 0, pbatch(7, 0, seq))).error_code == 0
    old = await produce(broker, "t", 0, pbatch(7, 0, 0))
    assert old.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 6


async def test_sequence_gap_is_out_of_order() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, pbatch(7, 0, 0, 2))).error_code == 0
    gap = await produce(broker, "t", 0, pbatch(7, 0, 3))
    assert (gap.error_code, gap.base_offset) == (45, -1)
    overlap = await produce(broker, "t", 0, pbatch(7, 0, 1))  # not an exact duplicate
    assert overlap.error_code == 45
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 2


async def test_stale_epoch_is_invalid_producer_epoch() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, pbatch(7, 2, 0))).error_code == 0
    stale = await produce(broker, "t", 0, pbatch(7, 1, 1))
    assert (stale.error_code, stale.base_offset) == (47, -1)  # INVALID_PRODUCER_EPOCH


async def test_new_epoch_must_restart_at_sequence_zero() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, pbatch(7, 0, 0))).error_code == 0
    assert (await produce(broker, "t", 0, pbatch(7, 1, 5))).error_code == 45
    bumped = await produce(broker, "t", 0, pbatch(7, 1, 0))
    assert (bumped.error_code, bumped.base_offset) == (0, 1)


async def test_unknown_producer_id_is_accepted_at_any_sequence() -> None:
    """Kafka 2.5+ (KIP-360): no state for the producer id, any sequence is taken."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    result = await produce(broker, "t", 0, pbatch(99, 0, 42))
    assert (result.error_code, result.base_offset) == (0, 0)
    assert (await produce(broker, "t", 0, pbatch(99, 0, 43))).error_code == 0


async def test_sequences_wrap_after_int32_max() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, pbatch(7, 0, 2**31 - 2, 1))).error_code == 0
    assert (await produce(broker, "t", 0, pbatch(7, 0, 2**31 - 1, 1))).error_code == 0
    assert (await produce(broker, "t", 0, pbatch(7, 0, 0, 1))).error_code == 0


async def test_producer_state_survives_restart(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    broker = make_broker(FakeClock(), data_dir)
    broker.cluster.create_topic("t", 1)
    for seq in range(3):
        assert (await produce(broker, "t", 0, pbatch(7, 0, seq * 2, 2))).error_code == 0
    broker.close()
    again = make_broker(FakeClock(), data_dir)
    retry = await produce(again, "t", 0, pbatch(7, 0, 2, 2))
    assert (retry.error_code, retry.base_offset) == (0, 2)
    assert (await produce(again, "t", 0, pbatch(7, 0, 7, 1))).error_code == 45
    nxt = await produce(again, "t", 0, pbatch(7, 0, 6, 1))
    assert (nxt.error_code, nxt.base_offset) == (0, 6)
    again.close()


@st.composite
def producer_actions(draw: st.DrawFn) -> list[tuple[str, int]]:
    """A first batch, then sends of new batches (of 1-3 records), retries of earlier ones
    and gaps (before the first batch, any sequence is accepted: KIP-360)."""
    actions: list[tuple[str, int]] = [("next", draw(st.integers(1, 3)))]
    sent = 1
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["next", "next", "retry", "gap"]))
        if kind == "retry" and sent:
            actions.append(("retry", draw(st.integers(0, sent - 1))))
        elif kind == "gap":
            actions.append(("gap", draw(st.integers(1, 3))))
        else:
            actions.append(("next", draw(st.integers(1, 3))))
            sent += 1
    return actions


@settings(max_examples=40, deadline=None)
@given(producer_actions())
def test_any_mix_of_sends_retries_and_gaps(actions: list[tuple[str, int]]) -> None:
    """Every new batch is appended once, in order; a retry of one of the last five
    accepted batches gets its original offset; anything else out of sequence is refused."""

    async def run() -> None:
        broker = make_broker(FakeClock())
        broker.cluster.create_topic("t", 1)
        log = broker.cluster.get_partition("t", 0).log
        accepted: list[tuple[int, int, int]] = []  # (first sequence, count, base offset)
        next_seq = 0
        for kind, arg in actions:
            if kind == "next":
                result = await produce(broker, "t", 0, pbatch(3, 0, next_seq, arg))
                assert (result.error_code, result.base_offset) == (0, log.log_end_offset - arg)
                accepted.append((next_seq, arg, result.base_offset))
                next_seq += arg
            elif kind == "retry":
                seq, count, offset = accepted[arg]
                end = log.log_end_offset
                result = await produce(broker, "t", 0, pbatch(3, 0, seq, count))
                if arg >= len(accepted) - 5:
                    assert (result.error_code, result.base_offset) == (0, offset)
                else:
                    assert result.error_code == 45
                assert log.log_end_offset == end
            else:
                end = log.log_end_offset
                result = await produce(broker, "t", 0, pbatch(3, 0, next_seq + arg, 1))
                assert result.error_code == 45
                assert log.log_end_offset == end
        fetched = await call(broker, fetch_request("t", {0: 0}), 12)
        values = [r.value for r in records_of(fetched.responses[0].partitions[0].records)]
        assert values == [b"v%d" % s for s in range(next_seq)]

    anyio.run(run)
