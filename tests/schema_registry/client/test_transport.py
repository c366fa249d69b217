"""The client's HTTP edge and caches, without a registry.

Transport-level checks only (what a registry cannot be made to do on demand:
fail with 503, count connections, check the Authorization header): a tiny
stdlib HTTP/1.1 server in this file answers canned bodies. What the REST API
means is checked against the real registry in test_against_registry.py.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme

from kafkette.errors import ConfigError
from kafkette.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkette.schema_registry.client.core import ClientCore, Request, run
from kafkette.schema_registry.client.settings import registry_settings


class Canned:
    """What the server answers, and what it saw."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any]] = []
        self.default: tuple[int, Any] = (200, ["s"])
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.connections: set[tuple[str, int]] = set()


def handler_for(canned: Canned) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            canned.seen.append((self.command, self.path, dict(self.headers), body))
            canned.connections.add(self.client_address)
            status, value = canned.answers.pop(0) if canned.answers else canned.default
            data = value if isinstance(value, bytes) else json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = answer

    return Handler


@pytest.fixture
def canned() -> Canned:
    return Canned()


@pytest.fixture
def server(canned: Canned) -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(canned))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_keep_alive_basic_auth_and_headers(server: ThreadingHTTPServer, canned: Canned) -> None:
    """Requests share one connection, carry Basic credentials, Confluent's content type."""
    conf = {"url": url_of(server), "basic.auth.user.info": "ann:s3:cret"}
    with SchemaRegistryClient(conf) as client:
        for _ in range(3):
            assert client.get_subjects() == ["s"]
        canned.default = (200, {"id": 7})
        assert client.register_schema("a b/c", Schema('"string"')) == 7
    assert len(canned.connections) == 1
    method, path, headers, body = canned.seen[-1]
    assert (method, path) == ("POST", "/subjects/a%20b%2Fc/versions")
    assert headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ann:s3:cret").decode()
    assert json.loads(body) == {"schema": '"string"'}


def test_credentials_in_the_url_and_a_path_prefix(
    server: ThreadingHTTPServer, canned: Canned
) -> None:
    """http://user:pw@host/prefix: the credentials as Basic auth, the prefix on every path."""
    port = server.server_address[1]
    with SchemaRegistryClient(f"http://bob:pw%40x@127.0.0.1:{port}/registry/") as client:
        client.get_subjects(deleted=True)
    _, path, headers, _ = canned.seen[0]
    assert path == "/registry/subjects?deleted=true"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"bob:pw@x").decode()


def test_retries_503_then_answers(server: ThreadingHTTPServer, canned: Canned) -> None:
    """503 and 429 are retried (with backoff); the answer after them is returned."""
    canned.answers = [(503, {"error_code": 50301, "message": "busy"}), (429, b"slow down")]
    with SchemaRegistryClient(url_of(server), retries_wait_ms=1) as client:
        assert client.get_subjects() == ["s"]
    assert len(canned.seen) == 3


def test_the_last_error_after_retries(server: ThreadingHTTPServer, canned: Canned) -> None:
    """A retried error that persists is raised with its code; a 404 is not retried."""
    canned.default = (503, {"error_code": 50301, "message": "busy"})
    with SchemaRegistryClient(url_of(server), retries_wait_ms=1, max_retries=2) as client:
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert (info.value.http_status_code, info.value.error_code) == (503, 50301)
        assert len(canned.seen) == 3
        canned.default = (404, b"<html>no</html>")
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert (info.value.http_status_code, info.value.error_code) == (404, -1)
        assert "<html>no</html>" in info.value.error_message
        assert len(canned.seen) == 4


def test_refused_is_an_error_naming_the_url() -> None:
    """Nothing listening: SchemaRegistryError(-1, -1, ...) naming the URL, after the retries."""
    url = f"http://127.0.0.1:{free_port()}"
    with (
        SchemaRegistryClient(url, retries_wait_ms=1, max_retries=1) as client,
        pytest.raises(SchemaRegistryError, match="no answer from the schema registry at"),
    ):
        client.get_subjects()


def test_fails_over_to_the_next_url(server: ThreadingHTTPServer, canned: Canned) -> None:
    """With several URLs, one that refuses is passed over for the next."""
    urls = f"http://127.0.0.1:{free_port()},{url_of(server)}"
    with SchemaRegistryClient(urls, retries_wait_ms=1) as client:
        assert client.get_subjects() == ["s"]
        assert client.get_subjects() == ["s"]
    assert len(canned.seen) == 2


@pytest.mark.anyio
async def test_async_keep_alive_and_retry(server: ThreadingHTTPServer, canned: Canned) -> None:
    """The async edge: one connection, a 503 retried, a 404 raised with its code."""
    canned.answers = [(503, b"")]
    async with AsyncSchemaRegistryClient(url_of(server), retries_wait_ms=1) as client:
        assert await client.get_subjects() == ["s"]
        assert await client.get_subjects() == ["s"]
        canned.default = (404, {"error_code": 40401, "message": "Subject 'x' not found."})
        with pytest.raises(SchemaRegistryError) as info:
            await client.get_latest_version("x")
    assert info.value.error_code == 40401
    assert len(canned.connections) == 1


