"""``kafkette users add|remove|list`` against ``kafkette serve`` with SASL, run as a user would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette import AdminClient, Producer
from kafkette.errors import SaslAuthenticationFailedError
from tests.brokers import BrokerProcess, kafkette_broker
from tests.cli.cli import kafkette

AS_ALICE = (
    "-X",
    "security.protocol=SASL_PLAINTEXT",
    "-X",
    "sasl.mechanism=SCRAM-SHA-512",
    "-X",
    "sasl.username=alice",
    "-X",
    "sasl.password=alice-pw",
)


@pytest.fixture(scope="module")
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None, "--sasl-user", "alice:alice-pw")


def users(server: BrokerProcess, *argv: str, input: str = "") -> tuple[int, str, str]:
    result = kafkette("users", *argv, *AS_ALICE, input=input, bootstrap=server.bootstrap)
    return result.returncode, result.stdout, result.stderr


def as_user(server: BrokerProcess, name: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": name,
        "sasl.password": password,
    }


def test_add_list_remove(server: BrokerProcess, tmp_path: Path) -> None:
    """A user added from stdin logs in at once; list shows it; remove takes it away."""
    assert users(server, "add", "bob", "--iterations", "8192", input="bob-pw\n") == (
        0,
        "added bob: SCRAM-SHA-256, SCRAM-SHA-512\n",
        "",
    )
    with Producer(as_user(server, "bob", "bob-pw")) as producer:
        future = producer.send("bob-topic", b"v", partition=0)
        producer.flush()
        assert future.result().offset == 0
    assert users(server, "list") == (
        0,
        "USER   MECHANISM      ITERATIONS\n"
        "alice  SCRAM-SHA-256  4096\n"
        "alice  SCRAM-SHA-512  4096\n"
        "bob    SCRAM-SHA-256  8192\n"
        "bob    SCRAM-SHA-512  8192\n",
        "",
    )
    password_file = tmp_path / "carol.txt"
    password_file.write_text("carol-pw\nignored\n")
    assert users(
        server,
        "add",
        "carol",
        "--mechanism",
        "scram-sha-512",
        "--password-file",
        str(password_file),
    ) == (0, "added carol: SCRAM-SHA-512\n", "")
    assert users(server, "remove", "bob", "--mechanism", "SCRAM-SHA-256") == (
        0,
        "removed bob: SCRAM-SHA-256\n",
        "",
    )
    code, out, err = users(server, "list", "bob", "carol", "--json")
    assert (code, json.loads(out), err) == (
        0,
        [
            {"user": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
            {"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
        ],
        "",
    )
    assert users(server, "remove", "bob") == (0, "removed bob: SCRAM-SHA-512\n", "")
    with (
        pytest.raises(SaslAuthenticationFailedError),
        AdminClient(as_user(server, "bob", "bob-pw")) as admin,
    ):
        admin.list_topics()
    assert users(server, "list", "bob") == (
        1,
        "",
        "kafkette users list: RESOURCE_NOT_FOUND (91): A request illegally referred to a "
        "resource that does not exist. (Attempt to describe a user credential that does not "
        "exist: bob)\n",
    )


def test_errors(server: BrokerProcess) -> None:
    """The broker's refusals exit 1 naming the error; bad command lines exit 2 unsent."""
    assert users(server, "add", "dave", "--iterations", "100", input="pw\n") == (
        1,
        "",
        "kafkette users add: UNACCEPTABLE_CREDENTIAL (93): Requested credential would not meet "
        "criteria for acceptability. (Iterations must be between 4096 and 16384 for "
        "SCRAM-SHA-256, got 100)\n",
    )
    code, out, err = users(server, "add", "dave", "--mechanism", "SHA-1", input="pw\n")
    assert (code, out) == (2, "")
    assert err == (
        "kafkette users add: error: --mechanism: unknown SCRAM mechanism 'SHA-1' "
        "(SCRAM-SHA-256, SCRAM-SHA-512)\n"
    )
    assert users(server, "add", "dave", input="") == (
        2,
        "",
        "kafkette users add: error: the password is empty\n",
    )
    code, out, err = users(server, "remove", "nobody")
    assert (code, out) == (1, "")
    assert "RESOURCE_NOT_FOUND" in err
    log = server.log()
    assert "alice-pw" not in log and "bob-pw" not in log and "carol-pw" not in log
