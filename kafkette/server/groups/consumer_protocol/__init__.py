"""Consumer-type groups: the consumer group protocol of KIP-848, broker side, without I/O.

Served by ``server/handlers/consumer_group_heartbeat.py`` and
``consumer_group_describe.py`` (the broker's ``consumer_groups``); OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups and DeleteGroups consult it through
``consumer_group_hooks.py``; classic members inside these groups and the migration
between classic and consumer groups go through ``server/groups/migration.py``. The groups
are kept in ``__consumer_offsets`` as Kafka's consumer group records (``records``), which
the coordinator hands to its ``record_sink`` and rebuilds the groups from on start.

- ``coordinator``: :class:`ConsumerGroupCoordinator`, ConsumerGroupHeartbeat over every
  group, and the session and revocation timers (``next_deadline_ms`` / ``tick``);
- ``heartbeat``: the request and response, and the checks made before any group;
- ``group``: one group's state (epochs, members, target assignment, partition epochs);
- ``member``: one member (Kafka's ConsumerGroupMember) and its reconciliation states;
- ``reconciliation``: a member's next step towards its target (CurrentAssignmentBuilder);
- ``assignors``: the server assignors ``uniform`` and ``range``;
- ``topics``: the injected topic image and what subscriptions (names, regex) resolve to;
- ``regex``: SubscribedTopicRegex compiled with RE2, as Kafka compiles it with RE2/J;
- ``partitions``: partition sets keyed by topic id;
- ``describe``: the ConsumerGroupDescribe read-out; ``offsets``: OffsetCommit and
  OffsetFetch checked against member epochs; ``wire``: to and from the generated messages;
- ``classic_members``: JoinGroup, SyncGroup, Heartbeat and LeaveGroup of members using
  the classic protocol inside a consumer group; ``embedded``: the consumer protocol bytes
  those carry;
- ``records``: a group as Kafka's ConsumerGroup* records in ``__consumer_offsets``, and back;
- ``config``: the ``group.consumer.*`` settings.
"""

from kafkette.server.groups.consumer_protocol.config import ConsumerGroupConfig
from kafkette.server.groups.consumer_protocol.coordinator import ConsumerGroupCoordinator
from kafkette.server.groups.consumer_protocol.group import ConsumerGroup, ConsumerGroupState
from kafkette.server.groups.consumer_protocol.heartbeat import HeartbeatRequest, HeartbeatResponse
from kafkette.server.groups.consumer_protocol.member import Member, MemberState
from kafkette.server.groups.consumer_protocol.topics import TopicInfo

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerGroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "Member",
    "MemberState",
    "TopicInfo",
]
