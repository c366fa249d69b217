"""``kafkette serve --schema-registry`` on a broker without a PLAINTEXT listener: the
registry reaches the broker on its SSL, SASL_PLAINTEXT or SASL_SSL listener (as its own
super user under ACLs), and confluent-kafka's SchemaRegistryClient uses it, over HTTPS
and with the broker's SASL users as Basic credentials where the broker has them."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.security.servers import ListenerBroker, Pki, storage_args

REGISTRY_LINE = re.compile(
    r"schema registry listening on ([0-9.]+):(\d+) \((HTTPS?)[^)]*\), reaching the broker on "
    r"([A-Z_]+) .*$",
    re.MULTILINE,
)
ORDER = Schema(
    json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}),
    "AVRO",
)
ORDER_V2 = Schema(
    json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "note", "type": "string", "default": ""},
            ],
        }
    ),
    "AVRO",
)


def registry_line(broker: ListenerBroker, start: int = 1) -> re.Match[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = list(REGISTRY_LINE.finditer(broker.log()))
        if len(found) >= start:
            return found[start - 1]
        assert broker.process is not None and broker.process.poll() is None, broker.log()
        time.sleep(0.05)
    raise AssertionError(f"no schema registry line in:\n{broker.log()}")


def errors(client: SchemaRegistryClient) -> tuple[int, int]:
    try:
        client.get_subjects()
    except SchemaRegistryError as exc:
        return exc.http_status_code, exc.error_code
    raise AssertionError("answered without credentials")


def registry_conf(match: re.Match[str], pki: Pki, user: str | None) -> dict[str, Any]:
    scheme = match.group(3).lower()
    conf: dict[str, Any] = {"url": f"{scheme}://{match.group(1)}:{match.group(2)}"}
    if scheme == "https":  # the broker's TLS: its CA, and a client certificate it trusts
        certificate, key = pki.client("ann")
        conf.update(
            {
                "ssl.ca.location": pki.ca_file,
                "ssl.certificate.location": certificate,
                "ssl.key.location": key,
            }
        )
    if user is not None:
        conf["basic.auth.user.info"] = user
    return conf


@pytest.mark.parametrize(
    ("listener", "storage", "acls"),
    [("SSL", "disk", False), ("SASL_PLAINTEXT", "disk", True), ("SASL_SSL", "memory", True)],
)
def test_a_registry_on_a_broker_without_plaintext(
    tmp_path: Path, listener: str, storage: str, acls: bool
) -> None:
    """The registry starts on the broker's only listener and says which; confluent-kafka's
    client registers, evolves and reads back (with alice's Basic credentials where the
    broker has SASL users: none is 401); a disk broker restarted keeps the ids, the
    registry reconnecting with its new password."""
    pki = Pki(tmp_path)
    sasl = listener.startswith("SASL_")
    args = [
        *storage_args(storage, tmp_path),
        *("--listener", f"{listener}://127.0.0.1:0"),
        *pki.server_properties("required"),
        *("--schema-registry", "127.0.0.1:0"),
    ]
    if sasl:
        args += ["--sasl-user", "alice:alice-secret"]
    if acls:
        args += ["--authorizer"]
    broker = ListenerBroker(*args)
    try:
        broker.start()
        match = registry_line(broker)
        # HTTPS with the certificate of a TLS listener, if the broker has one
        scheme = "HTTPS" if listener.endswith("SSL") else "HTTP"
        assert (match.group(3), match.group(4)) == (scheme, listener)
        if sasl:
            assert "Basic authentication" in match.group(0)
            assert "as User:__kafkette_schema_registry" in match.group(0)
        user = "alice:alice-secret" if sasl else None
        with SchemaRegistryClient(registry_conf(match, pki, user)) as client:
            assert client.register_schema("orders-value", ORDER) == 1
            assert client.register_schema("orders-value", ORDER_V2) == 2
            assert client.get_latest_version("orders-value").version == 2
            assert json.loads(client.get_schema(1).schema_str) == json.loads(ORDER.schema_str)
        if sasl:
            with SchemaRegistryClient(registry_conf(match, pki, None)) as client:
                assert errors(client) == (401, 401)
            with SchemaRegistryClient(registry_conf(match, pki, "alice:nope")) as client:
                assert errors(client) == (401, 401)
        if storage == "disk":
            broker.close()
            broker = ListenerBroker(*args)
            broker.start()
            match = registry_line(broker)
            with SchemaRegistryClient(registry_conf(match, pki, user)) as client:
                assert client.get_versions("orders-value") == [1, 2]
                assert client.register_schema("audit-value", ORDER) == 1
                with pytest.raises(SchemaRegistryError) as info:
                    client.register_schema("orders-value", Schema('"string"', "AVRO"))
                assert info.value.http_status_code == 409
    finally:
        broker.close()
