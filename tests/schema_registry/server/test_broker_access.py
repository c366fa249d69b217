"""Which listener ``kafkette serve``'s registry uses and its client settings there
(server/broker_access.py, no I/O)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from kafkette.schema_registry.server.broker_access import (
    REGISTRY_USER,
    BrokerTls,
    Door,
    choose_listener,
    client_settings,
)

PLAIN = Door("PLAINTEXT", "127.0.0.1", 9092)
SSL_DOOR = Door("SSL", "127.0.0.1", 9093, client_certificate=True)
SASL = Door("SASL_PLAINTEXT", "127.0.0.1", 9094, ("SCRAM-SHA-256", "PLAIN"))
SASL_SSL = Door("SASL_SSL", "127.0.0.1", 9095, ("SCRAM-SHA-512",))


@pytest.mark.parametrize(
    ("doors", "acls", "chosen"),
    [
        ([SSL_DOOR, SASL_SSL, SASL, PLAIN], False, PLAIN),
        ([SSL_DOOR, SASL_SSL, SASL, PLAIN], True, SASL),
        ([SSL_DOOR, SASL_SSL], False, SASL_SSL),
        ([SSL_DOOR, SASL_SSL], True, SASL_SSL),
        ([SSL_DOOR, PLAIN], True, PLAIN),
        ([SSL_DOOR], True, SSL_DOOR),
    ],
)
def test_the_listener_chosen(doors: list[Door], acls: bool, chosen: Door) -> None:
    """PLAINTEXT first without ACLs; a SASL listener first with them."""
    assert choose_listener(doors, acls=acls) == chosen


def test_sasl_settings() -> None:
    """PLAIN when the listener enables it, else SCRAM; the registry's user and password."""
    assert client_settings(SASL, None, "pw") == {
        "bootstrap.servers": "127.0.0.1:9094",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": REGISTRY_USER,
        "sasl.password": "pw",
    }


def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> str | None:
    """A TLS handshake in memory: None if it completes, else the error's reason."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, to_server)
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if done[name]:
                continue
            try:
                side.do_handshake()
                done[name] = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as exc:
                return str(exc.reason)
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done.values()):
            return None
    return "no progress"


def test_tls_settings_trust_the_brokers_certificate_alone(tmp_path: Path) -> None:
    """The registry's context accepts the broker's own certificate (issued by a CA it
    does not know, for another host name) and refuses another of the same CA; on an SSL
    listener asking for certificates it presents the broker's. Without the broker's
    certificate it is a ValueError naming the setting."""
    ca = trustme.CA()
    files = {}
    for name in ("broker", "other"):
        issued = ca.issue_cert(f"{name}.example")
        files[name] = (tmp_path / f"{name}.pem", tmp_path / f"{name}.key")
        issued.cert_chain_pems[0].write_to_path(str(files[name][0]))
        issued.private_key_pem.write_to_path(str(files[name][1]))

    def server(name: str, *, ask: bool = False) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*map(str, files[name]))
        if ask:
            ca.configure_trust(context)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    tls = BrokerTls(*map(str, files["broker"]))
    settings = client_settings(SASL_SSL, tls, "pw")
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512"
    assert handshake(settings["ssl.context"], server("broker")) is None
    assert handshake(settings["ssl.context"], server("other")) == "CERTIFICATE_VERIFY_FAILED"
    assert handshake(settings["ssl.context"], server("broker", ask=True)) is not None
    mutual = client_settings(SSL_DOOR, tls, None)["ssl.context"]
    assert handshake(mutual, server("broker", ask=True)) is None
    with pytest.raises(ValueError, match=r"ssl\.certificate\.location"):
        client_settings(SSL_DOOR, BrokerTls(None, None), None)
