"""No fsync on a disk broker's event loop for the topics file, DeleteRecords or the
data directory's other small files, and the order that keeps a crash from losing a
topic or bringing deleted data back (#30).

The topics file (``kafkette-topics.json``, written at each CreateTopics,
CreatePartitions, AlterConfigs of a topic and DeleteTopics) was written and
fsynced on the loop, as were DeleteRecords' producer snapshot and checkpoints.
A crash is the data directory copied as it is at that moment (what a killed
process leaves), reopened by a new broker.
"""

from __future__ import annotations

import os
import shutil
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkette.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkette.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkette.protocol.messages import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    OffsetCommitRequest,
)
from kafkette.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion,
)
from kafkette.protocol.messages.create_acls_request import AclCreation
from kafkette.protocol.messages.create_partitions_request import CreatePartitionsTopic
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from kafkette.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.server import Broker, BrokerConfig
from kafkette.server.acl.store import load_bindings
from kafkette.server.cluster import Cluster
from kafkette.server.config.broker_config import STANDARD_AUTHORIZER
from kafkette.server.dispatch import RequestContext
from kafkette.server.kept_files import kept_file
from kafkette.server.producer_ids import BLOCK_SIZE, IDS_FILE
from kafkette.server.sasl.users import CREDENTIALS_FILE
from tests.server.dataplane import batch, call, produce

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class FsyncsOnLoop:
    """Records where each ``os.fsync`` of the test's thread (the event loop) came from."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.on_loop: list[str] = []
        self.elsewhere = 0
        real = os.fsync

        def fsync(fd: Any) -> None:
            if threading.get_ident() == self.loop_thread:
                self.on_loop.append("".join(traceback.format_stack(limit=6)))
            else:
                self.elsewhere += 1
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


def _create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
        timeout_ms=5000,
    )


def _delete(name: str) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(topic_names=[name], timeout_ms=5000)


def _reopened(data_dir: Path, copy: Path) -> Cluster:
    """The cluster a broker restarted after a crash at this moment would serve."""
    shutil.copytree(data_dir, copy)
    (copy / ".lock").unlink(missing_ok=True)
    return Broker(BrokerConfig(data_dir=str(copy))).cluster


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Broker]:
    """A disk broker with its background tasks running, as ``kafkette serve`` runs it."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path / "data")))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(broker.run_background)
        await anyio.sleep(0)
        yield broker
        tasks.cancel_scope.cancel()
    broker.close()


@pytest.mark.anyio
async def test_topic_changes_and_delete_records_fsync_in_worker_threads(
    served: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = FsyncsOnLoop(monkeypatch)
    created = await call(served, _create("t", 2), 5)
    assert [(r.name, r.error_code) for r in created.topics] == [("t", 0)]
    for n in range(4):
        assert (await produce(served, "t", 0, batch([(b"k", b"v%d" % n)]))).error_code == 0
    grown = await call(
        served,
        CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name="t", count=3, assignments=None)],
            timeout_ms=5000,
            validate_only=False,
        ),
        1,
    )
    assert [(r.name, r.error_code) for r in grown.results] == [("t", 0)]
    altered = await call(
        served,
        IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=2,
                    resource_name="t",
                    configs=[AlterableConfig("retention.ms", 0, "60000")],
                )
            ]
        ),
        1,
    )
    assert [r.error_code for r in altered.responses] == [0]
    deleted_records = await call(
        served,
        DeleteRecordsRequest(
            topics=[DeleteRecordsTopic("t", [DeleteRecordsPartition(0, 3)])], timeout_ms=5000
        ),
        2,
    )
    part = deleted_records.topics[0].partitions[0]
    assert (part.error_code, part.low_watermark) == (0, 3)
    deleted = await call(served, _delete("t"), 4)
    assert [(r.name, r.error_code) for r in deleted.responses] == [("t", 0)]

    assert fsyncs.on_loop == [], fsyncs.on_loop[0]
    assert fsyncs.elsewhere >= 8  # topics file x4 (file and directory each), checkpoints


@pytest.mark.anyio
async def test_acknowledged_delete_records_survive_a_crash(served: Broker, tmp_path: Path) -> None:
    await call(served, _create("t", 1), 5)
    for n in range(6):
        await produce(served, "t", 0, batch([(b"k", b"v%d" % n)]))
    request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic("t", [DeleteRecordsPartition(0, 4)])], timeout_ms=5000
    )
    part = (await call(served, request, 2)).topics[0].partitions[0]
    assert (part.error_code, part.low_watermark) == (0, 4)
    log = _reopened(tmp_path / "data", tmp_path / "crash").get_partition("t", 0).log
    assert (log.log_start_offset, log.log_end_offset) == (4, 6)


async def _release_at_exit(writes: HeldWrites) -> None:
    try:
        await anyio.sleep_forever()
    finally:  # a failed assertion must not leave a worker thread waiting
        writes.release.set()


class HeldWrites:
    """Holds every write of the topics file (in its worker thread) until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        real: Callable[[str, bytes], None] = kept_file.write_atomically

        def held(path: str, data: bytes) -> None:
            if path.endswith("kafkette-topics.json"):
                self.started.set()
                assert self.release.wait(10)
            real(path, data)

        monkeypatch.setattr(kept_file, "write_atomically", held)


def _live_logs(data_dir: Path) -> list[str]:
    """The partition directories, not those renamed for deletion (``*-delete``)."""
    return sorted(n for n in os.listdir(data_dir / "logs") if not n.endswith("-delete"))


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.005)


@pytest.mark.anyio
async def test_a_crash_during_create_or_delete_loses_no_topic_and_revives_no_data(
    served: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    await call(served, _create("kept", 2), 5)
    for n in range(3):
        await produce(served, "kept", 1, batch([(b"k", b"v%d" % n)]))
    writes = HeldWrites(monkeypatch)
    answers: dict[str, Any] = {}

    async def ask(key: str, request: Any, version: int) -> None:
        answers[key] = await call(served, request, version)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_release_at_exit, writes)
        # Creation: not answered while its topics file write is held; a crash then
        # leaves no topic (and its logs are deleted at the restart).
        tasks.start_soon(ask, "create", _create("new", 3), 5)
        await _until(writes.started.is_set)
        await anyio.sleep(0.05)
        assert "create" not in answers
        crashed = _reopened(data, tmp_path / "crash1")
        assert sorted(crashed.topics) == ["kept"]
        assert _live_logs(tmp_path / "crash1") == ["kept-0", "kept-1"]
        writes.release.set()
        await _until(lambda: "create" in answers)
        assert [(r.name, r.error_code) for r in answers["create"].topics] == [("new", 0)]
        assert sorted(_reopened(data, tmp_path / "crash2").topics) == ["kept", "new"]

        # Deletion: while the topics file still names the topic, its logs are all there
        # (a crash brings the whole topic back, unanswered); answered, gone for good.
        writes.started.clear()
        writes.release.clear()
        tasks.start_soon(ask, "delete", _delete("kept"), 4)
        await _until(writes.started.is_set)
        await anyio.sleep(0.05)
        assert "delete" not in answers
        assert _live_logs(data) == ["kept-0", "kept-1", "new-0", "new-1", "new-2"]
        crashed = _reopened(data, tmp_path / "crash3")
        assert sorted(crashed.topics) == ["kept", "new"]
        assert crashed.get_partition("kept", 1).log.log_end_offset == 3
        writes.release.set()
        await _until(lambda: "delete" in answers)
        assert [(r.name, r.error_code) for r in answers["delete"].responses] == [("kept", 0)]
        tasks.cancel_scope.cancel()
    crashed = _reopened(data, tmp_path / "crash4")
    assert sorted(crashed.topics) == ["new"]
    assert _live_logs(tmp_path / "crash4") == ["new-0", "new-1", "new-2"]


async def _call_as_admin(broker: Broker, request: Any, version: int) -> Any:
    """``call``, from a super user through the broker's authorizer."""
    frame = encode_request(request, version, 7, "tests")
    header, decoded = decode_request(memoryview(bytes(frame)))
    context = RequestContext(header, principal="User:admin", authorizer=broker.authorizer)
    response = await broker.handle(context, decoded)
    raw = encode_response(response, version, 7)
    return decode_response(bytes(raw), request.API_KEY, version)[1]


@pytest.mark.anyio
async def test_acls_credentials_configs_and_producer_ids_fsync_in_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each small file of the data directory is on disk when its change is answered,
    and none is written on the loop (``kafkette.server.kept_files``)."""
    data = tmp_path / "data"
    config = BrokerConfig(
        data_dir=str(data), authorizer_class_name=STANDARD_AUTHORIZER, super_users=("User:admin",)
    )
    broker = Broker(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(broker.run_background)
        await anyio.sleep(0)
        fsyncs = FsyncsOnLoop(monkeypatch)
        acl = AclCreation(
            resource_type=ResourceType.TOPIC.value,
            resource_name="orders",
            resource_pattern_type=PatternType.LITERAL.value,
            principal="User:alice",
            host="*",
            operation=AclOperation.READ.value,
            permission_type=AclPermissionType.ALLOW.value,
        )
        created = await _call_as_admin(broker, CreateAclsRequest(creations=[acl]), 3)
        assert [r.error_code for r in created.results] == [0]
        assert [b.principal for b in load_bindings(data)] == ["User:alice"]

        upsert = ScramCredentialUpsertion(
            name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"p" * 32
        )
        altered = await _call_as_admin(
            broker, AlterUserScramCredentialsRequest(upsertions=[upsert]), 0
        )
        assert [(r.user, r.error_code) for r in altered.results] == [("alice", 0)]
        assert '"user": "alice"' in (data / CREDENTIALS_FILE).read_text()

        group_config = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=32,
                    resource_name="g",
                    configs=[AlterableConfig("consumer.session.timeout.ms", 0, "50000")],
                )
            ]
        )
        answered = await _call_as_admin(broker, group_config, 1)
        assert [r.error_code for r in answered.responses] == [0]
        assert (
            '"consumer.session.timeout.ms": "50000"'
            in (data / "kafkette-broker-configs.json").read_text()
        )

        ids = []
        for _ in range(BLOCK_SIZE + 2):  # into a second block
            init = await _call_as_admin(broker, InitProducerIdRequest(transactional_id=None), 4)
            assert init.error_code == 0
            ids.append(init.producer_id)
        assert ids == list(range(ids[0], ids[0] + BLOCK_SIZE + 2))
        await anyio.sleep(0.2)  # the block asked ahead is written meanwhile
        assert int((data / IDS_FILE).read_text()) >= ids[-1] + 1

        assert fsyncs.on_loop == [], fsyncs.on_loop[0]
        assert fsyncs.elsewhere >= 8  # four files and their directory
        tasks.cancel_scope.cancel()
    broker.close()


class LogsOpened:
    """Records on which thread each partition log of ``broker`` was opened."""

    def __init__(self, broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.on_loop: list[tuple[str, int]] = []
        self.elsewhere: list[tuple[str, int]] = []
        storage = broker.cluster.storage
        real = storage.open_log

        def open_log(topic: str, partition: int, *args: Any, **kwargs: Any) -> Any:
            where = self.on_loop if threading.get_ident() == self.loop_thread else self.elsewhere
            where.append((topic, partition))
            return real(topic, partition, *args, **kwargs)

        monkeypatch.setattr(storage, "open_log", open_log)


@pytest.mark.anyio
async def test_find_coordinator_makes_the_internal_topics_off_the_loop(
    served: Broker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    logs = LogsOpened(served, monkeypatch)
    found = await call(served, FindCoordinatorRequest(key="g", key_type=0), 3)
    assert (found.error_code, found.node_id) == (0, served.node_id)
    found = await call(
        served, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-1", "tx-2"]), 4
    )
    assert [(c.key, c.error_code) for c in found.coordinators] == [("tx-1", 0), ("tx-2", 0)]
    await call(served, _create("t", 1), 5)
    commit = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 7)])],
    )
    committed = await call(served, commit, 8)
    assert committed.topics[0].partitions[0].error_code == 0

    assert logs.on_loop == []
    internal = [entry for entry in logs.elsewhere if entry[0] != "t"]
    assert sorted(internal) == sorted(
        [("__consumer_offsets", n) for n in range(50)]
        + [("__transaction_state", n) for n in range(50)]
    )
    # Each answered once the topics file names its topic: a crash now keeps both.
    reopened = _reopened(tmp_path / "data", tmp_path / "crash")
    assert {name: len(topic.partitions) for name, topic in reopened.topics.items()} == {
        "__consumer_offsets": 50,
        "__transaction_state": 50,
        "t": 1,
    }
