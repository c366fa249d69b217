"""Our clients over HTTPS with Basic credentials, against the registry's own TLS shell,
beside confluent-kafka's client with the same settings."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.schema_registry import SchemaRegistryClient as CSchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as CSchemaRegistryError

from kafkette.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from tests.schema_registry.server.servers import registry_server

SCHEMA = Schema('{"type": "record", "name": "R", "fields": []}')


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL, CA file) of a registry over TLS that lets alice:secret in."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))

    def authenticate(user: str, password: str) -> bool:
        return (user, password) == ("alice", "secret")

    with registry_server(ssl_context=context, authenticate=authenticate) as url:
        yield url, str(ca_path)


def errors(call: Any) -> tuple[int, int]:
    try:
        call()
    except (SchemaRegistryError, CSchemaRegistryError) as exc:
        return exc.http_status_code, exc.error_code
    raise AssertionError("no error")


def test_sync_client(secured: tuple[str, str]) -> None:
    """The right user registers; a wrong password or none gets confluent-kafka's 401."""
    url, ca = secured
    good = {"url": url, "ssl.ca.location": ca, "basic.auth.user.info": "alice:secret"}
    with SchemaRegistryClient(good) as client:
        assert client.register_schema("s", SCHEMA) == 1
        assert client.get_subjects() == ["s"]
    for conf in (
        {**good, "basic.auth.user.info": "alice:nope"},
        {"url": url, "ssl.ca.location": ca},
    ):
        with SchemaRegistryClient(conf) as ours, CSchemaRegistryClient(conf) as theirs:
            assert errors(ours.get_subjects) == errors(theirs.get_subjects) == (401, 401)
    credentials_in_url = url.replace("https://", "https://alice:secret@")
    with SchemaRegistryClient(credentials_in_url, ssl_ca_location=ca) as client:
        assert client.get_latest_version("s").schema_id == 1
    with (
        SchemaRegistryClient(url, basic_auth_user_info="alice:secret", max_retries=0) as client,
        pytest.raises(SchemaRegistryError, match="certificate does not verify"),
    ):
        client.get_subjects()  # the system CAs do not know trustme's


@pytest.mark.anyio
async def test_async_client(secured: tuple[str, str]) -> None:
    """The async edge over TLS with credentials, on asyncio and trio."""
    url, ca = secured
    good = {"url": url, "ssl.ca.location": ca, "basic.auth.user.info": "alice:secret"}
    async with AsyncSchemaRegistryClient(good) as client:
        assert await client.register_schema("a", SCHEMA) >= 1
        assert "a" in await client.get_subjects()
    async with AsyncSchemaRegistryClient({**good, "basic.auth.user.info": "bob:x"}) as client:
        with pytest.raises(SchemaRegistryError) as info:
            await client.get_subjects()
    assert (info.value.http_status_code, info.value.error_code) == (401, 401)
