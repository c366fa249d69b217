"""The registry's state, rebuilt from the records of the ``_schemas`` topic.

The records are the ones Confluent's registry writes (keys and values are
JSON; the key says what the record is), so either registry reads the other's:

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` ->
  ``{"subject":S,"version":V,"id":I,"schemaType":T,"references":[...],
  "schema":TEXT,"deleted":false}`` (``schemaType`` left out for AVRO,
  ``references`` when empty); a tombstone deletes the version permanently;
- ``{"keytype":"CONFIG","subject":S,"magic":0}`` -> ``{"subject":S,
  "compatibilityLevel":L}`` (no subject: the global level); tombstone: unset;
- ``{"keytype":"MODE","subject":S,"magic":0}`` -> ``{"subject":S,"mode":M}``;
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S,
  "version":V}``: versions up to V are soft deleted;
- ``{"keytype":"CLEAR_SUBJECT",...}``: versions up to V are removed;
- ``{"keytype":"NOOP","magic":0}``: nothing (a marker).

:class:`RegistryState` applies records in the topic's order and never raises
for a record it cannot read (another registry's newer key types): it skips it.
Two registries writing at once are kept apart by one rule applied the same way
everywhere: a SCHEMA record that would give a version another id, or an id
another schema, is ignored (the first in the topic wins), and its writer,
reading its own record back, sees that it lost and tries again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs


@attrs.frozen
class Reference:
    """A schema reference: a name the schema uses, defined by a subject's version."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@attrs.frozen
class Version:
    """One version of a subject."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    @property
    def identity(self) -> tuple[str, str, tuple[Reference, ...]]:
        """What makes two registrations the same schema (and so the same id)."""
        return (self.schema_type, self.schema, self.references)


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def schema_record(version: Version) -> tuple[bytes, bytes]:
    key = {"keytype": "SCHEMA", "subject": version.subject, "version": version.version, "magic": 1}
    value: dict[str, Any] = {
        "subject": version.subject,
        "version": version.version,
        "id": version.id,
    }
    if version.schema_type != "AVRO":
        value["schemaType"] = version.schema_type
    if version.references:
        value["references"] = [ref.to_json() for ref in version.references]
    value["schema"] = version.schema
    value["deleted"] = version.deleted
    return _dumps(key), _dumps(value)


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def subject_key(keytype: str, subject: str | None) -> bytes:
    """The key of a CONFIG, MODE or DELETE_SUBJECT record (no subject: global)."""
    if subject is None:
        return _dumps({"keytype": keytype, "magic": 0})
    return _dumps({"keytype": keytype, "subject": subject, "magic": 0})


def config_record(subject: str | None, level: str | None) -> tuple[bytes, bytes | None]:
    value: dict[str, Any] = {} if subject is None else {"subject": subject}
    value["compatibilityLevel"] = level
    return subject_key("CONFIG", subject), None if level is None else _dumps(value)


def mode_record(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    value = {"mode": mode} if subject is None else {"subject": subject, "mode": mode}
    return subject_key("MODE", subject), None if mode is None else _dumps(value)


def delete_subject_record(subject: str, version: int) -> tuple[bytes, bytes]:
    return subject_key("DELETE_SUBJECT", subject), _dumps({"subject": subject, "version": version})


NOOP_KEY = _dumps({"keytype": "NOOP", "magic": 0})


class RegistryState:
    """Subjects, versions, ids, levels and modes, as the records so far say."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self._by_id: dict[int, dict[tuple[str, int], Version]] = {}
        self._ids: dict[tuple[str, str, tuple[Reference, ...]], int] = {}

    # -- reading

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        """The subject's versions, oldest first (soft-deleted ones with ``deleted``)."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def version(self, subject: str, number: int) -> Version | None:
        return self.subjects.get(subject, {}).get(number)

    def by_id(self, schema_id: int) -> list[Version]:
        """Every version (soft-deleted too) carrying ``schema_id``, by subject and version."""
        found = self._by_id.get(schema_id, {})
        return [found[key] for key in sorted(found)]

    def id_of(self, identity: tuple[str, str, tuple[Reference, ...]]) -> int | None:
        return self._ids.get(identity)

    def referenced_by(self, subject: str, number: int, *, deleted: bool = False) -> list[int]:
        """Ids of the schemas referring to the subject's version."""
        ids = {
            version.id
            for versions in self.subjects.values()
            for version in versions.values()
            if (deleted or not version.deleted)
            and any(r.subject == subject and r.version == number for r in version.references)
        }
        return sorted(ids)

    def all_versions(self) -> Iterator[Version]:
        for versions in self.subjects.values():
            yield from versions.values()

    # -- records

    def apply(self, key: bytes, value: bytes | None) -> bool:
        """Apply one record of the topic; False if it was skipped (unreadable, or lost)."""
        try:
            decoded_key = json.loads(key)
            decoded_value = None if value is None else json.loads(value)
            keytype = decoded_key["keytype"]
            if keytype == "SCHEMA":
                subject, number = str(decoded_key["subject"]), int(decoded_key["version"])
                if decoded_value is None:
                    return self._remove(subject, number)
                return self._put(_version(decoded_value))
            subject_name = decoded_key.get("subject")
            target = None if subject_name is None else str(subject_name)
            if keytype == "CONFIG":
                return self._set(self.configs, target, decoded_value, "compatibilityLevel")
            if keytype == "MODE":
                return self._set(self.modes, target, decoded_value, "mode")
            if keytype in ("DELETE_SUBJECT", "CLEAR_SUBJECT") and target is not None:
                upto = int(decoded_value["version"]) if decoded_value else 0
                for version in list(self.subjects.get(target, {}).values()):
                    if version.version <= upto:
                        if keytype == "CLEAR_SUBJECT":
                            self._remove(target, version.version)
                        else:
                            self._put(attrs.evolve(version, deleted=True))
                return True
        except (ValueError, KeyError, TypeError, AttributeError):
            return False
        return bool(keytype == "NOOP")

    @staticmethod
    def _set(table: dict[str | None, str], target: str | None, value: Any, field: str) -> bool:
        if value is None:
            table.pop(target, None)
        else:
            table[target] = str(value[field])
        return True

    def _put(self, version: Version) -> bool:
        key = (version.subject, version.version)
        existing = self.subjects.get(version.subject, {}).get(version.version)
        if existing is not None and existing.id != version.id:
            return False
        others = self._by_id.get(version.id, {})
        if any(other.identity != version.identity for other in others.values()):
            return False
        self.subjects.setdefault(version.subject, {})[version.version] = version
        self._by_id.setdefault(version.id, {})[key] = version
        self._ids.setdefault(version.identity, version.id)
        self.max_id = max(self.max_id, version.id)
        return True

    def _remove(self, subject: str, number: int) -> bool:
        version = self.subjects.get(subject, {}).pop(number, None)
        if version is None:
            return True
        if not self.subjects[subject]:
            del self.subjects[subject]
        carrying = self._by_id.get(version.id, {})
        carrying.pop((subject, number), None)
        if not carrying:
            self._by_id.pop(version.id, None)
            self._ids.pop(version.identity, None)
        return True


def _version(value: dict[str, Any]) -> Version:
    references = tuple(
        Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
        for r in value.get("references") or ()
    )
    return Version(
        subject=str(value["subject"]),
        version=int(value["version"]),
        id=int(value["id"]),
        schema=str(value["schema"]),
        schema_type=str(value.get("schemaType") or "AVRO"),
        references=references,
        deleted=bool(value.get("deleted", False)),
    )
