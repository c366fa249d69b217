"""Groups and committed offsets survive a broker restart (kept in __consumer_offsets),
seen through the admin client: file:// reopened in process, kafkette serve killed."""

from __future__ import annotations

from pathlib import Path

from kafkette.admin import AdminClient, GroupState, NewTopic, OffsetAndMetadata
from kafkette.client.inprocess import close_cluster
from kafkette.server.groups.log_store import OFFSETS_TOPIC
from kafkette.structs import TopicPartition
from tests.brokers import BrokerProcess
from tests.group_harness import MemberProcess, wait_until

TOPIC = "restart"


def tp(partition: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition)


def test_offsets_and_groups_survive_reopening_a_file_cluster(tmp_path: Path) -> None:
    """Offsets altered, deleted and groups deleted before a close read back the same
    after reopening; the internal topic is listed as internal and only on request."""
    url = f"file://{tmp_path / 'data'}"
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic(TOPIC, 3)]).all()
            admin.alter_consumer_group_offsets(
                "kept", {tp(0): OffsetAndMetadata(10, "m", 2), tp(1): 11, tp(2): 12}
            ).all()
            admin.delete_consumer_group_offsets("kept", [tp(2)]).all()
            admin.alter_consumer_group_offsets("dropped", {tp(0): 1}).all()
            admin.delete_consumer_groups(["dropped"]).all()
            assert admin.list_topics() == [TOPIC]
            assert admin.list_topics(include_internal=True) == [OFFSETS_TOPIC, TOPIC]
        close_cluster(url)
        with AdminClient(bootstrap_servers=url) as admin:
            assert admin.list_consumer_group_offsets("kept").all() == {
                tp(0): OffsetAndMetadata(10, "m", 2),
                tp(1): OffsetAndMetadata(11),
            }
            assert admin.list_consumer_group_offsets("dropped").all() == {}
            assert [g.group_id for g in admin.list_consumer_groups().all()] == ["kept"]
            internal = admin.describe_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC].result()
            assert internal.is_internal
            assert len(internal.partitions) == 50
    finally:
        close_cluster(url)


def test_offsets_and_group_survive_a_broker_crash(tmp_path: Path) -> None:
    """Committed offsets and the membership record a kafka-python member left behind
    are there after kafkette serve is killed (SIGKILL) and started again."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)]).all()
        member = MemberProcess("kafka-python", broker.bootstrap, "crash", TOPIC)
        try:
            wait_until(lambda: member.assigned == {0, 1}, "the member's assignment", [member])
        finally:
            member.stop()
            member.close()
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.alter_consumer_group_offsets("crash", {tp(0): 7, tp(1): 9}).all()
        broker.kill()
        broker.start()
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert admin.list_consumer_group_offsets("crash").all() == {
                tp(0): OffsetAndMetadata(7),
                tp(1): OffsetAndMetadata(9),
            }
            described = admin.describe_consumer_groups(["crash"])["crash"].result()
            assert (described.state, described.members) == (GroupState.EMPTY, ())
            assert not described.is_simple_consumer_group  # its membership record came back
            assert described.partition_assignor == ""
    finally:
        broker.close()
