"""The admin client's consumer group operations against memory://, kafkette serve and
Tansu, async (asyncio and trio) and sync, with members of other clients in the group.

Tansu defects met here (checked against Tansu's answers, named where a test
steps around them):

- TANSU-NO-OFFSET-DELETE: no OffsetDelete API (ApiVersions does not list it).
- TANSU-EMPTY-NOT-DEAD: a group that never existed is described as Empty with
  protocol type "" (Kafka: Dead), and deleting it succeeds (Kafka:
  GROUP_ID_NOT_FOUND).
- TANSU-NO-OFFSET-METADATA: committed offsets lose their metadata and leader
  epoch (OffsetFetch answers a null metadata and epoch -1).
- TANSU-NO-STATES: ListGroups reports no state Kafka knows ("Unknown" here).
- TANSU-LIST-ONLY-COMMITTED: ListGroups lists only groups that have committed
  offsets, not groups whose members joined.
- TANSU-DESCRIBE-BARE: DescribeGroups gives members without client id, host or
  assignment, and no protocol (assignor) name.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkette import Consumer
from kafkette.admin import (
    AdminClient,
    AsyncAdminClient,
    ConsumerGroupListing,
    GroupState,
    GroupType,
    MemberDescription,
    NewTopic,
    OffsetAndMetadata,
)
from kafkette.client.inprocess import close_cluster
from kafkette.errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kafkette.structs import TopicPartition
from tests.brokers import BrokerProcess, kafkette_broker, tansu_broker
from tests.group_harness import MemberProcess, wait_until

TARGETS = ["memory", "kafkette", "tansu"]
TOPIC = "events"
PARTITIONS = 4


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[str]:
    """A bootstrap string for each target: in-process, kafkette serve, Tansu."""
    if request.param == "memory":
        url = f"memory://groups-{uuid.uuid4().hex[:8]}"
        yield url
        close_cluster(url)
    elif request.param == "kafkette":
        yield from (b.bootstrap for b in kafkette_broker(None))
    else:
        yield from (t.bootstrap for t in tansu_broker())


def tp(partition: int, topic: str = TOPIC) -> TopicPartition:
    return TopicPartition(topic, partition)


# ---- members


class ThreadMember:
    """A kafkette Consumer in a thread of this process (for memory:// clusters)."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        self.client = "kafkette"
        self.assigned: set[int] = set()
        self.errors: list[str] = []
        self.processed: list[Any] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
        )
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._consumer.poll(timeout_ms=100)
                self.assigned = {p.partition for p in self._consumer.assignment()}
        except Exception as exc:  # reported by wait_until on failure
            self.errors.append(repr(exc))
        finally:
            self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()

    def close(self) -> None:
        if self._thread.is_alive():
            self.stop()


Member = ThreadMember | MemberProcess


def start_members(bootstrap: str, group: str) -> list[Member]:
    """Two members of ``group`` on TOPIC: kafkette threads in memory://, confluent-kafka
    and kafka-python processes over TCP; returns once the partitions are split."""
    members: list[Member]
    if bootstrap.startswith("memory://"):
        members = [ThreadMember(bootstrap, group, TOPIC, f"member-{i}") for i in range(2)]
    else:
        members = [
            MemberProcess("confluent", bootstrap, group, TOPIC),
            MemberProcess("kafka-python", bootstrap, group, TOPIC),
        ]

    def split() -> bool:
        owned = [m.assigned for m in members]
        return all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))

    wait_until(split, "both members assigned", members)  # type: ignore[arg-type]
    return members


def stop_members(members: list[Member]) -> None:
    for member in members:
        member.stop()
        member.close()


# ---- offsets of a group without members


