"""The ACL file of a broker with a data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.server.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkette.server.acl.store import ACLS_FILE, AclsFileError, load_bindings, save_bindings

BINDINGS = [
    AclBinding(
        ResourceType.TOPIC,
        "orders",
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    ),
    AclBinding(
        ResourceType.GROUP,
        "g-",
        PatternType.PREFIXED,
        "User:*",
        "10.0.0.1",
        AclOperation.ALL,
        AclPermissionType.DENY,
    ),
]


def test_bindings_round_trip_in_order(tmp_path: Path) -> None:
    assert load_bindings(tmp_path) == []
    save_bindings(tmp_path, BINDINGS)
    assert load_bindings(tmp_path) == BINDINGS
    save_bindings(tmp_path, BINDINGS[1:])
    assert load_bindings(tmp_path) == BINDINGS[1:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [ACLS_FILE]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "JSONDecodeError"),
        ('{"acls": [{"resource_type": "TOPIC"}]}', "KeyError"),
        (
            '{"acls": [{"resource_type": "TOPIC", "resource_name": "", "pattern_type": "LITERAL",'
            ' "principal": "User:a", "host": "*", "operation": "READ", "permission": "ALLOW"}]}',
            "Invalid empty resource name",
        ),
    ],
)
def test_a_bad_file_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / ACLS_FILE).write_text(text)
    with pytest.raises(AclsFileError, match=message):
        load_bindings(tmp_path)
