"""ApiVersions: every answer carries the ranges of the registered handlers, made once."""

from __future__ import annotations

import pytest

from kafkette.protocol.messages.api_versions_response import ApiVersion
from kafkette.server import Broker, BrokerConfig
from kafkette.server.handlers import api_versions
from kafkette.server.handlers.api_versions import api_keys


def test_the_ranges_are_made_again_only_when_they_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(api_versions, "_api_keys", api_versions._api_keys)  # put back after
    broker = Broker(BrokerConfig())
    served = broker.supported_versions()
    expected = [ApiVersion(k, low, high) for k, (low, high) in served.items()]
    first = api_keys(broker)
    assert first == expected
    assert api_keys(broker) is first  # no new objects per request
    monkeypatch.setattr(broker, "supported_versions", lambda: {**served, 0: (3, 9)})
    again = api_keys(broker)
    assert again is not first
    assert again[0] == ApiVersion(0, 3, 9)
    assert again[1:] == expected[1:]
    assert api_keys(Broker(BrokerConfig())) == expected  # another broker's own ranges
