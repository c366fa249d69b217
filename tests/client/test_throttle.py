"""KIP-219: answers whose ``throttle_time_ms`` the client must observe, at the wire.

The versions are Java's ``AbstractResponse.shouldClientThrottle`` overrides: from
them on the broker answers at once and expects the client to hold back; before
them (and for APIs without one) the broker delays the answer itself and the
client only reports the value.
"""

from __future__ import annotations

import pytest

from kafkette.client.throttle import CLIENT_THROTTLES_FROM, client_throttle_ms
from kafkette.client.wire import ClientWire
from kafkette.protocol.framing import encode_frame
from kafkette.protocol.headers import encode_response
from kafkette.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.schema import Request, Response
from kafkette.testing import ManualClock


def answered(wire: ClientWire, request: Request, version: int, response: Response) -> None:
    correlation_id, _ = wire.send(request, version)
    data = encode_frame(bytes(encode_response(response, version, correlation_id)))
    # (fields a version lacks, as an early throttle_time_ms, come back as defaults)
    assert [(cid, type(r)) for cid, r in wire.receive_data(data)] == [
        (correlation_id, type(response))
    ]


@pytest.mark.parametrize(
    ("request_", "response", "first"),
    [
        (ProduceRequest(acks=1, timeout_ms=1000), ProduceResponse(throttle_time_ms=250), 6),
        (FetchRequest(), FetchResponse(throttle_time_ms=250), 8),
        (MetadataRequest(), MetadataResponse(throttle_time_ms=250), 6),
    ],
)
def test_the_client_holds_back_from_the_kip_219_version_on(
    request_: Request, response: Response, first: int
) -> None:
    """At the first KIP-219 version the connection is throttled for the answer's time,
    counted from its arrival; one version before, not at all."""
    lowest = max(type(request_).VALID_VERSIONS[0], 1)
    for version in range(lowest, first):
        wire = ClientWire(None, clock=ManualClock())
        answered(wire, request_, version, response)
        assert wire.throttle_delay_ms() == 0
    clock = ManualClock()
    wire = ClientWire(None, clock=clock)
    answered(wire, request_, first, response)
    assert wire.throttle_delay_ms() == 250
    clock.advance(100)
    assert wire.throttle_delay_ms() == 150
    clock.advance(150)
    assert wire.throttle_delay_ms() == 0


def test_the_longest_throttle_wins_and_none_is_none() -> None:
    clock = ManualClock()
    wire = ClientWire(None, clock=clock)
    answered(wire, MetadataRequest(), 12, MetadataResponse(throttle_time_ms=0))
    assert wire.throttle_delay_ms() == 0
    answered(wire, MetadataRequest(), 12, MetadataResponse(throttle_time_ms=500))
    clock.advance(100)
    answered(wire, MetadataRequest(), 12, MetadataResponse(throttle_time_ms=200))
    assert wire.throttle_delay_ms() == 400


def test_an_api_without_a_kip_219_version_is_only_reported() -> None:
    """ConsumerGroupHeartbeat has no shouldClientThrottle override in Java: never."""
    assert ConsumerGroupHeartbeatRequest.API_KEY not in CLIENT_THROTTLES_FROM
    response = ConsumerGroupHeartbeatResponse(throttle_time_ms=300)
    assert client_throttle_ms(ConsumerGroupHeartbeatRequest.API_KEY, 1, response) == 0
    wire = ClientWire(None, clock=ManualClock())
    answered(wire, ConsumerGroupHeartbeatRequest(group_id="g"), 0, response)
    assert wire.throttle_delay_ms() == 0


def test_the_table_names_java_s_versions() -> None:
    """A few rows checked against Kafka's responses (the others are the same table)."""
    by_name = {
        "Produce": 6, "Fetch": 8, "ListOffsets": 3, "Metadata": 6, "OffsetCommit": 4,
        "OffsetFetch": 4, "FindCoordinator": 2, "JoinGroup": 3, "Heartbeat": 2,
        "ApiVersions": 2, "InitProducerId": 1, "IncrementalAlterConfigs": 0,
    }  # fmt: skip
    from kafkette.protocol import messages

    for name, version in by_name.items():
        assert CLIENT_THROTTLES_FROM[getattr(messages, f"{name}Request").API_KEY] == version
    assert len(CLIENT_THROTTLES_FROM) == 43  # every row of the table names a known API
