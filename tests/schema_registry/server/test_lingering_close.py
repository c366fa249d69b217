"""A body past ``max_body_bytes`` gets its 413 even when the client is still sending.

The server answers before reading the body, then reads and drops the rest before it
closes (a lingering close): a socket closed with unread data is reset, and a client
still writing its body (as ``http.client`` does before it reads) got a broken pipe
instead of the answer.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from tests.schema_registry.server.servers import registry_server

BODY_BYTES = 16 * 1024 * 1024
"""Far more than the loopback socket buffers hold: the client is still sending when the
server has answered."""


def test_a_client_still_sending_reads_the_413() -> None:
    with registry_server(max_body_bytes=64 * 1024) as url:
        address = urlsplit(url)
        assert address.hostname is not None and address.port is not None
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            head = (
                "POST /subjects/big/versions HTTP/1.1\r\n"
                f"Host: {address.netloc}\r\n"
                "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
                f"Content-Length: {BODY_BYTES}\r\n\r\n"
            )
            sock.sendall(head.encode() + b"x" * BODY_BYTES)  # a reset raises here
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 413 "
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body == {
        "error_code": 413,
        "message": "Request body larger than 65536 bytes",
    }
