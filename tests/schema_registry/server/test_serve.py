"""``kafkette serve --schema-registry HOST:PORT``: the registry in the broker's process,
used by confluent-kafka's SchemaRegistryClient, surviving a SIGKILL of a disk broker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.brokers import BrokerProcess

REGISTRY_LINE = re.compile(r"kafkette serve: schema registry listening on ([0-9.]+):(\d+)")


def registry_url(broker: BrokerProcess, start: int = 1) -> str:
    """The registry's address from the log lines of the broker's ``start``-th start (the
    log file is kept across restarts; a SIGKILL leaves no line saying it stopped)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = REGISTRY_LINE.findall(broker.log())
        if len(found) >= start:
            host, port = found[start - 1]
            return f"http://{host}:{port}"
        time.sleep(0.05)
    raise AssertionError(f"no schema registry line in:\n{broker.log()}")


def schema(*fields: str) -> Schema:
    body = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": f, "type": "string", "default": ""} for f in fields],
    }
    return Schema(json.dumps(body), "AVRO")


def test_serve_with_a_registry_survives_a_kill(tmp_path: Path) -> None:
    """Ids, versions and levels written through the registry of a disk kafkette serve are
    the same after a SIGKILL and restart; the next id is new; SIGTERM stops both."""
    broker = BrokerProcess(tmp_path / "data", args=("--schema-registry", "127.0.0.1:0"))
    try:
        broker.start()
        with SchemaRegistryClient({"url": registry_url(broker)}) as client:
            assert client.register_schema("orders-value", schema("id")) == 1
            assert client.register_schema("orders-value", schema("id", "note")) == 2
            assert client.register_schema("audit-value", schema("id")) == 1
            client.set_compatibility("orders-value", "FULL")
        broker.kill()
        broker.start()
        with SchemaRegistryClient({"url": registry_url(broker, 2)}) as client:
            assert client.get_versions("orders-value") == [1, 2]
            assert client.get_latest_version("orders-value").schema_id == 2
            assert client.get_version("audit-value", 1).schema_id == 1
            assert client.get_compatibility("orders-value") == "FULL"
            assert client.register_schema("audit-value", schema("id", "x")) == 3
        broker.stop()
        assert "kafkette serve: stopped" in broker.log()
    finally:
        broker.close()


def test_a_registry_the_broker_refuses_stops_the_command(tmp_path: Path) -> None:
    """With --authorizer and no ACL for the registry's anonymous clients, the registry
    cannot create _schemas: one error line naming why, then the broker stops, exit 1."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkette",
            "serve",
            "--memory",
            "--listen",
            "127.0.0.1:0",
            "--authorizer",
            "--schema-registry",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    assert (
        "kafkette serve: the schema registry could not start: TOPIC_AUTHORIZATION_FAILED"
        in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert result.stderr.rstrip().endswith("kafkette serve: stopped")


def test_the_registry_asks_for_the_brokers_sasl_users(tmp_path: Path) -> None:
    """With SASL users, the registry wants one of them as HTTP Basic credentials (401
    otherwise), while it reaches the broker on the PLAINTEXT listener."""
    log_path = tmp_path / "serve.log"
    command = [
        *(sys.executable, "-m", "kafkette", "serve", "--memory"),
        *("--listener", "PLAINTEXT://127.0.0.1:0", "--listener", "SASL_PLAINTEXT://127.0.0.1:0"),
        *("--sasl-user", "alice:alice-secret", "--schema-registry", "127.0.0.1:0"),
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := REGISTRY_LINE.findall(log_path.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        url = f"http://{found[0][0]}:{found[0][1]}"
        assert "(HTTP, Basic authentication)" in log_path.read_text()
        conf = {"url": url, "basic.auth.user.info": "alice:alice-secret"}
        with SchemaRegistryClient(conf) as client:
            assert client.register_schema("orders-value", schema("id")) == 1
        with SchemaRegistryClient({"url": url}) as client:
            try:
                client.get_subjects()
            except SchemaRegistryError as error:
                assert (error.http_status_code, error.error_code) == (401, 401)
            else:
                raise AssertionError("no credentials, yet answered")
    finally:
        process.terminate()
        process.wait(15)
