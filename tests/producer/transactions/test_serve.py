"""Our transactional producer on ``kafkette serve``, read back by confluent-kafka
(librdkafka) and by our consumer: 20 transactions of 50 records, every third aborted."""

from __future__ import annotations

from kafkette import AdminClient, NewTopic, Producer
from tests.brokers import BrokerProcess
from tests.producer.transactions.helpers import confluent_read, read_all

TRANSACTIONS = 20
RECORDS = 50
PARTITIONS = 2


def test_every_third_transaction_aborted(memory_broker: BrokerProcess) -> None:
    """read_committed sees exactly the committed records, in order per partition;
    read_uncommitted sees every record (the aborted ones were flushed before the abort)."""
    bootstrap = memory_broker.bootstrap
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("t", PARTITIONS)]).all()
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    everything: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Producer(bootstrap_servers=bootstrap, transactional_id="every-third") as producer:
        producer.init_transactions()
        for txn in range(TRANSACTIONS):
            aborted = txn % 3 == 2
            producer.begin_transaction()
            for i in range(RECORDS):
                value = f"{txn}-{i}".encode()
                partition = i % PARTITIONS
                producer.send("t", value, partition=partition)
                everything[partition].append(value)
                if not aborted:
                    committed[partition].append(value)
            if aborted:
                producer.flush()
                producer.abort_transaction()
            else:
                producer.commit_transaction()

    def by_partition(records: list[tuple[int, int, bytes | None]]) -> dict[int, list[bytes]]:
        grouped: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for partition, _, value in records:
            assert value is not None
            grouped[partition].append(value)
        return grouped

    ours = read_all(bootstrap, "t", PARTITIONS, "read_committed")
    assert by_partition(ours) == committed
    assert confluent_read(bootstrap, "t", PARTITIONS, "read_committed") == ours
    assert by_partition(confluent_read(bootstrap, "t", PARTITIONS, "read_uncommitted")) == (
        everything
    )
    assert by_partition(read_all(bootstrap, "t", PARTITIONS, "read_uncommitted")) == everything
