"""``file:///path?mode=ro``: a stopped broker's data directory served read-only in process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.admin import NewPartitions
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.inprocess import close_cluster, get_cluster
from kafkette.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkette.server.data_dir.lock import DataDirLock, DataDirLockedError, DataDirNotFoundError
from kafkette.structs import OffsetAndMetadata
from tests.dir_state import tree_state


def _write(url: str) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    """Topic "t" (2 partitions) with keyed records, a transaction's and a group's commit."""
    with AdminClient(bootstrap_servers=url) as admin:
        admin.create_topics([NewTopic("t", 2)]).all()
    sent = {}
    with Producer(bootstrap_servers=url) as producer:
        plain = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
        futures = [producer.send("t", value, key=key) for key, value in plain]
        producer.flush()
        for (key, value), future in zip(plain, futures, strict=True):
            sent[future.result().partition, future.result().offset] = (key, value)
    with Producer(bootstrap_servers=url, transactional_id="tx") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        future = producer.send("t", b"in-txn", key=b"tx", partition=0)
        producer.commit_transaction()
        sent[0, future.result().offset] = (b"tx", b"in-txn")
    with AdminClient(bootstrap_servers=url) as admin:
        admin.alter_consumer_group_offsets(
            "g", {TopicPartition("t", 0): OffsetAndMetadata(3, "")}
        ).all()
    return sent


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A data directory a read-write in-process broker wrote and closed, and its records."""
    data = tmp_path / "data"
    url = f"file://{data}"
    try:
        sent = _write(url)
    finally:
        close_cluster(url)
    yield data, sent


def _refused(action: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaError) as raised:
        action()
    return raised.value


def test_reads_work_and_writes_are_refused_without_changing_a_byte(
    stopped: tuple[Path, Any],
) -> None:
    """Records, topics, group offsets and transactions read as stored; every write is
    refused with Kafka's authorization error naming it; the directory is unchanged."""
    data, sent = stopped
    before = tree_state(data)
    url = f"file://{data}?mode=ro"
    try:
        with Consumer(bootstrap_servers=url, isolation_level="read_committed") as consumer:
            partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            received: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
            for _ in range(40):
                for records in consumer.poll(timeout_ms=250).values():
                    received.update({(r.partition, r.offset): (r.key, r.value) for r in records})
                if len(received) == len(sent):
                    break
        assert received == sent
        with AdminClient(bootstrap_servers=url) as admin:
            assert admin.list_topics() == ["t"]
            offsets = admin.list_consumer_group_offsets("g").all()
            assert offsets == {TopicPartition("t", 0): OffsetAndMetadata(3, "")}
            assert admin.describe_transactions(["tx"]).all()["tx"].state == "CompleteCommit"
            for error_class, action in [
                (TopicAuthorizationFailedError, lambda: admin.create_topics([NewTopic("n", 1)])),
                (TopicAuthorizationFailedError, lambda: admin.delete_topics(["t"])),
                (
                    TopicAuthorizationFailedError,
                    lambda: admin.create_partitions({"t": NewPartitions(3)}),
                ),
                (
                    TopicAuthorizationFailedError,
                    lambda: admin.delete_records({TopicPartition("t", 0): 1}),
                ),
                (GroupAuthorizationFailedError, lambda: admin.delete_consumer_groups(["g"])),
                (
                    GroupAuthorizationFailedError,
                    lambda: admin.alter_consumer_group_offsets(
                        "g", {TopicPartition("t", 0): OffsetAndMetadata(0, "")}
                    ),
                ),
            ]:
                error = _refused(lambda action=action: _all(action()))
                assert isinstance(error, error_class), error
        with Producer(bootstrap_servers=url) as producer:
            error = _refused(lambda: producer.send("t", b"x").result(10))
            assert isinstance(error, ClusterAuthorizationFailedError), error
        with Producer(bootstrap_servers=url, enable_idempotence=False) as producer:
            error = _refused(lambda: producer.send("t", b"x", partition=1).result(10))
            assert isinstance(error, TopicAuthorizationFailedError), error
            assert f"the data directory {data} is opened read-only" in str(error)
        with Producer(bootstrap_servers=url, transactional_id="tx") as producer:
            error = _refused(lambda: producer.init_transactions(10))
            assert isinstance(error, TransactionalIdAuthorizationFailedError), error
        with Consumer(bootstrap_servers=url, group_id="g2") as consumer:
            consumer.subscribe(["t"])
            error = _refused(lambda: [consumer.poll(timeout_ms=500) for _ in range(20)])
            assert isinstance(error, GroupAuthorizationFailedError), error
        anyio.run(_ask_for_a_new_topic, url)
        with AdminClient(bootstrap_servers=url) as admin:
            assert admin.list_topics() == ["t"]  # no auto-creation either
    finally:
        close_cluster(url)
    assert tree_state(data) == before


async def _ask_for_a_new_topic(url: str) -> None:
    async with KafkaClient(AdminConfig.from_user(bootstrap_servers=url)) as client:
        snapshot = await client.refresh_metadata(["new"], allow_auto_topic_creation=True)
        assert snapshot.topics["new"].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def _all(result: object) -> object:
    return result.all() if hasattr(result, "all") else result


def test_a_read_only_opening_and_a_broker_exclude_each_other(stopped: tuple[Path, Any]) -> None:
    """While a broker holds the directory it cannot be opened read-only, and while a
    reader has it no broker can take it; readers share it."""
    data, _ = stopped
    holder = DataDirLock(str(data), "kafkette serve on 127.0.0.1:9092")
    try:
        with pytest.raises(DataDirLockedError) as raised:
            get_cluster(f"file://{data}?mode=ro")
        assert raised.value.detail == (
            f"data directory {data} is in use by another process (pid {os.getpid()}: kafkette "
            "serve on 127.0.0.1:9092); stop it to open the directory read-only"
        )
    finally:
        holder.release()
    readers = [DataDirLock(str(data), "r", shared=True) for _ in range(2)]
    try:
        with pytest.raises(DataDirLockedError) as raised:
            DataDirLock(str(data), "kafkette serve")
        assert raised.value.detail == (
            f"data directory {data} is in use by another process (opened read-only, e.g. by "
            "a kafkette command with -b file://)"
        )
    finally:
        for reader in readers:
            reader.release()


def test_a_missing_directory_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'nothing'}?mode=ro"
    with pytest.raises(DataDirNotFoundError) as raised:
        get_cluster(url)
    assert raised.value.detail == f"data directory {tmp_path / 'nothing'} does not exist"
    assert os.listdir(tmp_path) == []


def test_an_unknown_file_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the only option of file:// is"):
        get_cluster(f"file://{tmp_path}?mode=append")
