"""The bundled broker: a transport-agnostic core and the rooms around it.

:class:`Broker` turns request objects into response objects; the TCP
listener (:mod:`kafkette.server.net.listener`, run by ``kafkette serve``) and the
in-process ``memory://`` transport are thin shells around it.

The core lives at this package's top (the broker, the cluster of topics and
partitions, the handler table and request context in ``dispatch``, routing to
simulated nodes, maintenance, producer ids and sequences, request limits);
each concern around it has a room whose docstring says what it owns and what
it may import (``tests/test_import_graph.py`` holds the rules):

- ``net/``: listeners, connections, framing, TLS, zero-copy sends;
- ``config/``: the broker's configuration and Kafka's config catalogue;
- ``faults/``: injected faults and their runtime hook;
- ``data_dir/``: the data directory's lock and read-only serving;
- ``handlers/``: one module per Kafka API;
- ``groups/``, ``txn/``: the group and transaction coordinators;
- ``sasl/``, ``acl/``: authentication, the principal and authorization.

``kafkette serve`` itself is the command's (:mod:`kafkette.cli.serve`).
"""

from kafkette.server.broker import Broker
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.dispatch import RequestContext

__all__ = ["Broker", "BrokerConfig", "RequestContext"]
