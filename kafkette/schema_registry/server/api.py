""":class:`Api`: Confluent's REST API v1 over the registry's state, without I/O.

:meth:`Api.decide` reads the state
(:class:`~kafkette.schema_registry.server.state.RegistryState`) and decides
each request: an answer (:class:`Response`), or records to write and the answer
to give once they are applied (:class:`Write`). It raises :class:`RestError`
for Confluent's error answers: ``{"error_code": 40401, "message": "Subject 'x'
not found."}`` (404), 40402 version, 40403 schema, 40404/40405 subject (not)
soft deleted, 40406/40407 version (not) soft deleted, 40408/40409 subject
without its own level or mode, 409/40901 incompatible, 422 with 42201 invalid
schema, 42202 invalid version, 42203 invalid level, 42204 invalid mode, 42205
operation not permitted, 42206 referenced, 42207 id mismatch, 42209 too large;
and Jersey's for unknown paths (404) and methods (405), and 400 for a body that
is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs

from kafkette.schema_registry import compatibility
from kafkette.schema_registry.server.state import (
    Reference,
    RegistryState,
    Version,
    config_record,
    delete_subject_record,
    mode_record,
    schema_key,
    schema_record,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
"""The content type of every answer, as Confluent's registry sends it."""

MAX_VERSION = 2**31 - 1
MAX_RECORD_BYTES = 1_000_000
"""The largest schema record written: Kafka's default max.message.bytes (1,048,588)
less room for the batch; Confluent answers 42209 when the topic refuses a record."""
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
LEVEL_MESSAGE = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, "
    "backward_transitive, forward_transitive, and full_transitive"
)
Record = tuple[bytes, "bytes | None"]


class Response(NamedTuple):
    """An answer: the HTTP status, the JSON body and its content type."""

    status: int
    body: bytes
    content_type: str


def ok(value: Any) -> Response:
    return Response(200, json.dumps(value).encode(), CONTENT_TYPE)


