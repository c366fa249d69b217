"""The code under test in this example suite: an orders-to-invoices service.

Orders arrive on one topic, keyed by customer; the service writes one invoice
per order to another topic, and commits its progress in the same transaction
as the invoices, so that a crash or a retried request never invoices an order
twice or skips one (Kafka's consume-transform-produce, exactly once).
"""

from __future__ import annotations

from kafkette import Consumer, Producer


def invoice_for(order: bytes) -> bytes:
    """The invoice of one order (a real service would price it)."""
    return b"invoice:" + order


class InvoiceService:
    """Reads ``orders``, writes ``invoices``; one transaction per poll."""

    def __init__(
        self,
        bootstrap_servers: str,
        orders: str,
        invoices: str,
        *,
        group: str = "invoicer",
        transactional_id: str = "invoicer-1",
    ) -> None:
        self.invoices = invoices
        self.consumer = Consumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        self.producer = Producer(
            bootstrap_servers=bootstrap_servers, transactional_id=transactional_id
        )
        self.consumer.subscribe([orders])
        self.producer.init_transactions()

    def run_once(self, timeout: float = 10.0) -> int:
        """Invoice what one poll returns (waiting up to ``timeout`` for it); how many."""
        batches = self.consumer.poll(timeout)
        if not batches:
            return 0
        self.producer.begin_transaction()
        for records in batches.values():
            for record in records:
                self.producer.send(self.invoices, invoice_for(record.value), key=record.key)
        self.producer.send_offsets_to_transaction(
            {tp: records[-1].offset + 1 for tp, records in batches.items()},
            self.consumer.group_metadata(),
        )
        self.producer.commit_transaction()
        return sum(len(records) for records in batches.values())

    def run_until(self, count: int, timeout: float = 10.0) -> None:
        """Invoice until ``count`` orders are done."""
        done = 0
        while done < count:
            processed = self.run_once(timeout)
            if processed == 0:
                raise TimeoutError(f"{done} of {count} orders invoiced after {timeout} s")
            done += processed

    def close(self) -> None:
        self.producer.close()
        self.consumer.close()

    def __enter__(self) -> InvoiceService:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
