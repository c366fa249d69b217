"""Share groups (KIP-932, Kafka's queues): the rules, without I/O.

``state`` names a record's states and the values passed around, ``partition``
is one share partition's records in flight (acquisition, locks, delivery
counts, acknowledgements, the start offset), and ``persistence`` turns its
changes into ``__share_group_state`` records (ShareSnapshot, ShareUpdate) and
back. ``group`` is one share group's membership (ShareGroupHeartbeat: epochs,
sessions, the target assignment) and ``assignor`` Kafka's simple share
assignor. ``sessions`` keeps the share sessions that ShareFetch and
ShareAcknowledge open, follow by epoch and close; ``wire`` maps them to and
from the generated messages. ``coordinator`` holds the broker's share groups,
share partitions, sessions and timers together for the share handlers, and
``log_store`` keeps ``__share_group_state`` in the broker's logs: the one
module here that imports the core (its internal topic); the rest is plain rules.
Like ``groups``, the room may read ``config`` (the coordinator reads a group's
``share.*`` configs through ``config.group_configs``).
"""