class RestError(Exception):
    """An error answer: HTTP status, Confluent's error code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self) -> Response:
        body = {"error_code": self.code, "message": self.message}
        return Response(self.status, json.dumps(body).encode(), CONTENT_TYPE)


def subject_not_found(subject: str) -> RestError:
    return RestError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RestError:
    return RestError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RestError:
    message = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RestError(404, 40403, message)


def invalid_schema(message: str) -> RestError:
    return RestError(422, 42201, message)


@attrs.frozen
class Write:
    """Records to append, and the answer once they are applied.

    ``expect`` is the version the first record registers: if another registry's
    record took that place first, the decision is made again."""

    records: list[Record]
    answer: Response
    expect: Version | None = None


@attrs.frozen
class Request:
    method: str
    parts: tuple[str, ...]
    query: Mapping[str, str]
    body: bytes

    def flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except (ValueError, RecursionError) as error:
            raise RestError(400, 400, f"Unrecognized JSON body: {error}") from None


class Api:
    """The REST API over a state, without I/O: each request to a decision."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state

    # -- routing

    def decide(self, request: Request) -> Response | Write:
        parts, method = request.parts, request.method
        routes: dict[tuple[str, ...], Any] = {}
        head = parts[0] if parts else ""
        n = len(parts)
        if n == 0:
            routes = {("GET",): lambda: ok({})}
        elif head == "subjects":
            if n == 1:
                routes = {("GET",): lambda: self.list_subjects(request)}
            elif n == 2:
                routes = {
                    ("POST",): lambda: self.lookup(request, parts[1]),
                    ("DELETE",): lambda: self.delete_subject(request, parts[1]),
                }
            elif n == 3 and parts[2] == "versions":
                routes = {
                    ("GET",): lambda: self.list_versions(request, parts[1]),
                    ("POST",): lambda: self.register(request, parts[1]),
                }
            elif n == 4 and parts[2] == "versions":
                routes = {
                    ("GET",): lambda: ok(self.version_json(self.find(request, *parts[1:4:2]))),
                    ("DELETE",): lambda: self.delete_version(request, parts[1], parts[3]),
                }
            elif n == 5 and parts[2] == "versions" and parts[4] == "schema":
                routes = {("GET",): lambda: self.raw(self.find(request, parts[1], parts[3]))}
            elif n == 5 and parts[2] == "versions" and parts[4] == "referencedby":
                routes = {("GET",): lambda: self.referenced_by(request, parts[1], parts[3])}
        elif parts == ("contexts",):
            routes = {("GET",): lambda: ok(["."])}
        elif parts == ("schemas",):
            routes = {("GET",): lambda: self.list_schemas(request)}
        elif head == "schemas" and n >= 2:
            if parts[1:] == ("types",):
                routes = {("GET",): lambda: ok(list(compatibility.SCHEMA_TYPES))}
            elif n in (3, 4) and parts[1] == "ids":
                tail = parts[3] if n == 4 else ""
                if tail in ("", "schema", "subjects", "versions"):
                    routes = {("GET",): lambda: self.by_id(request, parts[2], tail)}
        elif head == "config" and n <= 2:
            subject = parts[1] if n == 2 else None
            routes = {
                ("GET",): lambda: self.get_config(request, subject),
                ("PUT",): lambda: self.put_config(request, subject),
                ("DELETE",): lambda: self.delete_config(subject),
            }
        elif head == "mode" and n <= 2:
            subject = parts[1] if n == 2 else None
            routes = {
                ("GET",): lambda: self.get_mode(request, subject),
                ("PUT",): lambda: self.put_mode(request, subject),
            }
            if subject is not None:
                routes[("DELETE",)] = lambda: self.delete_mode(subject)
        elif head == "compatibility" and n in (4, 5) and parts[1:4:2] == ("subjects", "versions"):
            version = parts[4] if n == 5 else None
            routes = {("POST",): lambda: self.test_compatibility(request, parts[2], version)}
        if not routes:
            raise RestError(404, 404, "HTTP 404 Not Found")
        handler = routes.get((method,))
        if handler is None:
            raise RestError(405, 405, "HTTP 405 Method Not Allowed")
        result: Response | Write = handler()
        return result

    # -- helpers

    def find(self, request: Request, subject: str, version_text: str) -> Version:
        """The version a path names (``latest`` or -1: the newest), Confluent's errors."""
        deleted = request.flag("deleted")
        number = parse_version(version_text)
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:  # none, or only soft-deleted ones: as Confluent, the subject
            raise subject_not_found(subject)
        if number == -1:
            return versions[-1]
        found = self.state.version(subject, number)
        if found is None or (found.deleted and not deleted):
            raise version_not_found(number)
        return found

    @staticmethod
    def version_json(version: Version) -> dict[str, Any]:
        body: dict[str, Any] = {
            "subject": version.subject,
            "version": version.version,
            "id": version.id,
        }
        if version.schema_type != "AVRO":
            body["schemaType"] = version.schema_type
        if version.references:
            body["references"] = [ref.to_json() for ref in version.references]
        body["schema"] = version.schema
        return body

    @staticmethod
    def raw(version: Version) -> Response:
        return Response(200, version.schema.encode(), CONTENT_TYPE)

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.configs:
            return self.state.configs[subject]
        return self.state.configs.get(None, "BACKWARD")

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def check_writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RestError(422, 42205, f"Subject {subject} is in read-only mode")

    def parse(self, body: Any) -> tuple[compatibility.ParsedSchema, tuple[Reference, ...]]:
        """The schema of a register, lookup or compatibility body (else 422)."""
        if not isinstance(body, dict):
            raise invalid_schema("Invalid schema: the body is not a JSON object")
        text = body.get("schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(text, str) or not isinstance(schema_type, str):
            raise RestError(422, 42201, "Empty schema")
        if schema_type not in compatibility.SCHEMA_TYPES:
            raise invalid_schema(f"Invalid schema type {schema_type}")
        raw_references = body.get("references") or []
        if not isinstance(raw_references, list):
            raise invalid_schema("Invalid schema references")
        references: list[Reference] = []
        resolved: list[compatibility.ParsedSchema] = []
        for raw in raw_references:
            try:
                reference = Reference(str(raw["name"]), str(raw["subject"]), int(raw["version"]))
            except (KeyError, TypeError, ValueError):
                raise invalid_schema(f"Invalid schema reference {raw}") from None
            target = self.state.version(reference.subject, reference.version)
            if target is None or target.deleted:
                raise invalid_schema(
                    f"Invalid schema: reference {reference.name} to {reference.subject} "
                    f"version {reference.version} not found"
                )
            resolved.append(self.parsed(target))
            references.append(reference)
        try:
            parsed = compatibility.parse(schema_type, text, resolved)
        except compatibility.InvalidSchema as error:
            raise invalid_schema(str(error)) from None
        return parsed, tuple(references)

    def parsed(self, version: Version, depth: int = 0) -> compatibility.ParsedSchema:
        """A stored version parsed with its references, leniently: Confluent reads its
        store without the checks of a new schema (another registry may have stored it)."""
        resolved = []
        for ref in version.references if depth < 32 else ():
            target = self.state.version(ref.subject, ref.version)
            if target is not None:
                resolved.append(self.parsed(target, depth + 1))
        try:
            return compatibility.parse(version.schema_type, version.schema, resolved, strict=False)
        except compatibility.InvalidSchema as error:  # another registry stored it
            raise RestError(
                422,
                42201,
                f"Schema {version.subject} version {version.version} in the store cannot "
                f"be read: {error}",
            ) from None

    # -- subjects and versions

    def list_subjects(self, request: Request) -> Response:
        deleted = request.flag("deleted")
        prefix = request.query.get("subjectPrefix", "")
        names = [
            s
            for s in sorted(self.state.subjects)
            if s.startswith(prefix) and self.state.versions(s, deleted=deleted)
        ]
        return ok(names)

    def list_versions(self, request: Request, subject: str) -> Response:
        versions = self.state.versions(subject, deleted=request.flag("deleted"))
        if not versions:
            raise subject_not_found(subject)
        return ok([v.version for v in versions])

    def register(self, request: Request, subject: str) -> Response | Write:
        body = request.json()
        parsed, references = self.parse(body)
        self.check_writable(subject)
        identity = (parsed.schema_type, parsed.canonical, references)
        live = self.state.versions(subject)
        for version in live:
            if version.identity == identity:
                return ok({"id": version.id})
        mode = self.mode(subject)
        requested_id = body.get("id") if mode == "IMPORT" else None
        if mode != "IMPORT":
            level = self.level(subject)
            previous = [self.parsed(v) for v in live]
            problems = compatibility.check(level, parsed, previous)
            if problems:
                raise RestError(
                    409,
                    40901,
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: {problems}',
                )
        existing = self.state.id_of(identity)
        if isinstance(requested_id, int) and requested_id > 0:
            if existing is not None and existing != requested_id:
                raise RestError(422, 42207, f"Schema already registered with id {existing}")
            schema_id = requested_id
        else:
            schema_id = existing if existing is not None else self.state.max_id + 1
        everything = self.state.versions(subject, deleted=True)
        number = everything[-1].version + 1 if everything else 1
        requested_version = body.get("version")
        if mode == "IMPORT" and isinstance(requested_version, int) and requested_version > 0:
            number = requested_version
        version = Version(
            subject, number, schema_id, parsed.canonical, parsed.schema_type, references
        )
        record = schema_record(version)
        if len(record[0]) + len(record[1]) > MAX_RECORD_BYTES:
            raise RestError(422, 42209, "Register operation failed because schema is too large")
        # as Confluent: soft-deleted earlier versions of this id go for good (unless referred to)
        tombstones: list[Record] = [
            (schema_key(subject, old.version), None)
            for old in everything
            if old.deleted
            and old.id == schema_id
            and not self.state.referenced_by(subject, old.version, deleted=True)
        ]
        return Write([*tombstones, record], ok({"id": schema_id}), expect=version)

    def lookup(self, request: Request, subject: str) -> Response:
        parsed, references = self.parse(request.json())
        identity = (parsed.schema_type, parsed.canonical, references)
        versions = self.state.versions(subject, deleted=request.flag("deleted"))
        for version in reversed(versions):
            if version.identity == identity:
                return ok(self.version_json(version))
        if not versions:
            raise subject_not_found(subject)
        raise schema_not_found()

    def delete_version(self, request: Request, subject: str, version_text: str) -> Write:
        permanent = request.flag("permanent")
        self.check_writable(subject)
        number = parse_version(version_text)
        if not self.state.subjects.get(subject):
            raise subject_not_found(subject)
        if number == -1:
            live = self.state.versions(subject)
            if not live:
                raise subject_not_found(subject)
            found: Version | None = live[-1]
        else:
            found = self.state.version(subject, number)
        if found is None:
            raise version_not_found(number)
        if found.deleted and not permanent:
            raise RestError(
                404,
                40406,
                f"Subject '{subject}' Version {found.version} was soft deleted."
                "Set permanent=true to delete permanently",
            )
        if permanent and not found.deleted:
            raise RestError(
                404,
                40407,
                f"Subject '{subject}' Version {found.version} was not deleted "
                "first before being permanently deleted",
            )
        if self.state.referenced_by(subject, found.version, deleted=permanent):
            raise RestError(
                422,
                42206,
                f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                f"subject={subject},version={found.version}}}.",
            )
        answer = ok(found.version)
        if not permanent:
            return Write([schema_record(attrs.evolve(found, deleted=True))], answer)
        records: list[Record] = [(schema_key(subject, found.version), None)]
        if len(self.state.versions(subject, deleted=True)) == 1:
            records += self.forget_subject_settings(subject)
        return Write(records, answer)

    def forget_subject_settings(self, subject: str) -> list[Record]:
        records: list[Record] = []
        if subject in self.state.modes:
            records.append(mode_record(subject, None))
        if subject in self.state.configs:
            records.append(config_record(subject, None))
        return records

    def delete_subject(self, request: Request, subject: str) -> Write:
        permanent = request.flag("permanent")
        self.check_writable(subject)
        every = self.state.versions(subject, deleted=True)
        if not every:
            raise subject_not_found(subject)
        live = [v for v in every if not v.deleted]
        if not permanent and not live:
            raise RestError(
                404,
                40404,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        if permanent and live:
            raise RestError(
                404,
                40405,
                f"Subject '{subject}' was not deleted first before being permanently deleted",
            )
        targets = every if permanent else live
        for version in targets:
            users = [
                v
                for v in self.state.all_versions()
                if v.subject != subject
                and (permanent or not v.deleted)
                and any(r.subject == subject and r.version == version.version for r in v.references)
            ]
            if users:
                raise RestError(
                    422,
                    42206,
                    "One or more references exist to the schema {magic=1,keytype=SCHEMA,"
                    f"subject={subject},version={version.version}}}.",
                )
        answer = ok([v.version for v in targets])
        if not permanent:
            return Write([delete_subject_record(subject, targets[-1].version)], answer)
        records: list[Record] = [(schema_key(subject, v.version), None) for v in reversed(every)]
        return Write(records + self.forget_subject_settings(subject), answer)

    def referenced_by(self, request: Request, subject: str, version_text: str) -> Response:
        found = self.find(request, subject, version_text)
        return ok(self.state.referenced_by(subject, found.version))

    # -- schemas by id

    def list_schemas(self, request: Request) -> Response:
        """Every version's schema (``subjectPrefix``, ``deleted``, ``latestOnly``), by
        subject and version, as Confluent's GET /schemas."""
        prefix = request.query.get("subjectPrefix", "")
        deleted, latest_only = request.flag("deleted"), request.flag("latestOnly")
        found = []
        for subject in sorted(self.state.subjects):
            if subject.startswith(prefix):
                versions = self.state.versions(subject, deleted=deleted)
                found += versions[-1:] if latest_only else versions
        return ok([self.version_json(version) for version in found])

    def by_id(self, request: Request, id_text: str, tail: str) -> Response:
        try:
            schema_id = int(id_text)
        except ValueError:
            raise RestError(404, 404, "HTTP 404 Not Found") from None
        carrying = self.state.by_id(schema_id)
        subject = request.query.get("subject")
        if subject:
            carrying = [v for v in carrying if v.subject == subject] or carrying
        if not carrying:
            raise schema_not_found(schema_id)
        first = carrying[0]
        if tail == "schema":
            return self.raw(first)
        if tail == "subjects":
            deleted = request.flag("deleted")
            return ok(sorted({v.subject for v in carrying if deleted or not v.deleted}))
        if tail == "versions":
            deleted = request.flag("deleted")
            return ok(
                [
                    {"subject": v.subject, "version": v.version}
                    for v in carrying
                    if deleted or not v.deleted
                ]
            )
        body: dict[str, Any] = {}
        if first.schema_type != "AVRO":
            body["schemaType"] = first.schema_type
        if first.references:
            body["references"] = [ref.to_json() for ref in first.references]
        body["schema"] = first.schema
        return ok(body)

    # -- config and mode

    def get_config(self, request: Request, subject: str | None) -> Response:
        if subject is None:
            return ok({"compatibilityLevel": self.level(None)})
        if subject not in self.state.configs and not request.flag("defaultToGlobal"):
            raise RestError(
                404,
                40408,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return ok({"compatibilityLevel": self.level(subject)})

    def put_config(self, request: Request, subject: str | None) -> Response | Write:
        body = request.json()
        level = body.get("compatibility") if isinstance(body, dict) else None
        if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
            raise RestError(422, 42203, LEVEL_MESSAGE)
        if subject is not None:
            self.check_writable(subject)
        level = level.upper()
        return Write([config_record(subject, level)], ok({"compatibility": level}))

    def delete_config(self, subject: str | None) -> Response | Write:
        """Unset a level; the answer is the level it was (global: back to BACKWARD)."""
        if subject is None:
            answer = ok({"compatibilityLevel": self.level(None)})
            if None not in self.state.configs:
                return answer
            return Write([config_record(None, None)], answer)
        self.check_writable(subject)
        if subject not in self.state.configs:
            raise subject_not_found(subject)
        answer = ok({"compatibilityLevel": self.state.configs[subject]})
        return Write([config_record(subject, None)], answer)

    def get_mode(self, request: Request, subject: str | None) -> Response:
        if subject is None:
            return ok({"mode": self.mode(None)})
        if subject not in self.state.modes and not request.flag("defaultToGlobal"):
            raise RestError(
                404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
            )
        return ok({"mode": self.mode(subject)})

    def put_mode(self, request: Request, subject: str | None) -> Write:
        body = request.json()
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RestError(
                422,
                42204,
                "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.",
            )
        mode = mode.upper()
        scope = self.state.versions(subject) if subject else list(self.state.all_versions())
        if mode == "IMPORT" and scope and not request.flag("force"):
            raise RestError(
                422,
                42205,
                "Cannot import since found existing subjects",
            )
        return Write([mode_record(subject, mode)], ok({"mode": mode}))

    def delete_mode(self, subject: str) -> Write:
        if subject not in self.state.modes:
            raise subject_not_found(subject)
        answer = ok({"mode": self.state.modes[subject]})
        return Write([mode_record(subject, None)], answer)

    # -- compatibility

    def test_compatibility(
        self, request: Request, subject: str, version_text: str | None
    ) -> Response:
        parsed, _ = self.parse(request.json())
        level = self.level(subject)
        if version_text is None:
            previous = [self.parsed(v) for v in self.state.versions(subject)]
        else:
            previous = [self.parsed(self.find(request, subject, version_text))]
        problems = compatibility.check(level, parsed, previous)
        body: dict[str, Any] = {"is_compatible": not problems}
        if request.flag("verbose"):
            body["messages"] = problems
        return ok(body)


def parse_version(text: str) -> int:
    """A version of a path: 1..2^31-1, or ``latest`` and -1 (both: -1)."""
    if text == "latest":
        return -1
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number == -1 or 1 <= number <= MAX_VERSION:
        return number
    raise RestError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )
