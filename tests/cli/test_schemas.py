"""``kafkette schemas``: list, get, register, check and delete against a served registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.cli import main
from tests.schema_registry.server.servers import registry_server


def record(*fields: dict[str, str]) -> str:
    base = [{"name": "id", "type": "long"}]
    return json.dumps({"type": "record", "name": "Order", "fields": base + list(fields)})


@pytest.fixture
def registry() -> Iterator[str]:
    with registry_server() as url:
        yield url


def run(capsys: pytest.CaptureFixture[str], registry: str, *argv: str) -> tuple[int, str, str]:
    code = main(["schemas", *argv, "--schema-registry", registry])
    out, err = capsys.readouterr()
    return code, out, err


def test_register_list_get_check_delete(
    registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commands' output and exit statuses through a subject's life."""
    v1 = tmp_path / "order.avsc"
    v1.write_text(record())
    v2 = tmp_path / "order2.avsc"
    v2.write_text(record({"name": "note", "type": "string", "default": ""}))
    bad = tmp_path / "bad.avsc"
    bad.write_text(
        json.dumps(
            {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
        )
    )

    assert run(capsys, registry, "register", "orders-value", str(v1)) == (
        0,
        "orders-value: version 1, id 1\n",
        "",
    )
    assert run(capsys, registry, "check", "orders-value", str(v2)) == (
        0,
        "orders-value: compatible\n",
        "",
    )
    code, out, _ = run(capsys, registry, "check", "orders-value", str(bad))
    assert code == 1 and out.startswith("orders-value: incompatible\n  ")
    code, out, _ = run(capsys, registry, "register", "orders-value", str(v2), "--json")
    assert (code, json.loads(out)) == (0, {"subject": "orders-value", "version": 2, "id": 2})

    code, out, _ = run(capsys, registry, "list")
    assert (code, out.splitlines()) == (
        0,
        ["SUBJECT       VERSIONS  LATEST  ID  TYPE", "orders-value  1,2       2       2   AVRO"],
    )
    code, out, _ = run(capsys, registry, "get", "orders-value", "-v", "1")
    assert code == 0 and json.loads(out) == json.loads(record())
    code, out, _ = run(capsys, registry, "get", "--id", "2", "--json")
    assert code == 0 and json.loads(out)["schemaType"] == "AVRO"

    code, out, err = run(capsys, registry, "register", "orders-value", str(bad))
    assert (code, out) == (1, "")
    assert err.startswith("kafkette schemas register: error 40901: ")

    assert run(capsys, registry, "delete", "orders-value", "-v", "1") == (
        0,
        "orders-value: deleted version 1\n",
        "",
    )
    assert run(capsys, registry, "delete", "orders-value") == (
        0,
        "orders-value: deleted version 2\n",
        "",
    )
    assert run(capsys, registry, "delete", "orders-value", "--permanent") == (
        0,
        "orders-value: permanently deleted versions 1, 2\n",
        "",
    )
    assert run(capsys, registry, "list") == (0, "SUBJECT  VERSIONS  LATEST  ID  TYPE\n", "")


def test_errors(registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown subject: Confluent's code, exit 1; a bad option or setting: exit 2."""
    code, out, err = run(capsys, registry, "get", "nope")
    assert (code, out) == (1, "")
    assert err == "kafkette schemas get: error 40401: Subject 'nope' not found.\n"
    code, _, err = run(capsys, registry, "get")
    assert code == 2 and "give a SUBJECT or --id ID" in err
    code, _, err = run(capsys, registry, "list", "-R", "colour=red")
    assert code == 2 and "colour" in err
    code, _, err = run(capsys, registry, "register", "s", str(tmp_path / "missing.avsc"))
    assert code == 2 and "missing.avsc" in err


def test_config(registry: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Read, set and drop levels, global and per subject."""
    assert run(capsys, registry, "config") == (0, "global: BACKWARD\n", "")
    assert run(capsys, registry, "config", "--compatibility", "full") == (0, "global: FULL\n", "")
    assert run(capsys, registry, "config", "s") == (0, "s: FULL\n", "")
    assert run(capsys, registry, "config", "s", "--compatibility", "NONE") == (0, "s: NONE\n", "")
    assert run(capsys, registry, "config", "s", "--delete") == (0, "s: FULL\n", "")
    code, _, err = run(capsys, registry, "config", "--compatibility", "SIDEWAYS")
    assert code == 2 and "unknown compatibility level" in err
    code, _, err = run(capsys, registry, "config", "--delete")
    assert code == 2 and "give the SUBJECT" in err


def test_stdin_and_types(
    registry: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema from stdin, its type from --type."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"type": "object"}'))
    code, out, _ = run(capsys, registry, "register", "j", "-", "--type", "json", "--json")
    assert (code, json.loads(out)["id"]) == (0, 1)
    code, out, _ = run(capsys, registry, "get", "j", "--json")
    assert json.loads(out)["schemaType"] == "JSON"


def test_consume_prints_decoded_values(capsys: pytest.CaptureFixture[str]) -> None:
    """kafkette consume --key-format/--value-format: Avro, JSON and Protobuf as JSON."""
    from kafkette import Producer
    from kafkette.schema_registry import (
        AvroSerializer,
        JSONSerializer,
        ProtobufSerializer,
        SchemaRegistryClient,
    )
    from kafkette.testing import MemoryCluster
    from tests.schema_registry.serializers.peers import make_messages

    order_class = make_messages()["Order"]
    user = record({"name": "blob", "type": "bytes"})
    with MemoryCluster() as cluster, SchemaRegistryClient(cluster.schema_registry_url) as client:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            avro = AvroSerializer(client, user, topic="a")
            producer.send("a", avro({"id": 1, "blob": b"\x00\xff"}), key=b"k1")
            as_json = JSONSerializer(client, '{"type": "object"}', topic="j", is_key=True)
            producer.send("j", b"plain", key=as_json({"n": "é"}))
            proto = ProtobufSerializer(client, order_class, topic="p")
            producer.send("p", proto(order_class(id=2, tags=["x"])))
        registry = cluster.schema_registry_url
        common = ["-b", cluster.bootstrap_servers, "-e", "--schema-registry", registry]

        assert main(["consume", "a", *common, "--value-format", "avro", "-K", ":"]) == 0
        assert capsys.readouterr().out == 'k1:{"id": 1, "blob": "\\u0000ÿ"}\n'
        assert main(["consume", "j", *common, "--key-format", "json", "--json"]) == 0
        line = json.loads(capsys.readouterr().out)
        assert (line["key"], line["value"]) == ({"n": "é"}, "plain")
        assert main(["consume", "p", *common, "--value-format", "protobuf"]) == 0
        assert json.loads(capsys.readouterr().out) == {"id": "2", "tags": ["x"]}
        # bytes that are not framed: the command says so
        assert main(["consume", "j", *common, "--value-format", "avro"]) == 1
        assert "SERIALIZATION" in capsys.readouterr().err
