"""Opening a planned topic's partition logs without stopping the broker.

Used by CreateTopics and by Metadata's auto-creation: the logs are opened in
steps (:func:`~kafkette.server.steps.run_in_steps`), the topic's name is held
in :attr:`Cluster.creating <kafkette.server.cluster.Cluster.creating>` until
it is registered, and a creation that fails or is cancelled half way leaves
no log behind.
"""

from __future__ import annotations

from kafkette.server.cluster import Cluster, Partition, Topic, TopicPlan
from kafkette.server.steps import run_in_steps


async def open_topic(cluster: Cluster, plan: TopicPlan) -> Topic:
    """Create the planned topic in ``cluster``; the caller holds
    :attr:`Broker.topic_changes <kafkette.server.broker.Broker.topic_changes>`."""
    cluster.creating.add(plan.name)
    try:
        opened: list[Partition] = []
        await run_in_steps(
            cluster.open_partitions(plan.name, 0, plan.num_partitions, plan.log_config, opened)
        )
        return cluster.register_topic(plan, opened)
    finally:
        cluster.creating.discard(plan.name)
