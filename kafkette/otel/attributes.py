"""The names OpenTelemetry's messaging semantic conventions give Kafka's spans and metrics.

The conventions are still in development; these are the names of the current ones
(``messaging.operation.type``, ``messaging.kafka.offset``, ``messaging.consumer.group.name``),
not the deprecated ones older instrumentations emit (``messaging.operation``,
``messaging.kafka.message.offset``, ``messaging.kafka.consumer.group``).
"""

from __future__ import annotations

from typing import Any

from kafkette.errors import KafkaError

SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
OFFSET = "messaging.kafka.offset"
KEY = "messaging.kafka.message.key"
TOMBSTONE = "messaging.kafka.message.tombstone"
GROUP = "messaging.consumer.group.name"
BATCH_COUNT = "messaging.batch.message_count"
CLIENT_ID = "messaging.client.id"
BODY_SIZE = "messaging.message.body.size"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

KAFKA = "kafka"

OPERATION_DURATION = "messaging.client.operation.duration"
SENT_MESSAGES = "messaging.client.sent.messages"
CONSUMED_MESSAGES = "messaging.client.consumed.messages"
PROCESS_DURATION = "messaging.process.duration"
CONSUMER_LAG = "messaging.kafka.consumer.lag"
"""Not in the conventions (they define no lag metric): Java's ``records-lag`` per partition,
named in their style."""

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
"""The bucket boundaries (seconds) the conventions advise for the duration histograms."""


def error_type(error: BaseException) -> str:
    """``error.type`` of a failure: Kafka's error name (``UNKNOWN_TOPIC_OR_PARTITION``,
    ``TIMEOUT``) for a Kafka error, else the exception's qualified class name."""
    if isinstance(error, KafkaError):
        return error.name
    cls = type(error)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def key_text(key: Any) -> str | None:
    """``messaging.kafka.message.key``: a str as is, bytes when they are UTF-8, an int in
    decimal; None (the attribute left out) for a null key or one with no canonical text."""
    if key is None:
        return None
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode()
        except UnicodeDecodeError:
            return None
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return None


def server_attributes(bootstrap_servers: tuple[str, ...]) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of the first bootstrap server (none for an
    in-process cluster, ``memory://`` or ``file://``)."""
    first = bootstrap_servers[0] if bootstrap_servers else ""
    if not first or "://" in first:
        return {}
    host, sep, port = first.rpartition(":")
    if not sep:
        return {SERVER_ADDRESS: first}
    host = host.strip("[]")
    return (
        {SERVER_ADDRESS: host, SERVER_PORT: int(port)} if port.isdigit() else {SERVER_ADDRESS: host}
    )
