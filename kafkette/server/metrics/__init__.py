"""The broker's metrics: what ``kafkette serve --metrics HOST:PORT`` shows Prometheus, and
KIP-714 client telemetry.

``registry`` (:class:`BrokerMetrics`, ``Broker.metrics``) puts together the counters the
request path updates (``requests``: per API and version, connections, authentications;
``traffic``: bytes and records in and out per topic), the gauges read from the broker's
state at each scrape (``state``), the client metrics subscriptions and instances
(``client_metrics``, no I/O; ``client_metrics_configs`` describes them as the CLIENT_METRICS
config resources) and the metrics clients pushed (``otlp`` decodes them, ``pushed`` keeps
them). ``exposition`` writes Prometheus' text format; ``http`` serves
it on the broker's event loop.

This room imports the core's dispatch table, the config catalogue's enums and, for
annotations, the cluster, the group and transaction coordinators whose state it reads;
the core (the broker builds :class:`BrokerMetrics`), the network edge (it counts
requests and connections) and the handlers (telemetry, client metrics configs) import it.
"""

from kafkette.server.metrics.exposition import CONTENT_TYPE
from kafkette.server.metrics.registry import BrokerMetrics
from kafkette.server.metrics.state import BrokerState

__all__ = ["CONTENT_TYPE", "BrokerMetrics", "BrokerState"]
