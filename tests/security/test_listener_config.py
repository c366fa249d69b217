"""Listener settings of ``kafkette serve``: Kafka's syntax, the safe default, TLS settings,
and the certificate principal's RFC 2253 form."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from kafkette.cli.serve import (
    add_arguments,
    build_config,
    build_listeners,
    build_nodes,
    build_sasl,
)
from kafkette.errors import ConfigError
from kafkette.server.config.listeners import Listener, parse_listeners, parse_protocol_map
from kafkette.server.net.tls import (
    TlsSettings,
    certificate_principal,
    client_auth_for,
    rfc2253,
    server_context,
)
from tests.security.servers import Pki


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def listeners_of(*argv: str) -> list[tuple[str, str, int, str, bool]]:
    args = parse(*argv)
    config = build_config(args)
    built = build_listeners(args, config, build_sasl(args, config), build_nodes(args))
    return [
        (s.listener.name, s.listener.host, s.listener.port, s.listener.protocol, s.tls is not None)
        for s in built
    ]


def setting_refused(*argv: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        listeners_of(*argv)
    return info.value


def test_kafka_listener_syntax_and_default_map() -> None:
    assert parse_listeners(
        ["PLAINTEXT://127.0.0.1:9092", "sasl_plaintext://:9094", "SSL://[::1]:0"],
        ["SASL_PLAINTEXT://broker.example:19094"],
        None,
    ) == [
        Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("SASL_PLAINTEXT", "0.0.0.0", 9094, "SASL_PLAINTEXT", ("broker.example", 19094)),
        Listener("SSL", "::1", 0, "SSL"),
    ]


def test_custom_names_take_their_protocol_from_the_map() -> None:
    assert parse_listeners(
        ["INTERNAL://127.0.0.1:9092", "EXTERNAL://0.0.0.0:9093"],
        [],
        "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
    ) == [
        Listener("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("EXTERNAL", "0.0.0.0", 9093, "SASL_SSL"),
    ]
    assert parse_protocol_map("a:ssl") == {"A": "SSL"}


@pytest.mark.parametrize(
    ("endpoints", "advertised", "mapping", "setting", "message"),
    [
        (["127.0.0.1:9092"], [], None, "listeners", "expected NAME://HOST:PORT"),
        (["PLAINTEXT://h:99999"], [], None, "listeners", "expected NAME://HOST:PORT"),
        (["PLAINTEXT://h:1", "PLAINTEXT://h:2"], [], None, "listeners", "given twice"),
        (["PLAINTEXT://h:1", "SSL://h:1"], [], None, "listeners", "two listeners on port 1"),
        (["OUTSIDE://h:1"], [], None, "listener.security.protocol.map", "listener OUTSIDE"),
        (["A://h:1"], [], "A:TLS", "listener.security.protocol.map", "'TLS' is not"),
        (["SSL://h:1"], ["PLAINTEXT://x:1"], None, "advertised.listeners", "not one of"),
        (["SSL://h:1"], ["SSL://:1"], None, "advertised.listeners", "not an address"),
        (["A://h:0,B://h:1"], [], "A:SSL,B:SSL", "listeners", "expected NAME://HOST:PORT"),
        (["A://h/x:1"], [], "A:SSL", "listeners", "expected NAME://HOST:PORT"),
    ],
)
def test_bad_listener_settings_name_the_setting(
    endpoints: list[str], advertised: list[str], mapping: str | None, setting: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_listeners(endpoints, advertised, mapping)
    assert info.value.setting == setting
    assert message in str(info.value)


def test_a_listener_option_takes_a_list_as_the_listeners_property_does() -> None:
    assert listeners_of(
        "--listener",
        "PLAINTEXT://127.0.0.1:0, EXTRA://127.0.0.1:0",
        "--set",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
    ) == [
        ("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT", False),
        ("EXTRA", "127.0.0.1", 0, "PLAINTEXT", False),
    ]


def test_listen_stays_one_plaintext_or_sasl_plaintext_listener() -> None:
    assert listeners_of("--listen", "127.0.0.1:0") == [
        ("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT", False)
    ]
    assert listeners_of("--listen", "localhost:0", "--sasl-user", "a:b") == [
        ("SASL_PLAINTEXT", "localhost", 0, "SASL_PLAINTEXT", False)
    ]
    assert listeners_of() == [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT", False)]


def test_listen_outside_loopback_needs_sasl_or_an_explicit_choice() -> None:
    error = setting_refused("--listen", "0.0.0.0:9092")
    assert error.setting == "--listen"
    assert "--allow-plaintext-outside" in str(error)
    assert setting_refused("--listen", "192.0.2.7:9092").setting == "--listen"
    assert listeners_of("--listen", "0.0.0.0:9092", "--allow-plaintext-outside") == [
        ("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT", False)
    ]
    assert listeners_of("--listen", "0.0.0.0:9092", "--sasl-user", "a:b")[0][3] == (
        "SASL_PLAINTEXT"
    )
    assert listeners_of("--listener", "PLAINTEXT://0.0.0.0:9092") == [
        ("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT", False)
    ]


def test_listeners_from_properties_and_set(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=INSIDE://127.0.0.1:9092,OUTSIDE://127.0.0.1:9094\n"
        "listener.security.protocol.map=INSIDE:PLAINTEXT,OUTSIDE:SASL_PLAINTEXT\n"
    )
    assert listeners_of("--config", str(properties), "--sasl-user", "a:b") == [
        ("INSIDE", "127.0.0.1", 9092, "PLAINTEXT", False),
        ("OUTSIDE", "127.0.0.1", 9094, "SASL_PLAINTEXT", False),
    ]
    assert listeners_of("--set", "listeners=PLAINTEXT://127.0.0.1:1") == [
        ("PLAINTEXT", "127.0.0.1", 1, "PLAINTEXT", False)
    ]
    # Listener and TLS settings are not broker-core configs (not described, no password leak).
    assert "listeners" not in build_config(parse("--config", str(properties))).overrides


TWO_LISTENERS = ("--listener", "PLAINTEXT://127.0.0.1:0", "--listener", "SSL://127.0.0.1:0")


@pytest.mark.parametrize(
    ("argv", "setting", "message"),
    [
        (("--listener", "SASL_SSL://127.0.0.1:0"), "SASL_SSL", "needs SASL users"),
        (("--listener", "SSL://127.0.0.1:0"), "ssl.certificate.location", "certificate"),
        (
            ("--listener", "PLAINTEXT://127.0.0.1:0", "--listen", "127.0.0.1:0"),
            "--listen",
            "either",
        ),
        (
            (*TWO_LISTENERS, "--nodes", "2"),
            "--nodes",
            "one listener",
        ),
        (("--set", "advertised.listeners=SSL://h:1"), "advertised.listeners", "needs listeners"),
        (
            ("--listener", "SSL://127.0.0.1:0", "--set", "ssl.client.auth=maybe"),
            "ssl.client.auth",
            "required, requested, none",
        ),
        (
            ("--sasl-user", "a:b", "--set", "sasl.server.max.receive.size=0"),
            "sasl.server.max.receive.size",
            "positive",
        ),
    ],
)
def test_bad_serve_listener_options_are_refused(
    argv: tuple[str, ...], setting: str, message: str
) -> None:
    error = setting_refused(*argv)
    assert error.setting == setting
    assert message in str(error)


def test_tls_files_missing_or_bad_name_the_setting(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    with pytest.raises(ConfigError) as info:
        server_context(TlsSettings(str(tmp_path / "nope.pem"), pki.server_key))
    assert info.value.setting == "ssl.certificate.location"
    with pytest.raises(ConfigError) as info:
        server_context(TlsSettings(pki.server_cert, str(tmp_path / "nope.key")))
    assert info.value.setting == "ssl.key.location"
    with pytest.raises(ConfigError) as info:
        server_context(TlsSettings(pki.server_cert, pki.server_key, client_auth="required"))
    assert info.value.setting == "ssl.ca.location"
    with pytest.raises(ConfigError) as info:
        server_context(TlsSettings(pki.server_cert, pki.server_key, ca_location=pki.server_key))
    assert info.value.setting == "ssl.ca.location"


def test_ssl_listener_with_pem_files(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    assert listeners_of(
        "--listener", "SSL://127.0.0.1:0", "--listener", "PLAINTEXT://127.0.0.1:0",
        *pki.server_properties(),
    ) == [
        ("SSL", "127.0.0.1", 0, "SSL", True),
        ("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT", False),
    ]  # fmt: skip


def test_principal_is_the_subject_in_rfc2253_form() -> None:
    subject = (
        (("countryName", "FR"),),
        (("organizationName", "Example, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "42")),
        (("commonName", " alice+bob "),),
    )
    assert certificate_principal({"subject": subject}) == (
        r"User:CN=\ alice\+bob\ ,OU=eng+UID=42,O=Example\, Inc.,C=FR"
    )
    assert rfc2253(((("emailAddress", "a@b.c"),),)) == "1.2.840.113549.1.9.1=#16056140622e63"
    assert rfc2253(((("commonName", '#x;<>"\\'),),)) == 'CN=\\#x\\;\\<\\>\\"\\\\'
    assert certificate_principal({}) == "User:ANONYMOUS"
    assert certificate_principal(None) == "User:ANONYMOUS"


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, {"SSL": ("none", False), "SASL_SSL": ("none", False)}),
        (
            {"ssl.client.auth": "required"},
            {"SSL": ("required", False), "SASL_SSL": ("none", True)},
        ),
        (
            {"ssl.client.auth": "required", "listener.name.sasl_ssl.ssl.client.auth": "requested"},
            {"SSL": ("required", False), "SASL_SSL": ("requested", False)},
        ),
        (
            {"ssl.client.auth": "REQUIRED", "listener.name.ssl.ssl.client.auth": "none"},
            {"SSL": ("none", False), "SASL_SSL": ("none", True)},
        ),
    ],
)
def test_ssl_client_auth_of_each_listener_as_kip_684(
    properties: dict[str, str], expected: dict[str, tuple[str, bool]]
) -> None:
    """The listener's own value, else the broker-wide one for SSL only (Kafka's
    ChannelBuilders since KIP-684); the flag says a broker-wide value was left out."""
    assert {p: client_auth_for(properties, p, p) for p in ("SSL", "SASL_SSL")} == expected


def test_listener_client_auth_is_checked_and_named(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    error = setting_refused(
        "--listener", "SASL_SSL://127.0.0.1:0", "--sasl-user", "a:b",
        *pki.server_properties("none"),
        "--set", "listener.name.sasl_ssl.ssl.client.auth=sometimes",
    )  # fmt: skip
    assert error.setting == "listener.name.sasl_ssl.ssl.client.auth"
    assert "required, requested, none" in str(error)


def test_sasl_ssl_listener_takes_only_its_own_client_auth(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the broker-wide ssl.client.auth=required, the SSL listener requires a
    certificate and the SASL_SSL listener asks for none (a warning names the setting that
    would); its own listener.name.sasl_ssl.ssl.client.auth applies."""
    pki = Pki(tmp_path)
    common = (
        "--listener", "SSL://127.0.0.1:0", "--listener", "SASL_SSL://127.0.0.1:0",
        "--sasl-user", "a:b", *pki.server_properties("required"),
    )  # fmt: skip

    def verify_modes(*extra: str) -> dict[str, int]:
        args = parse(*common, *extra)
        config = build_config(args)
        built = build_listeners(args, config, build_sasl(args, config), build_nodes(args))
        return {s.listener.name: s.tls.verify_mode for s in built if s.tls is not None}

    with caplog.at_level("WARNING", logger="kafkette.server"):
        assert verify_modes() == {"SSL": ssl.CERT_REQUIRED, "SASL_SSL": ssl.CERT_NONE}
    assert (
        "ssl.client.auth applies to SSL listeners only (as in Kafka since KIP-684): "
        "listener.name.sasl_ssl.ssl.client.auth=required sets it for the SASL_SSL listener "
        "SASL_SSL"
    ) in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="kafkette.server"):
        assert verify_modes("--set", "listener.name.sasl_ssl.ssl.client.auth=required") == {
            "SSL": ssl.CERT_REQUIRED,
            "SASL_SSL": ssl.CERT_REQUIRED,
        }
        assert verify_modes("--set", "listener.name.sasl_ssl.ssl.client.auth=requested") == {
            "SSL": ssl.CERT_REQUIRED,
            "SASL_SSL": ssl.CERT_OPTIONAL,
        }
    assert "KIP-684" not in caplog.text