@pytest.fixture
def tls_server(canned: Canned, tmp_path: Any) -> Iterator[tuple[str, str]]:
    import ssl

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(canned))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", str(ca_file)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_tls(tls_server: tuple[str, str]) -> None:
    """https with ssl.ca.location verifies the server; without the CA it refuses, not retries."""
    url, ca_file = tls_server
    with SchemaRegistryClient({"url": url, "ssl.ca.location": ca_file}) as client:
        assert client.get_subjects() == ["s"]
    with (
        SchemaRegistryClient(url, retries_wait_ms=1) as client,
        pytest.raises(SchemaRegistryError, match="certificate does not verify"),
    ):
        client.get_subjects()


def test_a_close_before_answering_names_the_scheme() -> None:
    """A server that reads the request and closes without answering (what a registry
    serving HTTPS does to plain HTTP): the error says so and points at the URL's
    scheme (it quoted h11's state error)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def close_each() -> None:
            for _ in range(2):  # the first try and its one retry
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)

        closer = threading.Thread(target=close_each, daemon=True)
        closer.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with (
            SchemaRegistryClient(url, retries_wait_ms=1, max_retries=1) as client,
            pytest.raises(
                SchemaRegistryError,
                match=r"closed the connection before answering .*is the URL's scheme right\?",
            ),
        ):
            client.get_subjects()
        closer.join(10)


@pytest.mark.anyio
async def test_async_tls(tls_server: tuple[str, str]) -> None:
    """The async edge over TLS."""
    url, ca_file = tls_server
    async with AsyncSchemaRegistryClient(url, ssl_ca_location=ca_file) as client:
        assert await client.get_subjects() == ["s"]


@pytest.mark.parametrize(
    ("conf", "setting"),
    [
        ({}, "url"),
        ({"url": "ftp://x"}, "url"),
        ({"url": "http://x:notaport"}, "url"),
        ({"url": "http://x", "basic.auth.user.info": "no-colon"}, "basic.auth.user.info"),
        ({"url": "http://x", "timeout": -1}, "timeout"),
        ({"url": "http://x", "colour": "red"}, "colour"),
        ({"url": "http://x", "ssl.key.location": "k.pem"}, "ssl.key.location"),
        ({"url": "https://x", "ssl.ca.location": "/nonexistent.pem"}, "ssl.ca.location"),
        ({"url": "memory://a,http://x"}, "url"),
    ],
)
def test_bad_settings_name_the_setting(conf: dict[str, Any], setting: str) -> None:
    """Each bad setting is a ConfigError naming it, at construction."""
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient(conf).close()
    assert info.value.args[0] == setting


def test_python_spellings() -> None:
    """Options in Python spelling are Confluent's settings."""
    settings = registry_settings("http://h:1", basic_auth_user_info="u:p", max_retries=0)
    assert settings.basic_auth == ("u", "p") and settings.max_retries == 0


def test_caches() -> None:
    """Ids, schemas and numbered versions are asked once; latest versions every time;
    deletes drop what the subject held."""
    core = ClientCore()
    sent: list[str] = []
    schema = Schema('{"type":"string"}')
    answers = {
        "POST /subjects/s/versions": {"id": 3},
        "GET /schemas/ids/3": {"schema": '{"type":"string"}'},
        "POST /subjects/s": {"id": 3, "version": 1, "schema": '{"type":"string"}'},
        "GET /subjects/s/versions/1": {"id": 3, "version": 1, "schema": '"string"'},
        "GET /subjects/s/versions/latest": {"id": 3, "version": 1, "schema": '"string"'},
        "DELETE /subjects/s": [1],
    }

    def answer(request: Request) -> Any:
        sent.append(f"{request.method} {request.path}")
        return answers[sent[-1]]

    for _ in range(2):
        assert run(core.register_schema("s", schema), answer) == 3
        assert run(core.get_schema(3), answer) == schema  # known from the register
        assert run(core.lookup_schema("s", schema), answer).version == 1
        assert run(core.get_version("s", 1), answer).schema_id == 3
        assert run(core.get_latest_version("s"), answer).version == 1
    assert sent == [  # version 1 is known from the lookup
        "POST /subjects/s/versions",
        "POST /subjects/s",
        "GET /subjects/s/versions/latest",
        "GET /subjects/s/versions/latest",
    ]
    sent.clear()
    assert run(core.delete_subject("s"), answer) == [1]
    run(core.register_schema("s", schema), answer)
    run(core.get_version("s", 1), answer)
    assert sent == ["DELETE /subjects/s", "POST /subjects/s/versions", "GET /subjects/s/versions/1"]
