""":class:`BrokerMetrics`: every figure the metrics endpoint shows, and the text of a scrape."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any

from kafkette.protocol.headers import PRODUCE_KEY
from kafkette.server.dispatch import HANDLERS
from kafkette.server.metrics.client_metrics import ClientMetricsManager
from kafkette.server.metrics.exposition import Family, histogram_samples, render_steps
from kafkette.server.metrics.otlp import Point
from kafkette.server.metrics.pushed import PushedMetrics
from kafkette.server.metrics.requests import LATENCY_BUCKETS_S, ConnectionStats, RequestStats
from kafkette.server.metrics.state import BrokerState
from kafkette.server.metrics.traffic import TopicTraffic
from kafkette.server.steps import run_in_steps

FETCH_KEY = 1


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``), or its key for one this broker does not serve."""
    entry = HANDLERS.get(api_key)
    if entry is None:
        return str(api_key)
    return entry.request.NAME.removesuffix("Request")


class BrokerMetrics:
    """The broker's figures: counters the request path updates, gauges read from
    ``state`` at each scrape, and what clients pushed (KIP-714, :attr:`client_metrics`
    decides what they push)."""

    def __init__(
        self,
        state: BrokerState,
        clock: Callable[[], int],
        topic_name: Callable[[uuid.UUID], str | None],
    ) -> None:
        self.state = state
        self.clock = clock
        self.requests = RequestStats()
        self.connections = ConnectionStats()
        self.traffic = TopicTraffic(topic_name)
        self.client_metrics = ClientMetricsManager()
        self.pushed = PushedMetrics()

    def served(
        self, api_key: int, version: int, request: Any, response: Any, seconds: float
    ) -> None:
        """A request was answered (``response`` None: no answer, acks=0) after ``seconds``."""
        self.requests.observe(api_key, version, seconds)
        if api_key == PRODUCE_KEY:
            self.traffic.produced(request, response)
        elif api_key == FETCH_KEY and response is not None:
            self.traffic.fetched(response)

    def record_push(self, instance_id: uuid.UUID, client_id: str, points: list[Point]) -> None:
        """Keep what a client instance pushed (and drop what forgotten instances pushed)."""
        self._drop_forgotten()
        self.pushed.record(instance_id, client_id, points)

    def _drop_forgotten(self) -> None:
        forgotten = self.client_metrics.forgotten
        if forgotten:
            self.pushed.forget(forgotten)
            forgotten.clear()

    def text(self) -> str:
        """The scrape: Prometheus' text format, in one go (call on the broker's event loop)."""
        out: list[str] = []
        for _ in self._render(out):
            pass
        return "".join(out)

    async def scrape(self) -> str:
        """:meth:`text`, letting other tasks of the loop run every few milliseconds."""
        out: list[str] = []
        await run_in_steps(self._render(out))
        return "".join(out)

    def _render(self, out: list[str]) -> Generator[None, None, None]:
        self.client_metrics.expire(self.clock())
        self._drop_forgotten()
        for family in self.families():
            if family is None:
                yield
                continue
            yield from render_steps(family, out)

    def families(self) -> Iterator[Family | None]:
        """Every family of a scrape, its samples read now; None between steps."""
        yield from self._requests()
        yield from self._connections()
        yield from self._traffic()
        yield from self.state.families()
        instances = Family(
            "kafkette_client_metrics_instances",
            "gauge",
            "Client instances following the client metrics subscriptions (KIP-714).",
        )
        instances.add((), len(self.client_metrics.instances))
        yield instances
        yield from self.pushed.families()

    def _requests(self) -> Iterator[Family]:
        count = Family("kafkette_requests_total", "counter", "Requests served, by API and version.")
        duration = Family(
            "kafkette_request_duration_seconds",
            "histogram",
            "Time from a request's arrival to its answer, by API and version.",
        )
        for (key, version), stats in sorted(self.requests.by_api.items()):
            labels = (("api", api_name(key)), ("version", str(version)))
            count.add(labels, int(stats[0]))
            buckets = [int(n) for n in stats[2:]]
            histogram_samples(duration, labels, LATENCY_BUCKETS_S, buckets, stats[1])
        yield from (count, duration)

    def _connections(self) -> Iterator[Family]:
        stats = self.connections
        tables = (
            ("kafkette_connections", "gauge", "Open connections, by listener.", stats.open),
            (
                "kafkette_connections_accepted_total",
                "counter",
                "Connections accepted, by listener.",
                stats.accepted,
            ),
        )
        for name, kind, text, table in tables:
            family = Family(name, kind, text)
            for listener, value in sorted(table.items()):
                family.add((("listener", listener),), value)
            yield family
        auth = (
            (
                "kafkette_authentication_failures_total",
                "SASL authentications that failed, by mechanism.",
                stats.authentication_failures,
            ),
            (
                "kafkette_authentication_successes_total",
                "SASL authentications that succeeded, by mechanism.",
                stats.authentication_successes,
            ),
        )
        for name, text, table in auth:
            family = Family(name, "counter", text)
            for mechanism, value in sorted(table.items()):
                family.add((("mechanism", mechanism),), value)
            yield family

    def _traffic(self) -> Iterator[Family]:
        traffic = self.traffic
        tables = (
            ("kafkette_topic_bytes_in_total", "Record batch bytes appended.", traffic.bytes_in),
            ("kafkette_topic_records_in_total", "Records appended.", traffic.records_in),
            ("kafkette_topic_bytes_out_total", "Record batch bytes fetched.", traffic.bytes_out),
        )
        for name, text, table in tables:
            family = Family(name, "counter", text + " By topic.")
            for topic, value in sorted(table.items()):
                family.add((("topic", topic),), value)
            yield family
