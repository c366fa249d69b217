"""ApiVersions (key 18): the APIs and versions this broker serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.errors import UnsupportedVersionError
from kafkette.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkette.protocol.messages.api_versions_response import ApiVersion
from kafkette.server.dispatch import RequestContext, handler
from kafkette.server.metrics.client_metrics import client_software

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


_api_keys: tuple[dict[int, tuple[int, int]], list[ApiVersion]] = ({}, [])
"""The last answer's API ranges, and the ranges they were made from."""


def api_keys(broker: Broker) -> list[ApiVersion]:
    """The API ranges of an ApiVersions answer (every client's first request), made again
    only when the broker's ranges differ from the last answer's: making them took half
    of its 22 µs. Shared by the answers, which are encoded and never changed."""
    global _api_keys
    ranges = broker.supported_versions()
    made_from, keys = _api_keys
    if ranges != made_from:
        keys = [ApiVersion(key, low, high) for key, (low, high) in ranges.items()]
        _api_keys = (ranges, keys)
    return keys


@handler(ApiVersionsRequest)
async def handle_api_versions(
    broker: Broker, ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    if request.client_software_name:  # for client metrics subscriptions (KIP-714 match)
        client_software.set((request.client_software_name, request.client_software_version))
    return ApiVersionsResponse(error_code=0, api_keys=api_keys(broker))


def unsupported_version_response(broker: Broker) -> ApiVersionsResponse:
    """The answer to an ApiVersions request of a version we do not know (sent at v0).

    As KIP-511 specifies, it carries UNSUPPORTED_VERSION and our ranges, so the
    client can retry with a version both sides know.
    """
    return ApiVersionsResponse(error_code=UnsupportedVersionError.code, api_keys=api_keys(broker))