@pytest.mark.anyio
async def test_alter_list_and_delete_offsets(target: str, request: pytest.FixtureRequest) -> None:
    """Offsets committed from the admin read back exactly (uncommitted partitions as
    None); deleting some leaves the rest."""
    tansu = "tansu" in request.node.callspec.id
    async with AsyncAdminClient(bootstrap_servers=target) as admin:
        (await admin.create_topics([NewTopic(TOPIC, PARTITIONS)])).all()
        altered = await admin.alter_consumer_group_offsets(
            "offsets-only",
            {tp(0): 5, tp(1): OffsetAndMetadata(7, "meta-1", 3), tp(2): OffsetAndMetadata(0)},
        )
        assert altered.all() == {tp(0): None, tp(1): None, tp(2): None}

        # TANSU-NO-OFFSET-METADATA
        one = OffsetAndMetadata(7) if tansu else OffsetAndMetadata(7, "meta-1", 3)
        listed = await admin.list_consumer_group_offsets("offsets-only")
        assert listed.all() == {
            tp(0): OffsetAndMetadata(5, "", None),
            tp(1): one,
            tp(2): OffsetAndMetadata(0, "", None),
        }
        some = await admin.list_consumer_group_offsets("offsets-only", [tp(3), tp(1)])
        assert list(some) == [tp(3), tp(1)]
        assert some.all() == {tp(3): None, tp(1): one}
        assert (await admin.list_consumer_group_offsets("never-committed")).all() == {}

        deleted = await admin.delete_consumer_group_offsets("offsets-only", [tp(0), tp(2)])
        if tansu:  # TANSU-NO-OFFSET-DELETE
            assert all(isinstance(o.error, UnsupportedVersionError) for o in deleted.values())
            return
        assert deleted.all() == {tp(0): None, tp(2): None}
        listed = await admin.list_consumer_group_offsets("offsets-only")
        assert listed.all() == {tp(1): OffsetAndMetadata(7, "meta-1", 3)}
        gone = await admin.delete_consumer_group_offsets("never-committed", [tp(0)])
        assert isinstance(gone[tp(0)].error, GroupIdNotFoundError)


@pytest.mark.anyio
async def test_unknown_group_is_dead_and_cannot_be_deleted(
    target: str, request: pytest.FixtureRequest
) -> None:
    """A group that never existed is described as Dead without members and deleting
    it fails with GROUP_ID_NOT_FOUND; other groups in the same call are unaffected."""
    async with AsyncAdminClient(bootstrap_servers=target) as admin:
        (await admin.create_topics([NewTopic(TOPIC, PARTITIONS)])).all()
        (await admin.alter_consumer_group_offsets("simple", {tp(0): 1})).all()
        described = await admin.describe_consumer_groups(["nobody", "simple"])
        nobody = described["nobody"].result()
        simple = described["simple"].result()
        assert nobody.members == () and simple.members == ()
        assert nobody.coordinator is not None
        assert simple.coordinator == nobody.coordinator
        if "tansu" in request.node.callspec.id:  # TANSU-EMPTY-NOT-DEAD
            assert nobody.state == GroupState.EMPTY
            return
        assert (nobody.state, nobody.is_simple_consumer_group, nobody.partition_assignor) == (
            GroupState.DEAD,
            True,
            "",
        )
        assert simple.state == GroupState.EMPTY
        deleted = await admin.delete_consumer_groups(["nobody", "simple"])
        assert isinstance(deleted["nobody"].error, GroupIdNotFoundError)
        assert deleted["simple"].ok
        assert (await admin.list_consumer_group_offsets("simple")).all() == {}


# ---- groups with members


CLIENT_IDS = {"confluent": "rdkafka", "kafka-python": "kafka-python-", "kafkette": "member-"}
"""Start of each client's (default) client id."""


def check_described(description: Any, group: str, members: list[Member], target: str) -> None:
    assert description.group_id == group
    assert description.state == GroupState.STABLE
    assert description.partition_assignor == "range"
    assert not description.is_simple_consumer_group
    assert len(description.members) == 2
    assigned = sorted(p for m in description.members for p in m.assignment)
    assert assigned == [tp(p) for p in range(PARTITIONS)]
    by_assignment = {frozenset(p.partition for p in m.assignment): m for m in description.members}
    for member in members:
        found: MemberDescription = by_assignment[frozenset(member.assigned)]
        assert found.member_id.startswith(found.client_id)  # Kafka: client id + "-" + uuid
        assert found.group_instance_id is None
        # Kafka's "/" + address; an in-process client's address is its cluster's URL
        assert found.host == (f"/{target}" if target.startswith("memory://") else "/127.0.0.1")
        assert found.client_id.startswith(CLIENT_IDS[member.client])


