"""A large request (Kafka bounds it only by socket.request.max.bytes), or a small
one with a large answer, must not stall other connections: large frames are
decoded and answered off the event loop, long answers encoded off it, and
Metadata and DescribeConfigs do their work in steps."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import DescribeConfigsRequest, MetadataRequest
from kafkette.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.server.net.frames import LARGE_FRAME_BYTES
from tests.server.fuzz_harness import fuzz_broker

TOPICS = 100_000


def read_frame(sock: socket.socket) -> bytes:
    file = sock.makefile("rb")
    size = struct.unpack(">i", file.read(4))[0]
    return file.read(size)


@pytest.mark.timeout(120)
def test_a_huge_metadata_request_does_not_stall_other_connections() -> None:
    names = [f"missing-{i:06d}" for i in range(TOPICS)]
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name) for name in names],
        allow_auto_topic_creation=False,
    )
    body = encode_request(request, 12, 5, "big")
    assert len(body) > 2 * LARGE_FRAME_BYTES
    with fuzz_broker() as fuzz, socket.create_connection(("127.0.0.1", fuzz.port)) as big:
        big.settimeout(60)
        big.sendall(struct.pack(">i", len(body)) + body)
        assert fuzz.healthy() is None
        big.setblocking(False)
        with pytest.raises(BlockingIOError):  # still being decoded or answered
            big.recv(1)
        big.settimeout(60)
        correlation, response = decode_response(read_frame(big), request.API_KEY, 12)
    assert correlation == 5
    assert len(response.topics) == TOPICS
    assert {t.error_code for t in response.topics} == {3}  # UNKNOWN_TOPIC_OR_PARTITION
    assert fuzz.internal_errors == []


@pytest.mark.timeout(120)
def test_a_small_describe_configs_with_a_huge_answer_does_not_stall_other_connections() -> None:
    """2,000 times the broker's configs with documentation: a 10 KB frame, a 15 MB answer."""
    resources = [DescribeConfigsResource(4, "1", None) for _ in range(2_000)]
    request = DescribeConfigsRequest(
        resources=resources, include_synonyms=True, include_documentation=True
    )
    body = encode_request(request, 4, 6, "big")
    assert len(body) < LARGE_FRAME_BYTES
    with fuzz_broker() as fuzz, socket.create_connection(("127.0.0.1", fuzz.port)) as big:
        big.settimeout(60)
        big.sendall(struct.pack(">i", len(body)) + body)
        started = time.monotonic()
        assert fuzz.healthy() is None
        # Answered while the 15 MB answer is encoded in a worker thread (it took the loop
        # 2 s when encoded there: the handler, reusing one description, was too quick to
        # be taken for a large one).
        assert time.monotonic() - started < 1.0
        correlation, response = decode_response(read_frame(big), request.API_KEY, 4)
    assert correlation == 6
    assert len(response.results) == 2_000
    first = response.results[0]
    assert (first.error_code, first.resource_name) == (0, "1")
    assert len(first.configs) > 50
    assert all(result == first for result in response.results)
    assert fuzz.internal_errors == []
