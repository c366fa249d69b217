"""SCRAM users over the protocol: DescribeUserScramCredentials and AlterUserScramCredentials.

The rules on the state itself (:class:`ScramUsers`), then our admin client on
``memory://``, then ``kafkette serve`` with a data directory: a user added over
the protocol authenticates at once (our clients and librdkafka), survives a
restart, and is refused once deleted; confluent-kafka's admin methods work too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import ScramCredentialInfo as CkScramCredentialInfo  # type: ignore[attr-defined]
from confluent_kafka.admin import ScramMechanism as CkScramMechanism  # type: ignore[attr-defined]
from confluent_kafka.admin import UserScramCredentialDeletion as CkDeletion  # type: ignore[attr-defined]
from confluent_kafka.admin import UserScramCredentialUpsertion as CkUpsertion  # type: ignore[attr-defined]
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette import AdminClient, Producer
from kafkette.admin import (
    AsyncAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kafkette.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from kafkette.server.sasl import CredentialStore, ScramServer
from kafkette.server.sasl.credentials import SCRAM_SHA_512
from kafkette.server.sasl.users import CREDENTIALS_FILE, Deletion, ScramUsers, Upsertion
from tests.brokers import BrokerProcess

SHA256, SHA512 = 1, 2


def upsert(user: str, mechanism: int = SHA512, iterations: int = 4096, pw: str = "pw") -> Upsertion:
    salt = b"salt-" + user.encode()
    hash_name = {SHA256: "sha256", SHA512: "sha512"}.get(mechanism, "sha256")
    salted = hashlib.pbkdf2_hmac(hash_name, pw.encode(), salt, iterations)
    return Upsertion(user, mechanism, iterations, salt, salted)


def scram_login(store: CredentialStore, user: str, password: str) -> bool:
    """A whole SCRAM-SHA-512 exchange against ``store``, as a client would run it."""
    import base64
    import hmac

    server = ScramServer(SCRAM_SHA_512, store)
    first_bare = f"n={user},r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={fields['r']}"
    message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha512(client_key).digest(), message, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    try:
        server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    except Exception:
        return False
    return server.complete


# -- the rules ------------------------------------------------------------------------


def test_upsert_describe_delete() -> None:
    users = ScramUsers(CredentialStore())
    assert users.describe(None) == []
    results = users.alter([], [upsert("alice"), upsert("alice", SHA256, 8192), upsert("bob")])
    assert [(r.user, r.error) for r in results] == [("alice", None), ("bob", None)]
    assert [(r.user, r.error, r.mechanisms) for r in users.describe(None)] == [
        ("alice", None, ((SHA256, 8192), (SHA512, 4096))),
        ("bob", None, ((SHA512, 4096),)),
    ]
    assert scram_login(users.store, "alice", "pw")
    assert not scram_login(users.store, "alice", "other")
    assert [(r.user, r.error) for r in users.alter([Deletion("alice", SHA512)], [])] == [
        ("alice", None)
    ]
    assert not scram_login(users.store, "alice", "pw")
    assert [(r.user, r.mechanisms) for r in users.describe(["alice"])] == [
        ("alice", ((SHA256, 8192),))
    ]


def test_describe_unknown_and_duplicate_users() -> None:
    users = ScramUsers(CredentialStore())
    users.alter([], [upsert("alice")])
    results = users.describe(["eve", "alice", "bob", "bob"])
    assert [(r.user, type(r.error), r.mechanisms) for r in results] == [
        ("eve", ResourceNotFoundError, ()),
        ("alice", type(None), ((SHA512, 4096),)),
        ("bob", DuplicateResourceError, ()),
    ]
    assert results[0].error is not None
    assert results[0].error.detail == (
        "Attempt to describe a user credential that does not exist: eve"
    )


@pytest.mark.parametrize(
    ("deletions", "upsertions", "error"),
    [
        ([], [upsert("alice", mechanism=0)], UnsupportedSaslMechanismError),
        ([], [upsert("alice", mechanism=3)], UnsupportedSaslMechanismError),
        ([], [upsert("alice", iterations=4095)], UnacceptableCredentialError),
        ([], [upsert("alice", iterations=16385)], UnacceptableCredentialError),
        ([], [Upsertion("alice", SHA512, 4096, b"", b"x")], UnacceptableCredentialError),
        ([], [Upsertion("alice", SHA512, 4096, b"s", b"")], UnacceptableCredentialError),
        ([], [upsert("alice"), upsert("alice")], DuplicateResourceError),
        ([Deletion("alice", SHA512)], [upsert("alice")], DuplicateResourceError),
        ([Deletion("alice", SHA256)], [], ResourceNotFoundError),
    ],
)
def test_bad_alterations_of_a_user_apply_none_of_its_changes(
    deletions: list[Deletion], upsertions: list[Upsertion], error: type[Exception]
) -> None:
    users = ScramUsers(CredentialStore())
    results = users.alter(deletions, [*upsertions, upsert("carol")])
    assert [(r.user, type(r.error)) for r in results] == [
        ("alice", error),
        ("carol", type(None)),
    ]
    assert users.store.users == ["carol"]


def test_empty_user_name_is_unacceptable() -> None:
    results = ScramUsers(CredentialStore()).alter([], [upsert("")])
    assert [(r.user, type(r.error)) for r in results] == [("", UnacceptableCredentialError)]
    assert results[0].error is not None and results[0].error.detail == "Username must not be empty"


def test_credentials_persist_in_the_data_dir_without_passwords(tmp_path: Path) -> None:
    users = ScramUsers(CredentialStore(), str(tmp_path))
    users.alter([], [upsert("alice", pw="sekret-pw"), upsert("bob")])
    users.alter([Deletion("bob", SHA512)], [])
    text = (tmp_path / CREDENTIALS_FILE).read_text()
    assert "sekret-pw" not in text and '"bob"' not in text
    again = ScramUsers(CredentialStore(), str(tmp_path))
    assert again.store.users == ["alice"]
    assert scram_login(again.store, "alice", "sekret-pw")


def test_a_damaged_credentials_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / CREDENTIALS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the SCRAM credentials"):
        ScramUsers(CredentialStore(), str(tmp_path))


# -- our admin client on memory:// -----------------------------------------------------------


def test_admin_client_on_memory() -> None:
    """Sync and async twins alter and describe the users of an in-process broker."""
    with AdminClient(bootstrap_servers="memory://scram-users") as admin:
        altered = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, "pw", 8192),
                UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512, "pw", 100),
                UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512),
            ]
        )
        assert altered["alice"].result() is None
        assert isinstance(altered["bob"].error, UnacceptableCredentialError)
        assert isinstance(altered["carol"].error, ResourceNotFoundError)
        described = admin.describe_user_scram_credentials()
        assert described.all() == {
            "alice": UserScramCredentialsDescription(
                "alice", (ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),)
            )
        }
        one = admin.describe_user_scram_credentials(["alice", "bob"])
        assert one["alice"].ok
        assert isinstance(one["bob"].error, ResourceNotFoundError)


@pytest.mark.anyio
async def test_async_admin_client_on_memory() -> None:
    async with AsyncAdminClient(bootstrap_servers="memory://scram-users-async") as admin:
        altered = await admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_512, "pw")]
        )
        assert altered.all() == {"dave": None}
        described = await admin.describe_user_scram_credentials(["dave"])
        assert described.all() == {
            "dave": UserScramCredentialsDescription(
                "dave", (ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),)
            )
        }


# -- kafkette serve --------------------------------------------------------------------------

ADMIN = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "alice-pw",
}


def as_user(broker: BrokerProcess, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.fixture
def disk_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", args=("--sasl-user", "alice:alice-pw"))
    try:
        yield broker.start()
    finally:
        broker.close()


def produce_one(settings: dict[str, Any], topic: str) -> int:
    with Producer(settings) as producer:
        future = producer.send(topic, b"v", partition=0)
        producer.flush()
        return future.result().offset


def test_users_added_over_the_protocol_survive_a_restart(disk_broker: BrokerProcess) -> None:
    with AdminClient(as_user(disk_broker, "alice", "alice-pw")) as admin:
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512, "bob-pw")]
        ).all()
    assert produce_one(as_user(disk_broker, "bob", "bob-pw"), "bob-topic") == 0
    disk_broker.stop()
    disk_broker.start()
    assert produce_one(as_user(disk_broker, "bob", "bob-pw"), "bob-topic") == 1
    with AdminClient(as_user(disk_broker, "alice", "alice-pw")) as admin:
        assert admin.describe_user_scram_credentials().all() == {
            "alice": UserScramCredentialsDescription(
                "alice",
                (
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                ),
            ),
            "bob": UserScramCredentialsDescription(
                "bob", (ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),)
            ),
        }
        admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
        ).all()
    with (
        pytest.raises(SaslAuthenticationFailedError),
        AdminClient(as_user(disk_broker, "bob", "bob-pw")) as admin,
    ):
        admin.list_topics()
    assert "bob-pw" not in disk_broker.log() and "alice-pw" not in disk_broker.log()


def test_confluent_kafka_admin_alters_and_describes(disk_broker: BrokerProcess) -> None:
    """confluent-kafka's alter/describe_user_scram_credentials; librdkafka then logs in."""
    settings: dict[str, Any] = {
        "bootstrap.servers": disk_broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
    }
    admin = ConfluentAdmin(settings)
    futures = admin.alter_user_scram_credentials(
        [
            CkUpsertion(
                "carol", CkScramCredentialInfo(CkScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw"
            ),
            CkDeletion("nobody", CkScramMechanism.SCRAM_SHA_256),
        ]
    )
    assert futures["carol"].result(30) is None
    with pytest.raises(KafkaException) as info:
        futures["nobody"].result(30)
    assert info.value.args[0].code() == ConfluentError.RESOURCE_NOT_FOUND
    described_futures = admin.describe_user_scram_credentials(["carol"])
    assert isinstance(described_futures, dict)
    described = described_futures["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (CkScramMechanism.SCRAM_SHA_512, 8192)
    ]
    errors: list[ConfluentError] = []
    producer = ConfluentProducer(
        {
            **settings,
            "sasl.username": "carol",
            "sasl.password": "carol-pw",
            "error_cb": errors.append,
        }
    )
    producer.produce("carol-topic", b"v", partition=0)
    assert producer.flush(30) == 0
    assert errors == []


# -- property: the users match a model after any sequence of requests -------------------

NAMES = st.sampled_from(["", "alice", "bob"])
MECHANISMS = st.sampled_from([0, SHA256, SHA512, 3])
ITERATIONS = st.sampled_from([4095, 4096, 16384, 16385])
CHANGE = st.one_of(
    st.builds(Deletion, NAMES, MECHANISMS),
    st.builds(
        lambda user, mechanism, iterations: upsert(user, mechanism, iterations),
        NAMES,
        MECHANISMS,
        ITERATIONS,
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(CHANGE, max_size=4), max_size=5))
def test_any_sequence_of_requests_matches_the_model(requests: list[list[Any]]) -> None:
    """Each request applies all of a valid user's changes and none of an invalid one's;
    describe then reports exactly the model's (user, mechanism, iterations)."""
    users = ScramUsers(CredentialStore())
    model: dict[tuple[str, int], int] = {}
    for changes in requests:
        deletions = [c for c in changes if isinstance(c, Deletion)]
        upsertions = [c for c in changes if isinstance(c, Upsertion)]
        results = users.alter(deletions, upsertions)
        ordered: list[Deletion | Upsertion] = [*deletions, *upsertions]
        assert [r.user for r in results] == list(dict.fromkeys(c.user for c in ordered))
        for result in results:
            mine: list[Deletion | Upsertion] = [c for c in ordered if c.user == result.user]
            keys = [(c.user, c.mechanism) for c in mine]
            valid = (
                result.user != ""
                and len(set(keys)) == len(keys)
                and all(c.mechanism in (SHA256, SHA512) for c in mine)
                and all(4096 <= c.iterations <= 16384 for c in mine if isinstance(c, Upsertion))
                and all((c.user, c.mechanism) in model for c in mine if isinstance(c, Deletion))
            )
            assert (result.error is None) == valid, (result, mine)
            if valid:
                for c in mine:
                    if isinstance(c, Deletion):
                        del model[(c.user, c.mechanism)]
                    else:
                        model[(c.user, c.mechanism)] = c.iterations
        described = {
            (r.user, mechanism, iterations)
            for r in users.describe(None)
            for mechanism, iterations in r.mechanisms
        }
        assert described == {(u, m, i) for (u, m), i in model.items()}