@pytest.mark.anyio
async def test_group_with_members(target: str, request: pytest.FixtureRequest) -> None:
    """With two members of other clients joined: listed and described exactly (state,
    assignor, members' hosts and partitions); altering offsets fails with
    UNKNOWN_MEMBER_ID and deleting with NON_EMPTY_GROUP; once they left the group is
    Empty, keeps its offsets, and can be deleted."""
    tansu = "tansu" in request.node.callspec.id
    group = f"joined-{uuid.uuid4().hex[:6]}"
    async with AsyncAdminClient(bootstrap_servers=target) as admin:
        (await admin.create_topics([NewTopic(TOPIC, PARTITIONS)])).all()
        members = start_members(target, group)
        try:
            described = (await admin.describe_consumer_groups([group]))[group].result()
            if tansu:  # TANSU-DESCRIBE-BARE, TANSU-LIST-ONLY-COMMITTED
                assert described.state == GroupState.STABLE
                ids = sorted(m.member_id for m in described.members)
                assert [i.split("-")[0] for i in ids] == ["kafka", "rdkafka"]
                return
            check_described(described, group, members, target)

            assert described.coordinator is not None
            listings = (await admin.list_consumer_groups()).all()
            assert listings == (
                ConsumerGroupListing(
                    group, False, GroupState.STABLE, described.coordinator.id, GroupType.CLASSIC
                ),
            )
            stable = await admin.list_consumer_groups(states=[GroupState.STABLE])
            assert [g.group_id for g in stable.all()] == [group]
            empty = await admin.list_consumer_groups(states=["Empty"])
            assert empty.all() == ()

            altered = await admin.alter_consumer_group_offsets(group, {tp(0): 1})
            deleted = await admin.delete_consumer_groups([group])
            assert isinstance(altered[tp(0)].error, UnknownMemberIdError)
            assert isinstance(deleted[group].error, NonEmptyGroupError)
        finally:
            stop_members(members)

        (await admin.alter_consumer_group_offsets(group, {tp(3): 42})).all()
        after = (await admin.describe_consumer_groups([group]))[group].result()
        assert (after.state, after.members, after.is_simple_consumer_group) == (
            GroupState.EMPTY,
            (),
            False,
        )
        offsets = (await admin.list_consumer_group_offsets(group, [tp(3)])).all()
        assert offsets == {tp(3): OffsetAndMetadata(42)}
        assert (await admin.delete_consumer_groups([group])).all() == {group: None}
        assert (await admin.list_consumer_groups()).all() == ()


def test_sync_client(target: str, request: pytest.FixtureRequest) -> None:
    """Every group operation through the blocking AdminClient."""
    tansu = "tansu" in request.node.callspec.id
    with AdminClient(bootstrap_servers=target) as admin:
        admin.create_topics([NewTopic(TOPIC, 2)]).all()
        assert admin.alter_consumer_group_offsets("sync", {tp(0): 3, tp(1): 4}).all() == {
            tp(0): None,
            tp(1): None,
        }
        assert admin.list_consumer_group_offsets("sync").all() == {
            tp(0): OffsetAndMetadata(3),
            tp(1): OffsetAndMetadata(4),
        }
        assert [g.group_id for g in admin.list_consumer_groups().all()] == ["sync"]
        described = admin.describe_consumer_groups(["sync"])["sync"].result()
        assert described.members == ()
        if not tansu:  # TANSU-NO-OFFSET-DELETE
            assert admin.delete_consumer_group_offsets("sync", [tp(0)]).all() == {tp(0): None}
            assert admin.list_consumer_group_offsets("sync").all() == {tp(1): OffsetAndMetadata(4)}
        assert admin.delete_consumer_groups(["sync"]).all() == {"sync": None}
        assert admin.list_consumer_group_offsets("sync").all() == {}


def test_offsets_topic_is_internal_for_other_clients(memory_broker: BrokerProcess) -> None:
    """kafka-python reads __consumer_offsets as internal from Metadata, and its consumer
    leaves it out of the topics it lists."""
    from kafka import KafkaConsumer

    with AdminClient(bootstrap_servers=memory_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1)]).all()
        admin.alter_consumer_group_offsets("g", {tp(0): 1}).all()
    consumer = KafkaConsumer(bootstrap_servers=memory_broker.bootstrap)
    try:
        assert consumer.topics() == {TOPIC}
        cluster = consumer._client.cluster
        assert cluster.internal_topics == {"__consumer_offsets"}
        assert cluster.topics(exclude_internal_topics=False) == {TOPIC, "__consumer_offsets"}
    finally:
        consumer.close()
