"""``kafkette serve`` says at start whether an authorizer decides requests, with its rules:
the class, the ACL bindings it loaded from the data directory, super.users and
allow.everyone.if.no.acl.found."""

from __future__ import annotations

import re
import time
from pathlib import Path

from kafkette.server.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.server.acl.store import save_bindings
from tests.brokers import BrokerProcess

_AUTHORIZER_LINE = re.compile(r"kafkette serve: (authorizer .*)$", re.MULTILINE)


def authorizer_line(broker: BrokerProcess) -> str:
    """The start-up line about the authorizer (it follows the listening line)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = _AUTHORIZER_LINE.findall(broker.log())
        if found:
            assert len(found) == 1, found
            return str(found[0])
        time.sleep(0.02)
    raise AssertionError(f"no authorizer line in:\n{broker.log()}")


def test_without_an_authorizer_the_log_says_every_request_is_allowed() -> None:
    with BrokerProcess() as broker:
        assert authorizer_line(broker) == (
            "authorizer off: every request is allowed (--authorizer turns ACLs on)"
        )


def test_the_authorizer_line_names_its_class_bindings_and_rules(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    save_bindings(
        data,
        [
            AclBinding(
                ResourceType.TOPIC,
                "orders-",
                PatternType.PREFIXED,
                "User:alice",
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            )
        ],
    )
    args = ("--authorizer", "--set", "super.users=User:ops;User:admin", "--sasl-user", "admin:pw")
    with BrokerProcess(data, args=args) as broker:
        assert authorizer_line(broker) == (
            "authorizer on (org.apache.kafka.metadata.authorizer.StandardAuthorizer): "
            "1 ACL bindings, super.users User:admin;User:ops, "
            "allow.everyone.if.no.acl.found=false"
        )
    zookeeper_era = (
        "--set",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--set",
        "allow.everyone.if.no.acl.found=true",
    )
    with BrokerProcess(args=zookeeper_era) as broker:
        assert authorizer_line(broker) == (
            "authorizer on (kafka.security.authorizer.AclAuthorizer): 0 ACL bindings, "
            "super.users -, allow.everyone.if.no.acl.found=true"
        )
