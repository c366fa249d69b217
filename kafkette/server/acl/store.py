"""The ACL bindings of a broker with a data directory, kept across restarts.

``<data dir>/kafkette-acls.json`` holds every binding (Kafka keeps them in its
metadata log). It is rewritten whole after each CreateAcls or DeleteAcls that
changed something: written to a temporary file, flushed, then renamed over the
old one, so a crash leaves either the old or the new list, never half of one
(by a served broker in a worker thread: ``kafkette.server.kept_files``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kafkette.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    new_binding_error,
)
from kafkette.backends.disk.checkpoint import write_atomically
from kafkette.server.acl.authorizer import AclAuthorizer

ACLS_FILE = "kafkette-acls.json"


class AclsFileError(Exception):
    """The ACL file cannot be read: the broker refuses to start rather than
    start with fewer restrictions than it was given."""


def load_bindings(data_dir: str | os.PathLike[str]) -> list[AclBinding]:
    """The bindings kept in ``data_dir`` (none when there is no file yet)."""
    path = Path(data_dir) / ACLS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        entries = json.loads(text)["acls"]
        bindings = [
            AclBinding(
                ResourceType[entry["resource_type"]],
                entry["resource_name"],
                PatternType[entry["pattern_type"]],
                entry["principal"],
                entry["host"],
                AclOperation[entry["operation"]],
                AclPermissionType[entry["permission"]],
            )
            for entry in entries
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise AclsFileError(f"bad ACL file {path}: {exc!r}") from None
    for binding in bindings:
        error = new_binding_error(binding)
        if error is not None:
            raise AclsFileError(f"bad ACL file {path}: {error}")
    return bindings


def bindings_document(bindings: list[AclBinding]) -> str:
    """The ACL file's content for ``bindings``."""
    document = {
        "acls": [
            {
                "resource_type": b.resource_type.name,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type.name,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation.name,
                "permission": b.permission.name,
            }
            for b in bindings
        ]
    }
    return json.dumps(document, indent=1)


def save_bindings(data_dir: str | os.PathLike[str], bindings: list[AclBinding]) -> None:
    """Replace the kept bindings with ``bindings``, atomically (blocking: a served broker
    writes the file in a worker thread instead, see ``Broker.acls_file``)."""
    write_atomically(str(Path(data_dir) / ACLS_FILE), bindings_document(bindings).encode())


def open_authorizer(
    class_name: str,
    super_users: tuple[str, ...],
    allow_everyone_if_no_acl_found: bool,
    data_dir: str | None,
) -> AclAuthorizer | None:
    """The broker's authorizer with the bindings its data directory keeps; None when
    ``authorizer.class.name`` is empty (every request allowed)."""
    if not class_name:
        return None
    authorizer = AclAuthorizer(
        super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found
    )
    if data_dir is not None:
        authorizer.create(load_bindings(data_dir))
    return authorizer
