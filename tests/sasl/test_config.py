"""SASL settings: the client's validation and ``kafkette serve``'s --sasl-* options."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkette import AdminClient, NewTopic, Producer
from kafkette.cli.serve import add_arguments, build_config, build_sasl
from kafkette.client.config import AdminConfig, ProducerConfig
from kafkette.errors import ConfigError
from kafkette.server import BrokerConfig


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_needs_username_and_password(protocol: str) -> None:
    with pytest.raises(ConfigError) as info:
        AdminConfig.from_user(security_protocol=protocol, sasl_password="p")
    assert info.value.setting == "sasl.username"
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_user({"security.protocol": protocol, "sasl.username": "u"})
    assert info.value.setting == "sasl.password"
    assert str(info.value) == (
        f"configuration setting 'sasl.password': required with security.protocol={protocol}"
    )


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "SCRAM-SHA-1"])
def test_other_mechanisms_are_not_supported(mechanism: str) -> None:
    with pytest.raises(ConfigError) as info:
        AdminConfig.from_user(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_username="u",
            sasl_password="p",
        )
    assert info.value.setting == "sasl.mechanism"
    assert f"{mechanism!r} is not supported" in str(info.value)


def test_mechanism_names_are_case_insensitive() -> None:
    config = AdminConfig.from_user(
        {"security.protocol": "sasl_plaintext", "sasl.mechanism": "scram-sha-256"},
        sasl_username="u",
        sasl_password="p",
    )
    assert (config.security_protocol, config.sasl_mechanism) == ("sasl_plaintext", "SCRAM-SHA-256")


def test_in_process_clusters_need_no_sasl() -> None:
    """memory:// is reached without SASL even when the settings ask for it."""
    sasl: dict[str, Any] = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "u",
        "sasl_password": "p",
    }
    with AdminClient(bootstrap_servers="memory://sasl-config-test", **sasl) as admin:
        admin.create_topics([NewTopic("t", 1)]).all()
    with Producer(bootstrap_servers="memory://sasl-config-test", **sasl) as producer:
        assert producer.send("t", b"v").result(timeout=10).offset == 0


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_serve_without_sasl_options_is_plaintext() -> None:
    assert build_sasl(parse()) is None


def test_serve_users_and_mechanisms(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("# team\nbob:p:w=d\n\n  carol:x\n", encoding="utf-8")
    args = parse(
        "--sasl-user",
        "alice:secret",
        "--sasl-users-file",
        str(users),
        "--sasl-mechanisms",
        "scram-sha-512, PLAIN",
    )
    settings = build_sasl(args)
    assert settings is not None
    assert list(settings.mechanisms) == ["SCRAM-SHA-512", "PLAIN"]
    assert settings.store.users == ["alice", "bob", "carol"]
    assert settings.store.check_plain("bob", "p:w=d")  # the password is all after the first colon
    assert settings.store.scram_credential("SCRAM-SHA-256", "alice") is not None  # for PLAIN
    assert args.sasl_user == []  # passwords are not kept around in the arguments


def test_serve_defaults_to_every_mechanism() -> None:
    settings = build_sasl(parse("--sasl-user", "alice:secret"))
    assert settings is not None
    assert list(settings.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize(
    ("argv", "setting"),
    [
        (("--sasl-user", "alice"), "--sasl-user"),
        (("--sasl-user", ":secret"), "--sasl-user"),
        (("--sasl-user", "alice:"), "--sasl-user"),
        (("--sasl-mechanisms", "PLAIN"), "--sasl-mechanisms"),
        (("--sasl-user", "a:b", "--sasl-mechanisms", "PLAIN,GSSAPI"), "--sasl-mechanisms"),
    ],
)
def test_serve_bad_sasl_options(argv: tuple[str, ...], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_sasl(parse(*argv))
    assert info.value.setting == setting


def test_serve_sasl_enabled_mechanisms_property() -> None:
    """The Kafka property sets the mechanisms; --sasl-mechanisms wins over it."""
    config = build_config(parse("--set", "sasl.enabled.mechanisms=scram-sha-256"))
    assert config.sasl_enabled_mechanisms == ("SCRAM-SHA-256",)
    settings = build_sasl(parse("--sasl-user", "a:b"), config)
    assert settings is not None and list(settings.mechanisms) == ["SCRAM-SHA-256"]
    settings = build_sasl(parse("--sasl-user", "a:b", "--sasl-mechanisms", "PLAIN"), config)
    assert settings is not None and list(settings.mechanisms) == ["PLAIN"]
    with pytest.raises(ConfigError) as info:
        build_sasl(parse(), config)
    assert info.value.setting == "sasl.enabled.mechanisms"
    with pytest.raises(ConfigError) as info:
        build_config(parse("--set", "sasl.enabled.mechanisms=PLAIN,GSSAPI"))
    assert info.value.setting == "sasl.enabled.mechanisms"
    assert "GSSAPI is not supported" in str(info.value)
    assert BrokerConfig().sasl_enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def test_serve_bad_users_file_line_is_named(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("alice:secret\nbob\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        build_sasl(parse("--sasl-users-file", str(users)))
    assert info.value.setting == f"{users}:2"


def test_serve_help_documents_sasl() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for text in (
        "--sasl-user NAME:PASSWORD",
        "--sasl-users-file",
        "--sasl-mechanisms",
        "SASL_PLAINTEXT",
    ):
        assert text in result.stdout


def test_serve_exits_2_on_bad_sasl_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", "--sasl-user", "x"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--sasl-user" in result.stderr and "expected NAME:PASSWORD" in result.stderr
