"""The group coordinator: consumer group membership and committed offsets.

- ``group``: one classic group's state (Empty, PreparingRebalance,
  CompletingRebalance, Stable, Dead) with Kafka's transition table, its
  members and protocol selection; plain data, no I/O.
- ``engine``: the classic group protocol over every group (Kafka's
  GroupCoordinator): requests and time in, answers and store writes out;
  JoinGroup and SyncGroup answer through callbacks.
- ``coordinator``: ``GroupCoordinator``, the engine in the broker's event loop
  (JoinGroup and SyncGroup wait for their answer) with the broker's clock.
- ``timer``: the loop that runs the coordinator's deadlines.
- ``store`` defines how groups and offsets are kept (Kafka's
  ``__consumer_offsets`` records); ``log_store`` keeps them in that topic.
"""
