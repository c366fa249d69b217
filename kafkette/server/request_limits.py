"""Kafka's limits on how much work one admin request may ask for.

A number taken from a request that sizes work or memory is bounded before it
is used. Kafka's controller refuses a CreateTopics or CreatePartitions request
that would add more than :data:`MAX_PARTITIONS_PER_REQUEST` partitions
(KAFKA-17870, KAFKA-19673), and any operation that would write more than
:data:`MAX_RECORDS_PER_REQUEST` metadata records (a record per topic, per
partition and per config), both with POLICY_VIOLATION for every topic of the
request and before any work is done.

This broker applies the partition limit as Kafka does, and the record limit to
a request's topics and configs (its partitions are bounded by the first
limit), so that 10,000 partitions in one request are still accepted.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkette.errors import PolicyViolationError
from kafkette.protocol.messages.create_topics_request import CreatableTopic

MAX_PARTITIONS_PER_REQUEST = 10_000
"""Kafka's ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``."""

MAX_RECORDS_PER_REQUEST = 10_000
"""Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``."""

TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


def too_many_partitions() -> PolicyViolationError:
    """The error of a request adding more than :data:`MAX_PARTITIONS_PER_REQUEST` partitions."""
    return PolicyViolationError(TOO_MANY_PARTITIONS)


def too_large_batch() -> PolicyViolationError:
    """The error of a request over :data:`MAX_RECORDS_PER_REQUEST` topics and configs."""
    return PolicyViolationError(TOO_LARGE_BATCH)


def check_create_topics(
    topics: Iterable[CreatableTopic], default_partitions: int
) -> PolicyViolationError | None:
    """The error every topic of a CreateTopics request gets for its size, or None.

    Partitions are counted as Kafka does: a manual assignment's length, else the
    requested count, or the broker's default for -1; invalid counts count as none.
    """
    partitions = 0
    records = 0
    for topic in topics:
        if topic.assignments:
            partitions += len(topic.assignments)
        elif topic.num_partitions == -1:
            partitions += default_partitions
        elif topic.num_partitions > 0:
            partitions += topic.num_partitions
        records += 1 + len(topic.configs)
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        return too_many_partitions()
    if records > MAX_RECORDS_PER_REQUEST:
        return too_large_batch()
    return None
