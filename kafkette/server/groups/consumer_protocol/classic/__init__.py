"""Classic members of a consumer-type group (KIP-848's online upgrade): members
that speak JoinGroup, SyncGroup, Heartbeat and LeaveGroup
(:mod:`~kafkette.server.groups.consumer_protocol.classic.members`), and the
consumer protocol embedded in those APIs' metadata and assignments
(:mod:`~kafkette.server.groups.consumer_protocol.classic.embedded`).

No I/O; part of the consumer-protocol coordinator, which alone imports it.
"""
