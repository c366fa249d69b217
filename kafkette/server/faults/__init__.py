"""Injected faults: the table a test fills (:mod:`~kafkette.server.faults.table`)
and the runtime hook that arms it over Kafka's config APIs
(:mod:`~kafkette.server.faults.hook`).

Shared by ``kafkette serve --fault``, the hook and the in-process clusters of
:mod:`kafkette.testing`. No I/O of its own; may import ``protocol``, ``errors``
and ``acl`` (the principal of the connection that arms a fault), never ``net``
or ``handlers``.
"""
