"""A large request (Kafka bounds it only by socket.request.max.bytes) must not stall
other connections: its frame is decoded and answered off the event loop, and
Metadata looks its topics up in steps."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import MetadataRequest
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.server.frames import LARGE_FRAME_BYTES
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
